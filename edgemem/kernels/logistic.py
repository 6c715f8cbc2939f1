"""int8 LOGISTIC as a 256-entry table computed at build time with TFLite Micro's arithmetic.

TFLM computes an int8 sigmoid per element with gemmlowp's fixed-point logistic (input rescaled to Q4.27,
exp by a Taylor polynomial and a barrel shifter of exp(-2^k), 1/(1+x) by Newton-Raphson, output in Q0.31
rounded to 1/256 with zero point -128). An int8 input has only 256 values, so edgemem runs that
arithmetic here, in Python integers, once per operator, and the device only looks the result up: the
same bytes as TFLM, 256 bytes of flash, no multiply on the device.
"""

from __future__ import annotations

import math

import numpy as np
from tvm import te

INT32_MIN, INT32_MAX = -(2**31), 2**31 - 1
_INPUT_INTEGER_BITS = 4  # TFLM's input format Q4.27
_ONE_Q0 = INT32_MAX  # gemmlowp's 1.0 with no integer bits


def _wrap(x: int) -> int:
    """int32 two's-complement wrap (gemmlowp's plain int32 add/sub)."""
    return (x + 2**31) % 2**32 - 2**31


def _high_mul(a: int, b: int) -> int:
    """SaturatingRoundingDoublingHighMul: round(a * b / 2^31), ties away from zero; saturates only at MIN*MIN."""
    if a == b == INT32_MIN:
        return INT32_MAX
    ab = a * b
    nudge = (1 << 30) if ab >= 0 else 1 - (1 << 30)
    return _trunc_div(ab + nudge, 1 << 31)  # C's int64 division truncates toward zero


def _trunc_div(a: int, b: int) -> int:
    q = abs(a) // abs(b)
    return q if (a >= 0) == (b > 0) else -q


def _div_pot(x: int, e: int) -> int:
    """RoundingDivideByPOT: x / 2^e rounded to nearest, ties away from zero."""
    mask = (1 << e) - 1
    threshold = (mask >> 1) + (1 if x < 0 else 0)
    return (x >> e) + (1 if (x & mask) > threshold else 0)


def _mul_pot(x: int, e: int) -> int:
    """SaturatingRoundingMultiplyByPOT<e> on int32."""
    if e == 0:
        return x
    if e < 0:
        return _div_pot(x, -e)
    threshold = (1 << (31 - e)) - 1
    return INT32_MAX if x > threshold else INT32_MIN if x < -threshold else x << e


def _exp_quarter_interval(a: int) -> int:
    """exp(a) for a in [-1/4, 0), Q0.31 in and out: Taylor series around -1/8."""
    exp_minus_eighth, third = 1895147668, 715827883
    x = _wrap(a + (1 << 28))
    x2 = _high_mul(x, x)
    x3 = _high_mul(x2, x)
    x4 = _high_mul(x2, x2)
    poly = _mul_pot(_wrap(_high_mul(_wrap(_mul_pot(x4, -2) + x3), third) + x2), -1)
    return _wrap(exp_minus_eighth + _high_mul(exp_minus_eighth, _wrap(x + poly)))


# exp(-2^k) in Q0.31 for k = -2..4, applied for each set bit of the input's remainder
_EXP_BARREL = ((-2, 1672461947), (-1, 1302514674), (0, 790015084), (1, 290630308), (2, 39332535), (3, 720401), (4, 242))


def _exp_negative(a: int, integer_bits: int) -> int:
    """exp(a) for a <= 0 given in Q(integer_bits).(31 - integer_bits); Q0.31 out."""
    frac = 31 - integer_bits
    quarter = 1 << (frac - 2)
    a_mod = _wrap((a & (quarter - 1)) - quarter)
    result = _exp_quarter_interval(_mul_pot(a_mod, integer_bits))
    remainder = _wrap(a_mod - a)
    for k, multiplier in _EXP_BARREL:
        if integer_bits > k and remainder & (1 << (frac + k)):
            result = _high_mul(result, multiplier)
    if integer_bits > 5 and a < -(1 << (36 - integer_bits)):
        result = 0
    return _ONE_Q0 if a == 0 else result


def _one_over_one_plus(a: int) -> int:
    """1 / (1 + a) for a in (0, 1) in Q0.31, by three Newton-Raphson steps in Q2.29."""
    s = a + _ONE_Q0  # RoundingHalfSum(a, 1): (s + sign(s)) / 2 truncated toward zero
    half_denominator = _trunc_div(s + (1 if s >= 0 else -1), 2)
    x = _wrap(1515870810 + _high_mul(half_denominator, -1010580540))
    for _ in range(3):
        one_minus = _wrap((1 << 29) - _high_mul(half_denominator, x))
        x = _wrap(x + _mul_pot(_high_mul(x, one_minus), 2))
    return _mul_pot(x, 1)  # Rescale<0> of x / 2 in Q1.30


def logistic_q0(a: int, integer_bits: int = _INPUT_INTEGER_BITS) -> int:
    """gemmlowp's logistic of a raw Q(integer_bits) value, as a raw Q0.31 value."""
    if a == 0:
        return 1 << 30
    positive = _one_over_one_plus(_exp_negative(_wrap(-abs(a)), integer_bits))
    return positive if a > 0 else _wrap(_ONE_Q0 - positive)


def _multiply_by_quantized_multiplier(x: int, multiplier: int, shift: int) -> int:
    left, right = max(shift, 0), max(-shift, 0)
    return _div_pot(_high_mul(_wrap(x * (1 << left)), multiplier), right)


def logistic_table(input_scale: float, input_zero_point: int) -> np.ndarray:
    """int8 output for every int8 input (index = input + 128), as TFLM's int8 LOGISTIC computes it
    (output scale 1/256, zero point -128, which TFLite requires of this operator)."""
    real = float(np.float32(input_scale)) * float(1 << (31 - _INPUT_INTEGER_BITS))
    q, left_shift = math.frexp(real)
    multiplier = int(math.copysign(math.floor(abs(q) * (1 << 31) + 0.5), q))
    radius = math.floor(((1 << _INPUT_INTEGER_BITS) - 1) * (1 << (31 - _INPUT_INTEGER_BITS)) / (1 << left_shift)) if left_shift >= 0 \
        else math.floor(((1 << _INPUT_INTEGER_BITS) - 1) * (1 << (31 - _INPUT_INTEGER_BITS)) * (1 << -left_shift))  # fmt: skip
    out = np.empty(256, np.int8)
    for i, value in enumerate(range(-128, 128)):
        x = value - int(input_zero_point)
        if x <= -radius:
            out[i] = -128
        elif x >= radius:
            out[i] = 127
        else:
            y = _div_pot(logistic_q0(_multiply_by_quantized_multiplier(x, multiplier, left_shift)), 23) - 128
            out[i] = min(max(y, -128), 127)
    return out


def table_lookup(shape):
    """out[i] = table[x[i] + 128]: x int8 of ``shape``, table int8 [256]."""
    x = te.placeholder(shape, "int8", name="x")
    table = te.placeholder((256,), "int8", name="table")
    out = te.compute(shape, lambda *i: table[x(*i).astype("int32") + 128], name="out")
    return te.create_prim_func([x, table, out])
