"""Control flow with a trip count known at build time, unrolled into one subgraph before anything else reads it.

Keras 3's LSTM, GRU and SimpleRNN layers convert to a WHILE operator whose condition and body are subgraphs of
their own: the loop counters start from constants and the condition compares them with constants, so the
number of iterations is fixed when the model is built. edgemem plans one static arena over one operator list,
so such a model is rewritten here into a single-subgraph flatbuffer: every iteration's body operators with
fresh tensors, the loop-carried values threaded from one iteration to the next, and the integer scalars (the
counters, the condition) evaluated with numpy, so that the body's GATHER of step t reads a constant index. The
planner then reuses the body's tensors across iterations by liveness, like any other tensors. An IF whose
condition is known is replaced by the branch it takes. What cannot be decided at build time is refused with
a message naming the operator.

Resource variables (a streaming model's state: CALL_ONCE, VAR_HANDLE, READ_VARIABLE, ASSIGN_VARIABLE, as
TensorFlow's converter writes `tf.Variable`s) are resolved here too, in the graph's order: CALL_ONCE's init
subgraph is evaluated at build time (its ASSIGN_VARIABLEs of constants give each variable its initial value,
which the generated C restores on edgemem_reset); in the main subgraph a variable's value is threaded like a
loop-carried value: a READ_VARIABLE before any ASSIGN_VARIABLE of that invocation reads the value kept from the
previous invocation, which becomes an extra input of the unrolled graph (the generated code copies the kept
value there before the operators run), a READ_VARIABLE after an ASSIGN_VARIABLE reads the assigned tensor, and
the last value assigned becomes an extra output (copied back to the kept value after the operators). TFLM copies
bytes on every READ and ASSIGN, so this is its arithmetic exactly; a read-after-assign between tensors of
different quantization, whose bytes TFLM would reinterpret, is refused. ``Variable`` records each one.

The new flatbuffer holds the original file's bytes unchanged and builds the new tables in front of them: the
operators' options, the tensors' quantization, the operator codes and the buffers are referenced where they
are (a flatbuffer offset may point anywhere later in the file), so no table of TFLite's schema is re-encoded
field by field and no weight is copied.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from ..errors import ModelFileError, UnsupportedModelError, shown
from .footprint import builtin_options, indices

MAX_ITERATIONS = 4096  # a trip count beyond this is not a microcontroller's recurrent layer (and would unroll for minutes)
MAX_OPERATORS = 200_000  # operators of the unrolled model, all loops together
MAX_STEPS = 1_000_000  # operators expanded or evaluated, all loops together (nested loops of counters alone)

_NP = {0: np.float32, 2: np.int32, 3: np.uint8, 4: np.int64, 6: np.bool_, 7: np.int16, 9: np.int8}
_INTEGRAL = {2, 4, 6}  # int32, int64, bool: the counters' and the condition's types

# The operators evaluated at build time when all their inputs are known integer (or bool) values.
_EVAL = {
    "ADD": np.add, "SUB": np.subtract, "MUL": np.multiply, "MINIMUM": np.minimum, "MAXIMUM": np.maximum,
    "FLOOR_DIV": np.floor_divide, "FLOOR_MOD": np.mod,
    "LESS": np.less, "LESS_EQUAL": np.less_equal, "GREATER": np.greater, "GREATER_EQUAL": np.greater_equal,
    "EQUAL": np.equal, "NOT_EQUAL": np.not_equal, "LOGICAL_AND": np.logical_and, "LOGICAL_OR": np.logical_or,
    "LOGICAL_NOT": np.logical_not, "IDENTITY": lambda x: x,
}  # fmt: skip
_WITH_ACTIVATION = {"ADD", "SUB", "MUL"}  # their options carry a fused activation: evaluated only without one
_SHAPED = {"RESHAPE", "SQUEEZE", "EXPAND_DIMS"}  # of known integers: the value in the output's shape


def has_control_flow(model) -> bool:
    return model.SubgraphsLength() > 1


_VARIABLE_OPS = {"VAR_HANDLE", "READ_VARIABLE", "ASSIGN_VARIABLE", "CALL_ONCE"}


@dataclass
class Variable:
    """A resource variable kept across invocations: its initial value (from CALL_ONCE), and its positions among
    the unrolled graph's inputs (the kept value read, None if never read before an assignment) and outputs
    (the value to keep, None if never assigned after such a read). Those inputs and outputs come after the
    model's own."""

    name: str  # the variable's shared_name, for messages and comments only
    initial: np.ndarray
    input: int | None = None
    output: int | None = None


@dataclass
class _Resource:
    """A VAR_HANDLE's result: the variable it names, (container, shared_name) as TFLM looks it up."""

    key: tuple[str, str]


