"""Layout operators: data movement of any element type (see registry.py for how a lowering is written).

Each output element is one input element (or a pad value), so int8 results are TFLite Micro's bit for bit
whatever the quantization: like TFLM's kernels, these copy raw values (TFLM neither requantizes nor checks
that input and output share a quantization; the converter always writes one). Shape-only operators
(SQUEEZE, EXPAND_DIMS) are views. Operators whose result is known at build time never get here: they are
evaluated at import (frontend/fold.py). Multi-output operators (SPLIT, SPLIT_V, UNPACK) return a tuple of
one kernel per output.
"""

from __future__ import annotations

import numpy as np
import tflite
from tvm import relax, tirx

from ...kernels import layout as k
from ..fold import python_slices
from .registry import OpContext, lowering

MOVE = ("int8", "int16", "float32", "int32", "bool")
# The uint8 layout operators TFLite Micro runs: its RESHAPE and SQUEEZE copy bytes whatever the type, REVERSE_V2 has a
# uint8 case and BROADCAST_TO copies by element size. Its other layout kernels (TRANSPOSE, CONCATENATION, PAD, SLICE,
# EXPAND_DIMS, GATHER, ...) refuse uint8, so edgemem refuses them too rather than run a model TFLM cannot.
MOVE_U8 = MOVE + ("uint8",)


def _vec(ctx: OpContext, t, what: str) -> list[int]:
    v = ctx.value(t)
    if v is None:
        ctx.refuse(f"its {what} '{ctx.tensor_name(t)}' is computed at run time; edgemem needs it constant (known when the model is built).")
    return [int(a) for a in np.asarray(v).reshape(-1)]


def _emit_copy(ctx, kind, prim, args, out, tag=""):
    return ctx.emit(kind, prim, args, ctx.shape(out), ctx.dtype(out), tag=tag)


def _affine(ctx, kind, x, out, starts, steps, sources, kernel_shape=None, tag=""):
    """out = x picked along per-axis (start, step, source output axis); ``kernel_shape`` when the kernel's
    own output shape differs from the TFLite output's (it is then viewed as the latter)."""
    shape = tuple(kernel_shape) if kernel_shape is not None else ctx.shape(out)
    prim = k.affine_copy(ctx.shape(x), ctx.dtype(x), shape, starts, steps, sources)
    res = ctx.emit(kind, prim, [ctx.expr(x)], shape, ctx.dtype(x), tag=tag)
    return res if shape == ctx.shape(out) else ctx.reshape(res, ctx.shape(out))


def _slices(ctx, kind, x, outs, axis, sizes):
    """One copy kernel per piece of ``x`` cut along ``axis`` (SPLIT, SPLIT_V)."""
    rank = len(ctx.shape(x))
    pieces, start = [], 0
    for i, (out, size) in enumerate(zip(outs, sizes)):
        starts = [0] * rank
        starts[axis] = start
        pieces.append(_affine(ctx, kind, x, out, starts, [1] * rank, list(range(rank)), tag=f"_{i}"))
        start += size
    return relax.Tuple(pieces)


@lowering("SQUEEZE", types=MOVE_U8)
@lowering("EXPAND_DIMS", types=MOVE)
def view(ctx: OpContext):
    x, y = ctx.inputs[0], ctx.outputs[0]
    if ctx.dtype(x) != ctx.dtype(y):
        ctx.refuse(f"input {ctx.dtype(x)} and output {ctx.dtype(y)} differ.")
    return ctx.reshape(ctx.expr(x), ctx.shape(y))


@lowering("RESHAPE", types=("int16", "uint8"))
def reshape(ctx: OpContext):
    """A view (int8 and float RESHAPE go through TVM's converter, which keeps them views too; its QDQ import has
    no uint8 path, so uint8 ones are views here as int16 ones)."""
    return view(ctx)


@lowering("TRANSPOSE", types=("int16",))
def transpose(ctx: OpContext):
    x, y = ctx.inputs[0], ctx.outputs[0]
    rank = len(ctx.shape(x))
    perm = [p % rank for p in _vec(ctx, ctx.inputs[1], "permutation")]
    sources = [perm.index(a) for a in range(rank)]  # input axis a is output axis perm.index(a)
    return _affine(ctx, "TRANSPOSE", x, y, [0] * rank, [1] * rank, sources)


