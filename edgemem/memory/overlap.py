"""Partial liveness (issue 20): an output born pixel by pixel over an input that dies pixel by pixel.

A convolution, depthwise convolution or pooling whose input X dies at its step may write its output Y over the
input bytes no later output pixel reads. Which bytes those are follows from the window geometry and the
kernel's loop order, nothing else:

- the fast kernels (kernels/int8_ops.py ``*_fast``) run one outer loop over output pixels in ascending
  flat order (NHWC: row-major), each pass computing a tile of at most ``TILE`` consecutive pixels, every
  channel of them, reading their input windows and writing their outputs in any order inside the pass; the
  int8 poolings (TE kernels) compute one output element at a time in NHWC order, a tile of one pixel;
- ``reverse`` order (passes/overlap.py reverses the outer loops of a kernel) runs the same passes from the
  last pixel down.

So after pixel q's output bytes are written, the reads still to come are those of pixels q - TILE + 1 and
later (ascending), or q + TILE - 1 and earlier (descending). Y is placed at ``shift`` bytes from X's start
(offset(Y) - offset(X)); the pair is correct when no write lands on an input byte still to be read.

``rows(...)`` lists, per output pixel in write order, the Y-relative bytes written and the X-relative
bytes still to be read afterwards: what the independent checker (plan/check.py) tests with the real
offsets. ``shift_bound`` is the extreme safe shift (ascending: the largest; descending: the smallest), and
``shared_bytes`` the bytes X and Y share at the step (the storage model counts them once).
"""

from __future__ import annotations

import functools

import numpy as np

TILE = 4  # pixels a fast kernel may compute in one pass (they take 2 today; 4 leaves room for wider tiles)
FORWARD, REVERSE = "forward", "reverse"


