"""TVM's own passes in the memory-pass catalogue, and TVM's default pipeline as a baseline.

A residual block (conv -> conv -> ADD of both) is written here with the flatbuffer builder. The fast int8
convolution is opaque to TVM's FuseOps, so ``tvm_fuse_ops`` fuses it with the ADD itself (its output stores
rewritten into the ADD's, passes/residual.py) and the tensor between them never exists; ``tvm_fuse_elementwise`` fuses an ADD -> MUL chain and leaves convolutions
alone. Outputs must be identical to the unfused module and to TFLite Micro's; the bytes are recomputed by
hand from the tensor sizes. On CIFAR-10 the groups that would keep scratch are taken apart, the others
fuse. FoldConstant is shown to be useless after lowering and harmful before it. The fused residual
block builds, runs bit-exact under QEMU and profiles step by step as planned.
"""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pytest
import tvm
import tvm_ffi
from tvm import relax

from edgemem import pipeline
from edgemem.device_run import run as run_on_device
from edgemem.frontend.tflite_import import import_tflite
from edgemem.ir.graph import read_graph
from edgemem.passes import tvm_fusion
from edgemem.passes.catalogue import catalogue, evaluate
from edgemem.passes.lower import lower_to_kernels
from edgemem.passes.orchestrate import measure, tvm_default_baseline
from edgemem.schedule.liveness import peak_bytes

pytest.importorskip("tflite_micro")
from edgemem.reference import seeded_inputs, tflm_outputs  # noqa: E402

sys.path.insert(0, str(Path(__file__).resolve().parent))
from small_models import _Q, mm, residual_model  # noqa: E402
from relax_vm import run as run_vm  # noqa: E402

S = 8 * 8 * 8  # bytes of every activation of the residual block


@pytest.fixture(scope="module")
def residual(tmp_path_factory):
    path = tmp_path_factory.mktemp("tvm") / "residual.tflite"
    path.write_bytes(residual_model())
    return path, lower_to_kernels(import_tflite(path).relax_mod)


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
        got = run_vm(fused, inputs)[0]
        np.testing.assert_array_equal(got, run_vm(plain, inputs)[0])
        np.testing.assert_array_equal(got, tflm_outputs(path.read_bytes(), inputs)[0])


def test_fusion_refuses_kernels_that_keep_scratch(residual, monkeypatch):
    _, plain = residual
    monkeypatch.setattr(tvm_fusion, "SCRATCH_LIMIT", 15)  # the fused kernel's 4 int32 accumulators are 16 bytes
    assert tvm_fusion.fuse_ops(plain).same_as(plain)
    monkeypatch.setattr(tvm_fusion, "SCRATCH_LIMIT", 16)
    assert [op.kind for op in read_graph(tvm_fusion.fuse_ops(plain)).ops] == ["CONV_2D", "CONV_2D+ADD"]


def test_fusion_takes_apart_only_the_groups_that_keep_scratch():
    """CIFAR-10: TVM groups convolutions with the PAD that reads their output shifted, which no inlining
    removes (the whole conv output would stay as scratch). Those groups are taken apart; the convolution
    with its residual ADD and the element-wise chains still fuse, and the chains' fusion removes the
    same 16 KiB (73,728 -> 57,344 B) that inplace_elementwise does."""
    from shared_models import model_path

    path = model_path("arm_cifar10_image_recognition_int8")
    plain = lower_to_kernels(import_tflite(path).relax_mod)
    fused = next(p for p in catalogue() if p.name == "tvm_fuse_ops")(plain)
    kinds = [op.kind for op in read_graph(fused).ops]
    assert "CONV_2D+ADD" in kinds and "MUL+ADD" in kinds and not any(k.startswith("CONV_2D+PAD") for k in kinds)
    fused_kernels = {gv.name_hint: f for gv, f in fused.functions.items()
                     if isinstance(f, tvm.tirx.PrimFunc) and "+" in str((f.attrs or {}).get("edgemem.op", ""))}  # fmt: skip
    assert max(tvm_fusion._scratch_bytes(fused_kernels).values()) <= tvm_fusion.SCRATCH_LIMIT
    assert (evaluate(plain)["arena_bytes"], evaluate(fused)["arena_bytes"]) == (73_728, 57_344)
    inplace = next(p for p in catalogue() if p.name == "inplace_elementwise")(plain)
    assert evaluate(inplace)["arena_bytes"] == 57_344
    x = seeded_inputs(path, 0)
    np.testing.assert_array_equal(run_vm(fused, x)[0], tflm_outputs(path, x)[0])


