"""What the planner takes and returns: buffers with lifetimes, pools with capacities, placements.

Also the lower bound every placement algorithm is measured against: at each schedule step the live
buffers need disjoint bytes, so no placement of whole buffers is smaller than the largest sum of the
(alignment-padded) sizes live at one step.
"""

from __future__ import annotations

import operator
from dataclasses import dataclass, field

from ..errors import EdgememError


class PlanError(EdgememError):
    """No placement fits the pools, or a plan breaks a rule (found by the checker)."""

    exit_code = 5


def padded_size(size: int, align: int) -> int:
    """``size`` rounded up to a multiple of ``align``."""
    return -(-size // align) * align


@dataclass(frozen=True)
class Buffer:
    """One tensor's storage need: ``size`` bytes live from step ``first`` to ``last`` (inclusive)."""

    name: str
    size: int  # bytes, > 0
    first: int  # first schedule step it is live (inclusive)
    last: int  # last schedule step it is live (inclusive)
    align: int = 16  # offset alignment, a power of two
    heat: float = 0.0  # accesses per inference; hotter buffers go to faster pools
    # In-place: the buffer whose bytes this one may take over at its first step, which is that buffer's
    # last (a kernel writing its output over its dying input). At the same offset they may overlap.
    alias: str | None = None
    # Partial liveness (edgemem.memory.overlap): this buffer sits ``shift`` bytes from its alias's start
    # (offset - alias's offset) and ``rows`` proves it, per output pixel (w0, w1, n0, n1): while this buffer's
    # bytes [w0, w1) are written, the alias's bytes [n0, n1) are still to be read. 0 / None: the same offset.
    shift: int = 0
    rows: tuple | None = field(default=None, compare=False, repr=False)

    def __post_init__(self) -> None:
        for what in ("size", "first", "last", "align"):  # ints, numpy ints included
            try:
                operator.index(getattr(self, what))
            except TypeError:
                value = getattr(self, what)
                raise ValueError(f"buffer '{self.name}': {what} must be an integer, got {value!r}") from None
        if self.size <= 0:
            raise ValueError(f"buffer '{self.name}': size must be positive, got {self.size}")
        if self.first > self.last:
            raise ValueError(f"buffer '{self.name}': first step {self.first} is after last step {self.last}")
        if self.align <= 0 or self.align & (self.align - 1):
            raise ValueError(f"buffer '{self.name}': align must be a power of two, got {self.align}")

    @property
    def padded(self) -> int:
        return padded_size(self.size, self.align)

    def overlaps_in_time(self, other: "Buffer") -> bool:
        return self.first <= other.last and other.first <= self.last


@dataclass(frozen=True)
class Pool:
    """One memory region the arena may use."""

    name: str  # e.g. "dtcm", "sram1"
    capacity: int  # bytes available for the arena in this pool
    speed: str = "normal"  # "fast" pools are filled first


@dataclass(frozen=True)
class Placement:
    pool: str
    offset: int


@dataclass
class ArenaPlan:
    placements: dict[str, Placement]  # buffer name -> pool and byte offset
    pool_sizes: dict[str, int]  # bytes used per pool (aligned end of its highest buffer); only pools used
    lower_bound: int  # max over steps of the padded bytes live at that step (single-pool view)
    algorithm: str  # the placement algorithm whose single-pool result was taken
    tried: dict[str, int] = field(default_factory=dict)  # algorithm -> single-pool arena bytes it reached
    seconds: float = 0.0

    @property
    def total_bytes(self) -> int:
        return sum(self.pool_sizes.values())


def lower_bound(buffers: list[Buffer]) -> int:
    """Max over steps of the padded bytes live at that step: no placement of whole buffers goes lower
    (the storage model's rule, edgemem.memory, on the buffers' padded sizes)."""
    from ..memory import peak

    return peak(buffers, size_of=lambda b: b.padded)


def arena_end(buffers: list[Buffer], offsets: dict[str, int]) -> int:
    """Bytes a placement uses: the padded end of its highest buffer (0 for no buffers)."""
    return max((offsets[b.name] + b.padded for b in buffers), default=0)
