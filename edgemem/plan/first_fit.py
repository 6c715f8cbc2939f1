"""First fit in a given order, the engine under every heuristic here.

Buffers are taken in the given order; each goes to the lowest offset (a multiple of its alignment)
where it overlaps in bytes no already placed buffer whose lifetime intersects its own. This is the
placement step of TFLM's GreedyMemoryPlanner (walk the placed, time-conflicting buffers by offset and
take the first gap big enough); the heuristics differ only in the order they feed it.

``Instance`` precomputes padded sizes and the time-conflict lists once, so one first-fit pass costs
O(sum of conflict degrees x log) rather than O(n^2), and the hill climb can redo only a suffix.
"""

from __future__ import annotations

from .model import Buffer, padded_size


def first_fit_offset(size: int, align: int, placed: list[tuple[int, int]]) -> int:
    """Lowest ``align``-aligned offset where ``size`` bytes miss every (offset, size) in ``placed``."""
    offset = 0
    for start, length in sorted(placed):
        if offset + size <= start:
            break
        offset = max(offset, padded_size(start + length, align))
    return offset


class Instance:
    """Buffers by index: padded sizes, alignments and, for each buffer, the buffers live with it."""

    def __init__(self, buffers: list[Buffer]):
        self.buffers = list(buffers)
        self.n = len(self.buffers)
        self.size = [b.padded for b in self.buffers]
        self.align = [b.align for b in self.buffers]
        self.conflicts: list[list[int]] = [[] for _ in self.buffers]
        # in-place partner (see Buffer.alias), either way round: placed second, a buffer first tries its
        # partner's offset, where only the partner may overlap it
        index = {b.name: i for i, b in enumerate(self.buffers)}
        self.partner = [-1] * self.n
        for i, b in enumerate(self.buffers):
            j = index.get(b.alias, -1) if b.alias else -1
            if j >= 0 and self.buffers[j].last == b.first:
                self.partner[i], self.partner[j] = j, i
        self.work = 0  # first_fit's work so far: buffers placed + conflicts looked at (the hill climb's budget)
        # Sweep by first step: each buffer conflicts with the still-live buffers that started before it.
        by_first = sorted(range(self.n), key=lambda i: (self.buffers[i].first, i))
        active: list[int] = []
        for i in by_first:
            b = self.buffers[i]
            active = [j for j in active if self.buffers[j].last >= b.first]
            for j in active:
                self.conflicts[i].append(j)
                self.conflicts[j].append(i)
            active.append(i)

    def first_fit(self, order: list[int], offsets: list[int] | None = None, start: int = 0,
                  limit: int | None = None) -> list[int] | None:  # fmt: skip
        """Offsets (by buffer index) of first fit in ``order``. With ``offsets`` and ``start``, positions
        before ``start`` keep their offsets from ``offsets`` (they must come from first fit of an order
        with the same prefix) and only the rest is redone. With ``limit``, gives up (None) as soon as a
        buffer would end above it."""
        out = list(offsets) if offsets is not None else [0] * self.n
        position = [0] * self.n
        for k, i in enumerate(order):
            position[i] = k
        size, align, conflicts = self.size, self.align, self.conflicts
        for k in range(start, len(order)):
            i = order[k]
            placed = [(out[j], size[j]) for j in conflicts[i] if position[j] < k]
            mate = self.partner[i]
            if mate >= 0 and position[mate] < k and self._fits_over(
                out[mate], i, [(out[j], size[j]) for j in conflicts[i] if position[j] < k and j != mate]
            ):
                out[i] = out[mate]
            else:
                out[i] = first_fit_offset(size[i], align[i], placed)
            self.work += 1 + len(conflicts[i])
            if limit is not None and out[i] + size[i] > limit:
                return None
        return out

    def _fits_over(self, offset: int, i: int, others: list[tuple[int, int]]) -> bool:
        """Whether buffer i may sit at its in-place partner's offset: aligned and clear of every other
        placed buffer live with it (``others``, the partner left out)."""
        end = offset + self.size[i]
        return offset % self.align[i] == 0 and all(end <= o or o + s <= offset for o, s in others)

    def end(self, offsets: list[int]) -> int:
        return max((o + s for o, s in zip(offsets, self.size)), default=0)

    def as_dict(self, offsets: list[int]) -> dict[str, int]:
        return {b.name: o for b, o in zip(self.buffers, offsets)}


def first_fit(order: list[Buffer]) -> dict[str, int]:
    """First fit of ``order`` as given: name -> offset."""
    inst = Instance(order)
    return inst.as_dict(inst.first_fit(list(range(inst.n))))
