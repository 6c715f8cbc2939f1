"""TIR PrimFuncs -> one self-contained plain-C translation unit.

TVM 0.27's ``tvm.tirx.build(..., target="c")`` emits functions with the packed TVM-FFI ABI
(``__tvm_ffi_*``, DLTensor checks) that need the TVM runtime.  For bare-metal firmware we want
plain functions instead::

    int32_t em_k_conv(const int8_t* restrict X, const int8_t* restrict W, int8_t* restrict Out);

How it is done (see /work/shared/research/tvm-0.27.md, "Getting plain C out of TVM"):

1. The S-TIR lowering pipeline of ``tvm/s_tir/pipeline.py`` is run *without* ``SplitHostDevice``,
   ``MakePackedAPI`` and ``AnnotateEntryFunc`` and with vectorization disabled (the pipeline is
   registered as ``"edgemem_plain_c"`` and driven through ``tvm.tirx.build``).
2. ``FlattenBuffer`` leaves every buffer parameter ``A`` used only through a flat
   ``A_1 = T.decl_buffer((n,), dtype, data=A.data)``.  Each ``BufferType`` parameter is replaced
   by a typed pointer ``Var`` (``T.handle(dtype)``) and ``A.data`` by that pointer, so the C code
   generator prints ``int8_t* A`` parameters.  The body gets a trailing ``return 0``.
3. ``LowerTVMBuiltin`` is *not* run: with no packed calls left, its only effect would be to turn
   allocations of >= 1 KiB into ``TVMBackendAllocWorkspace``.  Without it, every TIR allocation is a
   C array; large ones are made ``static`` (or rejected), see ``scratch``.
4. ``FloatImm`` constants are replaced by markers before printing because TVM prints float
   literals with 7 significant digits (``1.234568e-01f``) and ``nan``/``inf`` as invalid C
   (``-nanf``); the markers are replaced by exact (round-trip) literals afterwards.
5. The text is post-processed: TVM includes, ``TVM_DLL``, ``extern "C"`` guards and forward
   declarations are removed; each signature is re-emitted with ``const``/``restrict``; ``(void)``
   casts are added for unused parameters.
"""

from __future__ import annotations

import math
import os
import re
import struct
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field

import numpy as np
import tvm
import tvm_ffi
from tvm import s_tir, tirx

from ..kernels.kernel_attrs import DOT, LANES

__all__ = [
    "CKernels",
    "KernelCodegenError",
    "PIPELINE_NAME",
    "allocation_bytes",
    "lower_to_plain_tir",
    "prim_funcs_to_c",
]

PIPELINE_NAME = "edgemem_plain_c"

#: dtype -> C type.  Anything else (float16, bfloat16, vectors, ...) is rejected.
_C_TYPES = {
    "int8": "int8_t",
    "uint8": "uint8_t",
    "int16": "int16_t",
    "uint16": "uint16_t",
    "int32": "int32_t",
    "uint32": "uint32_t",
    "int64": "int64_t",
    "uint64": "uint64_t",
    "float32": "float",
    "float64": "double",
    "bool": "bool",
}
_C_SIZEOF = {
    "int8_t": 1, "uint8_t": 1, "bool": 1,
    "int16_t": 2, "uint16_t": 2,
    "int32_t": 4, "uint32_t": 4, "float": 4,
    "int64_t": 8, "uint64_t": 8, "double": 8,
}  # fmt: skip

_FCONST_PREFIX = "__em_fconst_"
_IDENT = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
_C_KEYWORDS = {
    "auto", "break", "case", "char", "const", "continue", "default", "do", "double", "else",
    "enum", "extern", "float", "for", "goto", "if", "inline", "int", "long", "register",
    "restrict", "return", "short", "signed", "sizeof", "static", "struct", "switch", "typedef",
    "union", "unsigned", "void", "volatile", "while", "main",
}  # fmt: skip


class KernelCodegenError(RuntimeError):
    """The TIR cannot be turned into plain C (unsupported construct, scratch too large...)."""


@dataclass
class CKernels:
    """Plain-C kernels.

    source:  one translation unit, includes only <stdint.h> (+ <math.h>, <stdbool.h> if used);
             the prototypes are repeated at its top so it does not need ``header``.
    header:  include-guarded prototypes (``int32_t name(...);``).
    names:   C function names, in input order.
    scratch_bytes: bytes of local arrays (TIR allocations) each kernel declares (stack or static).
    static_scratch_bytes: the part of ``scratch_bytes`` placed in ``static`` arrays (.bss).
    const_params: per kernel, parameter indices emitted as ``const`` pointers.
    param_ctypes: per kernel, the C element type of each parameter (``int8_t``...).
    codegen_seconds: wall time of lowering + C generation for the whole batch.
    """

    source: str
    header: str
    names: list[str]
    scratch_bytes: dict[str, int]
    static_scratch_bytes: dict[str, int] = field(default_factory=dict)
    const_params: dict[str, list[int]] = field(default_factory=dict)
    param_ctypes: dict[str, list[str]] = field(default_factory=dict)
    codegen_seconds: float = 0.0


# --------------------------------------------------------------------------------------------
# TIR side
# --------------------------------------------------------------------------------------------


def _lowering_passes() -> list:
    """``default_s_tir_pipeline`` (tvm/s_tir/pipeline.py) minus the packed-API / host-device
    split passes, the GPU-only passes, and with vectorization disabled."""
    return [
        s_tir.transform.CanonicalizeLoop(),
        s_tir.transform.LowerCrossThreadReduction(),
        s_tir.transform.LowerInitBlock(),
        s_tir.transform.PlanAndUpdateBufferAllocationLocation(),
        s_tir.transform.ConvertBlocksToOpaque(),
        s_tir.transform.LiftThreadBinding(),
        s_tir.transform.CompactBufferAllocation(),
        s_tir.transform.LowerAutoCopy(),
        s_tir.transform.UnifyThreadBinding(),
        s_tir.transform.LowerMatchBuffer(),
        s_tir.transform.StmtSimplify(),
        s_tir.transform.AnnotateIrregularLoop(),
        s_tir.transform.InjectSoftwarePipeline(),
        s_tir.transform.LowerOpaqueBlock(),
        tirx.transform.FlattenBuffer(),
        tirx.transform.BF16ComputeLegalize(),
        tirx.transform.NarrowDataType(32),
        s_tir.transform.LoopPartition(),
        tirx.transform.VectorizeLoop(False),  # scalar Cortex-M: never vectorize
        s_tir.transform.InjectVirtualThread(),
        s_tir.transform.InjectDoubleBuffer(),
        tirx.transform.StorageRewrite(),
        s_tir.transform.HoistIfThenElse(),
        tirx.transform.UnrollLoop(),
        s_tir.transform.RenormalizeSplitPattern(),
        tirx.transform.StmtSimplify(),
        tirx.transform.RemoveNoOp(),
        s_tir.transform.RewriteUnsafeSelect(),
        tirx.transform.CommonSubexprElim(),
        _drop_unused_bindings(),
        tirx.transform.RemoveNoOp(),
        tirx.transform.FP8ComputeLegalize(),
        tirx.transform.VerifyMemory(),
        # no AnnotateEntryFunc (it adds a __tvm_ffi_main wrapper), no SplitHostDevice,
        # no MakePackedAPI.
    ]


def _unused_binding(func: tirx.PrimFunc):
    """A ``Bind`` whose variable nothing reads and whose value calls nothing, or None."""
    uses: dict = {}
    tvm_ffi.structural_walk(func.body, (tirx.Var, lambda v: uses.__setitem__(v, uses.get(v, 0) + 1)))
    found = []

    def on_bind(b):
        calls = []
        tvm_ffi.structural_walk(b.value, (tvm.ir.Call, calls.append))
        if not found and uses.get(b.var, 0) <= 1 and not calls:  # its one occurrence is the binding itself
            found.append(b)

    tvm_ffi.structural_walk(func.body, (tirx.Bind, on_bind))
    return found[0] if found else None


