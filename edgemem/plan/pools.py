"""Which pool each buffer goes to.

When one pool holds the whole arena, it keeps it, and each fast pool takes over the hottest buffers
(per byte) that first fit can add without exceeding its capacity: the big pool never grows.
Otherwise (assign_pools) pools are taken fast first, then largest; buffers hottest per byte first. Each buffer goes to the
first pool where first fit, given the buffers already there, keeps the pool within its capacity. The
per-pool placement is then re-optimised by the planner's algorithms.
"""

from __future__ import annotations

from .first_fit import first_fit_offset
from .model import Buffer, PlanError, Pool


def assign_pools(buffers: list[Buffer], pools: list[Pool]) -> dict[str, str]:
    ordered_pools = sorted(pools, key=lambda p: (p.speed != "fast", -p.capacity))
    content: dict[str, list[tuple[Buffer, int]]] = {p.name: [] for p in pools}
    where: dict[str, str] = {}
    for buf in sorted(buffers, key=lambda b: (-b.heat / max(b.size, 1), b.first)):
        for pool in ordered_pools:
            conflicts = [(o, b.padded) for b, o in content[pool.name] if b.overlaps_in_time(buf)]
            offset = first_fit_offset(buf, conflicts)
            if offset + buf.padded <= pool.capacity:
                content[pool.name].append((buf, offset))
                where[buf.name] = pool.name
                break
        else:
            need = sum(b.padded for b in buffers if b.overlaps_in_time(buf))
            caps = ", ".join(f"{p.name} {p.capacity:,} B" for p in pools)
            raise PlanError(f"tensor '{buf.name}' ({buf.size:,} B) fits no pool: {need:,} bytes are live with it "
                            f"and the pools offer {caps}.")  # fmt: skip
    return where


def offload_to_fast_pools(buffers: list[Buffer], home: dict[str, str], pools: list[Pool]) -> dict[str, str]:
    where = dict(home)
    for pool in (p for p in pools if p.speed == "fast" and p.name not in set(home.values())):
        content: list[tuple[Buffer, int]] = []
        for buf in sorted(buffers, key=lambda b: (-b.heat / max(b.size, 1), b.first)):
            conflicts = [(o, b.padded) for b, o in content if b.overlaps_in_time(buf)]
            offset = first_fit_offset(buf, conflicts)
            if offset + buf.padded <= pool.capacity:
                content.append((buf, offset))
                where[buf.name] = pool.name
    return where
