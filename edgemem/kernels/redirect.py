"""Redirecting a kernel's output: the same computation, its result stored somewhere else.

Every kernel here ends in stores to its last parameter, the output. Rewriting only those stores (and
the blocks' write regions that name them) gives, for any kernel, without knowing how it was built:

- ``into_slice``: the output is a slice of a bigger tensor along one axis (a concatenation's input
  written straight into its place in the concatenation);
- ``dequantized``: the int8 value is stored as the float32 a DEQUANTIZE would make of it.

Both refuse (``RedirectError``) a kernel that reads its own output back, where redirecting the
stores alone would change what it reads.
"""

from __future__ import annotations

import tvm
import tvm_ffi
from tvm import tirx

from . import kernel_attrs


class RedirectError(ValueError):
    """The kernel's output cannot be redirected by rewriting its stores."""


def _output(prim: tirx.PrimFunc):
    out = prim.params[-1]
    if not isinstance(out.ty, tirx.BufferType):
        raise RedirectError("the kernel's last parameter is not a buffer")
    return out


def only_stores_output(prim: tirx.PrimFunc) -> bool:
    """True if the kernel never reads its output (it only stores into it)."""
    out = _output(prim)
    reads = []
    tvm_ffi.structural_walk(prim.body, (tvm.ir.TensorLoad, lambda load: reads.append(load) if load.source.same_as(out) else None))
    return not reads


def _redirect(prim: tirx.PrimFunc, new_out, store, region) -> tirx.PrimFunc:
    out = _output(prim)
    if not only_stores_output(prim):
        raise RedirectError(f"kernel {prim.attrs.get('global_symbol', '?') if prim.attrs else '?'} reads its output")

    def on_store(s):
        return store(s) if s.buffer.same_as(out) else s

    def on_region(r):
        return region(r) if r.source.same_as(out) else r

    body = tvm_ffi.structural_map(prim.body, [(tirx.BufferStore, on_store), (tvm.ir.TensorRegion, on_region)])
    new = tirx.PrimFunc([*prim.params[:-1], new_out], body, attrs=prim.attrs)
    # the build spec describes the kernel before the redirect: a pass rebuilding from it would undo it
    return kernel_attrs.without_spec(new)


def into_slice(prim: tirx.PrimFunc, full_shape, axis: int, start: int) -> tirx.PrimFunc:
    """``prim`` writing its output into ``full[..., start:start + n, ...]`` (``axis``) of a new last
    parameter ``full``; the rest of ``full`` is not touched, so the same function serves as an
    in-place call (``call_tir_inplace`` over a partly written ``full``) or as its first writer."""
    out = _output(prim)
    full = tirx.decl_buffer(tuple(int(d) for d in full_shape), str(out.ty.dtype), "full")

    def shifted(indices):
        idx = list(indices)
        idx[axis] = idx[axis] + start
        return idx

    def region(r):
        rg = list(r.region)
        rg[axis] = tvm.ir.Range.from_min_extent(rg[axis].min + start, rg[axis].extent)
        return tirx.BufferRegion(full, rg)

    store = lambda s: tirx.BufferStore(full, s.value, shifted(s.indices))  # noqa: E731
    return _redirect(prim, full, store, region).with_attr("tirx.noalias", True)


def dequantized(prim: tirx.PrimFunc, scale: float, zero_point: int) -> tirx.PrimFunc:
    """``prim`` storing float32 ``(v - zero_point) * scale`` for each int8 ``v`` it computes: the very
    expression of kernels/int8_ops.dequantize_float, so the result is bit for bit the same."""
    out = _output(prim)
    if str(out.ty.dtype) != "int8":
        raise RedirectError(f"output dtype {out.ty.dtype} is not int8")
    real = tirx.decl_buffer(tuple(out.ty.shape), "float32", "out_f")

    def store(s):
        value = (s.value.astype("int32") - zero_point).astype("float32") * tirx.const(float(scale), "float32")
        return tirx.BufferStore(real, value, s.indices)

    return _redirect(prim, real, store, lambda r: tirx.BufferRegion(real, list(r.region)))
