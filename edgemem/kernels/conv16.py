"""16x8 kernels (int16 activations, int8 weights) of CONV_2D, DEPTHWISE_CONV_2D, FULLY_CONNECTED, TRANSPOSE_CONV
and BATCH_MATMUL, with TFLite Micro's reference arithmetic (reference_integer_ops/conv.h, depthwise_conv.h,
fully_connected.h, transpose_conv.h, reference_ops/batch_matmul.h), as TVM tensor expressions.

Two accumulator widths, as TFLM picks them:

- int64 (an int64 or int16 bias, or none): the sum of int16 x int8 products in int64, the bias, then the int64
  overload of MultiplyByQuantizedMultiplier: the Q0.31 multiplier rounded to 16 bits
  (``(m + 2^15) >> 16``, or 0x7FFF from 0x7FFF0000 up), ``(acc * m16 + 2^(14 - shift)) >> (15 - shift)``, the
  result truncated to int32. The 16-bit multiplier and the total shift are computed here at build time
  (``reduce_multipliers``) and passed as per-channel constants.
- int32 (CONV_2D and FULLY_CONNECTED with an int32 bias, or none and quantized_bias_type int32): the sum, bias
  and requantization of the int8 kernels (double-rounding MultiplyByQuantizedMultiplier). TFLM's int32 sum may
  wrap; it is computed here in int64 and truncated, the same bits without the undefined behaviour.

Every reduction is computed at its output element (int8_ops._scalar_accumulator): a scalar accumulator, no
scratch RAM (TFLM's TRANSPOSE_CONV scatters into an int64 scratch of the output's size; here each output
gathers its contributions instead, which for integers is the same sum).
"""

from __future__ import annotations

import numpy as np
from tvm import te, tirx

from .fixed_point import rounding_divide_by_pot, saturating_rounding_doubling_high_mul
from .int8_ops import _scalar_accumulator

INT16_MIN, INT16_MAX = -32768, 32767


def reduce_multipliers(multipliers, shifts) -> tuple[np.ndarray, np.ndarray]:
    """TFLM's int64 MultiplyByQuantizedMultiplier, host half: (16-bit multipliers int32, total shifts int32)
    from Q0.31 multipliers and their shifts (TFLM's exponent convention: > 0 is a left shift)."""
    m = np.asarray(multipliers, np.int64).reshape(-1)
    s = np.asarray(shifts, np.int64).reshape(-1)
    reduced = np.where(m < 0x7FFF0000, (m + (1 << 15)) >> 16, 0x7FFF)
    return reduced.astype(np.int32), (15 - s).astype(np.int32)


def _i64(v):
    return tirx.Cast("int64", v) if not isinstance(v, int) else tirx.const(v, "int64")


def mbqm64(acc, reduced, total_shift):
    """The int64 MultiplyByQuantizedMultiplier on an int64 ``acc``: int32 result (truncated as TFLM's C)."""
    ts = _i64(total_shift)
    one = tirx.const(1, "int64")
    return tirx.Cast("int32", (acc * _i64(reduced) + (one << (ts - one))) >> ts)


def wrapped_offsets(bias, reduced, total_shift) -> tuple[np.ndarray, np.ndarray]:
    """For transpose_conv's ``wrapping`` form: per channel K = (bias * reduced + 2^(total_shift - 1)) mod 2^64
    (signed) split as K = hi * 2^total_shift + lo, 0 <= lo < 2^total_shift; returns (lo, hi) int64 [O]."""
    lo, hi = [], []
    for b, m, ts in zip(np.asarray(bias).reshape(-1), np.asarray(reduced).reshape(-1), np.asarray(total_shift).reshape(-1)):
        k = (int(b) * int(m) + (1 << (int(ts) - 1))) % (1 << 64)
        k -= (1 << 64) if k >= 1 << 63 else 0
        hi.append(k >> int(ts))
        lo.append(k - (hi[-1] << int(ts)))
    return np.array(lo, np.int64), np.array(hi, np.int64)


def mbqm64_wrapped(acc, lo, hi, total_shift):
    """TFLM's int64 MultiplyByQuantizedMultiplier of acc + bias when that bias (an int32 one TFLM reads as int64)
    leaves the +-2^47 it assumes: its compiled code wraps the sum and the product modulo 2^64, which C leaves
    undefined. Here with ``acc * reduced`` (small) and the constants of wrapped_offsets: the exact quotient
    q = ((acc * reduced + lo) >> ts) + hi is congruent modulo 2^(64 - ts) to TFLM's wrapped one, which lies in
    [-2^(63 - ts), 2^(63 - ts)): q sign-extended from 64 - ts bits, then truncated to int32 as TFLM does."""
    ts = _i64(total_shift)
    one = tirx.const(1, "int64")
    q = ((acc + lo) >> ts) + hi
    half = one << (tirx.const(63, "int64") - ts)
    return tirx.Cast("int32", ((q + half) & ((half << one) - one)) - half)


