"""edgemem.codegen.kernels_c: TIR PrimFuncs -> plain C, checked by compiling and running it.

Every kernel is built with TVM TE (some scheduled with tvm.s_tir.Schedule), turned into C by
prim_funcs_to_c, compiled with host gcc (-Wall -Wextra -Werror) into a shared library, called via
ctypes on seeded random inputs and compared with an independent numpy oracle (int64 arithmetic;
bit-exact for integer kernels).  The same C must compile with arm-none-eabi-gcc for Cortex-M7.
"""

from __future__ import annotations

import ctypes
import re
import shutil
import subprocess
from pathlib import Path

import numpy as np
import pytest

tvm = pytest.importorskip("tvm")
from tvm import s_tir, te, tirx  # noqa: E402

from edgemem.codegen.kernels_c import (  # noqa: E402
    PIPELINE_NAME,
    CKernels,
    KernelCodegenError,
    prim_funcs_to_c,
)

HOST_CC = shutil.which("gcc")
ARM_CC = shutil.which("arm-none-eabi-gcc")
WFLAGS = ["-std=c11", "-O2", "-Wall", "-Wextra", "-Werror"]
ARM_FLAGS = ["-mcpu=cortex-m7", "-mthumb", "-mfpu=fpv5-sp-d16", "-mfloat-abi=hard"]

pytestmark = pytest.mark.skipif(HOST_CC is None, reason="host gcc not installed")


# ----------------------------------------------------------------------------------------------
# kernels (TE)
# ----------------------------------------------------------------------------------------------

# conv geometry: NHWC input, HWIO weights, SAME padding 1, stride 1
N, H, W, CI, CO, K = 1, 7, 6, 5, 8, 3
IN_ZP, OUT_ZP = -3, 5


def conv_requant_te():
    """int8 conv2d NHWC (padded-input stage), int32 accumulation, TFLite-like per-channel
    requantization: int64 multiply, rounding right shift by (31 + shift[o]), zero point, clamp."""
    X = te.placeholder((N, H, W, CI), "int8", name="X")
    Wt = te.placeholder((K, K, CI, CO), "int8", name="Wt")
    Bias = te.placeholder((CO,), "int32", name="Bias")
    Mult = te.placeholder((CO,), "int32", name="Mult")
    Shift = te.placeholder((CO,), "int32", name="Shift")
    Pad = te.compute(
        (N, H + 2, W + 2, CI),
        lambda n, h, w, c: tirx.if_then_else(
            tirx.all(h >= 1, h < H + 1, w >= 1, w < W + 1),
            X[n, h - 1, w - 1, c],
            tirx.const(IN_ZP, "int8"),
        ),
        name="Pad",
    )
    rh = te.reduce_axis((0, K), "rh")
    rw = te.reduce_axis((0, K), "rw")
    rc = te.reduce_axis((0, CI), "rc")
    Acc = te.compute(
        (N, H, W, CO),
        lambda n, h, w, o: te.sum(
            (Pad[n, h + rh, w + rw, rc].astype("int32") - IN_ZP) * Wt[rh, rw, rc, o].astype("int32"),
            axis=[rh, rw, rc],
        ),
        name="Acc",
    )

    def requant(n, h, w, o):
        acc = (Acc[n, h, w, o] + Bias[o]).astype("int64")
        total_shift = Shift[o].astype("int64") + tirx.const(31, "int64")
        prod = acc * Mult[o].astype("int64")
        rounded = (prod + (tirx.const(1, "int64") << (total_shift - tirx.const(1, "int64")))) >> total_shift
        v = rounded + tirx.const(OUT_ZP, "int64")
        v = tirx.max(tirx.min(v, tirx.const(127, "int64")), tirx.const(-128, "int64"))
        return v.astype("int8")

    Out = te.compute((N, H, W, CO), requant, name="Out")
    return [X, Wt, Bias, Mult, Shift, Out]


def conv_requant_ref(x, w, bias, mult, shift):
    x64 = x.astype(np.int64)
    xp = np.full((N, H + 2, W + 2, CI), IN_ZP, np.int64)
    xp[:, 1 : H + 1, 1 : W + 1, :] = x64
    acc = np.zeros((N, H, W, CO), np.int64)
    for kh in range(K):
        for kw in range(K):
            patch = xp[:, kh : kh + H, kw : kw + W, :] - IN_ZP  # (N,H,W,CI)
            acc += np.einsum("nhwc,co->nhwo", patch, w[kh, kw].astype(np.int64))
    acc = acc + bias.astype(np.int64)
    assert np.all(np.abs(acc) < 2**31)  # no int32 overflow in the kernel
    total = shift.astype(np.int64) + 31
    prod = acc * mult.astype(np.int64)
    rounded = (prod + (np.int64(1) << (total - 1))) >> total
    return np.clip(rounded + OUT_ZP, -128, 127).astype(np.int8)


def conv_inputs(rng):
    x = rng.integers(-128, 128, (N, H, W, CI), dtype=np.int8)
    w = rng.integers(-127, 128, (K, K, CI, CO), dtype=np.int8)
    bias = rng.integers(-5000, 5000, (CO,), dtype=np.int32)
    mult = rng.integers(1 << 30, (1 << 31) - 1, (CO,), dtype=np.int32)
    shift = rng.integers(0, 9, (CO,), dtype=np.int32)
    return x, w, bias, mult, shift


def conv_unscheduled():
    return te.create_prim_func(conv_requant_te())


def conv_scheduled():
    """Pad inlined; Acc computed per output element (scalar accumulator, compute_at) with its
    init split off (decompose_reduction); epilogue attached with reverse_compute_at."""
    f = te.create_prim_func(conv_requant_te())
    sch = s_tir.Schedule(f)
    sch.compute_inline(sch.get_sblock("Pad"))
    acc = sch.get_sblock("Acc")
    n, h, w, o, rh, rw, rc = sch.get_loops(acc)
    sch.reverse_compute_at(sch.get_sblock("Out"), o)
    sch.decompose_reduction(acc, rh)
    return sch.mod["main"]


def softmax_te(n=37):
    S = te.placeholder((n,), "float32", name="S")
    k = te.reduce_axis((0, n), "k")
    M = te.compute((1,), lambda _: te.max(S[k], axis=k), name="M")
    E = te.compute((n,), lambda i: tirx.exp(S[i] - M[0]), name="E")
    k2 = te.reduce_axis((0, n), "k2")
    Z = te.compute((1,), lambda _: te.sum(E[k2], axis=k2), name="Z")
    O = te.compute((n,), lambda i: E[i] / Z[0], name="O")
    return te.create_prim_func([S, O])


