"""Partial liveness (issue 20, zero extra MACs): a convolution or pooling writes its output over input rows
no later output pixel reads.

A CONV_2D or DEPTHWISE_CONV_2D (the fast int8 kernels) whose input dies there -- read by nothing else, owning
its storage (a kernel's output or a model input, not a view), not a model output -- keeps its kernel and
gains a shift: its output may sit ``shift`` bytes from the input's start (memory/overlap.py derives the
largest safe shift from the window geometry and the kernel's loop order, pixel by pixel). The output names
the input as its alias with that shift (kernel_attrs' ``overlap``); the planner places the pair with it
when that lowers the arena, and the independent checker tests every pixel's writes against the input bytes
still to be read.

Loop order: the fast kernels walk output pixels upwards, so an output larger than its input (a 1x1
expansion) must start below the input, and a chain of them drifts down the arena. Walked downwards (the
kernel's outer pixel loops reversed here, the passes themselves unchanged), the output may instead start
at the input's start and grow upwards. The pass takes, per convolution, the order whose pair covers fewer
bytes, ascending on a tie (the kernels as built). The kernel's parameters lose ``restrict`` (input and
output may share memory).

MAX_POOL_2D and AVERAGE_POOL_2D (int8, TE kernels computing one output element at a time in NHWC order, their
window in kernel_attrs' ``window``) take the same rule, ascending only.

Left out: the 16x8 kernels, a depthwise convolution
the in-place pass already writes over its input (shift 0, no gain), a convolution whose output grows so
much that no shift saves a byte.
"""

from __future__ import annotations

import numpy as np
import tvm
from tvm import relax, tirx
from tvm.tirx import _ffi_api as _tirx_api

from ..kernels import kernel_attrs
from ..kernels.specs import Conv2D, Depthwise
from ..memory import overlap as geometry
from .rewrite import Bindings, add_kernel, rebuild

_KINDS = (Conv2D, Depthwise)  # the fast int8 builders (spec "folded"): loop order in memory/overlap.py
_OPS = ("CONV_2D", "DEPTHWISE_CONV_2D")
_POOLS = ("MAX_POOL_2D", "AVERAGE_POOL_2D")
SHIFT_ALIGN = 16  # the shift is a multiple of every board's arena alignment (boards/*.toml: 4 to 16)


def _owns_storage(b: Bindings, x) -> bool:
    value = b.defs.get(x)
    return value is None or b.kernel(x) is not None  # a model input, or a kernel's own output


def _candidate(b: Bindings, var):
    """(window geometry, input var) when the kernel bound to ``var`` may write over its input, else None."""
    k = b.kernel(var)
    if k is None:
        return None
    _gv, prim, spec, args = k
    if kernel_attrs.inplace(prim) is not None:
        return None
    if k.kind in _OPS:  # the fast convolutions: x, w, bias, mult, shift, out
        if type(spec) not in _KINDS or not spec.folded or len(prim.params) != 6:
            return None  # a fused kernel (CONV_2D+ADD, ...) keeps no plain convolution's loop order or arguments
    elif k.kind in _POOLS:  # int8 pooling (TE, one output element at a time, ascending): x, out
        if kernel_attrs.window(prim) is None or len(prim.params) != 2:
            return None
    else:
        return None
    x = args[0]
    if not isinstance(x, relax.Var) or isinstance(x.ty, relax.TupleType) or str(x.ty.dtype) != "int8":
        return None
    reader = b.sole_reader(x)
    if reader is None or not reader.same_as(var) or x in b.outputs or not _owns_storage(b, x):
        return None
    return geometry.kernel_geometry(prim), x


def _reversible(prim) -> bool:
    try:
        reverse_pixel_loops(prim)
    except ValueError:  # a kernel of another shape (not declarations then pixel loops): ascending only
        return False
    return True


def _choose(g: dict, at: int, extent: tuple[int, int], orders=(geometry.FORWARD, geometry.REVERSE)):
    """(order, shift, new extent) for a kernel of window geometry ``g`` whose input sits ``at`` bytes from
    its chain's start, the chain so far covering ``extent``: the loop order that keeps the chain narrowest
    (ascending on a tie), or None when no overlap saves a byte. A chain of overlaps is placed as one piece
    (plan/greedy.py's chains), so ascending passes alone drift it down the arena pass after pass;
    alternating orders keep its members near one offset."""
    size_x = int(np.prod(g["x_shape"]))
    size_y = int(np.prod(g["out_shape"]))
    best = None
    for order in orders:
        r = geometry.rows(**g, order=order)
        shift = geometry.aligned_shift(geometry.shift_bound(r, order), SHIFT_ALIGN, order)
        if not geometry.shared_bytes(size_x, size_y, shift):
            continue
        lo, hi = min(extent[0], at + shift), max(extent[1], at + shift + size_y)
        if best is None or hi - lo < best[2][1] - best[2][0]:
            best = (order, shift, (lo, hi))
    return best


