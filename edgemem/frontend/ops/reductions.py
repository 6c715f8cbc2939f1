"""Reductions, arg-min/max, cumulative sums, bilinear resize and int8 pools (see registry.py for how a lowering
is written). Arithmetic as TFLite Micro's kernels (reduce_common.cc, arg_min_max.cc, cumsum.cc,
resize_bilinear.cc, pooling.cc); kernels in kernels/reductions.py and kernels/int8_ops.py.

- SUM int8: TFLM's QuantizedMeanOrSum with compute_sum: sum(x - in_zp) times QuantizeMultiplier(in / out)
  (no 1/count folded in, unlike MEAN), plus out_zp, clamped. MEAN int8: the same with 1/count folded into the
  multiplier (fixed_point.mean_multiplier), taken over from integerize so that reductions to a scalar work.
- A reduction to a scalar is computed with its 1-sized axes kept, then viewed as the scalar.
- REDUCE_MAX / REDUCE_MIN int8 and float32: the plain extreme (TFLM requires one quantization for int8).
- ARG_MAX / ARG_MIN int8 and float32: first index of the extreme, int32 output (TFLM's only one) or int64.
- CUMSUM float32 and int8 (exclusive / reverse).
- RESIZE_BILINEAR int8: TFLM's 10-bit fixed-point ResizeBilinearInteger.
- AVERAGE_POOL_2D / MAX_POOL_2D int8: taken over from integerize so that fused activations and models with
  int8 inputs (where TVM's own integer average pool truncates) get TFLM's rounding and clamp.
- int16 (16x8 models): SUM, MEAN, AVERAGE_POOL_2D, MAX_POOL_2D with the int8 arithmetic on int16 (TFLM's
  kernels are templates; MEAN int16 takes the same QuantizedMeanOrSum path as int8, equal scales included), and
  RESIZE_NEAREST_NEIGHBOR int16 (a copy). TFLite Micro has no int16 REDUCE_MAX, REDUCE_MIN, ARG_MAX, ARG_MIN,
  CUMSUM or RESIZE_BILINEAR: those stay refused for int16 (frontend/support.py names them).
"""

from __future__ import annotations

import numpy as np
import tflite

from ...kernels import int8_ops, kernel_attrs
from ...kernels import reductions as kr
from ...kernels.fixed_point import activation_range, add_rescale, mean_multiplier, rescale_multiplier
from .registry import OpContext, lowering


def _axes(ctx: OpContext, rank: int) -> list[int]:
    """The constant axis operand (input 1), resolved to sorted unique non-negative axes (TFLM's ResolveAxis)."""
    value = ctx.value(ctx.inputs[1]) if len(ctx.inputs) > 1 else None
    if value is None and len(ctx.inputs) > 1 and 0 in ctx.shape(ctx.inputs[1]):
        ctx.refuse("its axis operand is empty (a reduction over no axis); edgemem does not support that form.")
    if value is None:
        ctx.refuse("its axis operand is not a constant; edgemem needs the reduced axes at build time.")
    raw = [int(a) for a in np.asarray(value).reshape(-1)]
    for a in raw:
        if not -rank <= a < rank:
            ctx.refuse(f"axis {a} is out of range for an input of rank {rank}.")
    return sorted({a % rank for a in raw})


OPAQUE = 8  # TVM's kOpaque operator pattern


def _opaque(prim):
    """A kernel TVM's FuseOps must leave alone on the float path (plain loops, or a reduction scheduled here)."""
    return prim.with_attr("op_pattern", OPAQUE)


def _keep_dims(ctx: OpContext) -> bool:
    opts = ctx.options(tflite.ReducerOptions)
    return bool(opts.KeepDims()) if opts is not None else False


def _kernel_keep(keep: bool, axes, rank: int) -> bool:
    """keep_dims for the kernel: a reduction to a scalar keeps its 1-sized axes (the kernel then has an output
    loop to compute the accumulator under); the output is viewed as the scalar afterwards."""
    return keep or len(axes) == rank


def _finish(ctx: OpContext, expr, shape):
    """``expr`` as the operator's output shape (a free view when the kernel's shape differs in 1-sized axes)."""
    y = ctx.outputs[0]
    # A scalar output has no dims in the file; OpContext.shape would ask TVM to infer it from a Relax expr the
    # output does not have yet.
    want = () if y.tensor.ShapeLength() == 0 else ctx.shape(y)
    if tuple(want) != tuple(shape):
        if int(np.prod(want)) != int(np.prod(shape)):
            ctx.refuse(f"its output shape {list(want)} does not match the reduction's {list(shape)}.")
        return ctx.reshape(expr, want)
    return expr


