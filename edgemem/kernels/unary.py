"""int8 element-wise unary operators as 256-entry tables computed at build time with TFLite Micro's arithmetic,
and PRELU (two operands: the input and a broadcast alpha) as a TE kernel.

An int8 operator of one int8 input has only 256 possible inputs: edgemem runs TFLM's per-element arithmetic
here, in Python integers (or in float32 where TFLM's Prepare builds its own table in float), once per
operator, and the device looks the result up (``logistic.table_lookup``). Every table is indexed by
``input + 128``. The integer helpers mirror gemmlowp/TFLite semantics: int32 wrap-around where C wraps,
SaturatingRoundingDoublingHighMul, RoundingDivideByPOT, MultiplyByQuantizedMultiplier with double rounding.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import math

import numpy as np
from tvm import te, tirx

from .fixed_point import clamp_to_int8, multiply_by_quantized_multiplier, quantize_multiplier
from .logistic import INT32_MAX, _div_pot, _exp_negative, _high_mul, _mul_pot, _multiply_by_quantized_multiplier, _trunc_div, _wrap

_INT8 = range(-128, 128)


def _clamp8(v: int) -> int:
    return min(max(v, -128), 127)


def _f32(x) -> np.float32:
    return np.float32(x)


# ------------------------------------------------------------------ ABS

def abs_table(in_scale: float, in_zp: int, out_scale: float, out_zp: int) -> np.ndarray:
    """TFLM's int8 ABS: |x - zp_in|, rescaled by QuantizeMultiplier(double(float s_in / s_out)) unless the
    two scales are equal (then copied), plus zp_out, clamped."""
    rescale = np.float32(in_scale) != np.float32(out_scale)
    m, s = quantize_multiplier(float(_f32(in_scale) / _f32(out_scale))) if rescale else (0, 0)
    out = np.empty(256, np.int8)
    for i, v in enumerate(_INT8):
        a = abs(v - in_zp)
        out[i] = _clamp8((_multiply_by_quantized_multiplier(a, m, s) if rescale else a) + out_zp)
    return out


# ------------------------------------------------------------------ RSQRT

def _inv_sqrt_multiplier_exp(x: int) -> tuple[int, int]:
    """TFLite's GetInvSqrtQuantizedMultiplierExp(x, kReverseShift=-1): (Q0.31 multiplier, left shift) of
    1/sqrt(x), by 5 Newton-Raphson steps in Q3.28."""
    if x <= 1:
        return INT32_MAX, 0
    shift = 11
    while x >= (1 << 29):
        x //= 4
        shift += 1
    clz = 32 - x.bit_length()
    pairs = (clz - 1) // 2 - 1
    shift -= pairs
    x <<= 2 * pairs
    fp_input = x >> 1  # Q3.28
    half_input = _mul_pot(fp_input, -1)
    half_three = (1 << 28) + (1 << 27)
    y = 1 << 28  # F3 one
    for _ in range(5):
        y3 = _mul_pot(_high_mul(_high_mul(y, y), y), 6)  # Rescale<3> of a Q9 value
        y = _mul_pot(_wrap(_high_mul(half_three, y) - _high_mul(half_input, y3)), 3)  # Rescale<3> of Q6
    y = _high_mul(y, 1518500250)  # * sqrt(2)/2
    if shift < 0:
        y = _wrap(y << -shift)
        shift = 0
    return y, -shift


def rsqrt_table(in_scale: float, in_zp: int, out_scale: float, out_zp: int) -> np.ndarray:
    """TFLM's int8 RSQRT: 1/sqrt(x - zp_in) with the multiplier 1 / (sqrt(float s_in) * s_out) (float32
    product, double division); x == zp_in gives 127. TFLM refuses inputs below the input's zero point at run
    time (Invoke fails); the table holds what its arithmetic would give (TFLM has no result there)."""
    m, s = quantize_multiplier(1.0 / float(np.sqrt(_f32(in_scale)) * _f32(out_scale)))
    out = np.empty(256, np.int8)
    for i, v in enumerate(_INT8):
        x = v - in_zp
        if x == 0:
            out[i] = 127
            continue
        inv, inv_shift = _inv_sqrt_multiplier_exp(max(x, 0))
        data = _multiply_by_quantized_multiplier(1, inv, inv_shift + 20)
        out[i] = _clamp8(_multiply_by_quantized_multiplier(data, m, s - 20) + out_zp)
    return out


# ------------------------------------------------------------------ TANH

def _one_minus_x_over_one_plus_x(a: int) -> int:
    """gemmlowp's (1 - a) / (1 + a) for a in [0, 1] in Q0.31: Newton-Raphson in Q2.29."""
    s = a + INT32_MAX
    half_denominator = _trunc_div(s + (1 if s >= 0 else -1), 2)  # RoundingHalfSum(a, 1)
    x = _wrap(1515870810 + _high_mul(half_denominator, -1010580540))
    for _ in range(3):
        one_minus = _wrap((1 << 29) - _high_mul(half_denominator, x))
        x = _wrap(x + _mul_pot(_high_mul(x, one_minus), 2))
    return _mul_pot(_wrap(x - (1 << 29)), 2)  # Rescale<0> of a Q2.29 value


