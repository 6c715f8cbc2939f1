"""Generated C against the TIR it is printed from (tests/codegen_oracle.py: each kernel compiled by host gcc and by
TVM's LLVM backend, run on the same arguments, compared byte for byte), and pooling geometry the converter-made
operator models never had, end to end against TFLite Micro.

Issue 31's wrong answer: ST's MiniResNetV2 has a 1x1 MAX_POOL_2D with stride 2. Its one-step reduction leaves the
accumulator's store and the final clamp's read in one C scope, and TVM's C printer, which binds each min/max
operand to a temporary remembered by its text, reused the temporary from before the store: every output was the
clamped initial value (-128). All 601 operator models pooled over 2x2 or 3x3 windows, so no test had that shape.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

import codegen_oracle
from edgemem.kernels import int8_ops
from op_check import check_model
from shared_models import model_path as shared_model
from small_models import mm as mem  # examples/make_example_model.py, the flatbuffer writer

ROOT = Path(__file__).resolve().parents[1]

pytestmark = pytest.mark.skipif(codegen_oracle.HOST_CC is None, reason="host gcc not installed")



# (kind, window, stride, padding): 1x1 windows (a strided subsample), windows narrower than the stride, 1-wide
# windows along one axis, and the usual ones for contrast.
POOLS = [
    ("MAX_POOL_2D", (1, 1), 1, "VALID"), ("MAX_POOL_2D", (1, 1), 2, "VALID"), ("MAX_POOL_2D", (1, 1), 3, "SAME"),
    ("MAX_POOL_2D", (1, 2), 2, "VALID"), ("MAX_POOL_2D", (2, 1), 1, "SAME"), ("MAX_POOL_2D", (3, 3), 2, "SAME"),
    ("AVERAGE_POOL_2D", (1, 1), 2, "VALID"), ("AVERAGE_POOL_2D", (1, 2), 1, "SAME"),
    ("AVERAGE_POOL_2D", (2, 1), 3, "VALID"), ("AVERAGE_POOL_2D", (3, 3), 2, "SAME"),
]  # fmt: skip


def _pool_out(size: int, window: int, stride: int, padding: str) -> int:
    return -(-size // stride) if padding == "SAME" else (size - window) // stride + 1


def pooling_model(dtype=np.int8, h: int = 9, w: int = 7, c: int = 5) -> bytes:
    """One input read by every pooling operator of POOLS, each its own model output."""
    b = mem.ModelBuilder()
    q = None if dtype == np.float32 else mem.qparams(0.05 if dtype == np.int8 else 0.001, 3 if dtype == np.int8 else 0)
    x = b.tensor("x", (1, h, w, c), dtype, q)
    outs = []
    for k, (kind, window, stride, padding) in enumerate(POOLS):
        pad = mem.PAD.SAME if padding == "SAME" else mem.PAD.VALID
        shape = (1, _pool_out(h, window[0], stride, padding), _pool_out(w, window[1], stride, padding), c)
        y = b.tensor(f"y{k}", shape, dtype, q)
        opts = mem.pool2d_options(window, stride, pad)
        b.op(getattr(mem.tflite.BuiltinOperator, kind), [x], [y], *opts)
        outs.append(y)
    return b.serialize([x], outs)


def test_one_step_max_pool_kernel_against_numpy_and_tvm(tmp_path):
    """The failing kernel itself: a 1x1 MAX_POOL_2D with stride 2 is a strided copy (clamped); its C, and TVM's
    LLVM build of its TIR, both give exactly that."""
    prim = int8_ops.max_pool2d((1, 8, 8, 4), (1, 1), (2, 2), (0, 0), (1, 4, 4, 4), int8_ops.Requant(3, -100, 127))
    call = codegen_oracle.KernelCall("max_pool_1x1_s2", prim, [None, None])
    assert codegen_oracle.compare([call], seed=1, tmp=tmp_path) == []
    x = np.random.default_rng(1).integers(-128, 128, size=(1, 8, 8, 4)).astype(np.int8)
    built = codegen_oracle.prim_funcs_to_c({"k": prim}, restrict=False)
    assert "em_max_s32(" in built.source  # the clamp reads the accumulator through a call, not a remembered copy
    got = _run_c(built, "k", [x, np.zeros((1, 4, 4, 4), np.int8)], tmp_path)[1]
    np.testing.assert_array_equal(got, np.maximum(x[:, ::2, ::2, :], -100))


def _run_c(ck, name, arrays, tmp_path):
    import ctypes
    import subprocess

    src, so = tmp_path / "one.c", tmp_path / "one.so"
    src.write_text(ck.source)
    subprocess.run([codegen_oracle.HOST_CC, "-std=c11", "-O2", "-Wall", "-Wextra", "-Werror", "-fPIC", "-shared",
                    str(src), "-o", str(so)], check=True, capture_output=True)  # fmt: skip
    fn = getattr(ctypes.CDLL(str(so)), name)
    fn(*[a.ctypes.data_as(ctypes.c_void_p) for a in arrays])
    return arrays


@pytest.mark.parametrize("dtype", [np.int8, np.int16, np.float32], ids=["int8", "int16", "float32"])
def test_pooling_geometry_kernels_match_tvm(dtype, tmp_path):
    model = tmp_path / "pools.tflite"
    model.write_bytes(pooling_model(dtype))
    calls = codegen_oracle.kernel_calls(model)
    assert len(calls) >= len(POOLS) // 2  # identical geometries may share a kernel
    assert codegen_oracle.compare(calls, seed=2, tmp=tmp_path) == []


@pytest.mark.parametrize("dtype", [np.int8, np.int16], ids=["int8", "int16"])
def test_pooling_geometry_matches_tflm(dtype, tmp_path):
    """The same operators end to end on the host against TFLite Micro, three seeds."""
    check_model(pooling_model(dtype), tmp_path)


def test_published_aed_model_kernels_match_tvm(tmp_path):
    path = shared_model("published/st_aed_miniresnetv2_1stacks_64x50_int8")
    assert codegen_oracle.compare(codegen_oracle.kernel_calls(path), seed=0, tmp=tmp_path) == []
