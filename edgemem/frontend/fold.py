"""Operators whose result is known when the model is built, evaluated in numpy at import (constant folding).

The TFLite converter writes shape arithmetic into the graph: Keras ``Flatten`` on a model with a free batch
dimension becomes ``SHAPE -> STRIDED_SLICE -> PACK -> RESHAPE``, where SHAPE reads a tensor whose shape is
fixed (edgemem refuses dynamic shapes). Such an operator -- SHAPE or ZEROS_LIKE of any tensor, or any
operator below all of whose inputs are constants -- is evaluated here; its outputs become constants (the
converter's ``get_tensor_value`` answers them, and a reader gets a Relax constant) and no kernel is emitted.

Only exact evaluations are folded: data movement of any type (a quantized tensor's raw values move with
its quantization when input and output share it), and integer arithmetic on unquantized int32/int64 (shape
vectors). Anything else stays an operator and is lowered as usual.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

import numpy as np

from .footprint import builtin_options, indices

_NP_TYPES = {0: np.float32, 1: np.float16, 2: np.int32, 3: np.uint8, 4: np.int64, 6: np.bool_, 7: np.int16, 9: np.int8}
_SHAPE_ONLY = ("SHAPE", "ZEROS_LIKE")
_MAX_FOLDED = 1 << 16  # elements: folded results are flash constants  # need only the (static) shape of their input, not its value


@dataclass
class FoldOp:
    """One operator being evaluated: its builtin name and options, input values and output tensors."""

    name: str
    op: object
    sg: object
    inputs: list  # numpy values (None for a left-out optional input; for SHAPE-like ops the tensor's zeros)
    in_tensors: list  # flatbuffer tensors (None when left out)
    out_tensors: list

    def options(self, cls):
        return builtin_options(self.op, cls)

    def out_shape(self, i: int = 0) -> tuple[int, ...]:
        return tuple(indices(self.out_tensors[i].ShapeAsNumpy()))

    def out_dtype(self, i: int = 0):
        return _NP_TYPES[self.out_tensors[i].Type()]


def _quant(t) -> tuple | None:
    q = t.Quantization() if t is not None else None
    if q is None or q.ScaleLength() == 0:
        return None
    zps = tuple(int(z) for z in q.ZeroPointAsNumpy()) if q.ZeroPointLength() else (0,) * q.ScaleLength()
    return tuple(np.float32(s) for s in q.ScaleAsNumpy()), zps


def _moves_data(f: FoldOp) -> bool:
    """Raw values keep their meaning: every quantized input shares the outputs' quantization."""
    outs = {_quant(t) for t in f.out_tensors}
    ins = {_quant(t) for t in f.in_tensors if t is not None and t.Type() == f.out_tensors[0].Type()}
    return len(outs | ins) <= 1


def _plain_integers(f: FoldOp) -> bool:
    return all(_quant(t) is None and t.Type() in (2, 4) for t in [*f.out_tensors, *(t for t in f.in_tensors if t is not None)])


def _shape(f: FoldOp):
    from tflite import ShapeOptions

    opts = f.options(ShapeOptions)
    dtype = np.int64 if opts is not None and opts.OutType() == 4 else f.out_dtype()
    return [np.array(f.inputs[0].shape, dtype)]


def _reshape(f: FoldOp):
    return [f.inputs[0].reshape(f.out_shape())]


def python_slices(in_shape, begin, end, strides, begin_mask=0, end_mask=0, shrink_mask=0, ellipsis_mask=0, new_axis_mask=0):
    """TFLite's STRIDED_SLICE as a numpy index (slices, ints, None for new axes, Ellipsis): numpy's clamping
    of begin/end is TFLite's StartForAxis/StopForAxis for either sign of stride."""
    index = []
    for i, (b, e, s) in enumerate(zip(begin, end, strides)):
        bit = 1 << i
        if ellipsis_mask & bit:
            index.append(Ellipsis)
        elif new_axis_mask & bit:
            index.append(None)
        elif shrink_mask & bit:
            index.append(int(b))
        else:
            if int(s) == 0:
                raise ValueError("stride 0")
            index.append(slice(None if begin_mask & bit else int(b), None if end_mask & bit else int(e), int(s)))
    return tuple(index)


def _strided_slice(f: FoldOp):
    from tflite import StridedSliceOptions

    o = f.options(StridedSliceOptions)
    if o is not None and o.Offset():
        raise ValueError("offset")
    masks = (o.BeginMask(), o.EndMask(), o.ShrinkAxisMask(), o.EllipsisMask(), o.NewAxisMask()) if o else (0,) * 5
    x = f.inputs[0]
    return [np.array(x[python_slices(x.shape, *f.inputs[1:4], *masks)]).reshape(f.out_shape())]


def _pack(f: FoldOp):
    from tflite import PackOptions

    axis = f.options(PackOptions).Axis()
    return [np.stack(f.inputs, axis=axis % (f.inputs[0].ndim + 1))]


