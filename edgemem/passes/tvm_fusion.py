"""TVM's operator fusion on the lowered module: AnnotateTIROpPattern -> FuseOps -> FuseTIR.

On edgemem's int8 kernels TVM finds the same groups at every ``fuse_opt_level`` (measured 1, 2, 4 on
the shared models): a convolution with the residual ADD that reads it, an element-wise MUL with the
ADD after it, QUANTIZE with the PAD after it. FuseTIR merges a group into one PrimFunc in which the
tensor between its kernels becomes an internal buffer as large as that tensor: left so, fusion would
only move bytes from the arena into kernel scratch. Each fused kernel is therefore scheduled so that
the internal tensors vanish (an injective producer is inlined into its reader, else the reader into
the producer's store). A group whose kernel still needs more than ``SCRATCH_LIMIT`` bytes of scratch
once lowered (a convolution whose output a PAD reads shifted: neither inline applies) is not fused (its
anchor is held back and the rest may fuse without it); if a fused kernel does not go through the C
path's allocating passes the pass refuses altogether (returns the module unchanged).
``max_pattern`` narrows the groups to kernels of at most that op pattern (``INJECTIVE``: element-wise
chains such as ADD+MUL, QUANTIZE+PAD; no convolution, reduction or softmax).

The fast int8 convolutions and FULLY_CONNECTED (kernels/int8_ops.*_fast) are TIR without blocks, which
TVM infers opaque and FuseTIR could not merge anyway: each is first fused with the element-wise kernel
that alone reads its result (the residual ADD) by rewriting its output stores (passes/residual.py's
``fuse_epilogue``: the same grouping FuseOps makes of an out-element-wise-fusable kernel, the same scratch
limit); TVM's FuseOps and FuseTIR then group the rest.
"""

from __future__ import annotations

import tvm
import tvm.s_tir
import tvm_ffi
from tvm import relax, tirx

from ..kernels import kernel_attrs
from .residual import fuse_pairs

SCRATCH_LIMIT = 256  # bytes of kernel scratch a fused kernel may keep (edgemem's own kernels keep <= 256)


def _group_kinds(mod: tvm.IRModule) -> dict[str, tuple[list[str], int]]:
    """Fused Relax function name -> (kinds of the kernels it calls, their MACs), read after FuseOps."""
    groups = {}
    for group, names in _group_members(mod).items():
        prims = [mod[name] for name in names]
        kinds = [kernel_attrs.op(p) or n for p, n in zip(prims, names)]
        groups[group] = (kinds, sum(kernel_attrs.macs(p) for p in prims))
    return groups


def _inline_internals(func: tirx.PrimFunc) -> tirx.PrimFunc:
    """Compute each internal tensor where it is used: pull its reader into the producer's store
    (reverse_compute_inline), else inline an injective producer into its readers, until nothing moves."""
    sch = tvm.s_tir.Schedule(func)
    params = {p.name for p in func.params}
    moved = True
    while moved:
        moved = False
        for block in _blocks(sch):
            writes = [w.source.name for w in sch.get(block).writes]
            if not writes or any(w in params for w in writes):
                continue
            for reader in sch.get_consumers(block):  # the reader into this store first: a reduction's
                try:  # epilogue keeps its accumulator a scalar that way
                    sch.reverse_compute_inline(reader)
                    moved = True
                    break
                except Exception:  # noqa: BLE001 - this schedule does not apply here
                    continue
            if not moved:
                try:
                    sch.compute_inline(block)
                    moved = True
                except Exception:  # noqa: BLE001 - neither applies: the tensor stays (the scratch check decides)
                    pass
            if moved:
                break
    return sch.mod["main"]


def _blocks(sch) -> list:
    """Every block of the function but the root, in program order."""
    names = []
    tvm_ffi.structural_walk(sch.mod["main"].body, (tvm.s_tir.stmt.SBlock, lambda b: names.append(b.name_hint)), order="pre")
    return [sch.get_sblock(n) for n in dict.fromkeys(names) if n != "root"]


_SCRATCH_CACHE: dict[int, int] = {}  # structural hash of a fused kernel -> its scratch bytes


def _scratch_bytes(funcs: dict[str, tirx.PrimFunc]) -> dict[str, int]:
    """Bytes of scratch each kernel allocates once lowered for plain C (cached: the orchestrator meets
    the same fused kernels in many states). Raises if a kernel does not lower."""
    from ..codegen.kernels_c import allocation_bytes

    keys = {name: tvm_ffi.structural_hash(f) for name, f in funcs.items()}
    todo = {name: f for name, f in funcs.items() if keys[name] not in _SCRATCH_CACHE}
    if todo:
        for name, nbytes in allocation_bytes(todo).items():
            _SCRATCH_CACHE[keys[name]] = nbytes
    return {name: _SCRATCH_CACHE[keys[name]] for name in funcs}