def add_int8_te(n=100):
    """Elementwise int8 add with saturation (int32 intermediate)."""
    A = te.placeholder((n,), "int8", name="A")
    B = te.placeholder((n,), "int8", name="B")
    C = te.compute(
        (n,),
        lambda i: tirx.max(tirx.min(A[i].astype("int32") + B[i].astype("int32"), 127), -128).astype(
            "int8"
        ),
        name="C",
    )
    return te.create_prim_func([A, B, C])


def int_ops_te(n=64):
    """Casts between int16/uint8/int32/int64, shifts, bitwise ops, floordiv/floormod,
    if_then_else, min/max."""
    A = te.placeholder((n,), "int16", name="A")
    U = te.placeholder((n,), "uint8", name="U")
    O32 = te.compute(
        (n,),
        lambda i: (
            tirx.floordiv(A[i].astype("int32"), 7)
            + tirx.floormod(A[i].astype("int32"), 5)
            + (A[i].astype("int32") >> 3)
            + ((U[i].astype("int32") & 0x3F) << 4)
            + (A[i].astype("int32") | 0x11)
            + (A[i].astype("int32") ^ U[i].astype("int32"))
            + tirx.if_then_else(A[i] > 0, A[i].astype("int32"), U[i].astype("int32") * -2)
        ),
        name="O32",
    )
    O64 = te.compute(
        (n,),
        lambda i: (A[i].astype("int64") * tirx.const(3_000_000_007, "int64"))
        >> (U[i].astype("int64") & tirx.const(15, "int64")),
        name="O64",
    )
    OU8 = te.compute((n,), lambda i: tirx.max(U[i], tirx.const(100, "uint8")) - tirx.const(1, "uint8"),
                     name="OU8")  # fmt: skip
    return te.create_prim_func([A, U, O32, O64, OU8])


def int_ops_ref(a, u):
    a32 = a.astype(np.int64)
    u32 = u.astype(np.int64)
    o32 = (
        a32 // 7
        + a32 % 5
        + (a32 >> 3)
        + ((u32 & 0x3F) << 4)
        + (a32 | 0x11)
        + (a32 ^ u32)
        + np.where(a32 > 0, a32, u32 * -2)
    ).astype(np.int32)
    o64 = (a32 * 3_000_000_007) >> (u32 & 15)
    ou8 = (np.maximum(u32, 100) - 1).astype(np.uint8)
    return o32, o64, ou8


def fconst_te(n=16):
    """Float constants that TVM's own printer would round to 7 digits."""
    F = te.placeholder((n,), "float32", name="F")
    O = te.compute((n,), lambda i: F[i] * tirx.const(0.123456789, "float32")
                   + tirx.const(1.0 / 3.0, "float32"), name="O")  # fmt: skip
    return te.create_prim_func([F, O])


# ----------------------------------------------------------------------------------------------
# helpers
# ----------------------------------------------------------------------------------------------

_CTYPES = {"int8_t": np.int8, "uint8_t": np.uint8, "int16_t": np.int16, "int32_t": np.int32,
           "int64_t": np.int64, "float": np.float32}  # fmt: skip


def compile_shared(ck: CKernels, tmp_path: Path, stem: str) -> ctypes.CDLL:
    c = tmp_path / f"{stem}.c"
    c.write_text(ck.source)
    so = tmp_path / f"{stem}.so"
    r = subprocess.run(
        [HOST_CC, *WFLAGS, "-fPIC", "-shared", str(c), "-o", str(so), "-lm"],
        capture_output=True,
        text=True,
    )
    assert r.returncode == 0, f"gcc failed:\n{r.stderr}\n---\n{ck.source}"
    assert r.stderr == "", r.stderr
    return ctypes.CDLL(str(so))


def call(lib: ctypes.CDLL, ck: CKernels, name: str, *arrays: np.ndarray) -> None:
    fn = getattr(lib, name)
    fn.restype = ctypes.c_int32
    ctys = ck.param_ctypes[name]
    assert len(ctys) == len(arrays)
    ptrs = []
    for cty, a in zip(ctys, arrays, strict=True):
        assert a.dtype == _CTYPES[cty], (cty, a.dtype)
        assert a.flags["C_CONTIGUOUS"]
        ptrs.append(a.ctypes.data_as(ctypes.c_void_p))
    assert fn(*ptrs) == 0


def arm_compile(ck: CKernels, tmp_path: Path, stem: str) -> None:
    if ARM_CC is None:
        pytest.skip("arm-none-eabi-gcc not installed")
    c = tmp_path / f"{stem}_arm.c"
    c.write_text(ck.source)
    r = subprocess.run(
        [ARM_CC, *ARM_FLAGS, *WFLAGS, "-c", str(c), "-o", str(tmp_path / f"{stem}_arm.o")],
        capture_output=True,
        text=True,
    )
    assert r.returncode == 0, f"arm-none-eabi-gcc failed:\n{r.stderr}\n---\n{ck.source}"
    assert r.stderr == "", r.stderr


def check_plain_c(ck: CKernels) -> None:
    includes = re.findall(r"#include\s*<([^>]+)>", ck.source)
    assert set(includes) <= {"stdint.h", "math.h", "stdbool.h"}, includes
    assert '#include "' not in ck.source
    code = re.sub(r"/\*.*?\*/", "", ck.source, flags=re.S)  # the banner mentions TVM
    for bad in ("TVM", "tvm", "DLTensor", "TVMValue", "TVMFFIAny", "malloc", "Workspace"):
        assert bad not in code, bad
    for name in ck.names:
        assert re.search(rf"^int32_t {name}\(.*\);$", ck.header, re.M), name
        assert re.search(rf"^int32_t {name}\(.*\) \{{$", ck.source, re.M), name


@pytest.fixture(scope="module")
def all_kernels() -> CKernels:
    return prim_funcs_to_c(
        {
            "em_k_conv": conv_unscheduled(),
            "em_k_conv_s": conv_scheduled(),
            "em_k_softmax": softmax_te(),
            "em_k_add": add_int8_te(),
            "em_k_intops": int_ops_te(),
            "em_k_fconst": fconst_te(),
        },
        const_params={"em_k_conv": {1, 2, 3, 4}, "em_k_conv_s": {1, 2, 3, 4}},
    )


@pytest.fixture(scope="module")
def lib(all_kernels, tmp_path_factory) -> ctypes.CDLL:
    return compile_shared(all_kernels, tmp_path_factory.mktemp("kc"), "all")


# ----------------------------------------------------------------------------------------------
# tests
# ----------------------------------------------------------------------------------------------


