"""Greedy orders for first fit.

greedy_by_size is TensorFlow Lite Micro's GreedyMemoryPlanner: biggest buffers first (equal sizes in
reverse of their first use, which is what its in-place reverse sort leaves), each at the first gap.
greedy_by_conflicts puts first the buffers that share their lifetime with the most bytes.
"""

from __future__ import annotations

from .first_fit import first_fit
from .model import Buffer


def greedy_by_size(buffers: list[Buffer]) -> dict[str, int]:
    return first_fit(sorted(buffers, key=lambda b: (-b.padded, -b.first)))


def greedy_by_size_stable(buffers: list[Buffer]) -> dict[str, int]:
    """Biggest first, equal sizes in order of first use (the tie-break TFLM does not make)."""
    return first_fit(sorted(buffers, key=lambda b: (-b.padded, b.first)))


def greedy_by_conflicts(buffers: list[Buffer]) -> dict[str, int]:
    pressure = {b.name: sum(o.padded for o in buffers if o.overlaps_in_time(b)) for b in buffers}
    return first_fit(sorted(buffers, key=lambda b: (-pressure[b.name], -b.padded, b.first)))
