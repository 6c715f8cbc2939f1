"""Elementwise kernels of several operands with numpy broadcasting (TFLM's Broadcast*Slow: every operand read
through broadcast indices, a size-1 axis read at index 0), and the per-element arithmetic of TFLM's int8
binary operators (SUB, SQUARED_DIFFERENCE, comparisons with scaling, ADD_N, DIV), of its int16 ones (ADD, SUB,
MUL, SQUARED_DIFFERENCE: the same fixed-point steps with other shifts, products that may wrap) and of its wrapping
int32 ones.
"""

from __future__ import annotations

from typing import Callable, Sequence

import numpy as np

from tvm import te, tirx

from .fixed_point import (clamp_to_int8, multiply_by_quantized_multiplier,  # noqa: F401  (the wrapping one: ops/binary.py's K.)
                          multiply_by_quantized_multiplier_wrapping, rounding_divide_by_pot,
                          saturating_rounding_doubling_high_mul)


def broadcast_index(idx, shape, out_rank):
    """numpy broadcasting: right-align ``shape`` under the output, size-1 axes read index 0."""
    lead = out_rank - len(shape)
    return tuple(0 if int(d) == 1 else idx[lead + k] for k, d in enumerate(shape))


def elementwise(operands: Sequence[tuple[tuple[int, ...], str]], out_shape, out_dtype: str, fn: Callable):
    """``out[i] = fn(v0, v1, ...)`` where vk is operand k (shape, dtype) read at i through broadcasting.
    A 0-d operand is read as a 1-element one."""
    out_shape = tuple(int(d) for d in out_shape)
    rank = len(out_shape)
    holders = [te.placeholder(tuple(shape) or (1,), dtype, name=f"in{k}") for k, (shape, dtype) in enumerate(operands)]

    def out_fn(*idx):
        values = [h[broadcast_index(idx, tuple(h.shape), rank)] for h in holders]
        return fn(*values)

    out = te.compute(out_shape or (1,), out_fn, name="out")
    return te.create_prim_func([*holders, out])


# ---------------------------------------------------------------- int8 per-element arithmetic

def rescaled(v, offset: int, left_shift: int, multiplier: int, shift: int):
    """TFLM's (offset + v) << left_shift, then MultiplyByQuantizedMultiplierSmallerThanOneExp (int32)."""
    return multiply_by_quantized_multiplier((v.astype("int32") + offset) * (1 << left_shift), multiplier, shift)


def wrap_int32(fn: Callable):
    """An int32 operation with two's-complement wrapping (TFLM's int32 ADD/SUB/MUL wrap: WrappingMul and
    friends; C's signed overflow is undefined): computed on int64, then narrowed. ``fn`` must keep its
    int64 intermediates exact (a product of two int32 values, a sum of a few). Not on uint32: TVM's
    analyzer takes a cast of an unsigned value as non-negative and drops a later clamp at 0."""

    def wrapped(*values):
        return fn(*[v.astype("int64") for v in values]).astype("int32")

    return wrapped


def clamp(v, lo, hi, dtype: str):
    return tirx.Min(tirx.Max(v, tirx.const(lo, dtype)), tirx.const(hi, dtype))





# ---------------------------------------------------------------- DIV: TFLM's int8 arithmetic
#
# TFLM's DivElementwise per element: v1 = q1 - zp1, v2 = q2 - zp2 (both negated when v2 < 0); the reciprocal
# of v2 (GetReciprocal: gemmlowp's one_over_one_plus_x_for_x_in_0_1 on v2 normalised, with its shift); v1
# normalised by its leading sign bits, times the reciprocal (SaturatingRoundingDoublingHighMul), times the
# output multiplier, then RoundingDivideByPOT by recip_shift + headroom - out_shift, plus the output zero point.
# Where that C++ is undefined, edgemem reproduces what TFLM's x86 build (the oracle) computes, checked against
# it on all 65536 pairs: a divisor at its zero point (only DCHECKed: clz(0) = 32, x << 32 taken as x << 0) and
# exponents 32..63, common for a small dividend over a large divisor (the mask (1ll << e) - 1 narrows to -1,
# so the remainder is x and the threshold -1 + (x < 0); x86's sar takes the count modulo 32). An Arm build of
# TFLM gives other values in those cases.

_I32_MIN, _I32_MAX = -(2**31), 2**31 - 1


def _wrap32(x: int) -> int:
    return (x + 2**31) % 2**32 - 2**31


def _srdhm(a: int, b: int) -> int:
    """gemmlowp's SaturatingRoundingDoublingHighMul (int32)."""
    if a == b == _I32_MIN:
        return _I32_MAX
    ab = a * b
    num = ab + ((1 << 30) if ab >= 0 else 1 - (1 << 30))
    q = abs(num) >> 31  # C's division truncates toward zero
    return q if num >= 0 else -q


def _sat_shift_left(x: int, exponent: int) -> int:
    """gemmlowp's SaturatingRoundingMultiplyByPOT for a positive exponent (a saturating left shift)."""
    threshold = (1 << (31 - exponent)) - 1
    if x > threshold:
        return _I32_MAX
    if x < -threshold:
        return _I32_MIN
    return _wrap32(x * (1 << exponent))