@dataclass
class _Known:
    """A value known at build time: a constant of the file (``source``: (subgraph, tensor)) or a computed one."""

    value: np.ndarray
    source: tuple[int, int] | None = None


@dataclass
class _Tensor:
    index: int  # tensor of the unrolled subgraph


@dataclass
class _NewTensor:
    sg: int  # the original tensor whose type, shape and quantization it takes
    tensor: int
    name: str
    buffer: int = 0  # original buffer index, or len(original buffers) + k for the k-th new buffer
    type: int | None = None  # a TensorType other than the original's (int4 weights unpacked to int8, int4.py)


@dataclass
class _NewOp:
    sg: int
    op: int
    inputs: list[int]
    outputs: list[int]
    intermediates: list[int] = field(default_factory=list)  # an int8 LSTM's gate quantizations


@dataclass
class _Graph:
    tensors: list[_NewTensor] = field(default_factory=list)
    ops: list[_NewOp] = field(default_factory=list)
    new_buffers: list[bytes] = field(default_factory=list)
    names: set[str] = field(default_factory=set)
    constants: dict[tuple[int, int], int] = field(default_factory=dict)  # (sg, tensor) of a file constant -> new tensor


class _Flattener:
    def __init__(self, model, path):
        from .tflite_import import _op_name

        self.model, self.path, self.op_name = model, path, _op_name
        self.graph = _Graph()
        self.active: list[int] = []  # subgraphs being expanded (a subgraph that calls itself is refused)
        self.steps = 0
        self.file_constants: dict[tuple[int, int], _Known | None] = {}
        self.initial: dict[tuple[str, str], np.ndarray] = {}  # variable -> initial value (CALL_ONCE)
        self.current: dict = {}  # variable -> its value in this invocation so far (_Tensor or _Known)
        self.kept_inputs: dict[tuple[str, str], int] = {}  # variable -> new tensor of the value kept from the last run
        self.called_once: set[int] = set()  # init subgraphs already run
        self.init_depth = 0  # > 0 while a CALL_ONCE's init subgraph runs (evaluated at build time)
        self.assigned = self.assigned_variables()  # None: any may be (a resource not from a VAR_HANDLE)

    # ------------------------------------------------------------ reading the file

    def sg(self, s: int):
        if not 0 <= s < self.model.SubgraphsLength():
            raise ModelFileError(f"'{self.path}' is corrupted: an operator refers to subgraph {s}, but the file has {self.model.SubgraphsLength()}. Re-export the model.")
        return self.model.Subgraphs(s)

    def sg_label(self, s: int) -> str:
        name = self.sg(s).Name()
        return f"subgraph {s}" + (f" '{shown(name.decode(errors='replace'))}'" if name else "")

    def op_label(self, s: int, i: int) -> str:
        return f"operator #{i} {self.op_name(self.model, self.sg(s).Operators(i))} of {self.sg_label(s)}"

    def tensor_ids(self, s: int, vector, where: str) -> list[int]:
        limit = self.sg(s).TensorsLength()
        ids = [int(t) for t in indices(vector)]
        for t in ids:
            if not -1 <= t < limit:
                raise ModelFileError(f"'{self.path}' is corrupted: {where} refers to tensor {t}, but {self.sg_label(s)} has {limit} tensors. Re-export the model.")
        return ids

    def file_constant(self, s: int, t: int) -> _Known | None:
        if (s, t) not in self.file_constants:  # read once, not once per iteration
            self.file_constants[(s, t)] = self._read_constant(s, t)
        return self.file_constants[(s, t)]

    def _read_constant(self, s: int, t: int) -> _Known | None:
        tensor = self.sg(s).Tensors(t)
        if tensor.IsVariable():
            return None
        buf_index = tensor.Buffer()
        if not 0 < buf_index < self.model.BuffersLength():
            return None
        buf = self.model.Buffers(buf_index)
        if buf.DataLength() == 0 or tensor.Type() not in _NP:
            return _Known(np.zeros(0), (s, t)) if buf.DataLength() else None
        shape = indices(tensor.ShapeAsNumpy())
        data = buf.DataAsNumpy().tobytes()
        dtype = np.dtype(_NP[tensor.Type()])
        if len(data) != int(np.prod(shape, dtype=np.int64)) * dtype.itemsize:
            return _Known(np.zeros(0), (s, t))  # not evaluated (packed or odd data); still referenced as is
        return _Known(np.frombuffer(data, dtype).reshape(shape), (s, t))

    # ------------------------------------------------------------ writing the unrolled graph

    def unique(self, name: str) -> str:
        base, k = name, 1
        while name in self.graph.names:
            k += 1
            name = f"{base}#{k}"
        self.graph.names.add(name)
        return name

    def new_tensor(self, s: int, t: int, tag: str, buffer: int = 0) -> int:
        raw = self.sg(s).Tensors(t).Name()
        name = raw.decode(errors="replace") if raw else f"t{t}"
        self.graph.tensors.append(_NewTensor(s, t, self.unique(name + tag), buffer))
        return len(self.graph.tensors) - 1

    def materialize(self, value, s: int, t: int, tag: str) -> int:
        """The unrolled graph's tensor holding ``value`` (a file constant is referenced, a computed one stored)."""
        if isinstance(value, _Tensor):
            return value.index
        if value.source is not None:
            if value.source not in self.graph.constants:
                src_s, src_t = value.source
                self.graph.constants[value.source] = self.new_tensor(src_s, src_t, "", self.sg(src_s).Tensors(src_t).Buffer())
            return self.graph.constants[value.source]
        dtype = _NP[self.sg(s).Tensors(t).Type()]
        self.graph.new_buffers.append(np.ascontiguousarray(value.value, dtype).tobytes())
        return self.new_tensor(s, t, tag, self.model.BuffersLength() + len(self.graph.new_buffers) - 1)

    # ------------------------------------------------------------ expanding subgraphs

    def run(self, s: int, env: dict, tag: str, evaluate_only: bool = False) -> dict:
        """Expand subgraph ``s`` with its inputs bound in ``env`` ({tensor: value}); returns env with every
        tensor it computes. ``evaluate_only``: every operator must be evaluated (a loop condition)."""
        if s in self.active:
            raise UnsupportedModelError(f"{self.path}: {self.sg_label(s)} calls itself (recursion through WHILE/IF); edgemem unrolls loops whose trip count is known at build time and cannot expand a recursive call.")
        self.active.append(s)
        sg = self.sg(s)
        for i in range(sg.OperatorsLength()):
            self.expand_op(s, i, env, tag, evaluate_only)
        self.active.pop()
        return env

    def value(self, s: int, t: int, env: dict):
        if t in env:
            return env[t]
        known = self.file_constant(s, t)
        if known is None:
            raise UnsupportedModelError(f"{self.path}: tensor {t} of {self.sg_label(s)} is read before any operator writes it and is not a constant; edgemem cannot unroll this control flow.")
        env[t] = known
        return known

    def expand_op(self, s: int, i: int, env: dict, tag: str, evaluate_only: bool) -> None:
        self.steps += 1
        if self.steps > MAX_STEPS:
            raise UnsupportedModelError(f"{self.path}: unrolling the model's loops takes more than {MAX_STEPS:,} operator steps (nested loops?); edgemem unrolls WHILE loops and does not unroll these. Shorten the sequences.")
        op = self.sg(s).Operators(i)
        name = self.op_name(self.model, op)
        where = self.op_label(s, i)
        ins = self.tensor_ids(s, op.InputsAsNumpy(), where)
        outs = self.tensor_ids(s, op.OutputsAsNumpy(), where)
        values = [self.value(s, t, env) if t >= 0 else None for t in ins]
        if name in _VARIABLE_OPS:
            results = self.expand_variable_op(s, i, name, op, outs, values, tag)
        elif name == "WHILE" and not evaluate_only:
            results = self.expand_while(s, i, op, values, tag)
        elif name == "IF" and not evaluate_only:
            results = self.expand_if(s, i, op, values, tag)
        else:
            results = self.evaluate(s, name, op, ins, outs, values)
        if results is None:
            if evaluate_only:
                raise self.not_static(s, i, name, ins, values)
            if self.init_depth:
                raise UnsupportedModelError(f"{self.path}: {self.op_label(s, i)} computes a variable's initial value at run time (in CALL_ONCE's init subgraph); edgemem takes initial values only from constants, as TensorFlow's converter writes them. Initialize the tf.Variable with a constant.")
            new_ins = [self.materialize(v, s, t, tag) if t >= 0 else -1 for t, v in zip(ins, values)]
            new_outs = [self.new_tensor(s, t, tag) for t in outs]
            between = [self.new_tensor(s, t, tag) for t in self.tensor_ids(s, op.IntermediatesAsNumpy(), where) if t >= 0]
            if len(self.graph.ops) >= MAX_OPERATORS:
                raise UnsupportedModelError(f"{self.path}: unrolling the model's loops makes more than {MAX_OPERATORS:,} operators; edgemem unrolls WHILE loops and this one is too long for a microcontroller's program. Shorten the sequence.")
            self.graph.ops.append(_NewOp(s, i, new_ins, new_outs, between))
            results = [_Tensor(t) for t in new_outs]
        if len(results) != len(outs):
            raise ModelFileError(f"'{self.path}' is corrupted: {where} has {len(outs)} outputs, its subgraph gives {len(results)}. Re-export the model.")
        env.update(zip(outs, results))

    def evaluate(self, s: int, name: str, op, ins, outs, values) -> list[_Known] | None:
        """The outputs of an integer operator whose inputs are all known, else None (the operator is kept)."""
        if name not in _EVAL and name not in _SHAPED or len(outs) != 1 or outs[0] < 0:
            return None
        out_type = self.sg(s).Tensors(outs[0]).Type()
        args = [v for v in values if v is not None]
        if out_type not in _INTEGRAL or not args or not all(isinstance(v, _Known) and v.value.size for v in args):
            return None
        if name in _WITH_ACTIVATION and self.fused_activation(name, op) != 0:
            return None
        shape = indices(self.sg(s).Tensors(outs[0]).ShapeAsNumpy())
        if name in _SHAPED:
            result = args[0].value
        else:
            if any(self.sg(s).Tensors(t).Type() not in _INTEGRAL for t in ins if t >= 0):
                return None
            with np.errstate(all="ignore"):
                result = _EVAL[name](*[v.value for v in args])
        result = np.asarray(result).astype(_NP[out_type])
        if result.size != int(np.prod(shape, dtype=np.int64)):
            return None
        return [_Known(result.reshape(shape))]

    # ------------------------------------------------------------ resource variables

    def expand_variable_op(self, s: int, i: int, name: str, op, outs, values, tag: str) -> list:
        import tflite

        if name == "CALL_ONCE":
            opts = builtin_options(op, tflite.CallOnceOptions)
            if opts is None:
                raise ModelFileError(f"'{self.path}' is corrupted: {self.op_label(s, i)} has no CallOnceOptions. Re-export the model.")
            init = opts.InitSubgraphIndex()
            if init not in self.called_once:  # TFLM runs it at the first invocation only
                self.called_once.add(init)
                self.init_depth += 1
                self.run(init, {}, f"{tag}/init")
                self.init_depth -= 1
            return []
        if name == "VAR_HANDLE":
            opts = builtin_options(op, tflite.VarHandleOptions)
            if opts is None or not opts.SharedName():
                raise ModelFileError(f"'{self.path}' is corrupted: {self.op_label(s, i)} names no variable (no VarHandleOptions.shared_name). Re-export the model.")
            return [_Resource(self.handle_key(opts))]
        handle = values[0] if values else None
        if not isinstance(handle, _Resource):
            raise UnsupportedModelError(f"{self.path}: {self.op_label(s, i)} does not take a VAR_HANDLE's result as its resource; edgemem follows a variable only from the VAR_HANDLE of the same subgraph, as TensorFlow's converter writes it.")
        if name == "ASSIGN_VARIABLE":
            self.assign(s, i, handle.key, values[1] if len(values) > 1 else None)
            return []
        if len(outs) != 1 or outs[0] < 0:
            raise ModelFileError(f"'{self.path}' is corrupted: {self.op_label(s, i)} has {len(outs)} outputs; READ_VARIABLE has one. Re-export the model.")
        return [self.read(s, i, handle.key, outs[0], tag)]

    def assigned_variables(self) -> set | None:
        """The variables an ASSIGN_VARIABLE outside every CALL_ONCE init subgraph writes, or None if that cannot be
        told (an ASSIGN_VARIABLE whose resource no VAR_HANDLE of its subgraph makes). The others keep their initial
        value for ever: a READ_VARIABLE of one is a constant (e.g. Keras layer weights the converter made variables)."""
        import tflite

        names = {}  # subgraph -> operator names
        inits = set()
        for s in range(self.model.SubgraphsLength()):
            sg = self.sg(s)
            names[s] = [self.op_name(self.model, sg.Operators(i)) for i in range(sg.OperatorsLength())]
            for i, name in enumerate(names[s]):
                opts = builtin_options(sg.Operators(i), tflite.CallOnceOptions) if name == "CALL_ONCE" else None
                if opts is not None:
                    inits.add(opts.InitSubgraphIndex())
        assigned = set()
        for s in set(names) - inits:
            sg = self.sg(s)
            handles = {}
            for i, name in enumerate(names[s]):
                op = sg.Operators(i)
                if name == "VAR_HANDLE" and op.OutputsLength() == 1:
                    opts = builtin_options(op, tflite.VarHandleOptions)
                    if opts is not None and opts.SharedName():
                        handles[int(op.Outputs(0))] = self.handle_key(opts)
                elif name == "ASSIGN_VARIABLE":
                    key = handles.get(int(op.Inputs(0))) if op.InputsLength() else None
                    if key is None:
                        return None
                    assigned.add(key)
        return assigned

    @staticmethod
    def handle_key(opts) -> tuple[str, str]:
        return (opts.Container() or b"").decode(errors="replace"), opts.SharedName().decode(errors="replace")

    def var_label(self, key) -> str:
        return f"variable '{shown(key[1])}'"

    def assign(self, s: int, i: int, key, value) -> None:
        if value is None:
            raise ModelFileError(f"'{self.path}' is corrupted: {self.op_label(s, i)} has no value to assign. Re-export the model.")
        if self.init_depth:
            if not isinstance(value, _Known) or not value.value.size:
                raise UnsupportedModelError(f"{self.path}: {self.op_label(s, i)} gives {self.var_label(key)} an initial value computed at run time; edgemem takes initial values only from constants, as TensorFlow's converter writes them. Initialize the tf.Variable with a constant.")
            self.initial[key] = value.value
            return
        if key not in self.initial:
            raise self.uninitialized(s, i, key)
        origin = self.origin(value)
        init = self.initial[key]
        if origin is None or self.encoding(*origin)[:2] != self.encoding(s, -1, init)[:2]:
            raise UnsupportedModelError(f"{self.path}: {self.op_label(s, i)} assigns {self.var_label(key)} a tensor of another type or size than its initial value ({init.size} of {init.dtype}); edgemem keeps a variable of one type and size. Re-export the model.")
        self.current[key] = value

    def uninitialized(self, s: int, i: int, key) -> UnsupportedModelError:
        return UnsupportedModelError(
            f"{self.path}: {self.op_label(s, i)} uses {self.var_label(key)}, which no CALL_ONCE initializes before it: "
            "TFLM would read a variable nothing wrote (its zero point, or memory never initialized: TensorFlow's converter "
            "leaves the weights of Keras layers inside a tf.Module so, and TFLM then outputs NaN). edgemem keeps a variable "
            "from the initial value a CALL_ONCE init subgraph assigns. Re-export the model so that every variable it reads "
            "is initialized (a tf.Variable of the tf.Module itself, or constant weights)."
        )

    def read(self, s: int, i: int, key, out: int, tag: str):
        if self.init_depth:
            if key not in self.initial:
                raise self.uninitialized(s, i, key)
            return _Known(self.initial[key])
        if key not in self.initial:
            raise self.uninitialized(s, i, key)
        self.check_layout(s, i, key, out)
        if self.assigned is not None and key not in self.assigned:  # never written after CALL_ONCE: a constant
            return _Known(self.initial[key].reshape(indices(self.sg(s).Tensors(out).ShapeAsNumpy())))
        if key in self.current:  # read after an assignment of this invocation: the assigned tensor's bytes
            value = self.current[key]
            self.check_same_encoding(s, i, key, out, value)
            return value
        index = self.new_tensor(s, out, tag)  # the value kept from the last invocation: an extra input
        self.kept_inputs[key] = index
        self.current[key] = _Tensor(index)
        return self.current[key]

    def check_layout(self, s: int, i: int, key, out: int) -> None:
        t = self.sg(s).Tensors(out)
        dtype = _NP.get(t.Type())
        init = self.initial[key]
        count = int(np.prod(indices(t.ShapeAsNumpy()), dtype=np.int64))
        if dtype is None or np.dtype(dtype) != init.dtype or count != init.size:
            raise UnsupportedModelError(f"{self.path}: {self.op_label(s, i)} reads {self.var_label(key)} as {count} elements of TFLite type {t.Type()}, but its initial value has {init.size} of {init.dtype}; edgemem keeps a variable of one type and size. Re-export the model.")

    def origin(self, value) -> tuple[int, int] | None:
        """The file tensor (subgraph, index) whose type, shape and quantization a value has."""
        if isinstance(value, _Tensor):
            src = self.graph.tensors[value.index]
            return src.sg, src.tensor
        return value.source if isinstance(value, _Known) else None

    def encoding(self, s: int, t: int, array: np.ndarray | None = None):
        """(TFLite type, elements, scales, zero points) of tensor ``t`` of subgraph ``s``; of ``array`` when given
        (type and elements only)."""
        if array is not None:
            types = {np.dtype(v): k for k, v in _NP.items()}
            return types.get(array.dtype), int(array.size), (), ()
        tensor = self.sg(s).Tensors(t)
        q = tensor.Quantization()
        scales = tuple(indices(q.ScaleAsNumpy())) if q is not None and q.ScaleLength() else ()
        zeros = tuple(indices(q.ZeroPointAsNumpy())) if q is not None and q.ZeroPointLength() else ()
        return tensor.Type(), int(np.prod(indices(tensor.ShapeAsNumpy()), dtype=np.int64)), scales, zeros

    def check_same_encoding(self, s: int, i: int, key, out: int, value) -> None:
        origin = self.origin(value)
        if origin is None or self.encoding(*origin) != self.encoding(s, out):
            raise UnsupportedModelError(f"{self.path}: {self.op_label(s, i)} reads {self.var_label(key)} after an ASSIGN_VARIABLE of a tensor of another type, size or quantization; TFLM would reinterpret its bytes, which edgemem does not reproduce. Re-export the model.")

    def kept_outputs(self) -> list[tuple[tuple[str, str], object]]:
        """(variable, its last value) of every variable read from the last invocation and assigned since."""
        out = []
        for key in self.kept_inputs:
            value = self.current[key]
            if isinstance(value, _Tensor) and value.index == self.kept_inputs[key]:
                continue  # never assigned: the kept value stays as it is
            if not isinstance(value, _Tensor):
                raise UnsupportedModelError(f"{self.path}: the model assigns {self.var_label(key)} a constant on every invocation after reading it; edgemem keeps variables whose new value is computed. Re-export the model.")
            out.append((key, value))
        return out

    def fused_activation(self, name: str, op) -> int:
        import tflite

        table = op.BuiltinOptions()
        if table is None:
            return 0
        options = {"ADD": tflite.AddOptions, "SUB": tflite.SubOptions, "MUL": tflite.MulOptions}[name]()
        options.Init(table.Bytes, table.Pos)
        return options.FusedActivationFunction()

    def not_static(self, s: int, i: int, name: str, ins, values) -> UnsupportedModelError:
        runtime = [shown(self.sg(s).Tensors(t).Name().decode(errors="replace")) or f"#{t}" for t, v in zip(ins, values) if isinstance(v, _Tensor)]
        why = f"it reads '{runtime[0]}', computed at run time" if runtime else "edgemem cannot evaluate it at build time"
        return UnsupportedModelError(
            f"{self.path}: a WHILE loop's trip count is not known at build time: its condition ({self.sg_label(s)}) "
            f"needs operator #{i} {name}, and {why}. edgemem unrolls WHILE loops whose counters start from constants "
            "and are compared with constants (Keras RNN layers over a fixed sequence length). Re-export the model with "
            "a fixed sequence length, or unroll the layer in Keras (unroll=True)."
        )

    def expand_while(self, s: int, i: int, op, values, tag: str) -> list:
        import tflite

        opts = builtin_options(op, tflite.WhileOptions)
        if opts is None:
            raise ModelFileError(f"'{self.path}' is corrupted: {self.op_label(s, i)} has no WhileOptions. Re-export the model.")
        cond, body = opts.CondSubgraphIndex(), opts.BodySubgraphIndex()
        cond_in = self.tensor_ids(cond, self.sg(cond).InputsAsNumpy(), self.sg_label(cond))
        body_in = self.tensor_ids(body, self.sg(body).InputsAsNumpy(), self.sg_label(body))
        body_out = self.tensor_ids(body, self.sg(body).OutputsAsNumpy(), self.sg_label(body))
        cond_out = self.tensor_ids(cond, self.sg(cond).OutputsAsNumpy(), self.sg_label(cond))
        if not (len(cond_in) == len(body_in) == len(body_out) == len(values)) or len(cond_out) != 1:
            raise ModelFileError(f"'{self.path}' is corrupted: {self.op_label(s, i)} carries {len(values)} values, but its condition takes {len(cond_in)} and its body {len(body_in)} -> {len(body_out)}. Re-export the model.")
        for step in range(MAX_ITERATIONS + 1):
            env = self.run(cond, dict(zip(cond_in, values)), f"{tag}/cond", evaluate_only=True)
            if not bool(np.asarray(env[cond_out[0]].value).reshape(-1)[0]):
                return values
            if step == MAX_ITERATIONS:
                break
            env = self.run(body, dict(zip(body_in, values)), f"{tag}/while{i}_step{step}")
            values = [self.value(body, t, env) for t in body_out]
        raise UnsupportedModelError(f"{self.path}: {self.op_label(s, i)} runs more than {MAX_ITERATIONS} iterations; edgemem unrolls WHILE loops and does not unroll one this long. Shorten the sequence.")

    def expand_if(self, s: int, i: int, op, values, tag: str) -> list:
        import tflite

        opts = builtin_options(op, tflite.IfOptions)
        if opts is None:
            raise ModelFileError(f"'{self.path}' is corrupted: {self.op_label(s, i)} has no IfOptions. Re-export the model.")
        cond = values[0] if values else None
        if not isinstance(cond, _Known) or not cond.value.size:
            raise UnsupportedModelError(f"{self.path}: {self.op_label(s, i)} branches on a value computed at run time; edgemem compiles IF only when its condition is known at build time. Re-export the model without the data-dependent branch.")
        branch = opts.ThenSubgraphIndex() if bool(cond.value.reshape(-1)[0]) else opts.ElseSubgraphIndex()
        b_in = self.tensor_ids(branch, self.sg(branch).InputsAsNumpy(), self.sg_label(branch))
        b_out = self.tensor_ids(branch, self.sg(branch).OutputsAsNumpy(), self.sg_label(branch))
        if len(b_in) != len(values) - 1:
            raise ModelFileError(f"'{self.path}' is corrupted: {self.op_label(s, i)} passes {len(values) - 1} values to {self.sg_label(branch)}, which takes {len(b_in)}. Re-export the model.")
        env = self.run(branch, dict(zip(b_in, values[1:])), f"{tag}/if{i}")
        return [self.value(branch, t, env) for t in b_out]

    def flatten(self) -> tuple[list[int], list[int]]:
        """Expand subgraph 0; returns the unrolled graph's inputs and outputs."""
        main = self.sg(0)
        env: dict = {}
        inputs = []
        for t in self.tensor_ids(0, main.InputsAsNumpy(), "the model's input list"):
            inputs.append(self.new_tensor(0, t, ""))
            env[t] = _Tensor(inputs[-1])
        for t in range(main.TensorsLength()):  # state tensors (LSTM/SVDF) stay one tensor each, as in the file
            if main.Tensors(t).IsVariable() and t not in env:  # with its initial value's buffer, if any
                env[t] = _Tensor(self.new_tensor(0, t, "", main.Tensors(t).Buffer()))
        self.run(0, env, "")
        outputs = [self.materialize(self.value(0, t, env), 0, t, "") for t in self.tensor_ids(0, main.OutputsAsNumpy(), "the model's output list")]
        variables = {key: Variable(key[1], self.initial[key]) for key in self.initial}
        for key, index in self.kept_inputs.items():  # the kept values read and written: after the model's own
            variables[key].input = len(inputs)
            inputs.append(index)
        for key, value in self.kept_outputs():
            variables[key].output = len(outputs)
            outputs.append(value.index)
        self.variables = [v for v in variables.values() if v.input is not None]
        return inputs, outputs


