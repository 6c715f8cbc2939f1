"""Read and validate a .tflite flatbuffer, then import it with TVM's Relax TFLite frontend.

The frontend is TVM's; edgemem widens it where TFLite's semantics are not met (FULLY_CONNECTED
on inputs of rank > 2 flattens them; int8 PAD/TRANSPOSE/... are imported like their float form)
and turns its exceptions into messages that name the operator.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path

import numpy as np

from ..errors import EdgememError, ModelFileError, UnsupportedModelError, shown
from ..passes.rewrite import abandon
from .fold import FOLDERS, fold_model
from .control_flow import has_variables
from .footprint import indices
from .int4 import has_int4, unpacked_model
from .support import check_operators
from .unique_names import with_unique_names
from .validate_model import validate_model

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
    op_labels: dict = field(default_factory=dict)  # Relax var of an operator's output -> "operator #i NAME (output 'x')"
    variables: tuple = ()  # control_flow.Variable: state kept across invocations, extra inputs/outputs after these


_TFL_TYPES = {0: "float32", 1: "float16", 2: "int32", 3: "uint8", 4: "int64", 6: "bool", 7: "int16", 9: "int8", 12: "uint64", 15: "uint32"}


@lru_cache(maxsize=1)
def _builtin_names() -> dict[int, str]:
    from tflite.BuiltinOperator import BuiltinOperator

    return {v: k for k, v in BuiltinOperator.__dict__.items() if not k.startswith("_")}


def _op_name(model, op) -> str:
    code = model.OperatorCodes(op.OpcodeIndex())
    builtin = max(code.BuiltinCode(), code.DeprecatedBuiltinCode())
    name = _builtin_names().get(builtin, f"builtin {builtin}")
    if name == "CUSTOM":
        name = f"CUSTOM({shown((code.CustomCode() or b'?').decode(errors='replace'))})"
    return name


def tensor_name(subgraph, index: int) -> str:
    """The tensor's name for a message: the file's, its control characters spelled (errors.shown: a newline in a
    name must not split a message), or '#<index>' when the file gives none."""
    return shown(file_tensor_name(subgraph, index))


def file_tensor_name(subgraph, index: int) -> str:
    """The tensor's name in the file, or '#<index>' when the file gives none: what the report and model.h show (each
    escaped for its own language); the model edgemem reads names tensor i 't<i>' (unique_names.py)."""
    names = getattr(subgraph, "display_names", None)
    if names is not None and 0 <= index < len(names):
        return names[index]
    name = subgraph.Tensors(index).Name()
    return name.decode(errors="replace") if name else f"#{index}"


def _tensor_info(subgraph, index: int) -> TensorInfo:
    t = subgraph.Tensors(index)
    dtype = _TFL_TYPES.get(t.Type())
    if dtype is None:
        raise UnsupportedModelError(f"tensor '{tensor_name(subgraph, index)}' has TFLite type {_type_name(t.Type())}, which edgemem does not support.")
    q = t.Quantization()
    scale = zp = None
    if q is not None and q.ScaleLength() == 1:
        scale, zp = float(q.Scale(0)), int(q.ZeroPoint(0))
    return TensorInfo(file_tensor_name(subgraph, index), tuple(indices(t.ShapeAsNumpy())), dtype, scale, zp)


def read_tflite(path: Path):
    """Parse and check the flatbuffer (parse_tflite); returns tflite.Model."""
    path = Path(path)
    if not path.is_file():
        what = "is not a regular file (a directory, device or pipe)" if path.exists() else "does not exist"
        raise ModelFileError(f"model file '{path}' {what}. Pass the path of a .tflite model.")
    size = path.stat().st_size  # checked before reading: a huge file is refused without loading it
    if size > _MAX_MODEL_BYTES:
        raise ModelFileError(f"model file '{path}' is {size:,} bytes, more than the {_MAX_MODEL_BYTES:,} bytes edgemem accepts; no microcontroller holds it.")
    try:
        buf = path.read_bytes()
    except OSError as exc:
        raise ModelFileError(f"model file '{path}' cannot be read ({exc.strerror or exc}). Check its permissions.") from exc
    return parse_tflite(buf, path)


def parse_tflite(buf: bytes, path: Path | str = "<bytes>"):
    """Check that `buf` is a complete TFLite flatbuffer whose indices all resolve and whose contents make sense
    (validate_model.py); returns it as a tflite.Model of one subgraph (control flow unrolled,
    frontend/control_flow.py) whose tensor i is named 't<i>' (unique_names.py; tensor_name gives the file's
    name). `path` only names the model in messages."""
    return _parsed(bytes(buf), str(path))


@lru_cache(maxsize=4)
def _parsed(buf: bytes, path: str):
    """A build reads its model several times (budget check, import, planning): checked and renamed once. The
    model is a read-only view of ``buf``, so one copy serves every reader."""
    import tflite

    if not buf:
        raise ModelFileError(f"model file '{path}' is empty (0 bytes). Pass a .tflite model written by the TFLite converter.")
    if len(buf) < 8 or buf[4:8] != b"TFL3":
        raise ModelFileError(f"'{path}' is not a TensorFlow Lite model (no 'TFL3' identifier at byte 4). Convert the model with the TFLite converter and pass the .tflite file.")
    try:
        model = tflite.Model.GetRootAsModel(buf, 0)
        if model.SubgraphsLength() < 1:
            raise ModelFileError(f"'{path}' holds no subgraph; the file is empty or truncated.")
        _check_references(model, len(buf), path)
        if model.SubgraphsLength() > 1 or has_variables(model):  # WHILE/IF/CALL_ONCE, resource variables
            flat, variables = _flattened(model, buf, path)  # unrolled into one subgraph when static
            named = _parsed(flat, path)
            named.variables = tuple(variables)
            return _with_source(named, buf)
        validate_model(model, path)  # reads options tables too, which a corrupt file can point anywhere
        if has_int4(model):  # int4 weights unpacked to int8 (int4.py), then read as any int8 model
            flat = unpacked_model(model, buf, path)
            return _with_source(_parsed(flat, path), buf)
        return with_unique_names(buf, model)
    except EdgememError:
        raise
    except Exception as exc:  # the flatbuffer reader raises anything on corrupt offsets
        raise ModelFileError(f"'{path}' could not be read as a TFLite flatbuffer ({type(exc).__name__}: {exc}); the file is corrupted or truncated. Re-export the model.") from exc


def _with_source(named, buf: bytes):
    """``named`` (a rewritten model: control flow unrolled, int4 unpacked, or both) with ``source`` where the file's
    own bytes lie in it: control_flow._serialize keeps them whole at the end of what it writes."""
    start = bytes(named._tab.Bytes).rfind(buf)
    named.source = (start, start + len(buf)) if start >= 0 else (0, 0)
    return named


def _flattened(model, buf: bytes, path):
    from .control_flow import flatten_with_variables

    try:
        return flatten_with_variables(model, buf, Path(path).name)
    except EdgememError:
        raise
    except Exception as exc:  # the flatbuffer reader raises anything on corrupt offsets in the other subgraphs
        raise ModelFileError(f"'{path}' could not be read as a TFLite flatbuffer ({type(exc).__name__}: {exc}); the file is corrupted or truncated. Re-export the model.") from exc


def _corrupt(path, what: str) -> ModelFileError:
    return ModelFileError(f"'{path}' is corrupted: {what}. Re-export the model with the TFLite converter.")


def _check_indices(indices, limit: int, path, where: str, allow_absent: bool = False) -> None:
    """Every tensor index of `where` must name a tensor of the subgraph (-1: optional input left out)."""
    for t in indices:
        if not (0 <= t < limit or (allow_absent and t == -1)):
            raise _corrupt(path, f"{where} refers to tensor {int(t)}, but subgraph 0 has {limit} tensors")


def _check_references(model, file_bytes: int, path) -> None:
    """Resolve every index and vector of subgraph 0 and the buffers it uses, so that later stages never read
    outside the file or index past a table; the flatbuffer reader itself does not check."""
    sg = model.Subgraphs(0)
    n_tensors, n_codes, n_buffers = sg.TensorsLength(), model.OperatorCodesLength(), model.BuffersLength()
    _check_counts(sg, file_bytes, path)
    for i in range(sg.OperatorsLength()):
        op = sg.Operators(i)
        if not 0 <= op.OpcodeIndex() < n_codes:
            raise _corrupt(path, f"operator #{i} uses operator code {op.OpcodeIndex()}, but the file has {n_codes}")
        where = f"operator #{i} ({_op_name(model, op)})"
        _check_indices(indices(op.InputsAsNumpy()), n_tensors, path, where, allow_absent=True)
        _check_indices(indices(op.OutputsAsNumpy()), n_tensors, path, where)
    _check_indices(indices(sg.InputsAsNumpy()), n_tensors, path, "the model's input list")
    _check_indices(indices(sg.OutputsAsNumpy()), n_tensors, path, "the model's output list")
    for i in range(n_codes):
        code = model.OperatorCodes(i)
        code.BuiltinCode(), code.DeprecatedBuiltinCode(), code.CustomCode(), code.Version()
    for i in range(n_tensors):
        t = sg.Tensors(i)
        _read_tensor_fields(t)
        if not 0 <= t.Buffer() < n_buffers:  # buffer 0, the empty one, is there in every valid file
            raise _corrupt(path, f"tensor '{tensor_name(sg, i)}' uses buffer {t.Buffer()}, but the file has {n_buffers}")
        _check_buffer(model.Buffers(t.Buffer()), file_bytes, path, tensor_name(sg, i))


def _check_counts(sg, file_bytes: int, path) -> None:
    """A table takes at least 8 bytes (its offset in a vector and its vtable offset) and a vector element 4:
    counts beyond that mean tables or vectors overlap, which no converter writes. Refusing them bounds the
    work of every later pass by the file size (a corrupt file cannot make edgemem loop for minutes)."""
    n_ops, n_tensors = sg.OperatorsLength(), sg.TensorsLength()
    if 8 * (n_ops + n_tensors) > file_bytes:
        raise _corrupt(path, f"it claims {n_ops:,} operators and {n_tensors:,} tensors in {file_bytes:,} bytes")
    elements = sum(sg.Operators(i).InputsLength() + sg.Operators(i).OutputsLength() for i in range(n_ops))
    elements += sum(sg.Tensors(i).ShapeLength() for i in range(n_tensors))
    if 4 * elements > file_bytes:
        raise _corrupt(path, f"its operator and shape vectors claim {elements:,} entries in {file_bytes:,} bytes")


def _read_tensor_fields(t) -> None:
    """Read every field of a tensor that edgemem or TVM's importer reads: the flatbuffer reader raises on an
    offset past the end of the file only when the field is read, so it is read here, inside the check."""
    t.Name(), t.Type(), t.ShapeAsNumpy(), t.ShapeSignatureAsNumpy(), t.IsVariable(), t.Sparsity()
    q = t.Quantization()
    if q is not None:
        q.ScaleAsNumpy(), q.ZeroPointAsNumpy(), q.MinAsNumpy(), q.MaxAsNumpy(), q.QuantizedDimension()


def _check_buffer(buf, file_bytes: int, path, tensor: str) -> None:
    if buf.DataLength():
        buf.DataAsNumpy()  # a view; raises when the vector runs past the end of the file
    offset, size = buf.Offset(), buf.Size()  # both read: footprint.is_constant reads Size() of every buffer
    if offset > 1 and offset + size > file_bytes:
        raise _corrupt(path, f"the data of tensor '{tensor}' lies at bytes {offset:,}..{offset + size:,}, "
                             f"past the end of the {file_bytes:,}-byte file (truncated?)")  # fmt: skip


def check_supported(model, path) -> None:
    """Refuse, naming the tensor and the operator, what edgemem cannot plan: tensor types it has no kernels
    for, dynamic shapes (a -1 dimension: the bytes of a static arena must be known); sparse tensors are refused
    earlier (validate_model.py)."""
    sg = model.Subgraphs(0)
    users: dict[int, str] = {}
    for i in range(sg.OperatorsLength()):
        op = sg.Operators(i)
        for t in [*indices(op.InputsAsNumpy()), *indices(op.OutputsAsNumpy())]:
            users.setdefault(int(t), f"operator #{i} ({_op_name(model, op)})")
    for t in (*indices(sg.InputsAsNumpy()), *indices(sg.OutputsAsNumpy())):
        users.setdefault(int(t), "the model's inputs/outputs")
    for index, where in sorted(users.items()):
        if index < 0:
            continue
        tensor = sg.Tensors(index)
        name = tensor_name(sg, index)
        if tensor.Type() not in _TFL_TYPES:
            raise UnsupportedModelError(
                f"{Path(path).name}: tensor '{name}' (used by {where}) has TFLite type {_type_name(tensor.Type())}, which edgemem "
                f"does not support (supported: {', '.join(sorted(set(_TFL_TYPES.values())))}). Quantize the model to int8."
            )
        shape = indices(tensor.ShapeAsNumpy())
        if any(d < 0 for d in shape):
            raise UnsupportedModelError(
                f"{Path(path).name}: tensor '{name}' (used by {where}) has a dynamic shape {shape}; edgemem plans a static "
                "arena and needs every shape fixed. Re-export the model with fixed input shapes (batch 1)."
            )


def _type_name(code: int) -> str:
    from tflite.TensorType import TensorType

    names = {v: k for k, v in TensorType.__dict__.items() if not k.startswith("_")}
    return f"{names.get(code, 'unknown')} ({code})"


def _normalize_quant_axis(wrapper) -> None:
    """Some converters copy the weight's quantized_dimension (3 for depthwise) onto the 1-D
    bias; TFLM ignores it there, Relax's dequantize rejects it. A rank-1 tensor has one axis."""
    q = wrapper.qnn_params
    if not q or wrapper.tensor is None or wrapper.tensor_idx < 0:
        return
    rank = wrapper.tensor.ShapeLength()
    if rank == 1 and q["axis"] >= rank:
        q["axis"] = 0