def _one_over_one_plus_x(a: int) -> int:
    """gemmlowp's one_over_one_plus_x_for_x_in_0_1 on raw Q0.31 (Newton-Raphson, three steps, in Q2.29)."""
    s = a + _I32_MAX  # RoundingHalfSum(a, F0::One()) in int64
    half_den = (s + (1 if s >= 0 else -1)) // 2 if s >= 0 else -((-s + 1) // 2)
    x = _wrap32(1515870810 + _srdhm(half_den, -1010580540))  # 48/17 - 32/17 * d (Q2.29)
    one_f2 = 1 << 29
    for _ in range(3):
        hdx = _srdhm(half_den, x)  # Q0 * Q2 -> Q2
        one_minus = _wrap32(one_f2 - hdx)
        x = _wrap32(x + _sat_shift_left(_srdhm(x, one_minus), 2))  # Q2 * Q2 -> Q4, rescaled to Q2
    return _sat_shift_left(x, 1)  # ExactMulByPot<-1> then Rescale<0>


def _reciprocal(x: int) -> tuple[int, int]:
    """TFLite's GetReciprocal(x, 31) for 0 < x < 2^31: (Q0.31 reciprocal significand, bits over unit)."""
    headroom_plus_one = 32 - x.bit_length()  # CountLeadingZeros(uint32)
    shifted = _wrap32(((x << headroom_plus_one) & 0xFFFFFFFF) - (1 << 31))
    return _one_over_one_plus_x(shifted), 31 - headroom_plus_one


def _leading_sign_bits(x: int) -> int:
    """CountLeadingSignBits(int32) as TFLM's GCC build computes it (__builtin_clrsb; 31 for 0)."""
    return 31 - (x if x >= 0 else ~x).bit_length()


def div_operand_tables(in1_zp: int, in2_zp: int, out_shift: int):
    """Per raw int8 value tables for ``div_int8``: for the divisor (reciprocal significand int32, its shift
    int32, whether the signs flip int8) and for the dividend (CountLeadingSignBits of v and of -v, int32);
    None when some pair needs a RoundingDivideByPOT exponent outside [0, 63]."""
    inv = np.empty(256, np.int32)
    rshift = np.empty(256, np.int32)
    flip = np.empty(256, np.int8)
    for i, q2 in enumerate(range(-128, 128)):
        v2 = q2 - in2_zp
        flip[i] = v2 < 0
        v2 = abs(v2)
        inv[i], rshift[i] = (_one_over_one_plus_x(_I32_MIN), -1) if v2 == 0 else _reciprocal(v2)
    v1 = np.arange(-128, 128) - in1_zp
    lsb_pos = np.array([_leading_sign_bits(int(v)) for v in v1], np.int32)
    lsb_neg = np.array([_leading_sign_bits(int(-v)) for v in v1], np.int32)
    heads = np.concatenate([lsb_pos, lsb_neg])
    lo = int(rshift.min()) + int(heads.min()) - out_shift
    hi = int(rshift.max()) + int(heads.max()) - out_shift
    if lo < 0 or hi > 63:
        return None
    return inv, rshift, flip, lsb_pos, lsb_neg


def div_int8(a_shape, b_shape, out_shape, in1_zp, multiplier, shift, out_zp, act_min, act_max):
    """int8 DIV (TFLM's DivElementwise, its x86 build also where its C++ is undefined) from per-value tables
    (``div_operand_tables``): ~1.8 KB of flash whatever the tensors."""
    out_shape = tuple(int(d) for d in out_shape)
    rank = len(out_shape)
    a = te.placeholder(tuple(a_shape), "int8", name="a")
    b = te.placeholder(tuple(b_shape), "int8", name="b")
    inv = te.placeholder((256,), "int32", name="inv")
    rshift = te.placeholder((256,), "int32", name="rshift")
    flip = te.placeholder((256,), "int8", name="flip")
    lsb_pos = te.placeholder((256,), "int32", name="lsb_pos")
    lsb_neg = te.placeholder((256,), "int32", name="lsb_neg")
    i64 = lambda v: tirx.const(v, "int64")  # noqa: E731

    def out_fn(*idx):
        ia = a[broadcast_index(idx, tuple(a_shape), rank)].astype("int32") + 128
        ib = b[broadcast_index(idx, tuple(b_shape), rank)].astype("int32") + 128
        flipped = flip[ib] != tirx.const(0, "int8")
        v1 = (ia - 128 - in1_zp).astype("int64")
        v1 = tirx.Select(flipped, i64(0) - v1, v1)
        head = tirx.Select(flipped, lsb_neg[ia], lsb_pos[ia])
        normalised = v1 * (i64(1) << head.astype("int64"))  # fits int32: head is v1's redundant sign bits
        unscaled = saturating_rounding_doubling_high_mul(normalised, inv[ib])
        y = saturating_rounding_doubling_high_mul(unscaled, multiplier)
        e = rshift[ib] + head - shift
        in_range = rounding_divide_by_pot(y, tirx.Min(e, tirx.const(31, "int32")))
        past = ((y >> (e & 31).astype("int64")) + tirx.Select(y >= i64(0), i64(1), i64(0))).astype("int32")
        raw = tirx.Select(e <= 31, in_range, past) + out_zp
        return clamp_to_int8(raw, act_min, act_max)

    out = te.compute(out_shape, out_fn, name="out")
    return te.create_prim_func([a, b, inv, rshift, flip, lsb_pos, lsb_neg, out])
