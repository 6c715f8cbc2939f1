"""What the HTML report draws, recorded at build time as the "memory" section of edgemem.json.

Everything here is read off the build's own objects (operator graph, schedule, planner's buffers and plan),
so the report shows the plan the firmware runs, not a recomputation of it:

- ``tensors``: every arena tensor (its storage), with its planned pool and offset, the steps it is live
  (``first``..``last``, inclusive, as the planner saw them), who makes it and who reads it;
- ``steps``: per step of the chosen order, the operator with its shapes, MACs and weight bytes, the bytes
  live (padded to the arena alignment, as the schedulers and the lower bound count them) and the planned
  high-water mark of each pool (the highest planned byte written so far, as `edgemem profile` measures it);
- ``curves``: the live bytes of every operator order the build's schedulers found (file, reverse post-order,
  hierarchical, exact: ``Schedule.orders``) next to the chosen one; file and reverse post-order are
  recomputed when the schedule does not carry them (cheap);
- ``peak``: the step where the most bytes are live in the chosen order, and what is live there;
- per step, the kernel ``variant`` (from the PrimFunc: its builder spec ``edgemem.spec``, fast or reference,
  in place over which input, a fused epilogue) and its ``scratch_bytes`` (the local arrays the generated C
  declares on the stack: codegen/kernels_c.py's ``scratch_bytes``, issue 19).
"""

from __future__ import annotations

import dataclasses
import re

from ..board import Board
from ..ir.graph import OpGraph
from ..plan import ArenaPlan, Buffer
from ..schedule import Schedule
from ..schedule.dag import Dag
from ..schedule.liveness import live_bytes, live_ranges


def _tensor_role(graph: OpGraph, name: str) -> str:
    t = graph.tensors[name]
    if t.kind == "input":
        return "input"
    if t.producer is not None and graph.ops[t.producer].workspace == name:
        return "workspace"
    if any(graph.storage_of(o).name == name for o in graph.outputs):
        return "output"
    return "activation"


def _other_curves(graph: OpGraph, schedule: Schedule, align: int) -> dict[str, list[int]]:
    """Live bytes per step of each scheduler's order: those the schedule carries (the build's schedulers,
    hierarchical and exact included), else the file order and reverse post-order, cheap to redo here."""
    from ..schedule import rpo
    from ..schedule.exact import file_or_topo

    n = len(graph.ops)
    curves = {}
    orders = dict(schedule.orders)
    if "file" not in orders or "rpo" not in orders:
        try:
            dag = Dag.from_graph(graph, align)
            orders = {"file": file_or_topo(dag), "rpo": rpo.rpo_order(dag), **orders}
        except Exception:  # noqa: BLE001 - the other curves are a comparison only; the build does not depend on them
            pass
    for name, order in orders.items():
        if sorted(order) == list(range(n)):
            curves[name] = live_bytes(live_ranges(graph, order), n, align)
    return curves


def _blockless(prim) -> bool:
    """A hand-written kernel (kernels/int8_ops.*_fast are TIR without blocks); te.compute kernels have blocks."""
    import tvm
    import tvm_ffi

    blocks = []
    tvm_ffi.structural_walk(prim.body, (tvm.s_tir.stmt.SBlock, lambda b: blocks.append(b)))
    return not blocks


def kernel_variant(graph: OpGraph, op) -> dict:
    """Which kernel an operator runs, as its PrimFunc records it: the builder (kernels/int8_ops.py, conv16.py)
    and whether it is the fast (folded-bias, hand-written) or the reference one, the input it writes over (in
    place), the element-wise operators fused into its stores (passes/residual.py: ``CONV_2D+ADD``), and the
    in-place depthwise's row delay. ``label``: the same in a few words, for the report's table."""
    from ..kernels import kernel_attrs

    spec = kernel_attrs.spec(op.prim)
    kinds = op.kind.split("+")
    builder = spec.builder if spec is not None else None
    fast = None  # only the convolutions and FULLY_CONNECTED have two variants
    if kinds[0] in ("CONV_2D", "DEPTHWISE_CONV_2D", "FULLY_CONNECTED"):
        # fused kernels drop the spec and FULLY_CONNECTED's fast kernel has none: then the TIR's form tells
        fast = bool(getattr(spec, "folded", False)) if spec is not None else _blockless(op.prim)
    in_place = None
    mark = kernel_attrs.inplace(op.prim)
    if mark is not None:
        in_place = op.inputs[mark.index] if mark.index < len(op.inputs) else None
    elif op.writes_input is not None:
        in_place = op.inputs[op.writes_input]
    overlap = dataclasses.asdict(mark.overlap) if mark is not None and mark.overlap is not None else None
    variant = {"builder": builder, "fast": fast, "in_place_over": in_place, "fused": kinds[1:],
               "delay": getattr(spec, "delay", None), "overlap": overlap}  # overlap: partial liveness' order and shift
    label = builder or kinds[0].lower()
    if fast is not None:
        label += ", fast" if fast else ", reference"
    if variant["fused"]:
        label += " + " + " + ".join(variant["fused"]) + " in its stores"
    if in_place is not None and overlap is not None:  # passes/overlap.py: over the rows no later pixel reads
        label += f", over {graph.storage_of(in_place).name}'s consumed rows at {overlap['shift']:+d} B ({overlap['order']})"
    elif in_place is not None:
        label += f", in place over {graph.storage_of(in_place).name}"
    if variant["delay"]:
        label += f", {variant['delay']}-row delay"
    variant["label"] = label
    return variant