def _window(o, s, p, k, d, size):
    """First and last valid input index read by outputs ``o`` (array) along one axis; -1/-1 when none."""
    start = o * s - p
    first_tap = np.maximum(0, -(start // d))  # ceil(-start / d) taps lie before index 0
    first_tap = np.where(start >= 0, 0, first_tap)
    last_tap = np.minimum(k - 1, (size - 1 - start) // d)
    lo, hi = start + first_tap * d, start + last_tap * d
    empty = first_tap > last_tap
    return np.where(empty, -1, lo), np.where(empty, -1, hi)


def pixel_windows(x_shape, out_shape, kernel, stride, dilation, pad, in_bytes: int = 1):
    """Per flat output pixel: the lowest and one past the highest input byte its window reads
    (the whole channel depth of every tap row, as the kernels read them). Arrays of length N*HO*WO."""
    n, h, w, c = (int(v) for v in x_shape)
    _, ho, wo, _ = (int(v) for v in out_shape)
    kh, kw = (int(v) for v in kernel)
    sh, sw = (int(v) for v in stride)
    dh, dw = (int(v) for v in dilation)
    pt, pl = int(pad[0]), int(pad[1])
    r0, r1 = _window(np.arange(ho), sh, pt, kh, dh, h)
    c0, c1 = _window(np.arange(wo), sw, pl, kw, dw, w)
    b = np.repeat(np.arange(n), ho * wo)
    i = np.tile(np.repeat(np.arange(ho), wo), n)
    j = np.tile(np.arange(wo), n * ho)
    lo = (((b * h + r0[i]) * w + c0[j]) * c) * in_bytes
    hi = (((b * h + r1[i]) * w + c1[j] + 1) * c) * in_bytes
    none = (r0[i] < 0) | (c0[j] < 0)  # a window entirely in the padding reads nothing
    big = n * h * w * c * in_bytes
    return np.where(none, big, lo), np.where(none, 0, hi)


def rows(x_shape, out_shape, kernel, stride, dilation, pad, order: str = FORWARD, tile: int = TILE,
         in_bytes: int = 1, out_bytes: int = 1) -> list[tuple[int, int, int, int]]:  # fmt: skip
    """Per output pixel in write order: (w0, w1, n0, n1) -- Y bytes [w0, w1) are written while X bytes
    [n0, n1) are still to be read after that write (n0 == n1: nothing left to read)."""
    ints = lambda v: tuple(int(x) for x in v)  # noqa: E731
    return list(_rows(ints(x_shape), ints(out_shape), ints(kernel), ints(stride), ints(dilation), ints(pad), order,
                      int(tile), int(in_bytes), int(out_bytes)))  # fmt: skip


@functools.lru_cache(maxsize=1024)
def _rows(x_shape, out_shape, kernel, stride, dilation, pad, order, tile, in_bytes, out_bytes) -> tuple:
    """``rows`` on hashable arguments, kept: the storage model asks it for every overlapped tensor each time
    a module is read (the orchestrator reads hundreds of modules with the same kernels)."""
    lo, hi = pixel_windows(x_shape, out_shape, kernel, stride, dilation, pad, in_bytes)
    npix = len(lo)
    co = int(out_shape[3]) * out_bytes
    q = np.arange(npix)
    if order == FORWARD:
        # reads after pixel q's write: pixels max(0, q - tile + 1) .. npix - 1
        suffix_lo = np.minimum.accumulate(lo[::-1])[::-1]
        suffix_hi = np.maximum.accumulate(hi[::-1])[::-1]
        k = np.maximum(0, q - tile + 1)
        n0, n1 = suffix_lo[k], suffix_hi[k]
    elif order == REVERSE:
        # reads after pixel q's write (descending): pixels 0 .. min(npix - 1, q + tile - 1)
        prefix_lo = np.minimum.accumulate(lo)
        prefix_hi = np.maximum.accumulate(hi)
        k = np.minimum(npix - 1, q + tile - 1)
        n0, n1 = prefix_lo[k], prefix_hi[k]
        q = q[::-1]
        n0, n1 = n0[::-1], n1[::-1]
    else:
        raise ValueError(f"unknown loop order {order!r}")
    n1 = np.maximum(n0, n1)
    return tuple((int(a) * co, (int(a) + 1) * co, int(b), int(e)) for a, b, e in zip(q, n0, n1))


def shift_bound(pixel_rows, order: str = FORWARD) -> int:
    """Ascending: the largest shift (offset(Y) - offset(X)) at which every write of Y lands below the input
    bytes still to be read; descending: the smallest at which every write lands above them."""
    live = [(w0, w1, n0, n1) for w0, w1, n0, n1 in pixel_rows if n1 > n0]
    if order == FORWARD:
        return min((n0 - w1 for w0, w1, n0, n1 in live), default=1 << 62)
    return max((n1 - w0 for w0, w1, n0, n1 in live), default=-(1 << 62))


def aligned_shift(bound: int, align: int, order: str = FORWARD) -> int:
    """The bound rounded to a multiple of ``align``, towards safety (down ascending, up descending)."""
    return bound // align * align if order == FORWARD else -(-bound // align) * align


def shared_bytes(size_x, size_y, shift):
    """Bytes X = [0, size_x) and Y = [shift, shift + size_y) have in common."""
    return max(0, min(size_x, shift + size_y) - max(0, shift))


def pair_span(size_x: int, size_y: int, shift: int) -> int:
    """Bytes the pair covers at its common step when Y sits ``shift`` bytes from X's start."""
    return max(size_x, shift + size_y) - min(0, shift)


def best_order(x_shape, out_shape, kernel, stride, dilation, pad, align: int = 4, orders=(FORWARD, REVERSE),
               in_bytes: int = 1, out_bytes: int = 1) -> tuple[str, int, int]:  # fmt: skip
    """(order, shift, span) of the loop order whose pair covers the fewest bytes."""
    size_x = int(np.prod(x_shape)) * in_bytes
    size_y = int(np.prod(out_shape)) * out_bytes
    best = None
    for order in orders:
        r = rows(x_shape, out_shape, kernel, stride, dilation, pad, order, in_bytes=in_bytes, out_bytes=out_bytes)
        shift = aligned_shift(shift_bound(r, order), align, order)
        span = pair_span(size_x, size_y, shift) if shared_bytes(size_x, size_y, shift) else size_x + size_y
        if best is None or span < best[2]:
            best = (order, shift, span)
    return best


def kernel_geometry(prim) -> dict | None:
    """The window geometry of a kernel from its attributes (kernels/kernel_attrs.py): a convolution's spec or a
    pooling's window (frontend/ops/reductions.py); None for any other kernel."""
    from ..kernels import kernel_attrs
    from ..kernels.specs import Convolution

    spec = kernel_attrs.spec(prim)
    if isinstance(spec, Convolution):
        return spec.geometry()
    window = kernel_attrs.window(prim)
    return window.geometry() if window is not None else None


def kernel_rows(prim) -> list[tuple[int, int, int, int]]:
    """``rows`` of a kernel marked by passes/overlap.py (its ``overlap`` attribute: order and tile)."""
    from ..kernels import kernel_attrs

    overlap = kernel_attrs.inplace(prim).overlap
    return rows(**kernel_geometry(prim), order=overlap.order, tile=overlap.tile)
