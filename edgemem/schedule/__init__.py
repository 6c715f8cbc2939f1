"""Operator order. Every scheduler returns a Schedule: an order of op indices and its peak."""

from __future__ import annotations

from dataclasses import dataclass, field

from ..ir.graph import OpGraph
from .liveness import peak_bytes


@dataclass(frozen=True)
class Schedule:
    order: list[int]
    peak_bytes: int
    scheduler: str
    orders: dict = field(default_factory=dict, compare=False)  # every scheduler's order (the report's curves)


def file_order(graph: OpGraph, align: int = 1) -> Schedule:
    """The model file's order (the order of the Relax bindings), the baseline every scheduler must beat."""
    order = list(range(len(graph.ops)))
    return Schedule(order, peak_bytes(graph, order, align), "file")