def test_tvm_alone_cannot_fuse_the_fast_convolution(residual):
    """Why tvm_fuse_ops fuses the fast convolutions itself: TVM infers their block-less TIR opaque (FuseOps
    leaves them alone), and told they are out-element-wise fusable, FuseTIR refuses the group. edgemem's
    fused kernel keeps only the convolution's own 4 accumulators (16 bytes): the ADD's input never exists."""
    _, plain = residual
    with tvm.target.Target({"kind": "c"}), tvm.transform.PassContext(opt_level=3):
        annotated = relax.transform.AnnotateTIROpPattern()(plain)
        patterns = {gv.name_hint: int(f.attrs["op_pattern"]) for gv, f in annotated.functions.items() if isinstance(f, tvm.tirx.PrimFunc)}
        assert patterns == {"conv_2d_1": tvm_fusion.OPAQUE, "conv_2d_2": tvm_fusion.OPAQUE, "add_3": 0}
        assert tvm_fusion._group_kinds(relax.transform.FuseOps()(annotated)) == {}
        annotated[annotated.get_global_var("conv_2d_2")] = annotated["conv_2d_2"].with_attr("op_pattern", 4)  # kOutEWiseFusable
        grouped = relax.transform.FuseOps()(annotated)
        assert list(tvm_fusion._group_kinds(grouped).values()) == [(["CONV_2D", "ADD"], 36_864)]
        with pytest.raises(Exception, match="Inconsistent buffers"):
            relax.transform.FuseTIR()(grouped)
    fused = tvm_fusion.fuse_ops(plain)
    kernel = next(f for f in fused.functions.values() if isinstance(f, tvm.tirx.PrimFunc) and f.attrs.get("edgemem.op") == "CONV_2D+ADD")
    assert tvm_fusion._scratch_bytes({"k": kernel, "c": plain["conv_2d_2"]}) == {"k": 16, "c": 16}


def test_tvm_default_baseline_leaves_the_fast_convolutions_unfused(residual):
    """TVM's default pipeline groups nothing here (the ADD's only producer is an opaque fast convolution):
    its arena is the unfused one, 3 S at the ADD step, with no fused-kernel scratch."""
    _, plain = residual
    base = tvm_default_baseline(plain, lambda m: measure(m, 4))
    assert base["planned_arena_bytes"] == 3 * S and base["fused_kernel_scratch_bytes"] == 0
    assert base["arena_bytes"] == 3 * S and base["macs"] == measure(plain)["macs"]
    assert base["tvm_storage_bytes"] > 0


def _constants(mod) -> list[tuple[str, int]]:
    """(dtype, elements) of every tensor constant in ``main``, sorted."""
    out = []

    def visit(e):
        if isinstance(e, tvm.ir.Constant) and hasattr(e.value, "numpy"):
            out.append((str(e.value.numpy().dtype), e.value.numpy().size))

    relax.analysis.post_order_visit(mod["main"], visit)
    return sorted(out)


def test_fold_constant_is_left_out_because_it_only_harms_or_does_nothing(residual):
    """Why FoldConstant is not in the catalogue: on the lowered module it has nothing to fold (no kernel
    reads only constants), and on the imported QDQ module it folds each weight's DEQUANTIZE, storing the
    int8 weights (8*8 + 8*3*3*8 = 640 of them) as float32."""
    path, plain = residual
    assert "fold_constant" not in {p.name for p in catalogue()}

    def fold(mod):
        with tvm.transform.PassContext(opt_level=3):
            return relax.transform.FoldConstant()(mod)

    assert tvm_ffi.structural_equal(fold(plain), plain)
    imported = import_tflite(path).relax_mod
    before, after = _constants(imported), _constants(fold(imported))
    assert ("int8", 64) in before and ("int8", 576) in before
    assert not any(d == "int8" for d, _ in after) and ("float32", 64) in after and ("float32", 576) in after


def _chain_model() -> bytes:
    """x, y [1,8,8,8] int8 -> a = ADD(x, y) -> out = MUL(a, y): an element-wise chain."""
    mb = mm.ModelBuilder(description="edgemem element-wise chain test")
    x = mb.tensor("x", (1, 8, 8, 8), np.int8, _Q)
    y = mb.tensor("y", (1, 8, 8, 8), np.int8, _Q)
    a = mb.tensor("a", (1, 8, 8, 8), np.int8, {"scale": [0.08], "zero_point": [2]})
    mb.op(mm.OP.ADD, [x, y], [a], *mm.add_options(mm.ACT.NONE), version=2)
    out = mb.tensor("out", (1, 8, 8, 8), np.int8, {"scale": [0.1], "zero_point": [-1]})
    mb.op(mm.OP.MUL, [a, y], [out], version=2)
    return mb.serialize([x, y], [out])


