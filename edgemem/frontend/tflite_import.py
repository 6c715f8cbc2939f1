"""Read and validate a .tflite flatbuffer, then import it with TVM's Relax TFLite frontend.

The frontend is TVM's; edgemem widens it where TFLite's semantics are not met (FULLY_CONNECTED
on inputs of rank > 2 flattens them; int8 PAD/TRANSPOSE/... are imported like their float form)
and turns its exceptions into messages that name the operator.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from ..errors import ModelFileError, UnsupportedModelError

_MAX_MODEL_BYTES = 64 * 1024 * 1024  # far beyond any microcontroller's flash


@dataclass(frozen=True)
class TensorInfo:
    """A model input or output as the user sees it: name, shape, dtype and quantization."""

    name: str
    shape: tuple[int, ...]
    dtype: str
    scale: float | None = None
    zero_point: int | None = None

    @property
    def nbytes(self) -> int:
        return int(np.prod(self.shape)) * np.dtype(self.dtype).itemsize


@dataclass
class ImportedModel:
    path: Path
    relax_mod: object  # tvm.IRModule in QDQ form, straight from the frontend
    inputs: list[TensorInfo]
    outputs: list[TensorInfo]
    op_names: list[str] = field(default_factory=list)  # TFLite builtin names, file order


_TFL_TYPES = {0: "float32", 1: "float16", 2: "int32", 3: "uint8", 4: "int64", 6: "bool", 7: "int16", 9: "int8"}


def _builtin_names() -> dict[int, str]:
    from tflite.BuiltinOperator import BuiltinOperator

    return {v: k for k, v in BuiltinOperator.__dict__.items() if not k.startswith("_")}


def _op_name(model, op) -> str:
    code = model.OperatorCodes(op.OpcodeIndex())
    builtin = max(code.BuiltinCode(), code.DeprecatedBuiltinCode())
    name = _builtin_names().get(builtin, f"builtin {builtin}")
    if name == "CUSTOM":
        name = f"CUSTOM({code.CustomCode().decode(errors='replace')})"
    return name


def _tensor_info(subgraph, index: int) -> TensorInfo:
    t = subgraph.Tensors(index)
    dtype = _TFL_TYPES.get(t.Type())
    if dtype is None:
        raise UnsupportedModelError(f"tensor '{t.Name().decode(errors='replace')}' has TFLite type {t.Type()}, which edgemem does not support.")
    q = t.Quantization()
    scale = zp = None
    if q is not None and q.ScaleLength() == 1:
        scale, zp = float(q.Scale(0)), int(q.ZeroPoint(0))
    return TensorInfo(t.Name().decode(errors="replace"), tuple(int(d) for d in t.ShapeAsNumpy()), dtype, scale, zp)


def read_tflite(path: Path):
    """Parse the flatbuffer with the `tflite` package after checking it is one; returns tflite.Model."""
    import tflite

    path = Path(path)
    if not path.is_file():
        raise ModelFileError(f"model file '{path}' does not exist or is not a file. Pass the path of a .tflite model.")
    size = path.stat().st_size
    if size > _MAX_MODEL_BYTES:
        raise ModelFileError(f"model file '{path}' is {size:,} bytes, more than the {_MAX_MODEL_BYTES:,} bytes edgemem accepts; no microcontroller holds it.")
    buf = path.read_bytes()
    if len(buf) < 8 or buf[4:8] != b"TFL3":
        raise ModelFileError(f"'{path}' is not a TensorFlow Lite model (no 'TFL3' identifier at byte 4). Convert the model with the TFLite converter and pass the .tflite file.")
    try:
        model = tflite.Model.GetRootAsModel(buf, 0)
        if model.SubgraphsLength() < 1:
            raise ModelFileError(f"'{path}' holds no subgraph; the file is empty or truncated.")
        sg = model.Subgraphs(0)
        for i in range(sg.OperatorsLength()):
            _op_name(model, sg.Operators(i))
        for i in range(sg.TensorsLength()):
            sg.Tensors(i).ShapeAsNumpy()
    except ModelFileError:
        raise
    except Exception as exc:  # the flatbuffer reader raises anything on corrupt offsets
        raise ModelFileError(f"'{path}' could not be read as a TFLite flatbuffer ({type(exc).__name__}: {exc}); the file is corrupted or truncated. Re-export the model.") from exc
    if model.SubgraphsLength() > 1:
        raise UnsupportedModelError(f"'{path}' has {model.SubgraphsLength()} subgraphs; edgemem compiles single-subgraph models (no control flow). Re-export without WHILE/IF.")
    return model


def _normalize_quant_axis(wrapper) -> None:
    """Some converters copy the weight's quantized_dimension (3 for depthwise) onto the 1-D
    bias; TFLM ignores it there, Relax's dequantize rejects it. A rank-1 tensor has one axis."""
    q = wrapper.qnn_params
    if not q or wrapper.tensor is None or wrapper.tensor_idx < 0:
        return
    rank = wrapper.tensor.ShapeLength()
    if rank == 1 and q["axis"] >= rank:
        q["axis"] = 0