# ---------------------------------------------------------------- SUM, REDUCE_MAX, REDUCE_MIN

def _mean_or_sum(ctx: OpContext, mean: bool):
    x, y = ctx.inputs[0], ctx.outputs[0]
    in_scale, in_zp = ctx.scale_zp(x, "input")
    out_scale, out_zp = ctx.scale_zp(y, "output")
    x_shape = ctx.shape(x)
    axes = _axes(ctx, len(x_shape))
    keep = _kernel_keep(_keep_dims(ctx), axes, len(x_shape))
    count = int(np.prod([x_shape[a] for a in axes])) if axes else 1
    if mean:
        multiplier, shift = mean_multiplier(in_scale, out_scale, count)
    else:
        multiplier, shift = rescale_multiplier(in_scale, out_scale)
    dtype = ctx.dtype(x)
    if ctx.dtype(y) != dtype:
        ctx.refuse(f"its output is {ctx.dtype(y)}, its input {dtype}; TFLite Micro's {ctx.name} keeps the type.")
    if dtype == "int8":
        prim = int8_ops.mean(x_shape, axes, keep, in_zp, multiplier, shift, out_zp)
    else:
        prim = kr.mean_or_sum(x_shape, axes, keep, dtype, in_zp, multiplier, shift, out_zp)
    shape = kr.reduced_shape(x_shape, set(axes), keep)
    return _finish(ctx, ctx.emit(ctx.name, prim, [ctx.expr(x)], shape, dtype, macs=int(np.prod(shape)) * count), shape)


@lowering("SUM", types=("int8", "int16"))
def sum_int(ctx: OpContext):
    return _mean_or_sum(ctx, mean=False)


@lowering("MEAN", types=("int8", "int16"))
def mean_int(ctx: OpContext):
    return _mean_or_sum(ctx, mean=True)


def _extreme(ctx: OpContext, kind: str):
    x, y = ctx.inputs[0], ctx.outputs[0]
    dtype = ctx.dtype(x)
    if dtype == "int8":
        in_q, out_q = ctx.scale_zp(x, "input"), ctx.scale_zp(y, "output")
        if np.float32(in_q[0]) != np.float32(out_q[0]) or in_q[1] != out_q[1]:
            ctx.refuse(f"its input (scale {in_q[0]}, zero point {in_q[1]}) and output (scale {out_q[0]}, zero point "
                       f"{out_q[1]}) are quantized differently; TFLite Micro's int8 {ctx.name} requires one quantization.")
    x_shape = ctx.shape(x)
    axes = _axes(ctx, len(x_shape))
    keep = _kernel_keep(_keep_dims(ctx), axes, len(x_shape))
    prim = kr.reduce_extreme(x_shape, axes, keep, dtype, kind)
    prim = _opaque(prim) if dtype != "int8" else prim
    shape = kr.reduced_shape(x_shape, set(axes), keep)
    return _finish(ctx, ctx.emit(ctx.name, prim, [ctx.expr(x)], shape, dtype), shape)


@lowering("REDUCE_MAX", types=("int8", "float32"))
def reduce_max(ctx: OpContext):
    return _extreme(ctx, "max")


@lowering("REDUCE_MIN", types=("int8", "float32"))
def reduce_min(ctx: OpContext):
    return _extreme(ctx, "min")


# ---------------------------------------------------------------- ARG_MAX, ARG_MIN

def _arg(ctx: OpContext, is_max: bool):
    x, y = ctx.inputs[0], ctx.outputs[0]
    x_shape = ctx.shape(x)
    axes = _axes(ctx, len(x_shape))
    if len(axes) != 1:
        ctx.refuse(f"its axis operand names {len(axes)} axes; {ctx.name} takes one.")
    out_dtype = ctx.dtype(y)
    if out_dtype not in ("int32", "int64"):
        ctx.refuse(f"its output type is {out_dtype}; {ctx.name} outputs int32 or int64.")
    axis = axes[0]
    outer, n, inner = kr.split_axis(x_shape, axis)
    prim = _opaque(kr.arg_extreme(x_shape, axis, ctx.dtype(x), out_dtype, is_max))
    shape = tuple(d for a, d in enumerate(x_shape) if a != axis)
    return _finish(ctx, ctx.emit(ctx.name, prim, [ctx.expr(x)], shape, out_dtype, macs=outer * n * inner), shape)


@lowering("ARG_MAX", types=("int8", "float32"))
def arg_max(ctx: OpContext):
    return _arg(ctx, True)


@lowering("ARG_MIN", types=("int8", "float32"))
def arg_min(ctx: OpContext):
    return _arg(ctx, False)


# ---------------------------------------------------------------- CUMSUM