def _drop_unused_bindings():
    """CSE can leave a binding whose uses it replaced by its own variable (seen on a FULLY_CONNECTED fused with an
    ADD that reads it twice): C would warn of an unused variable (an error under -Werror). Such a binding (a pure
    value) becomes a no-op, which RemoveNoOp then drops; one at a time, as dropping one can leave another unused."""

    @tirx.transform.prim_func_pass(opt_level=0, name="EdgememDropUnusedBindings")
    def _pass(func, _mod, _ctx):
        while (dead := _unused_binding(func)) is not None:
            func = func.with_body(tvm_ffi.structural_map(func.body, (tirx.Bind, lambda b: tirx.Evaluate(tirx.IntImm("int32", 0)) if b.same_as(dead) else b)))
        return func

    return _pass


def _op_name(call) -> str | None:
    op = getattr(call, "op", None)
    return getattr(op, "name", None)


def _is_buffer_param(p) -> bool:
    return isinstance(getattr(p, "ty", None), tirx.buffer.BufferType)


def _param_name(name: str, index: int) -> str:
    """Keep readable TIR names unless they could clash with C (keywords, libm, reserved)."""
    base = name[:-1] if name.endswith("f") else name
    if (
        not _IDENT.match(name)
        or name.startswith("_")
        or name in _C_KEYWORDS
        or name in _MATH_FUNCS
        or base in _MATH_FUNCS
        or name in ("INFINITY", "NAN", "bool", "true", "false")
        or name.endswith("_t")
    ):
        return f"p{index}"
    return name


def _to_pointer_params(func: tirx.PrimFunc) -> tirx.PrimFunc:
    """Buffer parameters -> typed pointers; ``A.data`` -> pointer; append ``return 0``."""
    ptrs = {}
    new_params = []
    for i, p in enumerate(func.params):
        if _is_buffer_param(p):
            dtype = str(p.dtype)
            if dtype not in _C_TYPES:
                raise KernelCodegenError(f"parameter {p.name}: dtype {dtype} has no plain C type")
            v = tirx.Var(_param_name(p.name, i), tvm.ir.PointerType(tvm.ir.PrimType(dtype)))
            ptrs[p] = v
            new_params.append(v)
        else:  # scalar parameter (e.g. a shape var): kept as a C scalar
            new_params.append(p)

    def on_call(call):
        if _op_name(call) == "tirx.buffer_data" and len(call.args) == 1 and call.args[0] in ptrs:
            return ptrs[call.args[0]]
        return call

    body = tvm_ffi.structural_map(func.body, (tvm.ir.Call, on_call))

    leftover = []

    def on_var(v):
        if v in ptrs:
            leftover.append(v.name)

    tvm_ffi.structural_walk(body, (tirx.Var, on_var))
    if leftover:
        raise KernelCodegenError(
            f"buffer parameters {sorted(set(leftover))} are still used as buffers after "
            "FlattenBuffer (expected only `.data` uses); this TIR form is not supported"
        )
    body = tirx.SeqStmt([body, tirx.Return(tirx.IntImm("int32", 0))])
    new = tirx.PrimFunc(new_params, body, ret_type=tvm.ir.PrimType("int32"), attrs=func.attrs)
    if "tirx.is_entry_func" in new.attrs:
        new = new.without_attr("tirx.is_entry_func")
    return new


def _float_literal(value: float, dtype: str) -> str:
    if math.isnan(value):
        return "NAN" if dtype == "float32" else "((double)NAN)"
    if math.isinf(value):
        s = "INFINITY" if dtype == "float32" else "((double)INFINITY)"
        return s if value > 0 else f"(-{s})"
    if dtype == "float32":
        return np.format_float_scientific(np.float32(value), unique=True, trim="0") + "f"
    return np.format_float_scientific(np.float64(value), unique=True, trim="0")


def _mark_float_consts(func: tirx.PrimFunc) -> tirx.PrimFunc:
    """FloatImm -> ``__em_fconst_<dtype>_<hexbits>()`` marker calls (exact literal later)."""

    def on_float(imm):
        dtype = str(imm.ty)
        if dtype == "float32":
            bits = struct.unpack("<I", struct.pack("<f", imm.value))[0]
            return tirx.call_pure_extern(dtype, f"{_FCONST_PREFIX}f32_{bits:08x}")
        if dtype == "float64":
            bits = struct.unpack("<Q", struct.pack("<d", imm.value))[0]
            return tirx.call_pure_extern(dtype, f"{_FCONST_PREFIX}f64_{bits:016x}")
        raise KernelCodegenError(f"float constant of dtype {dtype} has no plain C type")

    return func.with_body(tvm_ffi.structural_map(func.body, (tirx.FloatImm, on_float)))


# TIR math intrinsics TVM's C target has no lowering rule for (LowerIntrin leaves them as an
# unresolved ``tirx.fabs`` call, which the C printer refuses): <math.h> functions of the same
# meaning, ``f``-suffixed for float32 (fabsf, exp2f, fmodf) as TFLM's std::abs(float) etc. call.
_C_MATH_INTRINSICS = {"tirx.fabs": "fabs", "tirx.exp2": "exp2", "tirx.fmod": "fmod"}


def _lower_math_intrinsics(func: tirx.PrimFunc) -> tirx.PrimFunc:
    """``tirx.fabs(x)`` -> ``fabsf(x)`` (float32) / ``fabs(x)`` (float64), likewise exp2, fmod."""

    def on_call(call):
        base = _C_MATH_INTRINSICS.get(_op_name(call) or "")
        if base is None:
            return call
        dtype = str(call.ty)
        if dtype == "float32":
            return tirx.call_pure_extern(dtype, base + "f", *call.args)
        if dtype == "float64":
            return tirx.call_pure_extern(dtype, base, *call.args)
        raise KernelCodegenError(f"{_op_name(call)} on {dtype} has no plain C function")

    return func.with_body(tvm_ffi.structural_map(func.body, (tvm.ir.Call, on_call)))


# TVM's C printer (CodeGenCHost) prints min/max as ``((a) > (b) ? (a) : (b))`` with each operand bound to a
# temporary it remembers by its C text for the rest of the scope, and a store does not forget it: after
# ``acc[0] = max(acc[0], x)`` a later ``max(acc[0], lo)`` in the same scope reads the temporary holding acc[0]'s
# value from *before* the store (a 1x1 MAX_POOL_2D, whose one-step reduction leaves both in one loop body, returned
# the initial -2^31 clamped to -128). A min/max reading memory the kernel writes is therefore printed as a call of a
# static inline helper (arguments are printed afresh each time, never remembered). One reading only memory the
# kernel never writes (weights, shifts, its inputs) keeps TVM's form: a remembered copy of those cannot go stale,
# and the requantization's reuse of one shift load across a 2x2 tile is worth 2-3 % of kws_dscnn's instructions.
_MINMAX_C_TYPES = {
    "int8": ("s8", "int8_t"), "int16": ("s16", "int16_t"), "int32": ("s32", "int32_t"), "int64": ("s64", "int64_t"),
    "uint8": ("u8", "uint8_t"), "uint16": ("u16", "uint16_t"), "uint32": ("u32", "uint32_t"),
    "uint64": ("u64", "uint64_t"), "float32": ("f32", "float"), "float64": ("f64", "double"),
}  # fmt: skip
_MINMAX_RE = re.compile(r"\bem_(max|min)_(s8|s16|s32|s64|u8|u16|u32|u64|f32|f64)\(")


def _memory_roots(func: tirx.PrimFunc):
    """buffer -> the memory it names: a declared view's pointer (after ``_to_pointer_params``) or the buffer
    itself (a local allocation), so that a view and its base compare equal."""
    views = []
    tvm_ffi.structural_walk(func.body, (tirx.DeclBuffer, lambda d: views.append((d.buffer, d.data))))

    def root(buf):
        for view, data in views:
            if view.same_as(buf):
                if _op_name(data) == "tirx.buffer_data":
                    return root(data.args[0])
                return data
        return buf

    return root


