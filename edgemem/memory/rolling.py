"""Geometry of a rolling patch stage (issue 20): the stage runs column tile by column tile (outer loop) and,
inside a tile, one row of the split tensor S at a time (step r). Every stage tensor keeps a small buffer
("ring") of the rows its readers still need; an op computes each row of its output once (no row is
computed twice along H; only the column halos of neighbouring tiles are recomputed).

    plan(ops, hw, x, q) -> [TilePlan]   per column tile: the column box of every tensor, and per step the
                                        calls (one output row each) with the rows they read and where each
                                        ring starts

Rows are made on demand, one at a time: S row r needs rows of its op's inputs, each made (if not yet) by
its own producer from the rows *it* needs, recursively, down to copies of the model input's rows. A tensor
read by one op only skips rows that op never reads (a 1x1 convolution with stride 2). Before a row of t is
written, t's ring drops the rows no later call reads (the ring is shifted so it starts at ``lo``): the ring
holds rows [lo, row] after the call, so its capacity is about a window's height, not the cone of one S row.
The model input's rows are copied into its own ring (op -1); S is written in place (a row of a tile is one
contiguous NHWC run). Pure Python, no TVM: tests/test_rolling.py simulates the rings row by row against a
brute-force enumeration of the rows each output row reads.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from .patches import Box, StageOp, needed, patch_pad, regions, split


@dataclass(frozen=True)
class Call:
    """One call: op ``op`` (-1: a copy of model input rows) makes rows [a, b) of its output, reading per
    activation input the rows ``reads`` (absolute, clipped) from that input's ring, which starts at row
    ``in_lo``. Before it, the output's ring drops rows below ``lo`` (``drop`` rows since its previous start;
    None: its first row in this tile), keeping [lo, a). ``pad``: a convolution's patch padding."""

    op: int
    rows: tuple[int, int]
    reads: tuple[tuple[int, int], ...] = ()
    in_lo: tuple[int, ...] = ()
    pad: tuple[int, ...] = ()
    lo: int = 0
    drop: int | None = None


@dataclass
class Step:
    """The calls that make S row ``r`` (and whatever rows of other tensors it needs first), in order."""

    r: int
    calls: list[Call]


@dataclass
class TilePlan:
    cols: tuple[int, int]  # S columns of the tile
    boxes: dict[str, tuple[int, int]]  # column box [c0, c1) of every tensor
    wants: dict[tuple[int, str], tuple[int, int]]  # (op, input): columns that op reads
    steps: list[Step] = field(default_factory=list)
    capacity: dict[str, int] = field(default_factory=dict)  # rows each ring holds at most (S has none)


def _col_box(box: Box) -> tuple[int, int]:
    return box[2], box[3]


def tile_plan(ops: list[StageOp], hw: dict[str, tuple[int, int]], x: str, cols: tuple[int, int]) -> TilePlan:
    """The rolling schedule of the S columns ``cols`` (``x``: the model input, read by the stage's first ops)."""
    s = ops[-1].output
    c0, c1 = cols
    boxes, wants = regions(ops, (0, hw[s][0], c0, c1), hw)
    tp = TilePlan(cols, {t: _col_box(b) for t, b in boxes.items()}, {k: _col_box(b) for k, b in wants.items()})
    producer = {op.output: k for k, op in enumerate(ops)}
    readers: dict[str, list[int]] = {t: [] for t in [x, *producer]}
    for k, op in enumerate(ops):
        for i in op.inputs:
            readers[i].append(k)
    done = {t: 0 for t in readers}  # rows made so far
    flat: list[tuple[int, int, tuple, tuple]] = []  # (op, row, reads, pad) in call order

    def ensure(t: str, hi: int, lo: int) -> None:
        while done[t] < hi:
            y = max(done[t], lo) if len(readers[t]) == 1 else done[t]  # a sole reader never reads below lo
            make(t, y)
            done[t] = y + 1

    def make(t: str, y: int) -> None:
        if t == x:
            flat.append((-1, y, (), ()))
            return
        k = producer[t]
        op = ops[k]
        box = (y, y + 1, *boxes[t][2:])
        reads = []
        for i in op.inputs:
            need = needed(op.window, box, hw[i])
            ensure(i, need[1], need[0])
            reads.append((need[0], need[1]))
        pad = patch_pad(op.window, box, needed(op.window, box, hw[op.inputs[0]])) if op.window else ()
        flat.append((k, y, tuple(reads), pad))

    bounds = []
    for r in range(hw[s][0]):
        ensure(s, r + 1, r)
        bounds.append(len(flat))
    # backwards: the first row any later call reads of each tensor (the ring keeps from there)
    later: dict[str, int | None] = {t: None for t in readers}
    lo_at: list[int] = [0] * len(flat)
    for n in range(len(flat) - 1, -1, -1):
        k, y, reads, _pad = flat[n]
        t = x if k < 0 else ops[k].output
        lo_at[n] = y if later[t] is None else min(later[t], y)
        for i, (a, _b) in zip(ops[k].inputs if k >= 0 else (), reads):
            later[i] = a if later[i] is None else min(later[i], a)
    ring_lo: dict[str, int | None] = {t: None for t in readers}
    cap = {t: 0 for t in readers if t != s}
    steps, start = [], 0
    for r, end in enumerate(bounds):
        calls = []
        for n in range(start, end):
            k, y, reads, pad = flat[n]
            t = x if k < 0 else ops[k].output
            in_lo = tuple(ring_lo[i] for i in ops[k].inputs) if k >= 0 else ()
            drop = None if ring_lo[t] is None else lo_at[n] - ring_lo[t]
            if t != s:
                ring_lo[t] = lo_at[n]
                cap[t] = max(cap[t], y + 1 - lo_at[n])
            calls.append(Call(k, (y, y + 1), reads, in_lo, pad, lo_at[n] if t != s else y, drop if t != s else None))
        steps.append(Step(r, calls))
        start = end
    tp.steps, tp.capacity = steps, cap
    return tp


def plan(ops: list[StageOp], hw: dict[str, tuple[int, int]], x: str, q: int) -> list[TilePlan]:
    """The rolling schedule of every one of ``q`` near-equal column tiles of S, left to right."""
    return [tile_plan(ops, hw, x, cols) for cols in split(hw[ops[-1].output][1], q)]


__all__ = ["Call", "Step", "TilePlan", "plan", "tile_plan"]
