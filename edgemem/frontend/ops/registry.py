"""edgemem's own lowerings of TFLite operators, registered by name and taken before TVM's converter.

TVM's Relax TFLite frontend imports int8 operators as ``dequantize -> float op -> quantize``; for the
operators whose integer arithmetic has no such form (or where the frontend has none), edgemem emits one
``call_tir`` to its own integer kernel straight from the flatbuffer, with TFLite Micro's arithmetic.
A lowering is a function ``(OpContext) -> Relax expr`` (a ``relax.Tuple`` of them for several outputs, each bound
to its output tensor by the converter itself, even for a one-output SPLIT or UNPACK) registered
with ``@lowering("NAME", ..., types=("int8",))``; ``types`` says for which operand type it applies
(the type of the operator's first input, or of its output when it has no activation input). The
converter (frontend/tflite_import.py) asks ``find`` for every operator and falls back to TVM's own
converter when no lowering applies.

Where the operand type alone does not decide (a QUANTIZE of float32 makes int8 or int16; only the int16 one is
a lowering here, the int8 one stays with TVM's import and passes/integerize.py), a lowering adds a predicate:
``@lowering("QUANTIZE", types=("float32",), when=lambda t: t.outputs[0] == "int16")``. It sees the types of
the operator's tensors (``OpTypes``, read from the flatbuffer by ``operator_types``), so that
frontend/support.py decides support from the file alone, as the converter does; ``find`` without them
passes over every lowering that has a predicate.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

import numpy as np

from ...errors import UnsupportedModelError
from ..footprint import builtin_options, is_constant

_TFL_TYPES = {0: "float32", 1: "float16", 2: "int32", 3: "uint8", 4: "int64", 6: "bool", 7: "int16", 9: "int8", 12: "uint64", 15: "uint32"}


@dataclass(frozen=True)
class OpTypes:
    """The types of an operator's tensors as the flatbuffer has them ("int8", "float32", ...; "none" for a
    left-out optional input), what a lowering's ``when`` predicate decides on."""

    inputs: tuple[str, ...]
    outputs: tuple[str, ...]


@dataclass(frozen=True)
class Lowering:
    names: tuple[str, ...]
    types: tuple[str, ...]
    fn: Callable
    when: Callable[[OpTypes], bool] | None = None


_LOWERINGS: dict[str, list[Lowering]] = {}


def lowering(*names: str, types: tuple[str, ...] = ("int8",), when: Callable[[OpTypes], bool] | None = None):
    """Register ``fn(ctx)`` as edgemem's lowering of the TFLite operators ``names`` for operand ``types``
    (and, with ``when``, only for the operators whose tensor types it accepts)."""

    def register(fn):
        entry = Lowering(tuple(names), tuple(types), fn, when)
        for name in names:
            _LOWERINGS.setdefault(name, []).append(entry)
        return fn

    return register


def registered() -> dict[str, list[Lowering]]:
    _load_families()
    return _LOWERINGS


def _load_families() -> None:
    from . import families  # noqa: F401  (importing registers every family's lowerings)


def find(name: str, op_type: str, types: OpTypes | None = None) -> Lowering | None:
    """The lowering of operator ``name`` whose types include ``op_type`` (and whose predicate, if any, accepts
    the operator's tensor ``types``), or None."""
    for entry in registered().get(name, []):
        if op_type in entry.types and (entry.when is None or (types is not None and entry.when(types))):
            return entry
    return None


def operator_types(subgraph, op) -> OpTypes:
    """The types of ``op``'s input and output tensors, from the flatbuffer."""

    def kinds(vector) -> tuple[str, ...]:
        return tuple(_TFL_TYPES.get(subgraph.Tensors(int(i)).Type(), "unknown") if int(i) >= 0 else "none" for i in vector)

    return OpTypes(kinds(op.InputsAsNumpy() if op.InputsLength() else []), kinds(op.OutputsAsNumpy() if op.OutputsLength() else []))


# Operators whose activation input is not their first: TRANSPOSE_CONV's first input is its output shape (int32),
# which a converter may compute at run time (SHAPE, PACK, ...) or make a model input; TFLM never reads it.
_DATA_INPUT = {"TRANSPOSE_CONV": 2}


def operand_type(subgraph, op, model=None, name: str | None = None) -> str:
    """The type an operator is classified by: its first non-constant input's, else its first input's, else its
    first output's (TFLite names kernels by that type: an int8 ADD, a float32 TANH); for an operator ``name`` of
    _DATA_INPUT, that input's. Constants are told apart only when ``model`` (whose buffers hold them) is given."""
    inputs = [int(i) for i in (op.InputsAsNumpy() if op.InputsLength() else []) if i >= 0]
    outputs = [int(i) for i in (op.OutputsAsNumpy() if op.OutputsLength() else []) if i >= 0]
    data = _DATA_INPUT.get(name)
    if data is not None and op.InputsLength() > data and int(op.Inputs(data)) >= 0:
        return _TFL_TYPES.get(subgraph.Tensors(int(op.Inputs(data))).Type(), "unknown")
    if model is not None:
        inputs = [i for i in inputs if not is_constant(model, subgraph.Tensors(i))] or inputs
    candidates = inputs or outputs
    if not candidates:
        return "none"
    return _TFL_TYPES.get(subgraph.Tensors(candidates[0]).Type(), "unknown")