def _written_memory(func: tirx.PrimFunc, root) -> list:
    """The memory the kernel may write: stored to, or handed to a call (a micro-kernel's accumulator)."""
    written = []

    def on_store(store):
        written.append(root(store.buffer))

    params = list(func.params)

    def on_call(call):
        # a pointer handed on: a micro-kernel writes only its accumulator (a local allocation; its inputs are
        # const), a kernel called by a kernel (em_k_*) any of its arguments
        callee = call.args[0].value if _op_name(call) == "tirx.call_extern" and call.args else ""
        any_pointer = isinstance(callee, str) and callee.startswith("em_k_")
        for arg in call.args:
            if isinstance(arg, tirx.Var) and isinstance(getattr(arg, "ty", None), tvm.ir.PointerType):
                written.append(arg)
            elif _op_name(arg) == "tirx.address_of":
                memory = root(arg.args[0].source)
                if any_pointer or not any(memory.same_as(p) for p in params):
                    written.append(memory)

    tvm_ffi.structural_walk(func.body, [(tirx.BufferStore, on_store), (tvm.ir.Call, on_call)])
    return written


def _reads(expr, written: list, root) -> bool:
    found = []

    def on_load(load):
        memory = root(load.source)
        if any(memory.same_as(w) for w in written):
            found.append(load)

    tvm_ffi.structural_walk(expr, (_TensorLoad, on_load))
    return bool(found)


def _minmax_as_calls(func: tirx.PrimFunc) -> tirx.PrimFunc:
    """``max(a, b)`` / ``min(a, b)`` with an operand that loads memory the kernel writes -> ``em_max_<t>(a, b)``
    (see above). Runs on the pointer-parameter form, where every view's memory is a parameter or an allocation."""
    root = _memory_roots(func)
    written = _written_memory(func, root)
    if not written:
        return func

    def rewrite(node, name):
        dtype = str(node.ty)
        if dtype not in _MINMAX_C_TYPES or not (_reads(node.a, written, root) or _reads(node.b, written, root)):
            return node
        return tirx.call_pure_extern(dtype, f"em_{name}_{_MINMAX_C_TYPES[dtype][0]}", node.a, node.b)

    body = tvm_ffi.structural_map(func.body, [(tirx.Max, lambda n: rewrite(n, "max")),
                                              (tirx.Min, lambda n: rewrite(n, "min"))])  # fmt: skip
    return func.with_body(body)


def _minmax_source(text: str) -> str:
    """The static inline min/max helpers ``text`` calls, with the comparison TVM's printer would have written."""
    ctypes = {suffix: ctype for suffix, ctype in _MINMAX_C_TYPES.values()}
    lines = []
    for kind, suffix in sorted(set(_MINMAX_RE.findall(text))):
        ctype, op = ctypes[suffix], ">" if kind == "max" else "<"
        lines.append(f"static inline {ctype} em_{kind}_{suffix}({ctype} a, {ctype} b) {{ return a {op} b ? a : b; }}")
    return "\n".join(lines)


def _plain_c_pipeline():
    """Factory for ``tvm.tirx.compilation_pipeline.register_tir_pipeline``."""

    @tvm.transform.module_pass(opt_level=0, name="EdgememPlainCLower")
    def _pipeline(mod: tvm.ir.IRModule, _ctx) -> tvm.ir.IRModule:
        mod = tvm.ir.transform.Sequential(_lowering_passes())(mod)
        return tvm.IRModule(
            {gv: _minmax_as_calls(_to_pointer_params(f)) for gv, f in mod.functions.items()}, attrs=mod.attrs
        )

    def _finalize_host():
        @tvm.transform.module_pass(opt_level=0, name="EdgememMarkFloatConsts")
        def _mark(mod, _ctx):
            return tvm.IRModule(
                {gv: _mark_float_consts(f) for gv, f in mod.functions.items()}, attrs=mod.attrs
            )

        # LowerIntrin maps exp/floordiv/q_multiply_shift/... to C; it may create float consts,
        # so the marker pass runs after it.
        @tvm.transform.module_pass(opt_level=0, name="EdgememLowerMathIntrinsics")
        def _math(mod, _ctx):
            return tvm.IRModule(
                {gv: _lower_math_intrinsics(f) for gv, f in mod.functions.items()}, attrs=mod.attrs
            )

        return tvm.ir.transform.Sequential([_math, tirx.transform.LowerIntrin(), _mark])

    def _finalize_device():
        return tvm.ir.transform.Sequential([])

    return _pipeline, _finalize_host, _finalize_device


tvm.tirx.compilation_pipeline.register_tir_pipeline(PIPELINE_NAME, _plain_c_pipeline)


def _target() -> tvm.target.Target:
    return tvm.target.Target({"kind": "c"})


def _prepare_module(funcs: dict[str, tirx.PrimFunc]) -> tvm.IRModule:
    fns = {}
    for name, f in funcs.items():
        if not isinstance(name, str) or not _IDENT.match(name) or name in _C_KEYWORDS:
            raise KernelCodegenError(f"kernel name {name!r} is not a valid C identifier")
        if name.startswith("__em_") or name.startswith("__tvm"):
            raise KernelCodegenError(f"kernel name {name!r} uses a reserved prefix")
        if not isinstance(f, tirx.PrimFunc):
            raise KernelCodegenError(f"{name}: expected tvm.tirx.PrimFunc, got {type(f)}")
        for p in f.params:
            if _is_buffer_param(p) and not all(isinstance(d, tirx.IntImm) for d in p.shape):
                raise KernelCodegenError(
                    f"{name}: parameter {p.name} has a non-static shape {list(p.shape)}; "
                    "only static shapes are supported"
                )
        f = f.with_attr("global_symbol", name)
        if "target" in f.attrs:
            f = f.without_attr("target")
        fns[name] = f
    return tvm.IRModule(fns)


def lower_to_plain_tir(funcs: dict[str, tirx.PrimFunc]) -> tvm.IRModule:
    """The lowered TIR (pointer params) that ``prim_funcs_to_c`` prints; for inspection."""
    mod = tirx.transform.BindTarget(_target())(_prepare_module(funcs))
    pipeline, finalize_host, _ = _plain_c_pipeline()
    with tvm.transform.PassContext(opt_level=3, config={"tirx.disable_vectorize": True}):
        mod = pipeline(mod)
        mod = finalize_host()(mod)
    return mod


# --------------------------------------------------------------------------------------------
# analysis of the lowered TIR
# --------------------------------------------------------------------------------------------


