"""First fit in a given order, the engine under every heuristic here.

Buffers are taken in the given order; each goes to the lowest offset (a multiple of its alignment)
where it overlaps in bytes no already placed buffer whose lifetime intersects its own. This is the
placement step of TFLM's GreedyMemoryPlanner (walk the placed, time-conflicting buffers by offset and
take the first gap big enough); the heuristics differ only in the order they feed it.

In-place partners (an output written over its dying input, ``Buffer.alias``, at ``Buffer.shift`` bytes from
the input's start for partial liveness) may overlap: a buffer whose partner is already placed first tries
the partner's offset plus the shift. ``rigid``: a chain of partners (each output overwritten in turn by the
next op) is placed as one piece, every member at its fixed offset from the others, at the lowest base
where each member misses the placed buffers live with it -- the shifts of partial liveness move each
member a little, and placed one by one the chain rarely lines up again.

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

    def __init__(self, buffers: list[Buffer], rigid: bool = False):
        self.buffers = list(buffers)
        self.n = len(self.buffers)
        self.size = [b.padded for b in self.buffers]
        self.align = [b.align for b in self.buffers]
        self.conflicts: list[list[int]] = [[] for _ in self.buffers]
        # in-place partners (see Buffer.alias), either way round: mates[i] = [(j, rel)] where i may sit at
        # offset(j) + rel, overlapping j (rel: the writer's shift from its alias, negated the other way round).
        # A buffer may have two (written over its alias, and itself overwritten by the next op): a chain.
        index = {b.name: i for i, b in enumerate(self.buffers)}
        self.mates: list[list[tuple[int, int]]] = [[] for _ in self.buffers]
        overwritten = [False] * self.n  # one writer per dying buffer (two would be live together over it)
        for i, b in enumerate(self.buffers):
            j = index.get(b.alias, -1) if b.alias else -1
            if j >= 0 and not overwritten[j] and self.buffers[j].last == b.first and b.shift % b.align == 0 \
                    and b.shift % self.buffers[j].align == 0:  # fmt: skip
                overwritten[j] = True
                self.mates[i].append((j, b.shift))
                self.mates[j].append((i, -b.shift))
        # rigid: a chain of partners is placed as one piece, every member at its partner's offset + rel
        self.rigid = rigid and any(self.mates)
        self.group = list(range(self.n))
        self.rel = [0] * self.n
        if self.rigid:
            seen = [False] * self.n
            for i in range(self.n):
                if seen[i] or not self.mates[i]:
                    continue
                seen[i], stack, members = True, [i], [i]
                while stack:
                    u = stack.pop()
                    for j, rel in self.mates[u]:
                        bj = self.buffers[j]
                        if seen[j] or any(m != u and self.buffers[m].first <= bj.last and bj.first <= self.buffers[m].last
                                          for m in members):  # fmt: skip
                            continue  # a member live with another one than its partner: it starts a piece of its own
                        seen[j], self.group[j], self.rel[j] = True, i, self.rel[u] - rel  # off(u) = off(j) + rel
                        members.append(j)
                        stack.append(j)
        self.members: dict[int, list[int]] = {}
        for i in range(self.n):
            self.members.setdefault(self.group[i], []).append(i)
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
        if self.rigid:  # a chain is placed where its first member comes in the order
            first = {}
            for i in range(self.n):
                g = self.group[i]
                first[g] = min(first.get(g, self.n), position[i])
            position = [first[self.group[i]] for i in range(self.n)]
        size, align, conflicts = self.size, self.align, self.conflicts
        for k in range(start, len(order)):
            i = order[k]
            if position[i] < k:
                continue  # placed with its chain
            if self.rigid and len(self.members[self.group[i]]) > 1:
                self._place_chain(self.members[self.group[i]], out, position, k)
                if limit is not None and any(out[j] + size[j] > limit for j in self.members[self.group[i]]):
                    return None
                continue
            placed = [(out[j], size[j]) for j in conflicts[i] if position[j] < k]
            out[i] = first_fit_offset(size[i], align[i], placed)
            for j, rel in self.mates[i]:
                if position[j] < k and self._fits_over(out[j] + rel, i, out, position, k):
                    out[i] = out[j] + rel
                    break
            self.work += 1 + len(conflicts[i])
            if limit is not None and out[i] + size[i] > limit:
                return None
        return out

    def _fits_over(self, offset: int, i: int, out: list[int], position: list[int], k: int) -> bool:
        """Whether buffer i may sit at ``offset`` (its partner's offset + rel): aligned, non-negative and clear
        of every placed buffer live with it, except a partner it sits at exactly its rel from."""
        if offset < 0 or offset % self.align[i]:
            return False
        end = offset + self.size[i]
        at_rel = {j for j, rel in self.mates[i] if position[j] < k and out[j] + rel == offset}
        return all(end <= out[j] or out[j] + self.size[j] <= offset
                   for j in self.conflicts[i] if position[j] < k and j not in at_rel)

    def _place_chain(self, members: list[int], out: list[int], position: list[int], k: int) -> None:
        """All members of a chain at base + rel: the lowest aligned base at which each member is clear of the
        placed buffers live with it (members overlap only their partners, at their rel)."""
        size, rel = self.size, self.rel
        step = max(self.align[j] for j in members)
        base = max(max(-rel[j] for j in members), 0)
        forbidden = []  # open intervals of base
        for j in members:
            for x in self.conflicts[j]:
                if position[x] < k and self.group[x] != self.group[j]:
                    forbidden.append((out[x] - rel[j] - size[j], out[x] + size[x] - rel[j]))
            self.work += 1 + len(self.conflicts[j])
        base = -(-base // step) * step
        for a, b in sorted(forbidden):
            if a >= base:
                break
            if base < b:
                base = -(-b // step) * step
        for j in members:
            out[j] = base + rel[j]

    def end(self, offsets: list[int]) -> int:
        return max((o + s for o, s in zip(offsets, self.size)), default=0)

    def as_dict(self, offsets: list[int]) -> dict[str, int]:
        return {b.name: o for b, o in zip(self.buffers, offsets)}


def first_fit(order: list[Buffer]) -> dict[str, int]:
    """First fit of ``order`` as given: name -> offset."""
    inst = Instance(order)
    return inst.as_dict(inst.first_fit(list(range(inst.n))))
