"""Live ranges of an OpGraph's storage under an operator order: the storage model of ``edgemem.memory``
(built by ``memory.from_graph``), which holds the rule -- an op's output is allocated when the op runs, a
tensor dies after its last consumer, graph inputs are live from step 0 and graph outputs to the last
step, views share their source's storage, constants live in flash, an in-place output shares its dying
alias's bytes at its step.
"""

from __future__ import annotations

import numpy as np

from .. import memory
from ..ir.graph import OpGraph
from ..memory import Range as LiveRange  # the steps [first, last] a storage keeps its bytes (alias: in place)

__all__ = ["LiveRange", "arena_buffers", "live_bytes", "live_ranges", "peak_bytes"]


def live_ranges(graph: OpGraph, order: list[int]) -> list[LiveRange]:
    """Live range of every RAM-owning tensor under the op order ``order`` (op indices), unaligned sizes."""
    return memory.from_graph(graph).ranges(order)


def arena_buffers(graph: OpGraph, order: list[int], align: int):
    """The planner's buffers for ``order``: one per live range, ``align``-ed, with its heat (how many kernels
    touch the tensor; the planner puts the hottest ones in fast pools). The build plans these, and the pass
    orchestrator measures every candidate module with them (passes/catalogue.evaluate)."""
    from ..plan import Buffer

    return [Buffer(r.name, max(r.size, 1), r.first, r.last, _aligned_for(graph, r.name, align),
                   heat=float(1 + len(graph.tensors[r.name].consumers)), alias=r.alias, shift=r.shift, rows=r.rows)
            for r in live_ranges(graph, order)]  # fmt: skip


def _aligned_for(graph: OpGraph, name: str, align: int) -> int:
    """The board's alignment, or 8 for a tensor of 8-byte elements (uint64 filter-bank sums, int64): C reads
    those as whole 8-byte values, which must be 8-aligned on the host (and for LDRD's best case on the core)."""
    t = graph.tensors.get(name)
    return max(align, 8) if t is not None and np.dtype(t.dtype).itemsize == 8 else align


def live_bytes(ranges: list[LiveRange], steps: int, align: int = 1) -> list[int]:
    """Bytes live at each step (sizes rounded up to ``align``)."""
    return memory.curve(ranges, steps, size_of=lambda r: memory.aligned(r.size, align))


def peak_bytes(graph: OpGraph, order: list[int], align: int = 1) -> int:
    """The schedule's peak: the lower bound any placement of whole tensors must meet."""
    return max(memory.from_graph(graph, align).curve(order))
