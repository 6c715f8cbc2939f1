"""Geometry of a rolling patch stage (issue 20): the stage runs column tile by column tile (outer loop) and,
inside a tile, one row of the split tensor S at a time (inner loop). Every stage tensor keeps a small buffer
("ring") of the rows its readers still need; at each step an op computes only its *new* rows, so no row is
ever computed twice along H (only the column halos of neighbouring tiles are recomputed).

    plan(ops, hw, q) -> [TilePlan]   per column tile: the column box of every tensor, and per step (S row)
                                     the rows each op computes and reads and where its ring starts

Definitions, for column tile c and step r (S rows [0, r+1) done after it):
- ``hi[t][r]``: the end row of tensor t needed for S rows [0, r+1) -- back-propagated with the same window
  arithmetic as memory/patches.py (``regions``), clipped at the borders; ``hi[t][-1] = 0``.
- ``lo[t][r]``: the first row of t any reader of t still needs at step r or later (the ring keeps
  [lo, hi)); rows below it are dropped before t's new rows are written (a shift of the ring, which always
  starts at ``lo``).
- new rows of t at step r: [max(hi[t][r-1], lo[t][r]), hi[t][r]) (rows a stride skips are never computed).
The model input is a tensor "produced" by a copy of its new rows; S is written row by row in place (one
S row per step: a contiguous NHWC run of the tile's columns). Pure Python, no TVM: tests/test_rolling.py
simulates the rings row by row against a brute-force enumeration of the rows each output row reads.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from .patches import Box, StageOp, needed, patch_pad, regions, split


@dataclass(frozen=True)
class Call:
    """Op ``op`` at one step: output rows [a, b) (absolute), per activation input the rows it reads
    (absolute, clipped), and for a convolution the patch kernel's padding (top, left, bottom, right)."""

    op: int
    rows: tuple[int, int]
    reads: tuple[tuple[int, int], ...]
    pad: tuple[int, ...] = ()


@dataclass
class Step:
    """Step r: per tensor (the input included, S excluded) the ring's first row after the shift (``lo``)
    and the rows kept from the previous step (``kept``: [lo, kept) moved to the ring's top), the input's
    new rows, then the calls in op order."""

    r: int
    lo: dict[str, int]
    kept: dict[str, int]
    input_rows: tuple[int, int]
    calls: list[Call]


@dataclass
class TilePlan:
    cols: tuple[int, int]  # S columns of the tile
    boxes: dict[str, tuple[int, int]]  # column box [c0, c1) of every tensor
    wants: dict[tuple[int, str], tuple[int, int]]  # (op, input): columns that op reads
    steps: list[Step] = field(default_factory=list)
    capacity: dict[str, int] = field(default_factory=dict)  # rows each ring holds at most (S: 0)


def _col_box(box: Box) -> tuple[int, int]:
    return box[2], box[3]


def tile_plan(ops: list[StageOp], hw: dict[str, tuple[int, int]], x: str, cols: tuple[int, int]) -> TilePlan:
    """The rolling schedule of the S columns ``cols`` (``x``: the model input, read by the stage's first ops)."""
    s = ops[-1].output
    h = hw[s][0]
    c0, c1 = cols
    boxes, wants = regions(ops, (0, h, c0, c1), hw)
    tp = TilePlan(cols, {t: _col_box(b) for t, b in boxes.items()}, {k: _col_box(b) for k, b in wants.items()})
    ring = [x] + [op.output for op in ops[:-1]]  # tensors with a ring
    readers: dict[str, list[int]] = {t: [] for t in ring}
    for k, op in enumerate(ops):
        for i in op.inputs:
            readers[i].append(k)
    hi = {t: [0] * (h + 1) for t in ring}  # hi[t][r + 1]: end row after step r
    for r in range(h):
        bx, _ = regions(ops, (0, r + 1, c0, c1), hw)
        for t in ring:
            hi[t][r + 1] = bx[t][1]
    # backwards over the steps: each reader's first row read at this step or later (None: never again)
    nxt: dict[tuple[str, int], int | None] = {(t, k): None for t in ring for k in readers[t]}
    steps: list[Step] = []
    for r in range(h - 1, -1, -1):
        calls: list[Call] = []
        lo: dict[str, int] = {}
        rows_of = {s: (r, r + 1)}
        for k in range(len(ops) - 1, -1, -1):
            op = ops[k]
            t = op.output
            if t != s:
                firsts = [nxt[(t, kk)] for kk in readers[t] if nxt[(t, kk)] is not None]
                lo[t] = min(firsts) if firsts else hi[t][r + 1]
                rows_of[t] = (max(hi[t][r], lo[t]), hi[t][r + 1])
            a, b = rows_of[t]
            if a >= b:
                continue
            box = (a, b, *boxes[t][2:])
            reads = []
            for i in op.inputs:
                need = needed(op.window, box, hw[i])
                reads.append((need[0], need[1]))
                nxt[(i, k)] = need[0]
            pad = patch_pad(op.window, box, needed(op.window, box, hw[op.inputs[0]])) if op.window else ()
            calls.append(Call(k, (a, b), tuple(reads), pad))
        firsts = [nxt[(x, kk)] for kk in readers[x] if nxt[(x, kk)] is not None]
        lo[x] = min(firsts) if firsts else hi[x][r + 1]
        kept = {t: max(lo[t], hi[t][r]) for t in ring}
        steps.append(Step(r, lo, kept, (kept[x], hi[x][r + 1]), calls[::-1]))
    tp.steps = steps[::-1]
    tp.capacity = {t: max(hi[t][st.r + 1] - st.lo[t] for st in tp.steps) for t in ring}
    return tp


def plan(ops: list[StageOp], hw: dict[str, tuple[int, int]], x: str, q: int) -> list[TilePlan]:
    """The rolling schedule of every one of ``q`` near-equal column tiles of S, left to right."""
    return [tile_plan(ops, hw, x, cols) for cols in split(hw[ops[-1].output][1], q)]


__all__ = ["Call", "Step", "TilePlan", "plan", "tile_plan"]
