"""The C emitter against TVM's own semantics: every kernel a model lowers to, compiled two ways -- edgemem's plain
C (codegen/kernels_c.py, host gcc) and TVM's LLVM build of the same PrimFunc -- and run on the same arguments
(the model's own constants, seeded random activations); every integer buffer must come out byte-identical, every
float buffer within 1e-5 relative (libm against LLVM's intrinsics).

Written for issue 31's wrong answer: a 1x1 MAX_POOL_2D whose C read a stale copy of its accumulator (TVM's C
printer remembers a min/max operand by its text across a store). The graph-level tests compare whole models with
TFLite Micro, so they only see what the chosen models exercise; this compares each kernel with the TIR it was
printed from, whatever operator it comes from.
"""

from __future__ import annotations

import ctypes
import shutil
import subprocess
import tempfile
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import tvm
import tvm_ffi
from tvm import relax, tirx

from edgemem.codegen.kernels_c import prim_funcs_to_c
from edgemem.frontend.tflite_import import import_tflite
from edgemem.passes.lower import lower_to_kernels

HOST_CC = shutil.which("gcc")
FLOAT_RTOL = 1e-5  # float kernels: what the model tests allow against TFLM (integers: every bit)
_NP = {"int8_t": np.int8, "uint8_t": np.uint8, "int16_t": np.int16, "uint16_t": np.uint16, "int32_t": np.int32,
       "uint32_t": np.uint32, "int64_t": np.int64, "uint64_t": np.uint64, "float": np.float32, "double": np.float64,
       "bool": np.bool_}  # fmt: skip


@dataclass
class KernelCall:
    """One kernel call of a lowered model: the PrimFunc and its arguments (numpy for constants, None for an
    activation, drawn at random by ``compare``)."""

    name: str
    func: tirx.PrimFunc
    constants: list  # per parameter: np.ndarray or None


def _calls_extern(func: tirx.PrimFunc) -> bool:
    """A kernel calling other kernels by name (a rolling stage) cannot be linked by TVM's LLVM build alone."""
    found = []

    def visit(call):
        if getattr(getattr(call, "op", None), "name", "") == "tirx.call_extern":
            found.append(call)

    tvm_ffi.structural_walk(func.body, (tvm.ir.Call, visit))
    return bool(found)


def kernel_calls(model: Path) -> list[KernelCall]:
    """The distinct kernel calls of ``model`` lowered as the build lowers it (no memory pass: those rewrite the same
    kernels' stores, checked by their own tests)."""
    mod = lower_to_kernels(import_tflite(Path(model)).relax_mod)
    calls: list[KernelCall] = []
    seen: set = set()

    def visit(expr):
        if not (isinstance(expr, relax.Call) and getattr(expr.op, "name", "") == "relax.call_tir"):
            return
        gv = expr.args[0]
        func = mod[gv]
        if gv.name_hint in seen or not isinstance(func, tirx.PrimFunc) or _calls_extern(func):
            return
        seen.add(gv.name_hint)
        args = list(expr.args[1].fields) if isinstance(expr.args[1], relax.Tuple) else [expr.args[1]]
        consts = [a.value.numpy() if isinstance(a, tvm.ir.Constant) else None for a in args]
        consts += [None] * (len(func.params) - len(consts))  # the outputs
        calls.append(KernelCall(gv.name_hint, func, consts))

    relax.analysis.post_order_visit(mod["main"], visit)
    return calls


def _random(rng: np.random.Generator, dtype, shape) -> np.ndarray:
    dtype = np.dtype(dtype)
    if dtype == np.bool_:
        return rng.integers(0, 2, size=shape).astype(np.bool_)
    if np.issubdtype(dtype, np.integer):
        info = np.iinfo(dtype)
        lo, hi = (info.min, info.max) if dtype.itemsize <= 2 else (-(1 << 15), 1 << 15)  # indices, int32 sums
        return rng.integers(lo, hi, size=shape, endpoint=True).astype(dtype)
    return rng.standard_normal(size=shape).astype(dtype)


def compare(calls: list[KernelCall], seed: int = 0, tmp: Path | None = None) -> list[str]:
    """Run each kernel's C and its LLVM build on the same arguments; a line per kernel that differs."""
    if not calls:
        return []
    funcs = {f"k{i}": c.func for i, c in enumerate(calls)}
    ck = prim_funcs_to_c(funcs, restrict=False)
    with tempfile.TemporaryDirectory(dir=tmp) as d:
        src, so = Path(d) / "k.c", Path(d) / "k.so"
        src.write_text(ck.source)
        subprocess.run([HOST_CC, "-std=c11", "-O1", "-fPIC", "-shared", str(src), "-o", str(so), "-lm"], check=True,
                       capture_output=True, timeout=600)  # fmt: skip
        lib = ctypes.CDLL(str(so))
        rng = np.random.default_rng(seed)
        bad = []
        for (cname, func), call in zip(funcs.items(), calls):
            params = list(func.params)  # buffer-typed parameters: dtype and shape
            args = [c if c is not None else _random(rng, str(b.dtype), [int(s) for s in b.shape])
                    for c, b in zip(call.constants, params)]  # fmt: skip
            args = [np.ascontiguousarray(a.astype(str(b.dtype)).reshape([int(s) for s in b.shape]))
                    for a, b in zip(args, params)]  # fmt: skip
            via_c = [a.copy() for a in args]
            fn = getattr(lib, cname)
            fn.restype = ctypes.c_int32
            for a, cty in zip(via_c, ck.param_ctypes[cname]):
                assert a.dtype == _NP[cty], (call.name, cty, a.dtype)
            fn(*[a.ctypes.data_as(ctypes.c_void_p) for a in via_c])
            built = tvm.compile(tvm.IRModule({"main": func.with_attr("global_symbol", "main")}), target="llvm")
            via_llvm = [tvm.runtime.tensor(a.copy()) for a in args]
            built["main"](*via_llvm)
            for k, (c_out, l_out) in enumerate(zip(via_c, via_llvm)):
                l_out = l_out.numpy()
                if np.issubdtype(c_out.dtype, np.floating):  # libm vs LLVM's intrinsics, contraction: last bits
                    scale = max(1.0, float(np.max(np.abs(l_out), initial=0.0)))
                    if np.allclose(c_out, l_out, rtol=FLOAT_RTOL, atol=FLOAT_RTOL * scale, equal_nan=True):
                        continue
                if c_out.tobytes() != l_out.tobytes():
                    diff = np.flatnonzero(c_out.reshape(-1) != l_out.reshape(-1))
                    bad.append(f"{call.name} parameter {k}: {diff.size} of {c_out.size} elements differ "
                               f"(first at {diff[0]}: C {c_out.reshape(-1)[diff[0]]}, TVM {l_out.reshape(-1)[diff[0]]})")  # fmt: skip
        return bad
