"""Rewriting the lowered module's ``main`` binding by binding: what the memory passes share.

After lowering, ``main`` is one dataflow block of kernel calls (``call_tir``), reshapes and
``TupleGetItem``s; its outputs are the block's output variables. A pass looks at the bindings (who
defines and who reads each variable, through ``Bindings``) and rebuilds ``main`` with some bindings
replaced or dropped; every other binding is copied with its arguments renamed.
"""

from __future__ import annotations

import time
from typing import Callable, NamedTuple

import tvm
import tvm_ffi
from tvm import relax

from ..ir.kept import per_object
from ..kernels import kernel_attrs
from ..timelimit import TimeUp, check, ensure
from ..kernels.specs import KernelSpec


def abandon(bb: relax.BlockBuilder) -> None:
    """End the blocks and function a failed rewrite left open: TVM's BlockBuilder warns on the terminal when
    it is destroyed with open blocks, and a user must see edgemem's message only."""
    for close in (bb._end_block, bb._exit_function_scope):  # noqa: SLF001  (no public way to abandon a scope)
        try:
            close()
        except Exception:  # noqa: BLE001  (nothing was open at that level)
            pass


class Kernel(NamedTuple):
    """A kernel call in main: the kernel's GlobalVar, its PrimFunc, how it was built (None if not from a
    spec), and the call's arguments (Relax expressions, in parameter order)."""

    gv: relax.GlobalVar
    prim: tvm.tirx.PrimFunc
    spec: KernelSpec | None
    args: list

    @property
    def kind(self) -> str:
        """The operator kind the kernel computes ("" for a kernel without one)."""
        return kernel_attrs.op(self.prim) or ""


class Bindings:
    """``defs``: var -> value; ``readers``: var -> the vars whose values read it; ``outputs``: vars returned."""

    def __init__(self, mod: tvm.IRModule):
        self.mod = mod
        func = mod["main"]
        self.params = list(func.params)
        self.defs: dict = {}
        self.readers: dict = {}
        for block in func.body.blocks:
            for b in block.bindings:
                check()  # a pass on thousands of kernels is cut at the search's deadline (edgemem/timelimit.py)
                self.defs[b.var] = b.value
                for a in _vars_in(b.value):
                    self.readers.setdefault(a, []).append(b.var)
        body = func.body.body
        self.outputs = set(_vars_in(body)) if isinstance(body, relax.Tuple) else {body}
        for o in list(self.outputs):  # the frontend may return a tuple variable
            if isinstance(self.defs.get(o), relax.Tuple):
                self.outputs |= set(_vars_in(self.defs[o]))

    def kernel(self, var) -> Kernel | None:
        """The kernel call bound to ``var``, else None."""
        check()  # what every pass asks of each binding it looks at
        value = self.defs.get(var)
        if not (isinstance(value, relax.Call) and getattr(value.op, "name", "") == "relax.call_tir"):
            return None
        gv, args = value.args[0], value.args[1]
        prim = self.mod[gv]
        return Kernel(gv, prim, kernel_attrs.spec(prim), list(args.fields if isinstance(args, relax.Tuple) else [args]))

    def sole_reader(self, var):
        """The one var whose value reads ``var`` (None if several or none, or if ``var`` is returned)."""
        readers = self.readers.get(var, [])
        if var in self.outputs or len(readers) != 1:
            return None
        return readers[0]


def kernel_vars(mod: tvm.IRModule) -> list:
    """The binding var of each kernel call of main, in the order read_graph numbers the ops."""
    out = []
    for block in mod["main"].body.blocks:
        for b in block.bindings:
            if isinstance(b.value, relax.Call) and getattr(b.value.op, "name", "") in ("relax.call_tir", "relax.call_tir_inplace"):
                out.append(b.var)
    return out


def _vars_in(expr) -> list:
    if isinstance(expr, relax.Var):
        return [expr]
    if isinstance(expr, relax.Tuple):
        return [v for f in expr.fields for v in _vars_in(f)]
    if isinstance(expr, relax.Call):
        return [v for a in expr.args for v in _vars_in(a)]
    if isinstance(expr, relax.TupleGetItem):
        return _vars_in(expr.tuple_value)
    return []


def _rename(expr, env: dict):
    if isinstance(expr, relax.Var):
        return env.get(expr, expr)
    if isinstance(expr, relax.Tuple):
        return relax.Tuple([_rename(f, env) for f in expr.fields])
    if isinstance(expr, relax.Call):
        return relax.Call(expr.op, [_rename(a, env) for a in expr.args], expr.attrs, expr.ty_args)
    if isinstance(expr, relax.TupleGetItem):
        return relax.TupleGetItem(_rename(expr.tuple_value, env), expr.index)
    return expr


