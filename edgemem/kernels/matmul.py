"""Kernels of the matmul family (frontend/ops/matmul.py), TFLite Micro's arithmetic as TVM tensor expressions.

Every reduction is computed at its output element (int8_ops._scalar_accumulator): the accumulator is a scalar,
no scratch RAM.
"""

from __future__ import annotations

import math

import numpy as np
from tvm import te, tirx

from .fixed_point import (
    clamp_to_int8,
    multiply_by_quantized_multiplier,
    rounding_divide_by_pot,
    saturating_rounding_doubling_high_mul,
)
from .int8_ops import _scalar_accumulator


def broadcast_batch(a_batch, b_batch) -> tuple[int, ...]:
    """The broadcast of two batch shapes (numpy's rule, aligned on the right; each pair equal or one of them 1)."""
    rank = max(len(a_batch), len(b_batch))
    a = (1,) * (rank - len(a_batch)) + tuple(a_batch)
    b = (1,) * (rank - len(b_batch)) + tuple(b_batch)
    out = []
    for x, y in zip(a, b):
        if x != y and 1 not in (x, y):
            raise ValueError(f"batch dimensions {a_batch} and {b_batch} do not broadcast")
        out.append(max(x, y) if 1 in (x, y) else x)
    return tuple(out)


def _batch_index(batch_idx, shape_batch):
    """Index into an operand's own batch dimensions from the output's (right-aligned; size-1 dims read 0)."""
    skip = len(batch_idx) - len(shape_batch)
    return tuple(0 if d == 1 else i for i, d in zip(batch_idx[skip:], shape_batch))


def batch_matmul_shapes(lhs_shape, rhs_shape, adj_x: bool, adj_y: bool) -> tuple[tuple[int, ...], int, int, int]:
    """(output shape, rows, cols, depth) of BATCH_MATMUL; raises ValueError on mismatched operands."""
    m, k = (lhs_shape[-1], lhs_shape[-2]) if adj_x else (lhs_shape[-2], lhs_shape[-1])
    k2, n = (rhs_shape[-1], rhs_shape[-2]) if adj_y else (rhs_shape[-2], rhs_shape[-1])
    if k != k2:
        raise ValueError(f"BATCH_MATMUL depth {k} (lhs) differs from {k2} (rhs)")
    batch = broadcast_batch(lhs_shape[:-2], rhs_shape[:-2])
    return (*batch, m, n), m, n, k


def batch_matmul(lhs_shape, rhs_shape, adj_x: bool, adj_y: bool, dtype: str, quant=None):
    """BATCH_MATMUL of lhs [..., M, K] (adj_x: [..., K, M]) and rhs [..., K, N] (adj_y: [..., N, K]) with
    broadcast batch dimensions, output [..., M, N].

    float32: the sum in float32 in k order, as TFLM's reference. int8: ``quant`` = (lhs_zp, rhs_zp, multiplier,
    shift, out_zp): int32 sum of (lhs - lhs_zp) * (rhs - rhs_zp), TFLM's MultiplyByQuantizedMultiplier, the
    output zero point, clamped to int8 (BATCH_MATMUL has no fused activation)."""
    lhs_shape, rhs_shape = tuple(int(d) for d in lhs_shape), tuple(int(d) for d in rhs_shape)
    out_shape, _, _, k = batch_matmul_shapes(lhs_shape, rhs_shape, adj_x, adj_y)
    lhs = te.placeholder(lhs_shape, dtype, name="lhs")
    rhs = te.placeholder(rhs_shape, dtype, name="rhs")
    rk = te.reduce_axis((0, k), "rk")
    nb = len(out_shape) - 2

    def operands(idx):
        batch, i, j = idx[:nb], idx[nb], idx[nb + 1]
        lb, rb = _batch_index(batch, lhs_shape[:-2]), _batch_index(batch, rhs_shape[:-2])
        a = lhs[lb + ((rk, i) if adj_x else (i, rk))]
        b = rhs[rb + ((j, rk) if adj_y else (rk, j))]
        return a, b

    if dtype == "float32":
        def out_fn(*idx):
            a, b = operands(idx)
            return te.sum(a * b, axis=rk)

        out = te.compute(out_shape, out_fn, name="out")
        return te.create_prim_func([lhs, rhs, out])

    lhs_zp, rhs_zp, multiplier, shift, out_zp = quant

    def acc_fn(*idx):
        a, b = operands(idx)
        return te.sum((a.astype("int32") - lhs_zp) * (b.astype("int32") - rhs_zp), axis=rk)

    acc = te.compute(out_shape, acc_fn, name="acc")

    def requant(*idx):
        v = multiply_by_quantized_multiplier(acc[idx], multiplier, shift) + out_zp
        return clamp_to_int8(v, -128, 127)

    out = te.compute(out_shape, requant, name="out")
    return _scalar_accumulator(te.create_prim_func([lhs, rhs, out]), ["acc"])


