"""Element-wise unary operators on int8, with TFLite Micro's arithmetic (see registry.py for how a lowering
is written).

One int8 input, one int8 output: a 256-entry table computed at build time (kernels/unary.py) reproduces
TFLM's per-element arithmetic for every possible input, and the kernel looks it up (256 bytes of flash):
ABS, RSQRT, TANH, ELU (TFLM's own float table), HARD_SWISH, LEAKY_RELU. PRELU has two operands (the
input and alpha, broadcast): a kernel with TFLM's two multipliers. The float32 forms of these operators
go through TVM's converter (edgemem's C code generator prints their <math.h> calls), except LEAKY_RELU,
lowered here too (TVM's converter asserts on a LEAKY_RELU without options, where TFLite's alpha is 0).
"""

from __future__ import annotations

import numpy as np

from ...kernels import unary as K
from ...kernels.fixed_point import quantize_multiplier
from ...kernels.logistic import table_lookup
from .registry import OpContext, lowering


def _table_op(ctx: OpContext, kind: str, table: np.ndarray):
    x, y = ctx.inputs[0], ctx.outputs[0]
    if ctx.dtype(y) != "int8":
        ctx.refuse(f"its output is {ctx.dtype(y)}; TFLite Micro's int8 {kind} writes int8.")
    shape = ctx.shape(y)
    return ctx.emit(kind, table_lookup(shape), [ctx.expr(x), table.astype(np.int8)], shape, "int8")


def _io(ctx: OpContext):
    in_scale, in_zp = ctx.scale_zp(ctx.inputs[0], "input")
    out_scale, out_zp = ctx.scale_zp(ctx.outputs[0], "output")
    return in_scale, in_zp, out_scale, out_zp


@lowering("ABS")
def abs_(ctx: OpContext):
    return _table_op(ctx, "ABS", K.abs_table(*_io(ctx)))


@lowering("RSQRT")
def rsqrt(ctx: OpContext):
    return _table_op(ctx, "RSQRT", K.rsqrt_table(*_io(ctx)))


@lowering("TANH")
def tanh(ctx: OpContext):
    in_scale, in_zp = ctx.scale_zp(ctx.inputs[0], "input")
    return _table_op(ctx, "TANH", K.tanh_table(in_scale, in_zp))


@lowering("ELU")
def elu(ctx: OpContext):
    return _table_op(ctx, "ELU", K.elu_table(*_io(ctx)))


@lowering("HARD_SWISH")
def hard_swish(ctx: OpContext):
    in_scale, in_zp, out_scale, out_zp = _io(ctx)
    if K.hard_swish_params(in_scale, out_scale)[1] > 0:
        ctx.refuse(f"its input scale / 128 ({in_scale / 128:g}) exceeds its output scale ({out_scale:g}); "
                   "TFLite Micro's int8 HARD_SWISH refuses that (output multiplier exponent > 0).")
    return _table_op(ctx, "HARD_SWISH", K.hard_swish_table(in_scale, in_zp, out_scale, out_zp))


def _leaky_alpha(ctx: OpContext) -> float:
    import tflite

    opts = ctx.options(tflite.LeakyReluOptions)
    return float(np.float32(opts.Alpha())) if opts is not None else 0.0


@lowering("LEAKY_RELU")
def leaky_relu(ctx: OpContext):
    return _table_op(ctx, "LEAKY_RELU", K.leaky_relu_table(*_io(ctx), _leaky_alpha(ctx)))


@lowering("LEAKY_RELU", types=("float32",))
def leaky_relu_float(ctx: OpContext):
    """x > 0 ? x : x * alpha (TFLM's float LeakyRelu, alpha as float32)."""
    from tvm import relax

    alpha = relax.const(np.float32(_leaky_alpha(ctx)))
    x = ctx.expr(ctx.inputs[0])
    bb = ctx.conv.bb
    zero = relax.const(np.float32(0.0))
    return bb.emit(relax.op.where(relax.op.greater(x, zero), x, relax.op.multiply(x, alpha)))


def _prelu_shapes(ctx: OpContext):
    x, alpha, y = ctx.inputs[0], ctx.inputs[1], ctx.outputs[0]
    shape, a_shape = ctx.shape(y), ctx.shape(alpha)
    if ctx.shape(x) != shape:
        ctx.refuse(f"its input {list(ctx.shape(x))} and output {list(shape)} differ in shape; edgemem broadcasts only alpha.")
    if len(a_shape) > len(shape) or any(a not in (1, s) for a, s in zip(a_shape[::-1], shape[::-1])):
        ctx.refuse(f"its alpha {list(a_shape)} does not broadcast to the input {list(shape)}.")
    if len(shape) > 4:
        ctx.refuse(f"its input has {len(shape)} dimensions; TFLite Micro's PRELU takes at most 4.")
    return shape, a_shape


@lowering("PRELU")
def prelu(ctx: OpContext):
    x, alpha, y = ctx.inputs[0], ctx.inputs[1], ctx.outputs[0]
    shape, a_shape = _prelu_shapes(ctx)
    if ctx.dtype(alpha) != "int8":
        ctx.refuse(f"its alpha is {ctx.dtype(alpha)}; TFLite Micro's int8 PRELU takes an int8 alpha.")
    in_scale, in_zp = ctx.scale_zp(x, "input")
    out_scale, out_zp = ctx.scale_zp(y, "output")
    aq = ctx.quant(alpha)
    if aq is None:
        ctx.refuse(f"its alpha '{ctx.tensor_name(alpha)}' has no quantization.")
    # TFLM reads alpha's params.scale / zero_point: the first of its scales (per-tensor in converter models)
    a_scale, a_zp = float(aq[0][0]), int(aq[1][0])
    if aq[0].size > 1 and not np.all(aq[0] == aq[0][0]):
        ctx.refuse(f"its alpha '{ctx.tensor_name(alpha)}' is quantized per channel ({aq[0].size} scales); "
                   "TFLite Micro's PRELU uses one alpha scale.")
    m1, s1 = quantize_multiplier(float(np.float64(np.float32(in_scale)) / np.float64(np.float32(out_scale))))
    m2, s2 = quantize_multiplier(float(np.float64(np.float32(in_scale)) * np.float64(np.float32(a_scale)) / np.float64(np.float32(out_scale))))
    a = ctx.value(alpha)
    a_arg = a.astype(np.int8) if a is not None else ctx.expr(alpha)
    prim = K.prelu_kernel(shape, a_shape, in_zp, a_zp, out_zp, m1, s1, m2, s2)
    return ctx.emit("PRELU", prim, [ctx.expr(x), a_arg], shape, "int8", macs=int(np.prod(shape)))
