"""The generated C project of one model: kernels.c/.h (TVM), model.c/.h and weights.c/.h (jinja2).

Inputs: the OpGraph, the schedule's op order, the arena plan (pool and offset per storage tensor)
and the plain-C kernels. Everything is static: pools are byte arrays in linker sections named after
their pool, each kernel call passes pointers at planned offsets, weights are const arrays.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

import numpy as np

from .. import __version__
from ..ir.graph import OpGraph
from ..ir.outside import EXTERNAL
from ..kernels import kernel_attrs
from .escape import c_identifier
from .kernels_c import CKernels, prim_funcs_to_c
from .templates import render

_CTYPES = {"int8": "int8_t", "uint8": "uint8_t", "int16": "int16_t", "int32": "int32_t", "int64": "int64_t",
           "uint32": "uint32_t", "uint64": "uint64_t",
           "float32": "float", "bool": "uint8_t"}  # bool: one byte 0/1 as TFLite stores it; passed to kernels cast to bool *


@dataclass(frozen=True)
class PoolLayout:
    name: str  # "arena" or a board RAM region's name: a C identifier (em_pool_<name>, section .edgemem_arena.<name>)
    size: int
    align: int = 16

    def __post_init__(self):
        c_identifier(self.name)


def external_offsets(pools: list[PoolLayout]) -> tuple[list[int], int]:
    """Where each pool sits in one caller-provided buffer (edgemem_set_arena: pools back to back, each at its
    alignment), and the bytes that buffer needs."""
    offsets, end = [], 0
    for p in pools:
        end = -(-end // p.align) * p.align
        offsets.append(end)
        end += p.size
    return offsets, end


def compile_kernels(graph: OpGraph) -> CKernels:
    """Every op's PrimFunc through TVM's C generator; constants are read-only parameters."""
    funcs, consts = {}, {}
    for op in graph.ops:
        funcs[op.name] = op.prim
        consts[op.name] = {i for i, t in enumerate(op.inputs) if graph.tensors[t].is_const}
        for name, sub in kernel_attrs.subkernels(op.prim).items():  # kernels it calls (a rolling patch stage)
            funcs[name] = sub
            consts[name] = set(range(len(sub.params) - 1))  # out of place: every parameter but the output is read only
    # Every kernel must compute into registers: large scratch would be RAM the plan does not see.
    return prim_funcs_to_c(funcs, consts, scratch="error", max_stack_bytes=1024)


# graph.py names every constant (weights, an LSTM's state) c<index>: C symbols come from that index, never from
# a name the model gave
_CONSTANT_NAME = re.compile(r"c[0-9]+", re.ASCII)


def _constant_id(name: str) -> str:
    if not _CONSTANT_NAME.fullmatch(name):
        raise ValueError(f"constant {name!r} is not named c<index> by edgemem; its C symbol would not be edgemem's")
    return name


def _weight_symbol(name: str) -> str:
    return f"em_w_{_constant_id(name)}"


def _c_values(arr: np.ndarray) -> str:
    flat = arr.reshape(-1)
    if flat.dtype == np.bool_:
        flat = flat.astype(np.uint8)
    if flat.dtype == np.float32:
        items = [float(v).hex() + "f" for v in flat.tolist()]  # hex floats: exact, no rounding
    elif flat.dtype == np.int64:  # e.g. an int32 operand widened by TVM's legalization, folded to a constant
        items = ["(-INT64_MAX - 1)" if v == -(2**63) else f"INT64_C({v})" for v in flat.tolist()]
    else:
        items = [str(v) for v in flat.tolist()]
    rows = [", ".join(items[i : i + 24]) for i in range(0, len(items), 24)]
    return "    " + ",\n    ".join(rows)


def _weights(graph: OpGraph) -> list[dict]:
    out = []
    for t in graph.constants():
        ctype = _CTYPES.get(t.dtype)
        if ctype is None:
            raise ValueError(f"constant {t.name} has dtype {t.dtype}, which has no C type here")
        out.append({
            "symbol": _weight_symbol(t.name), "ctype": ctype, "count": max(int(t.value.size), 1),
            "comment": f"{t.dtype}[{', '.join(map(str, t.shape))}]", "body": _c_values(t.value),
        })  # fmt: skip
    return out


def _state_symbol(name: str) -> str:
    return f"em_state_{_constant_id(name)}"


def _states(graph: OpGraph) -> list[dict]:
    """State tensors (an LSTM's hidden/cell): a static array each, and its reset value in flash."""
    return [
        {"symbol": _state_symbol(t.name), "ctype": _CTYPES[t.dtype], "count": max(int(t.value.size), 1),
         "comment": f"{t.dtype}[{', '.join(map(str, t.shape))}]", "body": _c_values(t.value)}
        for t in graph.states()
    ]  # fmt: skip


def _variables(graph: OpGraph, placements: dict, variables) -> list[dict]:
    """Resource variables (frontend/control_flow.py): a static array each with its initial value, and where in
    the arena a run reads the kept value (an extra graph input) and leaves the new one (an extra output)."""
    out = []
    for k, v in enumerate(variables):
        value = np.ascontiguousarray(v.initial)
        entry = {"symbol": f"em_var_{k}", "ctype": _CTYPES[str(value.dtype)], "count": max(int(value.size), 1),
                 "nbytes": int(value.nbytes), "comment": f"{value.dtype}[{', '.join(map(str, value.shape))}]",
                 "body": _c_values(value), "read": None, "write": None}  # fmt: skip
        for key, names, index in (("read", graph.inputs, v.input), ("write", graph.outputs, v.output)):
            if index is None:
                continue
            t = graph.tensors[names[index]]
            if t.nbytes != value.nbytes:
                raise ValueError(f"variable {k}: its graph tensor has {t.nbytes} bytes, its value {value.nbytes}")
            place = placements.get(t.storage)  # None: read by no kernel (nothing to copy in)
            entry[key] = None if place is None else {"pool": place[0], "offset": place[1]}
        out.append(entry)
    return out


def _pointer(graph: OpGraph, placements: dict, name: str, ctype: str, const: bool) -> str:
    t = graph.tensors[name]
    if t.is_const:
        return f"(const {ctype} *){_weight_symbol(name)}" if t.dtype == "bool" else _weight_symbol(name)
    if t.kind == "state":
        return _state_symbol(name)
    if graph.tensors[t.storage].kind == EXTERNAL:  # --input outside: the caller's buffer, read in place
        return f"({ctype} *)(uintptr_t)em_inputs[{graph.inputs.index(t.storage)}u]"
    pool, offset = placements[t.storage]
    qual = "const " if const else ""
    return f"({qual}{ctype} *)&em_pool_{pool}[{offset}u]"


def _op_calls(graph: OpGraph, order: list[int], placements: dict, kernels: CKernels) -> list[dict]:
    calls = []
    for idx in order:
        op = graph.ops[idx]
        ctypes = kernels.param_ctypes[op.name]
        consts = set(kernels.const_params[op.name])
        names = op.args()
        args = [_pointer(graph, placements, n, ctypes[i], i in consts) for i, n in enumerate(names)]
        pool, offset = placements[graph.tensors[op.output].storage]
        calls.append({
            "name": op.name, "kind": op.kind, "output": op.output, "args": args,
            "out_bytes": graph.tensors[op.output].nbytes, "out_pool": pool, "out_offset": offset,
        })  # fmt: skip
    return calls


def _io(graph: OpGraph, placements: dict, names: list[str], infos: list) -> list[dict]:
    out = []
    for name, info in zip(names, infos):
        t = graph.tensors[name]
        pool, offset = placements.get(t.storage, (None, None))  # None: an input outside the arena
        scale = getattr(info, "scale", None)
        out.append({
            "name": info.name, "dtype": t.dtype, "shape": t.shape, "nbytes": t.nbytes, "pool": pool,
            "offset": offset, "scale": scale, "zero_point": getattr(info, "zero_point", None),
            "scale_literal": None if scale is None else f"{float(np.float32(scale))!r}f",
        })  # fmt: skip
    return out


def render_model(
    *, model_name: str, board, graph: OpGraph, order: list[int], placements: dict[str, tuple[str, int]],
    pools: list[PoolLayout], lower_bound: int, scheduler: str, algorithm: str, kernels: CKernels,
    input_infos: list, output_infos: list, variables=(),
) -> dict[str, str]:
    """File name -> text of the generated model sources."""
    common = {"model_name": model_name, "board": board, "version": __version__}
    weights = _weights(graph)
    offsets, external_bytes = external_offsets(pools)
    ctx = dict(
        common,
        pools=pools,
        pool_offsets=offsets,
        external_bytes=external_bytes,
        arena_align=max((p.align for p in pools), default=16),
        arena_bytes=sum(p.size for p in pools),
        lower_bound=lower_bound,
        scheduler=scheduler,
        algorithm=algorithm,
        inputs=_io(graph, placements, graph.inputs, input_infos),
        outputs=_io(graph, placements, graph.outputs, output_infos),
        ops=_op_calls(graph, order, placements, kernels),
        states=_states(graph),
        variables=_variables(graph, placements, variables),
        input_outside=any(graph.tensors[n].kind == EXTERNAL for n in graph.inputs),
        outside_bytes=sum(graph.tensors[n].nbytes for n in graph.inputs if graph.tensors[n].kind == EXTERNAL),
    )
    align = ctx["arena_align"]  # the harness's input buffers are rows of this many bytes, each aligned
    ctx["input_max_bytes"] = max((-(-graph.tensors[n].nbytes // align) * align for n in graph.inputs[: len(input_infos)]), default=align)
    return {
        "model.h": render("model.h.j2", **ctx),
        "model.c": render("model.c.j2", **ctx),
        "weights.h": render("weights.h.j2", weights=weights, **common),
        "weights.c": render("weights.c.j2", weights=weights, **common),
        "kernels.h": kernels.header,
        "kernels.c": kernels.source,
    }


def render_profile_inputs(model_name: str, inputs: list[np.ndarray], seed: int) -> str:
    """profile_inputs.c: a profiling build's inputs as const bytes in flash."""
    items = [
        {"nbytes": max(x.nbytes, 1), "body": _c_values(np.frombuffer(x.tobytes() or b"\0", dtype=np.uint8))}
        for x in inputs
    ]
    return render("profile_inputs.c.j2", model_name=model_name, inputs=items, seed=seed, version=__version__)

