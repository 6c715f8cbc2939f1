"""gemmlowp's fixed-point functions on Python ints (host side, build time), as TFLite's reference kernels use
them: the exp and reciprocal of SOFTMAX / LOG_SOFTMAX. Each works on int32 raw values (Python ints that stay in
the int32 range, as the C does for the inputs TFLM gives them); used to compute tables and to check kernels.
"""

from __future__ import annotations

INT32_MIN = -(2**31)
INT32_MAX = 2**31 - 1


def srdhm(a: int, b: int) -> int:
    """SaturatingRoundingDoublingHighMul: (2ab + 2^31 nudge) / 2^32, truncating, saturated for MIN*MIN."""
    if a == b == INT32_MIN:
        return INT32_MAX
    ab = a * b
    nudge = (1 << 30) if ab >= 0 else 1 - (1 << 30)
    q = ab + nudge
    return q >> 31 if q >= 0 else -((-q) >> 31)


def rdbpot(x: int, exponent: int) -> int:
    """RoundingDivideByPOT: x / 2^exponent, ties away from zero."""
    mask = (1 << exponent) - 1
    remainder = x & mask
    threshold = (mask >> 1) + (1 if x < 0 else 0)
    return (x >> exponent) + (1 if remainder > threshold else 0)


def sat_mul_pot(x: int, exponent: int) -> int:
    """SaturatingRoundingMultiplyByPOT: a saturating left shift (exponent > 0) or a rounding right shift."""
    if exponent <= 0:
        return rdbpot(x, -exponent)
    threshold = (1 << (31 - exponent)) - 1
    if x > threshold:
        return INT32_MAX
    if x < -threshold:
        return INT32_MIN
    return x << exponent


def _exp_on_interval(a: int) -> int:
    """exp_on_interval_between_negative_one_quarter_and_0_excl (Q0.31 in and out)."""
    constant_term, one_third = 1895147668, 715827883
    x = a + (1 << 28)
    x2 = srdhm(x, x)
    x3 = srdhm(x2, x)
    x4 = srdhm(x2, x2)
    x4_over_4 = rdbpot(x4, 2)
    poly = rdbpot(srdhm(x4_over_4 + x3, one_third) + x2, 1)
    return constant_term + srdhm(constant_term, x + poly)


_BARREL = ((-2, 1672461947), (-1, 1302514674), (0, 790015084), (1, 290630308), (2, 39332535), (3, 720401), (4, 242))


def exp_on_negative_values(a: int, integer_bits: int) -> int:
    """exp(a) for a <= 0 in Q(integer_bits), result in Q0.31."""
    fractional_bits = 31 - integer_bits
    quarter = 1 << (fractional_bits - 2)
    amq = (a & (quarter - 1)) - quarter
    result = _exp_on_interval(sat_mul_pot(amq, integer_bits))
    remainder = amq - a
    for exponent, multiplier in _BARREL:
        if integer_bits > exponent and remainder & (1 << (fractional_bits + exponent)):
            result = srdhm(result, multiplier)
    if integer_bits > 5 and a < -(1 << (fractional_bits + 5)):
        result = 0
    return INT32_MAX if a == 0 else result


def rounding_half_sum(a: int, b: int) -> int:
    s = a + b
    s += 1 if s >= 0 else -1
    return s // 2 if s >= 0 else -((-s) // 2)


def one_over_one_plus_x_for_x_in_0_1(a: int) -> int:
    """1 / (1 + a) for a in [0, 1) (Q0.31): three Newton-Raphson steps in Q2.29."""
    half_denominator = rounding_half_sum(a, INT32_MAX)
    x = 1515870810 + srdhm(half_denominator, -1010580540)
    for _ in range(3):
        one_minus = (1 << 29) - srdhm(half_denominator, x)
        x = x + sat_mul_pot(srdhm(x, one_minus), 2)
    return sat_mul_pot(x, 1)


def get_reciprocal(x: int, integer_digits: int) -> tuple[int, int]:
    """TFLite's GetReciprocal of a positive Q(integer_digits) value: (shifted scale Q0.31, num_bits_over_unit)."""
    headroom_plus_one = 32 - x.bit_length()  # CountLeadingZeros of the uint32
    shifted_minus_one = ((x << headroom_plus_one) - (1 << 31)) & 0xFFFFFFFF
    if shifted_minus_one >= 1 << 31:
        shifted_minus_one -= 1 << 32
    return one_over_one_plus_x_for_x_in_0_1(shifted_minus_one), integer_digits - headroom_plus_one


def multiply_by_quantized_multiplier_greater_than_one(x: int, multiplier: int, left_shift: int) -> int:
    return srdhm(x * (1 << left_shift), multiplier)


def sat_add(a: int, b: int) -> int:
    return max(INT32_MIN, min(INT32_MAX, a + b))


def clz32(x: int) -> int:
    return 32 - (x & 0xFFFFFFFF).bit_length()


LOG_2, SQRT_SQRT_HALF, SQRT_HALF = 1488522236, 1805811301, 1518500250
ALPHA_N, ALPHA_D, ALPHA_I, ALPHA_F = 117049297, 127690142, 1057819769, 638450708


def log_x_ge_1(x: int, input_integer_bits: int, output_integer_bits: int) -> int:
    """TFLite's log_x_for_x_greater_than_or_equal_to_1_impl: log of a positive Q(input) value, Q(output) result."""
    accum_bits = output_integer_bits + 1
    shifted_quarter = sat_mul_pot(1 << 29, -accum_bits)
    h_a = clz32(x)
    r_a = sat_mul_pot(srdhm(sat_mul_pot(x, h_a - 1), SQRT_HALF), 1)
    z_a_adj = sat_add(sat_mul_pot(input_integer_bits - h_a, 31 - accum_bits), shifted_quarter)
    h_b = clz32(srdhm(x, SQRT_HALF)) - 1
    r_b = sat_mul_pot(x, h_b)
    z_b_adj = sat_add(sat_mul_pot(input_integer_bits - h_b, 31 - accum_bits), -shifted_quarter)
    r, z_adj = min(r_a, r_b), max(z_a_adj, z_b_adj)
    p = rounding_half_sum(r, SQRT_SQRT_HALF)
    q = 2 * (r - SQRT_SQRT_HALF)
    common_sq = srdhm(q, q)
    num = srdhm(q, r) + srdhm(srdhm(q, common_sq), ALPHA_N)
    denom_minus_one = srdhm(p, ALPHA_I + q + srdhm(ALPHA_D, common_sq)) + srdhm(ALPHA_F, q)
    recip = one_over_one_plus_x_for_x_in_0_1(denom_minus_one)
    num_scaled = sat_mul_pot(num, -accum_bits)
    return sat_mul_pot(srdhm(z_adj, LOG_2) + srdhm(num_scaled, recip), accum_bits - output_integer_bits)
