"""Integer kernels with TFLite Micro's arithmetic, written as TVM tensor expressions.

Each builder returns a scheduled TIR PrimFunc whose parameters are (inputs..., constants...,
output). Padding is an index test inside the reduction (no padded copy of the input) and every
reduction is computed at its output element, so the int32 accumulator is a scalar: kernels need
no scratch RAM beyond a few registers.
"""

from __future__ import annotations

from dataclasses import dataclass

from tvm import te, tirx
import tvm.s_tir

from .fixed_point import clamp_to_int8, multiply_by_quantized_multiplier


@dataclass(frozen=True)
class Requant:
    """Output side of an integer op: zero point and the clamp of its fused activation."""

    out_zp: int
    act_min: int
    act_max: int


def _scalar_accumulator(func: tirx.PrimFunc, reductions: list[str], epilogue: str = "out") -> tirx.PrimFunc:
    """Move each reduction block under the innermost loop of its consumer: a 1-element accumulator.

    The init is then split out ahead of the reduction loops, so the C has a plain ``acc = 0``
    instead of a first-iteration test (which gcc flags as maybe-uninitialized)."""
    sch = tvm.s_tir.Schedule(func)
    for name in reductions:
        block = sch.get_sblock(name)
        consumer_loops = sch.get_loops(sch.get_sblock(epilogue))
        sch.compute_at(block, consumer_loops[-1])
        own_loops = sch.get_loops(block)[len(consumer_loops):]
        if own_loops:
            sch.decompose_reduction(block, own_loops[0])
    return sch.mod["main"]


def _in_bounds(index, extent):
    return tirx.all(index >= 0, index < extent)


def conv2d(x_shape, w_shape, has_bias, in_zp, stride, dilation, pad, out_shape, rq: Requant):
    """CONV_2D, NHWC input, HWIO int8 weights, per-channel multipliers."""
    n, h, w, c = x_shape
    kh, kw, _, o = w_shape
    x = te.placeholder(x_shape, "int8", name="x")
    wt = te.placeholder(w_shape, "int8", name="w")
    bias = te.placeholder((o,), "int32", name="bias") if has_bias else None
    mult = te.placeholder((o,), "int32", name="mult")
    shift = te.placeholder((o,), "int32", name="shift")
    rh, rw, rc = te.reduce_axis((0, kh), "rh"), te.reduce_axis((0, kw), "rw"), te.reduce_axis((0, c), "rc")
    sh, sw = stride
    dh, dw = dilation
    pt, pl = pad[0], pad[1]

    def acc_fn(b, i, j, oc):
        ih = i * sh + rh * dh - pt
        iw = j * sw + rw * dw - pl
        term = (x[b, ih, iw, rc].astype("int32") - in_zp) * wt[rh, rw, rc, oc].astype("int32")
        return te.sum(tirx.if_then_else(tirx.all(_in_bounds(ih, h), _in_bounds(iw, w)), term, 0), axis=[rh, rw, rc])

    acc = te.compute(out_shape, acc_fn, name="acc")

    def out_fn(b, i, j, oc):
        v = acc[b, i, j, oc] + (bias[oc] if has_bias else 0)
        v = multiply_by_quantized_multiplier(v, mult[oc], shift[oc]) + rq.out_zp
        return clamp_to_int8(v, rq.act_min, rq.act_max)

    out = te.compute(out_shape, out_fn, name="out")
    params = [x, wt] + ([bias] if has_bias else []) + [mult, shift, out]
    return _scalar_accumulator(te.create_prim_func(params), ["acc"])


