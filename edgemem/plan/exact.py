"""Exact placement for small instances: branch and bound over compacted placements.

Why it is enough to search compacted placements: take any valid placement and visit its buffers by
increasing offset; drop each one to the lowest aligned offset above the (already dropped) buffers it
conflicts with among those visited before it. Nothing overlaps and no buffer moves up, so the arena
does not grow. In the result, listed by offset, every buffer sits exactly at
``max(0, aligned ends of the earlier-listed buffers it conflicts with)`` and offsets never decrease.

So the search builds such lists: each step appends one unplaced buffer, whose offset is then forced by
the buffers already placed, and is allowed only if that offset is not below the previous one (equal
offsets are taken in a fixed buffer order, so each placement is built once). A branch is cut when a
lower bound on its final arena reaches the best arena found (the incumbent from the heuristics at the
start): every buffer still to place lies at or above the current offset ``o``, so at each step ``s``
the arena is at least ``o`` + (bytes still to place live at ``s``) + (bytes of placed buffers live at
``s`` that reach above ``o``); and each remaining buffer needs at least its forced offset + its size.

The search stops at the lower bound, after ``node_limit`` nodes (deterministic) or at ``deadline``;
``exact`` tells whether it proved optimality.
"""

from __future__ import annotations

import time

from .first_fit import Instance
from .model import Buffer, lower_bound, padded_size

DEFAULT_NODE_LIMIT = 1_500  # nodes (0.1-0.5 ms each in Python): well under a second
EXACT_MAX_BUFFERS = 16  # plan_arena runs exact only up to this many buffers (per pool)


class _Search:
    def __init__(self, inst: Instance, best: list[int], node_limit: int, deadline: float | None):
        self.inst = inst
        n = inst.n
        # Branch on big buffers first: they decide the arena, and good incumbents come early.
        self.rank = sorted(range(n), key=lambda i: (-inst.size[i], i))
        self.conf = [0] * n
        for i in range(n):
            for j in inst.conflicts[i]:
                self.conf[i] |= 1 << j
        steps = sorted({b.first for b in inst.buffers})  # live sets peak where some buffer starts
        self.live_at = [[i for i, b in enumerate(inst.buffers) if b.first <= s <= b.last] for s in steps]
        self.steps_of = [[k for k, s in enumerate(steps) if b.first <= s <= b.last] for b in inst.buffers]
        self.step_set = [set(ks) for ks in self.steps_of]
        self.best = list(best)
        self.best_end = inst.end(best)
        self.bound = lower_bound(inst.buffers)
        self.node_limit = node_limit
        self.deadline = deadline
        self.nodes = 0
        self.complete = True

    def run(self) -> None:
        n = self.inst.n
        if n == 0 or self.best_end <= self.bound:
            return
        remaining = [sum(self.inst.size[i] for i in live) for live in self.live_at]
        self._dfs(0, [0] * n, 0, -1, 0, remaining)

    def _forced(self, i: int, placed: int, off: list[int]) -> int:
        size, align = self.inst.size, self.inst.align
        o, mask = 0, self.conf[i] & placed
        while mask:
            low = mask & -mask
            j = low.bit_length() - 1
            o = max(o, padded_size(off[j] + size[j], align[i]))
            mask ^= low
        return o

    def _dfs(self, placed: int, off: list[int], floor: int, last_rank: int, top: int, remaining: list[int]) -> None:
        """Try every unplaced buffer as the next one in offset order."""
        if self.best_end <= self.bound or not self._budget():
            return
        size, n = self.inst.size, self.inst.n
        children = []
        for r, i in enumerate(self.rank):
            if placed >> i & 1:
                continue
            o = self._forced(i, placed, off)
            if o < floor or (o == floor and r < last_rank):
                continue
            new_top = max(top, o + size[i])
            if new_top >= self.best_end:
                continue
            bound = self._bound(placed | 1 << i, off, i, o, new_top, remaining)
            if bound < self.best_end:
                children.append((bound, o, r, i, new_top))
        children.sort()
        full = (1 << n) - 1
        for bound, o, r, i, new_top in children:
            if bound >= self.best_end:
                continue
            off[i] = o
            if placed | 1 << i == full:
                self.best, self.best_end = list(off), new_top
            else:
                rem = list(remaining)
                for k in self.steps_of[i]:
                    rem[k] -= size[i]
                self._dfs(placed | 1 << i, off, o, r, new_top, rem)
            off[i] = 0
            if self.best_end <= self.bound or not self.complete:
                return

    def _bound(self, placed: int, off: list[int], new: int, o: int, top: int, remaining: list[int]) -> int:
        size = self.inst.size
        bound = top
        saved, off[new] = off[new], o
        for k, live in enumerate(self.live_at):
            rest = remaining[k] - (size[new] if k in self.step_set[new] else 0)
            if rest == 0:
                continue
            above = sum(max(0, off[j] + size[j] - o) for j in live if placed >> j & 1)
            bound = max(bound, o + rest + above)
        for i in range(self.inst.n):
            if not placed >> i & 1:
                bound = max(bound, max(o, self._forced(i, placed, off)) + size[i])
        off[new] = saved
        return bound

    def _budget(self) -> bool:
        self.nodes += 1
        if self.nodes > self.node_limit:
            self.complete = False
        elif self.deadline is not None and self.nodes % 64 == 0 and time.perf_counter() > self.deadline:
            self.complete = False
        return self.complete


def exact_search(buffers: list[Buffer], incumbent: dict[str, int] | None = None, *,
                 node_limit: int = DEFAULT_NODE_LIMIT, deadline: float | None = None) -> tuple[dict[str, int], bool]:
    """(offsets, proved optimal). Starts from ``incumbent`` (default: TFLM's greedy) and only improves
    on it."""
    from .greedy import greedy_by_size

    inst = Instance(buffers)
    start = incumbent if incumbent is not None else greedy_by_size(buffers)
    search = _Search(inst, [start[b.name] for b in inst.buffers], node_limit, deadline)
    search.run()
    optimal = search.complete or search.best_end <= search.bound
    return inst.as_dict(search.best), optimal


def exact(buffers: list[Buffer], incumbent: dict[str, int] | None = None, *, node_limit: int = DEFAULT_NODE_LIMIT,
          deadline: float | None = None) -> dict[str, int]:  # fmt: skip
    """The ``place(buffers)`` interface: the optimal offsets when the search finishes within its budget."""
    return exact_search(buffers, incumbent, node_limit=node_limit, deadline=deadline)[0]