def transpose_conv_padding(out_size: int, in_size: int, filter_size: int, stride: int, same: bool) -> int:
    """TFLM's padding of TRANSPOSE_CONV: ComputePaddingHeightWidth run as for a convolution *from* the
    output size (dilation 1); the conv's output size comes from its formula, not from the actual input size,
    and only the leading half of the total padding is used (the odd offset is dropped)."""
    conv_out = (out_size + stride - 1) // stride if same else (out_size + stride - filter_size) // stride
    total = (conv_out - 1) * stride + filter_size - out_size
    return max(total, 0) // 2


def transpose_conv(x_shape, w_shape, out_shape, stride, pad, has_bias: bool, dtype: str, quant=None, float_range=None):
    """TRANSPOSE_CONV, NHWC input [N, H, W, I], weights [O, KH, KW, I] (TFLite's layout), output [N, OH, OW, O].

    Gathered per output element: input pixel (iy, ix) reaches output row oy through filter row
    fy = oy + pad_h - iy * stride_h, so only the filter rows congruent to oy + pad_h modulo the stride take part.
    The reduction runs over those (filter row descending, filter column descending, input channel): the order in
    which TFLM's scatter loop (input rows, columns, channels ascending) adds into one output element, so the
    float sums are TFLM's to the bit. int8 (``quant`` = (in_zp, out_zp, act_min,
    act_max); per-channel ``mult``/``shift`` [O] parameters after the bias): int32 sum of (x - in_zp) * w (TFLM
    ignores the weights' zero point), bias, MultiplyByQuantizedMultiplier, zero point, clamp. float32: sum, bias,
    clamp to ``float_range`` (lo, hi) or none."""
    n, h, w, c = (int(d) for d in x_shape)
    o, kh, kw, _ = (int(d) for d in w_shape)
    out_shape = tuple(int(d) for d in out_shape)
    sh, sw = stride
    ph, pw = pad
    x = te.placeholder((n, h, w, c), dtype, name="x")
    wt = te.placeholder((o, kh, kw, c), "int8" if dtype == "int8" else dtype, name="w")
    bias = te.placeholder((o,), "int32" if dtype == "int8" else dtype, name="bias") if has_bias else None
    mult = te.placeholder((o,), "int32", name="mult") if dtype == "int8" else None
    shift = te.placeholder((o,), "int32", name="shift") if dtype == "int8" else None
    # Only the filter rows fy = (oy + pad) mod stride + stride * j reach output row oy from an input row:
    # ceil(KH / stride) of them, visited from the last (the first input row) on.
    jh, jw = -(-kh // sh), -(-kw // sw)
    ry, rx, rc = te.reduce_axis((0, jh), "ry"), te.reduce_axis((0, jw), "rx"), te.reduce_axis((0, c), "rc")
    zero = tirx.const(0, "int32" if dtype == "int8" else dtype)

    def acc_fn(b, oy, ox, oc):
        fy = (oy + ph) % sh + sh * (jh - 1 - ry)
        fx = (ox + pw) % sw + sw * (jw - 1 - rx)
        iy, ix = (oy + ph - fy) // sh, (ox + pw - fx) // sw  # exact divisions
        ok = tirx.all(fy < kh, fx < kw, iy >= 0, ix >= 0, iy < h, ix < w)
        if dtype == "int8":
            term = (x[b, iy, ix, rc].astype("int32") - quant[0]) * wt[oc, fy, fx, rc].astype("int32")
        else:
            term = x[b, iy, ix, rc] * wt[oc, fy, fx, rc]
        return te.sum(tirx.if_then_else(ok, term, zero), axis=[ry, rx, rc])

    acc = te.compute(out_shape, acc_fn, name="acc")

    def out_fn(b, oy, ox, oc):
        v = acc[b, oy, ox, oc] + (bias[oc] if has_bias else zero)
        if dtype == "int8":
            in_zp, out_zp, act_min, act_max = quant
            v = multiply_by_quantized_multiplier(v, mult[oc], shift[oc]) + out_zp
            return clamp_to_int8(v, act_min, act_max)
        if float_range is not None:
            v = tirx.Min(tirx.Max(v, tirx.const(float_range[0], dtype)), tirx.const(float_range[1], dtype))
        return v

    out = te.compute(out_shape, out_fn, name="out")
    params = [x, wt] + ([bias] if has_bias else []) + ([mult, shift] if dtype == "int8" else []) + [out]
    return _scalar_accumulator(te.create_prim_func(params), ["acc"])


# ---------------------------------------------------------------- SOFTMAX / LOG_SOFTMAX (int8, TFLM's fixed point)

def _i64(v):
    return tirx.Cast("int64", v)


def _sat_shift_left(v, exponent: int):
    """gemmlowp's SaturatingRoundingMultiplyByPOT for exponent > 0 on an int32 load ``v`` (a leaf: used thrice)."""
    threshold = (1 << (31 - exponent)) - 1
    return tirx.Select(v > threshold, tirx.const(2**31 - 1, "int32"),
                       tirx.Select(v < -threshold, tirx.const(-(2**31), "int32"), v * (1 << exponent)))


def softmax_exp_table(in_scale: float, beta: float) -> tuple[np.ndarray, int]:
    """TFLM's int8 SOFTMAX prepare (PreprocessSoftmaxScaling with 5 integer bits, CalculateInputRadius) done at
    build time: exp_on_negative_values of every row difference d = x - max in [-255, 0], as Q0.31, indexed by -d
    (0 below diff_min, where TFLM writes -128 without the exp: the same result). Returns (table, diff_min)."""
    from . import gemmlowp as g
    from .fixed_point import quantize_multiplier

    real = min(float(beta) * float(np.float32(in_scale)) * float(1 << 26), float((1 << 31) - 1))
    multiplier, left_shift = quantize_multiplier(real)
    diff_min = -int(math.floor(31.0 * (1 << 26) / (1 << left_shift)))
    table = np.zeros(256, np.int32)
    for i in range(256):
        d = -i
        if d >= diff_min:
            table[i] = g.exp_on_negative_values(g.multiply_by_quantized_multiplier_greater_than_one(d, multiplier, left_shift), 5)
    return table, diff_min


def softmax_int8(rows: int, depth: int, out_dtype: str = "int8"):
    """int8 SOFTMAX over rows of ``depth`` (TFLM's reference_ops::Softmax): per row the max, the sum of the
    exps rescaled to Q12.19 (RoundingDivideByPOT by 12), its reciprocal (GetReciprocal: count of leading zeros,
    then gemmlowp's one_over_one_plus_x_for_x_in_0_1, three Newton steps in Q2.29), and each output
    RoundingDivideByPOT(SRDHM(reciprocal, exp), num_bits_over_unit + 23) - 128. Parameters: x [rows, depth], the
    exp table [256] (softmax_exp_table), out [rows, depth]. ``out_dtype`` int16: TFLM's int8 -> int16 form
    (Softmax<int8_t, int16_t>), RoundingDivideByPOT by num_bits_over_unit + 15, - 32768, clamped to int16."""
    from tvm.script import tirx as T

    srdhm, rdbpot = saturating_rounding_doubling_high_mul, rounding_divide_by_pot
    bits = 8 if out_dtype == "int8" else 16
    exp_bias = 12 + 31 - bits  # the RoundingDivideByPOT exponent is this minus the sum's headroom_plus_one
    out_min, out_max = -(1 << (bits - 1)), (1 << (bits - 1)) - 1

    @T.prim_func
    def softmax(x: T.Buffer((rows, depth), "int8"), table: T.Buffer((256,), "int32"), out: T.Buffer((rows, depth), out_dtype)):
        # s: 0 row max, 1 sum of exps (Q12.19), 2 leading zeros of the sum, 3 half denominator, 4 Newton x, 5 scratch
        s = T.decl_buffer((6,), "int32")
        for r in range(rows):
            s[0] = -128
            for c in range(depth):
                s[0] = T.max(s[0], T.Cast("int32", x[r, c]))
            s[1] = 0
            for c in range(depth):
                s[1] = s[1] + rdbpot(_i64(table[s[0] - T.Cast("int32", x[r, c])]), 12)
            s[2] = 1
            for k in range(31):
                if _i64(s[1]) < (T.int64(1) << T.Cast("int64", k)):
                    s[2] = s[2] + 1
            # a = (sum << headroom) - 2^31 in [0, 2^31); RoundingHalfSum(a, One) = (a + 2^31) / 2 for a >= 0
            s[3] = T.Cast("int32", (_i64(s[1]) << _i64(s[2])) >> T.int64(1))
            s[4] = 1515870810 + T.Cast("int32", srdhm(s[3], -1010580540))
            for _it in range(3):
                s[5] = (1 << 29) - T.Cast("int32", srdhm(s[3], s[4]))
                s[5] = T.Cast("int32", srdhm(s[4], s[5]))
                s[4] = s[4] + _sat_shift_left(s[5], 2)
            s[5] = _sat_shift_left(s[4], 1)
            for c in range(depth):
                out[r, c] = clamp_to_int8(
                    rdbpot(srdhm(s[5], table[s[0] - T.Cast("int32", x[r, c])]), exp_bias - s[2]) + out_min, out_min, out_max, out_dtype)

    return softmax


# ---------------------------------------------------------------- L2_NORMALIZATION (int8)

def l2_normalization_int8(rows: int, depth: int, in_zp: int):
    """int8 L2_NORMALIZATION over rows of ``depth`` (TFLM's reference_integer_ops::L2Normalization): per row the
    int32 sum of squares of (x - zp), TFLM's GetInvSqrtQuantizedMultiplierExp of it (reverse shift -1: a
    normalisation by powers of four, five Newton steps in Q3.28, times sqrt(2)/2), then each output
    MultiplyByQuantizedMultiplier(x - zp, multiplier, shift + 7) clamped to int8 (TFLM writes Q0.7 whatever the
    output's quantization says). Parameters: x [rows, depth], out [rows, depth]."""
    from tvm.script import tirx as T

    srdhm = saturating_rounding_doubling_high_mul
    zp = int(in_zp)
    i32 = lambda v: T.Cast("int32", v)  # noqa: E731

    @T.prim_func
    def l2norm(x: T.Buffer((rows, depth), "int8"), out: T.Buffer((rows, depth), "int8")):
        # s: 0 sum of squares / normalised input, 1 shift, 2 leading zeros, 3 Newton x, 4 x^3, 5 half input,
        #    6 multiplier
        s = T.decl_buffer((7,), "int32")
        for r in range(rows):
            s[0] = 0
            for c in range(depth):
                s[0] = s[0] + (T.Cast("int32", x[r, c]) - zp) * (T.Cast("int32", x[r, c]) - zp)
            if s[0] <= 1:
                s[6] = 2147483647
                s[1] = 0
            else:
                s[1] = 11
                if s[0] >= (1 << 29):  # a sum below 2^31 needs at most one division by 4
                    s[0] = s[0] // 4
                    s[1] = s[1] + 1
                s[2] = 1
                for k in range(31):
                    if _i64(s[0]) < (T.int64(1) << T.Cast("int64", k)):
                        s[2] = s[2] + 1
                # left_shift_bit_pairs = (clz - 1) / 2 - 1
                s[1] = s[1] - (((s[2] - 1) >> 1) - 1)
                s[0] = s[0] * (T.int32(1) << ((((s[2] - 1) >> 1) - 1) * 2))
                s[5] = rounding_divide_by_pot(_i64(s[0] >> 1), 1)  # half input, Q3.28
                s[3] = 1 << 28
                for _it in range(5):
                    s[4] = i32(srdhm(i32(srdhm(s[3], s[3])), s[3]))
                    s[4] = _sat_shift_left(s[4], 6)
                    s[4] = i32(srdhm((1 << 28) + (1 << 27), s[3])) - i32(srdhm(s[5], s[4]))
                    s[3] = _sat_shift_left(s[4], 3)
                s[6] = i32(srdhm(s[3], 1518500250))
                if s[1] < 0:
                    s[6] = s[6] * (T.int32(1) << (0 - s[1]))
                    s[1] = 0
                s[1] = 0 - s[1]
            for c in range(depth):
                out[r, c] = clamp_to_int8(
                    multiply_by_quantized_multiplier(T.Cast("int32", x[r, c]) - zp, s[6], s[1] + 7), -128, 127)

    return l2norm


# ---------------------------------------------------------------- LOG_SOFTMAX (int8)

def _clz(v):
    """CountLeadingZeros of a positive int32 load ``v`` (a leaf): 1 + #{k < 31 : v < 2^k}."""
    total = tirx.const(1, "int32")
    for k in range(31):
        total = total + tirx.Select(v < tirx.const(1 << k, "int32"), tirx.const(1, "int32"), tirx.const(0, "int32"))
    return total


def _sat_shift_left_var(v, exponent):
    """SaturatingRoundingMultiplyByPOTParam of a positive int32 ``v`` by a variable exponent >= 0."""
    return tirx.Cast("int32", tirx.Min(_i64(v) << _i64(exponent), tirx.const(2**31 - 1, "int64")))


def _sat_sub_quarter(v, quarter: int):
    """SaturatingAddNonGemmlowp / SaturatingSub of a constant in int64, clamped to int32."""
    s = _i64(v) + quarter
    return tirx.Cast("int32", tirx.Max(tirx.Min(s, tirx.const(2**31 - 1, "int64")), tirx.const(-(2**31), "int64")))


def log_softmax_tables(in_scale: float) -> dict:
    """TFLM's int8 LOG_SOFTMAX prepare (PreprocessLogSoftmaxScalingExp with beta 1 and 5 integer bits) at build
    time: the Q5.26 rescaled difference and its exp (Q0.31) for every row difference d = x - max in [-255, 0]
    (indexed by -d; 0 below diff_min), diff_min, and the reverse scaling multiplier and shift."""
    from . import gemmlowp as g
    from .fixed_point import quantize_multiplier

    real = min(float(np.float32(in_scale)) * float(1 << 26), float((1 << 31) - 1))
    multiplier, left_shift = quantize_multiplier(real)
    diff_min = -int(math.floor(31.0 * (1 << 26) / (1 << left_shift)))
    reverse, reverse_shift = quantize_multiplier((1 << (31 - left_shift)) / float(multiplier))
    q5 = np.zeros(256, np.int32)
    exp = np.zeros(256, np.int32)
    for i in range(256):
        if -i >= diff_min:
            q5[i] = g.multiply_by_quantized_multiplier_greater_than_one(-i, multiplier, left_shift)
            exp[i] = g.exp_on_negative_values(int(q5[i]), 5)
    return {"q5": q5, "exp": exp, "diff_min": diff_min, "reverse": reverse, "reverse_shift": reverse_shift}


def log_softmax_int8(rows: int, depth: int, diff_min: int, reverse: int, reverse_shift: int):
    """int8 LOG_SOFTMAX over rows of ``depth`` (TFLM's reference_ops::LogSoftmaxQuantized): per row the max, the
    Q12.19 sum of exps, its log in Q5.26 (log_x_for_x_greater_than_or_equal_to_1: two normalisations by
    leading zeros, a rational approximation, gemmlowp's reciprocal), the adjusted diff_min, then each output
    RoundingDivideByPOT(q5(d) - log, 22) + 127 (Q4.27 -> output scale 16/256, zero point 127), or -128 below.
    Parameters: x [rows, depth], q5 [256], exp [256] (log_softmax_tables), out [rows, depth]."""
    from tvm.script import tirx as T

    from . import gemmlowp as g

    srdhm, rdbpot = saturating_rounding_doubling_high_mul, rounding_divide_by_pot
    i32 = lambda v: T.Cast("int32", v)  # noqa: E731
    quarter = 1 << 23  # Rescale<6>(1/4)

    @T.prim_func
    def log_softmax(x: T.Buffer((rows, depth), "int8"), q5: T.Buffer((256,), "int32"), exp: T.Buffer((256,), "int32"),
                    out: T.Buffer((rows, depth), "int8")):
        # s: 0 max, 1 sum, 2 clz a, 3 r_a, 4 z_a_adj, 5 clz b, 6 r_b, 7 z_b_adj, 8 r, 9 z_adj, 10 p, 11 q,
        #    12 common_sq, 13 num, 14 denominator - 1 / Newton half denominator, 15 Newton x, 16 scratch, 17 log,
        #    18 adjusted diff_min
        s = T.decl_buffer((19,), "int32")
        for r in range(rows):
            s[0] = -128
            for c in range(depth):
                s[0] = T.max(s[0], T.Cast("int32", x[r, c]))
            s[1] = 0
            for c in range(depth):
                s[1] = s[1] + rdbpot(_i64(exp[s[0] - T.Cast("int32", x[r, c])]), 12)
            # log_x_for_x_greater_than_or_equal_to_1<5>(sum in Q12.19)
            s[2] = _clz(s[1])
            s[3] = _sat_shift_left_var(s[1], s[2] - 1)
            s[3] = i32(srdhm(s[3], g.SQRT_HALF))
            s[3] = _sat_shift_left(s[3], 1)
            s[4] = _sat_sub_quarter((12 - s[2]) * (1 << 25), quarter)
            s[16] = i32(srdhm(s[1], g.SQRT_HALF))
            s[5] = _clz(s[16]) - 1
            s[6] = _sat_shift_left_var(s[1], s[5])  # saturates when v * sqrt(1/2) has one more leading zero
            s[7] = _sat_sub_quarter((12 - s[5]) * (1 << 25), -quarter)
            s[8] = T.min(s[3], s[6])
            s[9] = T.max(s[4], s[7])
            s[10] = i32((_i64(s[8]) + g.SQRT_SQRT_HALF + 1) >> T.int64(1))  # RoundingHalfSum of two positives
            s[11] = i32((_i64(s[8]) - g.SQRT_SQRT_HALF) * T.int64(2))  # int64: TVM folds int32 constants to 2c
            s[12] = i32(srdhm(s[11], s[11]))
            s[16] = i32(srdhm(s[11], s[12]))
            s[13] = i32(srdhm(s[11], s[8])) + i32(srdhm(s[16], g.ALPHA_N))
            s[16] = g.ALPHA_I + s[11] + i32(srdhm(g.ALPHA_D, s[12]))
            s[14] = i32(srdhm(s[10], s[16])) + i32(srdhm(g.ALPHA_F, s[11]))
            # one_over_one_plus_x_for_x_in_0_1(s[14]); s[14] >= 0: RoundingHalfSum with One is (a + 2^31) / 2
            s[14] = i32((_i64(s[14]) + T.int64(2**31)) >> T.int64(1))
            s[15] = 1515870810 + i32(srdhm(s[14], -1010580540))
            for _it in range(3):
                s[16] = (1 << 29) - i32(srdhm(s[14], s[15]))
                s[16] = i32(srdhm(s[15], s[16]))
                s[15] = s[15] + _sat_shift_left(s[16], 2)
            s[15] = _sat_shift_left(s[15], 1)  # the reciprocal
            s[16] = i32(srdhm(s[9], g.LOG_2)) + i32(srdhm(rdbpot(_i64(s[13]), 6), s[15]))
            s[17] = _sat_shift_left(s[16], 1)
            s[18] = T.max(diff_min - 1, multiply_by_quantized_multiplier(s[17] + T.int32(-(2**31)), reverse, reverse_shift))
            for c in range(depth):
                if s[0] - T.Cast("int32", x[r, c]) < 0 - s[18]:  # d > adjusted diff_min, d = x - max
                    out[r, c] = clamp_to_int8(rdbpot(_i64(q5[s[0] - T.Cast("int32", x[r, c])] - s[17]), 22) + 127, -128, 127)
                else:
                    out[r, c] = T.int8(-128)

    return log_softmax


# ---------------------------------------------------------------- SVDF (int8 and float32, with its state)

SVDF_STATE_PARAM = 4  # position of the activation state among the kernel's parameters (edgemem.state)


def svdf(batch: int, n_input: int, n_filter: int, n_memory: int, rank: int, dtype: str, state_dtype: str = "int16",
         time_dtype: str = "int16", quant=None, float_range=None):
    """SVDF (TFLM's EvalIntegerSvdfReference / EvalFloatSvdfReference). Parameters: x [B, K], weights_feature
    [F, K], weights_time [F, M], bias [U] (int32 / float32; zeros when the model has none), state [B, F*M]
    (read and written: a state tensor kept across invocations), out [B, U], U = F / rank.

    Each call shifts every filter's memory left by one, writes the new column: int8 MultiplyByQuantizedMultiplier
    of sum(w_feature * (x - in_zp)), clamped to the state type, plus the state zero point (stored with the C
    conversion to the state type, as TFLM does); float the plain dot product. Then per unit the bias plus, filter
    by filter of its rank, sum over memory of w_time * (state - state_zp), requantized to the output's zero point
    and clamped to int8 (TFLM's integer SVDF applies no fused activation) / clamped to ``float_range``.
    ``quant`` = (in_zp, m1, s1, state_zp, m2, s2, out_zp)."""
    from tvm.script import tirx as T

    n_unit = n_filter // rank
    fm = n_filter * n_memory
    acc_t = "int32" if dtype == "int8" else "float32"
    if dtype == "int8":
        in_zp, m1, s1, state_zp, m2, s2, out_zp = quant
        info = np.iinfo(np.dtype(state_dtype))
        s_min, s_max = int(info.min), int(info.max)
    else:
        in_zp = m1 = s1 = state_zp = m2 = s2 = out_zp = 0
        s_min = s_max = 0
    lo, hi = float_range if float_range is not None else (-3.4028234663852886e38, 3.4028234663852886e38)

    def feature(acc):
        if dtype == "int8":
            v = multiply_by_quantized_multiplier(acc, m1, s1)
            return T.Cast(state_dtype, state_zp + T.min(T.max(v, s_min), s_max))
        return acc

    def term_feature(w, xv):
        if dtype == "int8":
            return T.Cast("int32", w) * (T.Cast("int32", xv) - in_zp)
        return w * xv

    def term_time(w, sv):
        if dtype == "int8":
            return T.Cast("int32", w) * (T.Cast("int32", sv) - state_zp)
        return w * sv

    def add(a, b):
        # TFLM sums these in int32 and lets them wrap (two int16 factors fill 31 bits; a few hundred of them
        # leave int32): on int64, narrowed, since C's signed overflow is undefined and a narrowing is not
        if dtype == "int8":
            return T.Cast("int32", T.Cast("int64", a) + T.Cast("int64", b))
        return a + b

    def result(acc):
        if dtype == "int8":
            return clamp_to_int8(multiply_by_quantized_multiplier(acc, m2, s2) + out_zp, -128, 127)
        return T.min(T.max(acc, T.float32(lo)), T.float32(hi))

    w_dtype = "int8" if dtype == "int8" else "float32"
    wt_dtype = time_dtype if dtype == "int8" else "float32"
    st_dtype = state_dtype if dtype == "int8" else "float32"
    zero = T.int32(0) if dtype == "int8" else T.float32(0)

    @T.prim_func
    def svdf_kernel(x: T.Buffer((batch, n_input), dtype), wf: T.Buffer((n_filter, n_input), w_dtype),
                    wt: T.Buffer((n_filter, n_memory), wt_dtype), bias: T.Buffer((n_unit,), acc_t),
                    state: T.Buffer((batch, fm), st_dtype), out: T.Buffer((batch, n_unit), dtype)):
        T.func_attr({"tir.noalias": False})
        acc = T.decl_buffer((2,), acc_t)
        for b in range(batch):
            for i in range(fm - 1):
                state[b, i] = state[b, i + 1]
            for f in range(n_filter):
                acc[0] = zero
                for k in range(n_input):
                    acc[0] = add(acc[0], term_feature(wf[f, k], x[b, k]))
                state[b, f * n_memory + n_memory - 1] = feature(acc[0])
            for u in range(n_unit):
                acc[1] = bias[u]
                for r in range(rank):
                    acc[0] = zero
                    for m in range(n_memory):
                        acc[0] = add(acc[0], term_time(wt[u * rank + r, m], state[b, (u * rank + r) * n_memory + m]))
                    acc[1] = add(acc[1], acc[0])
                out[b, u] = result(acc[1])

    return svdf_kernel


def svdf_initial_state(batch: int, size: int, dtype: str, zero_point: int) -> np.ndarray:
    """TFLM's reset of a variable tensor: memset to the zero point for int8, to 0 otherwise."""
    value = zero_point if dtype == "int8" else 0
    return np.full((batch, size), value, dtype=np.dtype(dtype))
