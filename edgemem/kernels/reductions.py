"""Kernels of the reduction family with TFLite Micro's arithmetic: REDUCE_MAX / REDUCE_MIN (int8, float32),
ARG_MAX / ARG_MIN, CUMSUM (float32, int8), RESIZE_BILINEAR (int8), and the int16 SUM / MEAN, pools and
RESIZE_NEAREST_NEIGHBOR (type-generic builders at the end).

Every reduction keeps its accumulator in a register (``int8_ops._scalar_accumulator`` for TE reductions, a
one-element ``decl_buffer`` in the hand-written loops): no scratch of the input's size. SUM and MEAN of int8
reuse ``int8_ops.mean`` (TFLM's QuantizedMeanOrSum), int8 pools reuse ``int8_ops`` pools.
"""

from __future__ import annotations

import numpy as np
from tvm import te, tirx
from tvm.script import tirx as T

from .fixed_point import clamp_to_int8, multiply_by_quantized_multiplier
from .int8_ops import _scalar_accumulator


def reduced_shape(x_shape, axes, keep_dims: bool) -> tuple[int, ...]:
    return tuple(1 if a in axes else int(d) for a, d in enumerate(x_shape) if keep_dims or a not in axes)


def _source_index(x_shape, axes: dict, keep_dims: bool, idx):
    """The input index read for output index ``idx`` and the reduce axes ``axes`` (input axis -> IterVar)."""
    src, k = [], 0
    for a in range(len(x_shape)):
        if a in axes:
            src.append(axes[a])
            k += 1 if keep_dims else 0
        else:
            src.append(idx[k])
            k += 1
    return tuple(src)


# TFLM's comparisons, the running value first: an element replaces it only when strictly larger (smaller), so a
# NaN element is passed over as in TFLM (TVM's max/min would keep it).
_tflm_max = te.comm_reducer(lambda acc, v: tirx.Select(v > acc, v, acc), lambda t: tirx.min_value(t), name="tflm_max")
_tflm_min = te.comm_reducer(lambda acc, v: tirx.Select(v < acc, v, acc), lambda t: tirx.max_value(t), name="tflm_min")


def reduce_extreme(x_shape, axes, keep_dims: bool, dtype: str, kind: str):
    """REDUCE_MAX / REDUCE_MIN over ``axes``: TFLM's ReduceGeneric starts from the type's lowest (max) or
    highest (min) value and keeps the larger (smaller) element; no requantization (int8 input and output
    share one quantization)."""
    axes = sorted(int(a) for a in axes)
    x = te.placeholder(tuple(x_shape), dtype, name="x")
    raxes = {a: te.reduce_axis((0, int(x_shape[a])), f"r{a}") for a in axes}
    out_shape = reduced_shape(x_shape, raxes, keep_dims)
    reducer = _tflm_max if kind == "max" else _tflm_min
    acc = te.compute(out_shape, lambda *i: reducer(x[_source_index(x_shape, raxes, keep_dims, i)], axis=list(raxes.values())), name="acc")
    out = te.compute(out_shape, lambda *i: acc[i], name="out")
    return _scalar_accumulator(te.create_prim_func([x, out]), ["acc"])


def split_axis(x_shape, axis: int) -> tuple[int, int, int]:
    """(outer, n, inner): the element counts before, along and after ``axis``."""
    outer = int(np.prod([int(d) for d in x_shape[:axis]], dtype=np.int64))
    inner = int(np.prod([int(d) for d in x_shape[axis + 1:]], dtype=np.int64))
    return outer, int(x_shape[axis]), inner


