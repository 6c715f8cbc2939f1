"""GELU on int8: a 256-entry table, as TFLite builds it (the transformer encoder's feed-forward activation).

TFLite's GELU kernel (LiteRT's; TFLite Micro has none, so LiteRT is the oracle) fills a lookup table in Prepare:
for every int8 input q, x = in_scale * (q - in_zp) in float32, y = gelu(x) in float32 -- exact,
0.5 x (1 + erf(x sqrt(1/2))), or with GeluOptions.approximate the tanh form 0.5 x (1 + tanh(sqrt(2/pi) (x +
0.044715 x^3))) -- then round(y * (1 / out_scale)) (ties away from zero) + out_zp clamped to int8. Each float32
operation is reproduced in numpy's float32 in TFLite's order; erf and tanh are evaluated in double and rounded to
float32 (a libm's float erf/tanh may differ from that in the last bit, which can move a table entry by one step at
a rounding tie: within the one step allowed against LiteRT).
"""

from __future__ import annotations

import math

import numpy as np

from ...kernels.logistic import table_lookup
from .registry import OpContext, lowering

_F = np.float32


def _gelu_f32(x: np.float32, approximate: bool) -> np.float32:
    half_x = _F(_F(0.5) * x)
    if approximate:
        cube = _F(_F(_F(_F(0.044715) * x) * x) * x)
        inner = _F(_F(2.0 / math.sqrt(math.pi) * math.sqrt(0.5)) * _F(x + cube))
        return _F(half_x * _F(_F(1.0) + _F(math.tanh(float(inner)))))
    scaled = _F(x * _F(math.sqrt(0.5)))
    return _F(half_x * _F(_F(1.0) + _F(math.erf(float(scaled)))))


def gelu_table(in_scale: float, in_zp: int, out_scale: float, out_zp: int, approximate: bool) -> np.ndarray:
    """table[q + 128] = TFLite's int8 GELU of q."""
    inverse = _F(_F(1.0) / _F(out_scale))
    table = np.empty(256, np.int8)
    for q in range(-128, 128):
        x = _F(_F(in_scale) * _F(q - in_zp))
        v = float(_F(_gelu_f32(x, approximate) * inverse))
        rounded = math.floor(abs(v) + 0.5) * (1 if v >= 0 else -1)  # TfLiteRound: half away from zero
        table[q + 128] = min(127, max(-128, int(_F(_F(rounded) + _F(out_zp)))))
    return table


@lowering("GELU")
def gelu(ctx: OpContext):
    import tflite

    x, y = ctx.inputs[0], ctx.outputs[0]
    in_scale, in_zp = ctx.scale_zp(x, "input")
    out_scale, out_zp = ctx.scale_zp(y, "output")
    opts = ctx.options(tflite.GeluOptions)
    approximate = bool(opts.Approximate()) if opts is not None else False
    shape = ctx.shape(y)
    table = gelu_table(in_scale, in_zp, out_scale, out_zp, approximate)
    return ctx.emit("GELU", table_lookup(shape), [ctx.expr(x), table], shape, "int8")


@lowering("GELU", types=("float32",))
def gelu_float(ctx: OpContext):
    """float32: TVM's converter drops GeluOptions.approximate (it always computes the erf form)."""
    import tflite
    from tvm import relax

    opts = ctx.options(tflite.GeluOptions)
    approximate = bool(opts.Approximate()) if opts is not None else False
    x = ctx.expr(ctx.inputs[0])
    return ctx.conv.bb.emit(relax.op.nn.gelu_tanh(x) if approximate else relax.op.nn.gelu(x))
