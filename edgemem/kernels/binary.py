"""Elementwise kernels of several operands with numpy broadcasting (TFLM's Broadcast*Slow: every operand read
through broadcast indices, a size-1 axis read at index 0), and the per-element arithmetic of TFLM's int8
binary operators (SUB, SQUARED_DIFFERENCE, comparisons with scaling, ADD_N, DIV) and of its wrapping int32
ones.
"""

from __future__ import annotations

from typing import Callable, Sequence

from tvm import te, tirx

from .fixed_point import clamp_to_int8, multiply_by_quantized_multiplier, rounding_divide_by_pot, saturating_rounding_doubling_high_mul


def broadcast_index(idx, shape, out_rank):
    """numpy broadcasting: right-align ``shape`` under the output, size-1 axes read index 0."""
    lead = out_rank - len(shape)
    return tuple(0 if int(d) == 1 else idx[lead + k] for k, d in enumerate(shape))


def elementwise(operands: Sequence[tuple[tuple[int, ...], str]], out_shape, out_dtype: str, fn: Callable):
    """``out[i] = fn(v0, v1, ...)`` where vk is operand k (shape, dtype) read at i through broadcasting.
    A 0-d operand is read as a 1-element one."""
    out_shape = tuple(int(d) for d in out_shape)
    rank = len(out_shape)
    holders = [te.placeholder(tuple(shape) or (1,), dtype, name=f"in{k}") for k, (shape, dtype) in enumerate(operands)]

    def out_fn(*idx):
        values = [h[broadcast_index(idx, tuple(h.shape), rank)] for h in holders]
        return fn(*values)

    out = te.compute(out_shape or (1,), out_fn, name="out")
    return te.create_prim_func([*holders, out])


# ---------------------------------------------------------------- int8 per-element arithmetic

def rescaled(v, offset: int, left_shift: int, multiplier: int, shift: int):
    """TFLM's (offset + v) << left_shift, then MultiplyByQuantizedMultiplierSmallerThanOneExp (int32)."""
    return multiply_by_quantized_multiplier((v.astype("int32") + offset) * (1 << left_shift), multiplier, shift)


def wrap_int32(fn: Callable):
    """An int32 operation with two's-complement wrapping (TFLM's int32 ADD/SUB/MUL wrap: WrappingMul and
    friends; C's signed overflow is undefined): computed on int64, then narrowed. ``fn`` must keep its
    int64 intermediates exact (a product of two int32 values, a sum of a few). Not on uint32: TVM's
    analyzer takes a cast of an unsigned value as non-negative and drops a later clamp at 0."""

    def wrapped(*values):
        return fn(*[v.astype("int64") for v in values]).astype("int32")

    return wrapped


def clamp(v, lo, hi, dtype: str):
    return tirx.Min(tirx.Max(v, tirx.const(lo, dtype)), tirx.const(hi, dtype))


__all__ = [
    "broadcast_index",
    "clamp",
    "clamp_to_int8",
    "elementwise",
    "rescaled",
    "rounding_divide_by_pot",
    "saturating_rounding_doubling_high_mul",
    "wrap_int32",
]