def arg_extreme(x_shape, axis: int, in_dtype: str, out_dtype: str, is_max: bool):
    """ARG_MAX / ARG_MIN along ``axis`` of an [outer, n, inner] view: TFLM starts from element 0 and moves on
    only to a strictly larger (smaller) value, so the first index wins a tie. An int64 output is written as two
    int32 words (index, 0; little-endian, as the Cortex-M and the host): the arena aligns tensors to 4 bytes
    only, and an int64 store there is misaligned for C."""
    outer, n, inner = split_axis(x_shape, axis)
    x_shape = tuple(int(d) for d in x_shape)
    out_shape = x_shape[:axis] + x_shape[axis + 1:]
    words = 2 if out_dtype == "int64" else 1

    @T.prim_func
    def arg_max(x_in: T.Buffer(x_shape, in_dtype), out_in: T.Buffer(out_shape, out_dtype)):
        x = T.decl_buffer((outer, n, inner), in_dtype, data=x_in.data)
        out = T.decl_buffer((outer * inner * words,), "int32", data=out_in.data)
        best = T.decl_buffer((1,), in_dtype)
        index = T.decl_buffer((1,), "int32")
        for o, i in T.grid(outer, inner):
            best[0] = x[o, 0, i]
            index[0] = 0
            for k in range(1, n):
                if x[o, k, i] > best[0]:
                    best[0] = x[o, k, i]
                    index[0] = k
            out[(o * inner + i) * words] = index[0]
            if words == 2:
                out[(o * inner + i) * words + 1] = 0

    @T.prim_func
    def arg_min(x_in: T.Buffer(x_shape, in_dtype), out_in: T.Buffer(out_shape, out_dtype)):
        x = T.decl_buffer((outer, n, inner), in_dtype, data=x_in.data)
        out = T.decl_buffer((outer * inner * words,), "int32", data=out_in.data)
        best = T.decl_buffer((1,), in_dtype)
        index = T.decl_buffer((1,), "int32")
        for o, i in T.grid(outer, inner):
            best[0] = x[o, 0, i]
            index[0] = 0
            for k in range(1, n):
                if x[o, k, i] < best[0]:
                    best[0] = x[o, k, i]
                    index[0] = k
            out[(o * inner + i) * words] = index[0]
            if words == 2:
                out[(o * inner + i) * words + 1] = 0

    return arg_max if is_max else arg_min


def cumsum_float(x_shape, axis: int, exclusive: bool, reverse: bool):
    """CUMSUM of float32 (TFLM's reference CumSum): a running float sum along ``axis`` in the scan order
    (from the end when ``reverse``); ``exclusive`` writes the sum before adding the element."""
    outer, n, inner = split_axis(x_shape, axis)
    rev, excl = int(bool(reverse)), int(bool(exclusive))
    shape = tuple(int(d) for d in x_shape)

    @T.prim_func
    def cumsum(x_in: T.Buffer(shape, "float32"), out_in: T.Buffer(shape, "float32")):
        x = T.decl_buffer((outer, n, inner), "float32", data=x_in.data)
        out = T.decl_buffer((outer, n, inner), "float32", data=out_in.data)
        acc = T.decl_buffer((1,), "float32")
        for o, i in T.grid(outer, inner):
            acc[0] = T.float32(0)
            for k in range(n):
                if excl == 1:
                    out[o, k + rev * (n - 1 - 2 * k), i] = acc[0]
                acc[0] = acc[0] + x[o, k + rev * (n - 1 - 2 * k), i]
                if excl == 0:
                    out[o, k + rev * (n - 1 - 2 * k), i] = acc[0]

    return cumsum


def cumsum_int8(x_shape, axis: int, exclusive: bool, reverse: bool, in_zp: int, in_mult: int, in_shift: int,
                out_mult: int, out_shift: int, out_zp: int):
    """CUMSUM of int8, TFLM's integer CumSum: each element (x - in_zp) << 20 rescaled by the input multiplier
    (0.5), summed in int32, the sum rescaled to the output. TFLM starts the running sum at the rescaled
    -in_zp (not 0), which shows in exclusive sums and is reproduced here."""
    outer, n, inner = split_axis(x_shape, axis)
    rev, excl = int(bool(reverse)), int(bool(exclusive))
    shape = tuple(int(d) for d in x_shape)
    left = 1 << 20

    def scaled(v):
        return multiply_by_quantized_multiplier(v * left, in_mult, in_shift)

    def requant(v):
        r = multiply_by_quantized_multiplier(v, out_mult, out_shift) + out_zp
        return T.Cast("int8", T.max(T.min(r, 127), -128))

    @T.prim_func
    def cumsum(x_in: T.Buffer(shape, "int8"), out_in: T.Buffer(shape, "int8")):
        x = T.decl_buffer((outer, n, inner), "int8", data=x_in.data)
        out = T.decl_buffer((outer, n, inner), "int8", data=out_in.data)
        acc = T.decl_buffer((1,), "int32")
        for o, i in T.grid(outer, inner):
            acc[0] = scaled(T.int32(-in_zp))
            for k in range(n):
                if excl == 1:
                    out[o, k + rev * (n - 1 - 2 * k), i] = requant(acc[0])
                # int32 addition wrapping as TFLM's does on its targets, without C's signed-overflow UB
                acc[0] = T.Cast("int32", T.Cast("int64", acc[0]) + T.Cast("int64", scaled(T.Cast("int32", x[o, k + rev * (n - 1 - 2 * k), i]) - in_zp)))
                if excl == 0:
                    out[o, k + rev * (n - 1 - 2 * k), i] = requant(acc[0])

    return cumsum