def test_plain_c_shape(all_kernels):
    check_plain_c(all_kernels)
    ck = all_kernels
    assert ck.names == ["em_k_conv", "em_k_conv_s", "em_k_softmax", "em_k_add", "em_k_intops",
                        "em_k_fconst"]  # fmt: skip
    # read-only params (weights given in const_params, and the input) are const
    assert re.search(
        r"int32_t em_k_conv\(const int8_t\* restrict X, const int8_t\* restrict Wt, "
        r"const int32_t\* restrict Bias, const int32_t\* restrict Mult, "
        r"const int32_t\* restrict Shift, int8_t\* restrict Out\) \{",
        ck.source,
    ), ck.source
    # not in const_params: read-only params are const automatically (auto_const)
    assert "int32_t em_k_add(const int8_t* restrict A, const int8_t* restrict B, int8_t* restrict C)" in ck.source
    assert "#include <math.h>" in ck.source  # expf
    assert "expf(" in ck.source


def test_compiles_for_cortex_m7(all_kernels, tmp_path):
    arm_compile(all_kernels, tmp_path, "all")


def test_header_compiles_with_source(all_kernels, tmp_path):
    (tmp_path / "k.h").write_text(all_kernels.header)
    (tmp_path / "k.c").write_text('#include "k.h"\n' + all_kernels.source)
    r = subprocess.run([HOST_CC, *WFLAGS, "-c", str(tmp_path / "k.c"), "-o", str(tmp_path / "k.o")],
                       capture_output=True, text=True)  # fmt: skip
    assert r.returncode == 0 and r.stderr == "", r.stderr


@pytest.mark.parametrize("name", ["em_k_conv", "em_k_conv_s"])
@pytest.mark.parametrize("seed", [0, 1, 2])
def test_conv_requant_bit_exact(lib, all_kernels, name, seed):
    rng = np.random.default_rng(seed)
    x, w, bias, mult, shift = conv_inputs(rng)
    out = np.zeros((N, H, W, CO), np.int8)
    call(lib, all_kernels, name, x, w, bias, mult, shift, out)
    np.testing.assert_array_equal(out, conv_requant_ref(x, w, bias, mult, shift))


def test_softmax(lib, all_kernels):
    rng = np.random.default_rng(3)
    s = (rng.standard_normal(37) * 4).astype(np.float32)
    out = np.zeros(37, np.float32)
    call(lib, all_kernels, "em_k_softmax", s, out)
    # float: libm expf vs numpy exp and summation order differ in the last ulp
    e = np.exp(s.astype(np.float64) - s.max())
    np.testing.assert_allclose(out, e / e.sum(), rtol=2e-6, atol=1e-9)
    assert abs(float(out.sum()) - 1.0) < 1e-5


def test_add_int8_bit_exact(lib, all_kernels):
    rng = np.random.default_rng(4)
    a = rng.integers(-128, 128, 100, dtype=np.int8)
    b = rng.integers(-128, 128, 100, dtype=np.int8)
    c = np.zeros(100, np.int8)
    call(lib, all_kernels, "em_k_add", a, b, c)
    np.testing.assert_array_equal(c, np.clip(a.astype(np.int64) + b, -128, 127).astype(np.int8))


def test_int_ops_bit_exact(lib, all_kernels):
    rng = np.random.default_rng(5)
    a = rng.integers(-32768, 32768, 64, dtype=np.int16)
    a[:4] = [-32768, 32767, 0, -1]
    u = rng.integers(0, 256, 64, dtype=np.uint8)
    o32 = np.zeros(64, np.int32)
    o64 = np.zeros(64, np.int64)
    ou8 = np.zeros(64, np.uint8)
    call(lib, all_kernels, "em_k_intops", a, u, o32, o64, ou8)
    r32, r64, ru8 = int_ops_ref(a, u)
    np.testing.assert_array_equal(o32, r32)
    np.testing.assert_array_equal(o64, r64)
    np.testing.assert_array_equal(ou8, ru8)


def test_float_constants_exact(lib, all_kernels):
    f = np.random.default_rng(6).standard_normal(16).astype(np.float32)
    o = np.zeros(16, np.float32)
    call(lib, all_kernels, "em_k_fconst", f, o)
    ref = f * np.float32(0.123456789) + np.float32(1.0 / 3.0)  # float32 ops, like the C
    np.testing.assert_array_equal(o, ref)
    assert "1.2345679e-01f" in all_kernels.source  # round-trip literal, not TVM's 1.234568e-01f


def test_scratch_bytes_unscheduled_vs_scheduled(all_kernels):
    sb = all_kernels.scratch_bytes
    # unscheduled: padded input copy (int8) + full int32 accumulator
    pad = N * (H + 2) * (W + 2) * CI
    acc = N * H * W * CO * 4
    assert sb["em_k_conv"] == pad + acc
    # scheduled: a scalar int32 accumulator
    assert 0 < sb["em_k_conv_s"] <= 16
    assert sb["em_k_add"] == 0
    assert sb["em_k_softmax"] == 37 * 4 + 2 * 4  # E + max + sum


def test_scalar_accumulator_in_source(all_kernels):
    body = all_kernels.source.split("int32_t em_k_conv_s(", 2)[2]
    body = body[: body.index("\n}\n")]
    assert re.search(r"int32_t \w+\[1\];", body)


def test_large_scratch_static_or_error(tmp_path):
    f = {"big": conv_unscheduled()}
    acc = N * H * W * CO * 4  # 1344
    total = N * (H + 2) * (W + 2) * CI + acc  # 360 + 1344
    ck = prim_funcs_to_c(f, max_stack_bytes=1024)  # auto: > 1024 B -> static
    assert ck.static_scratch_bytes["big"] == N * H * W * CO * 4
    assert re.search(r"^\s+static int32_t \w+\[336\];$", ck.source, re.M)
    assert ck.scratch_bytes["big"] == total
    check_plain_c(ck)
    compile_shared(ck, tmp_path, "big")
    arm_compile(ck, tmp_path, "big")
    assert prim_funcs_to_c(f, scratch="stack").static_scratch_bytes["big"] == 0
    assert prim_funcs_to_c(f, scratch="static").static_scratch_bytes["big"] == total
    with pytest.raises(KernelCodegenError, match=rf"{acc} bytes .*total scratch {total} bytes"):
        prim_funcs_to_c(f, scratch="error", max_stack_bytes=1024)


def test_const_param_that_is_written_is_rejected():
    with pytest.raises(KernelCodegenError, match=r"written"):
        prim_funcs_to_c({"k": add_int8_te()}, const_params={"k": {2}})


def test_no_const_no_restrict(tmp_path):
    ck = prim_funcs_to_c({"k": add_int8_te(8)}, auto_const=False, restrict=False)
    assert "int32_t k(int8_t* A, int8_t* B, int8_t* C) {" in ck.source
    lib_ = compile_shared(ck, tmp_path, "nc")
    a = np.arange(-4, 4, dtype=np.int8) * 40
    c = np.zeros(8, np.int8)
    call(lib_, ck, "k", a, a.copy(), c)
    np.testing.assert_array_equal(c, np.clip(2 * a.astype(np.int64), -128, 127).astype(np.int8))