class OpContext:
    """What a lowering sees of one TFLite operator: its tensors, their quantization, its options, and a way
    to emit an edgemem kernel for it."""

    def __init__(self, conv, op, index: int, name: str):
        self.conv = conv
        self.op = op
        self.index = index
        self.name = name
        self.inputs = conv.get_input_tensors(op)
        self.outputs = conv.get_output_tensors(op)

    # -- tensors
    def present(self, i: int) -> bool:
        """Whether optional input ``i`` is given (TFLite writes -1 for a left-out input)."""
        return i < len(self.inputs) and self.inputs[i].tensor_idx >= 0

    def shape(self, t) -> tuple[int, ...]:
        return tuple(int(d) for d in self.conv.get_tensor_shape(t))

    def dtype(self, t) -> str:
        return _TFL_TYPES.get(t.tensor.Type(), "unknown")

    def tensor_name(self, t) -> str:
        from ..tflite_import import tensor_name

        return tensor_name(self.conv.subgraph, t.tensor_idx)  # the file's name (the model's own is 't<i>')

    def is_const(self, t) -> bool:
        if getattr(self.conv, "is_folded", None) is not None and self.conv.is_folded(t):
            return True  # the output of an operator evaluated at import (frontend/fold.py)
        return t.buffer is not None and not isinstance(t.buffer, int) and t.buffer.DataLength() > 0

    def value(self, t) -> np.ndarray | None:
        """The tensor's constant value (numpy, its own dtype and shape), or None for an activation."""
        if not self.is_const(t):
            return None
        return np.asarray(self.conv.get_tensor_value(t)).reshape(self.shape(t))

    def file_bytes(self, t, count: int) -> bytes | None:
        """The ``count`` bytes of the model file from the start of constant ``t``'s data, past its end if asked
        (what TFLM reads through a pointer of a wider type); None when they leave the file, or ``t`` is no
        buffer of the file (a folded value)."""
        if not self.is_const(t) or getattr(self.conv, "is_folded", lambda _: False)(t):
            return None
        tab = t.buffer._tab
        if not tab.Offset(4):  # no Buffer.data (field 0): the data lies outside the flatbuffer, or nowhere
            return None
        start = tab.Vector(tab.Offset(4))
        lo, hi = getattr(self.conv.model, "source", (0, len(tab.Bytes)))
        if start < lo or start + count > hi:
            return None
        return bytes(tab.Bytes[start:start + count])

    def expr(self, t):
        """The Relax expression of a tensor: the producing kernel's output, a model input or a constant."""
        return self.conv.get_tensor_expr(t)

    def quant(self, t) -> tuple[np.ndarray, np.ndarray] | None:
        """(scales float32, zero points int64) as the file has them, or None when the tensor is not quantized."""
        q = t.tensor.Quantization()
        if q is None or q.ScaleLength() == 0:
            return None
        scale = np.asarray(q.ScaleAsNumpy(), np.float32).reshape(-1)
        zp = np.asarray(q.ZeroPointAsNumpy(), np.int64).reshape(-1) if q.ZeroPointLength() else np.zeros(scale.size, np.int64)
        return scale, zp

    def scale_zp(self, t, what: str = "tensor") -> tuple[float, int]:
        """The per-tensor (scale, zero point) of ``t``; refuses per-channel or missing quantization."""
        q = self.quant(t)
        if q is None or q[0].size != 1:
            got = "no quantization" if q is None else f"{q[0].size} scales (per-channel)"
            self.refuse(f"its {what} '{self.tensor_name(t)}' has {got}; TFLite's {self.dtype(t)} {self.name} needs one scale and zero point.")
        return float(q[0][0]), int(q[1][0])

    def options(self, options_cls):
        """The operator's builtin options table as ``options_cls`` (e.g. tflite.LeakyReluOptions), or None."""
        return builtin_options(self.op, options_cls)

    # -- results
    def refuse(self, why: str):
        """Stop the import with a message about this operator (the converter adds its index and output)."""
        raise UnsupportedModelError(why)

    def emit(self, kind: str, prim, args: list, out_shape, dtype: str, macs: int = 0, spec=None, tag: str = ""):
        """One ``call_tir`` to ``prim`` (a kernel built with TFLM's arithmetic) with ``args`` (Relax exprs;
        numpy arrays become constants in flash), returning its output var. ``kind`` is the TFLite operator the
        kernel computes (reports, profiling); ``spec`` (kernels/specs.py) says how it was built."""
        from tvm import relax

        from ...kernels import kernel_attrs

        name = f"{kind.lower()}_{self.index}{tag}"
        prim = kernel_attrs.with_kind(prim, kind, macs, symbol=name)
        if spec is not None:
            prim = kernel_attrs.with_spec(prim, spec)
        gv = self.conv.bb.add_func(prim, name)
        # relax.const narrows int64 and float64 arrays to int32/float32: pass relax.const(a, "int64") for an int64 one
        call_args = [relax.const(a) if isinstance(a, np.ndarray) else a for a in args]
        return self.conv.bb.emit(relax.call_tir(gv, call_args, relax.TensorType(tuple(int(d) for d in out_shape), dtype)))

    def reshape(self, expr, shape):
        """A view of ``expr`` with another shape (no copy: the graph reader keeps reshapes as views)."""
        from tvm import relax

        return self.conv.bb.emit(relax.op.reshape(expr, [int(d) for d in shape]))
