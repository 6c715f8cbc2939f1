"""Static arena planning: every tensor gets a pool and a fixed offset.

    plan_arena(buffers, pools) -> ArenaPlan      check_plan(buffers, plan, pools)   (independent)

Placement algorithms share one interface, ``place(buffers) -> {name: offset}`` for one pool; the
planner runs them cheap to expensive and stops as soon as one reaches the lower bound.
"""

from __future__ import annotations

import time

from .check import check_plan
from .exact import exact
from .greedy import greedy_by_conflicts, greedy_by_size, greedy_by_size_stable
from .hill_climb import hill_climb
from .model import ArenaPlan, Buffer, Placement, PlanError, Pool, arena_end, lower_bound
from .pools import assign_pools, offload_to_fast_pools

__all__ = ["ALGORITHMS", "EXACT_MAX_BUFFERS", "ArenaPlan", "Buffer", "Placement", "PlanError", "Pool", "check_plan", "lower_bound", "plan_arena"]

EXACT_MAX_BUFFERS = 14  # beyond this the branch and bound rarely finishes; the heuristics are at the bound anyway

ALGORITHMS = {
    "greedy_by_size": greedy_by_size,  # TFLM's choice: the baseline
    "greedy_by_size_stable": greedy_by_size_stable,
    "greedy_by_conflicts": greedy_by_conflicts,
    "hill_climb": hill_climb,
    "exact": None,  # needs an incumbent: see _place
}


def _place(buffers: list[Buffer], algorithms: list[str], time_limit: float) -> tuple[dict[str, int], str, dict[str, int]]:
    """Best single-pool placement of the algorithms asked for; stops at the lower bound."""
    deadline = time.perf_counter() + time_limit
    bound = lower_bound(buffers)
    best, best_name, tried = None, "", {}
    for name in algorithms:
        if name == "exact":
            if len(buffers) > EXACT_MAX_BUFFERS:
                continue
            offsets, _ = exact(buffers, incumbent=best or greedy_by_size(buffers), time_limit=max(0.0, deadline - time.perf_counter()))
        elif name == "hill_climb":
            offsets = hill_climb(buffers, deadline=deadline)
        else:
            offsets = ALGORITHMS[name](buffers)
        end = arena_end(buffers, offsets)
        tried[name] = end
        if best is None or end < arena_end(buffers, best):
            best, best_name = offsets, name
        if end <= bound:
            break
    if best is None:  # only algorithms that do not apply were asked for
        best, best_name = greedy_by_size(buffers), "greedy_by_size"
    return best, best_name, tried


def plan_arena(buffers: list[Buffer], pools: list[Pool] | None = None, *, algorithms: list[str] | None = None,
               time_limit: float = 1.0) -> ArenaPlan:  # fmt: skip
    """Place ``buffers``; with several pools, hot buffers go to fast pools first (see pools.py)."""
    t0 = time.perf_counter()
    algorithms = list(algorithms or ALGORITHMS)
    unknown = [a for a in algorithms if a not in ALGORITHMS]
    if unknown:
        raise ValueError(f"unknown placement algorithms {unknown}; known: {list(ALGORITHMS)}")
    pools = pools or [Pool("arena", 1 << 62)]
    offsets, name, tried = _place(buffers, algorithms, time_limit)
    single = arena_end(buffers, offsets)
    by_speed = sorted(pools, key=lambda p: (p.speed != "fast", p.capacity))
    home = next((p for p in by_speed if single <= p.capacity), None)
    if home is None:  # no pool holds the whole arena: split it
        groups = assign_pools(buffers, pools)
    else:  # one pool holds it; the fast pools then take the hottest buffers they can
        groups = offload_to_fast_pools(buffers, {b.name: home.name for b in buffers}, pools)
    placements, sizes = {}, {}
    for pool in pools:
        group = [b for b in buffers if groups[b.name] == pool.name]
        if not group:
            continue
        offs = offsets if len(group) == len(buffers) else _place(group, algorithms, time_limit / len(pools))[0]
        if arena_end(group, offs) > pool.capacity:
            offs = _first_fit_in_order(group)
        placements.update({b.name: Placement(pool.name, offs[b.name]) for b in group})
        sizes[pool.name] = arena_end(group, offs)
    return ArenaPlan(placements, sizes, lower_bound(buffers), name, tried, time.perf_counter() - t0)


def _first_fit_in_order(group: list[Buffer]) -> dict[str, int]:
    from .first_fit import first_fit

    return first_fit(sorted(group, key=lambda b: (-b.heat / max(b.size, 1), b.first)))
