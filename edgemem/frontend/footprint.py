"""Flatbuffer readers shared by the front end (``builtin_options``, ``is_constant``, ``indices``, tensor
sizes), and the two memory figures read straight from the flatbuffer before any lowering, both computed
by the storage model of ``edgemem.memory``: the operator floor (``memory/floor.py``: what every
operator keeps live whatever the memory passes do), which lets a build that cannot fit fail in
milliseconds with the bytes it needs, and the file-order live ranges.
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


def operator_floor_bytes(model, inplace_ops: frozenset[str] = frozenset(), fold_pads: bool = False,
                         capabilities=None, input_outside: bool = False) -> tuple[int, int]:
    """(bytes, operator index) of the operator whose live activations are largest whatever the passes with
    ``capabilities`` (edgemem.memory.floor: Elide/Overlap) do; operators folded at import (frontend/fold.py)
    hold constants. ``inplace_ops`` and ``fold_pads`` are shorthands: an operator of ``inplace_ops`` may write
    its output over an input, a PAD may fold into the convolutions reading it. ``input_outside``: the graph
    inputs are the caller's buffers (ir/outside.py) and count nothing at any operator, not only in a patch
    stage (tflm_xtensa_micro_speech_lstm: a 16,513 B floor from its input, the build's arena 3,924 B)."""
    from ..memory import Elide, Overlap, from_tflite, operator_floor

    caps = list(capabilities or ())
    if inplace_ops:
        caps.append(Overlap(frozenset(inplace_ops)))
    if fold_pads:
        caps.append(Elide(frozenset(_PAD_OPS), frozenset({"CONV_2D", "DEPTHWISE_CONV_2D"})))
    folded_values, folded = _folded(model)
    mm = from_tflite(model, 1, folded=folded, constants=set(folded_values))
    if input_outside:
        inputs = {int(t) for t in model.Subgraphs(0).InputsAsNumpy()} if model.Subgraphs(0).InputsLength() else set()
        for name, st in mm.storages.items():
            if st.producer is None and mm.tensor_of.get(name) in inputs:
                st.size = 0
    floor, v = operator_floor(mm, caps)
    return floor, (mm.op_index[v] if v >= 0 else -1)


def patch_stage_ops(model, capabilities) -> list[int]:
    """The operators (flatbuffer indices) the floor lets run tile by tile (memory/floor.py ``Patch``): what the
    floor assumed of the patch pass, for the messages that quote it."""
    from ..memory import from_tflite
    from ..memory.floor import patchable

    folded_values, folded = _folded(model)
    mm = from_tflite(model, 1, folded=folded, constants=set(folded_values))
    return sorted(mm.op_index[v] for v in patchable(mm, capabilities))


def _folded(model) -> tuple[dict, set]:
    """The operators evaluated at build time and their outputs (frontend/fold.py): constants, not RAM."""
    from .fold import fold_model

    return fold_model(model)


def file_order_live_ranges(model) -> list[tuple[str, int, int, int]]:
    """(tensor, bytes, first step, last step) of every activation in the file's operator order, from the
    storage model of edgemem.memory (views share their source's storage). Lets planners be measured on
    models the lowering does not support yet."""
    from ..memory import from_tflite

    mm = from_tflite(model, 1)
    return [(r.name.split(":", 1)[1], r.size, r.first, r.last) for r in mm.ranges(list(range(mm.n)))]
