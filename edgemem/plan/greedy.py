"""Greedy orders for first fit (see first_fit.py), each ``place(buffers) -> {name: offset}``.

greedy_by_size is TensorFlow Lite Micro's GreedyMemoryPlanner: biggest (padded) buffers first, and
among equal sizes the one added LAST first. TFLM fills its sort array from the tail (so the array holds
the buffers in reverse of the order they were added), then runs a stable descending bubble sort over
it; equal sizes therefore stay in reverse insertion order. TFLM adds tensors in tensor-index order, so
pass ``buffers`` in that order to reproduce its arena exactly. On MobileNet-like chains this tie-break
is what costs TFLM memory (VWW: 73,728 B where 55,296 B suffice).

greedy_by_size_stable is the same with equal sizes in insertion order (the tie-break TFLM does not make).

The ``_chains`` variants place each chain of in-place partners (an output written over its dying input,
itself overwritten by the next op, ...) as one piece at the partners' relative offsets; partial liveness
(memory/overlap.py) gives such chains offsets that drift, which piecewise first fit rarely reproduces.

greedy_by_conflicts takes first the buffers whose lifetime is shared with the most bytes (the
"pressure" around them), then by size: the crowded part of the schedule is packed before the rest.
"""

from __future__ import annotations

from .first_fit import Instance
from .model import Buffer


def _first_fit_by(buffers: list[Buffer], key, rigid: bool = False) -> dict[str, int]:
    inst = Instance(buffers, rigid)
    return inst.as_dict(inst.first_fit(sorted(range(inst.n), key=lambda i: key(inst, i))))


def greedy_by_size(buffers: list[Buffer]) -> dict[str, int]:
    return _first_fit_by(buffers, lambda inst, i: (-inst.size[i], -i))


def greedy_by_size_chains(buffers: list[Buffer]) -> dict[str, int]:
    """greedy_by_size with every chain of in-place partners placed as one piece (first_fit.Instance rigid)."""
    return _first_fit_by(buffers, lambda inst, i: (-inst.size[i], -i), rigid=True)


def greedy_by_size_stable(buffers: list[Buffer]) -> dict[str, int]:
    return _first_fit_by(buffers, lambda inst, i: (-inst.size[i], i))


def greedy_by_conflicts(buffers: list[Buffer], rigid: bool = False) -> dict[str, int]:
    inst = Instance(buffers, rigid)
    pressure = [inst.size[i] + sum(inst.size[j] for j in inst.conflicts[i]) for i in range(inst.n)]
    order = sorted(range(inst.n), key=lambda i: (-pressure[i], -inst.size[i], i))
    return inst.as_dict(inst.first_fit(order))