def _empty_quantization(subgraph, index: int) -> bool:
    """A quantization table without scales: TFLite (and TFLM) read it as no quantization. Converters write one on
    the int32 paddings of a channel PAD or the axes of a MEAN (MediaPipe's palm and hand models); TVM's importer
    takes its empty scale vector for per-axis scales and indexes it."""
    if index < 0:
        return False
    q = subgraph.Tensors(index).Quantization()
    return q is not None and q.ScaleLength() == 0


def _converter_class():
    """TVM's OperatorConverter, widened where TFLite semantics need it."""
    import tvm
    from tvm import relax
    from tvm.relax.frontend.tflite import tflite_frontend as tf

    from .ops import registry as ops_registry

    class EdgememConverter(tf.OperatorConverter):
        current_op = None  # flatbuffer position of the operator being converted, for error messages

        builder = None  # the BlockBuilder of the last import, closed when the import fails

        def __init__(self, model, subgraph, *args, **kwargs):
            super().__init__(model, subgraph, *args, **kwargs)
            type(self).builder = self.bb
            self._index_of = {subgraph.Operators(i)._tab.Pos: i for i in range(subgraph.OperatorsLength())}
            type(self).op_of_var = {}  # Relax var -> index of the TFLite operator whose output it is
            for name in ops_registry.registered():  # edgemem's own lowerings go first (frontend/ops/)
                self.convert_map[name] = self._dispatcher(name, self.convert_map.get(name))
            # Operators whose result is known now are evaluated (frontend/fold.py): no kernel, constant outputs.
            self.folded_values, self.folded_ops = fold_model(model) if model is not None else ({}, set())
            for name in FOLDERS:
                self.convert_map[name] = self._folding(self.convert_map.get(name))
            for name, convert in list(self.convert_map.items()):
                self.convert_map[name] = self._recorded(convert)

        def _folding(self, fallback):
            def convert(op):
                if self._index_of[op._tab.Pos] in self.folded_ops:
                    return None  # its outputs are constants: get_tensor_value answers them
                if fallback is None:
                    raise tvm.error.OpNotImplemented(f"edgemem has no lowering of '{self.get_op_code_str(op)}' here")
                return fallback(op=op)

            return convert

        def get_tensor_value(self, tensor_wrapper, is_sparse=False):
            folded = self.folded_values.get(tensor_wrapper.tensor_idx)
            if folded is not None:
                return folded
            shape = [int(d) for d in indices(tensor_wrapper.tensor.ShapeAsNumpy())]
            if 0 in shape and not tensor_wrapper.buffer.DataLength():  # no elements, no data (a RESHAPE to [])
                return np.zeros(shape, self.get_tensor_type_as_numpy(tensor_wrapper))
            return super().get_tensor_value(tensor_wrapper, is_sparse)

        def get_expr(self, input_tensor_idx):
            # TVM's converters read an activation input as an expression; one whose producer was folded has none
            # (its value is a constant now): answered with the constant, not a KeyError. Not recorded in the
            # table, whose entries mean "computed at run time" to has_expr.
            if not self.has_expr(input_tensor_idx) and int(input_tensor_idx) in self.folded_values:
                value = self.folded_values[int(input_tensor_idx)]
                return relax.const(value, str(value.dtype))
            return super().get_expr(input_tensor_idx)

        def is_folded(self, tensor_wrapper) -> bool:
            return tensor_wrapper.tensor_idx in self.folded_values

        def _dispatcher(self, name, fallback):
            def convert(op):
                entry = ops_registry.find(name, ops_registry.operand_type(self.subgraph, op, self.model, name),
                                          ops_registry.operator_types(self.subgraph, op))
                if entry is not None:
                    ret = entry.fn(ops_registry.OpContext(self, op, self._index_of[op._tab.Pos], name))
                    return self._bind_outputs(op, ret)
                if fallback is None:
                    raise tvm.error.OpNotImplemented(f"edgemem has no lowering of '{name}' for this operand type")
                return fallback(op=op)

            return convert

        def _bind_outputs(self, op, ret):
            """A lowering of a multi-output operator (SPLIT, SPLIT_V, UNPACK) returns a tuple of one expression per
            output; each output tensor is bound to its own here, so the import does not depend on how TVM's loop
            unpacks a result: it takes a one-output operator's whole result (a tuple) for that output, which broke
            a FULLY_CONNECTED reading a one-piece UNPACK (a Keras RNN unrolled over one time step)."""
            if not isinstance(ret, relax.Tuple):
                return ret
            outputs = self.get_output_tensors(op)
            if len(ret.fields) != len(outputs):
                raise tvm.error.InternalError(f"a lowering gave {len(ret.fields)} results for {len(outputs)} outputs")
            for out, piece in zip(outputs, ret.fields):
                self.exp_tab.set_expr(tf.get_tensor_name(self.subgraph, out.tensor_idx), piece)
                if isinstance(piece, relax.Var):
                    self.op_of_var[piece] = self._index_of[op._tab.Pos]
            return ret

        def _recorded(self, convert):
            """The converter with its result bound to a variable now, remembered as the operator's output: a
            later stage's message about that variable then names the TFLite operator."""

            def recorded(op):
                ret = convert(op=op)  # TVM calls its converters by keyword (some are partials)
                if isinstance(ret, relax.Call):
                    ret = self.bb.emit(ret)
                if isinstance(ret, relax.Var):
                    self.op_of_var[ret] = self._index_of[op._tab.Pos]
                return ret

            return recorded

        def check_unsupported_ops(self):
            pass  # edgemem's own check (frontend/support.py) ran before the import

        def get_op_code_str(self, op):
            # Called first for every operator by TVM's conversion loop; remembers which one fails.
            type(self).current_op = op._tab.Pos
            name = _op_name(self.model, op)
            if name.startswith("CUSTOM(") and name in self.convert_map:  # a custom operator edgemem lowers
                return name
            return super().get_op_code_str(op)

        def get_tensors(self, tensors_idx_list):
            wrappers = [self._tensor(t) for t in indices(tensors_idx_list)]
            for t in wrappers:
                _normalize_quant_axis(t)
            return wrappers

        def _tensor(self, index):
            if not _empty_quantization(self.subgraph, index):
                return super().get_tensors([index])[0]
            tensor = self.subgraph.Tensors(index)
            return tf.TensorWrapper(index, tensor, self.model.Buffers(tensor.Buffer()), None)

        island_starts: list = []  # the float vars of DEQUANTIZE operators of int8 activations, last import

        def convert_dequantize(self, op):
            # A DEQUANTIZE operator of an int8 activation starts a float island (float operators, then a
            # QUANTIZE): named in main's attrs so that integerize runs those operators in float, as TFLM does,
            # rather than taking them for an int8 operator's dequantize -> op -> quantize form.
            src = self.get_input_tensors(op)[0]
            if self.is_folded(src):  # its input was evaluated at import (fold.py): a constant, not an expression
                return self.dequantize(self.get_tensor_expr(src), src)
            out = super().convert_dequantize(op)
            constant = src.buffer is not None and not isinstance(src.buffer, int) and src.buffer.DataLength() > 0
            if src.tensor.Type() == 9 and not constant:
                out = self.bb.emit(out)
                type(self).island_starts.append(out)
            return out

        def get_input_tensors(self, op):
            # A CONV_2D's bias left out (-1), which TFLM runs without: TVM's convolution importer reads the
            # placeholder as a tensor, so it is dropped (TFLM's DEPTHWISE_CONV_2D needs its bias: not dropped there).
            tensors = super().get_input_tensors(op)
            if len(tensors) == 3 and tensors[2].tensor_idx < 0 and _op_name(self.model, op) == "CONV_2D":
                return tensors[:2]
            return tensors

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
                out = super().convert_fully_connected(op)
            finally:
                self.exp_tab.exprs[name] = original
            # keep_num_dims: the output keeps the input's leading dimensions ([1, 1, 257], not [1, 257])
            want = [int(d) for d in self.get_tensor_shape(self.get_output_tensors(op)[0])]
            if [int(d) for d in self._infer_shape(out)] != want:
                out = relax.op.reshape(self.bb.normalize(out), want)
            return out

    return EdgememConverter


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip()
    return text.splitlines()[0] if text else type(exc).__name__


