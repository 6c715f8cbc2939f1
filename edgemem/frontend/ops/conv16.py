"""16x8 convolutions and products (int16 activations, int8 weights; see registry.py for how a lowering is
written): CONV_2D, DEPTHWISE_CONV_2D, FULLY_CONNECTED, TRANSPOSE_CONV, BATCH_MATMUL, with TFLite Micro's
arithmetic (kernels in kernels/conv16.py).

What TFLM does, and so what these lowerings do:
- Multipliers: per output channel, QuantizeMultiplier(double(in_scale) * double(w_scale) / double(out_scale))
  (PopulateConvolutionQuantizationParams; per-channel FULLY_CONNECTED too); per-tensor FULLY_CONNECTED and
  BATCH_MATMUL take the product of the float32 scales in float first (GetQuantizedConvolutionMultipler).
- Accumulator: int64 with an int64 bias (the converter's), none, or for TRANSPOSE_CONV an int16 one; int32 for
  CONV_2D / FULLY_CONNECTED with an int32 bias (or none and quantized_bias_type INT32). DEPTHWISE_CONV_2D reads
  its bias as int64 whatever its type, TRANSPOSE_CONV unless int16, FULLY_CONNECTED unless int32: a narrower one
  read as int64 is read as TFLM reads it, the model file's bytes from its start taken 8 at a time
  (_bias_read_as_int64), with TFLM's wrapped int64 arithmetic where that bias makes it wrap (_fits_int64).
- Zero points: the int16 CONV_2D, DEPTHWISE_CONV_2D and TRANSPOSE_CONV kernels ignore all of them (the fused
  activation's clamp still takes the output zero point into account, as CalculateActivationRangeQuantized
  does); FULLY_CONNECTED subtracts the input's and adds the output's (and the weights' per tensor);
  BATCH_MATMUL requires 0 (TFLM fails its Prepare otherwise).
- Padding: TFLM's ComputePaddingHeightWidth (only the leading half, the odd pixel goes after).
"""

from __future__ import annotations

import numpy as np
import tflite

from ...kernels import conv16 as k
from ...kernels.fixed_point import activation_range, conv_multipliers, fully_connected_multiplier
from ...kernels.specs import Depthwise16
from .registry import OpContext, lowering

_ACTS = {0: "NONE", 1: "RELU", 2: "RELU_N1_TO_1", 3: "RELU6"}
_BIAS_TYPES = {0: None, 2: "int32", 4: "int64"}  # quantized_bias_type: FLOAT32 (unset), INT32, INT64
# the numeric bias types narrower than int64 that TFLM's int16 DEPTHWISE_CONV_2D reads as int64 all the same
# (TRANSPOSE_CONV all but int16, which it widens; FULLY_CONNECTED all but int32, its int32 accumulator's)
_NARROW_BIASES = ("int32", "int16", "int8", "uint8", "uint16", "uint32", "float16", "float32")


def activation_range_int16(ctx: OpContext, code: int, scale: float, zp: int) -> tuple[int, int]:
    """TFLite's CalculateActivationRangeQuantized for an int16 output."""
    act = _ACTS.get(code)
    if act is None:
        ctx.refuse(f"its fused activation {code} is not one TFLite's int16 {ctx.name} applies.")
    lo, hi = k.INT16_MIN, k.INT16_MAX
    bounds = {"RELU": (0.0,), "RELU6": (0.0, 6.0), "RELU_N1_TO_1": (-1.0, 1.0)}.get(act, ())
    if any(abs(np.float32(f) / np.float32(scale)) >= 2.0**31 for f in bounds):
        ctx.refuse(f"its output scale {scale:g} puts its {act} bounds outside int32; TFLite fails its Prepare on that.")
    return activation_range(act, scale, zp, lo, hi)


