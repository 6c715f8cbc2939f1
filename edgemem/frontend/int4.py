"""int4 weights: TFLite's INT4 tensors (two 4-bit values a byte, the first in the low nibble), unpacked to int8.

TFLite Micro takes INT4 only as the constant filter (input 1) of CONV_2D, DEPTHWISE_CONV_2D and FULLY_CONNECTED
with int8 activations, and FULLY_CONNECTED only with a per-tensor quantized filter (its Prepare refuses a per-channel
one); at every invocation it unpacks the filter into an int8 scratch buffer (tensor_utils UnpackDenseInt4IntoInt8:
each nibble sign-extended, an odd count's last value from the low nibble of the last byte) and runs its int8 kernel
on it. edgemem unpacks once, at import: the model it works on has an int8 tensor with the unpacked values in a new
buffer where the file has the INT4 one, so the int8 kernels run it unchanged (the weights take twice the flash,
no RAM). Any other INT4 tensor is refused, naming the operator and the tensor.

The rewritten flatbuffer is a new root before the file's bytes, kept whole (control_flow._serialize): tensor i is
still tensor i, and the operators keep their inputs, options and intermediates.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from ..errors import UnsupportedModelError
from .footprint import indices

INT4, INT8 = 17, 9
_FILTER_OPS = ("CONV_2D", "DEPTHWISE_CONV_2D", "FULLY_CONNECTED")
_ACCEPTED = ("TFLite Micro takes INT4 only as the constant weights (input 1) of CONV_2D, DEPTHWISE_CONV_2D and "
             "FULLY_CONNECTED (FULLY_CONNECTED only quantized per tensor) with int8 activations, and edgemem unpacks "
             "those to int8 at build time")  # fmt: skip
_FIX = "Quantize this tensor to int8 (leave its layer out of 4-bit quantization-aware training)."


def has_int4(model) -> bool:
    sg = model.Subgraphs(0)
    return any(sg.Tensors(i).Type() == INT4 for i in range(sg.TensorsLength()))


def unpack_int4(packed: np.ndarray, count: int) -> np.ndarray:
    """``count`` int8 values from TFLite's packed int4 bytes, as UnpackDenseInt4IntoInt8 reads them."""
    raw = np.asarray(packed, dtype=np.uint8)[: (count + 1) // 2]
    out = np.empty(2 * raw.size, dtype=np.int8)
    out[0::2] = (raw << 4).view(np.int8) >> 4  # the low nibble, sign-extended
    out[1::2] = raw.view(np.int8) >> 4
    return out[:count]


def unpacked_model(model, buf: bytes, path) -> bytes:
    """``model`` (read from ``buf``, checked by validate_model: an INT4 buffer holds exactly ceil(n / 2) bytes) with
    each INT4 filter as an int8 tensor of its unpacked values; raises UnsupportedModelError for any other INT4 tensor."""
    from .control_flow import _Graph, _NewOp, _NewTensor, _serialize

    sg = model.Subgraphs(0)
    filters = _int4_filters(model, Path(str(path)).name)
    graph = _Graph()
    for i in range(sg.TensorsLength()):
        t = sg.Tensors(i)
        raw = t.Name()
        name = raw.decode(errors="replace") if raw else ""
        if i not in filters:
            graph.tensors.append(_NewTensor(0, i, name, t.Buffer()))
            continue
        count = int(np.prod(indices(t.ShapeAsNumpy()), dtype=np.int64))
        graph.new_buffers.append(unpack_int4(_buffer_bytes(model, buf, t.Buffer()), count).tobytes())
        graph.tensors.append(_NewTensor(0, i, name, model.BuffersLength() + len(graph.new_buffers) - 1, INT8))
    for i in range(sg.OperatorsLength()):
        op = sg.Operators(i)
        between = [int(t) for t in indices(op.IntermediatesAsNumpy())] if op.IntermediatesLength() else []
        graph.ops.append(_NewOp(0, i, [int(t) for t in indices(op.InputsAsNumpy())], [int(t) for t in indices(op.OutputsAsNumpy())], between))
    inputs, outputs = [int(t) for t in indices(sg.InputsAsNumpy())], [int(t) for t in indices(sg.OutputsAsNumpy())]
    return _serialize(model, bytes(buf), graph, inputs, outputs, "edgemem: int4 weights unpacked to int8")


def _buffer_bytes(model, buf: bytes, index: int) -> np.ndarray:
    b = model.Buffers(index)
    if b.Offset() > 1:  # a large model's data outside the flatbuffer, at an offset of the file
        return np.frombuffer(buf, dtype=np.uint8, count=b.Size(), offset=b.Offset())
    return b.DataAsNumpy()


def _int4_filters(model, file: str) -> set[int]:
    """The INT4 tensors TFLM accepts (see the module's docstring); refuses the first other INT4 tensor used."""
    from .tflite_import import _op_name, tensor_name

    sg = model.Subgraphs(0)
    int4 = {i for i in range(sg.TensorsLength()) if sg.Tensors(i).Type() == INT4}
    edges = {int(t) for t in (*indices(sg.InputsAsNumpy()), *indices(sg.OutputsAsNumpy()))} & int4
    if edges:
        t = min(edges)
        raise UnsupportedModelError(f"{file}: tensor #{t} '{tensor_name(sg, t)}' of TFLite type INT4 is a model input or output; "
                                    f"{_ACCEPTED}, never as an activation. {_FIX}")  # fmt: skip
    accepted: set[int] = set()
    for i in range(sg.OperatorsLength()):
        op = sg.Operators(i)
        name = _op_name(model, op)
        ins, outs = [int(t) for t in indices(op.InputsAsNumpy())], [int(t) for t in indices(op.OutputsAsNumpy())]
        for pos, t in [*((p, t) for p, t in enumerate(ins)), *((None, t) for t in outs)]:
            if t not in int4:
                continue
            why = _refusal(model, sg, name, ins, pos, t)
            if why:
                where = f"operator #{i} {name} " + ("writes" if pos is None else f"reads (as input {pos})")
                raise UnsupportedModelError(f"{file}: {where} tensor #{t} '{tensor_name(sg, t)}' of TFLite type INT4 "
                                            f"(4-bit values, two a byte): {why}. {_ACCEPTED}. {_FIX}")  # fmt: skip
            accepted.add(t)
    return accepted


def _refusal(model, sg, name: str, ins: list[int], pos: int | None, t: int) -> str:
    """Why TFLM would not run ``name`` with INT4 tensor ``t`` at input ``pos`` (None: an output), or ''."""
    tensor = sg.Tensors(t)
    if pos is None:
        return "no TFLite Micro kernel writes INT4"
    if name not in _FILTER_OPS or pos != 1:
        return f"TFLite Micro's {name} does not unpack INT4 there (it would read the packed bytes as another type)"
    data = model.Buffers(tensor.Buffer())
    if tensor.IsVariable() or not (data.DataLength() or data.Offset() > 1):
        return "the weights are computed at run time, not constants of the file"
    if ins[0] < 0 or sg.Tensors(ins[0]).Type() != INT8:
        return "its input activations are not int8"
    q = tensor.Quantization()
    if name == "FULLY_CONNECTED" and q is not None and q.ScaleLength() > 1:
        return f"the weights are quantized per channel ({q.ScaleLength()} scales), which TFLite Micro's FULLY_CONNECTED refuses with INT4 weights"
    return ""
