"""QUANTIZE and DEQUANTIZE kernels with TFLite Micro's arithmetic for the int16 cases (quantize_common.cc,
dequantize.cc; reference/quantize.h, dequantize.h, requantize.h): float32 -> int16 at a model's float input,
int16 -> float32 at its float output, and the integer requantizations that join int8 and int16 parts of a model
(int8 -> int16, int16 -> int8, int16 -> int16), a uint8 model input (uint8 -> int8) and the int32 outputs
(int8 or int16 -> int32). The int8-only cases (float32 -> int8, int8 -> float32,
int8 -> int8) are int8_ops.quantize_float / dequantize_float / requantize, built by passes/integerize.py.
"""

from __future__ import annotations

from tvm import te, tirx

from .fixed_point import clamp_to_int8, multiply_by_quantized_multiplier


def _type_range(dtype: str) -> tuple[int, int]:
    """The values of an integer type (int8 ... int32, uint8), what TFLM's Requantize clamps to."""
    if dtype.startswith("uint"):
        return 0, (1 << int(dtype[4:])) - 1
    bits = int(dtype[3:])
    return -(1 << (bits - 1)), (1 << (bits - 1)) - 1


def requantize(shape, in_dtype: str, out_dtype: str, in_zp: int, multiplier: int, shift: int, out_zp: int):
    """QUANTIZE between integer types (TFLM's Requantize): (x - in_zp) times QuantizeMultiplier(in / out)
    (MultiplyByQuantizedMultiplier's int32 form, double rounding), plus out_zp, clamped to the output type.
    TFLM's one shortcut (int8 <-> uint8 at the same scale with zero points 128 apart: x ^ 0x80) computes the same
    values as this general form (the multiplier is then exactly 1), so it needs no kernel of its own."""
    lo, hi = _type_range(out_dtype)
    x = te.placeholder(tuple(shape), in_dtype, name="x")

    def out_fn(*i):
        v = multiply_by_quantized_multiplier(x[i].astype("int32") - in_zp, multiplier, shift) + out_zp
        return clamp_to_int8(v, lo, hi, out_dtype)

    out = te.compute(tuple(shape), out_fn, name="out")
    return te.create_prim_func([x, out])


def quantize_float(shape, out_dtype: str, scale: float, zero_point: int):
    """QUANTIZE float32 -> integer, TFLM's AffineQuantize: round(x / scale) + zp, clamped to the type.

    The quotient is a float32 division (TFLM: ``val / static_cast<float>(scale)``) rounded as std::round (ties
    away from zero), done exactly without roundf: with t = trunc(q), q - t is exact in float32, so comparing it
    with +-0.5 decides a tie as roundf. q is first clamped to +-2^24 (exact in float32, far outside int16 after
    any zero point) so the conversion to int32 is defined."""
    lo, hi = _type_range(out_dtype)
    x = te.placeholder(tuple(shape), "float32", name="x")
    limit = tirx.const(float(1 << 24), "float32")

    def out_fn(*i):
        q = x[i] / tirx.const(float(scale), "float32")
        q = tirx.Min(tirx.Max(q, -limit), limit)
        t = q.astype("int32")  # truncation toward zero
        frac = q - t.astype("float32")
        rounded = t + tirx.Select(frac >= 0.5, 1, 0) - tirx.Select(frac <= -0.5, 1, 0)
        return clamp_to_int8(rounded + zero_point, lo, hi, out_dtype)

    out = te.compute(tuple(shape), out_fn, name="out")
    return te.create_prim_func([x, out])


def dequantize(shape, in_dtype: str, scale: float, zero_point: int):
    """DEQUANTIZE integer -> float32, TFLM: static_cast<float>(double(scale) * (x - zp)). For int16 (and uint8),
    (x - zp) has at most 17 bits and the float32 scale 24, so the double product is exact and one float32 multiply
    (correctly rounded) gives the same float."""
    x = te.placeholder(tuple(shape), in_dtype, name="x")
    out = te.compute(
        tuple(shape),
        lambda *i: (x[i].astype("int32") - zero_point).astype("float32") * tirx.const(float(scale), "float32"),
        name="out",
    )
    return te.create_prim_func([x, out])
