"""The lowest peak among the schedulers, within a time budget."""

from __future__ import annotations

import time

from . import Schedule, exact, hierarchical, rpo
from .dag import Dag
from .exact import file_or_topo


def best_schedule(dag: Dag, time_budget: float = 3.0) -> tuple[list[int], int, dict]:
    """Run the file order, RPO, hierarchical and (with what is left of ``time_budget``) exact,
    seeded with the best so far. Returns (order, peak, report) where ``report[name]`` is
    ``{"peak", "seconds", "order"}`` per scheduler (exact also has ``"optimal"``), and ``report["best"]``
    names the winner (the earliest listed on ties)."""
    start = time.perf_counter()
    report, results = {}, []

    def record(name, fn, *args, **kw):
        t0 = time.perf_counter()
        order, peak, info = fn(*args, **kw)
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
    report["best"] = name
    return order, peak, report


def schedule_graph(graph, align: int = 4, time_budget: float = 3.0) -> Schedule:
    """best_schedule on an OpGraph: its op indices, peak as liveness.peak_bytes(graph, order, align)."""
    order, peak, report = best_schedule(Dag.from_graph(graph, align), time_budget)
    return Schedule(order, peak, report["best"], {k: r["order"] for k, r in report.items() if isinstance(r, dict)})


def schedule_tried(graph, align: int, time_budget: float) -> tuple[Schedule, dict[str, int]]:
    """schedule_graph, and the peak bytes of every scheduler tried (the build report's "schedulers_tried"; the
    orders themselves go with the Schedule, for report.html's curves)."""
    order, peak, report = best_schedule(Dag.from_graph(graph, align), time_budget)
    tried = {name: r["peak"] for name, r in report.items() if isinstance(r, dict)}
    orders = {name: r["order"] for name, r in report.items() if isinstance(r, dict)}
    return Schedule(order, peak, report["best"], orders), tried