# ------------------------------------------------------------ serialization


def _serialize(model, buf: bytes, graph: _Graph, inputs: list[int], outputs: list[int],
               description: str = "edgemem: control flow unrolled") -> bytes:
    import flatbuffers
    import tflite

    b = flatbuffers.Builder(len(buf) + 64 * (len(graph.tensors) + len(graph.ops)) + 1024)
    b.Prep(16, len(buf))  # the original file, 16-aligned relative to the new file's start, at its end
    b.head -= len(buf)
    b.Bytes[b.head : b.head + len(buf)] = buf
    base = b.Offset()

    def ref(pos: int) -> int:  # a table or vector of the original file, as a builder offset
        return base - pos

    def int_vector(values) -> int:
        b.StartVector(4, len(values), 4)
        for v in reversed(values):
            b.PrependInt32(int(v))
        return b.EndVector()

    def offset_vector(offsets) -> int:
        b.StartVector(4, len(offsets), 4)
        for o in reversed(offsets):
            b.PrependUOffsetTRelative(o)
        return b.EndVector()

    def new_buffer(data: bytes) -> int:
        b.StartVector(1, len(data), 16)
        b.head -= len(data)
        b.Bytes[b.head : b.head + len(data)] = data
        vec = b.EndVector()
        tflite.BufferStart(b)
        tflite.BufferAddData(b, vec)
        return tflite.BufferEnd(b)

    buffers = [ref(model.Buffers(k)._tab.Pos) for k in range(model.BuffersLength())]
    buffers += [new_buffer(data) for data in graph.new_buffers]
    tensors = [_tensor(b, model, t, ref, int_vector) for t in graph.tensors]
    ops = [_operator(b, model, op, ref, int_vector) for op in graph.ops]
    codes = [ref(model.OperatorCodes(k)._tab.Pos) for k in range(model.OperatorCodesLength())]

    t_vec, in_vec, out_vec, op_vec = offset_vector(tensors), int_vector(inputs), int_vector(outputs), offset_vector(ops)
    name = b.CreateString("main")
    tflite.SubGraphStart(b)
    tflite.SubGraphAddTensors(b, t_vec)
    tflite.SubGraphAddInputs(b, in_vec)
    tflite.SubGraphAddOutputs(b, out_vec)
    tflite.SubGraphAddOperators(b, op_vec)
    tflite.SubGraphAddName(b, name)
    subgraph = tflite.SubGraphEnd(b)
    sg_vec, code_vec, buf_vec = offset_vector([subgraph]), offset_vector(codes), offset_vector(buffers)
    description = b.CreateString(description)
    tflite.ModelStart(b)
    tflite.ModelAddVersion(b, model.Version())
    tflite.ModelAddOperatorCodes(b, code_vec)
    tflite.ModelAddSubgraphs(b, sg_vec)
    tflite.ModelAddDescription(b, description)
    tflite.ModelAddBuffers(b, buf_vec)
    b.Finish(tflite.ModelEnd(b), file_identifier=b"TFL3")
    return bytes(b.Output())


