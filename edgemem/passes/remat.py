"""Rematerialization: recompute a cheap tensor instead of keeping it alive across a long skip (issue 20).

A U-Net keeps its encoder's tensors alive until the decoder reads them again. When such a tensor is the
output of a cheap operator (pooling, element-wise, PAD, nearest-neighbour resize) whose inputs are alive
at the late reader anyway, or smaller, the late readers can read a *copy* computed again just before
them: the original dies after its early readers, and the copy is born late. That lowers the peak only
when the tensor is live, unread, at a peak step; elsewhere it only adds work.

The decision is made on the operator DAG (``schedule.dag.Dag``, the storage model's evaluator) and is
independent of Relax, so it is also tested on the random graphs of ``tests/random_graphs.py``:

- candidates: a cheap op ``v`` and a split of its readers (in the current best order) such that some
  peak step lies strictly between the last early reader and the first late one (``candidates``);
- each candidate's DAG (``with_copy``: a new op with ``v``'s inputs and size, the late readers reading
  it) is scheduled again by a deterministic evaluator (file order, RPO and the exact scheduler with a
  state budget, no clock: ``evaluate``);
- the best strictly lower peak is taken, and the search repeats on the new DAG (``choose``); a
  candidate that does not lower the peak is never taken, so the pass never raises it (by that
  evaluator; tests/test_remat.py checks it on random graphs with the storage model itself).

``remat`` applies the choices to the lowered Relax module: the copy is a call of a duplicate of the
same kernel (its own C symbol, so EliminateCommonSubexpr does not merge it back), emitted before the
first late reader; the outputs are bit for bit the same, since the kernel is the same function of the
same inputs. MACs grow by the copy's (reported by the kernel's ``macs`` attribute).
"""

from __future__ import annotations

from dataclasses import dataclass

import tvm
from tvm import relax

from ..kernels import kernel_attrs
from ..schedule import exact
from ..schedule.dag import Dag
from ..schedule.exact import file_or_topo
from ..schedule.rpo import rpo_order
from .rewrite import Bindings, _rename, add_kernel, kernel_vars, rebuild

# Cheap to recompute: a few operations per output element, no weights to speak of.
CHEAP = frozenset({
    "MAX_POOL_2D", "AVERAGE_POOL_2D", "PAD", "PADV2", "RESIZE_NEAREST_NEIGHBOR",
    "ADD", "SUB", "MUL", "MAXIMUM", "MINIMUM", "QUANTIZE", "DEQUANTIZE",
    "RELU", "RELU6", "RELU_N1_TO_1", "LEAKY_RELU", "HARD_SWISH", "ABS", "NEG",
})  # fmt: skip
# Kernels whose output has other rules (a workspace, state: kernel_attrs) are not copied. An in-place kernel is
# copied only where its alias is an input outside the arena (the graph then has no overlap to account for): the
# kernel is correct at any offset.

EXACT_STATES = 20_000  # the evaluator's state budget per schedule (deterministic: no time limit)
MAX_ROUNDS = 8  # copies taken at most
MAX_EVALUATIONS = 48  # candidate schedules tried at most


@dataclass(frozen=True)
class Remat:
    """Recompute op ``op``'s output for the readers ``late`` (op indices of the DAG it was found on)."""

    op: int
    late: tuple[int, ...]


def evaluate(dag: Dag) -> tuple[int, list[int]]:
    """(peak, order): the lowest of the file order, RPO and the exact scheduler under a state budget."""
    best = min((file_or_topo(dag), rpo_order(dag)), key=dag.peak)
    order, peak, _ = exact.schedule(dag, time_limit=None, max_states=EXACT_STATES, incumbent=best)
    return (peak, order) if peak <= dag.peak(best) else (dag.peak(best), best)


def candidates(dag: Dag, order: list[int], cheap) -> list[Remat]:
    """Splits of a cheap op's readers around a peak step of ``order`` where the op's output is live and
    unread: the only places where a copy can lower that peak."""
    curve = dag.curve(order)
    top = max(curve, default=0)
    peaks = [s for s, c in enumerate(curve) if c == top]
    pos = {v: s for s, v in enumerate(order)}
    out = []
    for v in sorted(cheap):
        if v in dag.outputs or dag.sizes[v] == 0:
            continue
        readers = sorted(dag.succs[v], key=pos.__getitem__)
        for i in range(1, len(readers)):
            lo, hi = pos[readers[i - 1]], pos[readers[i]]
            if any(lo < p < hi for p in peaks):
                out.append(Remat(v, tuple(readers[i:])))
    return out


def with_copy(dag: Dag, r: Remat) -> Dag:
    """``dag`` with a new op n (= dag.n) computing what ``r.op`` computes, read by ``r.late`` instead."""
    n, v = dag.n, r.op
    preds = [list(p) for p in dag.preds] + [list(dag.preds[v])]
    for u in r.late:
        preds[u] = [n if p == v else p for p in preds[u]]
    shared = [(b, tuple(ops) + ((n,) if v in ops else ())) for b, ops in dag.ext]
    return Dag(dag.sizes + [dag.sizes[v]], preds, None, dag.outputs, shared, dag.pinned,
               dag.names + [f"{dag.names[v]}'"], dag.temps + [dag.temps[v]])  # fmt: skip