Replacement = Callable[[relax.BlockBuilder, dict], object]  # (builder, old var -> new var) -> new value


_FUNC_HASH: dict = {}  # (ir/kept.py)


def function_hash(func) -> int:
    """TVM's structural hash of one function, computed once per object: passes rewrite main and add a few
    kernels, the rest are their input module's own objects."""
    return per_object(_FUNC_HASH, func, tvm_ffi.structural_hash)


# the last whole-main hash's seconds: TVM hashes main in one call (module_key; the builder's add_func of a rebuilt
# main), which no deadline stops, and main is about as large each time
_MAIN_SECONDS = [0.0]


def main_hash(func) -> int:
    """TVM's structural hash of main with free variables mapped, not begun when the deadline would pass during it
    (0.2 s CPU on a chain of 5,000 operators: a second under load)."""
    ensure(_MAIN_SECONDS[0])
    t0 = time.perf_counter()
    value = tvm_ffi.structural_hash(func, map_free_vars=True)
    _MAIN_SECONDS[0] = time.perf_counter() - t0
    return value


class _Builder:
    """A BlockBuilder for a rebuilt main whose module holds only what the rebuild adds, standing in for one
    over all the old kernels: TVM's builder hashes every function of its module on the first ``add_func`` (to
    return an equal function's GlobalVar instead of a copy), 16 ms on mcunetv2_large's 300 kernels, once per
    rebuild. Here the old kernels are looked up by their kept hashes, and their names reserved, so the result
    is the module TVM's builder gives: the same names, the old GlobalVar for a kernel equal to an old one."""

    def __init__(self, kernels: dict):
        self._bb = relax.BlockBuilder()
        self._old: dict = {}
        for gv, f in kernels.items():
            check()  # the first hash of each kernel: thousands on a long model
            self._bb.get_unique_name(gv.name_hint)
            self._old.setdefault(function_hash(f), []).append((gv, f))

    def add_func(self, func, func_name: str):
        for gv, f in self._old.get(function_hash(func), ()):
            if tvm_ffi.structural_equal(f, func):
                return gv
        return self._bb.add_func(func, func_name)

    def __getattr__(self, name):
        return getattr(self._bb, name)


def rebuild(mod: tvm.IRModule, replace: dict, drop: set | frozenset = frozenset()) -> tvm.IRModule:
    """``mod`` with main's bindings in ``replace`` (var -> Replacement) rebuilt and those in ``drop`` left out.
    A Replacement may add PrimFuncs through the builder and emit helper bindings before returning the value."""
    func = mod["main"]
    kernels = {gv: f for gv, f in mod.functions.items() if gv.name_hint != "main"}
    bb = _Builder(kernels)  # without the old main, so the new one takes its name
    try:
        return _rebuilt(bb, func, kernels, replace, drop)
    except TimeUp:  # cut by the pass search's deadline: close the builder's scopes quietly (see abandon)
        abandon(bb._bb)  # noqa: SLF001
        raise


def _rebuilt(bb, func, kernels: dict, replace: dict, drop) -> tvm.IRModule:
    env: dict = {}
    with bb.function("main", func.params, attrs=dict(func.attrs) if func.attrs else None):
        with bb.dataflow():
            results = []
            for block in func.body.blocks:
                for b in block.bindings:
                    check()
                    if b.var in drop:
                        continue
                    value = replace[b.var](bb, env) if b.var in replace else _rename(b.value, env)
                    is_output = not isinstance(b.var, relax.DataflowVar)
                    env[b.var] = bb.emit_output(value, name_hint=b.var.name) if is_output else bb.emit(value, name_hint=b.var.name)
                    if is_output:
                        results.append(env[b.var])
            out = _rename(func.body.body, env)
        ensure(2 * _MAIN_SECONDS[0])  # the builder hashes the new main, then the module is made
        bb.emit_func_output(out)
    built = bb.get()
    return tvm.IRModule({**kernels, **dict(built.functions.items())}, attrs=built.attrs, global_infos=built.global_infos)


def add_kernel(bb: relax.BlockBuilder, prim, like, suffix: str = "r") -> relax.GlobalVar:
    """Add ``prim`` as a new kernel with the C-visible attributes of ``like`` (its kind and MACs), named
    after it with ``suffix``."""
    name = f"{like.attrs['global_symbol']}_{suffix}"
    return bb.add_func(kernel_attrs.with_kind(prim, kernel_attrs.op(like), kernel_attrs.macs(like), symbol=name), name)
