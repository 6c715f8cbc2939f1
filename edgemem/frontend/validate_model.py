"""The checks of a model's contents that every reader runs (tflite_import.parse_tflite, for build and analyze alike)
before anything is built from it: a file the converter could not have written is refused here, naming the tensor
or operator by index and name, rather than giving an internal error, a message of TVM's or a wrong build.

- tensors: quantization (finite scales > 0, zero points in the type's range, one scale and zero point per channel
  of the quantized dimension), constant data of the tensor's size, no custom quantization or sparsity where used;
- graph: one producer per tensor, none writing a model input or a constant, operators in execution order (so no
  cycle), every tensor read either written earlier, a model input, a constant, a variable or left out (-1), every
  model output computed;
- shapes: the output shape of the common operators (shape_inference.py) is the declared one.

Tensors are named by index here; names are only shown (they need not be unique, unique_names.py).
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from ..errors import ModelFileError, UnsupportedModelError, shown
from .footprint import indices

_RERUN = "re-export the model with the TFLite converter."
_ZERO_POINT_RANGE = {9: (-128, 127), 3: (0, 255), 7: (-32768, 32767), 2: (-(1 << 31), (1 << 31) - 1), 17: (-8, 7)}
_INT4 = 17
_ITEMSIZE = {0: 4, 1: 2, 2: 4, 3: 1, 4: 8, 6: 1, 7: 2, 9: 1, 10: 8, 11: 8, 12: 8, 15: 4, 16: 2}


class _Model:
    """The flatbuffer as the checks see it: tensors by index, shown as "tensor #i 'name'"."""

    def __init__(self, model, path):
        from .tflite_import import _op_name

        self.model, self.sg, self.file = model, model.Subgraphs(0), Path(str(path)).name
        self.op_names = [_op_name(model, self.sg.Operators(i)) for i in range(self.sg.OperatorsLength())]
        self.inputs = {int(t) for t in indices(self.sg.InputsAsNumpy())}
        self.tensors = [self.sg.Tensors(i) for i in range(self.sg.TensorsLength())]  # read once: the reader is slow
        self.shapes = [tuple(indices(t.ShapeAsNumpy())) for t in self.tensors]
        self.sizes = [_data_bytes(model, t) for t in self.tensors]

    def tensor(self, i: int) -> str:
        name = self.tensors[i].Name()
        return f"tensor #{i} '{shown(name.decode(errors='replace'))}'" if name else f"tensor #{i} (no name)"

    def op(self, i: int) -> str:
        return f"operator #{i} {self.op_names[i]}"

    def shape(self, i: int) -> tuple[int, ...]:
        return self.shapes[i]

    def is_constant(self, i: int) -> bool:
        return self.sizes[i] > 0 or (self.tensors[i].Buffer() > 0 and 0 in self.shapes[i])

    def malformed(self, what: str) -> ModelFileError:
        return ModelFileError(f"{self.file}: {what}. The file is malformed (no TFLite converter writes this); {_RERUN}")


def _data_bytes(model, t) -> int:
    buf = model.Buffers(t.Buffer())
    return buf.Size() if buf.Offset() > 1 else buf.DataLength()


def validate_model(model, path) -> None:
    """Refuse (ModelFileError, exit 3; UnsupportedModelError, exit 4) what subgraph 0 of ``model`` cannot mean."""
    m = _Model(model, path)
    used = _used_tensors(m)
    for i in range(m.sg.TensorsLength()):
        _check_tensor(m, i, i in used)
    _check_graph(m)
    from .shape_inference import check_shapes

    check_shapes(m)


def _used_tensors(m: _Model) -> set[int]:
    used = set(m.inputs) | {int(t) for t in indices(m.sg.OutputsAsNumpy())}
    for i in range(m.sg.OperatorsLength()):
        op = m.sg.Operators(i)
        used.update(int(t) for t in [*indices(op.InputsAsNumpy()), *indices(op.OutputsAsNumpy())] if t >= 0)
    return used


def _check_tensor(m: _Model, i: int, used: bool) -> None:
    t = m.tensors[i]
    if used and t.Sparsity() is not None:
        raise UnsupportedModelError(f"{m.file}: {m.tensor(i)} is sparse; edgemem needs dense tensors. Convert without sparsification.")
    q = t.Quantization()
    if q is not None and used and q.DetailsType() != 0:
        raise UnsupportedModelError(f"{m.file}: {m.tensor(i)} has custom quantization (details type {q.DetailsType()}); edgemem supports "
                                    "scale and zero point quantization. Quantize the model with the TFLite converter.")  # fmt: skip
    if q is not None and q.ScaleLength() and t.Type() in _ZERO_POINT_RANGE:
        _check_quantization(m, i, q)
    itemsize = _ITEMSIZE.get(t.Type())
    size = m.sizes[i]
    shape = m.shape(i)
    if size and (itemsize or t.Type() == _INT4) and all(d >= 0 for d in shape):
        count = int(np.prod(shape, dtype=object))
        want = (count + 1) // 2 if t.Type() == _INT4 else count * itemsize  # INT4: two values a byte
        if size != want:
            packed = " (INT4: two 4-bit values a byte)" if t.Type() == _INT4 else ""
            raise m.malformed(f"{m.tensor(i)} of shape {list(shape)}{packed} needs {want:,} bytes of data, but its buffer #{t.Buffer()} "
                              f"holds {size:,}")  # fmt: skip


def _check_quantization(m: _Model, i: int, q) -> None:
    t = m.tensors[i]
    scales = q.ScaleAsNumpy().astype(np.float64)
    zero_points = q.ZeroPointAsNumpy() if q.ZeroPointLength() else np.zeros(0, np.int64)
    bad = ~(np.isfinite(scales) & (scales > 0))
    if bad.any():
        s = float(scales[np.argmax(bad)])
        raise m.malformed(f"{m.tensor(i)} has quantization scale {s:g}; a scale must be a finite number greater than 0")
    if len(zero_points) != len(scales):
        raise m.malformed(f"{m.tensor(i)} has {len(scales)} quantization scale(s) but {len(zero_points)} zero point(s); "
                          "each scale needs its zero point")  # fmt: skip
    lo, hi = _ZERO_POINT_RANGE[t.Type()]
    out = zero_points[(zero_points < lo) | (zero_points > hi)]
    if out.size:
        from .tflite_import import _TFL_TYPES

        raise m.malformed(f"{m.tensor(i)} has zero point {int(out[0])}, outside the range {lo}..{hi} of its type "
                          f"{_TFL_TYPES.get(t.Type(), t.Type())}")  # fmt: skip
    if len(scales) > 1:
        shape, axis = m.shape(i), q.QuantizedDimension()
        axis = 0 if len(shape) == 1 else axis  # converters copy a depthwise weight's axis 3 onto its bias; TFLM ignores it
        if not 0 <= axis < len(shape) or shape[axis] != len(scales):
            size = f"dimension {axis} of its shape {list(shape)}" if 0 <= axis < len(shape) else f"dimension {axis}, which its shape {list(shape)} does not have"
            raise m.malformed(f"{m.tensor(i)} is quantized per channel with {len(scales)} scales along {size}; "
                              "there must be one scale per channel")  # fmt: skip


def _check_graph(m: _Model) -> None:
    producer: dict[int, int] = {}
    for i in range(m.sg.OperatorsLength()):
        for t in indices(m.sg.Operators(i).OutputsAsNumpy()):
            if t in producer:
                raise m.malformed(f"{m.tensor(t)} is written by two operators, {m.op(producer[t])} and {m.op(i)}; "
                                  "a tensor has one producer")  # fmt: skip
            if t in m.inputs or m.sizes[t] > 0:
                what = "a model input" if t in m.inputs else "a constant (its buffer holds data)"
                raise m.malformed(f"{m.op(i)} writes {m.tensor(t)}, which is {what}")
            producer[t] = i
    for i in range(m.sg.OperatorsLength()):
        for t in indices(m.sg.Operators(i).InputsAsNumpy()):
            if t < 0:
                continue
            if t in producer and producer[t] >= i:
                later = "itself" if producer[t] == i else f"{m.op(producer[t])}, which comes later"
                raise m.malformed(f"{m.op(i)} reads {m.tensor(t)}, which is written by {later}: the graph has a cycle or its "
                                  "operators are not in execution order")  # fmt: skip
            if t not in producer and not _given(m, t):
                raise m.malformed(f"{m.op(i)} reads {m.tensor(t)}, which no operator writes and which is neither a model input, "
                                  "a constant nor a variable")  # fmt: skip
    for t in indices(m.sg.OutputsAsNumpy()):
        if t not in producer and not _given(m, t):
            raise m.malformed(f"model output {m.tensor(t)} is written by no operator and is neither a model input nor a constant")


def _given(m: _Model, t: int) -> bool:
    """A value that no operator computes: a model input, a constant, a variable (state), or empty."""
    return t in m.inputs or m.is_constant(t) or m.tensors[t].IsVariable() or 0 in m.shape(t)
