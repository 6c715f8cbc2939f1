"""Elementwise kernels of several operands with numpy broadcasting (TFLM's Broadcast*Slow: every operand read
through broadcast indices, a size-1 axis read at index 0), and the per-element arithmetic of TFLM's int8
binary operators (SUB, SQUARED_DIFFERENCE, comparisons with scaling, ADD_N, DIV) and of its wrapping int32
ones.
"""

from __future__ import annotations

from typing import Callable, Sequence

import numpy as np

from tvm import te, tirx

from .fixed_point import clamp_to_int8, multiply_by_quantized_multiplier, rounding_divide_by_pot, saturating_rounding_doubling_high_mul


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


__all__ = [
    "broadcast_index",
    "clamp",
    "clamp_to_int8",
    "elementwise",
    "rescaled",
    "rounding_divide_by_pot",
    "saturating_rounding_doubling_high_mul",
    "wrap_int32",
]


# ---------------------------------------------------------------- DIV: TFLM's int8 arithmetic, in Python

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


def _rdbpot(x: int, exponent: int) -> int:
    """gemmlowp's RoundingDivideByPOT, exponent in [0, 31]."""
    mask = (1 << exponent) - 1
    remainder = x & mask
    threshold = (mask >> 1) + (1 if x < 0 else 0)
    return (x >> exponent) + (1 if remainder > threshold else 0)


def _rdbpot_over_31(x: int, exponent: int) -> int:
    """RoundingDivideByPOT past its range (32 <= exponent < 64), as TFLM's x86 build runs it: the mask
    (1ll << e) - 1 narrowed to int32 is -1, so the remainder is x and the threshold -1 + (x < 0); the int32
    shift by e >= 32 (undefined in C) is what x86 does."""
    shifted = x >> (exponent & 31)  # x86's sar takes the count modulo 32
    return shifted + (1 if x > -1 + (1 if x < 0 else 0) else 0)


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


def div_int8_value(q1: int, q2: int, in1_zp: int, in2_zp: int, out_zp: int, multiplier: int, shift: int, act_min: int, act_max: int) -> int | None:
    """TFLM's DivElementwise for one int8 pair, as its x86 build computes it (the oracle) also where its C++
    is undefined: a divisor at its zero point (only DCHECKed) and a RoundingDivideByPOT by 32..63 (a small
    dividend over a large divisor, common: x86 takes shift counts modulo 32; an Arm build of TFLM gives
    other values there). Checked against TFLM on all 65536 pairs. None for a shift past 63 or below 0."""
    v1, v2 = q1 - in1_zp, q2 - in2_zp
    if v2 < 0:
        v1, v2 = -v1, -v2
    if v2 == 0:  # TFLM only DCHECKs this; its x86 build: clz(0) = 32, a shift by 32 taken modulo 32
        inv, recip_shift = _one_over_one_plus_x(_I32_MIN), -1
    else:
        inv, recip_shift = _reciprocal(v2)
    headroom = _leading_sign_bits(v1)
    unscaled = _srdhm(_wrap32(v1 * (1 << headroom)), inv)
    total_shift = shift - recip_shift - headroom
    exponent = -total_shift
    if exponent < 0:
        return None
    y = _srdhm(unscaled, multiplier)
    if exponent <= 31:
        raw = out_zp + _rdbpot(y, exponent)
    elif exponent < 64:
        raw = out_zp + _rdbpot_over_31(y, exponent)
    else:
        return None
    return min(act_max, max(act_min, raw))


def div_table(in1_zp, in2_zp, out_zp, multiplier, shift, act_min, act_max, divisors) -> np.ndarray | None:
    """int8 quotients for every dividend (columns, value + 128) and each of ``divisors`` (raw int8 values,
    rows), or None when some pair needs a shift TFLM's arithmetic has no result for (refuse the model)."""
    table = np.empty((len(divisors), 256), np.int8)
    for r, q2 in enumerate(divisors):
        for c in range(256):
            v = div_int8_value(c - 128, int(q2), in1_zp, in2_zp, out_zp, multiplier, shift, act_min, act_max)
            if v is None:
                return None
            table[r, c] = v
    return table


def div_lookup(a_shape, b_shape, out_shape, b_const: bool):
    """out = table[row, a + 128]: row = b + 128 for a divisor tensor (table 256 x 256), or the divisor's own
    (broadcast) index for a constant divisor (table b_shape x 256)."""
    out_shape = tuple(int(d) for d in out_shape)
    rank = len(out_shape)
    a = te.placeholder(tuple(a_shape), "int8", name="a")
    holders = [a]
    if b_const:
        table = te.placeholder((*b_shape, 256), "int8", name="table")
    else:
        b = te.placeholder(tuple(b_shape), "int8", name="b")
        table = te.placeholder((256, 256), "int8", name="table")
        holders.append(b)

    def out_fn(*idx):
        col = a[broadcast_index(idx, tuple(a_shape), rank)].astype("int32") + 128
        if b_const:
            return table[(*broadcast_index(idx, tuple(b_shape), rank), col)]
        return table[b[broadcast_index(idx, tuple(b_shape), rank)].astype("int32") + 128, col]

    out = te.compute(out_shape, out_fn, name="out")
    return te.create_prim_func([*holders, table, out])