def test_elementwise_fusion_fuses_the_chain_and_keeps_the_peak(tmp_path):
    path = tmp_path / "chain.tflite"
    path.write_bytes(_chain_model())
    plain = lower_to_kernels(import_tflite(path).relax_mod)
    fused = next(p for p in catalogue() if p.name == "tvm_fuse_elementwise")(plain)
    assert [op.kind for op in read_graph(fused).ops] == ["ADD+MUL"]
    before, after = evaluate(plain), evaluate(fused)
    # by hand: a is gone (4 -> 3 RAM tensors), but x, y and the result are still live together, as
    # x, y, a were at the ADD: 3 S either way. Element-wise fusion moves no peak on a chain.
    assert (before["tensors"], after["tensors"]) == (4, 3)
    assert before["arena_bytes"] == after["arena_bytes"] == 3 * S
    for seed in (0, 1):
        inputs = seeded_inputs(path, seed)
        got = run_vm(fused, inputs)[0]
        np.testing.assert_array_equal(got, run_vm(plain, inputs)[0])
        np.testing.assert_array_equal(got, tflm_outputs(path.read_bytes(), inputs)[0])


def test_elementwise_fusion_leaves_convolutions_alone(residual):
    _, plain = residual
    assert next(p for p in catalogue() if p.name == "tvm_fuse_elementwise")(plain).same_as(plain)


def test_fused_model_bit_exact_under_qemu(tmp_path):
    path = tmp_path / "residual.tflite"
    path.write_bytes(residual_model(seed=5))
    result = pipeline.build(path, "stm32f746", tmp_path / "p", pipeline.BuildOptions(passes=("tvm_fuse_ops",)))
    assert [op.kind for op in result.graph.ops] == ["CONV_2D", "CONV_2D+ADD"]
    assert result.plan.total_bytes == 2 * S
    for seed in (0, 1):
        run = run_on_device(tmp_path / "p", seed=seed)
        assert run["bit_exact"] and run["arena_high_water_bytes"] == 2 * S, run


def test_fused_kernel_profiles_as_one_step_under_qemu(tmp_path):
    """The profiler names the fused kernel's step by its parts and measures what the plan predicts."""
    from edgemem import profiling

    path = tmp_path / "residual.tflite"
    path.write_bytes(residual_model(seed=6))
    options = pipeline.BuildOptions(passes=("tvm_fuse_ops",), profile=True)
    pipeline.build(path, "stm32f746", tmp_path / "p", options)
    res = profiling.profile(tmp_path / "p", timeout_s=120)
    assert [row["kind"] for row in res["steps"]] == ["CONV_2D", "CONV_2D+ADD"]
    # by hand: step 0 holds x and y1 (2 S, the input placed in the arena), the fused step y1 and out
    assert [row["measured_high_water_bytes"] for row in res["steps"]] == [2 * S, 2 * S]
    assert all(row["predicted_high_water_bytes"] == row["measured_high_water_bytes"] for row in res["steps"])
    assert res["bit_exact"]


def test_rebuild_gives_the_module_tvms_builder_over_every_kernel_gives(monkeypatch):
    """rewrite.rebuild builds main in an empty BlockBuilder and looks the old kernels up by kept hashes; the
    oracle is TVM's own BlockBuilder over all of them (what rebuild used before): for the catalogue's passes on a
    real model, and for a replacement adding a copy of an old kernel (must come back as the old GlobalVar) and a
    new kernel under an old kernel's name (must be renamed), the same module, functions in the same order."""
    from shared_models import model_path

    from edgemem.passes import rewrite

    def tvm_builder(kernels):
        return relax.BlockBuilder(tvm.IRModule(kernels))

    def both(fn):
        ours = fn()
        with monkeypatch.context() as m:
            m.setattr(rewrite, "_Builder", tvm_builder)
            theirs = fn()
        return ours, theirs

    mod = lower_to_kernels(import_tflite(model_path("mlperf_kws_dscnn_int8")).relax_mod)
    pairs = []
    for p in catalogue():
        if p.name in ("remat", "patches"):
            continue  # seconds each; they rebuild through the same function
        pairs.append(both(lambda p=p: p(mod)))
    kvars = rewrite.kernel_vars(mod)
    b = rewrite.Bindings(mod)
    k0, k1 = b.kernel(kvars[0]), b.kernel(kvars[1])

    def copy_and_clash():
        def replacement(bb, env):
            same = bb.add_func(k0.prim.with_attr("global_symbol", k0.prim.attrs["global_symbol"]), "copy")  # an equal new object
            bb.add_func(k1.prim.with_attr("edgemem_test", 1), k0.gv.name_hint)  # a new kernel under a taken name
            return relax.call_tir(same, [env.get(a, a) for a in k0.args], kvars[0].ty)

        return rewrite.rebuild(mod, {kvars[0]: replacement})

    pairs.append(both(copy_and_clash))
    for ours, theirs in pairs:
        assert tvm_ffi.structural_equal(ours, theirs)
        assert [gv.name_hint for gv in ours.functions] == [gv.name_hint for gv in theirs.functions]
    names = [gv.name_hint for gv in pairs[-1][0].functions]
    assert "copy" not in names and len(names) == len(mod.functions) + 1  # the copy is the old kernel; the clash renamed
