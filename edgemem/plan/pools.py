"""Which pool each buffer goes to, when there are several memory regions.

Two cases (plan_arena decides which, from the best single-pool arena):

- One pool holds the whole arena (``offload_to_fast_pools``): it keeps it. If that pool is not a fast
  one, each fast pool then takes over the hottest buffers (per byte) that first fit can add without
  exceeding its capacity. The home pool keeps its placement restricted to the buffers left, so it never
  grows.
- No pool holds it (``assign_pools``): pools are filled fast first (then largest first) and buffers
  are taken hottest per byte first (then biggest first); each buffer goes to the first pool where first
  fit, given the buffers already there, stays within the pool's capacity. If some buffer finds no room,
  the same is retried with buffers biggest first, most crowded first and in a few seeded random
  orders, then with the pools in reverse order, before giving up with a PlanError that states the
  bytes needed and the pools' capacities.

Both return ``(pool of each buffer, offsets within its pool)``, offsets that are known to fit; the
planner then tries to improve each pool's placement with its algorithms.
"""

from __future__ import annotations

import random

from .first_fit import Instance, first_fit_offset
from .model import Buffer, PlanError, Pool

RANDOM_ORDERS = 24  # extra seeded buffer orders tried before a split is declared impossible


def _fast_first(pools: list[Pool]) -> list[Pool]:
    return sorted(pools, key=lambda p: (p.speed != "fast", -p.capacity))


def _heat_order(inst: Instance) -> list[int]:
    b = inst.buffers
    return sorted(range(inst.n), key=lambda i: (-b[i].heat / b[i].size, -inst.size[i], i))


def _fill(inst: Instance, order: list[int], pools: list[Pool], *,
          stop_at_misfit: bool) -> tuple[list[int], list[int], int | None]:  # fmt: skip
    """First fit of the buffers in ``order``, each into the first of ``pools`` where it stays within the
    capacity. Returns (pool index per buffer or -1, offsets, first buffer that found no room or None);
    with ``stop_at_misfit`` it stops at that buffer, else it leaves it out and goes on."""
    where, offsets = [-1] * inst.n, [0] * inst.n
    for i in order:
        for p, pool in enumerate(pools):
            placed = [(offsets[j], inst.size[j]) for j in inst.conflicts[i] if where[j] == p]
            o = first_fit_offset(inst.size[i], inst.align[i], placed)
            if o + inst.size[i] <= pool.capacity:
                where[i], offsets[i] = p, o
                break
        else:
            if stop_at_misfit:
                return where, offsets, i
    return where, offsets, None


def assign_pools(buffers: list[Buffer], pools: list[Pool], *, single: int,
                 bound: int) -> tuple[dict[str, str], dict[str, int]]:  # fmt: skip
    """Split ``buffers`` over ``pools``; ``single``/``bound`` (the one-pool arena and the lower bound) are
    only for the error message."""
    inst = Instance(buffers)
    ordered = _fast_first(pools)
    pressure = [inst.size[i] + sum(inst.size[j] for j in inst.conflicts[i]) for i in range(inst.n)]
    orders = [
        _heat_order(inst),
        sorted(range(inst.n), key=lambda i: (-inst.size[i], -i)),
        sorted(range(inst.n), key=lambda i: (-pressure[i], -inst.size[i], i)),
    ]
    rng = random.Random(0)
    for _ in range(RANDOM_ORDERS):  # seeded: the same input always gets the same split
        orders.append(rng.sample(range(inst.n), inst.n))
    stuck = None
    for pool_order in (ordered, ordered[::-1]):
        for order in orders:
            where, offsets, failed = _fill(inst, order, pool_order, stop_at_misfit=True)
            if failed is None:
                return ({b.name: pool_order[where[i]].name for i, b in enumerate(buffers)},
                        {b.name: offsets[i] for i, b in enumerate(buffers)})  # fmt: skip
            stuck = stuck if stuck is not None else failed
    caps = ", ".join(f"{p.name} {p.capacity:,} B" + (" (fast)" if p.speed == "fast" else "") for p in pools)
    largest = max(range(inst.n), key=lambda i: (inst.size[i], -i))
    if inst.size[largest] > max(p.capacity for p in pools):
        b = buffers[largest]
        why = f"tensor '{b.name}' alone needs {inst.size[largest]:,} B, more than the largest pool."
    else:
        b = buffers[stuck]
        live_with = sum(inst.size[j] for j in inst.conflicts[stuck])
        why = f"tensor '{b.name}' ({b.size:,} B, live with {live_with:,} B of other tensors) found no room."
    raise PlanError(
        f"the tensors need {single:,} bytes of arena in one pool (lower bound {bound:,} B) and no split "
        f"over the pools fits: pools {caps} ({sum(p.capacity for p in pools):,} B in all); {why}"
    )


def offload_to_fast_pools(buffers: list[Buffer], home: Pool, home_offsets: dict[str, int],
                          pools: list[Pool]) -> tuple[dict[str, str], dict[str, int]]:  # fmt: skip
    """Everything sits in ``home`` at ``home_offsets``; fast pools other than ``home`` take the hottest
    buffers they can hold."""
    inst = Instance(buffers)
    where = {b.name: home.name for b in buffers}
    offsets = dict(home_offsets)
    fast = [p for p in _fast_first(pools) if p.speed == "fast" and p.name != home.name]
    if home.speed == "fast" or not fast:
        return where, offsets
    w, offs, _ = _fill(inst, _heat_order(inst), fast, stop_at_misfit=False)  # a misfit stays home
    for i, b in enumerate(buffers):
        if w[i] >= 0:
            where[b.name], offsets[b.name] = fast[w[i]].name, offs[i]
    return where, offsets
