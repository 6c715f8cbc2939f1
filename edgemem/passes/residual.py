"""An element-wise reader fused into the stores of the kernel it reads (an epilogue), and the residual ADD
fused in place (issue 20).

The fast int8 kernels (kernels/int8_ops.*_fast) are hand-written TIR without blocks: TVM infers them opaque,
and FuseTIR cannot merge such a body with another kernel (its buffers carry a layout the block kernels' do not).
They all end the same way, though: every output element is stored exactly once, requantized, into the
output parameter, which they never read back. ``fuse_epilogue`` rewrites each of those stores
``out[idx] = v`` into the element-wise reader's own store ``out2[idx] = f(v, other[idx'])``: the reader's
expression with its read of the tensor substituted by ``v`` (bound once) and its loop indices by ``idx``.
The tensor between the two kernels never exists, and no scratch is added.

``residual_inplace`` (the catalogue pass): a convolution whose result only a same-shape ADD reads is fused
with it, and the fused kernel writes over the ADD's other operand (the skip tensor) when that dies there.
Element ``idx`` of the skip is read in the very statement that stores element ``idx`` of the result, and at
no other time, so writing the result over it is safe whatever order the convolution visits its outputs in
(the planner may also keep them apart: the kernel is correct either way). The arithmetic is TFLM's two
operators, unchanged: requant(conv) rounded to int8 first, then TFLM's ADD of the two int8 values.
"""

from __future__ import annotations

import tvm
import tvm_ffi
from tvm import relax, tirx

from ..ir.kept import per_object
from ..kernels import kernel_attrs
from .rewrite import Bindings, rebuild

_ONCE: dict = {}  # kernel -> _stores_only_once_per_element, kept per object (ir/kept.py)

# the fast kernels' kinds (kernel_attrs.op) whose output stores fuse_epilogue may rewrite: each stores every output
# element once and never reads its output (checked again on the TIR)
ANCHORS = ("CONV_2D", "DEPTHWISE_CONV_2D", "FULLY_CONNECTED")


class _Reader:
    """The one store of an element-wise reader: ``out[v0..vn] = expr`` over the block's iteration vars."""

    def __init__(self, block, store):
        self.iters = [iv.var for iv in block.iter_vars]
        self.store = store


def _single_store(prim: tirx.PrimFunc) -> _Reader | None:
    """The reader's block and its store if the kernel is one block storing out[iters] with the iteration
    domain equal to the output's shape (what te.compute makes of an element-wise operator), else None."""
    blocks, realizes = [], []
    tvm_ffi.structural_walk(prim.body, (tvm.s_tir.stmt.SBlock, lambda b: blocks.append(b)))
    tvm_ffi.structural_walk(prim.body, (tvm.s_tir.stmt.SBlockRealize, lambda r: realizes.append(r)))
    inner = [b for b in blocks if b.name_hint != "root"]
    if len(inner) != 1 or inner[0].init is not None or not isinstance(inner[0].body, tirx.BufferStore):
        return None
    block, store = inner[0], inner[0].body
    out = prim.params[-1]
    shape = [int(d) for d in out.ty.shape]
    if not store.buffer.same_as(out) or len(store.indices) != len(shape) or len(block.iter_vars) != len(shape):
        return None
    for iv, index, extent in zip(block.iter_vars, store.indices, shape):
        if not index.same_as(iv.var) or int(iv.dom.min) != 0 or int(iv.dom.extent) != extent:
            return None
    if any(not (isinstance(r.predicate, tirx.IntImm) and int(r.predicate) == 1) for r in realizes):
        return None
    return _Reader(block, store)


def _stores_only_once_per_element(anchor: tirx.PrimFunc) -> bool:
    """The anchor is one of the fast kernels (block-less TIR, int8 output) and names its output only in its
    stores into it: no load of it, no view of its data (``decl_buffer(data=out.data)``), whose stores the
    rewrite would miss."""
    out = anchor.params[-1]
    if kernel_attrs.op(anchor) not in ANCHORS or kernel_attrs.inplace(anchor) is not None or str(out.ty.dtype) != "int8":
        return False  # int8 only: the int16 kernels are not checked against this form
    blocks, names, stores = [], [], []
    tvm_ffi.structural_walk(anchor.body, [
        (tvm.s_tir.stmt.SBlock, lambda b: blocks.append(b)),
        (tvm.ir.expr.Var, lambda v: names.append(v) if v.same_as(out) or v.same_as(out.data) else None),
        (tirx.BufferStore, lambda st: stores.append(st) if st.buffer.same_as(out) else None),
    ])  # fmt: skip
    return not blocks and len(names) == len(stores) > 0