def test_unused_parameter_is_voided(tmp_path):
    A = te.placeholder((4,), "int8", name="A")
    Unused = te.placeholder((4,), "int32", name="Unused")
    B = te.compute((4,), lambda i: A[i] + tirx.const(1, "int8"), name="B")
    ck = prim_funcs_to_c({"k": te.create_prim_func([A, Unused, B])})
    assert "(void)Unused;" in ck.source
    compile_shared(ck, tmp_path, "unused")
    arm_compile(ck, tmp_path, "unused")


def test_bad_name_rejected():
    with pytest.raises(KernelCodegenError, match="identifier"):
        prim_funcs_to_c({"not-a-c-name": add_int8_te(4)})


def test_registered_pipeline_with_tirx_build():
    assert PIPELINE_NAME in tvm.tirx.compilation_pipeline.PIPELINE_MAP
    f = add_int8_te(4).with_attr("global_symbol", "k")
    src = tvm.tirx.build(tvm.IRModule({"k": f}), target={"kind": "c"}, pipeline=PIPELINE_NAME)
    src = src.inspect_source()
    assert re.search(r"int32_t k\(int8_t\* A, int8_t\* B, int8_t\* C\)", src)
    assert "TVMFFIAny" not in src and "DLTensor" not in src


def test_codegen_time(all_kernels):
    # 6 kernels incl. two conv2d: TIR lowering + C printing, should be well under a second each
    assert all_kernels.codegen_seconds < 6 * 1.0


def test_param_names_that_clash_with_c_are_renamed(tmp_path):
    A = te.placeholder((4,), "float32", name="int")  # C keyword
    B = te.placeholder((4,), "float32", name="expf")  # would shadow libm's expf
    C = te.compute((4,), lambda i: tirx.exp(A[i]) + B[i], name="int8_t")
    ck = prim_funcs_to_c({"k": te.create_prim_func([A, B, C])})
    assert "int32_t k(const float* restrict p0, const float* restrict p1, float* restrict p2) {" in ck.source
    lib_ = compile_shared(ck, tmp_path, "names")
    a = np.linspace(-1, 1, 4, dtype=np.float32)
    c = np.zeros(4, np.float32)
    call(lib_, ck, "k", a, a.copy(), c)
    np.testing.assert_allclose(c, np.exp(a) + a, rtol=1e-6)


def test_relax_fused_kernel_bit_exact(tmp_path):
    """The real use: Relax conv2d(int8, int8 -> int32) + shift + clip + cast, legalized and
    fused (LegalizeOps -> AnnotateTIROpPattern -> FuseOps -> FuseTIR) into one PrimFunc."""
    from tvm import relax

    bb = relax.BlockBuilder()
    x = relax.Var("x", relax.TensorType((1, 8, 8, 4), "int8"))
    w = relax.Var("w", relax.TensorType((3, 3, 4, 6), "int8"))
    with bb.function("main", [x, w]):
        with bb.dataflow():
            y = bb.emit(relax.op.nn.conv2d(x, w, padding=1, data_layout="NHWC",
                                           kernel_layout="HWIO", out_dtype="int32"))  # fmt: skip
            y = bb.emit(relax.op.right_shift(y, relax.const(3, "int32")))
            y = bb.emit(relax.op.clip(y, -128, 127))
            gv = bb.emit_output(bb.emit(relax.op.astype(y, "int8")))
        bb.emit_func_output(gv)
    mod = bb.get()
    with tvm.target.Target({"kind": "c"}), tvm.transform.PassContext(opt_level=3):
        for p in (relax.transform.LegalizeOps(), relax.transform.AnnotateTIROpPattern(),
                  relax.transform.FuseOps(), relax.transform.FuseTIR()):  # fmt: skip
            mod = p(mod)
    funcs = {f"em_k_{g.name_hint}": f for g, f in mod.functions.items()
             if isinstance(f, tvm.tirx.PrimFunc)}  # fmt: skip
    assert len(funcs) == 1
    ck = prim_funcs_to_c(funcs)
    check_plain_c(ck)
    (name,) = ck.names
    lib_ = compile_shared(ck, tmp_path, "relax")
    arm_compile(ck, tmp_path, "relax")
    rng = np.random.default_rng(7)
    xv = rng.integers(-128, 128, (1, 8, 8, 4), dtype=np.int8)
    wv = rng.integers(-128, 128, (3, 3, 4, 6), dtype=np.int8)
    out = np.zeros((1, 8, 8, 6), np.int8)
    call(lib_, ck, name, xv, wv, out)
    xp = np.zeros((1, 10, 10, 4), np.int64)
    xp[:, 1:9, 1:9] = xv
    acc = sum(np.einsum("nhwc,co->nhwo", xp[:, i : i + 8, j : j + 8], wv[i, j].astype(np.int64))
              for i in range(3) for j in range(3))  # fmt: skip
    np.testing.assert_array_equal(out, np.clip(acc >> 3, -128, 127).astype(np.int8))


def test_symbolic_shape_rejected():
    n = te.var("n")
    A = te.placeholder((n,), "int8", name="A")
    B = te.compute((n,), lambda i: A[i] + tirx.const(1, "int8"), name="B")
    with pytest.raises(KernelCodegenError, match="static"):
        prim_funcs_to_c({"k": te.create_prim_func([A, B])})


# ----------------------------------------------------------------------------------------------
# the fast int8 kernels (kernels/int8_ops.py: conv2d_fast, depthwise_conv2d_fast, fully_connected_fast)
# against an independent numpy model of TFLM's arithmetic, compiled with ASan + UBSan on the host
# ----------------------------------------------------------------------------------------------

SAN_FLAGS = ["-fsanitize=address,undefined", "-fno-sanitize-recover=all", "-fno-omit-frame-pointer"]