def tanh_q0(a: int, integer_bits: int = 4) -> int:
    """gemmlowp's tanh of a raw Q(integer_bits) value, a raw Q0.31 value."""
    if a == 0:
        return 0
    t = _one_minus_x_over_one_plus_x(_exp_negative(_wrap(-abs(a)), integer_bits + 1))  # exp(2 * -|a|)
    return t if a > 0 else _wrap(-t)


def _input_radius(integer_bits: int, left_shift: int, total_bits: int = 31) -> int:
    """TFLite's CalculateInputRadius (double arithmetic, floored)."""
    max_rescaled = float((1 << integer_bits) - 1) * float(1 << (total_bits - integer_bits)) / float(2.0**left_shift)
    return int(math.floor(max_rescaled))


def tanh_table(in_scale: float, in_zp: int) -> np.ndarray:
    """TFLM's int8 TANH (output scale 1/128, zero point 0 whatever the file says, as TFLM ignores it): the
    input rescaled to Q4.27 by frexp(double(s_in) * 2^27), gemmlowp's tanh, rounded to 1/128."""
    real = float(np.float32(in_scale)) * float(1 << 27)
    q, left_shift = math.frexp(real)
    multiplier = int(math.copysign(math.floor(abs(q) * (1 << 31) + 0.5), q))
    radius = _input_radius(4, left_shift)
    out = np.empty(256, np.int8)
    for i, v in enumerate(_INT8):
        x = v - in_zp
        if x <= -radius:
            out[i] = -128
        elif x >= radius:
            out[i] = 127
        else:
            out[i] = _clamp8(_div_pot(tanh_q0(_multiply_by_quantized_multiplier(x, multiplier, left_shift)), 24))
    return out


# ------------------------------------------------------------------ ELU (TFLM builds a float table)

_LIBM = ctypes.CDLL(ctypes.util.find_library("m") or "libm.so.6")
_LIBM.expf.restype = ctypes.c_float
_LIBM.expf.argtypes = [ctypes.c_float]


def _expf(x: np.float32) -> np.float32:
    """The C library's expf (what std::exp(float) calls in TFLM), not numpy's own exp."""
    return np.float32(_LIBM.expf(float(x)))


def _round_half_away_f32(x: np.float32) -> np.float32:
    """std::round on a float: ties away from zero (exact for float32 values)."""
    return np.float32(math.copysign(math.floor(abs(float(x)) + 0.5), float(x)))


def float_table(in_scale: float, in_zp: int, out_scale: float, out_zp: int, fn) -> np.ndarray:
    """TFLM's PopulateLookupTable<int8_t>: float32 dequantize, fn (float32 -> float32), multiply by the float32
    1/s_out, std::round, + zp_out (float), truncated to int32 and clamped."""
    with np.errstate(over="ignore", invalid="ignore"):
        inverse = np.float32(1.0) / np.float32(out_scale)
        out = np.empty(256, np.int8)
        for i, v in enumerate(_INT8):
            deq = np.float32(in_scale) * np.float32(v - in_zp)
            q = _round_half_away_f32(np.float32(fn(deq)) * inverse) + np.float32(out_zp)
            q = int(q) if math.isfinite(float(q)) and abs(float(q)) < 2**31 else (INT32_MAX if q > 0 else -(2**31))
            out[i] = _clamp8(q)
    return out


def elu_table(in_scale: float, in_zp: int, out_scale: float, out_zp: int) -> np.ndarray:
    """TFLM's int8 ELU: x < 0 ? expf(x) - 1 : x, through float_table."""
    return float_table(in_scale, in_zp, out_scale, out_zp, lambda x: (_expf(x) - np.float32(1.0)) if x < 0 else x)


# ------------------------------------------------------------------ HARD_SWISH (int16 fixed point)

def _i16(v: int) -> int:
    return (v + 2**15) % 2**16 - 2**15


def _high_mul16(a: int, b: int) -> int:
    """gemmlowp's int16 SaturatingRoundingDoublingHighMul."""
    if a == b == -(2**15):
        return 2**15 - 1
    ab = a * b
    nudge = (1 << 14) if ab >= 0 else 1 - (1 << 14)
    return _i16(_trunc_div(ab + nudge, 1 << 15))


def _doubling_high_mul16(a: int, b: int) -> int:
    """TFLite's SaturatingDoublingHighMul (int16, truncating: no rounding nudge)."""
    if a == b == -(2**15):
        return 2**15 - 1
    return _i16(_trunc_div(a * b, 1 << 15))


def _saturating_left_shift16(v: int, amount: int) -> int:
    return min(max(v * (1 << amount), -(2**15)), 2**15 - 1)