def fuse_epilogue(anchor: tirx.PrimFunc, reader: tirx.PrimFunc, slot: int) -> tirx.PrimFunc | None:
    """One kernel computing ``reader`` over ``anchor``'s output, which ``reader`` takes as parameter ``slot``
    (same shape as its own output, read at the element it stores). Parameters: the anchor's inputs, then the
    reader's other inputs, then the reader's output. None where the pair does not have that form."""
    if not _stores_only_once_per_element(anchor):
        return None
    r = _single_store(reader)
    a_out, r_in = anchor.params[-1], reader.params[slot]
    if r is None or [int(d) for d in a_out.ty.shape] != [int(d) for d in r_in.ty.shape] \
            or str(a_out.ty.dtype) != str(r_in.ty.dtype) or [int(d) for d in r_in.ty.shape] != [int(d) for d in reader.params[-1].ty.shape]:  # fmt: skip
        return None
    loads = []
    tvm_ffi.structural_walk(r.store.value, (tvm.ir.TensorLoad, lambda ld: loads.append(ld) if ld.source.same_as(r_in) else None))
    if any(len(ld.indices) != len(r.iters) or not all(i.same_as(v) for i, v in zip(ld.indices, r.iters)) for ld in loads):
        return None  # the reader takes the tensor at other elements than the one it stores (a shift, a broadcast)

    def on_store(s):
        if not s.buffer.same_as(a_out):
            return s
        v = tirx.Var("y", str(a_out.ty.dtype))  # the anchor's value, computed once
        env = dict(zip(r.iters, s.indices))

        def on_load(ld):
            if ld.source.same_as(r_in):
                return v
            return tirx.BufferLoad(ld.source, [_subst(i, env) for i in ld.indices])

        value = tvm_ffi.structural_map(r.store.value, [(tvm.ir.TensorLoad, on_load)])
        value = _subst(value, env)
        if len(loads) == 1:  # read once: the anchor's value in place (a binding would be left unused once the
            # C pipeline's CSE names the same value, an unused-variable error under -Werror)
            value = tvm_ffi.structural_map(value, (tirx.Var, lambda x: s.value if x.same_as(v) else x))
            return tirx.BufferStore(reader.params[-1], value, list(s.indices))
        return tirx.SeqStmt([tirx.Bind(v, s.value), tirx.BufferStore(reader.params[-1], value, list(s.indices))])

    body = tvm_ffi.structural_map(anchor.body, [(tirx.BufferStore, on_store)])
    params = [*anchor.params[:-1], *(p for i, p in enumerate(reader.params[:-1]) if i != slot), reader.params[-1]]
    fused = tirx.PrimFunc(params, body, attrs=anchor.attrs)
    # the spec describes the anchor alone: a pass rebuilding from it would drop the epilogue
    return kernel_attrs.without_spec(fused)


def _subst(expr, env: dict):
    return tvm_ffi.structural_map(expr, (tirx.Var, lambda v: next((e for k, e in env.items() if k.same_as(v)), v)))


# -- the Relax side: pairs of calls in main ---------------------------------------------------------------


def _pair(b: Bindings, var, memo: dict | None = None):
    """(anchor var, reader var, slot, fused PrimFunc) if ``var``'s kernel is a fast anchor whose result only
    one element-wise kernel reads, once, and the two fuse; else None. ``memo`` keeps the TIR checks and
    fusions per kernel objects (TVM objects hash by identity) across fuse_pairs' rounds, which meet the same
    kernels again."""
    memo = {} if memo is None else memo
    k = b.kernel(var)
    if k is None:
        return None
    if k.prim not in memo:  # a TIR walk per kernel: kept across passes and trials (1,500 kernels: 11 s a pass)
        memo[k.prim] = per_object(_ONCE, k.prim, _stores_only_once_per_element)
    if not memo[k.prim]:
        return None
    reader = b.sole_reader(var)
    rk = b.kernel(reader) if reader is not None else None
    if rk is None or sum(1 for a in rk.args if a.same_as(var)) != 1:
        return None
    slot = next(i for i, a in enumerate(rk.args) if a.same_as(var))
    key = (k.prim, rk.prim, slot)
    if key not in memo:
        memo[key] = fuse_epilogue(k.prim, rk.prim, slot)
    return None if memo[key] is None else (var, reader, slot, memo[key])


