"""Every tensor of subgraph 0 renamed by its index, the file's names kept for display only.

TFLite does not require tensor names to be unique, or present, but TVM's TFLite frontend keys its expression
table by name (a second tensor named like an earlier one reads the earlier one's value: a wrong answer), and so
would any reader that looks a tensor up by name. The model edgemem works on is therefore a copy of the file
whose tensor i is named ``t<i>``; ``tensor_name`` (tflite_import.py) answers the file's name for messages,
the report and model.h.

The flatbuffer has no room to rename a tensor in place (a missing name has no field to write), so the copy is
the file followed by a new tensor table: each tensor copied with its new name (and its shape, type, buffer
index, quantization, shape signature and flags), and subgraph 0's ``tensors`` field pointed at it. Buffers,
operators and every index stay where they are. Not copied: sparsity and variant sub-types, which edgemem refuses
on any tensor it uses (validate_model.py, and the type check of tflite_import.check_supported).
"""

from __future__ import annotations

import struct

import flatbuffers
import numpy as np
import tflite

_TENSORS_FIELD = 4  # vtable slot of SubGraph.tensors (field 0)
_ALIGN = 8  # the widest scalar a copied vector holds (int64 zero points)


class NamedSubGraph(tflite.SubGraph):
    """Subgraph 0 of a NamedModel: ``display_names`` are the file's tensor names, '#<i>' for none."""

    __slots__ = ("display_names",)


class NamedModel(tflite.Model):
    """A tflite.Model whose subgraph 0 is a NamedSubGraph. ``source`` = (start, end): where the file's own bytes
    lie in the model's bytes (a buffer's neighbours there are the file's, which TFLM reads past some biases).
    ``variables``: its resource variables (control_flow.Variable), whose kept values are its last inputs and
    outputs."""

    __slots__ = ("display_names", "source", "variables")

    def Subgraphs(self, j):  # noqa: N802  (the flatbuffer reader's name)
        sg = super().Subgraphs(j)
        if sg is None or j != 0:
            return sg
        named = NamedSubGraph()
        named.Init(sg._tab.Bytes, sg._tab.Pos)
        named.display_names = self.display_names
        return named


def internal_name(index: int) -> str:
    return f"t{index}"


def with_unique_names(buf: bytes, model) -> NamedModel:
    """``model`` (read from ``buf``, already checked) as a NamedModel whose tensor i is named ``t<i>``."""
    sg = model.Subgraphs(0)
    n = sg.TensorsLength()
    shown = []
    for i in range(n):
        name = sg.Tensors(i).Name()
        shown.append(name.decode(errors="replace") if name else f"#{i}")
    out = bytes(buf)
    field = sg._tab.Offset(_TENSORS_FIELD)
    if field:
        out = _appended_tensors(bytes(buf), sg, sg._tab.Pos + field)
    named = NamedModel()
    named.Init(out, tflite.Model.GetRootAsModel(out, 0)._tab.Pos)
    named.display_names = shown
    named.source = (0, len(buf))
    named.variables = ()
    return named


def _appended_tensors(buf: bytes, sg, field_pos: int) -> bytes:
    b = flatbuffers.Builder(1024)
    offsets = [_copy_tensor(b, sg.Tensors(i), internal_name(i)) for i in range(sg.TensorsLength())]
    b.StartVector(4, len(offsets), 4)
    for o in reversed(offsets):
        b.PrependUOffsetTRelative(o)
    vector = b.EndVector()
    blob = bytes(b.Bytes[b.Head():])  # not Output(): the vector is no root, the builder is left unfinished
    # The builder aligns from the end of its buffer: the end of the appended blob must be aligned as well.
    start = len(buf) + (-(len(buf) + len(blob)) % _ALIGN)
    out = bytearray(buf) + bytes(start - len(buf)) + blob
    struct.pack_into("<I", out, field_pos, start + len(blob) - vector - field_pos)  # forward, as uoffsets are
    return bytes(out)


def _vector(b, values, dtype: str):
    """A vector of scalars of numpy ``dtype`` (little-endian, as flatbuffers are)."""
    array = np.ascontiguousarray(values, dtype=np.dtype(dtype).newbyteorder("<"))
    return b.CreateNumpyVector(array)


def _copy_tensor(b, t, name: str):
    name_off = b.CreateString(name)
    shape = None if t.ShapeIsNone() else _vector(b, t.ShapeAsNumpy() if t.ShapeLength() else [], "int32")
    signature = None if t.ShapeSignatureIsNone() else _vector(b, t.ShapeSignatureAsNumpy() if t.ShapeSignatureLength() else [], "int32")
    quant = t.Quantization()
    quant_off = _copy_quantization(b, quant) if quant is not None else None
    tflite.TensorStart(b)
    if shape is not None:
        tflite.TensorAddShape(b, shape)
    tflite.TensorAddType(b, t.Type())
    tflite.TensorAddBuffer(b, t.Buffer())
    tflite.TensorAddName(b, name_off)
    if quant_off is not None:
        tflite.TensorAddQuantization(b, quant_off)
    tflite.TensorAddIsVariable(b, t.IsVariable())
    if signature is not None:
        tflite.TensorAddShapeSignature(b, signature)
    tflite.TensorAddHasRank(b, t.HasRank())
    return tflite.TensorEnd(b)


def _copy_quantization(b, q):
    """min, max, scale, zero_point and quantized_dimension (custom quantization details are refused earlier,
    validate_model.py)."""
    parts = {}
    for field, dtype in (("Min", "float32"), ("Max", "float32"), ("Scale", "float32"), ("ZeroPoint", "int64")):
        if not getattr(q, f"{field}IsNone")():
            values = getattr(q, f"{field}AsNumpy")() if getattr(q, f"{field}Length")() else []
            parts[field] = _vector(b, values, dtype)
    tflite.QuantizationParametersStart(b)
    for field, off in parts.items():
        getattr(tflite, f"QuantizationParametersAdd{field}")(b, off)
    tflite.QuantizationParametersAddQuantizedDimension(b, q.QuantizedDimension())
    return tflite.QuantizationParametersEnd(b)