# ---------------------------------------------------------------- RESIZE_BILINEAR

def bilinear_sources_int(in_size: int, out_size: int, align_corners: bool, half_pixel: bool) -> np.ndarray:
    """Per output row (column): [low index, high index, position - 1024 * low] in TFLM's 10-bit fixed point
    (ComputeInterpolationValuesInteger, C's truncating division), int32 [out_size, 3]."""

    def cdiv(a: int, b: int) -> int:  # C's truncation toward zero
        q = abs(a) // abs(b)
        return q if (a >= 0) == (b > 0) else -q

    if align_corners and out_size > 1:
        scale = cdiv((1 << 10) * (in_size - 1) + (out_size - 1) // 2, out_size - 1)
    else:
        scale = cdiv((1 << 10) * in_size + out_size // 2, out_size)
    rows = []
    for v in range(out_size):
        pos = v * scale + cdiv(scale, 2) - (1 << 9) if half_pixel else v * scale
        low = max(cdiv(pos, 1 << 10), 0)
        high = min(cdiv(pos + (1 << 10) - 1, 1 << 10), in_size - 1)
        rows.append((low, high, pos - (1 << 10) * low))
    return np.array(rows, dtype=np.int32).reshape(out_size, 3)


def resize_bilinear_int8(x_shape, out_hw):
    """RESIZE_BILINEAR of int8 (TFLM's ResizeBilinearInteger): the four neighbours weighted in 10-bit fixed
    point per axis (a 20-bit product), summed in int64, rounded half away from zero. The neighbour indices
    and weights come from host-made tables (``bilinear_sources_int``); no requantization (TFLM has none)."""
    n, h, w, c = (int(d) for d in x_shape)
    oh, ow = (int(d) for d in out_hw)
    x = te.placeholder((n, h, w, c), "int8", name="x")
    rows = te.placeholder((oh, 3), "int32", name="rows")
    cols = te.placeholder((ow, 3), "int32", name="cols")
    one = 1 << 10

    def out_fn(b, i, j, ch):
        y0, y1, dy = rows[i, 0], rows[i, 1], rows[i, 2].astype("int64")
        x0, x1, dx = cols[j, 0], cols[j, 1], cols[j, 2].astype("int64")

        def px(yy, xx):
            return x[b, yy, xx, ch].astype("int64")

        total = (px(y0, x0) * (one - dy) * (one - dx) + px(y1, x0) * dy * (one - dx)
                 + px(y0, x1) * (one - dy) * dx + px(y1, x1) * dy * dx)
        half = tirx.const(1 << 19, "int64")
        rounded = tirx.Select(total > tirx.const(0, "int64"), total + half, total - half)
        return tirx.truncdiv(rounded, tirx.const(1 << 20, "int64")).astype("int8")

    out = te.compute((n, oh, ow, c), out_fn, name="out")
    return te.create_prim_func([x, rows, cols, out])


# ---------------------------------------------------------------- int16 (and any integer type) reductions and pools
#
# TFLM runs SUM, MEAN, AVERAGE_POOL_2D, MAX_POOL_2D and RESIZE_NEAREST_NEIGHBOR on int16 with the int8 kernels'
# arithmetic, templated on the type (reduce_common.cc QuantizedMeanOrSum<int16_t>, integer_ops/pooling.h's int16
# overloads): the builders below take the element type; the int8 lowerings keep int8_ops' kernels.

def _type_range(dtype: str) -> tuple[int, int]:
    bits = int(dtype.lstrip("int"))
    return -(1 << (bits - 1)), (1 << (bits - 1)) - 1


def mean_or_sum(x_shape, axes, keep_dims: bool, dtype: str, in_zp: int, multiplier: int, shift: int, out_zp: int):
    """SUM / MEAN of an integer tensor, TFLM's QuantizedMeanOrSum: the int32 sum of (x - in_zp) over ``axes``,
    MultiplyByQuantizedMultiplier (the int32 form) by ``multiplier, shift`` (MEAN: 1/count folded in, see
    fixed_point.mean_multiplier), plus out_zp, clamped to the type. TFLM sums in int32 too (it wraps only past
    2^31 / 32768 = 65536 int16 elements per output, which this sum does not reproduce)."""
    axes = sorted(int(a) for a in axes)
    lo, hi = _type_range(dtype)
    x = te.placeholder(tuple(x_shape), dtype, name="x")
    raxes = {a: te.reduce_axis((0, int(x_shape[a])), f"r{a}") for a in axes}
    out_shape = reduced_shape(x_shape, raxes, keep_dims)
    acc = te.compute(
        out_shape,
        lambda *i: te.sum(x[_source_index(x_shape, raxes, keep_dims, i)].astype("int32") - in_zp, axis=list(raxes.values())),
        name="acc",
    )

    def out_fn(*i):
        return clamp_to_int8(multiply_by_quantized_multiplier(acc[i], multiplier, shift) + out_zp, lo, hi, dtype)

    out = te.compute(out_shape, out_fn, name="out")
    return _scalar_accumulator(te.create_prim_func([x, out]), ["acc"])


def _pool_window(h, w, i, j, rh, rw, stride, pad):
    ih = i * stride[0] + rh - pad[0]
    iw = j * stride[1] + rw - pad[1]
    return ih, iw, tirx.all(ih >= 0, ih < h, iw >= 0, iw < w)


def average_pool(x_shape, dtype: str, pool, stride, pad, out_shape, act_min: int, act_max: int):
    """AVERAGE_POOL_2D of an integer type (TFLM's integer AveragePool): the int32 sum of the in-bounds window
    elements divided by their count, rounded half away from zero (C's truncating division of sum +- count/2),
    clamped to the fused activation's range."""
    n, h, w, c = (int(d) for d in x_shape)
    out_shape = tuple(int(d) for d in out_shape)
    x = te.placeholder((n, h, w, c), dtype, name="x")
    rh, rw = te.reduce_axis((0, int(pool[0])), "rh"), te.reduce_axis((0, int(pool[1])), "rw")

    def sum_fn(b, i, j, ch):
        ih, iw, ok = _pool_window(h, w, i, j, rh, rw, stride, pad)
        return te.sum(tirx.if_then_else(ok, x[b, ih, iw, ch].astype("int32"), 0), axis=[rh, rw])

    total = te.compute(out_shape, sum_fn, name="acc")

    def out_fn(b, i, j, ch):
        h0, w0 = i * stride[0] - pad[0], j * stride[1] - pad[1]
        cnt = ((tirx.Min(h0 + pool[0], h) - tirx.Max(h0, 0)) * (tirx.Min(w0 + pool[1], w) - tirx.Max(w0, 0))).astype("int32")
        s = total[b, i, j, ch]
        half = tirx.truncdiv(cnt, 2)
        avg = tirx.Select(s > 0, tirx.truncdiv(s + half, cnt), tirx.truncdiv(s - half, cnt))
        return clamp_to_int8(avg, act_min, act_max, dtype)

    out = te.compute(out_shape, out_fn, name="out")
    return _scalar_accumulator(te.create_prim_func([x, out]), ["acc"])


def max_pool(x_shape, dtype: str, pool, stride, pad, out_shape, act_min: int, act_max: int):
    """MAX_POOL_2D of an integer type: the largest in-bounds window element (TFLM starts from the type's
    lowest), clamped to the fused activation's range."""
    n, h, w, c = (int(d) for d in x_shape)
    out_shape = tuple(int(d) for d in out_shape)
    lo, _ = _type_range(dtype)
    x = te.placeholder((n, h, w, c), dtype, name="x")
    rh, rw = te.reduce_axis((0, int(pool[0])), "rh"), te.reduce_axis((0, int(pool[1])), "rw")

    def max_fn(b, i, j, ch):
        ih, iw, ok = _pool_window(h, w, i, j, rh, rw, stride, pad)
        return te.max(tirx.if_then_else(ok, x[b, ih, iw, ch].astype("int32"), lo), axis=[rh, rw])

    peak = te.compute(out_shape, max_fn, name="acc")
    out = te.compute(out_shape, lambda *i: clamp_to_int8(peak[i], act_min, act_max, dtype), name="out")
    return _scalar_accumulator(te.create_prim_func([x, out]), ["acc"])


def resize_nearest(x_shape, dtype: str, out_hw):
    """RESIZE_NEAREST_NEIGHBOR (NHWC) of any element type: a copy through host-made source row / column tables
    (int32 [out_h], [out_w]; TFLM's GetNearestNeighbor, see passes/integerize.nearest_neighbor_sources)."""
    n, h, w, c = (int(d) for d in x_shape)
    oh, ow = (int(d) for d in out_hw)
    x = te.placeholder((n, h, w, c), dtype, name="x")
    rows = te.placeholder((oh,), "int32", name="rows")
    cols = te.placeholder((ow,), "int32", name="cols")
    out = te.compute((n, oh, ow, c), lambda b, i, j, ch: x[b, rows[i], cols[j], ch], name="out")
    return te.create_prim_func([x, rows, cols, out])
