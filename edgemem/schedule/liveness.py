"""The memory model every scheduler and the planner share.

An op's output is allocated when the op runs; an input (or any tensor) dies after its last consumer
in the schedule; graph inputs are live from step 0 (the caller writes them before the run) and graph
outputs until the last step (the caller reads them after). Views share their source's storage, and
constants live in flash. At one step, an op's inputs and output are live together.
"""

from __future__ import annotations

from dataclasses import dataclass

from ..ir.graph import OpGraph


@dataclass(frozen=True)
class LiveRange:
    """The steps [first, last] (inclusive) during which a storage tensor must keep its bytes."""

    name: str
    size: int
    first: int
    last: int
    alias: str | None = None  # in-place: the range this one may be written over (see ir/graph.py)


def live_ranges(graph: OpGraph, order: list[int]) -> list[LiveRange]:
    """Live range of every RAM-owning tensor under the op order ``order`` (op indices)."""
    step_of = {op: s for s, op in enumerate(order)}
    end = max(len(order) - 1, 0)
    out = []
    for t in graph.activations():
        first = 0 if t.producer is None else step_of[t.producer]
        users = [step_of[c] for c in t.consumers]
        last = max(users, default=first)
        if any(graph.storage_of(o).name == t.name for o in graph.outputs):
            last = end
        out.append(LiveRange(t.name, t.nbytes, first, last, t.alias_of))
    return out


def _aligned(n: int, align: int) -> int:
    return -(-n // align) * align


def live_bytes(ranges: list[LiveRange], steps: int, align: int = 1) -> list[int]:
    """Bytes live at each step (sizes rounded up to ``align``)."""
    curve = [0] * max(steps, 1)
    by_name = {r.name: r for r in ranges}
    for r in ranges:
        for s in range(r.first, r.last + 1):
            curve[s] += _aligned(r.size, align)
        a = by_name.get(r.alias) if r.alias else None
        if a is not None and a.last == r.first:  # written over its dying alias: shared bytes count once
            curve[r.first] -= min(_aligned(r.size, align), _aligned(a.size, align))
    return curve


def peak_bytes(graph: OpGraph, order: list[int], align: int = 1) -> int:
    """The schedule's peak: the lower bound any placement of whole tensors must meet."""
    return max(live_bytes(live_ranges(graph, order), len(order), align))
