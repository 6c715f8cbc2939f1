"""Data-movement kernels (any element type): each output element is one input element picked by index
arithmetic, or a constant pad value. Exact for int8 whatever the quantization (raw values move), and for
float32, int32 and bool.

Every builder returns a TIR PrimFunc ``(inputs..., out)``. Index tensors read at run time (GATHER,
EMBEDDING_LOOKUP, DYNAMIC_UPDATE_SLICE) are clamped into range: TFLite Micro stops with an error on an
out-of-range index, edgemem's kernel must not read outside its buffers.
"""

from __future__ import annotations

from typing import Callable, Sequence

from tvm import te, tirx


OPAQUE = 8  # TVM's kOpaque operator pattern


def _placeholders(shapes, dtypes):
    return [te.placeholder(tuple(int(d) for d in s), d, name=f"x{i}") for i, (s, d) in enumerate(zip(shapes, dtypes))]


def pick(in_shapes: Sequence, in_dtypes: Sequence[str], out_shape, out_dtype: str, fn: Callable):
    """out[o] = fn(inputs, o): ``fn`` returns a TIR value built from loads of the input placeholders."""
    xs = _placeholders(in_shapes, in_dtypes)
    out = te.compute(tuple(int(d) for d in out_shape), lambda *o: fn(xs, o), name="out")
    # opaque to TVM's FuseOps (float models): fusing a legalized reshape into a TE kernel fails in FuseTIR
    return te.create_prim_func([*xs, out]).with_attr("op_pattern", OPAQUE)


def clamp_index(value, extent: int):
    """A run-time index (any integer type) as int32 in [0, extent - 1]."""
    v = value.astype("int32") if value.dtype != "int32" else value
    return tirx.Max(tirx.Min(v, int(extent) - 1), 0)


def affine_copy(x_shape, dtype: str, out_shape, starts, steps, sources):
    """out[o] = x[i] with, per input axis a, i[a] = starts[a] + steps[a] * o[sources[a]] (sources[a] None:
    the fixed index starts[a]). Covers SLICE, STRIDED_SLICE (any stride sign), SPLIT, UNPACK, REVERSE_V2."""

    def fn(xs, o):
        idx = tuple(int(b) if src is None else int(b) + int(s) * o[src] for b, s, src in zip(starts, steps, sources))
        return xs[0][idx]

    return pick([x_shape], [dtype], out_shape, dtype, fn)


def stack(shapes, dtype: str, axis: int, out_shape):
    """PACK: input k at position k of a new axis ``axis``."""

    def fn(xs, o):
        rest = o[:axis] + o[axis + 1:]
        value = xs[-1][rest]
        for k in range(len(xs) - 2, -1, -1):
            value = tirx.if_then_else(o[axis] == k, xs[k][rest], value)
        return value

    return pick(shapes, [dtype] * len(shapes), out_shape, dtype, fn)


def cast(shape, in_dtype: str, out_dtype: str):
    """CAST: C's static_cast (float to integer truncates toward zero; to bool: non-zero)."""

    def fn(xs, o):
        v = xs[0][o]
        if out_dtype == "bool":
            return v != tirx.const(0, in_dtype) if in_dtype != "bool" else v
        return v.astype(out_dtype)

    return pick([shape], [in_dtype], shape, out_dtype, fn)


def mirror_index(o, before: int, size: int, symmetric: bool):
    """The source index of output position ``o`` of MIRROR_PAD along one axis."""
    i = o - before
    offset = 0 if symmetric else 1
    low = -i - 1 + offset  # mirrored at the start
    high = 2 * size - 1 - offset - i  # mirrored at the end
    return tirx.if_then_else(i < 0, low, tirx.if_then_else(i >= size, high, i))


def tile(x_shape, dtype: str, out_shape):
    return pick([x_shape], [dtype], out_shape, dtype, lambda xs, o: xs[0][tuple(oi % int(d) for oi, d in zip(o, x_shape))])


def broadcast_to(x_shape, dtype: str, out_shape):
    """BROADCAST_TO: numpy broadcasting, the input's axes aligned to the output's last ones."""
    lead = len(out_shape) - len(x_shape)

    def fn(xs, o):
        return xs[0][tuple(0 if int(d) == 1 else o[lead + a] for a, d in enumerate(x_shape))]

    return pick([x_shape], [dtype], out_shape, dtype, fn)
