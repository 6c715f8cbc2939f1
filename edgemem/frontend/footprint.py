"""A floor on the activation RAM, read straight from the flatbuffer before any lowering.

Every operator needs its non-constant inputs and its outputs in RAM at once (whole tensors, no
in-place reuse), so no schedule or placement of whole tensors goes below the largest such sum.
It lets a build that cannot fit fail in milliseconds, with the bytes it needs.
"""

from __future__ import annotations

import numpy as np

_ITEMSIZE = {0: 4, 1: 2, 2: 4, 3: 1, 4: 8, 6: 1, 7: 2, 9: 1}


def _is_constant(model, tensor) -> bool:
    buf = model.Buffers(tensor.Buffer())
    return buf is not None and (buf.DataLength() > 0 or buf.Size() > 0)


def _nbytes(tensor) -> int:
    return int(np.prod(tensor.ShapeAsNumpy(), dtype=np.int64)) * _ITEMSIZE.get(tensor.Type(), 4)


def operator_floor_bytes(model) -> tuple[int, int]:
    """(bytes, operator index) of the operator whose live activations are largest."""
    sg = model.Subgraphs(0)
    best = (0, -1)
    for i in range(sg.OperatorsLength()):
        op = sg.Operators(i)
        ids = {int(t) for t in op.InputsAsNumpy() if t >= 0} | {int(t) for t in op.OutputsAsNumpy() if t >= 0}
        total = sum(_nbytes(sg.Tensors(t)) for t in ids if not _is_constant(model, sg.Tensors(t)))
        best = max(best, (total, i))
    return best