@lowering("CUMSUM", types=("float32", "int8"))
def cumsum(ctx: OpContext):
    x, y = ctx.inputs[0], ctx.outputs[0]
    x_shape = ctx.shape(x)
    axes = _axes(ctx, len(x_shape))
    if len(axes) != 1:
        ctx.refuse("its axis operand must name one axis.")
    opts = ctx.options(tflite.CumsumOptions)
    exclusive = bool(opts.Exclusive()) if opts is not None else False
    reverse = bool(opts.Reverse()) if opts is not None else False
    outer, n, inner = kr.split_axis(x_shape, axes[0])
    dtype = ctx.dtype(x)
    if dtype == "float32":
        prim = kr.cumsum_float(x_shape, axes[0], exclusive, reverse)
    else:
        in_scale, in_zp = ctx.scale_zp(x, "input")
        out_scale, out_zp = ctx.scale_zp(y, "output")
        in_mult, in_shift, _, _, out_mult, out_shift = add_rescale(in_scale, in_scale, out_scale, 20)  # TFLM's ADD
        if in_shift > 0 or out_shift > 0:
            ctx.refuse("its rescaling multiplier is not below one (TFLM's QuantizeMultiplierSmallerThanOneExp).")
        prim = kr.cumsum_int8(x_shape, axes[0], exclusive, reverse, in_zp, in_mult, in_shift, out_mult, out_shift, out_zp)
    return ctx.emit("CUMSUM", _opaque(prim), [ctx.expr(x)], x_shape, dtype, macs=outer * n * inner)


# ---------------------------------------------------------------- RESIZE_BILINEAR

@lowering("RESIZE_BILINEAR", types=("int8",))
def resize_bilinear(ctx: OpContext):
    x, y = ctx.inputs[0], ctx.outputs[0]
    x_shape, out_shape = ctx.shape(x), ctx.shape(y)
    if len(x_shape) != 4 or len(out_shape) != 4:
        ctx.refuse("RESIZE_BILINEAR takes a 4-D NHWC input.")
    size = ctx.value(ctx.inputs[1])
    if size is not None and tuple(int(s) for s in np.asarray(size).reshape(-1)) != tuple(out_shape[1:3]):
        ctx.refuse(f"its size operand {list(np.asarray(size).reshape(-1))} differs from its output shape {list(out_shape)}.")
    opts = ctx.options(tflite.ResizeBilinearOptions)
    align = bool(opts.AlignCorners()) if opts is not None else False
    half = bool(opts.HalfPixelCenters()) if opts is not None else False
    if align and half:
        ctx.refuse("it sets both align_corners and half_pixel_centers, which TFLite does not allow.")
    rows = kr.bilinear_sources_int(x_shape[1], out_shape[1], align, half)
    cols = kr.bilinear_sources_int(x_shape[2], out_shape[2], align, half)
    prim = kr.resize_bilinear_int8(x_shape, out_shape[1:3])
    return ctx.emit("RESIZE_BILINEAR", prim, [ctx.expr(x), rows, cols], out_shape, "int8", macs=4 * int(np.prod(out_shape)))


# ---------------------------------------------------------------- int8 pools

_ACTIVATIONS = {0: "NONE", 1: "RELU", 2: "RELU_N1_TO_1", 3: "RELU6"}


def _same_padding(size: int, filt: int, stride: int) -> tuple[int, int]:
    """(output size, padding before) of TFLite's SAME padding (the smaller half before)."""
    out = (size + stride - 1) // stride
    total = max((out - 1) * stride + filt - size, 0)
    return out, total // 2