def depthwise_conv2d(x_shape, w_shape, has_bias, in_zp, stride, dilation, pad, out_shape, rq: Requant):
    """DEPTHWISE_CONV_2D, NHWC input, weights [KH, KW, C*M] (TFLite's layout without the leading 1)."""
    n, h, w, c = x_shape
    kh, kw, oc_total = w_shape
    multiplier = oc_total // c
    x = te.placeholder(x_shape, "int8", name="x")
    wt = te.placeholder(w_shape, "int8", name="w")
    bias = te.placeholder((oc_total,), "int32", name="bias") if has_bias else None
    mult = te.placeholder((oc_total,), "int32", name="mult")
    shift = te.placeholder((oc_total,), "int32", name="shift")
    rh, rw = te.reduce_axis((0, kh), "rh"), te.reduce_axis((0, kw), "rw")
    sh, sw = stride
    dh, dw = dilation
    pt, pl = pad[0], pad[1]

    def acc_fn(b, i, j, oc):
        ih = i * sh + rh * dh - pt
        iw = j * sw + rw * dw - pl
        ic = oc // multiplier if multiplier > 1 else oc
        term = (x[b, ih, iw, ic].astype("int32") - in_zp) * wt[rh, rw, oc].astype("int32")
        return te.sum(tirx.if_then_else(tirx.all(_in_bounds(ih, h), _in_bounds(iw, w)), term, 0), axis=[rh, rw])

    acc = te.compute(out_shape, acc_fn, name="acc")

    def out_fn(b, i, j, oc):
        v = acc[b, i, j, oc] + (bias[oc] if has_bias else 0)
        v = multiply_by_quantized_multiplier(v, mult[oc], shift[oc]) + rq.out_zp
        return clamp_to_int8(v, rq.act_min, rq.act_max)

    out = te.compute(out_shape, out_fn, name="out")
    params = [x, wt] + ([bias] if has_bias else []) + [mult, shift, out]
    return _scalar_accumulator(te.create_prim_func(params), ["acc"])