def _op_label(sg, op_names: list[str], i: int) -> str:
    op = sg.Operators(i)
    outs = [tensor_name(sg, int(t)) for t in indices(op.OutputsAsNumpy()) if t >= 0]
    return f"operator #{i} {op_names[i]}" + (f" (output '{outs[0]}')" if outs else "")


def _where(sg, op_names: list[str], op_pos: int | None) -> str:
    """'operator #i NAME (output 'x'): ' for the operator whose table starts at op_pos, or '' if unknown."""
    for i in range(sg.OperatorsLength()):
        if sg.Operators(i)._tab.Pos == op_pos:
            return _op_label(sg, op_names, i) + ": "
    return ""


def _named_ops(sg, op_names: list[str], message: str) -> str:
    """' (first use: operator #i NAME (output 'x'); ...)' for the operators TVM's message quotes."""
    quoted = set(re.findall(r"'([A-Z0-9_]+)'", message))
    base = [name.split("(")[0] for name in op_names]  # CUSTOM(code) is quoted as CUSTOM
    firsts = [_op_label(sg, op_names, base.index(name)) for name in sorted(quoted) if name in base]
    return f" (first use: {'; '.join(firsts)})" if firsts else ""


def inspect_tflite(path: Path) -> tuple[object, list[str], list[TensorInfo], list[TensorInfo]]:
    """Everything import_tflite checks before TVM sees the model: (tflite.Model, op names, inputs, outputs)."""
    model = read_tflite(path)
    check_supported(model, path)
    sg = model.Subgraphs(0)
    op_names = [_op_name(model, sg.Operators(i)) for i in range(sg.OperatorsLength())]
    inputs = [_tensor_info(sg, i) for i in indices(sg.InputsAsNumpy())]
    outputs = [_tensor_info(sg, i) for i in indices(sg.OutputsAsNumpy())]
    variables = getattr(model, "variables", ())  # their kept values follow the model's own inputs and outputs
    inputs = inputs[: len(inputs) - sum(v.input is not None for v in variables)]
    outputs = outputs[: len(outputs) - sum(v.output is not None for v in variables)]
    if not inputs or not outputs or not op_names:
        raise UnsupportedModelError(
            f"{Path(path).name} has {len(inputs)} input(s), {len(outputs)} output(s) and {len(op_names)} operator(s); "
            "edgemem compiles models that compute their outputs from at least one input."
        )
    for t in inputs:
        if any(d <= 0 for d in t.shape):
            raise UnsupportedModelError(f"input '{t.name}' has a dynamic shape {t.shape}; give a fixed shape (edgemem plans static arenas).")
    return model, op_names, inputs, outputs