def mbqm32(acc64, multiplier, shift):
    """The int32 (double-rounding) MultiplyByQuantizedMultiplier of ``acc64`` truncated to int32 first (TFLM's
    int32 accumulator); the left shift is done in int64 and truncated too (TFLM's int32 product wraps)."""
    acc32 = tirx.Cast("int32", acc64)
    zero = tirx.const(0, "int32")
    left = tirx.Max(shift, zero)
    right = tirx.Max(zero - shift, zero)
    shifted = tirx.Cast("int32", tirx.Cast("int64", acc32) * (tirx.const(1, "int64") << tirx.Cast("int64", left)))
    return rounding_divide_by_pot(saturating_rounding_doubling_high_mul(shifted, multiplier), right)


def _clamp16(v, act_min: int, act_max: int):
    return tirx.Cast("int16", tirx.Min(tirx.Max(v, tirx.const(act_min, "int32")), tirx.const(act_max, "int32")))


def _requant_params(channels: int):
    """Per-channel requantization parameters: (multiplier, shift) both int32 [channels]; for the int64 path the
    16-bit multiplier and the total shift (reduce_multipliers), else TFLM's Q0.31 multiplier and shift."""
    return te.placeholder((channels,), "int32", name="mult"), te.placeholder((channels,), "int32", name="shift")


def _requant(acc64, mult, shift, wide: bool):
    return mbqm64(acc64, mult, shift) if wide else mbqm32(acc64, mult, shift)


def _in_bounds(index, extent):
    return tirx.all(index >= 0, index < extent)


def _product(a, b):
    """int16 x int8 in int32 (at most 2^22 in magnitude), widened to int64 for the sum."""
    return tirx.Cast("int64", a.astype("int32") * b.astype("int32"))