def reverse_pixel_loops(prim: tirx.PrimFunc) -> tirx.PrimFunc:
    """The kernel walking its output pixels downwards: the outer loops (one statement each after the buffer
    declarations) run in reverse sequence, each from its last iteration to its first. What one iteration
    does (one pass: a tile of pixels, all channels) is unchanged, so the results are the same."""
    body = prim.body
    items = list(body.seq) if isinstance(body, tirx.SeqStmt) else [body]
    head = [s for s in items if not isinstance(s, tirx.For)]
    loops = [s for s in items if isinstance(s, tirx.For)]
    if not loops or items[: len(head)] != head:
        raise ValueError(f"kernel {prim.attrs.get('global_symbol', '?')}: outer statements are not declarations then loops")
    flipped = []
    for loop in reversed(loops):
        down = tirx.Var(loop.loop_var.name + "_down", str(loop.loop_var.ty))
        # substitute loop_var := min + extent - 1 - down in the body (TVM's Specialize, on a wrapper function
        # whose one parameter is the loop variable, is the substitution the Python API offers)
        wrapper = tirx.PrimFunc([loop.loop_var], loop.body)
        body = _tirx_api.Specialize(wrapper, {loop.loop_var: loop.min + loop.extent - 1 - down}).body
        flipped.append(tirx.For(down, tirx.IntImm(str(loop.loop_var.ty), 0), loop.extent, loop.kind, body,
                                annotations=loop.annotations))  # fmt: skip
    return prim.with_body(tirx.SeqStmt(head + flipped))


def overlap_kernel(prim: tirx.PrimFunc, order: str, shift: int) -> tirx.PrimFunc:
    """The kernel marked for partial liveness over its argument 0 (and reversed for ``reverse``)."""
    new = reverse_pixel_loops(prim) if order == geometry.REVERSE else prim
    mark = kernel_attrs.Overlap(order, int(shift), geometry.TILE)
    return kernel_attrs.with_inplace(new, 0, mark)  # no restrict: input and output may share memory


def _overlap_call(b: Bindings, var, order: str, shift: int):
    gv, prim, _spec, args = b.kernel(var)
    out_ty = b.defs[var].ty_args[0]

    def replacement(bb, env):
        new_gv = add_kernel(bb, overlap_kernel(prim, order, shift), prim)
        return relax.call_tir(new_gv, [env.get(a, a) for a in args], out_ty)

    return replacement


def overlap_convolutions(mod: tvm.IRModule) -> tvm.IRModule:
    """Every eligible convolution's output over its dying input, at the shift its loop order proves safe."""
    b = Bindings(mod)
    replace = {}
    at: dict = {}  # var -> (chain root, offset from the root's start) of outputs written over their input
    extent: dict = {}  # chain root -> (lowest, highest) byte of its members relative to the root
    for var in b.defs:
        k = b.kernel(var)
        inplace = kernel_attrs.inplace(k.prim) if k is not None else None
        if inplace is not None and inplace.overlap is None:
            src = k.args[inplace.index]  # written over its input at the same offset: same place
            if src in at:
                at[var] = at[src]
            continue
        found = _candidate(b, var)
        if found is None:
            continue
        g, x = found
        root, pos = at.get(x, (x, 0))
        size_x = int(np.prod(g["x_shape"]))
        # descending only for the fast convolutions, whose outer loops walk pixel tiles (a TE pooling's outer
        # loop is the batch: reversing it would not reverse the pixels)
        fast = k.kind in _OPS
        orders = (geometry.FORWARD, geometry.REVERSE) if fast and _reversible(k.prim) else (geometry.FORWARD,)
        choice = _choose(g, pos, extent.get(root, (0, size_x)), orders)
        if choice is None:
            continue
        order, shift, extent[root] = choice
        at[var] = (root, pos + shift)
        replace[var] = _overlap_call(b, var, order, shift)
    return rebuild(mod, replace) if replace else mod
