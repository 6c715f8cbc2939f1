"""A floor on the activation RAM, read straight from the flatbuffer before any lowering.

Every operator needs its non-constant inputs and its outputs in RAM at once (whole tensors, no
in-place reuse), so no schedule or placement of whole tensors goes below the largest such sum.
It lets a build that cannot fit fail in milliseconds, with the bytes it needs.
"""

from __future__ import annotations

import numpy as np

_ITEMSIZE = {0: 4, 1: 2, 2: 4, 3: 1, 4: 8, 6: 1, 7: 2, 9: 1}


def is_constant(model, tensor) -> bool:
    """A tensor with buffer data is a constant (flash), not an activation."""
    buf = model.Buffers(tensor.Buffer())
    return buf is not None and (buf.DataLength() > 0 or buf.Size() > 0)


def tensor_bytes(tensor) -> int:
    """Bytes of a tensor; an unknown (-1) dimension counts as 1."""
    dims = [max(int(d), 1) for d in tensor.ShapeAsNumpy()]
    return int(np.prod(dims, dtype=np.int64)) * _ITEMSIZE.get(tensor.Type(), 4)


def op_names(model) -> list[str]:
    """TFLite builtin name of every operator of subgraph 0, in file order."""
    from .tflite_import import _op_name

    sg = model.Subgraphs(0)
    return [_op_name(model, sg.Operators(i)) for i in range(sg.OperatorsLength())]


def operator_floor_bytes(model) -> tuple[int, int]:
    """(bytes, operator index) of the operator whose live activations are largest."""
    sg = model.Subgraphs(0)
    best = (0, -1)
    for i in range(sg.OperatorsLength()):
        op = sg.Operators(i)
        ids = {int(t) for t in op.InputsAsNumpy() if t >= 0} | {int(t) for t in op.OutputsAsNumpy() if t >= 0}
        total = sum(tensor_bytes(sg.Tensors(t)) for t in ids if not is_constant(model, sg.Tensors(t)))
        best = max(best, (total, i))
    return best


_VIEW_OPS = {"RESHAPE", "SQUEEZE", "EXPAND_DIMS"}  # same bytes, another shape: edgemem makes them views


def file_order_live_ranges(model) -> list[tuple[str, int, int, int]]:
    """(tensor, bytes, first step, last step) of every activation in the file's operator order, with the
    memory model of edgemem.schedule.liveness (views share their source's storage). Lets planners be
    measured on models the lowering does not support yet."""
    sg = model.Subgraphs(0)
    n_ops = sg.OperatorsLength()
    names = op_names(model)
    storage: dict[int, int] = {}
    first: dict[int, int] = {int(t): 0 for t in sg.InputsAsNumpy()}
    last: dict[int, int] = dict(first)
    for i in range(n_ops):
        op = sg.Operators(i)
        ins = [int(t) for t in op.InputsAsNumpy() if t >= 0 and not is_constant(model, sg.Tensors(int(t)))]
        outs = [int(t) for t in op.OutputsAsNumpy() if t >= 0]
        for t in ins:
            root = storage.get(t, t)
            last[root] = max(last.get(root, i), i)
        for t in outs:
            if names[i] in _VIEW_OPS and ins:
                storage[t] = storage.get(ins[0], ins[0])
            else:
                first[t], last[t] = i, i
    for t in sg.OutputsAsNumpy():
        last[storage.get(int(t), int(t))] = max(n_ops - 1, 0)
    return [(sg.Tensors(t).Name().decode(errors="replace"), tensor_bytes(sg.Tensors(t)), first[t], last[t]) for t in first]