def _tensor(b, model, new: _NewTensor, ref, int_vector) -> int:
    import tflite

    t = model.Subgraphs(new.sg).Tensors(new.tensor)
    shape = int_vector(indices(t.ShapeAsNumpy()))
    signature = int_vector(indices(t.ShapeSignatureAsNumpy())) if t.ShapeSignatureLength() else None
    name = b.CreateString(new.name)
    quant = t.Quantization()
    tflite.TensorStart(b)
    tflite.TensorAddShape(b, shape)
    tflite.TensorAddType(b, t.Type() if new.type is None else new.type)
    tflite.TensorAddBuffer(b, new.buffer)
    tflite.TensorAddName(b, name)
    if quant is not None:
        tflite.TensorAddQuantization(b, ref(quant._tab.Pos))
    tflite.TensorAddIsVariable(b, t.IsVariable())
    if signature is not None:
        tflite.TensorAddShapeSignature(b, signature)
    tflite.TensorAddHasRank(b, t.HasRank())
    return tflite.TensorEnd(b)


def _operator(b, model, new: _NewOp, ref, int_vector) -> int:
    import tflite

    op = model.Subgraphs(new.sg).Operators(new.op)
    in_vec, out_vec = int_vector(new.inputs), int_vector(new.outputs)
    between = int_vector(new.intermediates) if new.intermediates else None
    custom = None
    if op.CustomOptionsLength():
        o = op._tab.Offset(14)  # custom_options: a byte vector, referenced where it is (its length word before it)
        custom = ref(op._tab.Vector(o) - 4)
    options, options2 = op.BuiltinOptions(), op.BuiltinOptions2()
    tflite.OperatorStart(b)
    tflite.OperatorAddOpcodeIndex(b, op.OpcodeIndex())
    tflite.OperatorAddInputs(b, in_vec)
    tflite.OperatorAddOutputs(b, out_vec)
    if options is not None:
        tflite.OperatorAddBuiltinOptionsType(b, op.BuiltinOptionsType())
        tflite.OperatorAddBuiltinOptions(b, ref(options.Pos))
    if options2 is not None:
        tflite.OperatorAddBuiltinOptions2Type(b, op.BuiltinOptions2Type())
        tflite.OperatorAddBuiltinOptions2(b, ref(options2.Pos))
    if custom is not None:
        tflite.OperatorAddCustomOptions(b, custom)
        tflite.OperatorAddCustomOptionsFormat(b, op.CustomOptionsFormat())
    if between is not None:
        tflite.OperatorAddIntermediates(b, between)
    return tflite.OperatorEnd(b)


def has_variables(model) -> bool:
    """Subgraph 0 uses resource variables (its operator references are checked already)."""
    from .tflite_import import _op_name

    sg = model.Subgraphs(0)
    return any(_op_name(model, sg.Operators(i)) in _VARIABLE_OPS for i in range(sg.OperatorsLength()))


def flatten_control_flow(model, buf: bytes, path) -> bytes:
    """``buf`` (a model with several subgraphs) as a single-subgraph flatbuffer: subgraph 0 with every WHILE
    and IF expanded (module docstring). Raises UnsupportedModelError for control flow decided at run time."""
    return flatten_with_variables(model, buf, path)[0]


def flatten_with_variables(model, buf: bytes, path) -> tuple[bytes, list[Variable]]:
    """``flatten_control_flow`` of a model with several subgraphs or resource variables, and the variables kept
    across invocations (their kept values are the flatbuffer's last inputs and outputs)."""
    flattener = _Flattener(model, path)
    try:
        inputs, outputs = flattener.flatten()
    except RecursionError as exc:
        raise UnsupportedModelError(f"{path}: its WHILE/IF operators nest too deeply to unroll.") from exc
    return _serialize(model, bytes(buf), flattener.graph, inputs, outputs), flattener.variables