def _np_requant(acc: np.ndarray, mult: np.ndarray, shift: np.ndarray, out_zp: int, lo: int, hi: int) -> np.ndarray:
    """TFLM's MultiplyByQuantizedMultiplier (double rounding) in int64 numpy, then zero point and clamp."""
    acc = acc.astype(np.int64)
    mult = np.broadcast_to(mult, acc.shape).astype(np.int64)
    shift = np.broadcast_to(shift, acc.shape).astype(np.int64)
    left, right = np.maximum(shift, 0), np.maximum(-shift, 0)
    x = acc * (np.int64(1) << left)
    x = (x + 2**31) % 2**32 - 2**31  # int32 wrap, as TFLM's int32 multiply
    ab = x * mult
    nudge = np.where(ab >= 0, 1 << 30, 1 - (1 << 30))
    srdhm = ab + nudge
    srdhm = np.where(srdhm >= 0, srdhm // 2**31, -((-srdhm) // 2**31))  # truncation toward zero
    mask = (np.int64(1) << right) - 1
    rem = srdhm & mask
    thr = (mask >> 1) + (srdhm < 0)
    q = (srdhm >> right) + (rem > thr)
    return np.clip(q + out_zp, lo, hi).astype(np.int8)


def _np_conv(x, w_hwio, bias, zp, stride, dil, pad, out_hw, depth_mult=None):
    """int64 accumulators of CONV_2D (w HWIO) or DEPTHWISE_CONV_2D (w [KH, KW, C*M], depth_mult M)."""
    n, h, wd, c = x.shape
    kh, kw = w_hwio.shape[:2]
    ho, wo = out_hw
    xp = np.full((n, h + pad[0] + pad[2] + kh * dil[0], wd + pad[1] + pad[3] + kw * dil[1], c), zp, np.int64)
    xp[:, pad[0]:pad[0] + h, pad[1]:pad[1] + wd, :] = x
    xp -= zp
    o = w_hwio.shape[-1]
    acc = np.zeros((n, ho, wo, o), np.int64) + bias.astype(np.int64)
    for r in range(kh):
        for s in range(kw):
            patch = xp[:, r * dil[0]: r * dil[0] + ho * stride[0]: stride[0], s * dil[1]: s * dil[1] + wo * stride[1]: stride[1], :]
            if depth_mult is None:
                acc += np.einsum("nhwc,co->nhwo", patch, w_hwio[r, s].astype(np.int64))
            else:
                acc += np.repeat(patch, depth_mult, axis=3) * w_hwio[r, s].astype(np.int64)
    return acc


def _c_array(name: str, a: np.ndarray) -> str:
    cty = {np.dtype(np.int8): "int8_t", np.dtype(np.int32): "int32_t"}[a.dtype]
    vals = ", ".join(str(int(v)) for v in a.reshape(-1))
    return f"static {'const ' if name != 'out' else ''}{cty} {name}[{a.size}] = {{{vals}}};\n"


def _run_sanitized(prim, args: dict, out_size: int, tmp_path: Path, stem: str) -> np.ndarray:
    """Compile the kernel with a main() holding ``args`` (name -> array, in parameter order) under
    ASan + UBSan, run it, and return the int8 output it printed."""
    ck = prim_funcs_to_c({"kern": prim}, scratch="error")
    arrays = {**args, "out": np.zeros(out_size, np.int8)}
    main = "#include <stdio.h>\n" + "".join(_c_array(k, v) for k, v in arrays.items())
    main += ("int main(void) {\n  if (kern(" + ", ".join(arrays) + ") != 0) return 2;\n"
             f"  for (int i = 0; i < {out_size}; ++i) printf(\"%d\\n\", out[i]);\n  return 0;\n}}\n")
    src = tmp_path / f"{stem}.c"
    src.write_text(ck.source + "\n" + main)
    exe = tmp_path / stem
    r = subprocess.run([HOST_CC, *WFLAGS, *SAN_FLAGS, str(src), "-o", str(exe)], capture_output=True, text=True)
    assert r.returncode == 0 and r.stderr == "", f"gcc failed:\n{r.stderr}"
    run = subprocess.run([str(exe)], capture_output=True, text=True, timeout=120)
    assert run.returncode == 0 and run.stderr == "", run.stderr
    return np.array([int(v) for v in run.stdout.split()], np.int8)


def _multipliers(rng, count):
    from edgemem.kernels.fixed_point import quantize_multiplier

    pairs = [quantize_multiplier(float(v)) for v in rng.uniform(0.00005, 0.03, size=count)]
    pairs[0] = quantize_multiplier(1.7)  # a multiplier > 1: left shift
    return np.array([m for m, _ in pairs], np.int32), np.array([s for _, s in pairs], np.int32)


# (x shape, kh, kw, out channels or depth multiplier, stride, dilation, padding t, l, b, r)
FAST_CONV_CASES = [
    ((1, 5, 6, 8), 1, 1, 6, (1, 1), (1, 1), (0, 0, 0, 0)),  # pointwise, 2x2 tiles
    ((1, 5, 7, 7), 1, 1, 5, (1, 1), (1, 1), (0, 0, 0, 0)),  # odd pixels and channels
    ((2, 7, 7, 3), 1, 1, 3, (2, 2), (1, 1), (0, 0, 0, 0)),  # strided pointwise, batch 2
    ((1, 8, 8, 5), 3, 3, 7, (1, 1), (1, 1), (1, 1, 1, 1)),  # SAME
    ((1, 9, 6, 3), 3, 3, 4, (2, 2), (1, 1), (0, 0, 1, 1)),  # SAME stride 2 (bottom/right only)
    ((1, 10, 6, 1), 4, 3, 4, (2, 1), (1, 1), (1, 1, 2, 1)),  # one input channel, asymmetric
    ((2, 6, 6, 3), 3, 2, 3, (1, 1), (2, 2), (2, 1, 2, 1)),  # dilation
    ((1, 4, 4, 2), 5, 5, 3, (1, 1), (1, 1), (4, 4, 4, 4)),  # padding wider than the image
    ((1, 3, 3, 2), 3, 3, 3, (1, 1), (1, 1), (0, 0, 0, 0)),  # VALID, one output pixel
    ((1, 6, 5, 9), 3, 3, 3, (1, 1), (1, 1), (1, 1, 1, 1)),  # depthwise: two 4-channel groups and one left over
    ((1, 7, 6, 8), 3, 3, 6, (2, 2), (1, 1), (0, 0, 1, 1)),  # depthwise: 4-channel groups, stride 2 SAME
    ((1, 9, 8, 5), 5, 5, 3, (1, 1), (1, 1), (2, 2, 2, 2)),  # depthwise: a 5x5 kernel (taps in loops)
    ((1, 7, 5, 8), 3, 3, 16, (1, 1), (1, 1), (1, 1, 1, 1)),  # SAME, odd pixel count (35): the last tile is half
    ((1, 5, 5, 8), 3, 3, 8, (1, 1), (1, 1), (1, 1, 1, 1)),  # SAME, 25 pixels
]


@pytest.mark.parametrize("kind", ["conv", "conv-direct", "depthwise"])
@pytest.mark.parametrize("case", range(len(FAST_CONV_CASES)))
def test_fast_conv_kernels_match_numpy(case, kind, tmp_path, monkeypatch):
    """conv: as built (short kernel rows through two gathered windows); conv-direct: every convolution
    reads the input where it lies (interior 2x2 tiles, border pixels over their valid taps)."""
    from edgemem.kernels import int8_ops

    depthwise = kind == "depthwise"
    if kind == "conv-direct":
        monkeypatch.setattr(int8_ops, "COLUMN_BYTES", 0)

    x_shape, kh, kw, o, stride, dil, pad = FAST_CONV_CASES[case]
    rng = np.random.default_rng(case * 2 + depthwise)
    n, h, wd, c = x_shape
    ho = (h + pad[0] + pad[2] - dil[0] * (kh - 1) - 1) // stride[0] + 1
    wo = (wd + pad[1] + pad[3] - dil[1] * (kw - 1) - 1) // stride[1] + 1
    mult_depth = (o % 3) + 1 if depthwise else None  # depth multipliers 1..3
    oc = c * mult_depth if depthwise else o
    zp = int(rng.integers(-128, 128))
    rq = int8_ops.Requant(int(rng.integers(-30, 30)), -128 + int(rng.integers(0, 20)), 127 - int(rng.integers(0, 20)))
    x = rng.integers(-128, 128, size=x_shape, dtype=np.int8)
    w = rng.integers(-127, 128, size=(kh, kw, oc) if depthwise else (kh, kw, c, oc), dtype=np.int8)
    bias = rng.integers(-40000, 40000, size=oc, dtype=np.int32)
    mult, shift = _multipliers(rng, oc)
    acc = _np_conv(x, w if not depthwise else w, bias, zp, stride, dil, pad, (ho, wo), mult_depth)
    expected = _np_requant(acc, mult, shift, rq.out_zp, rq.act_min, rq.act_max)
    if depthwise:
        prim = int8_ops.depthwise_conv2d_fast(x_shape, w.shape, zp, stride, dil, pad, (n, ho, wo, oc), rq)
        args = {"x": x, "w": w, "bias": int8_ops.folded_bias(bias, w, zp, 2)}
    else:
        prim = int8_ops.conv2d_fast(x_shape, w.shape, zp, stride, dil, pad, (n, ho, wo, oc), rq)
        args = {"x": x, "w": np.ascontiguousarray(w.transpose(3, 0, 1, 2)), "bias": int8_ops.folded_bias(bias, w, zp, 3)}
    got = _run_sanitized(prim, {**args, "mult": mult, "shift": shift}, expected.size, tmp_path, "conv")
    np.testing.assert_array_equal(got.reshape(expected.shape), expected)


@pytest.mark.parametrize("batch,k,o,per_channel", [(1, 64, 12, False), (2, 33, 7, True), (1, 5, 3, False), (3, 16, 9, True)])
def test_fast_fully_connected_matches_numpy(batch, k, o, per_channel, tmp_path):
    from edgemem.kernels import int8_ops
    from edgemem.kernels.fixed_point import quantize_multiplier

    rng = np.random.default_rng(k)
    zp = int(rng.integers(-128, 128))
    rq = int8_ops.Requant(int(rng.integers(-30, 30)), -128, 127)
    x = rng.integers(-128, 128, size=(batch, k), dtype=np.int8)
    w = rng.integers(-127, 128, size=(o, k), dtype=np.int8)
    bias = rng.integers(-40000, 40000, size=o, dtype=np.int32)
    acc = (x.astype(np.int64) - zp) @ w.astype(np.int64).T + bias
    args = {"x": x, "w": w, "bias": int8_ops.folded_bias(bias, w, zp, 0)}
    if per_channel:
        mult, shift = _multipliers(rng, o)
        prim = int8_ops.fully_connected_fast((batch, k), w.shape, None, None, rq)
        args.update(mult=mult, shift=shift)
    else:
        m, s = quantize_multiplier(float(rng.uniform(0.0005, 0.01)))
        mult, shift = np.array([m], np.int32), np.array([s], np.int32)
        prim = int8_ops.fully_connected_fast((batch, k), w.shape, m, s, rq)
    expected = _np_requant(acc, mult, shift, rq.out_zp, rq.act_min, rq.act_max)
    got = _run_sanitized(prim, args, expected.size, tmp_path, "fc")
    np.testing.assert_array_equal(got.reshape(expected.shape), expected)


def test_fast_kernels_requantize_in_32_bit_registers(tmp_path):
    """The Cortex-M7 code of the fast kernels multiplies with SMULL/SMLAL and calls no __aeabi_l* helper."""
    from edgemem.kernels import int8_ops

    if ARM_CC is None or shutil.which("arm-none-eabi-objdump") is None:
        pytest.skip("arm-none-eabi-gcc not installed")
    rq = int8_ops.Requant(-5, -128, 127)
    ck = prim_funcs_to_c({
        "pw": int8_ops.conv2d_fast((1, 5, 5, 16), (1, 1, 16, 8), -3, (1, 1), (1, 1), (0, 0, 0, 0), (1, 5, 5, 8), rq),
        "dw": int8_ops.depthwise_conv2d_fast((1, 5, 5, 8), (3, 3, 8), -3, (1, 1), (1, 1), (1, 1, 1, 1), (1, 5, 5, 8), rq),
        "fc": int8_ops.fully_connected_fast((1, 16), (8, 16), 1234567890, -5, rq),
    }, scratch="error")
    src, obj = tmp_path / "fast.c", tmp_path / "fast.o"
    src.write_text(ck.source)
    subprocess.run([ARM_CC, *WFLAGS, *ARM_FLAGS, "-c", str(src), "-o", str(obj)], check=True)
    dis = subprocess.run(["arm-none-eabi-objdump", "-d", str(obj)], capture_output=True, text=True, check=True).stdout
    assert "__aeabi" not in dis and not re.search(r"\bbl\b", dis)
    assert re.search(r"\bsm(ull|lal)\b", dis)


@pytest.mark.parametrize("workspace", [True, False], ids=["plane", "delayed"])
@pytest.mark.parametrize("case", [((5, 6, 3), 3, (1, 1), (1, 1, 1, 1)), ((7, 5, 4), 3, (2, 2), (0, 0, 1, 1)),
                                  ((9, 6, 2), 5, (2, 1), (2, 2, 2, 2)), ((6, 6, 5), 3, (1, 1), (0, 0, 0, 0)),
                                  # 4-channel groups (and one left over) of the delayed form
                                  ((6, 5, 8), 3, (1, 1), (1, 1, 1, 1)), ((9, 7, 9), 3, (2, 2), (0, 0, 1, 1)),
                                  ((8, 8, 12), 5, (1, 1), (2, 2, 2, 2)), ((7, 7, 4), 7, (1, 1), (3, 3, 3, 3))])
def test_folded_inplace_depthwise_matches_numpy(case, workspace, tmp_path):
    """The in-place depthwise with a folded bias (what integerize's kernels become under passes/inplace.py),
    output written over its input."""
    from edgemem.kernels import int8_ops

    (h, w, c), k, stride, pad = case
    ho = (h + pad[0] + pad[2] - k) // stride[0] + 1
    wo = (w + pad[1] + pad[3] - k) // stride[1] + 1
    rng = np.random.default_rng(h * 10 + c)
    zp = int(rng.integers(-128, 128))
    rq = int8_ops.Requant(4, -120, 125)
    x = rng.integers(-128, 128, size=(1, h, w, c), dtype=np.int8)
    wt = rng.integers(-127, 128, size=(k, k, c), dtype=np.int8)
    bias = rng.integers(-40000, 40000, size=c, dtype=np.int32)
    mult, shift = _multipliers(rng, c)
    expected = _np_requant(_np_conv(x, wt, bias, zp, stride, (1, 1), pad, (ho, wo), 1), mult, shift, rq.out_zp,
                           rq.act_min, rq.act_max)
    delay = 0 if workspace else int8_ops.depthwise_inplace_delay((1, h, w, c), (k, k, c), stride, (1, 1), pad, (1, ho, wo, c))
    assert workspace or delay >= 1
    prim = int8_ops.depthwise_conv2d_inplace((1, h, w, c), (k, k, c), zp, stride, (1, 1), pad, (1, ho, wo, c), rq, delay,
                                             folded=True)
    ck = prim_funcs_to_c({"dw_inplace": prim}, {"dw_inplace": {1, 2, 3, 4}}, scratch="error")
    lib = compile_shared(ck, tmp_path, "dwf")
    memory = np.ascontiguousarray(x.reshape(-1)).copy()
    folded = int8_ops.folded_bias(bias, wt, zp, 2)
    tmp = np.zeros(h * w, np.int8)
    fn = lib.dw_inplace
    fn.restype = ctypes.c_int32
    ptr = memory.ctypes.data_as(ctypes.c_void_p)
    args = [ptr, wt.ctypes.data_as(ctypes.c_void_p), folded.ctypes.data_as(ctypes.c_void_p),
            mult.ctypes.data_as(ctypes.c_void_p), shift.ctypes.data_as(ctypes.c_void_p), ptr]
    args += [tmp.ctypes.data_as(ctypes.c_void_p)] if workspace else []  # fmt: skip
    assert fn(*args) == 0
    np.testing.assert_array_equal(memory[: ho * wo * c].reshape(1, ho, wo, c), expected)


# ----------------------------------------------------------------------------------------------
# the same fast kernels on the cores whose DSP path they take (inline-asm 2x2 tiles, SXTB16/SMLAD, SMLABB/SMLATT,
# SSAT): compiled for Cortex-M7 and Cortex-M4, run under QEMU (mps2-an500, mps2-an386), printed over
# semihosting and compared with the numpy model. Shapes chosen so that every path runs: reductions of 8k, 8k+4
# and odd lengths (the asm loop, its 4-byte step and the C tail; written out when at most UNROLL_DOT bytes), odd
# channel and pixel counts, padding, a fused-ReLU lower bound, the in-place depthwise in 4-channel groups written
# over its input.
# ----------------------------------------------------------------------------------------------

QEMU_CORES = {
    "m7": ("mps2-an500", "cortex-m7", ["-mcpu=cortex-m7", "-mthumb", "-mfpu=fpv5-sp-d16", "-mfloat-abi=hard"]),
    "m4": ("mps2-an386", "cortex-m4", ["-mcpu=cortex-m4", "-mthumb", "-mfpu=fpv4-sp-d16", "-mfloat-abi=hard"]),
}
CMAKE_APP = Path(__file__).resolve().parent / "cmake_app"  # its startup code and linker script fit both machines

QEMU_MAIN = r"""
static int32_t semihost(uint32_t op, const void *arg) {
  register uint32_t r0 __asm__("r0") = op;
  register const void *r1 __asm__("r1") = arg;
  __asm__ volatile("bkpt 0xab" : "+r"(r0) : "r"(r1) : "memory");
  return (int32_t)r0;
}
static void print_hex(const char *name, const int8_t *p, uint32_t n) {
  static const char hex[] = "0123456789abcdef";
  static char line[8192];
  uint32_t k = 0;
  while (*name) line[k++] = *name++;
  line[k++] = ' ';
  for (uint32_t i = 0; i < n; ++i) { line[k++] = hex[(uint8_t)p[i] >> 4]; line[k++] = hex[(uint8_t)p[i] & 15u]; }
  line[k++] = '\n';
  line[k] = 0;
  (void)semihost(0x04u, line);
}
int main(void) {
"""


def _qemu_cases():
    """name -> (prim, {param: array}, expected int8 output, in_place)."""
    from edgemem.kernels import int8_ops
    from edgemem.kernels.fixed_point import quantize_multiplier

    rng = np.random.default_rng(19)
    cases = {}

    def conv(name, x_shape, kh, kw, o, stride, pad, relu=False, depthwise=False):
        n, h, wd, c = x_shape
        ho = (h + pad[0] + pad[2] - kh) // stride[0] + 1
        wo = (wd + pad[1] + pad[3] - kw) // stride[1] + 1
        oc = c if depthwise else o
        zp = int(rng.integers(-128, 128))
        out_zp = int(rng.integers(-20, 20))
        rq = int8_ops.Requant(out_zp, out_zp if relu else -128, 127)
        x = rng.integers(-128, 128, size=x_shape, dtype=np.int8)
        w = rng.integers(-127, 128, size=(kh, kw, oc) if depthwise else (kh, kw, c, oc), dtype=np.int8)
        bias = rng.integers(-40000, 40000, size=oc, dtype=np.int32)
        mult, shift = _multipliers(rng, oc)
        acc = _np_conv(x, w, bias, zp, stride, (1, 1), pad, (ho, wo), 1 if depthwise else None)
        expected = _np_requant(acc, mult, shift, rq.out_zp, rq.act_min, rq.act_max)
        if depthwise:
            delay = int8_ops.depthwise_inplace_delay(x_shape, w.shape, stride, (1, 1), pad, (n, ho, wo, oc))
            prim = int8_ops.depthwise_conv2d_inplace(x_shape, w.shape, zp, stride, (1, 1), pad, (n, ho, wo, oc), rq,
                                                     delay, folded=True)
            args = {"x": x, "w": w, "bias": int8_ops.folded_bias(bias, w, zp, 2)}
        else:
            prim = int8_ops.conv2d_fast(x_shape, w.shape, zp, stride, (1, 1), pad, (n, ho, wo, oc), rq)
            args = {"x": x, "w": np.ascontiguousarray(w.transpose(3, 0, 1, 2)), "bias": int8_ops.folded_bias(bias, w, zp, 3)}
        cases[name] = (prim, {**args, "mult": mult, "shift": shift}, expected, depthwise)

    conv("pw_k13", (1, 5, 7, 13), 1, 1, 7, (1, 1), (0, 0, 0, 0))  # 8 + 4 + 1: asm loop, 4-byte step, C tail
    conv("pw_k20_relu", (1, 4, 5, 20), 1, 1, 6, (1, 1), (0, 0, 0, 0), relu=True)
    conv("pw_k77", (1, 3, 4, 77), 1, 1, 6, (1, 1), (0, 0, 0, 0))  # > UNROLL_DOT: the asm loop, then 4 + 1
    conv("pw_strided", (1, 7, 7, 8), 1, 1, 5, (2, 2), (0, 0, 0, 0))
    conv("conv3x3_direct", (1, 7, 6, 6), 3, 3, 5, (1, 1), (1, 1, 1, 1))  # kw*c = 18: direct 2x2 tiles, offset dx = c
    conv("conv3x3_c24", (1, 5, 4, 24), 3, 3, 3, (1, 1), (1, 1, 1, 1))  # rows of 72 bytes: the loop form
    conv("conv3x3_columns", (1, 8, 7, 3), 3, 3, 4, (2, 2), (0, 0, 1, 1))  # kw*c = 9: two gathered windows
    conv("dw_inplace_5x5", (1, 8, 7, 12), 5, 5, 0, (1, 1), (2, 2, 2, 2), depthwise=True)
    conv("dw_inplace_3x3_s2", (1, 9, 8, 9), 3, 3, 0, (2, 2), (0, 0, 1, 1), depthwise=True, relu=True)

    x_shape, w_shape, dw_shape = (1, 6, 5, 9), (3, 3, 9), (1, 6, 5, 9)
    zp = int(rng.integers(-128, 128))
    rq = int8_ops.Requant(3, -128, 127)
    x = rng.integers(-128, 128, size=x_shape, dtype=np.int8)
    w = rng.integers(-127, 128, size=w_shape, dtype=np.int8)
    bias = rng.integers(-40000, 40000, size=9, dtype=np.int32)
    mult, shift = _multipliers(rng, 9)
    expected = _np_requant(_np_conv(x, w, bias, zp, (1, 1), (1, 1), (1, 1, 1, 1), (6, 5), 1), mult, shift, 3, -128, 127)
    prim = int8_ops.depthwise_conv2d_fast(x_shape, w_shape, zp, (1, 1), (1, 1), (1, 1, 1, 1), dw_shape, rq)
    cases["dw_fast_3x3"] = (prim, {"x": x, "w": w, "bias": int8_ops.folded_bias(bias, w, zp, 2), "mult": mult,
                                   "shift": shift}, expected, False)

    k, o = 37, 10
    x = rng.integers(-128, 128, size=(1, k), dtype=np.int8)
    w = rng.integers(-127, 128, size=(o, k), dtype=np.int8)
    bias = rng.integers(-40000, 40000, size=o, dtype=np.int32)
    m, s = quantize_multiplier(0.003)
    acc = (x.astype(np.int64) - zp) @ w.astype(np.int64).T + bias
    expected = _np_requant(acc, np.array([m], np.int32), np.array([s], np.int32), -7, -128, 127)
    prim = int8_ops.fully_connected_fast((1, k), w.shape, m, s, int8_ops.Requant(-7, -128, 127))
    cases["fc_k37"] = (prim, {"x": x, "w": w, "bias": int8_ops.folded_bias(bias, w, zp, 0)}, expected, False)
    return cases


@pytest.mark.parametrize("core", sorted(QEMU_CORES))
def test_fast_kernels_on_the_dsp_cores_under_qemu(core, tmp_path):
    if ARM_CC is None or shutil.which("qemu-system-arm") is None:
        pytest.skip("needs arm-none-eabi-gcc and qemu-system-arm")
    machine, cpu, flags = QEMU_CORES[core]
    cases = _qemu_cases()
    ck = prim_funcs_to_c({name: prim for name, (prim, _, _, _) in cases.items()}, scratch="error")
    assert "em_ssat8(" in ck.source and "em_mac4_s8(" in ck.source and "em_dot1x4_" in ck.source
    assert re.search(r"em_dot2x2_\d+_\d+_s8\(", ck.source) and re.search(r"em_dot2x2_\d+_\d+_n\d+_s8\(", ck.source)
    data, calls = [], []
    for name, (_, args, expected, in_place) in cases.items():
        arrays = {f"{name}_{k}": v for k, v in args.items()}
        out = f"{name}_out"
        size = max(expected.size, args["x"].size) if in_place else expected.size
        for k, v in arrays.items():
            cty = {np.dtype(np.int8): "int8_t", np.dtype(np.int32): "int32_t"}[v.dtype]
            vals = ", ".join(str(int(e)) for e in v.reshape(-1))
            writable = in_place and k.endswith("_x")  # the in-place depthwise writes over its input
            data.append(f"static {'' if writable else 'const '}{cty} {k}[{v.size}] = {{{vals}}};")
        if in_place:
            calls.append(f"  if ({name}({', '.join(arrays)}, {name}_x) != 0) return 2;")
            calls.append(f"  print_hex(\"{name}\", {name}_x, {expected.size});")
        else:
            data.append(f"static int8_t {out}[{size}];")
            calls.append(f"  if ({name}({', '.join(arrays)}, {out}) != 0) return 2;")
            calls.append(f"  print_hex(\"{name}\", {out}, {expected.size});")
    calls.append("  (void)semihost(0x18u, (const void *)0x20026u);\n  return 0;\n}")
    src = tmp_path / "k.c"
    src.write_text(ck.source + "\n" + "\n".join(data) + "\n" + QEMU_MAIN + "\n".join(calls) + "\n")
    elf = tmp_path / "k.elf"
    r = subprocess.run([ARM_CC, *flags, *WFLAGS, "-nostartfiles", "--specs=nano.specs", "--specs=nosys.specs",
                        "-Wl,--gc-sections", "-Wl,--no-warn-rwx-segments", f"-T{CMAKE_APP / 'app.ld'}",
                        str(src), str(CMAKE_APP / "startup.c"), "-o", str(elf)], capture_output=True, text=True)
    assert r.returncode == 0, r.stderr[-3000:]
    run = subprocess.run(["qemu-system-arm", "-M", machine, "-cpu", cpu, "-nographic", "-monitor", "none",
                          "-semihosting-config", "enable=on,target=native", "-kernel", str(elf)],
                         capture_output=True, text=True, timeout=120)
    text = run.stdout + run.stderr  # the semihosting console goes to either, by QEMU version
    assert run.returncode == 0, text[-2000:]
    got = dict(line.split(" ", 1) for line in text.splitlines() if " " in line)
    for name, (_, _, expected, _) in cases.items():
        out = np.frombuffer(bytes.fromhex(got[name].strip()), dtype=np.int8)
        np.testing.assert_array_equal(out.reshape(expected.shape), expected, err_msg=f"{name} on {core}")
