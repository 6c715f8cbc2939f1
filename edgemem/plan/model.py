"""What the planner takes and returns: buffers with lifetimes, pools with capacities, placements."""

from __future__ import annotations

from dataclasses import dataclass, field

from ..errors import EdgememError


class PlanError(EdgememError):
    """No placement fits the pools, or a plan breaks a rule (found by the checker)."""

    exit_code = 5


@dataclass(frozen=True)
class Buffer:
    """One tensor's storage need: ``size`` bytes live from step ``first`` to ``last`` (inclusive)."""

    name: str
    size: int
    first: int
    last: int
    align: int = 16
    heat: float = 0.0  # accesses per inference; hotter buffers go to faster pools

    @property
    def padded(self) -> int:
        return -(-self.size // self.align) * self.align

    def overlaps_in_time(self, other: "Buffer") -> bool:
        return self.first <= other.last and other.first <= self.last


@dataclass(frozen=True)
class Pool:
    name: str
    capacity: int
    speed: str = "normal"  # "fast" pools are filled first


@dataclass(frozen=True)
class Placement:
    pool: str
    offset: int


@dataclass
class ArenaPlan:
    placements: dict[str, Placement]
    pool_sizes: dict[str, int]  # bytes used per pool (only pools that hold a buffer)
    lower_bound: int
    algorithm: str
    tried: dict[str, int] = field(default_factory=dict)  # algorithm -> single-pool arena it reached
    seconds: float = 0.0

    @property
    def total_bytes(self) -> int:
        return sum(self.pool_sizes.values())


def lower_bound(buffers: list[Buffer]) -> int:
    """Max over steps of the padded bytes live at that step: no placement of whole buffers goes lower."""
    events: dict[int, int] = {}
    for b in buffers:
        events[b.first] = events.get(b.first, 0) + b.padded
        events[b.last + 1] = events.get(b.last + 1, 0) - b.padded
    live = best = 0
    for step in sorted(events):
        live += events[step]
        best = max(best, live)
    return best


def arena_end(buffers: list[Buffer], offsets: dict[str, int]) -> int:
    return max((offsets[b.name] + b.padded for b in buffers), default=0)