INJECTIVE = 2  # TVM's OpPatternKind kInjective: element-wise, broadcast and index-remapping kernels
OPAQUE = 8  # kOpaque: FuseOps never groups such a kernel


def _annotate(mod: tvm.IRModule, max_pattern: int, held_back: set[str]) -> tvm.IRModule:
    """TVM's own op patterns for our kernels (it infers them from the TIR), with every kernel above
    ``max_pattern`` or in ``held_back`` made opaque so that FuseOps leaves it alone."""
    annotated = relax.transform.AnnotateTIROpPattern()(mod)
    for gv, func in annotated.functions.items():
        if isinstance(func, tirx.PrimFunc) and (_pattern(func) > max_pattern or gv.name_hint in held_back):
            annotated[gv] = func.with_attr("op_pattern", OPAQUE)
    return annotated


def _pattern(func: tirx.PrimFunc) -> int:
    return int((func.attrs or {}).get("op_pattern", OPAQUE))


def _group_members(grouped: tvm.IRModule) -> dict[str, list[str]]:
    """Fused Relax function name -> names of the kernels it calls, read after FuseOps."""
    members = {}
    for gv, func in grouped.functions.items():
        if isinstance(func, relax.Function) and gv.name_hint != "main":
            names = []
            relax.analysis.post_order_visit(func, lambda e, names=names: names.append(e.args[0].name_hint) if (
                isinstance(e, relax.Call) and getattr(e.op, "name", "") == "relax.call_tir") else None)  # fmt: skip
            members[gv.name_hint] = names
    return members


def _fuse_once(mod: tvm.IRModule, level: int, max_pattern: int, held_back: set[str]):
    """One round of FuseOps + FuseTIR: the fused module, each group's kinds, its scheduled kernel, its
    scratch bytes and its members (with their patterns), or None when nothing groups."""
    with tvm.target.Target({"kind": "c"}), tvm.transform.PassContext(opt_level=3):
        annotated = _annotate(mod, max_pattern, held_back)
        grouped = relax.transform.FuseOps(fuse_opt_level=level)(annotated)
        kinds = _group_kinds(grouped)
        if not kinds:
            return None
        fused = relax.transform.DeadCodeElimination()(relax.transform.FuseTIR()(grouped))
    kernels = {gv: _inline_internals(f) for gv, f in fused.functions.items() if gv.name_hint in kinds}
    scratch = _scratch_bytes({gv.name_hint: f for gv, f in kernels.items()})
    patterns = {gv.name_hint: _pattern(f) for gv, f in annotated.functions.items() if isinstance(f, tirx.PrimFunc)}
    members = {g: [(k, patterns[k]) for k in names] for g, names in _group_members(grouped).items()}
    return fused, kinds, kernels, scratch, members


def _to_hold_back(members: list[tuple[str, int]]) -> set[str]:
    """The kernels of a group that kept scratch which the next round leaves unfused: its anchor (the
    convolution, pooling, ...; the others may still fuse among themselves), or all of an injective group."""
    top = max(p for _, p in members)
    return {k for k, p in members if p == top} if top > INJECTIVE else {k for k, _ in members}


def fuse_ops(mod: tvm.IRModule, level: int = 2, max_pattern: int = OPAQUE) -> tvm.IRModule:
    """``mod`` with TVM's fusion groups merged into single kernels that need no internal tensors;
    ``max_pattern=INJECTIVE`` fuses only chains of element-wise/injective kernels (no convolution).
    A group that would keep more than ``SCRATCH_LIMIT`` bytes is taken apart and fusion runs again
    without its anchor, until every group passes (each round holds back at least one more kernel)."""
    if max_pattern > INJECTIVE:  # the fast kernels, which FuseTIR cannot merge, with their element-wise readers
        mod = fuse_pairs(mod, keep=_fits)
    held_back: set[str] = set()
    while True:
        try:
            attempt = _fuse_once(mod, level, max_pattern, held_back)
        except Exception:  # noqa: BLE001 - a fused kernel the C path cannot take: no fusion at all
            return mod
        if attempt is None:
            return mod
        fused, kinds, kernels, scratch, members = attempt
        too_big = [g for g, n in scratch.items() if n > SCRATCH_LIMIT]
        if not too_big:
            break
        for g in too_big:
            held_back |= _to_hold_back(members[g])
    for gv, func in kernels.items():
        group, macs = kinds[gv.name_hint]
        fused[gv] = kernel_attrs.with_kind(func, "+".join(group), macs, symbol=gv.name_hint)
    return fused


def _fits(name: str, prim: tirx.PrimFunc) -> bool:
    """A fused fast kernel is kept if it lowers for the C path with at most SCRATCH_LIMIT bytes of scratch."""
    try:
        return _scratch_bytes({name: prim})[name] <= SCRATCH_LIMIT
    except Exception:  # noqa: BLE001 - a fused kernel the C path cannot take: that pair stays apart
        return False

