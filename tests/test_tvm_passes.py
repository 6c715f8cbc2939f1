"""TVM's own passes in the memory-pass catalogue, and TVM's default pipeline as a baseline.

A residual block (conv -> conv -> ADD of both) is written here with the flatbuffer builder. TVM's FuseOps
groups the second convolution with the ADD; ``tvm_fuse_ops`` schedules the fused kernel so the tensor
between them never exists. Outputs must be identical to the unfused module and to TFLite Micro's; the
bytes are recomputed by hand from the tensor sizes.
"""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pytest
import tvm
from tvm import relax

from edgemem import pipeline
from edgemem.frontend.tflite_import import import_tflite
from edgemem.ir.graph import read_graph
from edgemem.passes import tvm_fusion
from edgemem.passes.catalogue import catalogue
from edgemem.passes.lower import lower_to_kernels
from edgemem.passes.orchestrate import measure, tvm_default_baseline
from edgemem.schedule.liveness import peak_bytes

pytest.importorskip("tflite_micro")
from edgemem.reference import seeded_inputs, tflm_outputs  # noqa: E402

sys.path.insert(0, str(Path(__file__).resolve().parent))
from small_models import residual_model  # noqa: E402

S = 8 * 8 * 8  # bytes of every activation of the residual block


@pytest.fixture(scope="module")
def residual(tmp_path_factory):
    path = tmp_path_factory.mktemp("tvm") / "residual.tflite"
    path.write_bytes(residual_model())
    return path, lower_to_kernels(import_tflite(path).relax_mod)


def _run(mod, inputs):
    vm = relax.VirtualMachine(tvm.compile(mod, target="llvm"), tvm.cpu())
    out = vm["main"](*[tvm.runtime.tensor(a) for a in inputs])
    return [o.numpy() for o in ([out] if isinstance(out, tvm.runtime.Tensor) else list(out))]


def _file_peak(mod) -> int:
    g = read_graph(mod)
    return peak_bytes(g, list(range(len(g.ops))), 4)


def test_fusion_removes_the_tensor_between_conv_and_add(residual):
    path, plain = residual
    fused = tvm_fusion.fuse_ops(plain)
    assert [op.kind for op in read_graph(plain).ops] == ["CONV_2D", "CONV_2D", "ADD"]
    assert [op.kind for op in read_graph(fused).ops] == ["CONV_2D", "CONV_2D+ADD"]
    # by hand: unfused, the ADD step holds y1, y2 and out (3 S); fused, the one step holds y1 and out
    assert (_file_peak(plain), _file_peak(fused)) == (3 * S, 2 * S)
    assert sum(op.macs for op in read_graph(fused).ops) == sum(op.macs for op in read_graph(plain).ops)
    for seed in (0, 1):
        inputs = seeded_inputs(path, seed)
        got = _run(fused, inputs)[0]
        np.testing.assert_array_equal(got, _run(plain, inputs)[0])
        np.testing.assert_array_equal(got, tflm_outputs(path.read_bytes(), inputs)[0])


def test_fusion_refuses_kernels_that_keep_scratch(residual, monkeypatch):
    _, plain = residual
    monkeypatch.setattr(tvm_fusion, "SCRATCH_LIMIT", 3)  # the fused kernel's int32 accumulator is 4 bytes
    assert tvm_fusion.fuse_ops(plain).same_as(plain)


def test_unscheduled_fusion_would_keep_the_tensor_as_scratch(residual):
    """What the scheduling step buys: FuseTIR's kernel as TVM leaves it keeps y2 inside (S bytes + 4)."""
    _, plain = residual
    with tvm.target.Target({"kind": "c"}), tvm.transform.PassContext(opt_level=3):
        grouped = relax.transform.FuseOps()(relax.transform.AnnotateTIROpPattern()(plain))
        raw = relax.transform.FuseTIR()(grouped)
    kinds = tvm_fusion._group_kinds(grouped)
    raw_kernels = {gv.name_hint: f for gv, f in raw.functions.items() if gv.name_hint in kinds}
    scheduled = {name: tvm_fusion._inline_internals(f) for name, f in raw_kernels.items()}
    assert list(tvm_fusion._scratch_bytes(raw_kernels).values()) == [S + 4]
    assert list(tvm_fusion._scratch_bytes(scheduled).values()) == [4]


def test_tvm_default_baseline_counts_the_fused_scratch(residual):
    _, plain = residual
    base = tvm_default_baseline(plain, lambda m: measure(m, 4))
    assert base["planned_arena_bytes"] == 2 * S and base["fused_kernel_scratch_bytes"] == S + 4
    assert base["arena_bytes"] == 3 * S + 4 and base["macs"] == measure(plain)["macs"]
    assert base["tvm_storage_bytes"] > 0


def test_fold_constant_keeps_int8_weights_int8(residual):
    _, plain = residual
    fold = next(p for p in catalogue() if p.name == "fold_constant")
    folded = fold(plain)

    def dtypes(mod):
        return sorted(t.dtype for t in read_graph(mod).constants())

    assert dtypes(folded) == dtypes(plain) and "float32" not in dtypes(folded)


def test_fused_model_bit_exact_under_qemu(tmp_path):
    path = tmp_path / "residual.tflite"
    path.write_bytes(residual_model(seed=5))
    result = pipeline.build(path, "stm32f746", tmp_path / "p", pipeline.BuildOptions(passes=("tvm_fuse_ops",)))
    assert [op.kind for op in result.graph.ops] == ["CONV_2D", "CONV_2D+ADD"]
    assert result.plan.total_bytes == 2 * S
    for seed in (0, 1):
        run = pipeline.run(tmp_path / "p", seed=seed)
        assert run["bit_exact"] and run["arena_high_water_bytes"] == 2 * S, run