def _kinds(*prims) -> str:
    return "+".join(kernel_attrs.op(p) for p in prims)


def fuse_pairs(mod: tvm.IRModule, keep=lambda name, prim: True) -> tvm.IRModule:
    """Every fast anchor fused with its element-wise reader (not in place); ``keep(name, fused)`` may refuse
    a pair (tvm_fusion's scratch limit). Chains fuse one reader per round (conv -> ADD -> MUL: two rounds)."""
    memo: dict = {}
    while True:
        b = Bindings(mod)
        pairs = _one_per_reader(p for p in (_pair(b, v, memo) for v in b.defs)
                                if p is not None and keep(_name(b, p), _named(b, p)))  # fmt: skip
        if not pairs:
            return mod
        mod = rebuild(mod, {reader: _call(b, anchor, reader, slot, fused) for anchor, reader, slot, fused in pairs},
                      drop={anchor for anchor, *_ in pairs})  # fmt: skip


def _one_per_reader(pairs) -> list:
    """A reader fuses with one anchor (an ADD of two convolutions: the one computed last, in file order)."""
    by_reader = {}
    for p in pairs:
        by_reader[p[1]] = p
    return list(by_reader.values())


def _name(b: Bindings, pair) -> str:
    anchor, reader = pair[0], pair[1]
    return f"{b.kernel(anchor).gv.name_hint}_{b.kernel(reader).gv.name_hint}"


def _named(b: Bindings, pair, inplace: int | None = None) -> tirx.PrimFunc:
    anchor, reader, _slot, fused = pair
    a, r = b.kernel(anchor).prim, b.kernel(reader).prim
    macs = kernel_attrs.macs(a) + kernel_attrs.macs(r)
    fused = kernel_attrs.with_kind(fused, _kinds(a, r), macs, symbol=_name(b, pair))
    if inplace is not None:  # no restrict: the output pointer may equal the skip's
        fused = kernel_attrs.with_inplace(fused, inplace)
    return fused


def _call(b: Bindings, anchor, reader, slot, fused, inplace: int | None = None):
    args = b.kernel(anchor).args + [a for i, a in enumerate(b.kernel(reader).args) if i != slot]
    prim = _named(b, (anchor, reader, slot, fused), inplace)
    out_ty = b.defs[reader].ty_args[0]

    def replacement(bb, env):
        gv = bb.add_func(prim, str(prim.attrs["global_symbol"]))
        return relax.call_tir(gv, [env.get(a, a) for a in args], out_ty)

    return replacement


def _skip_slot(b: Bindings, anchor, reader, slot) -> int | None:
    """Index, in the fused call's arguments, of the ADD's other operand if the result may be written over it:
    a same-shape tensor of the same type that owns its storage, is no model output, and whose other readers
    are kernels other than the anchor (no view of it reaches the anchor). Whether it dies at the ADD is the
    schedule's business: the planner overlaps the two only where it does (memory/model.py's alias rule)."""
    from .inplace import _owns_storage

    rk = b.kernel(reader)
    if rk.kind != "ADD" or len(rk.args) != 2:
        return None
    skip = rk.args[1 - slot]
    out_ty = b.defs[reader].ty_args[0]
    if not isinstance(skip, relax.Var) or isinstance(skip.ty, relax.TupleType) or skip in b.outputs:
        return None
    if [int(d) for d in skip.ty.shape.values] != [int(d) for d in out_ty.shape.values] or str(skip.ty.dtype) != str(out_ty.dtype):
        return None
    others = [r for r in b.readers.get(skip, []) if not r.same_as(reader)]
    if any(r.same_as(anchor) or b.kernel(r) is None for r in others) or not _owns_storage(b, skip):
        return None
    return len(b.kernel(anchor).args)  # the reader's other inputs follow the anchor's: the skip is the first of them


def residual_inplace(mod: tvm.IRModule) -> tvm.IRModule:
    """Every convolution (or FULLY_CONNECTED) whose result only a same-shape ADD reads, fused with it and
    writing over the ADD's other operand where that dies there."""
    b = Bindings(mod)
    candidates = [p for p in (_pair(b, v) for v in b.defs) if p is not None and _skip_slot(b, *p[:3]) is not None]
    replace, drop = {}, set()
    for anchor, reader, slot, fused in _one_per_reader(candidates):
        replace[reader] = _call(b, anchor, reader, slot, fused, inplace=_skip_slot(b, anchor, reader, slot))
        drop.add(anchor)
    return rebuild(mod, replace, drop) if replace else mod
