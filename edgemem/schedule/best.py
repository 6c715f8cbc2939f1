"""The lowest peak among the schedulers, within a time budget."""

from __future__ import annotations

import time

from . import Schedule, exact, hierarchical, rpo
from .dag import NO_LIMITS, Dag, Limits, OutOfBudget
from .exact import file_or_topo

TIE_BREAK_SHARE = 0.5  # the tie-break between orders of equal peak may take the budget's unused part + this share
TIE_BREAK_MIN_SECONDS = 0.5  # and at least this: with a tight budget the exact DP uses it all, and placing a
# few small orders costs milliseconds (rwstage-0 at n=13: 69,996 B untied vs 66,880 B under a 0.2 s budget)


def best_schedule(dag: Dag, time_budget: float = 3.0, placed=None) -> tuple[list[int], int, dict]:
    """Run the file order, RPO, hierarchical and (with what is left of ``time_budget``) exact,
    seeded with the best so far. Returns (order, peak, report) where ``report[name]`` is
    ``{"peak", "seconds", "order"}`` per scheduler (exact also has ``"optimal"``), and ``report["best"]``
    names the winner. Ties on the peak go to the least ``placed(order)`` (the arena bytes a placement of
    that order takes: two orders of the same peak can place differently), then to the earliest listed; it
    stops at ``TIE_BREAK_SHARE`` past the budget (a placement of thousands of tensors is not free), keeping
    the orders placed by then, so the whole call stays within 1.5 x ``time_budget`` plus one placement."""
    start = time.perf_counter()
    report, results = {}, []

    def record(name, fn, *args, **kw):
        t0 = time.perf_counter()
        try:
            order, peak, info = fn(*args, **kw)
        except RecursionError:  # the hierarchical scheduler nests one level per block: a long recurrence
            return  # (an unrolled WHILE loop) goes deeper than Python allows; the other schedulers still run
        report[name] = {"peak": peak, "seconds": time.perf_counter() - t0, "order": list(order)}
        if "optimal" in info:
            report[name]["optimal"] = info["optimal"]
        results.append((peak, len(results), name, order))

    record("file", lambda d: (file_or_topo(d), d.peak(file_or_topo(d)), {}), dag)
    record("rpo", rpo.schedule, dag)
    record("hierarchical", hierarchical.schedule, dag, time_limit=max(time_budget / 2, 0.05))
    left = time_budget - (time.perf_counter() - start)
    if left > 0:
        incumbent = min(results)[3]
        record("exact", exact.schedule, dag, time_limit=left, incumbent=incumbent)
    peak, _, name, order = min(results)
    if placed is not None:
        left = start + (1 + TIE_BREAK_SHARE) * time_budget - time.perf_counter()
        left = max(left, TIE_BREAK_MIN_SECONDS)
        name, order = _least_placed(dag, [r for r in results if r[0] == peak], placed, Limits(left), (name, order))
    report["best"] = name
    return order, peak, report


def _least_placed(dag: Dag, tied: list, placed, limits: Limits = NO_LIMITS, first=None) -> tuple[str, list[int]]:
    """Among the orders of the least peak, and each with its operators sunk next to their first reader
    (same peak), the one that places in the fewest bytes; the earliest listed on ties. Orders of equal peak
    can differ by several percent once placed: fragmentation depends on when each tensor is born.
    Past ``limits``, the least of those placed so far (``first``, the earliest listed, when none is)."""
    seen, candidates = set(), []
    for _, _, name, order in tied:
        for variant in (list(order), sunk(dag, order, limits)):
            if tuple(variant) not in seen:
                seen.add(tuple(variant))
                candidates.append((name, variant))
    if len(candidates) == 1:
        return candidates[0]
    best, best_bytes = first if first is not None else candidates[0], None
    for name, variant in candidates:
        if not _has_time(limits):
            break
        nbytes = placed(variant)
        if best_bytes is None or nbytes < best_bytes:
            best, best_bytes = (name, variant), nbytes
    return best


def _has_time(limits: Limits) -> bool:
    try:
        limits.charge(0)
    except OutOfBudget:
        return False
    return True


def sunk(dag: Dag, order, limits: Limits = NO_LIMITS) -> list[int]:
    """``order`` with each operator, last to first, moved to just before its first reader when that does
    not raise the peak: a tensor born late is live for fewer steps, which leaves the placement fewer holes.
    Past ``limits``, the moves made so far (each keeps the peak): each move costs a pass over the order."""
    order = list(order)
    peak = dag.peak(order)
    for count, v in enumerate(reversed(list(order))):
        if not count & 15 and not _has_time(limits):
            break
        if not dag.succs[v]:
            continue
        i = order.index(v)
        j = min(order.index(s) for s in dag.succs[v])
        if j > i + 1:
            moved = order[:i] + order[i + 1:j] + [v] + order[j:]
            if dag.peak(moved) <= peak:
                order = moved
    return order


def _placed_graph(graph, align: int):
    """The single-pool arena bytes of ``graph`` in an order: the tie-break of best_schedule for a build."""
    from ..plan import plan_arena
    from .liveness import arena_buffers

    return lambda order: plan_arena(arena_buffers(graph, order, align)).total_bytes


def schedule_graph(graph, align: int = 4, time_budget: float = 3.0) -> Schedule:
    """best_schedule on an OpGraph: its op indices, peak as liveness.peak_bytes(graph, order, align)."""
    order, peak, report = best_schedule(Dag.from_graph(graph, align), time_budget, _placed_graph(graph, align))
    return Schedule(order, peak, report["best"], {k: r["order"] for k, r in report.items() if isinstance(r, dict)})


def schedule_tried(graph, align: int, time_budget: float) -> tuple[Schedule, dict[str, int]]:
    """schedule_graph, and the peak bytes of every scheduler tried (the build report's "schedulers_tried"; the
    orders themselves go with the Schedule, for report.html's curves)."""
    order, peak, report = best_schedule(Dag.from_graph(graph, align), time_budget, _placed_graph(graph, align))
    tried = {name: r["peak"] for name, r in report.items() if isinstance(r, dict)}
    orders = {name: r["order"] for name, r in report.items() if isinstance(r, dict)}
    return Schedule(order, peak, report["best"], orders), tried
