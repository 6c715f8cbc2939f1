"""Geometry of patch-based execution (issue 20, MCUNetV2): which region of every tensor of a stage one tile
of the split tensor needs.

A box is (r0, r1, c0, c1): rows [r0, r1) and columns [c0, c1) of an NHWC tensor, half-open. A stage op is
``StageOp(inputs, output, window)``: ``window`` is a convolution-like op's geometry (a CONV_2D or
DEPTHWISE_CONV_2D: kernel, stride, dilation, top/left padding), None for an element-wise op (one output pixel
reads the same pixel of each input). Pure Python, no TVM: tests/test_patches.py checks it against a
brute-force enumeration of the pixels each output pixel reads.

Output rows [a, b) of a convolution read input rows [a*s - pt, (b-1)*s - pt + (k-1)*d], clipped to the
tensor. The part cut off at the top is the patch kernel's own top padding (``patch_pad``), so a border patch
pads exactly as the whole operator did and an interior halo is real data; the bottom and right are padded
by the kernel's bounds (an input tap past the patch's last row is padding only where the box was clipped
at the tensor's end, i.e. where the whole operator padded too).
"""

from __future__ import annotations

from dataclasses import dataclass

Box = tuple[int, int, int, int]


@dataclass(frozen=True)
class Window:
    kh: int
    kw: int
    sh: int
    sw: int
    dh: int
    dw: int
    pt: int  # top padding of the whole operator
    pl: int  # left padding


@dataclass(frozen=True)
class StageOp:
    inputs: tuple[str, ...]  # activation inputs (constants left out)
    output: str
    window: Window | None  # None: element-wise


def _span(a: int, b: int, k: int, s: int, d: int, pad: int, size: int) -> tuple[int, int]:
    lo = a * s - pad
    hi = (b - 1) * s - pad + (k - 1) * d + 1
    return max(0, lo), min(size, hi)


def needed(window: Window | None, out_box: Box, in_hw: tuple[int, int]) -> Box:
    """The input box an op reads to compute ``out_box`` of its output (clipped to the input's H, W)."""
    if window is None:
        return out_box
    r0, r1, c0, c1 = out_box
    w = window
    return (*_span(r0, r1, w.kh, w.sh, w.dh, w.pt, in_hw[0]), *_span(c0, c1, w.kw, w.sw, w.dw, w.pl, in_hw[1]))


def patch_pad(window: Window, out_box: Box, in_box: Box) -> tuple[int, int, int, int]:
    """(top, left, bottom, right) padding of the patch kernel computing ``out_box`` from ``in_box``: the
    rows/columns of the whole operator's window that fall before row/column 0 (top, left) or past the
    input box's end (bottom, right; nonzero only where the box was clipped at the tensor's end)."""
    r0, r1, c0, c1 = out_box
    w = window
    top = in_box[0] - (r0 * w.sh - w.pt)
    left = in_box[2] - (c0 * w.sw - w.pl)
    bottom = ((r1 - 1) * w.sh - w.pt + (w.kh - 1) * w.dh + 1) - in_box[1]
    right = ((c1 - 1) * w.sw - w.pl + (w.kw - 1) * w.dw + 1) - in_box[3]
    return top, left, max(0, bottom), max(0, right)


def split(n: int, parts: int) -> list[tuple[int, int]]:
    """``n`` rows in ``parts`` near-equal contiguous ranges (the first ones one longer)."""
    base, extra = divmod(n, parts)
    out, start = [], 0
    for i in range(parts):
        size = base + (1 if i < extra else 0)
        out.append((start, start + size))
        start += size
    return out


def grid(h: int, w: int, p: int, q: int) -> list[list[Box]]:
    """The tiles of an h x w tensor in p row bands of q tiles each (band by band, left to right)."""
    return [[(r0, r1, c0, c1) for c0, c1 in split(w, q)] for r0, r1 in split(h, p)]


def union(a: Box | None, b: Box) -> Box:
    if a is None:
        return b
    return min(a[0], b[0]), max(a[1], b[1]), min(a[2], b[2]), max(a[3], b[3])


def regions(ops: list[StageOp], tile: Box, hw: dict[str, tuple[int, int]]) -> tuple[dict[str, Box], dict]:
    """Back-propagate ``tile`` of the last op's output through ``ops`` (in execution order).
    Returns (box of every tensor: the bounding box of what its readers need; per (op index, input) the box
    that op itself needs of that input -- smaller than the tensor's box where another reader needs more)."""
    boxes: dict[str, Box] = {ops[-1].output: tile}
    wants: dict = {}
    for i in range(len(ops) - 1, -1, -1):
        op = ops[i]
        out = boxes.get(op.output)
        if out is None:  # nothing downstream reads it for this tile (cannot happen in a single-cut stage)
            continue
        for x in op.inputs:
            need = needed(op.window, out, hw[x])
            wants[(i, x)] = need
            boxes[x] = union(boxes.get(x), need)
    return boxes, wants


def box_size(box: Box) -> tuple[int, int]:
    return box[1] - box[0], box[3] - box[2]