def import_tflite(path: Path) -> ImportedModel:
    """Validate the file and import subgraph 0 into a Relax IRModule (QDQ form for int8)."""
    from tvm.relax.frontend.tflite import from_tflite

    model, op_names, inputs, outputs = inspect_tflite(path)
    sg = model.Subgraphs(0)
    converter = _converter_class()
    check_operators(model, op_names, path)  # every unsupported operator at once, before TVM sees any
    converter.island_starts = []
    try:
        mod = from_tflite(model, op_converter=converter)
    except Exception as exc:
        if converter.builder is not None:
            abandon(converter.builder)
        raise _import_error(exc, path, sg, op_names, converter) from exc
    if converter.island_starts:
        names = sorted({v.name for v in converter.island_starts})
        mod["main"] = mod["main"].with_attr("edgemem.float_island_starts", ",".join(names))
    labels = {var: _op_label(sg, op_names, i) for var, i in converter.op_of_var.items()}
    return ImportedModel(Path(path), mod, inputs, outputs, op_names, labels, getattr(model, "variables", ()))


def _import_error(exc: Exception, path, sg, op_names, converter) -> UnsupportedModelError:
    """A failure of TVM's import as one paragraph that names the TFLite operator."""
    import tvm

    name, where = Path(path).name, _where(sg, op_names, converter.current_op)
    if isinstance(exc, UnsupportedModelError):
        return UnsupportedModelError(f"{name}: {where}{exc}")
    if isinstance(exc, tvm.error.OpNotImplemented):
        return UnsupportedModelError(f"{name}: {' '.join(str(exc).split()).rstrip('.')}{_named_ops(sg, op_names, str(exc))}. The model's operators are: {', '.join(sorted(set(op_names)))}. Replace the operator or file an issue for it.")
    return UnsupportedModelError(f"{name}: {where}TVM's TFLite importer failed ({type(exc).__name__}: {_first_line(exc)}). Operators in the model: {', '.join(sorted(set(op_names)))}.")
