"""From the frontend's Relax to one kernel call per operator, the form the graph reader expects.

int8 models go through ``integerize`` (TFLM arithmetic, integers end to end); float models are
legalized and fused by TVM's own passes.
"""

from __future__ import annotations

import tvm
from tvm import relax

from ..kernels.float_schedule import scalar_schedule
from .integerize import integerize
from .split_slices import split_to_slices


def _has_quantize(mod: tvm.IRModule) -> bool:
    found = []

    def visit(expr):
        if isinstance(expr, relax.Call) and getattr(expr.op, "name", "") == "relax.quantize":
            found.append(expr)

    relax.analysis.post_order_visit(mod["main"], visit)
    return bool(found)


def float_kernels(mod: tvm.IRModule) -> tvm.IRModule:
    """LegalizeOps -> AnnotateTIROpPattern -> FuseOps -> FuseTIR: one PrimFunc per fused group."""
    mod = split_to_slices(mod)  # one kernel per part, not one returning a tuple
    with tvm.target.Target({"kind": "c"}), tvm.transform.PassContext(opt_level=3):
        mod = relax.transform.FoldConstant()(mod)  # weight transposes happen on the host, not in RAM
        mod = relax.transform.LegalizeOps()(mod)
        mod = _opaque_own_kernels(relax.transform.AnnotateTIROpPattern()(mod))
        for p in (relax.transform.FuseOps(), relax.transform.FuseTIR(), relax.transform.DeadCodeElimination()):
            mod = p(mod)
    for gv, func in list(mod.functions.items()):
        if isinstance(func, tvm.tirx.PrimFunc):
            mod[gv] = scalar_schedule(func)
    return mod


def _opaque_own_kernels(mod: tvm.IRModule) -> tvm.IRModule:
    """edgemem's own kernels (frontend/ops/ lowerings: a float BATCH_MATMUL, TRANSPOSE_CONV, ...) stay kernels of
    their own: FuseOps would group them with the legalized ops around them and FuseTIR fails to merge their
    buffers ("Inconsistent buffers ... mapped to the same relax var"); marked opaque, nothing fuses into them."""
    for gv, func in list(mod.functions.items()):
        if isinstance(func, tvm.tirx.PrimFunc) and func.attrs is not None and "edgemem.op" in func.attrs:
            mod[gv] = func.with_attr("op_pattern", 8)  # kOpaque
    return mod


def _has_int8_kernels(mod: tvm.IRModule) -> bool:
    """Kernels the frontend already called (an int8 LSTM): a model with no QDQ island at all can have them."""
    return any(isinstance(f, tvm.tirx.PrimFunc) and f.attrs is not None and "edgemem.op" in f.attrs for f in mod.functions.values())


def lower_to_kernels(mod: tvm.IRModule) -> tvm.IRModule:
    return integerize(mod) if _has_quantize(mod) or _has_int8_kernels(mod) else float_kernels(mod)
