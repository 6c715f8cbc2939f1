"""TFLite Micro's fixed-point requantization, on the host (multipliers) and in TIR (kernels).

TFLM's reference kernels requantize an int32 accumulator with gemmlowp-style *double* rounding:
``RoundingDivideByPOT(SaturatingRoundingDoublingHighMul(x << left, multiplier), right)``.
Reproducing it operation for operation is what makes our int8 outputs bit-exact; a float
multiply, or single rounding (LiteRT's reference), differs on ties.
"""

from __future__ import annotations

import math

import numpy as np
from tvm import tirx

INT32_MIN = -(2**31)
INT32_MAX = 2**31 - 1


def _round_half_away(x: float) -> float:
    """C's std::round (ties away from zero); Python's round() would round ties to even."""
    return math.copysign(math.floor(abs(x) + 0.5), x)


def quantize_multiplier(real_multiplier: float) -> tuple[int, int]:
    """Split a positive real multiplier into (int32 significand in Q0.31, power-of-two shift).

    Same steps as TFLite's QuantizeMultiplier: frexp, round, renormalise on overflow, flush
    tiny values to zero.
    """
    if real_multiplier == 0.0:
        return 0, 0
    q, shift = math.frexp(real_multiplier)
    q_fixed = int(_round_half_away(q * (1 << 31)))
    if q_fixed == (1 << 31):
        q_fixed //= 2
        shift += 1
    if shift < -31:
        return 0, 0
    if shift > 30:
        # TFLite clamps here too: such a multiplier cannot be represented.
        shift, q_fixed = 30, (1 << 31) - 1
    return q_fixed, shift


def conv_multipliers(input_scale: float, filter_scales, output_scale: float) -> tuple[np.ndarray, np.ndarray]:
    """Per-channel (multiplier, shift) for CONV_2D / DEPTHWISE_CONV_2D, as TFLM computes them:
    in double, from the float32 scales."""
    mults, shifts = [], []
    for fs in np.asarray(filter_scales, dtype=np.float32).reshape(-1):
        eff = float(np.float32(input_scale)) * float(fs) / float(np.float32(output_scale))
        m, s = quantize_multiplier(eff)
        mults.append(m)
        shifts.append(s)
    return np.array(mults, dtype=np.int32), np.array(shifts, dtype=np.int32)


def fully_connected_multiplier(input_scale: float, filter_scale: float, output_scale: float) -> tuple[int, int]:
    """FULLY_CONNECTED: TFLM multiplies the two float32 scales in float before widening."""
    product = float(np.float32(input_scale) * np.float32(filter_scale))
    return quantize_multiplier(product / float(np.float32(output_scale)))


def quantize_round(value: float, scale: float, zero_point: int) -> int:
    """TFLite's activation-range quantization: zero_point + round(f / scale), f/scale in float32."""
    return int(zero_point + _round_half_away(float(np.float32(value) / np.float32(scale))))


# ---------------------------------------------------------------- TIR expressions

def _i32(v) -> tirx.PrimExpr:
    return tirx.const(v, "int32") if isinstance(v, int) else v


def saturating_rounding_doubling_high_mul(a: tirx.PrimExpr, b: tirx.PrimExpr) -> tirx.PrimExpr:
    """gemmlowp's SaturatingRoundingDoublingHighMul for int32 a, b (b > 0, so it never saturates)."""
    ab = tirx.Cast("int64", a) * tirx.Cast("int64", b)
    nudge = tirx.Select(ab >= tirx.const(0, "int64"), tirx.const(1 << 30, "int64"), tirx.const(1 - (1 << 30), "int64"))
    # C division truncates toward zero; so does gemmlowp's, and so does truncdiv.
    return tirx.Cast("int32", tirx.truncdiv(ab + nudge, tirx.const(1 << 31, "int64")))


def rounding_divide_by_pot(x: tirx.PrimExpr, exponent: tirx.PrimExpr) -> tirx.PrimExpr:
    """gemmlowp's RoundingDivideByPOT: arithmetic shift right, rounding half away from zero."""
    one = tirx.const(1, "int32")
    mask = (one << exponent) - one
    remainder = tirx.bitwise_and(x, mask)
    threshold = (mask >> one) + tirx.Select(x < tirx.const(0, "int32"), one, tirx.const(0, "int32"))
    return (x >> exponent) + tirx.Select(remainder > threshold, one, tirx.const(0, "int32"))


def multiply_by_quantized_multiplier(x: tirx.PrimExpr, multiplier, shift) -> tirx.PrimExpr:
    """TFLite's MultiplyByQuantizedMultiplier (double rounding) in TIR; multiplier/shift may be
    Python ints (per-tensor) or int32 expressions (per-channel loads)."""
    multiplier, shift = _i32(multiplier), _i32(shift)
    zero = tirx.const(0, "int32")
    left = tirx.Max(shift, zero)
    right = tirx.Max(zero - shift, zero)
    # x * 2^left, written as a multiply because a left shift of a negative int is UB in C.
    shifted = x * (tirx.const(1, "int32") << left)
    return rounding_divide_by_pot(saturating_rounding_doubling_high_mul(shifted, multiplier), right)


def clamp_to_int8(x: tirx.PrimExpr, act_min: int, act_max: int, dtype: str = "int8") -> tirx.PrimExpr:
    return tirx.Cast(dtype, tirx.Min(tirx.Max(x, tirx.const(act_min, "int32")), tirx.const(act_max, "int32")))
