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
