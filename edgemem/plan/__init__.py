"""Static arena planning: every tensor gets a pool and a fixed byte offset.

    plan_arena(buffers, pools) -> ArenaPlan      check_plan(buffers, plan, pools)   (independent checker)

Placement algorithms share one interface, ``place(buffers) -> {name: offset}`` for one pool (see
ALGORITHMS). plan_arena runs them cheap to expensive and stops as soon as one reaches the lower bound
(the most bytes live at one step); it keeps the smallest arena. Then, with several pools, buffers are
assigned to pools (fast pools first, hot buffers preferred there; see pools.py) and each pool's share
is placed again. Everything is deterministic: the searches stop after fixed budgets of work;
``time_limit`` is only a safety net (a plan cut short by it may depend on the machine's speed).
"""

from __future__ import annotations

import time
from collections.abc import Callable

from .check import check_plan
from .exact import DEFAULT_NODE_LIMIT, EXACT_MAX_BUFFERS, exact
from .greedy import greedy_by_conflicts, greedy_by_size, greedy_by_size_chains, greedy_by_size_stable
from .hill_climb import DEFAULT_WORK, hill_climb
from .model import ArenaPlan, Buffer, Placement, PlanError, Pool, arena_end, lower_bound

__all__ = [
    "ALGORITHMS", "EXACT_MAX_BUFFERS", "ArenaPlan", "Buffer", "Placement", "PlanError", "Pool",
    "check_plan", "lower_bound", "plan_arena",
]  # fmt: skip

# name -> place(buffers, *, incumbent=None, deadline=None, effort=1.0) -> {name: offset}, cheap to
# expensive. ``incumbent``: the best offsets so far (the searches start from it and never return worse);
# ``effort`` scales the searches' deterministic work budgets.
ALGORITHMS: dict[str, Callable[..., dict[str, int]]] = {
    "greedy_by_size": lambda bufs, **_: greedy_by_size(bufs),  # TFLM's GreedyMemoryPlanner: the baseline
    "greedy_by_size_stable": lambda bufs, **_: greedy_by_size_stable(bufs),
    "greedy_by_conflicts": lambda bufs, **_: greedy_by_conflicts(bufs),
    "greedy_by_size_chains": lambda bufs, **_: greedy_by_size_chains(bufs),  # chains of in-place partners as one piece
    "greedy_by_conflicts_chains": lambda bufs, **_: greedy_by_conflicts(bufs, rigid=True),
    "hill_climb": lambda bufs, *, incumbent=None, deadline=None, effort=1.0: hill_climb(
        bufs, incumbent, deadline=deadline, work=int(DEFAULT_WORK * effort)),
    "exact": lambda bufs, *, incumbent=None, deadline=None, effort=1.0: exact(
        bufs, incumbent, deadline=deadline, node_limit=int(DEFAULT_NODE_LIMIT * effort)),
}  # fmt: skip


def _place(buffers: list[Buffer], algorithms: list[str], deadline: float,
           effort: float = 1.0) -> tuple[dict[str, int], str, dict[str, int]]:  # fmt: skip
    """Best single-pool placement among ``algorithms``: (offsets, algorithm, arena each one reached)."""
    bound = lower_bound(buffers)
    best: dict[str, int] | None = None
    best_end, best_name, tried = 0, "", {}
    for name in algorithms:
        if name == "exact" and len(buffers) > EXACT_MAX_BUFFERS:
            continue  # too big to prove anything in budget
        if name.endswith("_chains") and not any(b.alias for b in buffers):
            continue  # no in-place partners: the plain greedy order already ran
        if best is not None and time.perf_counter() > deadline:
            break
        offsets = ALGORITHMS[name](buffers, incumbent=best, deadline=deadline, effort=effort)
        end = arena_end(buffers, offsets)
        tried[name] = end
        if best is None or end < best_end:
            best, best_end, best_name = offsets, end, name
        if best_end <= bound:
            break
    if best is None:  # only algorithms that do not apply were asked for
        best, best_name = greedy_by_size(buffers), "greedy_by_size"
    return best, best_name, tried


def plan_arena(buffers: list[Buffer], pools: list[Pool] | None = None, *, algorithms: list[str] | None = None,
               time_limit: float = 1.0) -> ArenaPlan:  # fmt: skip
    """Give every buffer a pool and an offset, in the fewest bytes the algorithms find.

    ``pools=None``: one unbounded pool named "arena". Several pools: if the best single-pool arena fits a
    fast pool (the smallest such), that pool alone is used; if it fits only a normal pool, that pool
    keeps it and the fast pools take over the hottest buffers they can hold; if it fits none, the buffers
    are split over the pools, or PlanError says how many bytes are needed and what the pools offer.
    """
    t0 = time.perf_counter()
    deadline = t0 + time_limit
    algorithms = list(ALGORITHMS) if algorithms is None else list(algorithms)
    unknown = [a for a in algorithms if a not in ALGORITHMS]
    if unknown:
        raise ValueError(f"unknown placement algorithms {unknown}; known: {list(ALGORITHMS)}")
    names = [b.name for b in buffers]
    if len(set(names)) != len(names):
        raise ValueError(f"buffer names must be unique; repeated: {sorted({n for n in names if names.count(n) > 1})}")
    bound = lower_bound(buffers)
    offsets, algorithm, tried = _place(buffers, algorithms, deadline)
    single = arena_end(buffers, offsets)

    if not pools:
        sizes = {"arena": single} if buffers else {}
        placements = {name: Placement("arena", off) for name, off in offsets.items()}
        return ArenaPlan(placements, sizes, bound, algorithm, tried, time.perf_counter() - t0)

    from .pools import assign_pools, offload_to_fast_pools

    if len({p.name for p in pools}) != len(pools):
        raise ValueError(f"pool names must be unique: {[p.name for p in pools]}")
    by_preference = sorted(pools, key=lambda p: (p.speed != "fast", p.capacity))
    home = next((p for p in by_preference if single <= p.capacity), None)
    if home is not None:
        where, start = offload_to_fast_pools(buffers, home, offsets, pools)
    else:
        where, start = assign_pools(buffers, pools, single=single, bound=bound)
    placements: dict[str, Placement] = {}
    sizes: dict[str, int] = {}
    effort = 0.5 / len(pools)  # the pools' re-placements share half the single-pool search budget
    for pool in pools:
        group = [b for b in buffers if where[b.name] == pool.name]
        if not group:
            continue
        offs = {b.name: start[b.name] for b in group}  # fits the pool by construction
        if len(group) < len(buffers) and arena_end(group, offs) > lower_bound(group):
            better = _place(group, algorithms, deadline, effort)[0]
            if arena_end(group, better) < arena_end(group, offs):
                offs = better
        placements.update({b.name: Placement(pool.name, offs[b.name]) for b in group})
        sizes[pool.name] = arena_end(group, offs)
    return ArenaPlan(placements, sizes, bound, algorithm, tried, time.perf_counter() - t0)