def model_names(graph: OpGraph, model) -> dict[str, str]:
    """Graph tensor name -> the model file's own name, for the model's inputs and outputs (the importer renames every
    tensor t<i> so that TVM never meets duplicate or hostile names); a file name shared by several of them, or equal
    to another graph tensor's name, is told apart by its index."""
    pairs = list(zip(graph.inputs, model.inputs)) + list(zip(graph.outputs, model.outputs))
    counts: dict[str, int] = {}
    for _, info in pairs:
        counts[info.name] = counts.get(info.name, 0) + 1
    names = {}
    for k, (ours, info) in enumerate(pairs):
        unique = counts[info.name] == 1 and (info.name not in graph.tensors or info.name == ours)
        names[ours] = info.name if unique and info.name else f"{info.name or 'tensor'} (#{k})"
    return names


def memory_info(graph: OpGraph, schedule: Schedule, buffers: list[Buffer], plan: ArenaPlan, board: Board,
                ram_budget: int, scratch: dict[str, int] | None = None, names: dict[str, str] | None = None) -> dict:  # fmt: skip
    """The "memory" section of edgemem.json (see the module doc); ``scratch``: the stack bytes each kernel's
    generated C declares, by kernel name (codegen's ``CKernels.scratch_bytes``; 0 where not given); ``names``: graph
    tensor name -> the name to show (model_names)."""
    return _renamed(_memory_info(graph, schedule, buffers, plan, board, ram_budget, scratch), names or {})


def _renamed(memory: dict, names: dict[str, str]) -> dict:
    """Every tensor name of the memory section through ``names`` (consistently: the report matches names)."""
    if not names:
        return memory
    n = lambda name: names.get(name, name) if isinstance(name, str) else name
    for t in memory["tensors"]:
        t["name"], t["alias"], t["views"] = n(t["name"]), n(t["alias"]), [n(v) for v in t["views"]]
    memory["peak"]["tensors"] = [n(x) for x in memory["peak"]["tensors"]]
    for step in memory["steps"]:
        for io in step["inputs"]:
            io["name"] = n(io["name"])
        step["output"]["name"] = n(step["output"]["name"])
        if step.get("variant", {}).get("label"):  # "in place over t<i>" -> the model's name
            step["variant"]["label"] = re.sub(r"(?<=over )(t\d+)(?![\w.])", lambda m: n(m.group(1)), step["variant"]["label"])
    return memory


def _memory_info(graph: OpGraph, schedule: Schedule, buffers: list[Buffer], plan: ArenaPlan, board: Board,
                 ram_budget: int, scratch: dict[str, int] | None = None) -> dict:  # fmt: skip
    scratch = scratch or {}
    order = list(schedule.order)
    n = len(order)
    align = board.arena_align
    step_of = {op: s for s, op in enumerate(order)}
    pools = list(plan.pool_sizes)
    curve = live_bytes(live_ranges(graph, order), n, align) if n else []
    peak_step = max(range(len(curve)), key=lambda s: (curve[s], -s)) if curve else 0

    views: dict[str, list[str]] = {}  # storage -> the other names of its bytes (reshapes, in-place results)
    for v in graph.tensors.values():
        if v.storage != v.name and v.kind != "const":
            views.setdefault(v.storage, []).append(v.name)
    tensors = []
    for b in buffers:
        t = graph.tensors[b.name]
        place = plan.placements[b.name]
        tensors.append({
            "name": b.name, "role": _tensor_role(graph, b.name), "shape": list(t.shape), "dtype": t.dtype,
            "bytes": b.size, "pool": place.pool, "offset": place.offset, "first": b.first, "last": b.last,
            "producer": step_of.get(t.producer) if t.producer is not None else None,
            "consumers": sorted(step_of[c] for c in t.consumers if c in step_of),
            "alias": b.alias, "views": views.get(b.name, []),
        })  # fmt: skip

    steps = []
    for s, op_index in enumerate(order):
        op = graph.ops[op_index]
        ins = [graph.tensors[i] for i in op.inputs]
        hw = dict.fromkeys(pools, 0)
        for t in tensors:
            if t["first"] <= s:
                hw[t["pool"]] = max(hw[t["pool"]], t["offset"] + t["bytes"])
        out = graph.tensors[op.output]
        steps.append({
            "step": s, "op_index": op_index, "op": op.name, "kind": op.kind,
            "inputs": [{"name": t.name, "shape": list(t.shape), "dtype": t.dtype} for t in ins if t.kind in ("input", "activation")],
            "output": {"name": out.name, "shape": list(out.shape), "dtype": out.dtype},
            "in_place": op.writes_input is not None or out.alias_of is not None,
            "macs": int(op.macs),
            "weights_bytes": sum(t.nbytes for t in ins if t.kind == "const"),
            "state_bytes": sum(t.nbytes for t in ins if t.kind == "state"),
            "workspace_bytes": graph.tensors[op.workspace].nbytes if op.workspace else 0,
            "variant": kernel_variant(graph, op),
            "scratch_bytes": int(scratch.get(op.name, 0)),
            "live_bytes": curve[s],
            "high_water_bytes": [hw[p] for p in pools],
        })  # fmt: skip

    curves = _other_curves(graph, schedule, align)
    curves[schedule.scheduler] = curve  # the chosen order's (file or rpo when one of those won)
    return {
        "align": align,
        "ram_budget_bytes": ram_budget,
        "pools": pools,
        "order": order,
        "live_bytes": curve,
        "curves": curves,
        "peak": {"step": peak_step, "bytes": curve[peak_step] if curve else 0,
                 "tensors": [t["name"] for t in tensors if t["first"] <= peak_step <= t["last"]]},  # fmt: skip
        "tensors": tensors,
        "steps": steps,
        "macs": sum(int(op.macs) for op in graph.ops),
    }
