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
from ...kernels import unary16 as K16
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
    return _prelu_emit(ctx, shape, a_shape, in_scale, in_zp, out_scale, out_zp, "int8")


def _prelu_emit(ctx: OpContext, shape, a_shape, in_scale, in_zp, out_scale, out_zp, dtype: str):
    """PRELU's kernel for an int8 or int16 input and output (alpha int8): TFLM's two multipliers, in double."""
    x, alpha = ctx.inputs[0], ctx.inputs[1]
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
    prim = K.prelu_kernel(shape, a_shape, in_zp, a_zp, out_zp, m1, s1, m2, s2, dtype)
    return ctx.emit("PRELU", prim, [ctx.expr(x), a_arg], shape, dtype, macs=int(np.prod(shape)))


# ------------------------------------------------------------------ int16 ("16x8" models)
#
# TFLite Micro has int16 kernels for ABS, LEAKY_RELU, PRELU, TANH and LOGISTIC among these operators (its RSQRT,
# HARD_SWISH, ELU, NEG, EXP, LOG, SQRT, SQUARE, SIN and COS take no int16: frontend/support.py refuses them). An int16
# input has too many values for a table: each is a kernel of TFLM's arithmetic (kernels/unary16.py).

def _int16_io(ctx: OpContext, zero_zps: bool):
    """(input scale, zp, output scale, zp) of an int16 -> int16 operator; ``zero_zps``: TFLM requires both zero."""
    x, y = ctx.inputs[0], ctx.outputs[0]
    if ctx.dtype(y) != "int16":
        ctx.refuse(f"its output is {ctx.dtype(y)}; TFLite Micro's int16 {ctx.name} writes int16.")
    in_scale, in_zp = ctx.scale_zp(x, "input")
    out_scale, out_zp = ctx.scale_zp(y, "output")
    if zero_zps and (in_zp != 0 or out_zp != 0):
        ctx.refuse(f"its zero points are {in_zp} (input) and {out_zp} (output); TFLite Micro's int16 {ctx.name} "
                   "requires 0 (symmetric int16).")
    return in_scale, in_zp, out_scale, out_zp


@lowering("ABS", types=("int16",))
def abs_int16(ctx: OpContext):
    """TFLM's int16 ABS: quantized (zero points 0) |x| rescaled when the scales differ; an int16 tensor without
    quantization takes std::abs (TFLM's non-quantized int16 path)."""
    x, y = ctx.inputs[0], ctx.outputs[0]
    shape = ctx.shape(y)
    if ctx.quant(x) is None:
        if ctx.dtype(y) != "int16":
            ctx.refuse(f"its output is {ctx.dtype(y)}; TFLite Micro's int16 ABS writes int16.")
        return ctx.emit("ABS", K16.abs_int16(shape, None, quantized=False), [ctx.expr(x)], shape, "int16")
    in_scale, _, out_scale, _ = _int16_io(ctx, zero_zps=True)
    rescale = None
    if np.float32(in_scale) != np.float32(out_scale):
        rescale = quantize_multiplier(float(np.float32(in_scale) / np.float32(out_scale)))
    return ctx.emit("ABS", K16.abs_int16(shape, rescale), [ctx.expr(x)], shape, "int16")


def _sigmoid_tanh_int16(ctx: OpContext, kind: str, tanh: bool):
    in_scale, _, out_scale, _ = _int16_io(ctx, zero_zps=True)
    pot, log2 = K16.checked_log2(out_scale)
    if not pot or log2 != -15:
        ctx.refuse(f"its output scale is {out_scale:g}; TFLite Micro's int16 {kind} writes 2^-15 (Q0.15).")
    multiplier, shift = K16.sigmoid_tanh_params(in_scale, tanh)
    shape = ctx.shape(ctx.outputs[0])
    prim = K16.sigmoid_tanh_int16(shape, multiplier, shift, tanh)
    table = K16.shared_table(ctx.conv, "sigmoid_i16", K16.sigmoid_table_i16)
    return ctx.emit(kind, prim, [ctx.expr(ctx.inputs[0]), table], shape, "int16")


@lowering("LOGISTIC", types=("int16",))
def logistic_int16(ctx: OpContext):
    return _sigmoid_tanh_int16(ctx, "LOGISTIC", tanh=False)


@lowering("TANH", types=("int16",))
def tanh_int16(ctx: OpContext):
    return _sigmoid_tanh_int16(ctx, "TANH", tanh=True)


@lowering("LEAKY_RELU", types=("int16",))
def leaky_relu_int16(ctx: OpContext):
    """TFLM's QuantizeLeakyRelu<int16_t> (any zero points): the multipliers of float32 s_in * alpha / s_out and
    s_in / s_out."""
    in_scale, in_zp, out_scale, out_zp = _int16_io(ctx, zero_zps=False)
    alpha = _leaky_alpha(ctx)
    m_a, s_a = K.quantize_multiplier_signed(float(np.float32(np.float32(in_scale) * np.float32(alpha)) / np.float32(out_scale)))
    m_id, s_id = quantize_multiplier(float(np.float32(in_scale) / np.float32(out_scale)))
    shape = ctx.shape(ctx.outputs[0])
    return ctx.emit("LEAKY_RELU", K16.leaky_relu_int16(shape, in_zp, out_zp, m_id, s_id, m_a, s_a), [ctx.expr(ctx.inputs[0])], shape, "int16")


@lowering("PRELU", types=("int16",))
def prelu_int16(ctx: OpContext):
    """TFLM's int16 PRELU: an int16 input and output with an int8 alpha (TFLM requires it), the int8 form's
    arithmetic (kernels/unary.prelu_kernel) on int16."""
    alpha = ctx.inputs[1]
    shape, a_shape = _prelu_shapes(ctx)
    if ctx.dtype(alpha) != "int8":
        ctx.refuse(f"its alpha is {ctx.dtype(alpha)}; TFLite Micro's int16 PRELU takes an int8 alpha.")
    in_scale, in_zp, out_scale, out_zp = _int16_io(ctx, zero_zps=False)
    return _prelu_emit(ctx, shape, a_shape, in_scale, in_zp, out_scale, out_zp, "int16")