def depthwise_conv2d_inplace(x_shape, w_shape, in_zp, stride, dilation, pad, out_shape, rq: Requant, delay: int = 0):
    """DEPTHWISE_CONV_2D (multiplier 1) that writes its output over its input (after TinyEngine).

    Channel by channel: copy the input channel's plane into ``tmp`` (H*W bytes, the only extra RAM), then
    write the output channel. In NHWC an output element of channel c lands at a flat position that is
    also channel c of the input (same channel count), which was saved in ``tmp``: other channels are
    never touched, so any stride and padding work as long as the output is not larger than the input.
    Parameters: x, w [KH, KW, C], bias [C], mult [C], shift [C], out (may alias x), tmp [H*W]; the
    kernel is also correct when out and x are apart (the planner may not manage to overlap them).
    delay > 0 (see depthwise_inplace_delay): no tmp; the input is read where it lies and each output is held
    back on the stack until the last reader of the input pixel it overwrites has run."""
    from tvm.script import tirx as T

    n, h, w, c = x_shape
    kh, kw, oc_total = w_shape
    _, ho, wo, _ = out_shape
    if n != 1 or oc_total != c or ho * wo > h * w:
        raise ValueError("in-place depthwise needs batch 1, depth multiplier 1 and an output no larger than the input")
    sh, sw = stride
    dh, dw = dilation
    pt, pl = pad[0], pad[1]
    zp = int(in_zp)

    @T.prim_func
    def depthwise_inplace(
        x: T.Buffer((1, h, w, c), "int8"), wt: T.Buffer((kh, kw, c), "int8"), bias: T.Buffer((c,), "int32"),
        mult: T.Buffer((c,), "int32"), shift: T.Buffer((c,), "int32"), out: T.Buffer((1, ho, wo, c), "int8"),
        tmp: T.Buffer((h * w,), "int8"),
    ):
        T.func_attr({"tir.noalias": False})  # out and x may be the same memory: no restrict
        acc = T.decl_buffer((1,), "int32")
        for ch in range(c):
            for y, z in T.grid(h, w):
                tmp[y * w + z] = x[0, y, z, ch]
            for i, j in T.grid(ho, wo):
                acc[0] = bias[ch]
                for r, s in T.grid(kh, kw):
                    if 0 <= i * sh + r * dh - pt and i * sh + r * dh - pt < h and 0 <= j * sw + s * dw - pl and j * sw + s * dw - pl < w:
                        acc[0] = acc[0] + (T.Cast("int32", tmp[(i * sh + r * dh - pt) * w + j * sw + s * dw - pl]) - zp) * T.Cast("int32", wt[r, s, ch])
                out[0, i, j, ch] = clamp_to_int8(
                    multiply_by_quantized_multiplier(acc[0], mult[ch], shift[ch]) + rq.out_zp, rq.act_min, rq.act_max)

    k_out = ho * wo
    d = max(int(delay), 1)

    @T.prim_func
    def depthwise_inplace_delayed(
        x: T.Buffer((1, h, w, c), "int8"), wt: T.Buffer((kh, kw, c), "int8"), bias: T.Buffer((c,), "int32"),
        mult: T.Buffer((c,), "int32"), shift: T.Buffer((c,), "int32"), out: T.Buffer((1, ho, wo, c), "int8"),
    ):
        T.func_attr({"tir.noalias": False})
        acc = T.decl_buffer((1,), "int32")
        ring = T.decl_buffer((d,), "int8")  # the last d outputs of this channel, on the stack
        for ch in range(c):
            for k in range(k_out):
                acc[0] = bias[ch]
                for r, s in T.grid(kh, kw):
                    if 0 <= (k // wo) * sh + r * dh - pt and (k // wo) * sh + r * dh - pt < h and 0 <= (k % wo) * sw + s * dw - pl and (k % wo) * sw + s * dw - pl < w:
                        acc[0] = acc[0] + (T.Cast("int32", x[0, (k // wo) * sh + r * dh - pt, (k % wo) * sw + s * dw - pl, ch]) - zp) * T.Cast("int32", wt[r, s, ch])
                ring[k % d] = clamp_to_int8(
                    multiply_by_quantized_multiplier(acc[0], mult[ch], shift[ch]) + rq.out_zp, rq.act_min, rq.act_max)
                if k >= d - 1:  # every reader of input pixel k-d+1 has run: its byte may go
                    out[0, (k - d + 1) // wo, (k - d + 1) % wo, ch] = ring[(k - d + 1) % d]
            for t in range(d - 1):
                if k_out - d + 1 + t >= 0:
                    out[0, (k_out - d + 1 + t) // wo, (k_out - d + 1 + t) % wo, ch] = ring[(k_out - d + 1 + t) % d]

    return depthwise_inplace if not delay else depthwise_inplace_delayed


MAX_INPLACE_DELAY = 512  # bytes of stack the delayed in-place depthwise may hold per call


def depthwise_inplace_delay(x_shape, w_shape, stride, dilation, pad, out_shape) -> int:
    """How many outputs the in-place depthwise must hold back so that writing output q (over input pixel q
    of the same channel) waits for every output that reads input pixel q: max over q of (last reader of
    pixel q) - q + 1, at least 1 (1: each output goes straight out). 0 if that exceeds MAX_INPLACE_DELAY."""
    _, h, w, _ = x_shape
    kh, kw = w_shape[0], w_shape[1]
    _, ho, wo, _ = out_shape
    sh, sw = stride
    dh, dw = dilation
    pt, pl = pad[0], pad[1]
    last = {}  # input pixel -> the last output (flat index) whose window reads it
    for i in range(ho):
        for j in range(wo):
            for r in range(kh):
                for q in range(kw):
                    y, z = i * sh + r * dh - pt, j * sw + q * dw - pl
                    if 0 <= y < h and 0 <= z < w:
                        last[y * w + z] = i * wo + j
    need = max([reader - pixel + 1 for pixel, reader in last.items() if pixel < ho * wo] + [1])
    return need if need <= MAX_INPLACE_DELAY else 0


def fully_connected(x_shape, w_shape, has_bias, in_zp, w_zp, multiplier, shift, rq: Requant):
    """FULLY_CONNECTED: x [B, K] int8, weights [O, K] int8 (TFLite's layout).

    ``multiplier``/``shift`` as Python ints: one per-tensor multiplier (TFLM's FullyConnected, with the
    weights' zero point). ``None``: per-channel (TFLM's FullyConnectedPerChannel, weights symmetric), the
    kernel then takes ``mult`` [O] and ``shift`` [O] int32 constants after the bias."""
    batch, k = x_shape
    o = w_shape[0]
    per_channel = multiplier is None
    x = te.placeholder(x_shape, "int8", name="x")
    wt = te.placeholder(w_shape, "int8", name="w")
    bias = te.placeholder((o,), "int32", name="bias") if has_bias else None
    mult = te.placeholder((o,), "int32", name="mult") if per_channel else None
    shifts = te.placeholder((o,), "int32", name="shift") if per_channel else None
    rk = te.reduce_axis((0, k), "rk")
    acc = te.compute(
        (batch, o),
        lambda b, oc: te.sum(
            (x[b, rk].astype("int32") - in_zp) * (wt[oc, rk].astype("int32") - w_zp), axis=rk
        ),
        name="acc",
    )

    def out_fn(b, oc):
        v = acc[b, oc] + (bias[oc] if has_bias else 0)
        if per_channel:
            v = multiply_by_quantized_multiplier(v, mult[oc], shifts[oc]) + rq.out_zp
        else:
            v = multiply_by_quantized_multiplier(v, multiplier, shift) + rq.out_zp
        return clamp_to_int8(v, rq.act_min, rq.act_max)

    out = te.compute((batch, o), out_fn, name="out")
    params = [x, wt] + ([bias] if has_bias else []) + ([mult, shifts] if per_channel else []) + [out]
    return _scalar_accumulator(te.create_prim_func(params), ["acc"])


def add(shape, in1_zp, in2_zp, left_shift, m1, s1, m2, s2, m_out, s_out, rq: Requant):
    """ADD of two int8 tensors of one shape (TFLM's AddElementwise)."""
    a = te.placeholder(shape, "int8", name="a")
    b = te.placeholder(shape, "int8", name="b")

    def out_fn(*idx):
        va = (a[idx].astype("int32") - in1_zp) * (1 << left_shift)
        vb = (b[idx].astype("int32") - in2_zp) * (1 << left_shift)
        sa = multiply_by_quantized_multiplier(va, m1, s1)
        sb = multiply_by_quantized_multiplier(vb, m2, s2)
        v = multiply_by_quantized_multiplier(sa + sb, m_out, s_out) + rq.out_zp
        return clamp_to_int8(v, rq.act_min, rq.act_max)

    out = te.compute(shape, out_fn, name="out")
    return te.create_prim_func([a, b, out])


def _pool_window(h, w, i, j, rh, rw, stride, pad):
    ih = i * stride[0] + rh - pad[0]
    iw = j * stride[1] + rw - pad[1]
    return ih, iw, tirx.all(_in_bounds(ih, h), _in_bounds(iw, w))


def average_pool2d(x_shape, pool, stride, pad, out_shape, rq: Requant):
    """AVERAGE_POOL_2D: mean over the in-bounds window elements, rounded half away from zero."""
    n, h, w, c = x_shape
    x = te.placeholder(x_shape, "int8", name="x")
    rh, rw = te.reduce_axis((0, pool[0]), "rh"), te.reduce_axis((0, pool[1]), "rw")

    def sum_fn(b, i, j, ch):
        ih, iw, ok = _pool_window(h, w, i, j, rh, rw, stride, pad)
        return te.sum(tirx.if_then_else(ok, x[b, ih, iw, ch].astype("int32"), 0), axis=[rh, rw])

    total = te.compute(out_shape, sum_fn, name="acc")

    def count(i, j):
        # In-bounds window size, in closed form (no second reduction).
        h0 = i * stride[0] - pad[0]
        w0 = j * stride[1] - pad[1]
        ch = tirx.Min(h0 + pool[0], h) - tirx.Max(h0, 0)
        cw = tirx.Min(w0 + pool[1], w) - tirx.Max(w0, 0)
        return (ch * cw).astype("int32")

    def out_fn(b, i, j, ch):
        s = total[b, i, j, ch]
        cnt = count(i, j)
        half = tirx.truncdiv(cnt, 2)
        avg = tirx.Select(s > 0, tirx.truncdiv(s + half, cnt), tirx.truncdiv(s - half, cnt))
        return clamp_to_int8(avg, rq.act_min, rq.act_max)

    out = te.compute(out_shape, out_fn, name="out")
    return _scalar_accumulator(te.create_prim_func([x, out]), ["acc"])


def max_pool2d(x_shape, pool, stride, pad, out_shape, rq: Requant):
    """MAX_POOL_2D over the in-bounds window elements."""
    n, h, w, c = x_shape
    x = te.placeholder(x_shape, "int8", name="x")
    rh, rw = te.reduce_axis((0, pool[0]), "rh"), te.reduce_axis((0, pool[1]), "rw")

    def max_fn(b, i, j, ch):
        ih, iw, ok = _pool_window(h, w, i, j, rh, rw, stride, pad)
        return te.max(tirx.if_then_else(ok, x[b, ih, iw, ch].astype("int32"), -128), axis=[rh, rw])

    peak = te.compute(out_shape, max_fn, name="acc")
    out = te.compute(out_shape, lambda *i: clamp_to_int8(peak[i], rq.act_min, rq.act_max), name="out")
    return _scalar_accumulator(te.create_prim_func([x, out]), ["acc"])


# ---------------------------------------------------------------- data movement (no arithmetic)

def pad(x_shape, pad_before, pad_after, pad_value: int):
    """PAD / PADV2 on int8: TFLM writes the pad value (the output zero point unless given)."""
    x = te.placeholder(x_shape, "int8", name="x")
    out_shape = tuple(int(d) + int(b) + int(a) for d, b, a in zip(x_shape, pad_before, pad_after))

    def out_fn(*idx):
        src = [i - int(b) for i, b in zip(idx, pad_before)]
        inside = tirx.all(*[_in_bounds(s, int(d)) for s, d in zip(src, x_shape)])
        # Clamped indices keep the (never taken) load in bounds for the C compiler's sake.
        safe = [tirx.Min(tirx.Max(s, 0), int(d) - 1) for s, d in zip(src, x_shape)]
        return tirx.if_then_else(inside, x[tuple(safe)], tirx.const(pad_value, "int8"))

    out = te.compute(out_shape, out_fn, name="out")
    return te.create_prim_func([x, out])


def strided_slice(x_shape, begin, strides, out_shape):
    """STRIDED_SLICE with the frontend's resolved begin/stride per axis: a copy."""
    x = te.placeholder(x_shape, "int8", name="x")
    out = te.compute(
        tuple(out_shape),
        lambda *idx: x[tuple(int(b) + i * int(s) for i, b, s in zip(idx, begin, strides))],
        name="out",
    )
    return te.create_prim_func([x, out])


def transpose(x_shape, axes):
    """TRANSPOSE: out[i_0..i_n] = x[...] with out axis k reading x axis axes[k]."""
    x = te.placeholder(x_shape, "int8", name="x")
    out_shape = tuple(int(x_shape[a]) for a in axes)

    def out_fn(*idx):
        src = [None] * len(axes)
        for k, a in enumerate(axes):
            src[a] = idx[k]
        return x[tuple(src)]

    out = te.compute(out_shape, out_fn, name="out")
    return te.create_prim_func([x, out])


def concatenation(shapes, axis: int):
    """CONCATENATION of int8 tensors with one quantization (TFLM requires it): a copy."""
    xs = [te.placeholder(s, "int8", name=f"x{i}") for i, s in enumerate(shapes)]
    out_shape = list(shapes[0])
    out_shape[axis] = sum(int(s[axis]) for s in shapes)
    starts = [0]
    for s in shapes[:-1]:
        starts.append(starts[-1] + int(s[axis]))

    def out_fn(*idx):
        value = None
        for x, start, s in zip(xs, starts, shapes):  # later inputs override from their start on
            local = list(idx)
            local[axis] = tirx.Max(idx[axis] - start, 0) if start else idx[axis]
            local[axis] = tirx.Min(local[axis], int(s[axis]) - 1)
            load = x[tuple(local)]
            value = load if value is None else tirx.if_then_else(idx[axis] >= start, load, value)
        return value

    out = te.compute(tuple(out_shape), out_fn, name="out")
    return te.create_prim_func(xs + [out])


def resize_nearest(x_shape, out_hw):
    """RESIZE_NEAREST_NEIGHBOR (NHWC) through source-row/column tables computed on the host with
    TFLM's float formula (int32 constants, out_h + out_w entries)."""
    n, h, w, c = x_shape
    oh, ow = out_hw
    x = te.placeholder(x_shape, "int8", name="x")
    rows = te.placeholder((oh,), "int32", name="rows")
    cols = te.placeholder((ow,), "int32", name="cols")
    out = te.compute((n, oh, ow, c), lambda b, i, j, ch: x[b, rows[i], cols[j], ch], name="out")
    return te.create_prim_func([x, rows, cols, out])


# ---------------------------------------------------------------- arithmetic on int8

def mean(x_shape, axes, keep_dims: bool, in_zp, multiplier, shift, out_zp):
    """MEAN over any axes, TFLM's QuantizedMeanOrSum: the int32 sum of (x - in_zp) times a
    multiplier that already folds in 1/count (see fixed_point.mean_multiplier)."""
    axes = sorted(int(a) for a in axes)
    x = te.placeholder(x_shape, "int8", name="x")
    reduce_axes = {a: te.reduce_axis((0, int(x_shape[a])), f"r{a}") for a in axes}
    out_shape = tuple(1 if a in reduce_axes else int(d) for a, d in enumerate(x_shape) if keep_dims or a not in reduce_axes)

    def source_index(idx):
        src, k = [], 0
        for a in range(len(x_shape)):
            if a in reduce_axes:
                src.append(reduce_axes[a])
                k += 1 if keep_dims else 0
            else:
                src.append(idx[k])
                k += 1
        return tuple(src)

    acc = te.compute(
        out_shape,
        lambda *idx: te.sum(x[source_index(idx)].astype("int32") - in_zp, axis=list(reduce_axes.values())),
        name="acc",
    )

    def out_fn(*idx):
        v = multiply_by_quantized_multiplier(acc[idx], multiplier, shift) + out_zp
        return clamp_to_int8(v, -128, 127)

    out = te.compute(out_shape, out_fn, name="out")
    return _scalar_accumulator(te.create_prim_func([x, out]), ["acc"])


def _broadcast_index(idx, shape, out_rank):
    """numpy broadcasting: right-align ``shape`` under the output, size-1 axes read index 0."""
    lead = out_rank - len(shape)
    return tuple(0 if int(d) == 1 else idx[lead + k] for k, d in enumerate(shape))


def mul(a_shape, b_shape, out_shape, a_zp, b_zp, multiplier, shift, rq: Requant):
    """MUL (TFLM's MulElementwise / BroadcastMul): (a - a_zp) * (b - b_zp), one requantization."""
    a = te.placeholder(a_shape, "int8", name="a")
    b = te.placeholder(b_shape, "int8", name="b")
    rank = len(out_shape)

    def out_fn(*idx):
        va = a[_broadcast_index(idx, a_shape, rank)].astype("int32") - a_zp
        vb = b[_broadcast_index(idx, b_shape, rank)].astype("int32") - b_zp
        v = multiply_by_quantized_multiplier(va * vb, multiplier, shift) + rq.out_zp
        return clamp_to_int8(v, rq.act_min, rq.act_max)

    out = te.compute(tuple(out_shape), out_fn, name="out")
    return te.create_prim_func([a, b, out])


def broadcast_add(a_shape, b_shape, out_shape, in1_zp, in2_zp, left_shift, m1, s1, m2, s2, m_out, s_out, rq: Requant):
    """ADD with numpy broadcasting (TFLM's BroadcastAdd6DSlow): the same arithmetic per element
    as ``add``, operands read through broadcast indices."""
    a = te.placeholder(a_shape, "int8", name="a")
    b = te.placeholder(b_shape, "int8", name="b")
    rank = len(out_shape)

    def out_fn(*idx):
        va = (a[_broadcast_index(idx, a_shape, rank)].astype("int32") - in1_zp) * (1 << left_shift)
        vb = (b[_broadcast_index(idx, b_shape, rank)].astype("int32") - in2_zp) * (1 << left_shift)
        sa = multiply_by_quantized_multiplier(va, m1, s1)
        sb = multiply_by_quantized_multiplier(vb, m2, s2)
        v = multiply_by_quantized_multiplier(sa + sb, m_out, s_out) + rq.out_zp
        return clamp_to_int8(v, rq.act_min, rq.act_max)

    out = te.compute(tuple(out_shape), out_fn, name="out")
    return te.create_prim_func([a, b, out])


def requantize(shape, in_zp, multiplier, shift, out_zp):
    """QUANTIZE int8 -> int8 (TFLM's Requantize): (x - in_zp) rescaled, plus out_zp."""
    x = te.placeholder(shape, "int8", name="x")

    def out_fn(*idx):
        v = multiply_by_quantized_multiplier(x[idx].astype("int32") - in_zp, multiplier, shift) + out_zp
        return clamp_to_int8(v, -128, 127)

    out = te.compute(tuple(shape), out_fn, name="out")
    return te.create_prim_func([x, out])


# ---------------------------------------------------------------- float <-> int8 at the model's edges

def quantize_float(shape, scale: float, zero_point: int):
    """QUANTIZE float32 -> int8, TFLM's AffineQuantize: round(x / scale) + zp, clamped.

    The quotient is a float32 division (as TFLM: ``val / static_cast<float>(scale)``) and the
    rounding is std::round (ties away from zero), done exactly without roundf: with t = trunc(q),
    q - t is exact in float32, so comparing it with +-0.5 decides the tie the same way."""
    x = te.placeholder(shape, "float32", name="x")
    limit = tirx.const(1024.0, "float32")  # far outside int8 after the zero point; keeps the cast defined

    def out_fn(*idx):
        q = x[idx] / tirx.const(float(scale), "float32")
        q = tirx.Min(tirx.Max(q, -limit), limit)
        t = q.astype("int32")  # truncation toward zero
        frac = q - t.astype("float32")
        rounded = t + tirx.Select(frac >= 0.5, 1, 0) - tirx.Select(frac <= -0.5, 1, 0)
        return clamp_to_int8(rounded + zero_point, -128, 127)

    out = te.compute(tuple(shape), out_fn, name="out")
    return te.create_prim_func([x, out])


def dequantize_float(shape, scale: float, zero_point: int):
    """DEQUANTIZE int8 -> float32, TFLM: float(scale * (x - zp)) with scale in double. (x - zp)
    has at most 9 bits, so the double product is exact and one float32 multiply rounds it the same."""
    x = te.placeholder(shape, "int8", name="x")
    out = te.compute(
        tuple(shape),
        lambda *idx: (x[idx].astype("int32") - zero_point).astype("float32") * tirx.const(float(scale), "float32"),
        name="out",
    )
    return te.create_prim_func([x, out])