def choose(dag: Dag, cheap, *, max_rounds: int = MAX_ROUNDS, max_evaluations: int = MAX_EVALUATIONS):
    """Greedy search: at each round the candidate with the lowest peak, if strictly lower than the current
    one. Returns (the Remats taken, each on the DAG the previous ones produced; the final DAG; peak before;
    peak after)."""
    peak0, order = evaluate(dag)
    peak, cheap, taken, spent = peak0, set(cheap), [], 0
    for _ in range(max_rounds):
        best = None
        for c in candidates(dag, order, cheap):
            if spent >= max_evaluations:
                break
            spent += 1
            new = with_copy(dag, c)
            p, o = evaluate(new)
            if p < (best[0] if best else peak):
                best = (p, o, c, new)
        if best is None:
            break
        peak, order, c, dag = best
        taken.append(c)
        cheap.add(dag.n - 1)  # the copy may be split again
    return taken, dag, peak0, peak


# -- the Relax pass ----------------------------------------------------------------------------------


def _call_args(value) -> list:
    args = value.args[1]
    return list(args.fields) if isinstance(args, relax.Tuple) else [args]


def _cheap_ops(b: Bindings, graph, dag: Dag, kvars: list) -> set[int]:
    """Ops whose output may be recomputed: a cheap kind, a plain call_tir with one output and none of
    the in-place/workspace/state rules, every reader a kernel reading the var itself (no view between),
    and those readers exactly the op's successors in the DAG."""
    index = {var: v for v, var in enumerate(kvars)}
    out = set()
    for v, op in enumerate(graph.ops):
        var = kvars[v]
        k = b.kernel(var)
        if k is None or op.kind not in CHEAP or var in b.outputs or isinstance(var.ty, relax.TupleType):
            continue
        if kernel_attrs.workspace(k.prim) is not None or kernel_attrs.state(k.prim):
            continue
        if kernel_attrs.inplace(k.prim) is not None and graph.tensors[op.output].alias_of is not None:
            continue  # its DAG size counts the overlap with its dying input, which a copy would not have
        readers = b.readers.get(var, [])
        if not all(r in index and any(a.same_as(var) for a in _call_args(b.defs[r])) for r in readers):
            continue
        if {index[r] for r in readers} == set(dag.succs[v]):
            out.add(v)
    return out


def _apply(mod: tvm.IRModule, var, late_vars: list) -> tvm.IRModule:
    """A copy of ``var``'s kernel call (a duplicate kernel) emitted before the first of ``late_vars`` in
    binding order, and ``late_vars`` reading it instead of ``var``."""
    b = Bindings(mod)
    _gv, prim, _spec, args = b.kernel(var)
    out_ty = b.defs[var].ty_args[0]
    taken = {str(f.attrs["global_symbol"]) for f in mod.functions.values() if f.attrs and "global_symbol" in f.attrs}
    k = 1
    while f"{prim.attrs['global_symbol']}_remat{k}" in taken:
        k += 1
    copy: dict = {}

    def reader(old):
        def replacement(bb, env):
            if "var" not in copy:  # rebuild goes in binding order: the first late reader emits the copy
                kernel = add_kernel(bb, prim, prim, suffix=f"remat{k}")
                copy["var"] = bb.emit(relax.call_tir(kernel, [env.get(a, a) for a in args], out_ty),
                                      name_hint=f"{var.name}_remat")  # fmt: skip
            return _rename(b.defs[old], {**env, var: copy["var"]})

        return replacement

    return rebuild(mod, {r: reader(r) for r in late_vars})


def remat(mod: tvm.IRModule, align: int = 16, *, report: dict | None = None) -> tvm.IRModule:
    """Recompute cheap tensors held across a peak where that lowers the peak (else ``mod`` unchanged).
    ``report``, if given, receives the peaks before/after and the tensors recomputed."""
    from ..ir.outside import planned_graph

    peak0 = peak = None
    done = []
    for _ in range(MAX_ROUNDS):
        graph = planned_graph(mod)  # with --input outside, the inputs are free to read again (not in the arena)
        dag = Dag.from_graph(graph, align)
        kvars = kernel_vars(mod)
        taken, _, before, after = choose(dag, _cheap_ops(Bindings(mod), graph, dag, kvars), max_rounds=1)
        peak0 = before if peak0 is None else peak0
        peak = after
        if not taken:
            break
        c = taken[0]
        mod = _apply(mod, kvars[c.op], [kvars[u] for u in c.late])
        done.append({"tensor": graph.ops[c.op].output, "kind": graph.ops[c.op].kind, "late_readers": len(c.late)})
    if report is not None:
        report.update({"peak_before": peak0, "peak_after": peak, "recomputed": done})
    return mod
