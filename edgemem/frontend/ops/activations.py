"""Activation functions as operators of their own (not fused into a convolution), int8.

RELU: TFLM's ReluQuantized -- the input rescaled to the output's quantization (the multiplier of the float32
quotient in_scale / out_scale), clamped at the output's zero (roundf(0 / scale) + zp). RELU6: TFLM clamps
on the *input's* quantization, [zp, zp + round(6 / scale)], and copies (its Prepare ignores the output's).
"""

from __future__ import annotations

import numpy as np
from tvm import te

from ...kernels.fixed_point import clamp_to_int8, multiply_by_quantized_multiplier, quantize_multiplier, quantize_round
from .registry import OpContext, lowering


def relu_kernel(shape, in_zp: int, multiplier: int, shift: int, out_zp: int, act_min: int, act_max: int):
    x = te.placeholder(shape, "int8", name="x")

    def out_fn(*idx):
        v = multiply_by_quantized_multiplier(x[idx].astype("int32") - in_zp, multiplier, shift) + out_zp
        return clamp_to_int8(v, act_min, act_max)

    return te.create_prim_func([x, te.compute(shape, out_fn, name="out")])


def clamp_kernel(shape, lo: int, hi: int):
    x = te.placeholder(shape, "int8", name="x")
    return te.create_prim_func([x, te.compute(shape, lambda *i: clamp_to_int8(x[i].astype("int32"), lo, hi), name="out")])


@lowering("RELU")
def relu(ctx: OpContext):
    x, y = ctx.inputs[0], ctx.outputs[0]
    in_scale, in_zp = ctx.scale_zp(x, "input")
    out_scale, out_zp = ctx.scale_zp(y, "output")
    multiplier, shift = quantize_multiplier(float(np.float32(in_scale) / np.float32(out_scale)))
    act_min = max(-128, quantize_round(0.0, out_scale, out_zp))
    shape = ctx.shape(y)
    return ctx.emit("RELU", relu_kernel(shape, in_zp, multiplier, shift, out_zp, act_min, 127), [ctx.expr(x)], shape, "int8")


@lowering("RELU6")
def relu6(ctx: OpContext):
    x, y = ctx.inputs[0], ctx.outputs[0]
    in_scale, in_zp = ctx.scale_zp(x, "input")
    six = min(127, max(-128, quantize_round(6.0, in_scale, in_zp)))
    shape = ctx.shape(y)
    return ctx.emit("RELU6", clamp_kernel(shape, in_zp, six), [ctx.expr(x)], shape, "int8")


# int16: TFLM's RELU requires zero points 0 and rescales like the int8 form (clamped at 0 and 32767); RELU6 clamps
# on the input's quantization to [zp, round(6 / scale) + zp] (kernels/unary16.py).

@lowering("RELU", types=("int16",))
def relu_int16(ctx: OpContext):
    from ...kernels import unary16 as K16
    from .unary import _int16_io

    in_scale, _, out_scale, _ = _int16_io(ctx, zero_zps=True)
    multiplier, shift = quantize_multiplier(float(np.float32(in_scale) / np.float32(out_scale)))
    act_min = max(-(2**15), quantize_round(0.0, out_scale, 0))
    shape = ctx.shape(ctx.outputs[0])
    return ctx.emit("RELU", K16.relu_int16(shape, multiplier, shift, act_min), [ctx.expr(ctx.inputs[0])], shape, "int16")


@lowering("RELU6", types=("int16",))
def relu6_int16(ctx: OpContext):
    from ...kernels import unary16 as K16

    x, y = ctx.inputs[0], ctx.outputs[0]
    if ctx.dtype(y) != "int16":
        ctx.refuse(f"its output is {ctx.dtype(y)}; TFLite Micro's int16 RELU6 writes int16.")
    in_scale, in_zp = ctx.scale_zp(x, "input")
    six = min(2**15 - 1, max(-(2**15), quantize_round(6.0, in_scale, in_zp)))
    lo = min(2**15 - 1, max(-(2**15), in_zp))  # TFLM keeps the zero point as an int16 lower bound
    shape = ctx.shape(y)
    return ctx.emit("RELU6", K16.clamp_int16(shape, lo, six), [ctx.expr(x)], shape, "int16")