def _padding(same: bool, stride: int, dilation: int, in_size: int, filt: int) -> tuple[int, int]:
    """(output size, leading padding) as TFLM's ComputePaddingHeightWidth."""
    eff = (filt - 1) * dilation + 1
    out = (in_size + stride - 1) // stride if same else (in_size + stride - eff) // stride
    return out, max(((out - 1) * stride + eff - in_size) // 2, 0)


def _io(ctx: OpContext, x, y):
    """Checks an int16 input and output with int8 weights (input 1); returns (in scale, in zp, out scale, out zp)."""
    if ctx.dtype(y) != "int16":
        ctx.refuse(f"its input is int16 but its output is {ctx.dtype(y)}; TFLite's {ctx.name} writes its input's type.")
    if ctx.dtype(ctx.inputs[1]) != "int8":
        ctx.refuse(f"its weights are {ctx.dtype(ctx.inputs[1])}; TFLite Micro's int16 {ctx.name} takes int8 weights (16x8).")
    in_scale, in_zp = ctx.scale_zp(x, "input")
    out_scale, out_zp = ctx.scale_zp(y, "output")
    return in_scale, in_zp, out_scale, out_zp


def _const(value: np.ndarray):
    """A flash constant of the array's own type (relax.const narrows an int64 array to int32 unless told)."""
    from tvm import relax

    return relax.const(value, str(value.dtype))


def _weights(ctx: OpContext, t, channels: int, axis_name: str) -> tuple[np.ndarray, np.ndarray]:
    """(constant int8 weights, float32 scales broadcast to ``channels``)."""
    w = ctx.value(t)
    if w is None:
        ctx.refuse("its weights are not a constant; edgemem's int16 kernels take constant weights.")
    q = ctx.quant(t)
    if q is None or q[0].size not in (1, channels):
        got = "no quantization" if q is None else f"{q[0].size} scales"
        ctx.refuse(f"its weights have {got}; TFLite's int16 {ctx.name} takes one scale or one per {axis_name} ({channels}).")
    return w.astype(np.int8), np.broadcast_to(q[0], (channels,)).astype(np.float32)


def _bias(ctx: OpContext, index: int, channels: int, allowed: tuple[str, ...]):
    """(bias value or None, its type or None) for optional input ``index``."""
    if not ctx.present(index):
        return None, None
    t = ctx.inputs[index]
    b = ctx.value(t)
    if b is None:
        ctx.refuse("its bias is not a constant.")
    dtype = ctx.dtype(t)
    if dtype not in allowed:
        ctx.refuse(f"its bias is {dtype}; TFLite Micro's int16 {ctx.name} reads {' or '.join(allowed)} biases.")
    b = b.reshape(-1)
    if b.size != channels:
        ctx.refuse(f"its bias has {b.size} values for {channels} output channels.")
    return b.astype(np.dtype(dtype)), dtype


def _requant_constants(ctx: OpContext, mult, shift, wide: bool):
    """The per-channel (multiplier, shift) constants the kernel takes: reduced for the int64 path."""
    mult, shift = np.asarray(mult, np.int32).reshape(-1), np.asarray(shift, np.int32).reshape(-1)
    if wide:
        if shift.max(initial=0) >= 8:
            ctx.refuse(f"its effective scale (in * weights / out) is {float(mult.max()) / 2**31 * 2.0 ** shift.max():.4g}; "
                       "TFLite's int64 requantization takes scales below 128 only.")
        return k.reduce_multipliers(mult, shift)
    return mult, shift


def _accumulator(ctx: OpContext, bias_dtype, options) -> bool:
    """True for TFLM's int64 accumulator, False for int32 (an int32 bias, or none and quantized_bias_type INT32)."""
    if bias_dtype is not None:
        return bias_dtype != "int32"
    kind = options.QuantizedBiasType() if options is not None and hasattr(options, "QuantizedBiasType") else 0
    return _BIAS_TYPES.get(kind) != "int32"


def _fits_int64(bias, reduced, bound: int) -> bool:
    """Whether (sum + bias) * reduced + rounding stays inside int64 for every channel (it does for any bias
    the converter writes; an int32 bias read as int64 may not)."""
    return all((abs(int(b)) + bound) * int(m) + (1 << 46) < 1 << 63 for b, m in zip(bias, reduced))


def _bias_read_as_int64(ctx: OpContext, t, channels: int, dtype: str = "int32") -> np.ndarray:
    """The bias TFLM's 16x8 TRANSPOSE_CONV (any type but int16), DEPTHWISE_CONV_2D (any type) and FULLY_CONNECTED
    (any type but int32) use when it is
    narrower than int64: they read it through an int64 pointer (GetOptionalTensorData<int64_t>, no type check;
    CONV_2D alone switches to int32 arithmetic), so channel c gets the 8 bytes at 8 * c from the start of the
    bias data: for int32, two values for the first half of the channels, then the bytes that follow the bias in
    the model file (in flash on a device, and the same in TFLM's Python interpreter). edgemem reads those bytes
    too; past the end of the file TFLM's read is undefined and the operator refused."""
    raw = ctx.file_bytes(t, 8 * channels)
    if raw is None:
        ctx.refuse(f"its bias is {dtype} with {channels} values; TFLite Micro's int16 {ctx.name} reads it as {channels} "
                   f"int64 values, {8 * channels} bytes from the start of its data, which run past the end of the model "
                   "file or are not stored in it (an undefined read). Give the operator an int64 bias (the TFLite "
                   "converter's for 16x8).")
    return np.frombuffer(raw, "<i8").astype(np.int64)


# ---------------------------------------------------------------- CONV_2D

@lowering("CONV_2D", types=("int16",))
def conv_2d(ctx: OpContext):
    x, w_t, y = ctx.inputs[0], ctx.inputs[1], ctx.outputs[0]
    opts = ctx.options(tflite.Conv2DOptions)
    in_scale, _, out_scale, out_zp = _io(ctx, x, y)
    x_shape, w_shape, out_shape = ctx.shape(x), ctx.shape(w_t), ctx.shape(y)
    if len(x_shape) != 4 or len(w_shape) != 4 or len(out_shape) != 4:
        ctx.refuse(f"its input, weights and output have ranks {len(x_shape)}, {len(w_shape)}, {len(out_shape)}; TFLite's CONV_2D takes 4-D NHWC tensors.")
    o = w_shape[0]
    if out_shape[3] != o or out_shape[0] != x_shape[0] or w_shape[3] < 1 or x_shape[3] % w_shape[3] or o % (x_shape[3] // w_shape[3]):
        ctx.refuse(f"its shapes do not match: input {list(x_shape)}, weights {list(w_shape)}, output {list(out_shape)}.")
    stride = (opts.StrideH(), opts.StrideW()) if opts is not None else (1, 1)
    dilation = (opts.DilationHFactor(), opts.DilationWFactor()) if opts is not None else (1, 1)
    same = opts is None or opts.Padding() == tflite.Padding.SAME
    (oh, pt), (ow, pl) = (_padding(same, stride[i], dilation[i], x_shape[i + 1], w_shape[i + 1]) for i in range(2))
    if (oh, ow) != tuple(out_shape[1:3]):
        ctx.refuse(f"its output shape {list(out_shape)} is not the convolution's ({oh}x{ow} expected).")
    w, w_scales = _weights(ctx, w_t, o, "output channel")
    bias, bias_dtype = _bias(ctx, 2, o, ("int64", "int32"))
    wide = _accumulator(ctx, bias_dtype, opts)
    mult, shift = _requant_constants(ctx, *conv_multipliers(in_scale, w_scales, out_scale), wide)
    act = activation_range_int16(ctx, opts.FusedActivationFunction() if opts is not None else 0, out_scale, out_zp)
    prim = k.conv2d(x_shape, w_shape, out_shape, stride, dilation, (pt, pl), bias_dtype, wide, act)
    args = [ctx.expr(x), w] + ([_const(bias)] if bias is not None else []) + [mult, shift]
    macs = int(np.prod(out_shape)) * w_shape[1] * w_shape[2] * w_shape[3]
    return ctx.emit("CONV_2D", prim, args, out_shape, "int16", macs)


# ---------------------------------------------------------------- DEPTHWISE_CONV_2D

@lowering("DEPTHWISE_CONV_2D", types=("int16",))
def depthwise_conv_2d(ctx: OpContext):
    x, w_t, y = ctx.inputs[0], ctx.inputs[1], ctx.outputs[0]
    opts = ctx.options(tflite.DepthwiseConv2DOptions)
    in_scale, _, out_scale, out_zp = _io(ctx, x, y)
    x_shape, w_shape, out_shape = ctx.shape(x), ctx.shape(w_t), ctx.shape(y)
    if len(x_shape) != 4 or len(w_shape) != 4 or len(out_shape) != 4 or w_shape[0] != 1:
        ctx.refuse(f"its input, weights and output have shapes {list(x_shape)}, {list(w_shape)}, {list(out_shape)}; TFLite's DEPTHWISE_CONV_2D takes NHWC tensors and [1, KH, KW, C*M] weights.")
    oc = w_shape[3]
    if out_shape[3] != oc or oc % x_shape[3] or out_shape[0] != x_shape[0]:
        ctx.refuse(f"its shapes do not match: input {list(x_shape)}, weights {list(w_shape)}, output {list(out_shape)}.")
    multiplier = opts.DepthMultiplier() if opts is not None else oc // x_shape[3]
    if multiplier != oc // x_shape[3]:
        ctx.refuse(f"its depth_multiplier option is {multiplier} but its shapes make it {oc // x_shape[3]}; TFLM loops by the "
                   "option and would leave output channels unwritten.")
    stride = (opts.StrideH(), opts.StrideW()) if opts is not None else (1, 1)
    dilation = (opts.DilationHFactor(), opts.DilationWFactor()) if opts is not None else (1, 1)
    same = opts is None or opts.Padding() == tflite.Padding.SAME
    (oh, pt), (ow, pl) = (_padding(same, stride[i], dilation[i], x_shape[i + 1], w_shape[i + 1]) for i in range(2))
    if (oh, ow) != tuple(out_shape[1:3]):
        ctx.refuse(f"its output shape {list(out_shape)} is not the convolution's ({oh}x{ow} expected).")
    w, w_scales = _weights(ctx, w_t, oc, "output channel")
    bias, bias_dtype = _bias(ctx, 2, oc, ("int64",) + _NARROW_BIASES)
    if bias_dtype != "int64" and bias is not None:  # TFLM's kernel reads any bias through an int64 pointer
        bias = _bias_read_as_int64(ctx, ctx.inputs[2], oc, bias_dtype)
    mult, shift = _requant_constants(ctx, *conv_multipliers(in_scale, w_scales, out_scale), True)
    act = activation_range_int16(ctx, opts.FusedActivationFunction() if opts is not None else 0, out_scale, out_zp)
    wrapping = bias is not None and not _fits_int64(bias, mult, (w_shape[1] * w_shape[2]) << 22)
    # the spec lets passes/inplace.py rebuild it to write over its input (kernel_spec's depthwise_conv2d16); the
    # in-place form has no wrapped arithmetic, so a wrapping bias keeps the operator out of place (no spec)
    spec = None if wrapping else Depthwise16(x_shape=x_shape, w_shape=w_shape[1:], out_shape=out_shape, stride=stride,
                                             dilation=dilation, pad=(pt, pl), has_bias=bias is not None, act=act)
    prim = k.depthwise_conv2d(x_shape, w_shape[1:], out_shape, stride, dilation, (pt, pl), bias is not None, act, wrapping)
    if wrapping:
        biases = [_const(a) for a in k.wrapped_offsets(bias, mult, shift)]
    else:
        biases = [_const(bias)] if bias is not None else []
    args = [ctx.expr(x), w.reshape(w_shape[1:])] + biases + [mult, shift]
    macs = int(np.prod(out_shape)) * w_shape[1] * w_shape[2]
    return ctx.emit("DEPTHWISE_CONV_2D", prim, args, out_shape, "int16", macs, spec=spec)


# ---------------------------------------------------------------- FULLY_CONNECTED

@lowering("FULLY_CONNECTED", types=("int16",))
def fully_connected(ctx: OpContext):
    x, w_t, y = ctx.inputs[0], ctx.inputs[1], ctx.outputs[0]
    opts = ctx.options(tflite.FullyConnectedOptions)
    if opts is not None and opts.WeightsFormat() != 0:
        ctx.refuse("its weights are in a shuffled format; TFLite Micro takes the default format only.")
    in_scale, in_zp, out_scale, out_zp = _io(ctx, x, y)
    x_shape, w_shape, out_shape = ctx.shape(x), ctx.shape(w_t), ctx.shape(y)
    if len(w_shape) != 2:
        ctx.refuse(f"its weights have rank {len(w_shape)}; TFLite's FULLY_CONNECTED takes [units, depth] weights.")
    units, depth = w_shape
    if not out_shape or out_shape[-1] != units:
        ctx.refuse(f"its output shape {list(out_shape)} does not end in its {units} units.")
    batches = int(np.prod(out_shape[:-1])) if len(out_shape) > 1 else 1
    if int(np.prod(x_shape)) != batches * depth:
        ctx.refuse(f"its input {list(x_shape)} is not {batches} rows of {depth} values (output {list(out_shape)}).")
    w = ctx.value(w_t)
    if w is None:
        ctx.refuse("its weights are not a constant; edgemem's int16 FULLY_CONNECTED takes constant weights.")
    q = ctx.quant(w_t)
    if q is None or q[0].size not in (1, units):
        ctx.refuse(f"its weights have {0 if q is None else q[0].size} scales; TFLite takes one or one per unit ({units}).")
    per_channel = q[0].size > 1
    bias, bias_dtype = _bias(ctx, 2, units, ("int64",) + _NARROW_BIASES)
    if bias_dtype not in (None, "int64", "int32"):  # TFLM's int64 path reads any bias but int32 as int64
        bias, bias_dtype = _bias_read_as_int64(ctx, ctx.inputs[2], units, bias_dtype), "int64"
    wide = _accumulator(ctx, bias_dtype, opts)
    if per_channel:
        mult, shift = conv_multipliers(in_scale, q[0], out_scale)
        w_zp = 0
    else:
        m, s = fully_connected_multiplier(in_scale, float(q[0][0]), out_scale)
        mult, shift = np.array([m], np.int32), np.array([s], np.int32)
        w_zp = int(q[1][0])
    mult, shift = _requant_constants(ctx, mult, shift, wide)
    act = activation_range_int16(ctx, opts.FusedActivationFunction() if opts is not None else 0, out_scale, out_zp)
    # |(w - w_zp) * (x - in_zp)| < 2^8 * 2^16 per term
    mults, shifts = (np.broadcast_to(a, (units,)) for a in (mult, shift))
    wrapping = wide and bias is not None and not _fits_int64(bias, mults, depth << 24)
    prim = k.fully_connected(batches, depth, units, bias_dtype, wide, per_channel, in_zp, w_zp, out_zp, act, wrapping)
    flat = ctx.reshape(ctx.expr(x), (batches, depth))
    if wrapping:
        biases = [_const(a) for a in k.wrapped_offsets(bias, mults, shifts)]
    else:
        biases = [_const(bias)] if bias is not None else []
    args = [flat, w.astype(np.int8)] + biases + [mult, shift]
    out = ctx.emit("FULLY_CONNECTED", prim, args, (batches, units), "int16", batches * units * depth)
    return ctx.reshape(out, out_shape) if tuple(out_shape) != (batches, units) else out


# ---------------------------------------------------------------- TRANSPOSE_CONV

def _sum_bound(x_shape, w_shape, stride) -> int:
    """A bound on |sum of x * w| at one TRANSPOSE_CONV output: its taps times 2^15 * 2^7."""
    taps = -(-w_shape[1] // stride[0]) * -(-w_shape[2] // stride[1]) * x_shape[3]
    return taps << 22


@lowering("TRANSPOSE_CONV", types=("int16",))
def transpose_conv(ctx: OpContext):
    """Inputs: output shape (int32 constant), weights [O, KH, KW, I], input, optional bias."""
    from ...kernels.matmul import transpose_conv_padding

    w_t, x, y = ctx.inputs[1], ctx.inputs[2], ctx.outputs[0]
    opts = ctx.options(tflite.TransposeConvOptions)
    if ctx.dtype(y) != "int16" or ctx.dtype(w_t) != "int8":
        ctx.refuse(f"its weights and output are {ctx.dtype(w_t)} and {ctx.dtype(y)}; TFLite Micro's int16 TRANSPOSE_CONV takes int8 weights and writes int16.")
    in_scale, _ = ctx.scale_zp(x, "input")
    out_scale, out_zp = ctx.scale_zp(y, "output")
    x_shape, w_shape, out_shape = ctx.shape(x), ctx.shape(w_t), ctx.shape(y)
    if len(x_shape) != 4 or len(w_shape) != 4 or len(out_shape) != 4:
        ctx.refuse(f"its input, weights and output have ranks {len(x_shape)}, {len(w_shape)}, {len(out_shape)}; TFLite's TRANSPOSE_CONV takes 4-D NHWC tensors.")
    if w_shape[3] != x_shape[3] or w_shape[0] != out_shape[3] or x_shape[0] != out_shape[0]:
        ctx.refuse(f"its shapes do not match: input {list(x_shape)}, weights {list(w_shape)}, output {list(out_shape)}.")
    stride = (opts.StrideH(), opts.StrideW()) if opts is not None else (1, 1)
    same = opts is None or opts.Padding() == tflite.Padding.SAME
    pad = tuple(transpose_conv_padding(out_shape[i + 1], x_shape[i + 1], w_shape[i + 1], stride[i], same) for i in range(2))
    w, w_scales = _weights(ctx, w_t, w_shape[0], "output channel")
    bias, bias_dtype = _bias(ctx, 3, w_shape[0], ("int64", "int16") + tuple(t for t in _NARROW_BIASES if t != "int16"))
    if bias_dtype not in (None, "int64", "int16"):  # TFLM widens an int16 bias; any other it reads as int64
        bias, bias_dtype = _bias_read_as_int64(ctx, ctx.inputs[3], w_shape[0], bias_dtype), "int64"
    mult, shift = _requant_constants(ctx, *conv_multipliers(in_scale, w_scales, out_scale), True)
    act = activation_range_int16(ctx, opts.FusedActivationFunction() if opts is not None else 0, out_scale, out_zp)
    wrapping = bias is not None and not _fits_int64(bias, mult, _sum_bound(x_shape, w_shape, stride))
    prim = k.transpose_conv(x_shape, w_shape, out_shape, stride, pad, bias_dtype, act, wrapping)
    if wrapping:
        biases = [_const(a) for a in k.wrapped_offsets(bias, mult, shift)]
    else:
        biases = [_const(bias)] if bias is not None else []
    args = [ctx.expr(x), w] + biases + [mult, shift]
    macs = int(np.prod(x_shape)) * w_shape[0] * w_shape[1] * w_shape[2]
    return ctx.emit("TRANSPOSE_CONV", prim, args, out_shape, "int16", macs)


# ---------------------------------------------------------------- BATCH_MATMUL

@lowering("BATCH_MATMUL", types=("int16",))
def batch_matmul(ctx: OpContext):
    from ...kernels.matmul import batch_matmul_shapes

    lhs, rhs, y = ctx.inputs[0], ctx.inputs[1], ctx.outputs[0]
    opts = ctx.options(tflite.BatchMatMulOptions)
    adj_x = bool(opts.AdjX()) if opts is not None else False
    adj_y = bool(opts.AdjY()) if opts is not None else False
    if ctx.dtype(rhs) != "int16" or ctx.dtype(y) != "int16":
        ctx.refuse(f"its operands are {ctx.dtype(lhs)} and {ctx.dtype(rhs)} with a {ctx.dtype(y)} output; TFLite's int16 BATCH_MATMUL takes int16 throughout.")
    lhs_shape, rhs_shape = ctx.shape(lhs), ctx.shape(rhs)
    if not (2 <= len(lhs_shape) <= 5 and 2 <= len(rhs_shape) <= 5):
        ctx.refuse(f"its operands have ranks {len(lhs_shape)} and {len(rhs_shape)}; TFLite's BATCH_MATMUL takes ranks 2 to 5.")
    try:
        out_shape, _, _, depth = batch_matmul_shapes(lhs_shape, rhs_shape, adj_x, adj_y)
    except ValueError as exc:
        ctx.refuse(f"{exc} (shapes {list(lhs_shape)} and {list(rhs_shape)}, adj_x={adj_x}, adj_y={adj_y}).")
    if tuple(out_shape) != ctx.shape(y):
        ctx.refuse(f"its output shape {list(ctx.shape(y))} is not the product's {list(out_shape)}.")
    lhs_scale, lhs_zp = ctx.scale_zp(lhs, "lhs")
    rhs_scale, rhs_zp = ctx.scale_zp(rhs, "rhs")
    out_scale, out_zp = ctx.scale_zp(y, "output")
    if lhs_zp or rhs_zp or out_zp:
        ctx.refuse(f"its zero points are {lhs_zp}, {rhs_zp} and {out_zp}; TFLite Micro's int16 BATCH_MATMUL requires 0.")
    m, s = fully_connected_multiplier(lhs_scale, rhs_scale, out_scale)
    reduced, total = _requant_constants(ctx, [m], [s], True)
    prim = k.batch_matmul(lhs_shape, rhs_shape, adj_x, adj_y, int(reduced[0]), int(total[0]))

    def operand(t):
        value = ctx.value(t)
        return value.astype(np.int16) if value is not None else ctx.expr(t)

    macs = int(np.prod(out_shape)) * depth
    return ctx.emit("BATCH_MATMUL", prim, [operand(lhs), operand(rhs)], out_shape, "int16", macs)
