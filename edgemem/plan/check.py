"""The independent checker of arena plans. It shares no code with the placement algorithms: it only
reads the buffers, the pools and the plan, and tests every rule directly (O(n^2), on purpose simple)."""

from __future__ import annotations

from .model import ArenaPlan, Buffer, PlanError, Pool


def check_plan(buffers: list[Buffer], plan: ArenaPlan, pools: list[Pool] | None = None) -> None:
    """Raise PlanError unless every buffer is placed, aligned, inside its pool, and no two buffers live at
    the same step overlap in the same pool."""
    capacity = {p.name: p.capacity for p in pools} if pools else None
    for b in buffers:
        if b.name not in plan.placements:
            raise PlanError(f"arena plan check: buffer '{b.name}' has no placement.")
        p = plan.placements[b.name]
        if p.offset < 0 or p.offset % b.align:
            raise PlanError(f"arena plan check: buffer '{b.name}' at offset {p.offset} is not {b.align}-byte aligned.")
        size = -(-b.size // b.align) * b.align
        used = plan.pool_sizes.get(p.pool)
        if used is None or p.offset + size > used:
            raise PlanError(f"arena plan check: buffer '{b.name}' ends at {p.offset + size}, beyond pool "
                            f"'{p.pool}' of {used} bytes.")  # fmt: skip
        if capacity is not None and (p.pool not in capacity or used > capacity[p.pool]):
            raise PlanError(f"arena plan check: pool '{p.pool}' uses {used} bytes, more than its capacity "
                            f"{capacity.get(p.pool)}.")  # fmt: skip
    for i, a in enumerate(buffers):
        pa = plan.placements[a.name]
        for b in buffers[i + 1 :]:
            pb = plan.placements[b.name]
            same_time = a.first <= b.last and b.first <= a.last
            same_bytes = pa.pool == pb.pool and pa.offset < pb.offset + b.size and pb.offset < pa.offset + a.size
            if same_time and same_bytes:
                raise PlanError(f"arena plan check: '{a.name}' and '{b.name}' are live together and overlap in "
                                f"pool '{pa.pool}' ({pa.offset}+{a.size} vs {pb.offset}+{b.size}).")  # fmt: skip
