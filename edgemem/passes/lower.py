"""From the frontend's Relax to one kernel call per operator, the form the graph reader expects.

int8 models go through ``integerize`` (TFLM arithmetic, integers end to end); float models are
legalized and fused by TVM's own passes.
"""

from __future__ import annotations

import tvm
import tvm_ffi
from tvm import relax

from ..kernels import kernel_attrs
from ..kernels.float_schedule import scalar_schedule
from ..errors import UnsupportedModelError
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
        if isinstance(func, tvm.tirx.PrimFunc) and not kernel_attrs.is_kernel(func):
            mod[gv] = scalar_schedule(func)  # edgemem's own kernels (registry lowerings) come scheduled
    return mod


def _opaque_own_kernels(mod: tvm.IRModule) -> tvm.IRModule:
    """edgemem's own kernels (frontend/ops/ lowerings: a float BATCH_MATMUL, TRANSPOSE_CONV, ...) stay kernels of
    their own: FuseOps would group them with the legalized ops around them and FuseTIR fails to merge their
    buffers ("Inconsistent buffers ... mapped to the same relax var"); marked opaque, nothing fuses into them."""
    for gv, func in list(mod.functions.items()):
        if isinstance(func, tvm.tirx.PrimFunc) and kernel_attrs.is_kernel(func):
            mod[gv] = func.with_attr("op_pattern", 8)  # kOpaque
    return mod


def _has_int8_kernels(mod: tvm.IRModule) -> bool:
    """Kernels the frontend already called (an int8 LSTM, an operator of frontend/ops/) with an int8 or int16
    operand: a model with no QDQ island at all can have them (a 16x8 model is all such kernels). A float model whose only edgemem kernels take float, int32
    or bool data (a float32 BATCH_MATMUL, a layout move) stays on TVM's float path, which keeps those calls as
    they are and lowers the float Relax ops around them."""
    for f in mod.functions.values():
        if isinstance(f, tvm.tirx.PrimFunc) and kernel_attrs.is_kernel(f):
            if any(str(getattr(p.ty, "dtype", "")) in ("int8", "int16") for p in f.params):
                return True
    return False


def lower_to_kernels(mod: tvm.IRModule, op_labels: dict | None = None) -> tvm.IRModule:
    """One kernel call per operator. ``op_labels`` (the frontend's Relax var -> "operator #i NAME (output 'x')")
    lets a refusal name the TFLite operator instead of a Relax variable."""
    try:
        lowered = integerize(mod) if _has_quantize(mod) or _has_int8_kernels(mod) else float_kernels(mod)
        _check_all_kernels(lowered, mod)
        return lowered
    except UnsupportedModelError as exc:
        label = _operator_of(mod, getattr(exc, "relax_var", None), op_labels or {})
        if label is None:
            raise
        raise UnsupportedModelError(f"{label}: {exc}") from exc


# Relax calls the graph reader takes: a kernel call, or a view of a tensor under another shape
_KERNEL_CALLS = ("relax.call_tir", "relax.call_tir_inplace", "relax.reshape", "relax.squeeze", "relax.expand_dims")


def _check_all_kernels(lowered: tvm.IRModule, frontend: tvm.IRModule) -> None:
    """Refuse a Relax operator that lowering left as it is (TVM's legalization has no form for it, e.g. an NHWC
    conv2d_transpose), naming the TFLite operator it came from rather than a Relax variable."""
    for block in lowered["main"].body.blocks:
        for b in block.bindings:
            value = b.value
            if isinstance(value, relax.Call) and isinstance(value.op, tvm.ir.Op) and value.op.name not in _KERNEL_CALLS:
                exc = UnsupportedModelError(f"TVM imports it as '{value.op.name}', which TVM cannot lower to a kernel here and "
                                            "edgemem has no kernel of its own for. Replace the operator or file an issue for it.")
                exc.relax_var = _counterpart(frontend, b.var, value)
                raise exc


def _counterpart(frontend: tvm.IRModule, var, call):
    """The frontend's binding of the same Relax operator with the same attributes and result type as ``call``
    (lowering renames the variables it keeps), or None."""
    for block in frontend["main"].body.blocks:
        for b in block.bindings:
            v = b.value
            if isinstance(v, relax.Call) and v.op.same_as(call.op) and tvm_ffi.structural_equal(v.attrs, call.attrs) \
                    and tvm_ffi.structural_equal(b.var.ty, var.ty):
                return b.var
    return None


def _operator_of(mod: tvm.IRModule, var, labels: dict) -> str | None:
    """The TFLite operator a failing binding belongs to: its own label, else that of the first labelled binding
    after it (the frontend binds an operator's intermediate values before its output)."""
    if var is None:
        return None
    if var in labels:
        return labels[var]
    seen = False
    for block in mod["main"].body.blocks:
        for b in block.bindings:
            seen = seen or b.var.same_as(var)
            if seen and b.var in labels:
                return labels[b.var]
    return None
