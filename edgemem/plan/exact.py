"""Exact placement for small instances: branch and bound over "compacted" placements.

Any placement can be pushed down until each buffer sits at 0 or directly on a buffer it conflicts
with, without growing the arena. Listing buffers of such a placement by offset, each one's offset is 0
or the end of an earlier listed conflicting buffer. The search builds exactly those sequences (offsets
non-decreasing), pruning any partial placement whose top already reaches the best arena found.
"""

from __future__ import annotations

import time

from .first_fit import _aligned_up
from .model import Buffer, arena_end, lower_bound


class _Search:
    def __init__(self, buffers: list[Buffer], incumbent: dict[str, int], deadline: float):
        self.buffers = sorted(buffers, key=lambda b: -b.padded)
        self.best = dict(incumbent)
        self.best_end = arena_end(buffers, incumbent)
        self.bound = lower_bound(buffers)
        self.deadline = deadline
        self.finished = True

    def run(self) -> None:
        self._dfs({}, 0, 0)

    def _dfs(self, placed: dict[str, int], top: int, floor: int) -> None:
        if self.best_end <= self.bound:
            return
        if time.perf_counter() > self.deadline:
            self.finished = False
            return
        if len(placed) == len(self.buffers):
            self.best, self.best_end = dict(placed), top
            return
        for buf in self.buffers:
            if buf.name in placed:
                continue
            for offset in self._candidates(buf, placed, floor):
                end = offset + buf.padded
                if max(top, end) >= self.best_end:
                    continue
                placed[buf.name] = offset
                self._dfs(placed, max(top, end), offset)
                del placed[buf.name]

    def _candidates(self, buf: Buffer, placed: dict[str, int], floor: int) -> list[int]:
        by_name = {b.name: b for b in self.buffers}
        conflicts = [(placed[n], by_name[n].padded) for n in placed if by_name[n].overlaps_in_time(buf)]
        starts = {0} | {_aligned_up(o + s, buf.align) for o, s in conflicts}
        return sorted(o for o in starts if o >= floor and all(o + buf.padded <= c or c + s <= o for c, s in conflicts))


def exact(buffers: list[Buffer], *, incumbent: dict[str, int], time_limit: float = 0.5) -> tuple[dict[str, int], bool]:
    """Optimal offsets (and True) if the search finishes within ``time_limit``, else the best found (False)."""
    search = _Search(buffers, incumbent, time.perf_counter() + time_limit)
    search.run()
    return search.best, search.finished