def _pool(ctx: OpContext, kind: str):
    x, y = ctx.inputs[0], ctx.outputs[0]
    dtype = ctx.dtype(x)
    in_scale, in_zp = ctx.scale_zp(x, "input")
    out_scale, out_zp = ctx.scale_zp(y, "output")
    if abs(float(np.float32(in_scale)) - float(np.float32(out_scale))) > 1e-6 or in_zp != out_zp:
        ctx.refuse(f"its input and output are quantized differently ({in_scale}, {in_zp} vs {out_scale}, {out_zp}); "
                   f"TFLite Micro's {dtype} {kind} requires one quantization.")
    if ctx.dtype(y) != dtype:
        ctx.refuse(f"its output is {ctx.dtype(y)}, its input {dtype}; TFLite Micro's {kind} keeps the type.")
    x_shape, out_shape = ctx.shape(x), ctx.shape(y)
    if len(x_shape) != 4:
        ctx.refuse(f"{kind} takes a 4-D NHWC input.")
    o = ctx.options(tflite.Pool2DOptions)
    filt, stride = (o.FilterHeight(), o.FilterWidth()), (o.StrideH(), o.StrideW())
    act = _ACTIVATIONS.get(o.FusedActivationFunction())
    if act is None:
        ctx.refuse(f"fused activation {o.FusedActivationFunction()} is not one TFLite Micro applies to {dtype} pools.")
    if o.Padding() == tflite.Padding.SAME:
        (oh, pt), (ow, pl) = _same_padding(x_shape[1], filt[0], stride[0]), _same_padding(x_shape[2], filt[1], stride[1])
    else:
        oh, ow, pt, pl = (x_shape[1] - filt[0]) // stride[0] + 1, (x_shape[2] - filt[1]) // stride[1] + 1, 0, 0
    if (oh, ow) != tuple(out_shape[1:3]):
        ctx.refuse(f"its output shape {list(out_shape)} does not match the {kind} window ({oh}x{ow} expected).")
    lo, hi = (-128, 127) if dtype == "int8" else (-32768, 32767)
    act_min, act_max = activation_range(act, out_scale, out_zp, lo, hi)
    if dtype == "int8":
        if kind == "MAX_POOL_2D":  # with its spec: a patch stage rebuilds it for a patch (passes/patches.py)
            from ...kernels.specs import MaxPool
            from ...passes import kernel_spec

            prim = kernel_spec.build(MaxPool(x_shape=x_shape, out_shape=out_shape, pool=filt, stride=stride,
                                             pad=(pt, pl), act_min=act_min, act_max=act_max))  # fmt: skip
        else:
            prim = int8_ops.average_pool2d(x_shape, filt, stride, (pt, pl), out_shape, int8_ops.Requant(out_zp, act_min, act_max))
        # the window, for partial liveness (passes/overlap.py: output over the input rows no later pixel reads)
        prim = kernel_attrs.with_window(prim, kernel_attrs.Window(tuple(x_shape), tuple(out_shape), tuple(filt),
                                                                  tuple(stride), (pt, pl)))
    else:
        build = kr.average_pool if kind == "AVERAGE_POOL_2D" else kr.max_pool
        prim = build(x_shape, dtype, filt, stride, (pt, pl), out_shape, act_min, act_max)
    return ctx.emit(kind, prim, [ctx.expr(x)], out_shape, dtype, macs=int(np.prod(out_shape)) * filt[0] * filt[1])


@lowering("AVERAGE_POOL_2D", types=("int8", "int16"))
def average_pool(ctx: OpContext):
    return _pool(ctx, "AVERAGE_POOL_2D")


@lowering("MAX_POOL_2D", types=("int8", "int16"))
def max_pool(ctx: OpContext):
    return _pool(ctx, "MAX_POOL_2D")


# ---------------------------------------------------------------- RESIZE_NEAREST_NEIGHBOR int16

@lowering("RESIZE_NEAREST_NEIGHBOR", types=("int16",))
def resize_nearest(ctx: OpContext):
    """int16 (TFLM's reference ResizeNearestNeighbor, a copy; int8 is built by integerize from TVM's import)."""
    from ...passes.integerize import nearest_neighbor_sources

    x, y = ctx.inputs[0], ctx.outputs[0]
    x_shape, out_shape = ctx.shape(x), ctx.shape(y)
    if len(x_shape) != 4 or len(out_shape) != 4:
        ctx.refuse("RESIZE_NEAREST_NEIGHBOR takes a 4-D NHWC input.")
    size = ctx.value(ctx.inputs[1])
    if size is None:
        ctx.refuse("its size operand is computed at run time; TFLite Micro needs it constant.")
    if tuple(int(s) for s in np.asarray(size).reshape(-1)) != tuple(out_shape[1:3]):
        ctx.refuse(f"its size operand {list(np.asarray(size).reshape(-1))} differs from its output shape {list(out_shape)}.")
    if ctx.quant(x) is not None and ctx.quant(y) is not None and ctx.scale_zp(x, "input") != ctx.scale_zp(y, "output"):
        ctx.refuse("its input and output are quantized differently; TFLite Micro's RESIZE_NEAREST_NEIGHBOR copies values.")
    opts = ctx.options(tflite.ResizeNearestNeighborOptions)
    align = bool(opts.AlignCorners()) if opts is not None else False
    half = bool(opts.HalfPixelCenters()) if opts is not None else False
    rows = nearest_neighbor_sources(x_shape[1], out_shape[1], align, half)
    cols = nearest_neighbor_sources(x_shape[2], out_shape[2], align, half)
    dtype = ctx.dtype(x)
    prim = kr.resize_nearest(x_shape, dtype, out_shape[1:3])
    return ctx.emit("RESIZE_NEAREST_NEIGHBOR", prim, [ctx.expr(x), rows, cols], out_shape, dtype)
