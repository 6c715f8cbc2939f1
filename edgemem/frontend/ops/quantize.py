"""QUANTIZE and DEQUANTIZE where int16 is involved (see registry.py for how a lowering is written), with TFLite
Micro's arithmetic (quantize_common.cc, dequantize.cc); kernels in kernels/quantize.py.

- QUANTIZE float32 -> int16: the float input of a 16x8 model with float edges (AffineQuantize: float32
  division by the scale, std::round, zero point, clamp). float32 -> uint8 the same way: TFLM refuses it (LiteRT,
  the oracle there, runs this AffineQuantize), and TVM's QDQ import rounded its ties to even.
- DEQUANTIZE int16 or uint8 -> float32: a float output (double(scale) * (x - zp) rounded to float32).
- QUANTIZE int8 -> int16, int16 -> int8, int16 -> int16: where the int8 and int16 parts of a mixed model join,
  and the converter's requantizations inside a 16x8 model (Requantize: (x - in_zp) times
  QuantizeMultiplier(double(in) / double(out)), plus out_zp, clamped to the output type).
- QUANTIZE uint8 -> int8 (the uint8 input of an int8 model: a camera frame), int8 -> uint8 (its uint8 output) and
  int8 or int16 -> int32 (an int32 model output, as in TFLM's keyword benchmark model): the same Requantize. (int8 ->
  uint8 went through TVM's QDQ import, which computes it in float: one step off TFLM where the rescaled value falls
  near a rounding tie.)

The int8-only cases (float32 -> int8 at a model input, int8 -> float32 at an output, int8 -> int8) stay with TVM's
QDQ import and passes/integerize.py: the ``when`` predicates below
(registry.lowering) leave them to it, as they leave what TFLM's QUANTIZE refuses (uint8 -> int16, ...) to be
refused up front.
"""

from __future__ import annotations

from ...kernels import quantize as kq
from ...kernels.fixed_point import rescale_multiplier
from .registry import OpContext, lowering


def _out(t) -> str:
    return t.outputs[0] if t.outputs else "none"


@lowering("QUANTIZE", types=("float32",), when=lambda t: _out(t) in ("int16", "uint8"))
def quantize_float(ctx: OpContext):
    x, y = ctx.inputs[0], ctx.outputs[0]
    scale, zp = ctx.scale_zp(y, "output")
    shape = ctx.shape(x)
    return ctx.emit("QUANTIZE", kq.quantize_float(shape, ctx.dtype(y), scale, zp), [ctx.expr(x)], shape, ctx.dtype(y))


@lowering("QUANTIZE", types=("int8",), when=lambda t: _out(t) in ("int16", "int32", "uint8"))
@lowering("QUANTIZE", types=("int16",), when=lambda t: _out(t) in ("int8", "int16", "int32"))
@lowering("QUANTIZE", types=("uint8",), when=lambda t: _out(t) == "int8")
def requantize(ctx: OpContext):
    x, y = ctx.inputs[0], ctx.outputs[0]
    in_scale, in_zp = ctx.scale_zp(x, "input")
    out_scale, out_zp = ctx.scale_zp(y, "output")
    multiplier, shift = rescale_multiplier(in_scale, out_scale)
    shape = ctx.shape(x)
    in_dtype, out_dtype = ctx.dtype(x), ctx.dtype(y)
    prim = kq.requantize(shape, in_dtype, out_dtype, in_zp, multiplier, shift, out_zp)
    return ctx.emit("QUANTIZE", prim, [ctx.expr(x)], shape, out_dtype)


@lowering("DEQUANTIZE", types=("int16", "uint8"), when=lambda t: _out(t) == "float32")
def dequantize_to_float(ctx: OpContext):
    x = ctx.inputs[0]
    scale, zp = ctx.scale_zp(x, "input")
    shape = ctx.shape(x)
    return ctx.emit("DEQUANTIZE", kq.dequantize(shape, ctx.dtype(x), scale, zp), [ctx.expr(x)], shape, "float32")