def conv2d(x_shape, w_shape, out_shape, stride, dilation, pad, bias_dtype: str | None, wide: bool, act):
    """CONV_2D 16x8: x [N, H, W, C] int16, weights [O, KH, KW, C / groups] int8 (TFLite's layout), optional bias
    [O] (``bias_dtype`` int64 or int32), per-channel mult/shift [O], out [N, OH, OW, O] int16. TFLM's int16 conv
    ignores every zero point (input, weights, output). ``act`` = (act_min, act_max); ``wide``: int64 path."""
    n, h, w, c = (int(d) for d in x_shape)
    o, kh, kw, cg = (int(d) for d in w_shape)
    groups = c // cg
    per_group = o // groups
    x = te.placeholder((n, h, w, c), "int16", name="x")
    wt = te.placeholder((o, kh, kw, cg), "int8", name="w")
    bias = te.placeholder((o,), bias_dtype, name="bias") if bias_dtype else None
    mult, shift = _requant_params(o)
    rh, rw, rc = te.reduce_axis((0, kh), "rh"), te.reduce_axis((0, kw), "rw"), te.reduce_axis((0, cg), "rc")
    sh, sw = stride
    dh, dw = dilation
    pt, pl = pad

    def acc_fn(b, i, j, oc):
        ih = i * sh + rh * dh - pt
        iw = j * sw + rw * dw - pl
        ic = rc + (oc // per_group) * cg if groups > 1 else rc
        term = _product(x[b, ih, iw, ic], wt[oc, rh, rw, rc])
        return te.sum(tirx.if_then_else(tirx.all(_in_bounds(ih, h), _in_bounds(iw, w)), term, tirx.const(0, "int64")),
                      axis=[rh, rw, rc])

    acc = te.compute(tuple(int(d) for d in out_shape), acc_fn, name="acc")

    def out_fn(b, i, j, oc):
        v = acc[b, i, j, oc] + (tirx.Cast("int64", bias[oc]) if bias is not None else tirx.const(0, "int64"))
        return _clamp16(_requant(v, mult[oc], shift[oc], wide), *act)

    out = te.compute(tuple(int(d) for d in out_shape), out_fn, name="out")
    params = [x, wt] + ([bias] if bias is not None else []) + [mult, shift, out]
    return _scalar_accumulator(te.create_prim_func(params), ["acc"])


def depthwise_conv2d(x_shape, w_shape, out_shape, stride, dilation, pad, has_bias: bool, act, wrapping: bool = False):
    """DEPTHWISE_CONV_2D 16x8 (int64 accumulator, int64 bias: TFLM's only int16 form): x [N, H, W, C] int16,
    weights [KH, KW, C * M] int8, optional bias [C * M] int64, mult/shift [C * M] (reduce_multipliers), out
    [N, OH, OW, C * M]. Output channel oc reads input channel oc // M. Zero points are ignored, as in TFLM.
    ``wrapping`` (a bias whose sum or product leaves int64 in TFLM): the bias parameter is replaced by the int64
    lo, hi [C * M] of wrapped_offsets, and the requantization is mbqm64_wrapped (as transpose_conv's)."""
    n, h, w, c = (int(d) for d in x_shape)
    kh, kw, oct_ = (int(d) for d in w_shape)
    m = oct_ // c
    x = te.placeholder((n, h, w, c), "int16", name="x")
    wt = te.placeholder((kh, kw, oct_), "int8", name="w")
    bias = te.placeholder((oct_,), "int64", name="bias") if has_bias and not wrapping else None
    lo, hi = (te.placeholder((oct_,), "int64", name=n) for n in ("lo", "hi")) if wrapping else (None, None)
    mult, shift = _requant_params(oct_)
    rh, rw = te.reduce_axis((0, kh), "rh"), te.reduce_axis((0, kw), "rw")
    sh, sw = stride
    dh, dw = dilation
    pt, pl = pad

    def acc_fn(b, i, j, oc):
        ih = i * sh + rh * dh - pt
        iw = j * sw + rw * dw - pl
        ic = oc // m if m > 1 else oc
        term = _product(x[b, ih, iw, ic], wt[rh, rw, oc])
        return te.sum(tirx.if_then_else(tirx.all(_in_bounds(ih, h), _in_bounds(iw, w)), term, tirx.const(0, "int64")),
                      axis=[rh, rw])

    acc = te.compute(tuple(int(d) for d in out_shape), acc_fn, name="acc")

    def out_fn(b, i, j, oc):
        if wrapping:
            return _clamp16(mbqm64_wrapped(acc[b, i, j, oc] * _i64(mult[oc]), lo[oc], hi[oc], shift[oc]), *act)
        v = acc[b, i, j, oc] + (bias[oc] if bias is not None else tirx.const(0, "int64"))
        return _clamp16(mbqm64(v, mult[oc], shift[oc]), *act)

    out = te.compute(tuple(int(d) for d in out_shape), out_fn, name="out")
    params = [x, wt] + ([bias] if bias is not None else []) + ([lo, hi] if wrapping else []) + [mult, shift, out]
    return _scalar_accumulator(te.create_prim_func(params), ["acc"])


def fully_connected(batches: int, depth: int, units: int, bias_dtype: str | None, wide: bool, per_channel: bool,
                    in_zp: int, w_zp: int, out_zp: int, act, wrapping: bool = False):
    """FULLY_CONNECTED 16x8: x [batches, depth] int16, weights [units, depth] int8, optional bias [units]
    (int64 or int32), mult/shift ([units] per channel, [1] per tensor), out [batches, units] int16.
    TFLM's: sum of w * (x - in_zp) (per tensor: (w - w_zp) * (x - in_zp)), bias, MultiplyByQuantizedMultiplier,
    plus the output zero point, clamped to ``act``. ``wrapping`` (int64 path, a bias whose sum or product leaves
    int64 in TFLM): the bias parameter is replaced by the int64 lo, hi [units] of wrapped_offsets, and the
    requantization is mbqm64_wrapped (as transpose_conv's)."""
    x = te.placeholder((batches, depth), "int16", name="x")
    wt = te.placeholder((units, depth), "int8", name="w")
    bias = te.placeholder((units,), bias_dtype, name="bias") if bias_dtype and not wrapping else None
    lo, hi = (te.placeholder((units,), "int64", name=n) for n in ("lo", "hi")) if wrapping else (None, None)
    mult, shift = _requant_params(units if per_channel else 1)
    rk = te.reduce_axis((0, depth), "rk")
    wzp = 0 if per_channel else int(w_zp)

    def acc_fn(b, u):
        wv = wt[u, rk].astype("int32") - wzp if wzp else wt[u, rk].astype("int32")
        xv = x[b, rk].astype("int32") - int(in_zp) if in_zp else x[b, rk].astype("int32")
        return te.sum(tirx.Cast("int64", wv * xv), axis=rk)

    acc = te.compute((batches, units), acc_fn, name="acc")

    def out_fn(b, u):
        ch = u if per_channel else 0
        if wrapping:
            return _clamp16(mbqm64_wrapped(acc[b, u] * _i64(mult[ch]), lo[u], hi[u], shift[ch]) + int(out_zp), *act)
        v = acc[b, u] + (tirx.Cast("int64", bias[u]) if bias is not None else tirx.const(0, "int64"))
        return _clamp16(_requant(v, mult[ch], shift[ch], wide) + int(out_zp), *act)

    out = te.compute((batches, units), out_fn, name="out")
    params = [x, wt] + ([bias] if bias is not None else []) + ([lo, hi] if wrapping else []) + [mult, shift, out]
    return _scalar_accumulator(te.create_prim_func(params), ["acc"])


def transpose_conv(x_shape, w_shape, out_shape, stride, pad, bias_dtype: str | None, act, wrapping: bool = False):
    """TRANSPOSE_CONV 16x8: x [N, H, W, I] int16, weights [O, KH, KW, I] int8, optional bias [O] (int64, or
    int16 which TFLM widens to int64), mult/shift [O] (reduce_multipliers), out [N, OH, OW, O] int16. The int64
    sum of x * w over every (input pixel, filter tap) that lands on the output element (gathered as
    kernels/matmul.transpose_conv does), bias, int64 MultiplyByQuantizedMultiplier, clamp; no zero points.
    ``wrapping`` (a bias whose sum or product leaves int64 in TFLM): the bias parameter is replaced by the int64
    lo, hi [O] of wrapped_offsets, and the requantization is mbqm64_wrapped."""
    n, h, w, c = (int(d) for d in x_shape)
    o, kh, kw, _ = (int(d) for d in w_shape)
    out_shape = tuple(int(d) for d in out_shape)
    sh, sw = stride
    ph, pw = pad
    x = te.placeholder((n, h, w, c), "int16", name="x")
    wt = te.placeholder((o, kh, kw, c), "int8", name="w")
    bias = te.placeholder((o,), bias_dtype, name="bias") if bias_dtype and not wrapping else None
    lo, hi = (te.placeholder((o,), "int64", name=n) for n in ("lo", "hi")) if wrapping else (None, None)
    mult, shift = _requant_params(o)
    jh, jw = -(-kh // sh), -(-kw // sw)
    ry, rx, rc = te.reduce_axis((0, jh), "ry"), te.reduce_axis((0, jw), "rx"), te.reduce_axis((0, c), "rc")

    def acc_fn(b, oy, ox, oc):
        fy = (oy + ph) % sh + sh * ry
        fx = (ox + pw) % sw + sw * rx
        iy, ix = (oy + ph - fy) // sh, (ox + pw - fx) // sw  # exact divisions
        ok = tirx.all(fy < kh, fx < kw, iy >= 0, ix >= 0, iy < h, ix < w)
        term = _product(x[b, iy, ix, rc], wt[oc, fy, fx, rc])
        return te.sum(tirx.if_then_else(ok, term, tirx.const(0, "int64")), axis=[ry, rx, rc])

    acc = te.compute(out_shape, acc_fn, name="acc")

    def out_fn(b, oy, ox, oc):
        if wrapping:
            return _clamp16(mbqm64_wrapped(acc[b, oy, ox, oc] * _i64(mult[oc]), lo[oc], hi[oc], shift[oc]), *act)
        v = acc[b, oy, ox, oc] + (tirx.Cast("int64", bias[oc]) if bias is not None else tirx.const(0, "int64"))
        return _clamp16(mbqm64(v, mult[oc], shift[oc]), *act)

    out = te.compute(out_shape, out_fn, name="out")
    params = [x, wt] + ([bias] if bias is not None else []) + ([lo, hi] if wrapping else []) + [mult, shift, out]
    return _scalar_accumulator(te.create_prim_func(params), ["acc"])


def batch_matmul(lhs_shape, rhs_shape, adj_x: bool, adj_y: bool, reduced: int, total_shift: int):
    """BATCH_MATMUL 16x8 (TFLM's BatchMatMul<int16_t, int64_t>): both operands int16 (zero points 0, TFLM
    requires it), int64 sum, int64 MultiplyByQuantizedMultiplier with the per-tensor (reduced, total_shift),
    clamped to int16 (no fused activation). Broadcast batch dimensions as kernels/matmul.batch_matmul."""
    from .matmul import _batch_index, batch_matmul_shapes

    lhs_shape, rhs_shape = tuple(int(d) for d in lhs_shape), tuple(int(d) for d in rhs_shape)
    out_shape, _, _, k = batch_matmul_shapes(lhs_shape, rhs_shape, adj_x, adj_y)
    lhs = te.placeholder(lhs_shape, "int16", name="lhs")
    rhs = te.placeholder(rhs_shape, "int16", name="rhs")
    rk = te.reduce_axis((0, k), "rk")
    nb = len(out_shape) - 2

    def acc_fn(*idx):
        batch, i, j = idx[:nb], idx[nb], idx[nb + 1]
        lb, rb = _batch_index(batch, lhs_shape[:-2]), _batch_index(batch, rhs_shape[:-2])
        a = lhs[lb + ((rk, i) if adj_x else (i, rk))]
        b = rhs[rb + ((j, rk) if adj_y else (rk, j))]
        # int16 x int16 can reach 2^30: in int64 (TFLM's AccumT)
        return te.sum(tirx.Cast("int64", a) * tirx.Cast("int64", b), axis=rk)

    acc = te.compute(out_shape, acc_fn, name="acc")
    out = te.compute(out_shape, lambda *idx: _clamp16(mbqm64(acc[idx], reduced, total_shift), INT16_MIN, INT16_MAX), name="out")
    return _scalar_accumulator(te.create_prim_func([lhs, rhs, out]), ["acc"])


MAX_INPLACE_DELAY16 = 256  # int16 outputs the in-place depthwise may hold on the stack (512 B, as int8's 512 outputs)


def depthwise_conv2d_inplace(x_shape, w_shape, out_shape, stride, dilation, pad, act, delay: int):
    """DEPTHWISE_CONV_2D 16x8 (depth multiplier 1, batch 1) that writes its output over its input, the streaming
    form of int8_ops.depthwise_conv2d_inplace: channel by channel, each output is held back on the stack (a ring
    of ``delay`` int16, int8_ops.depthwise_inplace_delay) until the last reader of the input pixel it overwrites
    has run. The arithmetic is depthwise_conv2d's (int64 sum, int64 MultiplyByQuantizedMultiplier, clamp).
    Parameters: x [1, H, W, C] int16, w [KH, KW, C] int8, bias [C] int64 (zeros when the operator has none),
    mult [C], shift [C] (reduce_multipliers), out [1, OH, OW, C] (may alias x)."""
    from tvm.script import tirx as T

    n, h, w, c = (int(d) for d in x_shape)
    kh, kw, oc = (int(d) for d in w_shape)
    _, ho, wo, _ = (int(d) for d in out_shape)
    if n != 1 or oc != c or ho * wo > h * w or not 1 <= delay <= MAX_INPLACE_DELAY16:
        raise ValueError("in-place int16 depthwise needs batch 1, depth multiplier 1, an output no larger than the "
                         f"input and a delay in 1..{MAX_INPLACE_DELAY16}")
    sh, sw = stride
    dh, dw = dilation
    pt, pl = pad[0], pad[1]
    lo, hi = act
    k_out = ho * wo
    d = int(delay)

    @T.prim_func
    def depthwise16_inplace(
        x: T.Buffer((1, h, w, c), "int16"), wt: T.Buffer((kh, kw, c), "int8"), bias: T.Buffer((c,), "int64"),
        mult: T.Buffer((c,), "int32"), shift: T.Buffer((c,), "int32"), out: T.Buffer((1, ho, wo, c), "int16"),
    ):
        T.func_attr({"tir.noalias": False})  # out and x may be the same memory: no restrict
        acc = T.decl_buffer((1,), "int64")
        ring = T.decl_buffer((d,), "int16")  # the last d outputs of this channel, on the stack
        for ch in range(c):
            for k in range(k_out):
                acc[0] = bias[ch]
                for r, s in T.grid(kh, kw):
                    if 0 <= (k // wo) * sh + r * dh - pt and (k // wo) * sh + r * dh - pt < h and 0 <= (k % wo) * sw + s * dw - pl and (k % wo) * sw + s * dw - pl < w:
                        acc[0] = acc[0] + T.Cast("int64", T.Cast("int32", x[0, (k // wo) * sh + r * dh - pt, (k % wo) * sw + s * dw - pl, ch]) * T.Cast("int32", wt[r, s, ch]))
                ring[k % d] = _clamp16(mbqm64(acc[0], mult[ch], shift[ch]), lo, hi)
                if k >= d - 1:  # every reader of input pixel k-d+1 has run: its value may go
                    out[0, (k - d + 1) // wo, (k - d + 1) % wo, ch] = ring[(k - d + 1) % d]
            for t in range(d - 1):
                if k_out - d + 1 + t >= 0:
                    out[0, (k_out - d + 1 + t) // wo, (k_out - d + 1 + t) % wo, ch] = ring[(k_out - d + 1 + t) % d]

    return depthwise16_inplace