def _unpack(f: FoldOp):
    from tflite import UnpackOptions

    x = f.inputs[0]
    axis = f.options(UnpackOptions).Axis() % x.ndim
    return [np.take(x, i, axis=axis) for i in range(x.shape[axis])]


def _concatenation(f: FoldOp):
    from tflite import ConcatenationOptions

    o = f.options(ConcatenationOptions)
    if o.FusedActivationFunction() != 0:
        raise ValueError("fused activation")
    return [np.concatenate(f.inputs, axis=o.Axis() % f.inputs[0].ndim)]


def _cast(f: FoldOp):
    x, dtype = f.inputs[0], f.out_dtype()
    if dtype == np.bool_:
        return [x != 0]
    if np.issubdtype(dtype, np.integer) and np.issubdtype(x.dtype, np.floating):
        x = np.trunc(x)
        info = np.iinfo(dtype)
        if np.any(x < info.min) or np.any(x > info.max):
            raise ValueError("out of range")  # undefined in C: not folded
    return [x.astype(dtype)]


def _fill(f: FoldOp):
    dims = [int(d) for d in f.inputs[0].reshape(-1)]
    if dims != list(f.out_shape()):
        raise ValueError("dims differ from the output's shape")
    return [np.full(dims, f.inputs[1].reshape(()), dtype=f.out_dtype())]


def _gather(f: FoldOp):
    from tflite import GatherOptions

    o = f.options(GatherOptions)
    if o is not None and o.BatchDims() != 0:
        raise ValueError("batch_dims")
    x, idx = f.inputs[0], f.inputs[1]
    axis = (o.Axis() if o else 0) % x.ndim
    if np.any(idx < 0) or np.any(idx >= x.shape[axis]):
        raise ValueError("index out of range")
    return [np.take(x, idx, axis=axis)]


def _slice(f: FoldOp):
    x, begin, size = f.inputs[0], f.inputs[1].reshape(-1), f.inputs[2].reshape(-1)
    return [x[tuple(slice(int(b), int(b) + (int(s) if s >= 0 else x.shape[i] - int(b))) for i, (b, s) in enumerate(zip(begin, size)))]]


def _transpose(f: FoldOp):
    return [np.transpose(f.inputs[0], [int(a) for a in f.inputs[1].reshape(-1)])]


def _zeros_like(f: FoldOp):
    return [np.zeros(f.inputs[0].shape, f.out_dtype())]


def _broadcast_args(f: FoldOp):
    shape = np.broadcast_shapes(tuple(int(d) for d in f.inputs[0]), tuple(int(d) for d in f.inputs[1]))
    return [np.array(shape, f.out_dtype())]


def _broadcast_to(f: FoldOp):
    return [np.broadcast_to(f.inputs[0], f.out_shape()).copy()]


def _tile(f: FoldOp):
    if int(np.prod(f.inputs[0].shape)) * int(np.prod(f.inputs[1])) != int(np.prod(f.out_shape())):
        raise ValueError("multiples differ from the output's shape")
    return [np.tile(f.inputs[0], [int(m) for m in f.inputs[1].reshape(-1)])]


def _reverse(f: FoldOp):
    return [np.flip(f.inputs[0], axis=tuple(int(a) % f.inputs[0].ndim for a in f.inputs[1].reshape(-1)))]


def _split(f: FoldOp):
    axis_v, x = f.inputs[0], f.inputs[1]
    return np.split(x, len(f.out_tensors), axis=int(axis_v.reshape(())) % x.ndim)


def _split_v(f: FoldOp):
    x, sizes, axis_v = f.inputs
    axis = int(axis_v.reshape(())) % x.ndim
    sizes = [int(s) for s in sizes.reshape(-1)]
    if -1 in sizes:
        sizes[sizes.index(-1)] = x.shape[axis] - (sum(sizes) + 1)
    return np.split(x, np.cumsum(sizes)[:-1], axis=axis)


def _arith(fn):
    def fold(f: FoldOp):
        if not _plain_integers(f) or _fused_activation(f):
            raise ValueError("not plain integer arithmetic")
        return [np.asarray(fn(*f.inputs)).astype(f.out_dtype())]

    return fold


def _fused_activation(f: FoldOp) -> bool:
    from tflite import AddOptions, MulOptions, SubOptions

    cls = {"ADD": AddOptions, "SUB": SubOptions, "MUL": MulOptions}.get(f.name)
    o = f.options(cls) if cls else None
    return bool(o is not None and o.FusedActivationFunction() != 0)


def _reduce_prod(f: FoldOp):
    from tflite import ReducerOptions

    if not _plain_integers(f):
        raise ValueError("not plain integers")
    o = f.options(ReducerOptions)
    x = f.inputs[0]
    axes = tuple(int(a) % x.ndim for a in f.inputs[1].reshape(-1))
    return [np.prod(x, axis=axes, keepdims=bool(o and o.KeepDims())).astype(f.out_dtype())]


