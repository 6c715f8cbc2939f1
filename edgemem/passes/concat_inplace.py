"""Concatenation in place: the producers write straight into their slice of the output.

A CONCATENATION copies its inputs into one tensor, so at its step the inputs and the output are live
together (twice the output's bytes). Here each input that a kernel produces for this concatenation
alone is written by that kernel into its slice of the concatenation (kernels/redirect.into_slice, any
axis: the slice needs no contiguity, the kernel's stores carry the offset): the first such producer
creates the whole tensor (``call_tir``), each later one writes into it (``call_tir_inplace``), and an
input that cannot be redirected (read by other ops too, a model input, a kernel that reads its output)
is copied into its slice the same way at the concatenation's step. The concatenation itself is gone.

The price: the whole output is live from the first producer on, and the producers run in the order
of their slices' chain; the orchestrator keeps the pass only where the planned arena drops.
"""

from __future__ import annotations

import numpy as np
import tvm
from tvm import relax, te

from ..kernels import kernel_attrs
from ..kernels.redirect import into_slice, only_stores_output
from .rewrite import Bindings, add_kernel, rebuild


def _concat_axis(in_shapes: list[tuple], out_shape: tuple) -> int | None:
    """The one axis along which the inputs' shapes add up to the output's."""
    for axis in range(len(out_shape)):
        others = all(s[:axis] + s[axis + 1 :] == out_shape[:axis] + out_shape[axis + 1 :] for s in in_shapes)
        if others and sum(s[axis] for s in in_shapes) == out_shape[axis]:
            return axis
    return None


def _shape(expr) -> tuple:
    return tuple(int(d) for d in expr.ty.shape.values)


def _redirectable(b: Bindings, x, concat_var) -> bool:
    """``x`` is a kernel's own output that only this concatenation reads, and the kernel only stores it."""
    k = b.kernel(x)
    if k is None or not isinstance(x, relax.Var):
        return False
    reader = b.sole_reader(x)
    # a kernel whose output has other rules (in place, workspace, state) is left alone
    return reader is not None and reader.same_as(concat_var) and kernel_attrs.plain_output(k.prim) \
        and only_stores_output(k.prim)  # fmt: skip


def _copy_kernel(shape, dtype: str):
    x = te.placeholder(shape, dtype, name="x")
    return te.create_prim_func([x, te.compute(shape, lambda *i: x[i], name="out")])


def _plan(b: Bindings, var):
    """(axis, output type, [(input, slice start, redirectable)]) of a CONCATENATION worth rewriting."""
    k = b.kernel(var)
    if k is None or k.kind != "CONCATENATION":
        return None
    args, out_ty = k.args, b.defs[var].ty_args[0]
    if len(args) < 2 or not all(isinstance(a, relax.Var) for a in args):
        return None
    shapes = [_shape(a) for a in args]
    axis = _concat_axis(shapes, tuple(int(d) for d in out_ty.shape.values))
    if axis is None:
        return None
    starts = np.cumsum([0] + [s[axis] for s in shapes[:-1]]).tolist()
    parts = [(a, int(st), _redirectable(b, a, var)) for a, st in zip(args, starts)]
    return (axis, out_ty, parts) if any(r for _, _, r in parts) else None


def _slice_kernel(bb, prim, like, full_shape, axis, start, tag):
    """``prim`` writing into its slice, added as a kernel named after ``like`` (the kernel it replaces)."""
    return add_kernel(bb, into_slice(prim, full_shape, axis, start), like, tag)


def _write_call(gv, args: list, prev, out_ty):
    if prev is None:
        return relax.call_tir(gv, args, out_ty)
    return relax.call_tir_inplace(gv, [*args, prev], [len(args)], out_ty)


def _rewrite_one(b: Bindings, var, plan, replace: dict) -> None:
    axis, out_ty, parts = plan
    full_shape = tuple(int(d) for d in out_ty.shape.values)
    order = {v: i for i, v in enumerate(b.defs)}
    writers = sorted((p for p in parts if p[2]), key=lambda p: order[p[0]])
    copies = [p for p in parts if not p[2]]
    chain = [w[0] for w in writers]  # binding vars, in binding order; each writes into the previous one's result

    def producer(x, start, position):
        gv, prim, _spec, args = b.kernel(x)
        previous = chain[position - 1] if position else None

        def replacement(bb, env):
            new_gv = _slice_kernel(bb, prim, prim, full_shape, axis, start, "slice")
            prev = env[previous] if previous is not None else None
            return _write_call(new_gv, [env.get(a, a) for a in args], prev, out_ty)

        return replacement

    for i, (x, start, _) in enumerate(writers):
        replace[x] = producer(x, start, i)
    concat_prim = b.kernel(var).prim

    def concatenation(bb, env):
        result = env[chain[-1]]
        for x, start, _ in copies:  # inputs that stay separate tensors: copied into their slice here
            copy = _copy_kernel(_shape(x), str(out_ty.dtype))
            new_gv = _slice_kernel(bb, copy, concat_prim, full_shape, axis, start, f"copy{start}")
            result = bb.emit(_write_call(new_gv, [env.get(x, x)], result, out_ty))
        return result

    replace[var] = concatenation


def concat_inplace(mod: tvm.IRModule) -> tvm.IRModule:
    """Every CONCATENATION with at least one input a kernel can write into its slice."""
    b = Bindings(mod)
    replace: dict = {}
    for var in list(b.defs):
        plan = _plan(b, var)
        if plan is not None and not any(p[0] in replace for p in plan[2]):
            _rewrite_one(b, var, plan, replace)
    return rebuild(mod, replace) if replace else mod
