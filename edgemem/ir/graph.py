"""The operator graph read out of a lowered Relax module: the one data model the later stages share.

After the passes, ``main`` is a dataflow block of ``call_tir`` bindings (one kernel each), plus
reshapes and plain variable bindings, which are *views*: they share the storage of their source
and cost no RAM. Constants (weights, biases, multipliers) live in flash.

A kernel marked in place (kernels/kernel_attrs.py: ``inplace`` = k) may write its output over its
k-th argument, which dies there: the output names that storage as its ``alias_of`` and the planner
tries to give both the same offset (the kernel is correct either way). One with ``workspace``
= bytes takes a last pointer argument to that much scratch RAM, a tensor live during its step only.
One with ``state`` = (i, j, ...) reads and updates those arguments across invocations (an LSTM's
hidden and cell state): they are *state* tensors, kept outside the arena (static RAM), their constant
value in the module being the value ``edgemem_reset()`` restores.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import tvm
from tvm import relax

from ..errors import UnsupportedModelError
from ..kernels import kernel_attrs
from ..timelimit import check
from .kept import per_object


@dataclass
class Tensor:
    """A value of the graph. ``storage`` names the tensor whose RAM it uses (itself unless a view)."""

    name: str
    shape: tuple[int, ...]
    dtype: str
    kind: str  # "input" | "activation" | "const" | "state"
    storage: str = ""
    producer: int | None = None  # op index
    consumers: list[int] = field(default_factory=list)
    value: np.ndarray | None = None  # constants; for state tensors, the reset value
    alias_of: str | None = None  # in-place output: the dying storage it may be written over
    alias_shift: int = 0  # its offset from alias_of's start (partial liveness, passes/overlap.py); 0: the same

    @property
    def nbytes(self) -> int:
        return int(np.prod(self.shape, dtype=np.int64)) * np.dtype(self.dtype).itemsize

    @property
    def is_const(self) -> bool:
        return self.kind == "const"


@dataclass
class Op:
    """One kernel call: ``kernel(inputs..., output)``."""

    name: str  # C symbol of the kernel
    kind: str  # the TFLite operator it implements (CONV_2D, ...) or the fused Relax name
    inputs: list[str]
    output: str
    prim: object  # tvm.tirx.PrimFunc
    macs: int = 0
    workspace: str | None = None  # scratch tensor passed after the output (live at this step only)
    writes_input: int | None = None  # call_tir_inplace: the argument it writes (no output pointer)

    def args(self) -> list[str]:
        """The tensors passed to the kernel, in order."""
        out = [] if self.writes_input is not None else [self.output]
        return [*self.inputs, *out] + ([self.workspace] if self.workspace else [])


@dataclass
class OpGraph:
    ops: list[Op]
    tensors: dict[str, Tensor]
    inputs: list[str]
    outputs: list[str]

    def storage_of(self, name: str) -> Tensor:
        return self.tensors[self.tensors[name].storage]

    def activations(self) -> list[Tensor]:
        """Tensors that own arena RAM (inputs and kernel outputs; views and state excluded)."""
        return [t for t in self.tensors.values() if t.kind in ("input", "activation") and t.storage == t.name]

    def states(self) -> list[Tensor]:
        """Tensors kernels keep across invocations (static RAM, not the arena)."""
        return [t for t in self.tensors.values() if t.kind == "state"]

    def constants(self) -> list[Tensor]:
        return [t for t in self.tensors.values() if t.is_const]


def _shape(ty) -> tuple[int, ...]:
    dims = []
    for d in ty.shape.values:
        if not isinstance(d, tvm.tirx.IntImm):
            raise UnsupportedModelError(f"tensor shape {ty.shape} is symbolic; edgemem plans static shapes here.")
        dims.append(int(d))
    return tuple(dims)


class _Reader:
    def __init__(self, mod: tvm.IRModule):
        self.mod = mod
        self.func = mod["main"]
        self.tensors: dict[str, Tensor] = {}
        self.names: dict = {}  # relax expr -> tensor name
        self.consts: dict = {}  # address of the Constant node (alive in the module) -> tensor name
        self.ops: list[Op] = []
        self.tuple_results: dict = {}  # tuple-valued kernel call var -> tensor names of its fields
        self.tuple_values: dict = {}  # var bound to a tuple of tensors (a float model's outputs) -> their names

    def _name_var(self, var) -> str:
        base = var.name or "t"
        name, k = base, 1
        while name in self.tensors:
            k += 1
            name = f"{base}_{k}"
        self.names[var] = name
        return name

    def _operand(self, expr) -> str:
        if isinstance(expr, relax.Var):
            if expr not in self.names:
                raise UnsupportedModelError(f"Relax value '{expr.name}' is used before it is defined.")
            return self.names[expr]
        if isinstance(expr, tvm.ir.Constant):
            handle = expr.__chandle__()
            if handle in self.consts:  # the same Constant node used twice is one array
                return self.consts[handle]
            value = _constant_value(expr)
            name = f"c{len(self.consts)}"
            self.tensors[name] = Tensor(name, tuple(value.shape), str(value.dtype), "const", name, value=value)
            self.consts[handle] = name
            return name
        raise UnsupportedModelError(f"kernel argument {type(expr).__name__} is not a tensor or constant.")

    def read(self) -> OpGraph:
        inputs = []
        for p in self.func.params:
            name = self._name_var(p)
            self.tensors[name] = Tensor(name, _shape(p.ty), str(p.ty.dtype), "input", name)
            inputs.append(name)
        for block in self.func.body.blocks:
            for b in block.bindings:
                check()  # under the pass search's deadline (edgemem/timelimit.py); none in a build's own stages
                self._binding(b.var, b.value)
        body = self.func.body.body
        if isinstance(body, relax.Var) and body in self.tuple_values:  # gv = (a, b): a float model's outputs
            return OpGraph(self.ops, self.tensors, inputs, list(self.tuple_values[body]))
        outs = body.fields if isinstance(body, relax.Tuple) else [body]
        outputs = [self._operand(o) for o in outs]
        return OpGraph(self.ops, self.tensors, inputs, outputs)

    def _binding(self, var, value):
        if isinstance(value, relax.Var):  # gv = lv: another name for the same value
            self.names[var] = self._operand(value)
            return
        if isinstance(value, relax.TupleGetItem) and value.tuple_value in self.tuple_results:
            self.names[var] = self.tuple_results[value.tuple_value][int(value.index)]
            return
        if isinstance(value, relax.Tuple) and all(isinstance(f, (relax.Var, tvm.ir.Constant)) for f in value.fields):
            self.tuple_values[var] = [self._operand(f) for f in value.fields]  # the outputs' tuple (float path)
            return
        if not isinstance(value, relax.Call):
            raise UnsupportedModelError(f"Relax binding '{var.name}' ({type(value).__name__}) is not a kernel call.")
        op_name = getattr(value.op, "name", "")
        if op_name in ("relax.reshape", "relax.squeeze", "relax.expand_dims"):
            src = self._operand(value.args[0])
            name = self._name_var(var)
            self.tensors[name] = Tensor(name, _shape(var.ty), str(var.ty.dtype), "activation", self.tensors[src].storage)
            self.tensors[name].producer = self.tensors[src].producer
            return
        if op_name not in ("relax.call_tir", "relax.call_tir_inplace"):
            raise UnsupportedModelError(f"Relax binding '{var.name}' calls '{op_name}', which has no kernel; lower it first.")
        gv, args = value.args[0], value.args[1]
        prim = self.mod[gv]
        fields = args.fields if isinstance(args, relax.Tuple) else [args]
        ins = [self._operand(a) for a in fields]
        workspace_bytes = kernel_attrs.workspace(prim)
        ty = var.ty
        if isinstance(ty, relax.TupleType):  # (output, workspace): only kernels with a workspace return two
            if workspace_bytes is None or len(ty.fields) != 2:
                raise UnsupportedModelError(f"kernel call '{var.name}' returns a tuple edgemem cannot plan.")
            ty = ty.fields[0]
        for i in kernel_attrs.state(prim):
            if self.tensors[ins[i]].kind != "const":
                raise UnsupportedModelError(f"kernel call '{var.name}': its state argument {i} is not a constant initial value.")
            self.tensors[ins[i]].kind = "state"
        name = self._name_var(var)
        writes = self._written_argument(var, value, ins, ty)
        inplace = kernel_attrs.inplace(prim)
        alias = self.tensors[ins[inplace.index]].storage if inplace is not None else None
        storage = name if writes is None else self.tensors[ins[writes]].storage
        shift = inplace.shift if inplace is not None else 0
        self.tensors[name] = Tensor(name, _shape(ty), str(ty.dtype), "activation", storage,
                                    producer=len(self.ops), alias_of=alias, alias_shift=shift)  # fmt: skip
        kind = kernel_attrs.op(prim) or gv.name_hint
        macs = kernel_attrs.macs(prim)
        for i in ins:
            self._use(i, len(self.ops))
        workspace = None
        if workspace_bytes is not None:
            workspace = f"{name}__workspace"
            self.tensors[workspace] = Tensor(workspace, (workspace_bytes,), "int8", "activation",
                                             workspace, producer=len(self.ops))  # fmt: skip
        if isinstance(var.ty, relax.TupleType):
            self.tuple_results[var] = [name, workspace]
        self.ops.append(Op(f"em_k_{gv.name_hint}", kind, ins, name, prim, macs, workspace, writes))

    def _written_argument(self, var, call, ins: list[str], ty) -> int | None:
        """For call_tir_inplace, the index of the one argument the kernel writes (its result's storage)."""
        if call.op.name != "relax.call_tir_inplace":
            return None
        indices = [int(i) for i in call.attrs.inplace_indices]
        if len(indices) != 1 or isinstance(var.ty, relax.TupleType):
            raise UnsupportedModelError(f"kernel call '{var.name}' writes in place into {len(indices)} arguments; edgemem plans one.")
        arg = self.tensors[ins[indices[0]]]
        if arg.kind not in ("activation", "input") or arg.nbytes != int(np.prod(_shape(ty), dtype=np.int64)) * np.dtype(str(ty.dtype)).itemsize:
            raise UnsupportedModelError(f"kernel call '{var.name}' writes in place into '{arg.name}', which is not an activation of its size.")
        return indices[0]

    def _use(self, name: str, op_index: int):
        _use(self.tensors, name, op_index)


def _use(tensors: dict, name: str, op_index: int) -> None:
    """``op_index`` reads ``name``: a consumer of the tensor and of the storage it is a view of."""
    t = tensors[name]
    if op_index not in t.consumers:
        t.consumers.append(op_index)
    if t.storage != name:
        _use(tensors, t.storage, op_index)


_CONSTANT_VALUES: dict = {}  # (ir/kept.py)


def _constant_value(const) -> np.ndarray:
    """A Constant's array, read-only and copied out of TVM once: the orchestrator reads hundreds of modules
    sharing the same weight nodes (mcunetv2_large: 300 weight arrays per read)."""
    return per_object(_CONSTANT_VALUES, const, _read_only_copy)


def _read_only_copy(const) -> np.ndarray:
    value = const.value.numpy()
    value.flags.writeable = False  # shared by every graph read from a module holding this Constant
    return value


def read_graph(mod: tvm.IRModule) -> OpGraph:
    """The OpGraph of ``mod["main"]`` (kernels in binding order)."""
    return _Reader(mod).read()


def linked(ops: list[Op], tensors: dict, inputs, outputs) -> OpGraph:
    """An OpGraph of ``ops`` over ``tensors`` (fresh copies, without producer/consumer links), linked by the
    reader's rules: an op produces its output and workspace and consumes its inputs and their storages; a
    view's producer is its storage's. For graphs a pass derives without building kernels (patch scoring)."""
    for i, op in enumerate(ops):
        tensors[op.output].producer = i
        if op.workspace:
            tensors[op.workspace].producer = i
        for x in op.inputs:
            _use(tensors, x, i)
    for n, t in tensors.items():
        if t.storage != n:
            t.producer = tensors[t.storage].producer
    return OpGraph(ops, tensors, list(inputs), list(outputs))