# name -> (evaluator, whether it only moves data: then quantized values fold when the quantization is shared)
FOLDERS: dict[str, tuple[Callable, bool]] = {
    "SHAPE": (_shape, False), "ZEROS_LIKE": (_zeros_like, False),
    "RESHAPE": (_reshape, True), "SQUEEZE": (_reshape, True), "EXPAND_DIMS": (_reshape, True),
    "STRIDED_SLICE": (_strided_slice, True), "SLICE": (_slice, True), "PACK": (_pack, True), "UNPACK": (_unpack, True),
    "CONCATENATION": (_concatenation, True), "GATHER": (_gather, True), "TRANSPOSE": (_transpose, True),
    "BROADCAST_TO": (_broadcast_to, True), "TILE": (_tile, True), "REVERSE_V2": (_reverse, True),
    "SPLIT": (_split, True), "SPLIT_V": (_split_v, True), "FILL": (_fill, True),
    "CAST": (_cast, False), "BROADCAST_ARGS": (_broadcast_args, False),
    "ADD": (_arith(np.add), False), "SUB": (_arith(np.subtract), False), "MUL": (_arith(np.multiply), False),
    "FLOOR_DIV": (_arith(np.floor_divide), False), "MINIMUM": (_arith(np.minimum), False),
    "MAXIMUM": (_arith(np.maximum), False), "REDUCE_PROD": (_reduce_prod, False),
}  # fmt: skip


def _buffer_value(model, t) -> np.ndarray | None:
    buf = model.Buffers(t.Buffer())
    if t.Type() not in _NP_TYPES or buf is None:
        return None
    shape = indices(t.ShapeAsNumpy())
    if buf.DataLength() == 0:  # a constant with no elements (RESHAPE's shape [] of a scalar) has no data
        return np.zeros(shape, _NP_TYPES[t.Type()]) if t.Buffer() > 0 and 0 in shape else None
    return np.frombuffer(buf.DataAsNumpy().tobytes(), _NP_TYPES[t.Type()]).reshape(shape)


def fold_model(model) -> tuple[dict[int, np.ndarray], set[int]]:
    """({tensor index: value} of every output of a folded operator, {indices of the folded operators})."""
    from .tflite_import import _op_name

    sg = model.Subgraphs(0)
    values: dict[int, np.ndarray] = {}
    folded: set[int] = set()
    keep = {int(t) for t in indices(sg.OutputsAsNumpy())} | {int(t) for t in indices(sg.InputsAsNumpy())}
    for i in range(sg.OperatorsLength()):
        try:
            outs, results = _fold_op(model, sg, i, values, keep, _op_name(model, sg.Operators(i)))
        except Exception:  # noqa: BLE001  (a corrupt constant or anything unexpected: lowered as usual)
            continue
        if results is not None:
            folded.add(i)
            values.update(zip(outs, results))
    return values, folded


def _fold_op(model, sg, i: int, values: dict, keep: set, name: str):
    """(output tensor indices, their values) of operator ``i`` when it folds, else (outputs, None)."""
    op = sg.Operators(i)
    if name not in FOLDERS:
        return [], None
    outs = [int(t) for t in indices(op.OutputsAsNumpy())]
    if not outs or any(t < 0 or t in keep for t in outs):
        return outs, None
    ins = [int(t) for t in indices(op.InputsAsNumpy())]
    in_tensors = [sg.Tensors(t) if t >= 0 else None for t in ins]
    inputs = []
    for k, (t, tensor) in enumerate(zip(ins, in_tensors)):
        if tensor is None:
            inputs.append(None)
            continue
        v = values.get(t)
        if v is None:
            v = _buffer_value(model, tensor)
        if v is None and name in _SHAPE_ONLY and k == 0:
            v = np.zeros(indices(tensor.ShapeAsNumpy()), _NP_TYPES.get(tensor.Type(), np.float32))
        if v is None:
            return outs, None
        inputs.append(v)
    if sum(int(np.prod(indices(sg.Tensors(t).ShapeAsNumpy()), dtype=np.int64)) for t in outs) > _MAX_FOLDED:
        return outs, None  # a big result stays a kernel (flash is dearer than a copy loop)
    evaluate, moves = FOLDERS[name]
    f = FoldOp(name, op, sg, inputs, in_tensors, [sg.Tensors(t) for t in outs])
    if moves and not _moves_data(f):
        return outs, None
    results = evaluate(f)
    if len(results) != len(outs):
        return outs, None
    shaped = []
    for k, r in enumerate(results):
        r = np.asarray(r)
        want = f.out_shape(k)
        if r.size != int(np.prod(want, dtype=np.int64)):
            return outs, None
        shaped.append(np.array(r, dtype=f.out_dtype(k)).reshape(want))
    return outs, shaped