def _softmax_beta(op) -> float:
    from tflite.SoftmaxOptions import SoftmaxOptions

    table = op.BuiltinOptions()
    if table is None:
        return 1.0
    opts = SoftmaxOptions()
    opts.Init(table.Bytes, table.Pos)
    return float(opts.Beta())


def _converter_class():
    """TVM's OperatorConverter, widened where TFLite semantics need it."""
    from tvm import relax
    from tvm.relax.frontend.tflite import tflite_frontend as tf

    class EdgememConverter(tf.OperatorConverter):
        # Layout-only ops are exact on int8 data; the stock list refuses them.
        _SUPPORTED_QUANTIZED_OPS = tf.OperatorConverter._SUPPORTED_QUANTIZED_OPS | {
            "PAD", "PADV2", "TRANSPOSE", "SQUEEZE", "STRIDED_SLICE", "RESIZE_NEAREST_NEIGHBOR",
        }

        def get_tensors(self, tensors_idx_list):
            wrappers = super().get_tensors(tensors_idx_list)
            for t in wrappers:
                _normalize_quant_axis(t)
            return wrappers

        def convert_softmax(self, op):
            # The stock converter drops beta; refuse rather than run a different function.
            beta = _softmax_beta(op)
            if beta != 1.0:
                raise UnsupportedModelError(f"SOFTMAX with beta={beta} is not supported yet (only beta=1).")
            return super().convert_softmax(op)

        def convert_fully_connected(self, op):
            # TFLite flattens every input dimension but the last into the batch.
            inp, weight = self.get_input_tensors(op)[:2]
            shape = [int(d) for d in self.get_tensor_shape(inp)]
            if len(shape) == 2:
                return super().convert_fully_connected(op)
            k = int(self.get_tensor_shape(weight)[1])
            name = tf.get_tensor_name(self.subgraph, inp.tensor_idx)
            original = self.exp_tab.exprs[name]
            self.exp_tab.exprs[name] = self.bb.emit(relax.op.reshape(original, [int(np.prod(shape)) // k, k]))
            try:
                return super().convert_fully_connected(op)
            finally:
                self.exp_tab.exprs[name] = original

    return EdgememConverter


def import_tflite(path: Path) -> ImportedModel:
    """Validate the file and import subgraph 0 into a Relax IRModule (QDQ form for int8)."""
    import tvm
    from tvm.relax.frontend.tflite import from_tflite

    model = read_tflite(path)
    sg = model.Subgraphs(0)
    op_names = [_op_name(model, sg.Operators(i)) for i in range(sg.OperatorsLength())]
    inputs = [_tensor_info(sg, int(i)) for i in sg.InputsAsNumpy()]
    outputs = [_tensor_info(sg, int(i)) for i in sg.OutputsAsNumpy()]
    for t in inputs:
        if any(d <= 0 for d in t.shape):
            raise UnsupportedModelError(f"input '{t.name}' has a dynamic shape {t.shape}; give a fixed shape (edgemem plans static arenas).")
    try:
        mod = from_tflite(model, op_converter=_converter_class())
    except UnsupportedModelError as exc:
        raise UnsupportedModelError(f"{Path(path).name}: {exc}") from exc
    except tvm.error.OpNotImplemented as exc:
        raise UnsupportedModelError(f"{Path(path).name}: {exc}. The model's operators are: {', '.join(sorted(set(op_names)))}. Replace the operator or file an issue for it.") from exc
    except Exception as exc:
        raise UnsupportedModelError(f"{Path(path).name}: TVM's TFLite importer failed ({type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''}). Operators in the model: {', '.join(sorted(set(op_names)))}.") from exc
    return ImportedModel(Path(path), mod, inputs, outputs, op_names)
