"""TVM's default Relax pipeline on the lowered module, the figure a build reports next to its own passes
(``pass_baselines.tvm_default``): what TVM alone would have made of the same kernels."""

from __future__ import annotations


def tvm_default_baseline(mod, measure_fn) -> dict:
    """TVM's default Relax pipeline on the lowered module, measured like every state: its graph part
    (LegalizeOps, AnnotateTIROpPattern, FoldConstant, FuseOps, FuseTIR, RewriteDataflowReshape, as
    ``relax.get_default_pipeline`` runs them for a CPU target, ``relax.backend.cpu_generic``) is read and
    planned by edgemem; what follows in the pipeline turns call_tir into VM builtins and storage of TVM's
    own. A fused kernel keeps the tensors between its parts as internal buffers (TVM does not inline
    them): the largest such scratch is added to the arena (an upper bound on planning both together).
    (``tvm.compile`` itself runs the generic ``relax.get_pipeline("default")`` on CPU targets, which does
    not fuse: its graph part, LegalizeOps + RewriteDataflowReshape, leaves the lowered module as it is,
    i.e. the "none" baseline.) TVM's own storage plan (that generic pipeline's) is kept for reference."""
    import tvm
    from tvm import relax

    from ..codegen.kernels_c import allocation_bytes
    from ..kernels import kernel_attrs

    target = tvm.target.Target({"kind": "c"})
    try:
        with target, tvm.transform.PassContext(opt_level=3):
            graph_part = tvm.transform.Sequential([*relax.backend.cpu_generic.legalize_passes(target),
                                                   relax.transform.RewriteDataflowReshape()])(mod)  # fmt: skip
    except Exception as exc:  # noqa: BLE001 - TVM's pipeline raises many types; the baseline says why
        last = str(exc).strip().splitlines()[-1][-160:] if str(exc).strip() else ""
        return {"arena_bytes": None, "reason": f"n/a: TVM's default pipeline fails on the lowered module ({type(exc).__name__}: {last})"}
    fused = {gv.name_hint: f for gv, f in graph_part.functions.items()
             if isinstance(f, tvm.tirx.PrimFunc) and not kernel_attrs.is_kernel(f)}  # fmt: skip
    scratch = max(allocation_bytes(fused).values(), default=0) if fused else 0
    figures = measure_fn(graph_part)
    figures["macs"] = measure_fn(mod)["macs"]  # fusion moves MACs, never changes them (fused kernels carry no count)
    return {**figures, "arena_bytes": figures["arena_bytes"] + scratch, "planned_arena_bytes": figures["arena_bytes"],
            "fused_kernel_scratch_bytes": scratch, "tvm_storage_bytes": _tvm_own_plan(mod),
            "sequence": ["tvm_default_pipeline"]}  # fmt: skip


def _tvm_own_plan(mod) -> int | None:
    """Bytes of TVM's own static storage plan for ``mod`` (None where its pipeline fails)."""
    import tvm
    from tvm import relax

    try:
        with tvm.target.Target({"kind": "c"}), tvm.transform.PassContext(opt_level=3):
            return _tvm_storage_bytes(relax.get_pipeline("default")(mod))
    except Exception:  # noqa: BLE001 - reference figure only (e.g. two kernels with one global symbol)
        return None


def _tvm_storage_bytes(mod) -> int:
    from tvm import relax

    sizes = []

    def visit(expr):
        if isinstance(expr, relax.Call) and getattr(expr.op, "name", "") == "relax.vm.alloc_storage":
            sizes.append(int(expr.args[0].values[0]))

    relax.analysis.post_order_visit(mod["main"], visit)
    return sum(sizes)