def _alloc_bytes(func: tirx.PrimFunc, name: str) -> list[tuple[str, int]]:
    out = []

    def on_alloc(stmt):
        buf = stmt.buffer
        n = 1
        for s in buf.shape:
            if not isinstance(s, tirx.IntImm):
                raise KernelCodegenError(f"{name}: allocation {buf.name} has non-static shape")
            n *= int(s.value)
        dt = tvm.DataType(str(buf.dtype))
        out.append((buf.name, n * ((dt.bits * dt.lanes + 7) // 8)))

    tvm_ffi.structural_walk(func.body, (tirx.AllocBuffer, on_alloc))
    return out


def allocation_bytes(funcs: dict[str, tirx.PrimFunc]) -> dict[str, int]:
    """Bytes of local arrays each kernel allocates once lowered for plain C, without printing any C: only the
    part of the lowering that decides the allocations (up to FlattenBuffer, then StorageRewrite). The passes
    left out only simplify (HoistIfThenElse and RemoveNoOp are most of the time on fused kernels with inlined
    PAD bounds; StmtSimplify runs after CompactBufferAllocation has sized the buffers, and was 0.85 s of
    mcunetv2_large's 0.93 s); measured on every fused kernel of the shared models (149, both fusion levels):
    the same allocations (fuse_ops on mcunetv2_large 1.12 -> 0.29 s). What the fusion pass asks before it
    keeps a fusion; the C path itself runs the whole lowering."""
    passes = _lowering_passes()
    names = [p.info.name for p in passes]
    cut = names.index("tirx.FlattenBuffer") + 1
    allocating = [p for p in passes[:cut] if p.info.name != "s_tir.StmtSimplify"]
    allocating += [p for p in passes[cut:] if p.info.name == "tirx.StorageRewrite"]
    mod = tirx.transform.BindTarget(_target())(_prepare_module(funcs))
    with tvm.transform.PassContext(opt_level=3, config={"tirx.disable_vectorize": True}):
        lowered = tvm.transform.Sequential(allocating)(mod)
    return {gv.name_hint: sum(n for _, n in _alloc_bytes(f, gv.name_hint)) for gv, f in lowered.functions.items()
            if isinstance(f, tirx.PrimFunc) and gv.name_hint in funcs}  # fmt: skip


def _written_params(func: tirx.PrimFunc, handed: set | None = None) -> set[int]:
    """Indices of pointer params that the lowered body may write (or leak to a call). Those only handed on as
    ``&A[i]`` to another function (a kernel calling kernels) go to ``handed`` instead: written there if that
    function's parameter is not ``const`` (which the C compiler checks: -Werror=discarded-qualifiers)."""
    idx = {p: i for i, p in enumerate(func.params)}
    decl: dict = {}
    written: set[int] = set()
    handed = set() if handed is None else handed

    def on_decl(stmt):
        if stmt.data in idx:
            decl[stmt.buffer] = idx[stmt.data]

    def on_store(stmt):
        if stmt.buffer in decl:
            written.add(decl[stmt.buffer])

    def on_call(call):  # pointer handed to an opaque call: assume written
        if _op_name(call) in ("tirx.buffer_data",):
            return
        callee = call.args[0].value if _op_name(call) == "tirx.call_extern" and call.args else ""
        if isinstance(callee, str) and callee.startswith("em_k_"):  # &A[i] handed to another kernel: may be written
            for a in call.args[1:]:
                buf = getattr(a.args[0], "source", None) if _op_name(a) == "tirx.address_of" else None
                if buf in decl:
                    handed.add(decl[buf])
                elif buf is not None and buf.data in idx:
                    handed.add(idx[buf.data])
        for a in call.args:
            if isinstance(a, tirx.Var) and a in idx:
                written.add(idx[a])

    tvm_ffi.structural_walk(func.body, (tirx.DeclBuffer, on_decl), order="pre")
    tvm_ffi.structural_walk(func.body, [(tirx.BufferStore, on_store), (tvm.ir.Call, on_call)])
    return written


# --------------------------------------------------------------------------------------------
# C text post-processing
# --------------------------------------------------------------------------------------------

_FCONST_RE = re.compile(_FCONST_PREFIX + r"(f32|f64)_([0-9a-f]+)\(\)")
_ALLOC_RE = re.compile(r"^(?P<ind>[ \t]+)(?P<ty>[A-Za-z_][A-Za-z0-9_]*) (?P<id>[A-Za-z_]\w*)\[(?P<n>\d+)\];$")


def _fconst_sub(m: re.Match) -> str:
    kind, hexbits = m.group(1), m.group(2)
    if kind == "f32":
        v = struct.unpack("<f", struct.pack("<I", int(hexbits, 16)))[0]
        return _float_literal(v, "float32")
    v = struct.unpack("<d", struct.pack("<Q", int(hexbits, 16)))[0]
    return _float_literal(v, "float64")


def _split_functions(src: str) -> dict[str, tuple[str, str]]:
    """name -> (param list text, body text incl. braces) of each function definition."""
    out = {}
    pat = re.compile(r"^TVM_DLL int32_t (\w+)\((.*)\) \{$", re.M)
    for m in pat.finditer(src):
        name, params = m.group(1), m.group(2)
        # body: from '{' to the matching '}' at column 0
        start = m.end() - 1
        end = src.index("\n}\n", start) + 2
        out[name] = (params, src[start:end])
    return out


def prim_funcs_to_c(
    funcs: dict[str, tirx.PrimFunc],
    const_params: dict[str, set[int]] | None = None,
    *,
    auto_const: bool = True,
    restrict: bool = True,
    max_stack_bytes: int = 1024,
    scratch: str = "auto",
    header_guard: str = "EDGEMEM_KERNELS_H",
) -> CKernels:
    """Lower TIR PrimFuncs (static shapes, from TE / s_tir schedules) to one plain-C unit.

    funcs:        C function name -> PrimFunc (names must be valid C identifiers).
    const_params: function name -> indices of read-only parameters (weights), emitted as
                  ``const T*``; it is a KernelCodegenError if the kernel writes one of them.
    auto_const:   also emit ``const`` on every other pointer parameter the lowered kernel never
                  writes (inputs).  Always safe for callers: passing ``T*`` or ``const T*`` to a
                  ``const T*`` parameter never warns.  ``False``: only ``const_params``.
    restrict:     emit ``restrict`` on pointer params of functions carrying ``tirx.noalias``
                  (TE ``create_prim_func`` sets it).  The caller must then never pass
                  overlapping buffers (no in-place kernels).
    scratch:      where TIR allocations (local arrays) go:
                  ``"auto"``  - arrays <= max_stack_bytes on the stack, larger ones ``static``;
                  ``"stack"`` - all on the stack;  ``"static"`` - all ``static`` (.bss);
                  ``"error"`` - stack, but raise KernelCodegenError if an array > max_stack_bytes.
                  ``static`` arrays make the kernel non-reentrant.

    The steps: TVM's C codegen on the plain-C lowering (``_codegen``), its text cut into functions
    (``_function_defs``), each function re-emitted with its own signature and scratch placement
    (``_emit_function``), the float literals made exact and the TVM runtime checked absent
    (``_finish_text``), then the unit and its header (templates/kernels.h.j2) put together.
    """
    if scratch not in ("auto", "stack", "static", "error"):
        raise ValueError(f"scratch must be auto|stack|static|error, not {scratch!r}")
    if not funcs:
        raise ValueError("no functions given")
    used_mk: set = set()
    lowered, raw, t_codegen = _codegen(funcs, used_mk)
    defs = _function_defs(raw, list(funcs))
    emitted = [
        _emit_function(name, lowered[name], *defs[name], const_params=(const_params or {}).get(name),
                       auto_const=auto_const, restrict=restrict, scratch=scratch, max_stack_bytes=max_stack_bytes)
        for name in funcs
    ]  # fmt: skip
    text = _finish_text([e.definition for e in emitted])
    protos = [e.prototype for e in emitted]
    return CKernels(
        source=_unit_source(text, protos, used_mk),
        header=_render_header(header_guard, protos),
        names=list(funcs),
        scratch_bytes={e.name: e.scratch_bytes for e in emitted},
        static_scratch_bytes={e.name: e.static_bytes for e in emitted},
        const_params={e.name: e.const_params for e in emitted},
        param_ctypes={e.name: e.param_ctypes for e in emitted},
        codegen_seconds=t_codegen,
    )


@dataclass
class _Emitted:
    """One kernel as prim_funcs_to_c writes it."""

    name: str
    prototype: str  # for the header (no restrict)
    definition: str  # signature and body
    scratch_bytes: int
    static_bytes: int
    const_params: list[int]
    param_ctypes: list[str]


def _codegen(funcs: dict, used_mk: set) -> tuple[dict, str, float]:
    """(lowered functions by name, TVM's C text, seconds): the int8 micro-kernel loops replaced by calls (recorded
    in `used_mk`), then the same passes as tvm.tirx.build(mod, target={"kind": "c"}, pipeline=PIPELINE_NAME),
    but the lowered TIR is kept for the scratch / const analysis. Every pass and the C printer work function by
    function (each function's text is the same whichever module holds it), and TVM's passes release the GIL:
    a model's kernels are lowered in a few modules on threads, one per core (``_chunks``)."""
    t0 = time.perf_counter()
    funcs = {name: _use_microkernels(f, used_mk) if isinstance(f, tirx.PrimFunc) else f for name, f in funcs.items()}
    chunks = _chunks(list(funcs))
    if len(chunks) == 1:
        results = [_lower_and_print({n: funcs[n] for n in chunks[0]})]
    else:
        with ThreadPoolExecutor(len(chunks)) as pool:
            results = list(pool.map(lambda names: _lower_and_print({n: funcs[n] for n in names}), chunks))
    lowered = {}
    for mod, _ in results:
        lowered.update({gv.name_hint: f for gv, f in mod.functions.items()})
    return lowered, "\n".join(raw for _, raw in results), time.perf_counter() - t0


# Below this many kernels one module on one thread: the threads would cost more than they save.
_PARALLEL_KERNELS = 8


def _chunks(names: list[str]) -> list[list[str]]:
    """The kernels split round-robin (neighbouring layers cost alike) over the cores, at most 4."""
    n = min(os.cpu_count() or 1, 4) if len(names) >= _PARALLEL_KERNELS else 1
    return [names[i::n] for i in range(n)] if n > 1 else [names]


def _lower_and_print(funcs: dict) -> tuple[tvm.IRModule, str]:
    try:
        lowered = lower_to_plain_tir(funcs)
        return lowered, tvm.get_global_func("target.build.c")(lowered, _target()).inspect_source()
    except KernelCodegenError:
        raise
    except Exception as e:  # noqa: BLE001 - TVM raises many error types
        raise KernelCodegenError(f"TVM lowering / C codegen failed: {e}") from e


def _function_defs(raw: str, names: list[str]) -> dict[str, tuple[str, str]]:
    """name -> (parameter text, body) of each requested function in TVM's C text."""
    defs = _split_functions(raw)
    missing = [n for n in names if n not in defs]
    if missing:
        raise KernelCodegenError(f"C codegen did not emit functions {missing}")
    return defs


def _emit_function(name: str, f: tirx.PrimFunc, params_txt: str, body: str, *, const_params, auto_const: bool,
                   restrict: bool, scratch: str, max_stack_bytes: int) -> _Emitted:
    """One function re-emitted: const / restrict signature, scratch arrays placed, unused parameters voided."""
    # parameter declarations as printed, e.g. "int8_t* X", "int32_t n"
    decls = [d.strip() for d in params_txt.split(",")] if params_txt.strip() else []
    if len(decls) != len(f.params):
        raise KernelCodegenError(f"{name}: cannot parse signature ({params_txt})")
    consts = _const_params(name, f, const_params, auto_const)
    proto, pnames, ctys = _signature(name, decls, consts, restrict and bool(f.attrs.get("tirx.noalias", False)))
    body, total, static_total = _place_scratch(name, f, body, scratch, max_stack_bytes)
    body = _void_unused(body, pnames)
    # prototypes without `restrict` (top-level parameter qualifiers do not affect the function type in C,
    # and this keeps the header usable from C++)
    return _Emitted(name, proto.replace("* restrict ", "* ") + ";", f"{proto} {body}", total, static_total,
                    sorted(consts), ctys)  # fmt: skip


def _const_params(name: str, f: tirx.PrimFunc, wanted, auto_const: bool) -> set[int]:
    """Pointer parameters emitted ``const``: the caller's (checked never written) and, with ``auto_const``,
    every other one the lowered kernel never writes."""
    handed: set[int] = set()
    written = _written_params(f, handed)
    ptr_idx = [i for i, p in enumerate(f.params) if isinstance(p.ty, tvm.ir.PointerType)]
    consts = {i for i in ptr_idx if i not in written and i not in handed} if auto_const else set()
    if wanted is not None:
        wanted = set(wanted)
        bad = sorted(i for i in wanted if i not in ptr_idx)
        if bad:
            raise KernelCodegenError(f"{name}: const_params {bad} are not pointer params")
        bad = sorted(wanted & written)
        if bad:
            raise KernelCodegenError(f"{name}: const_params {bad} are written by the kernel")
        consts |= wanted
    return consts


def _signature(name: str, decls: list[str], consts: set[int], use_restrict: bool) -> tuple[str, list[str], list[str]]:
    """(``int32_t name(...)``, parameter names, their C types)."""
    new_decls, pnames, ctys = [], [], []
    for i, d in enumerate(decls):
        m = re.match(r"^(\w+)(\*?) ?(\w+)$", d.replace("* ", "*"))
        if not m:
            raise KernelCodegenError(f"{name}: cannot parse parameter {d!r}")
        cty, star, pname = m.groups()
        pnames.append(pname)
        ctys.append(cty)
        if star:
            q = "const " if i in consts else ""
            r = " restrict" if use_restrict else ""
            new_decls.append(f"{q}{cty}*{r} {pname}")
        else:
            new_decls.append(f"{cty} {pname}")
    return f"int32_t {name}({', '.join(new_decls) if new_decls else 'void'})", pnames, ctys


def _place_scratch(name: str, f: tirx.PrimFunc, body: str, scratch: str, max_stack_bytes: int) -> tuple[str, int, int]:
    """(body, scratch bytes, static bytes): local arrays on the stack or ``static`` as ``scratch`` says,
    checked against the TIR's own allocations."""
    allocs = _alloc_bytes(f, name)
    total = sum(b for _, b in allocs)
    lines = body.split("\n")
    static_total = 0
    c_total = 0
    for li, line in enumerate(lines):
        m = _ALLOC_RE.match(line)
        if not m or m.group("ty") not in _C_SIZEOF:
            continue
        nbytes = int(m.group("n")) * _C_SIZEOF[m.group("ty")]
        c_total += nbytes
        make_static = scratch == "static" or (scratch == "auto" and nbytes > max_stack_bytes)
        if scratch == "error" and nbytes > max_stack_bytes:
            raise KernelCodegenError(
                f"{name}: local array {m.group('id')} needs {nbytes} bytes "
                f"(> max_stack_bytes={max_stack_bytes}); total scratch {total} bytes. "
                "Schedule the kernel (compute_inline / compute_at) to shrink it."
            )
        if make_static:
            lines[li] = f"{m.group('ind')}static {m.group('ty')} {m.group('id')}[{m.group('n')}];"
            static_total += nbytes
    if c_total != total:  # the printer's allocation form changed: do not guess
        raise KernelCodegenError(
            f"{name}: TIR allocates {total} scratch bytes ({allocs}) but {c_total} bytes of "
            "local arrays were found in the generated C"
        )
    return "\n".join(lines), total, static_total


def _void_unused(body: str, pnames: list[str]) -> str:
    """``(void)p;`` for each parameter the body never mentions (-Wunused-parameter)."""
    inner = body[1:]
    unused = [p for p in pnames if not re.search(rf"\b{re.escape(p)}\b", inner)]
    if not unused:
        return body
    return "{\n" + "".join(f"  (void){p};\n" for p in unused) + inner.lstrip("\n")


def _finish_text(definitions: list[str]) -> str:
    """The functions joined, float markers replaced by exact literals; an error if anything of the TVM
    runtime is left."""
    text = _FCONST_RE.sub(_fconst_sub, "\n\n".join(definitions))
    leftover = re.findall(r"\b(TVM\w*|tvm_\w*|__tvm\w*|DLTensor|TVMValue|TVMFFIAny)\b", text)
    if leftover or _FCONST_PREFIX in text:
        raise KernelCodegenError(f"generated C still references the TVM runtime: {sorted(set(leftover))}")
    return text


def _unit_source(text: str, protos: list[str], used_mk: set) -> str:
    """kernels.c: banner, the includes the text needs, the micro-kernels it calls, prototypes, functions."""
    includes = ["#include <stdint.h>"]
    if _uses_math(text):
        includes.append("#include <math.h>")
    if re.search(r"\bbool\b|\btrue\b|\bfalse\b", text):
        includes.append("#include <stdbool.h>")
    banner = (
        "/* Generated by edgemem.codegen.kernels_c from TVM TIR. Plain C11, no TVM runtime.\n"
        " * Each kernel returns 0. */"
    )
    helpers = [h for h in (_minmax_source(text),) if h]
    return "\n".join([banner, *includes, _microkernel_source(used_mk, text), *helpers, *protos, "", text.rstrip() + "\n"])


def _render_header(guard: str, protos: list[str]) -> str:
    from .templates import render

    return render("kernels.h.j2", guard=guard, protos=protos, uses_bool=any("bool" in p for p in protos))


_MATH_FUNCS = {
    "exp", "exp2", "expm1", "log", "log2", "log10", "log1p", "sqrt", "cbrt", "pow", "hypot",
    "sin", "cos", "tan", "asin", "acos", "atan", "atan2", "sinh", "cosh", "tanh", "asinh",
    "acosh", "atanh", "erf", "erfc", "floor", "ceil", "trunc", "round", "nearbyint", "rint",
    "fabs", "fmod", "fmin", "fmax", "copysign", "nextafter", "ldexp", "isnan", "isinf",
    "isfinite",
}  # fmt: skip


def _uses_math(text: str) -> bool:
    if re.search(r"\b(INFINITY|NAN)\b", text):
        return True
    for m in re.finditer(r"\b([a-z][a-z0-9]*)\(", text):
        fn = m.group(1)
        if fn in _MATH_FUNCS or (fn.endswith("f") and fn[:-1] in _MATH_FUNCS):
            return True
    return False


# --------------------------------------------------------------------------------------------
# int8 micro-kernels: loops the int8 kernels mark (kernels/int8_ops.py) become calls to static inline C
# --------------------------------------------------------------------------------------------
#
# A loop annotated ``edgemem.dot`` whose body is ``acc[a + i*NW + j] += int32(X_i[k]) * int32(W_j[k])`` for
# every i < NX, j < NW (NX, NW in _DOT_SHAPES) becomes ``em_dot_<NX>x<NW>_s8(&X_0[k0].., &W_0[k0].., n, &acc[a])``;
# a 4-iteration loop annotated ``edgemem.lanes`` whose body is ``acc[a + i] += int32(X[b + i]) * int32(W[c + i])``
# becomes ``em_mac4_s8(&X[b], &W[c], &acc[a])``. The TIR itself is unchanged for every other consumer (TVM's
# LLVM build runs the loops as written). The C of the helpers has a DSP path for cores with the ARMv7E-M DSP
# extension (``__ARM_FEATURE_DSP``: Cortex-M4/M7/M33): int8 loaded a word at a time, both operands widened
# with SXTB16 and SXTB16 ROR #8 (same lane order on both sides) and summed with SMLAD, or SMLABB/SMLATT
# for the 4-lane form; elsewhere (Cortex-M0/M3, the host) plain C. Sums wrap in int32 either way, so the
# results are identical. A 2x2 tile whose second pixel and second weight row lie at constant distances (all
# of them in the int8 kernels) and FC's four rows a constant stride apart get their own helpers with the
# distances as LDR immediates in an inline-asm loop (em_dot2x2_<dx>_<dw>[_n<n>]_s8, em_dot1x4_<dw>_s8); the
# final int8 clamp of these kernels becomes one SSAT (em_ssat8).

_DOT_SHAPES = {(1, 1), (1, 2), (2, 1), (2, 2), (1, 4)}

_MK_COMMON = r"""
#if defined(__ARM_FEATURE_DSP)
/* a volatile load: the compiler keeps the loads where they are instead of hoisting a whole 3x3 window of words
   into registers and spilling them (the "m" operand tells it which bytes are read) */
static inline uint32_t em_ld4(const int8_t* p) { uint32_t v; __asm__ volatile("ldr %0, %1" : "=r"(v) : "m"(*(const uint32_t*)(const void*)p)); return v; }
static inline uint32_t em_sxtb16(uint32_t v) { uint32_t r; __asm__("sxtb16 %0, %1" : "=r"(r) : "r"(v)); return r; }
static inline uint32_t em_sxtb16_ror8(uint32_t v) { uint32_t r; __asm__("sxtb16 %0, %1, ror #8" : "=r"(r) : "r"(v)); return r; }
static inline int32_t em_smlad(uint32_t a, uint32_t b, int32_t c) { int32_t r; __asm__("smlad %0, %1, %2, %3" : "=r"(r) : "r"(a), "r"(b), "r"(c)); return r; }
static inline int32_t em_smlabb(uint32_t a, uint32_t b, int32_t c) { int32_t r; __asm__("smlabb %0, %1, %2, %3" : "=r"(r) : "r"(a), "r"(b), "r"(c)); return r; }
static inline int32_t em_smlatt(uint32_t a, uint32_t b, int32_t c) { int32_t r; __asm__("smlatt %0, %1, %2, %3" : "=r"(r) : "r"(a), "r"(b), "r"(c)); return r; }
#endif
"""


def _dot_c(nx: int, nw: int) -> str:
    """C of em_dot_<nx>x<nw>_s8: acc[i*nw + j] += sum_k x_i[k] * w_j[k] for k < n."""
    name = f"em_dot_{nx}x{nw}_s8"
    xs = [f"x{i}" for i in range(nx)]
    ws = [f"w{j}" for j in range(nw)]
    pairs = [(i, j) for i in range(nx) for j in range(nw)]
    params = ", ".join([f"const int8_t* {p}" for p in xs + ws] + ["int32_t n", "int32_t* acc"])
    lines = [f"static inline int32_t {name}({params}) {{"]
    lines += [f"  int32_t a{i}{j} = acc[{i * nw + j}];" for i, j in pairs]
    lines += ["  int32_t k = 0;", "#if defined(__ARM_FEATURE_DSP)", "  for (; k + 4 <= n; k += 4) {"]
    for p in xs + ws:
        lines.append(f"    uint32_t {p}v = em_ld4({p} + k), {p}e = em_sxtb16({p}v), {p}o = em_sxtb16_ror8({p}v);")
    for i, j in pairs:
        lines.append(f"    a{i}{j} = em_smlad(x{i}e, w{j}e, a{i}{j}); a{i}{j} = em_smlad(x{i}o, w{j}o, a{i}{j});")
    lines += ["  }", "#endif", "  for (; k < n; ++k) {"]
    lines += [f"    int32_t {p}k = {p}[k];" for p in xs + ws]
    lines += [f"    a{i}{j} += x{i}k * w{j}k;" for i, j in pairs]
    lines += ["  }"]
    lines += [f"  acc[{i * nw + j}] = a{i}{j};" for i, j in pairs]
    lines += ["  return 0;", "}"]
    return "\n".join(lines) + "\n"


# A 2x2 tile whose second pixel and second weight row lie at constant distances from the first (every 2x2
# tile the int8 kernels make): the offsets go into the helper's name and its loads as immediates, so the loop
# needs 13 registers (4 sums, 6 operands, 2 pointers, a count) and the compiler spills nothing. Eight bytes of K
# per pass: 8 loads, 16 SXTB16 and 16 SMLAD for 32 MACs, plus 2 for the loop.
_STEP4 = [  # x0 and x1 (4 bytes each) against w1 then w0; the loads of the second ones come before the post-increments
    "ldr %[t1], [%[xp], #{dx}]", "ldr %[t0], [%[xp]], #4",
    "sxtb16 %[t2], %[t0]", "sxtb16 %[t0], %[t0], ror #8", "sxtb16 %[t3], %[t1]", "sxtb16 %[t1], %[t1], ror #8",
    "ldr %[t4], [%[wp], #{dw}]", "sxtb16 %[t5], %[t4]", "sxtb16 %[t4], %[t4], ror #8",
    "smlad %[a01], %[t2], %[t5], %[a01]", "smlad %[a01], %[t0], %[t4], %[a01]",
    "smlad %[a11], %[t3], %[t5], %[a11]", "smlad %[a11], %[t1], %[t4], %[a11]",
    "ldr %[t4], [%[wp]], #4", "sxtb16 %[t5], %[t4]", "sxtb16 %[t4], %[t4], ror #8",
    "smlad %[a00], %[t2], %[t5], %[a00]", "smlad %[a00], %[t0], %[t4], %[a00]",
    "smlad %[a10], %[t3], %[t5], %[a10]", "smlad %[a10], %[t1], %[t4], %[a10]",
]
_ASM_OPERANDS = (
    '[a00] "+r"(a00), [a01] "+r"(a01), [a10] "+r"(a10), [a11] "+r"(a11), [xp] "+r"(xp), [wp] "+r"(wp), '
    '[t0] "=&r"(t0), [t1] "=&r"(t1), [t2] "=&r"(t2), [t3] "=&r"(t3), [t4] "=&r"(t4), [t5] "=&r"(t5)'
)
MAX_LDR_OFFSET = 4095  # a Thumb-2 LDR's largest positive immediate offset


UNROLL_DOT = 64  # a 2x2 tile's reduction of at most this many bytes (known at build time) runs without a loop


def dot2x2_name(dx: int, dw: int, n: int | None = None) -> str:
    return f"em_dot2x2_{dx}_{dw}_s8" if n is None else f"em_dot2x2_{dx}_{dw}_n{n}_s8"


def _asm_block(instructions: list[str], operands: str) -> str:
    lines = "\n".join(f'      "{ins}\\n\\t"' for ins in instructions)
    return f"""    __asm__ volatile(
{lines}
      : {operands}
      :
      : "cc", "memory");
"""


def _dot2x2_fixed_c(dx: int, dw: int, n: int | None = None) -> str:
    """C of em_dot2x2_<dx>_<dw>[_n<n>]_s8(x, w, n, acc): acc[2i + j] += sum_k x[i*dx + k] * w[j*dw + k] for k < n.
    With n fixed (at most UNROLL_DOT): the 4-byte steps written out, no loop counter."""
    step = [ins.replace("{dx}", str(dx)).replace("{dw}", str(dw)) for ins in _STEP4]
    regs = "    const int8_t* xp = x;\n    const int8_t* wp = w;\n    uint32_t t0, t1, t2, t3, t4, t5;\n"
    if n is not None:
        dsp = (f"  {{\n{regs}" + _asm_block(step * (n // 4), _ASM_OPERANDS) + f"    k = {n // 4 * 4};\n  }}\n"
               if n >= 4 else "")
        head = "  (void)n;\n"
        n_c = str(n)
    else:
        loop = _asm_block(["1:", *step, *step, "subs %[cnt], %[cnt], #1", "bne 1b"], _ASM_OPERANDS + ', [cnt] "+r"(cnt)')
        dsp = (f"  if (n >= 8) {{\n{regs}    int32_t cnt = n >> 3;\n{loop}    k = n & ~7;\n  }}\n"
               f"  if (n - k >= 4) {{\n{regs.replace('= x;', '= x + k;').replace('= w;', '= w + k;')}"
               + _asm_block(step, _ASM_OPERANDS) + "    k += 4;\n  }\n")
        head, n_c = "", "n"
    return f"""static inline int32_t {dot2x2_name(dx, dw, n)}(const int8_t* x, const int8_t* w, int32_t n, int32_t* acc) {{
  int32_t a00 = acc[0], a01 = acc[1], a10 = acc[2], a11 = acc[3];
  int32_t k = 0;
{head}#if defined(__ARM_FEATURE_DSP)
{dsp}#endif
  for (; k < {n_c}; ++k) {{
    int32_t x0 = x[k], x1 = x[{dx} + k], w0 = w[k], w1 = w[{dw} + k];
    a00 += x0 * w0; a01 += x0 * w1; a10 += x1 * w0; a11 += x1 * w1;
  }}
  acc[0] = a00; acc[1] = a01; acc[2] = a10; acc[3] = a11;
  return 0;
}}
"""


# FULLY_CONNECTED's four rows per pass (rows dw bytes apart): x widened once per 4 bytes, each row loaded at an
# immediate offset from the first; 11 registers.
_STEP1X4 = ["ldr %[t0], [%[xp]], #4", "sxtb16 %[t1], %[t0]", "sxtb16 %[t0], %[t0], ror #8"] + [
    ins for j in (1, 2, 3, 0) for ins in (
        f"ldr %[t2], [%[wp], #{{d{j}}}]" if j else "ldr %[t2], [%[wp]], #4",
        "sxtb16 %[t3], %[t2]", "sxtb16 %[t2], %[t2], ror #8",
        f"smlad %[a{j}], %[t1], %[t3], %[a{j}]", f"smlad %[a{j}], %[t0], %[t2], %[a{j}]")]
_ASM1X4_OPERANDS = ('[a0] "+r"(a0), [a1] "+r"(a1), [a2] "+r"(a2), [a3] "+r"(a3), [xp] "+r"(xp), [wp] "+r"(wp), '
                    '[t0] "=&r"(t0), [t1] "=&r"(t1), [t2] "=&r"(t2), [t3] "=&r"(t3)')


def dot1x4_name(dw: int) -> str:
    return f"em_dot1x4_{dw}_s8"


def _dot1x4_fixed_c(dw: int) -> str:
    """C of em_dot1x4_<dw>_s8(x, w, n, acc): acc[j] += sum_k x[k] * w[j*dw + k] for j < 4, k < n."""
    step = [ins.replace("{d1}", str(dw)).replace("{d2}", str(2 * dw)).replace("{d3}", str(3 * dw)) for ins in _STEP1X4]
    regs = "    const int8_t* xp = x;\n    const int8_t* wp = w;\n    uint32_t t0, t1, t2, t3;\n"
    loop = _asm_block(["1:", *step, *step, "subs %[cnt], %[cnt], #1", "bne 1b"], _ASM1X4_OPERANDS + ', [cnt] "+r"(cnt)')
    rest = regs.replace("= x;", "= x + k;").replace("= w;", "= w + k;")
    return f"""static inline int32_t {dot1x4_name(dw)}(const int8_t* x, const int8_t* w, int32_t n, int32_t* acc) {{
  int32_t a0 = acc[0], a1 = acc[1], a2 = acc[2], a3 = acc[3];
  int32_t k = 0;
#if defined(__ARM_FEATURE_DSP)
  if (n >= 8) {{
{regs}    int32_t cnt = n >> 3;
{loop}    k = n & ~7;
  }}
  if (n - k >= 4) {{
{rest}{_asm_block(step, _ASM1X4_OPERANDS)}    k += 4;
  }}
#endif
  for (; k < n; ++k) {{
    int32_t xk = x[k];
    a0 += xk * w[k]; a1 += xk * w[{dw} + k]; a2 += xk * w[{2 * dw} + k]; a3 += xk * w[{3 * dw} + k];
  }}
  acc[0] = a0; acc[1] = a1; acc[2] = a2; acc[3] = a3;
  return 0;
}}
"""


_SSAT8_C = r"""static inline int32_t em_ssat8(int32_t v) {
#if defined(__ARM_FEATURE_SAT)
  int32_t r;
  __asm__("ssat %0, #8, %1" : "=r"(r) : "r"(v));
  return r;
#else
  return v < -128 ? -128 : (v > 127 ? 127 : v);
#endif
}
"""


def _saturating_store(store):
    """``out[i] = int8(min(max(v, lo), hi))`` (the int8 kernels' last step) -> ``int8(em_ssat8(v))`` plus only the
    bounds tighter than int8's (a fused ReLU's lower bound): one SSAT instead of two compare-and-selects and a
    sign extension."""
    v = store.value
    if not (isinstance(v, tirx.Cast) and str(v.ty) == "int8"):
        return None
    inner, lo, hi = v.value, -128, 127
    if isinstance(inner, tirx.Min) and isinstance(inner.b, tirx.IntImm):
        inner, hi = inner.a, int(inner.b)
    if isinstance(inner, tirx.Max) and isinstance(inner.b, tirx.IntImm):
        inner, lo = inner.a, int(inner.b)
    if inner is v.value or str(inner.ty) != "int32" or not (-128 <= lo <= hi <= 127):
        return None
    sat = tirx.call_extern("int32", "em_ssat8", inner)
    if lo > -128:
        sat = tirx.Max(sat, tirx.IntImm("int32", lo))
    if hi < 127:
        sat = tirx.Min(sat, tirx.IntImm("int32", hi))
    return tirx.BufferStore(store.buffer, tirx.Cast("int8", sat), store.indices)


_MAC4_C = r"""static inline int32_t em_mac4_s8(const int8_t* x, const int8_t* w, int32_t* acc) {
#if defined(__ARM_FEATURE_DSP)
  uint32_t xv = em_ld4(x), wv = em_ld4(w);
  uint32_t xe = em_sxtb16(xv), xo = em_sxtb16_ror8(xv), we = em_sxtb16(wv), wo = em_sxtb16_ror8(wv);
  acc[0] = em_smlabb(xe, we, acc[0]);
  acc[1] = em_smlabb(xo, wo, acc[1]);
  acc[2] = em_smlatt(xe, we, acc[2]);
  acc[3] = em_smlatt(xo, wo, acc[3]);
#else  /* written out: GCC -O2 keeps a 4-iteration loop, with the sums going through memory on every call */
  int32_t a0 = acc[0] + (int32_t)x[0] * (int32_t)w[0], a1 = acc[1] + (int32_t)x[1] * (int32_t)w[1];
  int32_t a2 = acc[2] + (int32_t)x[2] * (int32_t)w[2], a3 = acc[3] + (int32_t)x[3] * (int32_t)w[3];
  acc[0] = a0; acc[1] = a1; acc[2] = a2; acc[3] = a3;
#endif
  return 0;
}
"""


def _product(value, k):
    """(X, x index, W, w index) of ``int32(X[ix]) * int32(W[iw])``, else None."""
    if not isinstance(value, tirx.Mul):
        return None
    ops = []
    for side in (value.a, value.b):
        if not (isinstance(side, tirx.Cast) and str(side.ty) == "int32" and isinstance(side.value, _TensorLoad)
                and str(side.value.ty) == "int8" and len(side.value.indices) == 1):
            return None
        ops.append((side.value.source, side.value.indices[0]))
    return ops[0][0], ops[0][1], ops[1][0], ops[1][1]


def _accumulations(body, k):
    """[(acc buffer, acc index, X, x index, W, w index)] of a body of ``acc[a] = acc[a] + int32(X[.]) * int32(W[.])``."""
    stmts = list(body.seq) if isinstance(body, tirx.SeqStmt) else [body]
    out = []
    for st in stmts:
        if not (isinstance(st, tirx.BufferStore) and len(st.indices) == 1 and isinstance(st.value, tirx.Add)):
            return None
        acc, a = st.buffer, st.indices[0]
        first = st.value.a
        if not (isinstance(first, _TensorLoad) and first.source.same_as(acc) and len(first.indices) == 1
                and tvm_ffi.structural_equal(first.indices[0], a)):
            return None
        prod = _product(st.value.b, k)
        if prod is None:
            return None
        out.append((acc, a, *prod))
    return out


from tvm.sym import Analyzer as _Analyzer  # noqa: E402

_TensorLoad = tvm.ir.expr.TensorLoad  # what indexing a buffer gives (tirx.BufferLoad builds one)


def _substitute(expr, var, value):
    return tvm_ffi.structural_map(expr, (tirx.Var, lambda v: value if v.same_as(var) else v))


def _at(buf, index):
    return tirx.address_of(tirx.BufferLoad(buf, [index]))


def _dot_call(loop, used: set):
    k = loop.loop_var
    acc_list = _accumulations(loop.body, k)
    if not acc_list:
        return None
    ana = _Analyzer()

    def base(index):  # index at the loop's first iteration, if index = base + k
        b = ana.simplify(_substitute(index, k, loop.min))
        return b if ana.can_prove_equal(index - k, b - loop.min) else None

    acc = acc_list[0][0]
    xs, ws, cells = [], [], {}
    for buf, a, xb, xi, wb, wi in acc_list:
        bx, bw = base(xi), base(wi)
        if not buf.same_as(acc) or bx is None or bw is None or any(v.same_as(k) for v in _vars(a)):
            return None
        keys = []
        for lst, b, idx in ((xs, xb, bx), (ws, wb, bw)):
            for n_, (ob, oi) in enumerate(lst):
                if ob.same_as(b) and ana.can_prove_equal(oi, idx):
                    keys.append(n_)
                    break
            else:
                lst.append((b, idx))
                keys.append(len(lst) - 1)
        cells[tuple(keys)] = a
    nx, nw = len(xs), len(ws)
    if (nx, nw) not in _DOT_SHAPES or len(cells) != nx * nw or len(acc_list) != nx * nw:
        return None
    a0 = cells[(0, 0)]
    if not all(ana.can_prove_equal(cells[(i, j)], a0 + i * nw + j) for i in range(nx) for j in range(nw)):
        return None
    if (nx, nw) == (2, 2) and xs[0][0].same_as(xs[1][0]) and ws[0][0].same_as(ws[1][0]):
        dx, dw = (ana.simplify(lst[1][1] - lst[0][1]) for lst in (xs, ws))
        if all(isinstance(d, tirx.IntImm) and 0 < int(d) <= MAX_LDR_OFFSET for d in (dx, dw)):
            n = int(loop.extent) if isinstance(loop.extent, tirx.IntImm) and int(loop.extent) <= UNROLL_DOT else None
            used.add(("dot2x2", int(dx), int(dw), n))
            args = [_at(*xs[0]), _at(*ws[0]), loop.extent, _at(acc, a0)]
            return tirx.Evaluate(tirx.call_extern("int32", dot2x2_name(int(dx), int(dw), n), *args))
    if (nx, nw) == (1, 4) and all(b.same_as(ws[0][0]) for b, _ in ws):
        steps = [ana.simplify(ws[j][1] - ws[0][1]) for j in range(4)]
        dw = steps[1]
        if isinstance(dw, tirx.IntImm) and 0 < 3 * int(dw) <= MAX_LDR_OFFSET and all(
                ana.can_prove_equal(steps[j], j * int(dw)) for j in range(4)):
            used.add(("dot1x4", int(dw)))
            args = [_at(*xs[0]), _at(*ws[0]), loop.extent, _at(acc, a0)]
            return tirx.Evaluate(tirx.call_extern("int32", dot1x4_name(int(dw)), *args))
    used.add(("dot", nx, nw))
    args = [_at(b, i) for b, i in xs] + [_at(b, i) for b, i in ws] + [loop.extent, _at(acc, a0)]
    return tirx.Evaluate(tirx.call_extern("int32", f"em_dot_{nx}x{nw}_s8", *args))


def _mac4_call(loop, used: set):
    i = loop.loop_var
    if not (isinstance(loop.extent, tirx.IntImm) and int(loop.extent) == 4 and isinstance(loop.min, tirx.IntImm) and int(loop.min) == 0):
        return None
    acc_list = _accumulations(loop.body, i)
    if not acc_list or len(acc_list) != 1:
        return None
    acc, a, xb, xi, wb, wi = acc_list[0]
    ana = _Analyzer()
    bases = [ana.simplify(_substitute(e, i, tirx.IntImm("int32", 0))) for e in (a, xi, wi)]
    if not all(ana.can_prove_equal(e - i, b) for e, b in zip((a, xi, wi), bases)):
        return None
    used.add(("mac4",))
    return tirx.Evaluate(tirx.call_extern("int32", "em_mac4_s8", _at(xb, bases[1]), _at(wb, bases[2]), _at(acc, bases[0])))


def _vars(expr) -> set:
    found = set()
    tvm_ffi.structural_walk(expr, (tirx.Var, lambda v: found.add(v)))
    return found


def _use_microkernels(func: tirx.PrimFunc, used: set) -> tirx.PrimFunc:
    """Marked loops -> micro-kernel calls (see above); a marked loop of another form stays a loop."""

    marked = []

    def find(loop):
        ann = loop.annotations or {}
        if DOT in ann or LANES in ann:
            marked.append(loop)

    tvm_ffi.structural_walk(func.body, (tirx.For, find))
    if not marked:  # nothing to do: the function is returned as it is
        return func

    def on_for(loop):
        ann = loop.annotations or {}
        new = None
        if DOT in ann:
            new = _dot_call(loop, used)
        elif LANES in ann:
            new = _mac4_call(loop, used)
        return new if new is not None else loop

    body = tvm_ffi.structural_map(func.body, (tirx.For, on_for))

    def on_store(store):
        new = _saturating_store(store)
        if new is None:
            return store
        used.add(("ssat8",))
        return new

    return func.with_body(tvm_ffi.structural_map(body, (tirx.BufferStore, on_store)))


def _microkernel_source(used: set, text: str) -> str:
    """The helpers the kernels' C really calls (a kernel rewritten to use one may be dropped later, and clang
    warns of an unused static inline function)."""
    def name(key):
        if key[0] in ("mac4", "ssat8"):
            return {"mac4": "em_mac4_s8", "ssat8": "em_ssat8"}[key[0]]
        if key[0] == "dot1x4":
            return dot1x4_name(key[1])
        return dot2x2_name(*key[1:]) if key[0] == "dot2x2" else f"em_dot_{key[1]}x{key[2]}_s8"

    def source(key):
        if key[0] in ("mac4", "ssat8"):
            return {"mac4": _MAC4_C, "ssat8": _SSAT8_C}[key[0]]
        if key[0] == "dot1x4":
            return _dot1x4_fixed_c(key[1])
        return _dot2x2_fixed_c(*key[1:]) if key[0] == "dot2x2" else _dot_c(key[1], key[2])

    called = [key for key in sorted(used, key=str) if name(key) + "(" in text]
    if not called:
        return ""
    return "".join([_MK_COMMON] + [source(key) for key in called])