def _downscale_to_int16(m: int) -> int:
    """TFLite's DownScaleInt32ToInt16Multiplier."""
    if m >= INT32_MAX - (1 << 15):
        return 2**15 - 1
    return (m + (1 << 15)) >> 16


def hard_swish_params(in_scale: float, out_scale: float) -> tuple[int, int, int, int]:
    """(output multiplier int16, its exponent, reluish multiplier int16, its exponent) as TFLM's Prepare."""
    hires = np.float32(1.0 / 128.0) * np.float32(in_scale)
    out_m, out_e = quantize_multiplier(float(hires / np.float32(out_scale)))
    relu_m, relu_e = quantize_multiplier(float(hires / np.float32(3.0 / 32768.0)))
    return _downscale_to_int16(out_m), out_e, _downscale_to_int16(relu_m), relu_e


def hard_swish_table(in_scale: float, in_zp: int, out_scale: float, out_zp: int) -> np.ndarray:
    """TFLM's int8 HARD_SWISH (reference_ops::HardSwish on int16 fixed point), for every input."""
    out_m, out_e, relu_m, relu_e = hard_swish_params(in_scale, out_scale)
    out = np.empty(256, np.int8)
    for i, v in enumerate(_INT8):
        x = _i16(v - in_zp)
        hires = _i16(x * 128)
        preshift = _high_mul16(hires, out_m)
        r = hires
        if relu_e > 0:
            r = _saturating_left_shift16(r, relu_e - 1)
        r = _high_mul16(r, relu_m)
        if relu_e > 0:
            r = _saturating_left_shift16(r, 1)
        if relu_e < 0:
            r = _i16(_div_pot(r, -relu_e))
        r = _i16((r + (1 << 15)) >> 1)
        y = _doubling_high_mul16(r, preshift)
        y = _i16(_div_pot(y, -out_e) + out_zp)
        out[i] = _clamp8(y)
    return out


# ------------------------------------------------------------------ LEAKY_RELU

def leaky_relu_table(in_scale: float, in_zp: int, out_scale: float, out_zp: int, alpha: float) -> np.ndarray:
    """TFLM's int8 LEAKY_RELU: x - zp_in >= 0 scaled by s_in / s_out, else by s_in * alpha / s_out (float32
    products, a negative alpha's multiplier applied to |multiplier| and negated), + zp_out, clamped."""
    m_alpha, s_alpha = quantize_multiplier_signed(float(np.float32(in_scale) * np.float32(alpha) / np.float32(out_scale)))
    m_id, s_id = quantize_multiplier(float(np.float32(in_scale) / np.float32(out_scale)))
    out = np.empty(256, np.int8)
    for i, v in enumerate(_INT8):
        x = v - in_zp
        if x >= 0:
            y = _multiply_by_quantized_multiplier(x, m_id, s_id)
        else:
            y = _multiply_by_quantized_multiplier(x, abs(m_alpha), s_alpha)
            y = -y if m_alpha < 0 else y
        out[i] = _clamp8(out_zp + y)
    return out


def quantize_multiplier_signed(real: float) -> tuple[int, int]:
    """TFLite's QuantizeMultiplier for a multiplier of either sign (frexp keeps the sign in q)."""
    if real >= 0:
        return quantize_multiplier(real)
    m, s = quantize_multiplier(-real)
    return -m, s


# ------------------------------------------------------------------ PRELU

def prelu_kernel(shape, alpha_shape, in_zp: int, alpha_zp: int, out_zp: int, m1: int, s1: int, m2: int, s2: int,
                 dtype: str = "int8"):
    """TFLM's int8 or int16 (``dtype``, the input's and output's) PRELU (BroadcastPrelu4DSlow), alpha int8:
    x - zp_in >= 0 -> MBQM(x - zp_in, m1, s1), else MBQM((x - zp_in) * (alpha - zp_alpha), m2, s2); + zp_out,
    clamped. ``alpha`` broadcasts to ``shape`` numpy-style (right-aligned, size-1 dimensions repeat)."""
    x = te.placeholder(shape, dtype, name="x")
    alpha = te.placeholder(alpha_shape, "int8", name="alpha")
    lead = len(shape) - len(alpha_shape)

    def out_fn(*idx):
        a_idx = [0 if alpha_shape[k] == 1 else idx[lead + k] for k in range(len(alpha_shape))]
        xv = x[idx].astype("int32") - in_zp
        av = alpha[tuple(a_idx)].astype("int32") - alpha_zp
        pos = multiply_by_quantized_multiplier(xv, m1, s1)
        neg = multiply_by_quantized_multiplier(xv * av, m2, s2)
        lo, hi = (-128, 127) if dtype == "int8" else (-(2**15), 2**15 - 1)
        return clamp_to_int8(tirx.Select(xv >= 0, pos, neg) + out_zp, lo, hi, dtype)

    return te.create_prim_func([x, alpha, te.compute(shape, out_fn, name="out")])
