"""TFLite Micro's fixed-point requantization, on the host (multipliers) and in TIR (kernels).

TFLM's reference kernels requantize an int32 accumulator with gemmlowp-style *double* rounding:
``RoundingDivideByPOT(SaturatingRoundingDoublingHighMul(x << left, multiplier), right)``.
Reproducing its results exactly (the TIR below uses an equivalent, branch-free form) is what
makes our int8 outputs bit-exact; a float multiply, or single rounding (LiteRT's reference),
differs on ties.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import NamedTuple

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


def activation_range(kind: str, scale: float, zero_point: int, lo: int = -128, hi: int = 127) -> tuple[int, int]:
    """TFLite's CalculateActivationRangeQuantized: the clamp of a fused activation (NONE, RELU, RELU6,
    RELU_N1_TO_1) on an output of range [lo, hi] (int8 by default; int16: -32768, 32767)."""
    bounds = {"RELU": (0.0, None), "RELU6": (0.0, 6.0), "RELU_N1_TO_1": (-1.0, 1.0)}.get(kind)
    if bounds is None:
        return lo, hi
    low = max(lo, quantize_round(bounds[0], scale, zero_point))
    return low, hi if bounds[1] is None else min(hi, quantize_round(bounds[1], scale, zero_point))


# ---------------------------------------------------------------- TIR expressions
#
# Written without Select or division, each intermediate used at most twice: a TIR expression is a
# tree, so the textbook form (x used three times per level) grew exponentially in nested
# requantizations and te.create_prim_func's simplifier took minutes on ADD. (Let bindings would
# share the values but trip TVM's NarrowDataType bound memo.) Shifts and adds in int64 are also
# cheaper on Cortex-M than the int64 division of the textbook SaturatingRoundingDoublingHighMul.

def _i32(v) -> tirx.PrimExpr:
    return tirx.const(v, "int32") if isinstance(v, int) else v


def _i64(v) -> tirx.PrimExpr:
    return tirx.const(v, "int64") if isinstance(v, int) else tirx.Cast("int64", v)


def saturating_rounding_doubling_high_mul(a: tirx.PrimExpr, b) -> tirx.PrimExpr:
    """gemmlowp's SaturatingRoundingDoublingHighMul for int32 a and b >= 0, as an int64 value.

    gemmlowp adds 2^30 (ab >= 0) or 1 - 2^30 (ab < 0) and truncates toward zero; for either sign
    that equals floor((ab + 2^30) / 2^31), an arithmetic shift. It saturates only for
    a = b = INT32_MIN, impossible with b >= 0."""
    return (_i64(a) * _i64(b) + tirx.const(1 << 30, "int64")) >> tirx.const(31, "int64")


def rounding_divide_by_pot(x: tirx.PrimExpr, exponent) -> tirx.PrimExpr:
    """gemmlowp's RoundingDivideByPOT (x / 2^exponent, ties away from zero) of an int64 x that
    fits in int32; exponent in [0, 31]. Returns int32.

    With x = q * 2^e + r (0 <= r < 2^e), gemmlowp gives q + [r >= 2^(e-1) + (x < 0)], which is
    floor((x + 2^(e-1) - (x < 0)) / 2^e) for e >= 1, and x for e = 0."""
    if isinstance(exponent, int):
        if exponent == 0:
            return tirx.Cast("int32", x)
        half, negative_fix = _i64(1 << (exponent - 1)), tirx.const(1, "int64")
    else:
        e = _i64(exponent)
        half = (tirx.const(1, "int64") << e) >> tirx.const(1, "int64")
        negative_fix = tirx.Min(e, tirx.const(1, "int64"))  # 0 when exponent == 0
    sign = (x >> tirx.const(63, "int64")) & negative_fix  # 1 for x < 0 (and e >= 1), else 0
    return tirx.Cast("int32", (x + half - sign) >> _i64(exponent))


def multiply_by_quantized_multiplier(x: tirx.PrimExpr, multiplier, shift) -> tirx.PrimExpr:
    """TFLite's MultiplyByQuantizedMultiplier (double rounding) in TIR; multiplier/shift may be
    Python ints (per-tensor) or int32 expressions (per-channel loads)."""
    if isinstance(shift, int):
        left, right = max(shift, 0), max(-shift, 0)
    else:
        zero = tirx.const(0, "int32")
        left, right = tirx.Max(shift, zero), tirx.Max(zero - shift, zero)
    # x * 2^left in int32 as TFLM does, a multiply because a left shift of a negative int is UB in C.
    shifted = x * (tirx.const(1, "int32") << _i32(left))
    return rounding_divide_by_pot(saturating_rounding_doubling_high_mul(shifted, multiplier), right)


def multiply_by_quantized_multiplier_wrapping(x, multiplier: int, shift: int):
    """TFLite's MultiplyByQuantizedMultiplier (int32 overload, double rounding) where ``x * 2^shift`` may leave
    int32: TFLM computes that product in int32 (marked no-sanitize) and x86 wraps it; here it is computed on
    int64 and narrowed (C's signed overflow is undefined, a narrowing conversion is not). Reached by int16 MUL
    and SQUARED_DIFFERENCE, whose products fill 31 bits, and by int8 MUL whose multiplier is above 2^15 (an
    output scale far below the inputs' product: 255 * 255 * 2^17 leaves int32)."""
    if shift <= 0:
        return multiply_by_quantized_multiplier(x, multiplier, shift)
    shifted = (x.astype("int64") * tirx.const(1 << shift, "int64")).astype("int32")
    return rounding_divide_by_pot(saturating_rounding_doubling_high_mul(shifted, multiplier), 0)


def clamp_to_int8(x: tirx.PrimExpr, act_min: int, act_max: int, dtype: str = "int8") -> tirx.PrimExpr:
    return tirx.Cast(dtype, tirx.Min(tirx.Max(x, tirx.const(act_min, "int32")), tirx.const(act_max, "int32")))


# ---------------------------------------------------------------- more operators' host-side multipliers

def _f64(scale) -> float:
    """A float32 quantization scale widened to double, as TFLM's static_cast<double>."""
    return float(np.float32(scale))


def rescale_multiplier(input_scale: float, output_scale: float) -> tuple[int, int]:
    """QUANTIZE (int8 -> int8) and MEAN: QuantizeMultiplier(double(in) / double(out))."""
    return quantize_multiplier(_f64(input_scale) / _f64(output_scale))


def mul_multiplier(scale1: float, scale2: float, output_scale: float) -> tuple[int, int]:
    """MUL: QuantizeMultiplier(double(s1) * double(s2) / double(out))."""
    return quantize_multiplier(_f64(scale1) * _f64(scale2) / _f64(output_scale))


def mean_multiplier(input_scale: float, output_scale: float, count: int) -> tuple[int, int]:
    """MEAN over ``count`` elements, TFLM's QuantizedMeanOrSum: the rescale multiplier with
    1/count folded in by shifting the significand left by floor(log2(count)) (at most 32, and
    keeping the final shift >= -31) and dividing it by count in int64 (truncating)."""
    multiplier, shift = rescale_multiplier(input_scale, output_scale)
    extra = min(count.bit_length() - 1, 32, 31 + shift)
    multiplier = (multiplier << extra) // count  # both non-negative: C's truncation is floor
    return int(multiplier), shift - extra


class AddRescale(NamedTuple):
    """TFLM's ADD-family multipliers: each input to the common scale, then the (left-shifted) sum to the output."""

    m1: int
    sh1: int
    m2: int
    sh2: int
    mo: int
    sho: int


def add_rescale(scale1: float, scale2: float, output_scale: float, left_shift: int, *, squared: bool = False,
                refuse: Callable[[str, float], None] | None = None) -> AddRescale:
    """ADD / SUB / ADD_N / CUMSUM (and SQUARED_DIFFERENCE with ``squared``), as TFLM's Prepare computes them:
    both inputs rescaled to twice the larger input scale, in double (add_common.cc; the tflite_micro build
    edgemem is checked against rounds as double), the result of the integer sum, shifted left by
    ``left_shift`` bits, rescaled to the output -- for a squared difference, the square of the common scale
    over 2^(2 left_shift) times the output scale (a float32 product there, as TFLM's).

    ``refuse(what, real)`` is called for an input multiplier (or, not squared, the output multiplier) outside
    (0, 1), which TFLM's QuantizeMultiplierSmallerThanOneExp aborts on; None: not checked."""
    s1, s2, so = np.float32(scale1), np.float32(scale2), np.float32(output_scale)
    twice = 2.0 * float(max(s1, s2))
    reals = {"first input": float(s1) / twice, "second input": float(s2) / twice}
    if squared:
        out_real = twice * twice / float(np.float32(1 << (2 * left_shift)) * so)
    else:
        out_real = reals["output"] = twice / ((1 << left_shift) * float(so))
    if refuse is not None:
        for what, real in reals.items():
            if not 0.0 < real < 1.0:
                refuse(what, real)
    return AddRescale(*quantize_multiplier(reals["first input"]), *quantize_multiplier(reals["second input"]),
                      *quantize_multiplier(out_real))  # fmt: skip