@lowering("PACK", types=MOVE)
def pack(ctx: OpContext):
    y = ctx.outputs[0]
    axis = ctx.options(tflite.PackOptions).Axis() % len(ctx.shape(y))
    shapes = [ctx.shape(t) for t in ctx.inputs]
    prim = k.stack(shapes, ctx.dtype(y), axis, ctx.shape(y))
    return _emit_copy(ctx, "PACK", prim, [ctx.expr(t) for t in ctx.inputs], y)


@lowering("UNPACK", types=MOVE)
def unpack(ctx: OpContext):
    x = ctx.inputs[0]
    rank = len(ctx.shape(x))
    axis = ctx.options(tflite.UnpackOptions).Axis() % rank
    pieces = []
    for i, out in enumerate(ctx.outputs):
        starts = [0] * rank
        starts[axis] = i
        sources = [a if a < axis else (None if a == axis else a - 1) for a in range(rank)]
        pieces.append(_affine(ctx, "UNPACK", x, out, starts, [1] * rank, sources, tag=f"_{i}"))
    return relax.Tuple(pieces)


@lowering("SPLIT", types=MOVE)
def split(ctx: OpContext):
    axis_t, x = ctx.inputs[0], ctx.inputs[1]
    rank = len(ctx.shape(x))
    axis = _vec(ctx, axis_t, "axis")[0] % rank
    n = len(ctx.outputs)
    if ctx.shape(x)[axis] % n:
        ctx.refuse(f"axis {axis} of size {ctx.shape(x)[axis]} does not split into {n} equal parts.")
    return _slices(ctx, "SPLIT", x, ctx.outputs, axis, [ctx.shape(x)[axis] // n] * n)


@lowering("SPLIT_V", types=MOVE)
def split_v(ctx: OpContext):
    x = ctx.inputs[0]
    rank = len(ctx.shape(x))
    axis = _vec(ctx, ctx.inputs[2], "axis")[0] % rank
    sizes = [ctx.shape(o)[axis] for o in ctx.outputs]  # the converter resolved any -1 into the shapes
    return _slices(ctx, "SPLIT_V", x, ctx.outputs, axis, sizes)


@lowering("SLICE", types=MOVE)
def slice_(ctx: OpContext):
    x, y = ctx.inputs[0], ctx.outputs[0]
    begin = _vec(ctx, ctx.inputs[1], "begin")
    rank = len(ctx.shape(x))
    return _affine(ctx, "SLICE", x, y, begin, [1] * rank, list(range(rank)))


def strided_slice_map(in_shape, begin, end, strides, masks):
    """Per input axis (start, step, output axis or None) and the kernel's output shape (shrunk axes
    dropped, new axes kept as 1) of TFLite's STRIDED_SLICE with its masks."""
    index = python_slices(in_shape, begin, end, strides, *masks)
    real = sum(1 for e in index if e is not None and e is not Ellipsis)
    expanded = []
    for e in index:
        if e is Ellipsis:
            expanded += [slice(None)] * (len(in_shape) - real)
        else:
            expanded.append(e)
    expanded += [slice(None)] * (len(in_shape) - sum(1 for e in expanded if e is not None))
    starts, steps, sources, out_shape = [], [], [], []
    axis = 0
    for e in expanded:
        if e is None:
            out_shape.append(1)
            continue
        dim = int(in_shape[axis])
        if isinstance(e, int):
            i = e + dim if e < 0 else e
            if not 0 <= i < dim:
                raise ValueError(f"index {e} out of range on axis {axis} of size {dim}")
            starts.append(i), steps.append(0), sources.append(None)
        else:
            start, stop, step = e.indices(dim)
            count = len(range(start, stop, step))
            starts.append(start if count else 0), steps.append(step), sources.append(len(out_shape))
            out_shape.append(count)
        axis += 1
    return starts, steps, sources, out_shape


@lowering("STRIDED_SLICE", types=MOVE)
def strided_slice(ctx: OpContext):
    x, y = ctx.inputs[0], ctx.outputs[0]
    o = ctx.options(tflite.StridedSliceOptions)
    if o is not None and o.Offset():
        ctx.refuse("its 'offset' option (end relative to begin) is not supported.")
    masks = (o.BeginMask(), o.EndMask(), o.ShrinkAxisMask(), o.EllipsisMask(), o.NewAxisMask()) if o else (0,) * 5
    vecs = [_vec(ctx, t, what) for t, what in zip(ctx.inputs[1:4], ("begin", "end", "strides"))]
    if 0 in vecs[2]:
        ctx.refuse("a stride is 0.")
    try:
        starts, steps, sources, shape = strided_slice_map(ctx.shape(x), *vecs, masks)
    except ValueError as exc:
        ctx.refuse(f"{exc}.")
    if int(np.prod(shape)) != int(np.prod(ctx.shape(y))):
        ctx.refuse(f"its output shape {list(ctx.shape(y))} is not the slice's {shape}.")
    if int(np.prod(shape)) == 0:
        ctx.refuse("its output is empty.")
    return _affine(ctx, "STRIDED_SLICE", x, y, starts, steps, sources, kernel_shape=shape)


@lowering("REVERSE_V2", types=MOVE_U8)
def reverse(ctx: OpContext):
    x, y = ctx.inputs[0], ctx.outputs[0]
    shape = ctx.shape(x)
    listed = sorted(a % len(shape) for a in _vec(ctx, ctx.inputs[1], "axis"))
    if any(b != a + 1 for a, b in zip(listed, listed[1:])):
        # TFLM's Eval refuses it ("Non-contiguous `axes` not supported", a repeated axis included) for every type
        ctx.refuse(f"it reverses axes {listed}, which are not distinct neighbours; TFLite Micro reverses only neighbouring "
                   "axes. Reverse them in two operators.")
    axes = set(listed)
    starts = [d - 1 if a in axes else 0 for a, d in enumerate(shape)]
    steps = [-1 if a in axes else 1 for a in range(len(shape))]
    return _affine(ctx, "REVERSE_V2", x, y, starts, steps, list(range(len(shape))))


@lowering("GATHER", types=MOVE)
def gather(ctx: OpContext):
    x, idx, y = ctx.inputs[0], ctx.inputs[1], ctx.outputs[0]
    o = ctx.options(tflite.GatherOptions)
    x_shape, i_shape = ctx.shape(x), ctx.shape(idx)
    axis = (o.Axis() if o else 0) % len(x_shape)
    if o is not None and o.BatchDims() != 0:
        ctx.refuse(f"batch_dims={o.BatchDims()} is not supported (only 0).")
    if ctx.value(idx) is not None and not ctx.is_const(x):
        v = ctx.value(idx)
        if np.any(v < 0) or np.any(v >= x_shape[axis]):
            ctx.refuse(f"an index is outside [0, {x_shape[axis] - 1}].")
    n = len(i_shape)

    def fn(xs, out):
        i = k.clamp_index(xs[1][tuple(out[axis:axis + n])], x_shape[axis])
        return xs[0][tuple(out[:axis]) + (i,) + tuple(out[axis + n:])]

    prim = k.pick([x_shape, i_shape], [ctx.dtype(x), _index_dtype(ctx, idx)], ctx.shape(y), ctx.dtype(y), fn)
    return _emit_copy(ctx, "GATHER", prim, [_arg(ctx, x), _arg(ctx, idx, index=True)], y)


def _arg(ctx, t, index: bool = False):
    """A constant as numpy (a flash constant of the kernel), an activation as its Relax var. int64 constant
    indices become int32 (edgemem's C has no int64 constants; indices are range-checked or clamped)."""
    v = ctx.value(t)
    if v is None:
        return ctx.expr(t)
    if index and v.dtype == np.int64:
        v = np.clip(v, -(1 << 31), (1 << 31) - 1).astype(np.int32)
    return np.ascontiguousarray(v)


def _index_dtype(ctx, t) -> str:
    return "int32" if ctx.value(t) is not None and ctx.dtype(t) == "int64" else ctx.dtype(t)


@lowering("GATHER_ND", types=MOVE)
def gather_nd(ctx: OpContext):
    x, idx, y = ctx.inputs[0], ctx.inputs[1], ctx.outputs[0]
    x_shape, i_shape = ctx.shape(x), ctx.shape(idx)
    depth = i_shape[-1]
    lead = len(i_shape) - 1
    v = ctx.value(idx)
    if v is not None and (np.any(v < 0) or np.any(v >= np.array(x_shape[:depth]))):
        ctx.refuse("an index is outside the params' shape.")

    def fn(xs, out):
        picks = tuple(k.clamp_index(xs[1][tuple(out[:lead]) + (j,)], x_shape[j]) for j in range(depth))
        return xs[0][picks + tuple(out[lead:])]

    prim = k.pick([x_shape, i_shape], [ctx.dtype(x), _index_dtype(ctx, idx)], ctx.shape(y), ctx.dtype(y), fn)
    return _emit_copy(ctx, "GATHER_ND", prim, [_arg(ctx, x), _arg(ctx, idx, index=True)], y)


@lowering("EMBEDDING_LOOKUP", types=MOVE)
def embedding_lookup(ctx: OpContext):
    ids, value, y = ctx.inputs[0], ctx.inputs[1], ctx.outputs[0]
    v_shape, rows = ctx.shape(value), ctx.shape(value)[0]
    vdt, ydt = ctx.dtype(value), ctx.dtype(y)
    scale = None
    if vdt == "int8" and ydt == "float32":  # TFLM's hybrid lookup: the row dequantized, zero point 0
        s, zp = ctx.scale_zp(value, "value")
        if zp != 0:
            ctx.refuse(f"its int8 value has zero point {zp}; TFLite's hybrid lookup needs 0.")
        scale = float(np.float32(s))
    elif vdt != ydt or vdt not in ("int8", "float32"):
        ctx.refuse(f"value {vdt} -> output {ydt}; TFLite Micro looks up float32 or int8 rows (int8 -> float32 hybrid).")
    if ctx.dtype(ids) != "int32":
        ctx.refuse(f"its ids are {ctx.dtype(ids)}; TFLite takes int32.")

    def fn(xs, out):
        v = xs[1][(k.clamp_index(xs[0][out[0]], rows),) + tuple(out[1:])]
        return v.astype("float32") * tirx.const(scale, "float32") if scale is not None else v

    prim = k.pick([ctx.shape(ids), v_shape], ["int32", vdt], ctx.shape(y), ydt, fn)
    return _emit_copy(ctx, "EMBEDDING_LOOKUP", prim, [_arg(ctx, ids, index=True), _arg(ctx, value)], y)


@lowering("DEPTH_TO_SPACE", types=MOVE)
def depth_to_space(ctx: OpContext):
    x, y = ctx.inputs[0], ctx.outputs[0]
    b = ctx.options(tflite.DepthToSpaceOptions).BlockSize()
    c_out = ctx.shape(y)[3]

    def fn(xs, o):
        n, h, w, c = o
        return xs[0][n, h // b, w // b, ((h % b) * b + w % b) * c_out + c]

    return _emit_copy(ctx, "DEPTH_TO_SPACE", k.pick([ctx.shape(x)], [ctx.dtype(x)], ctx.shape(y), ctx.dtype(y), fn), [ctx.expr(x)], y)


@lowering("SPACE_TO_DEPTH", types=MOVE)
def space_to_depth(ctx: OpContext):
    x, y = ctx.inputs[0], ctx.outputs[0]
    b = ctx.options(tflite.SpaceToDepthOptions).BlockSize()
    c_in = ctx.shape(x)[3]

    def fn(xs, o):
        n, h, w, c = o
        return xs[0][n, h * b + c // (b * c_in), w * b + (c // c_in) % b, c % c_in]

    return _emit_copy(ctx, "SPACE_TO_DEPTH", k.pick([ctx.shape(x)], [ctx.dtype(x)], ctx.shape(y), ctx.dtype(y), fn), [ctx.expr(x)], y)


def _spatial(ctx, x, y, block, pairs):
    """(4-D input shape, 4-D output shape, block [bh, bw], starts [top, left]) with TFLM's 3-D -> 4-D
    extension (N, H, C) -> (N, H, 1, C)."""
    xs, ys = ctx.shape(x), ctx.shape(y)
    if len(xs) not in (3, 4):
        ctx.refuse(f"its input has rank {len(xs)}; TFLite Micro takes 3-D or 4-D.")
    if len(xs) == 3:
        return (xs[0], xs[1], 1, xs[2]), (ys[0], ys[1], 1, ys[2]), [block[0], 1], [pairs[0], 0]
    return xs, ys, block[:2], [pairs[0], pairs[2]]


@lowering("SPACE_TO_BATCH_ND", types=MOVE)
def space_to_batch_nd(ctx: OpContext):
    x, y = ctx.inputs[0], ctx.outputs[0]
    block, pads = _vec(ctx, ctx.inputs[1], "block shape"), _vec(ctx, ctx.inputs[2], "paddings")
    xs, ys, (bh, bw), (top, left) = _spatial(ctx, x, y, block, pads)
    n_in, h_in, w_in = xs[0], xs[1], xs[2]
    dtype = ctx.dtype(x)
    pad = tirx.const(False, "bool") if dtype == "bool" else tirx.const(0, dtype)  # TFLM pads with 0 (raw)

    def fn(t, o):
        ob, oh, ow, c = o
        n, shift_w, shift_h = ob % n_in, (ob // n_in) % bw, (ob // n_in) // bw
        h, w = oh * bh + shift_h - top, ow * bw + shift_w - left
        inside = tirx.all(h >= 0, h < h_in, w >= 0, w < w_in)
        hs, ws = tirx.Max(tirx.Min(h, h_in - 1), 0), tirx.Max(tirx.Min(w, w_in - 1), 0)
        return tirx.if_then_else(inside, t[0][n, hs, ws, c], pad)

    prim = k.pick([xs], [dtype], ys, dtype, fn)
    res = ctx.emit("SPACE_TO_BATCH_ND", prim, [ctx.reshape(ctx.expr(x), xs)], ys, dtype)
    return res if tuple(ys) == ctx.shape(y) else ctx.reshape(res, ctx.shape(y))


@lowering("BATCH_TO_SPACE_ND", types=MOVE)
def batch_to_space_nd(ctx: OpContext):
    x, y = ctx.inputs[0], ctx.outputs[0]
    block, crops = _vec(ctx, ctx.inputs[1], "block shape"), _vec(ctx, ctx.inputs[2], "crops")
    xs, ys, (bh, bw), (top, left) = _spatial(ctx, x, y, block, crops)
    n_out = ys[0]
    dtype = ctx.dtype(x)

    def fn(t, o):
        n, h, w, c = o
        hh, ww = h + top, w + left
        return t[0][((hh % bh) * bw + ww % bw) * n_out + n, hh // bh, ww // bw, c]

    prim = k.pick([xs], [dtype], ys, dtype, fn)
    res = ctx.emit("BATCH_TO_SPACE_ND", prim, [ctx.reshape(ctx.expr(x), xs)], ys, dtype)
    return res if tuple(ys) == ctx.shape(y) else ctx.reshape(res, ctx.shape(y))


@lowering("MIRROR_PAD", types=MOVE)
def mirror_pad(ctx: OpContext):
    x, y = ctx.inputs[0], ctx.outputs[0]
    pads = _vec(ctx, ctx.inputs[1], "paddings")
    symmetric = ctx.options(tflite.MirrorPadOptions).Mode() == 1  # 0 REFLECT, 1 SYMMETRIC
    shape = ctx.shape(x)
    for a, d in enumerate(shape):
        limit = d if symmetric else d - 1
        if max(pads[2 * a], pads[2 * a + 1]) > limit:
            ctx.refuse(f"padding {pads[2 * a:2 * a + 2]} on axis {a} of size {d} exceeds {limit}.")

    def fn(t, o):
        return t[0][tuple(k.mirror_index(oi, pads[2 * a], d, symmetric) for a, (oi, d) in enumerate(zip(o, shape)))]

    return _emit_copy(ctx, "MIRROR_PAD", k.pick([shape], [ctx.dtype(x)], ctx.shape(y), ctx.dtype(y), fn), [ctx.expr(x)], y)


@lowering("BROADCAST_TO", types=MOVE_U8)
def broadcast_to(ctx: OpContext):
    x, y = ctx.inputs[0], ctx.outputs[0]
    return _emit_copy(ctx, "BROADCAST_TO", k.broadcast_to(ctx.shape(x), ctx.dtype(x), ctx.shape(y)), [ctx.expr(x)], y)


@lowering("TILE", types=MOVE)
def tile(ctx: OpContext):
    x, y = ctx.inputs[0], ctx.outputs[0]
    return _emit_copy(ctx, "TILE", k.tile(ctx.shape(x), ctx.dtype(x), ctx.shape(y)), [ctx.expr(x)], y)


@lowering("DYNAMIC_UPDATE_SLICE", types=MOVE)
def dynamic_update_slice(ctx: OpContext):
    x, upd, start, y = ctx.inputs[0], ctx.inputs[1], ctx.inputs[2], ctx.outputs[0]
    xs, us = ctx.shape(x), ctx.shape(upd)
    if ctx.dtype(x) != ctx.dtype(upd):
        ctx.refuse(f"operand {ctx.dtype(x)} and update {ctx.dtype(upd)} differ.")

    def fn(t, o):
        # TFLM clamps each start index into [0, dim - update_dim]
        begin = [tirx.Max(tirx.Min(t[2][a].astype("int32"), d - u), 0) for a, (d, u) in enumerate(zip(xs, us))]
        rel = [oi - b for oi, b in zip(o, begin)]
        inside = tirx.all(*[tirx.all(r >= 0, r < u) for r, u in zip(rel, us)])
        safe = tuple(tirx.Max(tirx.Min(r, u - 1), 0) for r, u in zip(rel, us))
        return tirx.if_then_else(inside, t[1][safe], t[0][o])

    prim = k.pick([xs, us, ctx.shape(start)], [ctx.dtype(x), ctx.dtype(upd), _index_dtype(ctx, start)], ctx.shape(y), ctx.dtype(y), fn)
    return _emit_copy(ctx, "DYNAMIC_UPDATE_SLICE", prim, [_arg(ctx, x), _arg(ctx, upd), _arg(ctx, start, index=True)], y)


@lowering("FILL", types=MOVE)
def fill(ctx: OpContext):
    value, y = ctx.inputs[1], ctx.outputs[0]  # dims are constant (the output's shape is static)
    prim = k.pick([ctx.shape(value)], [ctx.dtype(value)], ctx.shape(y), ctx.dtype(y), lambda t, o: t[0][(0,) * len(ctx.shape(value))])
    return _emit_copy(ctx, "FILL", prim, [ctx.expr(value)], y)


_CAST_TYPES = ("int8", "int16", "int32", "uint32", "float32", "bool")


@lowering("CAST", types=_CAST_TYPES)
def cast(ctx: OpContext):
    x, y = ctx.inputs[0], ctx.outputs[0]
    src, dst = ctx.dtype(x), ctx.dtype(y)
    if dst not in _CAST_TYPES:
        ctx.refuse(f"cast {src} -> {dst} is not supported (edgemem casts between {', '.join(_CAST_TYPES)}).")
    if "uint32" in (src, dst) and "float32" in (src, dst):  # TFLM's static_cast of a negative float to uint32 is undefined
        ctx.refuse(f"cast {src} -> {dst} is not supported (uint32 casts to and from the integer types only).")
    return _emit_copy(ctx, "CAST", k.cast(ctx.shape(x), src, dst), [ctx.expr(x)], y)


# ---------------------------------------------------------------- int16 joins (int8 ones: passes/integerize.py)

def _zero_points_zero(ctx: OpContext, tensors, what: str):
    for t in tensors:
        q = ctx.quant(t)
        if q is not None and np.any(q[1] != 0):
            ctx.refuse(f"its {what} '{ctx.tensor_name(t)}' has zero point {int(q[1][0])}; TFLite Micro's int16 {ctx.name} requires 0.")


def _operand(ctx: OpContext, t):
    """A constant's numpy value (flash) or the activation's expr."""
    v = ctx.value(t)
    return ctx.expr(t) if v is None else np.ascontiguousarray(v).reshape(ctx.shape(t) or (1,))


@lowering("CONCATENATION", types=("int16",))
def concatenation_int16(ctx: OpContext):
    """TFLM's int16 CONCATENATION copies raw values (no requantization, whatever the scales; zero points must
    be 0 and the fused activation NONE, its Prepare checks)."""
    y = ctx.outputs[0]
    for t in ctx.inputs:
        if ctx.dtype(t) != ctx.dtype(y):
            ctx.refuse(f"input '{ctx.tensor_name(t)}' is {ctx.dtype(t)}, the output {ctx.dtype(y)}.")
    _zero_points_zero(ctx, [*ctx.inputs, y], "tensor")
    opts = ctx.options(tflite.ConcatenationOptions)
    if opts is not None and opts.FusedActivationFunction() != 0:
        ctx.refuse("it has a fused activation; TFLite Micro's CONCATENATION takes none.")
    out_shape = ctx.shape(y)
    rank = len(out_shape)
    axis = (opts.Axis() if opts is not None else 0) % max(rank, 1)
    shapes = [ctx.shape(t) for t in ctx.inputs]
    starts = np.cumsum([0] + [s[axis] for s in shapes]).tolist()
    if starts[-1] != out_shape[axis]:
        ctx.refuse(f"its inputs' sizes along axis {axis} do not add up to the output's {out_shape[axis]}.")

    def fn(xs, o):
        value = None
        for i in range(len(xs) - 1, -1, -1):  # input i holds output positions starts[i] .. starts[i + 1] - 1
            if shapes[i][axis] == 0:
                continue
            here = xs[i][tuple(oi - starts[i] if a == axis else oi for a, oi in enumerate(o))]
            value = here if value is None else tirx.if_then_else(o[axis] < starts[i + 1], here, value)
        return value

    prim = k.pick(shapes, [ctx.dtype(t) for t in ctx.inputs], out_shape, ctx.dtype(y), fn)
    return _emit_copy(ctx, "CONCATENATION", prim, [_operand(ctx, t) for t in ctx.inputs], y)


@lowering("PAD", "PADV2", types=("int16",))
def pad_int16(ctx: OpContext):
    """TFLM's int16 PAD pads with 0 -- the raw value, not the zero point (its int8 PAD uses the zero point) --,
    PADV2 with the raw int16 of its constant_values (read when the kernel runs: it may be an activation)."""
    x, y = ctx.inputs[0], ctx.outputs[0]
    shape, out_shape = ctx.shape(x), ctx.shape(y)
    pads = _vec(ctx, ctx.inputs[1], "paddings")
    if len(pads) != 2 * len(out_shape) or len(shape) != len(out_shape):
        ctx.refuse(f"its paddings {pads} do not give two values per axis of its {len(out_shape)}-D output.")
    if len(shape) > 5:
        ctx.refuse(f"its input has {len(shape)} dimensions; TFLite Micro's PAD takes at most 5.")
    before = pads[0::2]
    for a, (d, n) in enumerate(zip(shape, out_shape)):
        if before[a] < 0 or pads[2 * a + 1] < 0 or d + before[a] + pads[2 * a + 1] != n:
            ctx.refuse(f"its paddings {pads[2 * a:2 * a + 2]} on axis {a} do not take size {d} to {n}.")
    dtype = ctx.dtype(y)
    args, shapes, dtypes = [ctx.expr(x)], [shape], [ctx.dtype(x)]
    has_value = ctx.name == "PADV2" and ctx.present(2)
    if has_value:
        v = ctx.inputs[2]
        if ctx.dtype(v) != dtype:
            ctx.refuse(f"its constant_values '{ctx.tensor_name(v)}' is {ctx.dtype(v)}, its input {dtype}; TFLite Micro's "
                       f"PADV2 needs both of one type (it refuses this model too). Convert the model with the pad value "
                       f"quantized, or pad with zeros (PAD).")
        if int(np.prod(ctx.shape(v) or (1,))) != 1:
            ctx.refuse(f"its constant_values '{ctx.tensor_name(v)}' has {int(np.prod(ctx.shape(v)))} elements; PADV2 takes one.")
        args.append(_operand(ctx, v))
        shapes.append(ctx.shape(v) or (1,))
        dtypes.append(dtype)

    def fn(xs, o):
        pad_value = xs[1][(0,) * len(shapes[1])] if has_value else tirx.const(0, dtype)
        rel = [oi - b for oi, b in zip(o, before)]
        inside = tirx.all(*[tirx.all(r >= 0, r < d) for r, d in zip(rel, shape)]) if rel else tirx.const(True, "bool")
        safe = tuple(tirx.Max(tirx.Min(r, d - 1), 0) for r, d in zip(rel, shape))
        return tirx.if_then_else(inside, xs[0][safe], pad_value)

    prim = k.pick(shapes, dtypes, out_shape, dtype, fn)
    return _emit_copy(ctx, ctx.name, prim, args, y)
