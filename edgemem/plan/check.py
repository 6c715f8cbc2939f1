"""The independent checker of arena plans.

It shares no code with the placement algorithms (no first fit, no conflict lists, not even the
padding helper): it reads the buffers, the pools and the plan and tests every rule directly, pair by
pair (every pair whose steps intersect: one sort by first step, then each buffer against those starting within
its steps; O(n^2) only when that many are live together). Rules: every buffer has exactly one placement and nothing else is
placed; each offset is a non-negative multiple of the buffer's alignment; each buffer (rounded up to
its alignment) ends within the size the plan gives its pool, and that size within the pool's capacity;
no two buffers whose [first, last] steps intersect share a byte in the same pool -- except an in-place
pair (one names the other as its alias and starts at the step the other ends) at the very same offset,
or, for partial liveness (the writer carries ``rows``: per output pixel in write order, the bytes it
writes and the alias's bytes still to be read afterwards), at any offsets where, pixel by pixel, no
written byte is one still to be read.
"""

from __future__ import annotations

import bisect
import numbers

from .model import ArenaPlan, Buffer, PlanError, Pool


def check_plan(buffers: list[Buffer], plan: ArenaPlan, pools: list[Pool] | None = None) -> None:
    """Return None if ``plan`` is a valid placement of ``buffers`` (into ``pools`` if given), else raise
    PlanError naming the first broken rule."""
    capacity = {p.name: p.capacity for p in pools} if pools else None
    names = {b.name for b in buffers}
    extra = sorted(set(plan.placements) - names)
    if extra:
        raise PlanError(f"arena plan check: placements for unknown buffers {extra}.")
    for pool, used in plan.pool_sizes.items():
        if used < 0:
            raise PlanError(f"arena plan check: pool '{pool}' has a negative size {used}.")
        if capacity is not None and pool not in capacity:
            raise PlanError(f"arena plan check: pool '{pool}' is not one of the pools {sorted(capacity)}.")
        if capacity is not None and used > capacity[pool]:
            raise PlanError(f"arena plan check: pool '{pool}' uses {used:,} bytes, more than its capacity "
                            f"{capacity[pool]:,}.")  # fmt: skip
    for b in buffers:
        if b.name not in plan.placements:
            raise PlanError(f"arena plan check: buffer '{b.name}' has no placement.")
        p = plan.placements[b.name]
        if not isinstance(p.offset, numbers.Integral) or p.offset < 0 or p.offset % b.align != 0:
            raise PlanError(f"arena plan check: buffer '{b.name}' at offset {p.offset} is not a "
                            f"non-negative multiple of its {b.align}-byte alignment (not aligned).")  # fmt: skip
        rounded = b.size + (-b.size) % b.align
        used = plan.pool_sizes.get(p.pool)
        if used is None:
            raise PlanError(f"arena plan check: buffer '{b.name}' is in pool '{p.pool}', which the plan gives no size.")
        if p.offset + rounded > used:
            raise PlanError(f"arena plan check: buffer '{b.name}' ends at {p.offset + rounded:,}, beyond pool "
                            f"'{p.pool}' of {used:,} bytes.")  # fmt: skip
    for a, b in _live_together(buffers):
        pa, pb = plan.placements[a.name], plan.placements[b.name]
        in_place = (b.alias == a.name and a.last == b.first) or (a.alias == b.name and b.last == a.first)
        writer, dying = (b, a) if b.alias == a.name else (a, b)
        if in_place and pa.pool == pb.pool and writer.rows is not None:
            _check_rows(writer, plan.placements[writer.name].offset, dying, plan.placements[dying.name].offset)
            continue
        if in_place and pa.pool == pb.pool and pa.offset == pb.offset:
            continue
        if pa.pool == pb.pool and pa.offset < pb.offset + b.size and pb.offset < pa.offset + a.size:
            raise PlanError(f"arena plan check: '{a.name}' (steps {a.first}-{a.last}, bytes {pa.offset}-"
                            f"{pa.offset + a.size - 1}) and '{b.name}' (steps {b.first}-{b.last}, bytes "
                            f"{pb.offset}-{pb.offset + b.size - 1}) are live together and overlap in pool "
                            f"'{pa.pool}'.")  # fmt: skip


def _live_together(buffers: list[Buffer]):
    """Every pair (a, b), a before b in ``buffers``, whose [first, last] steps intersect: of two such, one starts
    within the other's steps (on a chain of 10,000 operators all pairs, 50 million, took 8 s)."""
    order = sorted(range(len(buffers)), key=lambda i: buffers[i].first)
    firsts = [buffers[i].first for i in order]
    for k, i in enumerate(order):
        a = buffers[i]
        for j in order[k + 1 : bisect.bisect_right(firsts, a.last)]:
            yield (a, buffers[j]) if i < j else (buffers[j], a)


def _check_rows(writer: Buffer, w_off: int, dying: Buffer, d_off: int) -> None:
    """A partial-liveness pair: every output pixel's bytes, written at ``w_off``, miss the bytes of the dying
    input (at ``d_off``) still to be read after that write; and the rows cover the writer's whole size."""
    for k, (w0, w1, n0, n1) in enumerate(writer.rows):
        lo, hi = w_off + w0, w_off + w1
        if n1 > n0 and lo < d_off + n1 and d_off + n0 < hi:
            raise PlanError(f"arena plan check: '{writer.name}' (at {w_off}) writes bytes {lo}-{hi - 1} for its output "
                            f"pixel #{k} over bytes {max(lo, d_off + n0)}-{min(hi, d_off + n1) - 1} of '{dying.name}' (at "
                            f"{d_off}), which later pixels still read: the overlap is too large.")  # fmt: skip
    end = 0
    for w0, w1, _, _ in sorted(writer.rows):  # the rows must account for every byte the writer writes
        if w0 != end or w1 <= w0:
            break
        end = w1
    if end != writer.size:
        raise PlanError(f"arena plan check: the rows of '{writer.name}' do not cover its {writer.size} bytes in "
                        f"contiguous pixels (they stop at {end}).")
