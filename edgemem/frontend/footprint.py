"""A floor on the activation RAM, read straight from the flatbuffer before any lowering.

Every operator needs its non-constant inputs and its outputs in RAM at once (whole tensors, no
in-place reuse), so no schedule or placement of whole tensors goes below the largest such sum.
It lets a build that cannot fit fail in milliseconds, with the bytes it needs.
"""

from __future__ import annotations

_SATURATED = 1 << 62  # bytes: more than any memory, small enough for fast arithmetic
_ITEMSIZE = {0: 4, 1: 2, 2: 4, 3: 1, 4: 8, 6: 1, 7: 2, 9: 1}


def indices(vector) -> list[int]:
    """A flatbuffer int vector as a list; the reader returns 0, not an empty array, when it is absent."""
    return [] if isinstance(vector, int) else [int(v) for v in vector]


def builtin_options(op, options_cls):
    """The operator's builtin options table read as ``options_cls`` (e.g. tflite.SoftmaxOptions), or None."""
    table = op.BuiltinOptions()
    if table is None:
        return None
    opts = options_cls()
    opts.Init(table.Bytes, table.Pos)
    return opts


def is_constant(model, tensor) -> bool:
    """A tensor with buffer data is a constant (flash), not an activation."""
    buf = model.Buffers(tensor.Buffer())
    return buf is not None and (buf.DataLength() > 0 or buf.Size() > 0)


def in_arena(model, tensor) -> bool:
    """An activation: neither a constant (flash) nor a variable (state kept across invocations, outside the arena)."""
    return not is_constant(model, tensor) and not tensor.IsVariable()


def tensor_bytes(tensor) -> int:
    """Bytes of a tensor; an unknown (-1) dimension counts as 1."""
    total = _ITEMSIZE.get(tensor.Type(), 4)
    for d in indices(tensor.ShapeAsNumpy()):
        total = min(total * max(d, 1), _SATURATED)  # Python ints, capped: a corrupt shape cannot wrap around
    return total


def op_names(model) -> list[str]:
    """TFLite builtin name of every operator of subgraph 0, in file order."""
    from .tflite_import import _op_name

    sg = model.Subgraphs(0)
    return [_op_name(model, sg.Operators(i)) for i in range(sg.OperatorsLength())]


_PAD_OPS = ("PAD", "PADV2")


def operator_floor_bytes(model, inplace_ops: frozenset[str] = frozenset(), fold_pads: bool = False) -> tuple[int, int]:
    """(bytes, operator index) of the operator whose live activations are largest. An operator of
    `inplace_ops` may write its output over its input, so it counts only the larger of the two sides.
    With `fold_pads`, a PAD may vanish into the convolution reading it: PAD operators are skipped and
    their readers count the unpadded tensor (a floor either way: if the PAD stays, more is needed)."""
    sg = model.Subgraphs(0)
    names = op_names(model) if inplace_ops or fold_pads else []
    unpadded = {}  # PAD output -> PAD input
    if fold_pads:
        for i in range(sg.OperatorsLength()):
            op = sg.Operators(i)
            ins, outs = indices(op.InputsAsNumpy()), indices(op.OutputsAsNumpy())
            if names[i] in _PAD_OPS and ins and len(outs) == 1 and ins[0] >= 0:
                unpadded[outs[0]] = ins[0]
    best = (0, -1)
    folded_values, folded = _folded(model)
    for i in range(sg.OperatorsLength()):
        if (fold_pads and names[i] in _PAD_OPS) or i in folded:
            continue
        op = sg.Operators(i)
        ins = {unpadded.get(t, t) for t in indices(op.InputsAsNumpy())
               if t >= 0 and t not in folded_values and in_arena(model, sg.Tensors(t))}  # fmt: skip
        outs = {t for t in indices(op.OutputsAsNumpy()) if t >= 0} - ins
        side = lambda ids: sum(tensor_bytes(sg.Tensors(t)) for t in ids)  # noqa: E731
        total = max(side(ins), side(outs)) if names and names[i] in inplace_ops else side(ins) + side(outs)
        best = max(best, (total, i))
    return best


def _folded(model) -> tuple[dict, set]:
    """The operators evaluated at build time and their outputs (frontend/fold.py): constants, not RAM."""
    from .fold import fold_model

    return fold_model(model)


_VIEW_OPS = {"RESHAPE", "SQUEEZE", "EXPAND_DIMS"}  # same bytes, another shape: edgemem makes them views


def file_order_live_ranges(model) -> list[tuple[str, int, int, int]]:
    """(tensor, bytes, first step, last step) of every activation in the file's operator order, with the
    memory model of edgemem.schedule.liveness (views share their source's storage). Lets planners be
    measured on models the lowering does not support yet."""
    sg = model.Subgraphs(0)
    n_ops = sg.OperatorsLength()
    names = op_names(model)
    storage: dict[int, int] = {}
    first: dict[int, int] = {t: 0 for t in indices(sg.InputsAsNumpy())}
    last: dict[int, int] = dict(first)
    for i in range(n_ops):
        op = sg.Operators(i)
        ins = [t for t in indices(op.InputsAsNumpy()) if t >= 0 and not is_constant(model, sg.Tensors(t))]
        outs = [t for t in indices(op.OutputsAsNumpy()) if t >= 0]
        for t in ins:
            root = storage.get(t, t)
            last[root] = max(last.get(root, i), i)
        for t in outs:
            if names[i] in _VIEW_OPS and ins:
                storage[t] = storage.get(ins[0], ins[0])
            else:
                first[t], last[t] = i, i
    for t in indices(sg.OutputsAsNumpy()):
        last[storage.get(t, t)] = max(n_ops - 1, 0)
    from .tflite_import import tensor_name

    return [(tensor_name(sg, t), tensor_bytes(sg.Tensors(t)), first[t], last[t]) for t in first]
