"""`edgemem analyze`: read from the flatbuffer alone, checked against what a real build finds (its lowering's own
MAC counts, its planned arena), and its refusals and exit codes."""

from __future__ import annotations

import json
import subprocess
import sys
from collections import Counter
from pathlib import Path

import numpy as np
import pytest

from edgemem import pipeline
from edgemem.analysis import analyze

ROOT = Path(__file__).resolve().parents[1]
EXAMPLE = ROOT / "examples" / "kws_tiny_int8.tflite"
BATCH = ROOT / "examples" / "kws_tiny_batch_int8.tflite"
SHARED = ROOT.parent / "shared" / "models"


def _cli(*args):
    return subprocess.run([sys.executable, "-m", "edgemem.cli", "analyze", *map(str, args)], capture_output=True, text=True,
                          timeout=300, cwd=ROOT)  # fmt: skip


@pytest.mark.parametrize("model", [EXAMPLE, SHARED / "mlperf_kws_dscnn_int8.tflite", ROOT / "tests" / "models" / "arch" / "conv1d_dilated-int16.tflite"],
                         ids=lambda p: p.stem)
def test_analysis_agrees_with_a_build(model, tmp_path):
    """MACs per operator kind equal the lowering's own counts (the kernels' edgemem.macs); the floor is at most the
    arena the build plans, which is at most the file-order plan analyze reports."""
    if not model.exists():
        pytest.skip(f"{model} is not here (../shared/models)")
    a = analyze(model, "stm32f746", options=pipeline.BuildOptions(opt_seconds=0))
    info = pipeline.build(model, "stm32f746", tmp_path / "p", pipeline.BuildOptions(compile=False, opt_seconds=0)).info
    built = Counter()
    for step in info["memory"]["steps"]:  # a fused kernel (CONV_2D+ADD) counts its anchor's MACs (an ADD has none)
        built[step["kind"].split("+")[0]] += step["macs"]
    mine = Counter()
    for r in a.operators:
        mine[r.name] += r.macs
    assert {k: v for k, v in mine.items() if v} == {k: v for k, v in built.items() if v}
    assert a.ram_floor_bytes <= info["arena_bytes"] <= a.file_order_arena_bytes
    assert a.arena_bytes == info["arena_bytes"] and a.lower_bound_bytes == info["lower_bound_bytes"]
    assert a.verdict == "fits" and not a.unsupported
    assert 0 < a.weights_bytes <= info["weights_bytes"]  # the build adds kernel tables (SOFTMAX's exp) to the file's


def test_every_unsupported_operator_at_once_and_exit_4(tmp_path):
    sys.path.insert(0, str(ROOT / "examples"))
    import make_example_model as mm

    mb = mm.ModelBuilder()
    q = mm.qparams([0.05], [0])
    x = mb.tensor("x", (1, 4, 4, 3), np.int16, q)
    t = mb.tensor("t", (1, 4, 4, 3), np.int16, q)
    u = mb.tensor("u", (1, 4, 4, 3), np.int16, q)
    y = mb.tensor("y", (1, 4, 4, 3), np.int16, q)
    mb.op(mm.OP.HARD_SWISH, [x], [t])
    mb.op(mm.OP.RELU, [t], [u])
    mb.op(mm.OP.HARD_SWISH, [u], [y])
    path = tmp_path / "two_missing.tflite"
    path.write_bytes(mb.serialize([x], [y]))
    p = _cli(path, "--json")
    assert p.returncode == 4, p.stderr
    report = json.loads(p.stdout)
    assert report["unsupported"] == ["operator #0 HARD_SWISH (output 't') on int16", "operator #2 HARD_SWISH (output 'y') on int16"]
    assert [r["supported"] for r in report["operators"]] == [False, True, False]


def test_does_not_fit_exit_5():
    # 32 B of budget: below even the model input, which the floor keeps whatever a patch stage does (issue 33;
    # at 17K, 1,024 B, the floor with a patch stage is under the budget and the verdict is "may fit")
    p = _cli(EXAMPLE, "--ram", "16416", "--json")
    report = json.loads(p.stdout)
    assert p.returncode == 5 and report["verdict"] == "does not fit"
    assert report["ram_floor_bytes"] > report["ram_budget_bytes"] == 16416 - 16384
    assert report["ram_floor_assumes"].startswith("operators #0..#")


def test_a_tensor_a_patch_stage_never_holds_whole_does_not_refuse(tmp_path):
    """A 32 KiB tensor inside the first stage (conv s2 -> dw -> conv1x1 -> dw s2 at 64x64x32) and 28 KiB for
    the arena: the build runs the stage as rolling rows and fits; analyze counted that tensor whole and said
    "no build fits" (openmv_movenet_singlepose_192 on mps2-an500: its 903,264-byte PAD output, a 387,072-byte
    build)."""
    from test_patches import cnn_model

    path = tmp_path / "big.tflite"
    path.write_bytes(cnn_model(64, 64, 32, residual=False))
    ram = 16384 + 28672
    a = analyze(path, "stm32f746", ram=ram)
    built = pipeline.build(path, "stm32f746", tmp_path / "b", pipeline.BuildOptions(ram=ram, compile=False))
    assert built.info["arena_bytes"] <= 28672 < 32768  # fits, below the tensor analyze counted
    assert a.verdict in ("may fit", "fits"), a.plan_note  # "fits" where analyze ran the build's own stages
    assert a.ram_floor_bytes <= built.info["arena_bytes"]
    assert "alone is" not in a.plan_note


def test_largest_batch_that_fits():
    """The batch model's arena grows by the batch-1 plan per item: the largest batch is the budget over it."""
    a = analyze(BATCH, "stm32f746", ram=64 * 1024)
    per_item = analyze(EXAMPLE, "stm32f746").file_order_arena_bytes
    assert a.symbolic["arena_expr"] == f"{per_item}*n"
    assert a.symbolic["largest_fitting"] == a.ram_budget_bytes // per_item


@pytest.mark.parametrize("name, options", [
    ("mlperf_sww_int8", {}),  # the orchestrator keeps PAD folding and the in-place passes
    ("mltk_kws_mobilenetv2_int8", {"pool_per_region": True}),
    ("mlperf_ic_resnet8_int8", {"opt_seconds": 0}),  # the residual ADDs fused in place: 32,768 B, not 49,152
    ("mlperf_kws_dscnn_int8", {"opt_seconds": 0, "passes": ("fold_pad", "inplace_depthwise", "inplace_residual",
                                                            "inplace_elementwise", "inplace_overlap")}),  # 8,256 B
])  # fmt: skip
def test_arena_equals_the_builds_for_the_same_options(name, options, tmp_path):
    """The arena analyze reports is the one the build plans (its lowering, passes, schedulers, placement),
    with the default orchestrator and over the board's RAM regions (every shared model, with the build's
    figures next to it: benchmarks/analyze.md)."""
    model = SHARED / f"{name}.tflite"
    if not model.exists():
        pytest.skip(f"{model} is not here (../shared/models)")
    a = analyze(model, "stm32f746", options=pipeline.BuildOptions(**options))
    info = pipeline.build(model, "stm32f746", tmp_path / "p", pipeline.BuildOptions(compile=False, **options)).info
    assert (a.arena_bytes, a.arena_pools, a.lower_bound_bytes) == \
        (info["arena_bytes"], info["arena_pools"], info["lower_bound_bytes"])  # fmt: skip
    run = [s["pass"] for s in info["passes"]["sequence"] if s.get("changed", True)]
    assert set(run) <= set(a.passes_modeled) or not a.passes_modeled


def test_control_the_modeled_passes_matter():
    """Without the passes' storage effects the same model needs more: the equality above is not by chance."""
    model = SHARED / "mltk_kws_on_off_v3.tflite"
    if not model.exists():
        pytest.skip(f"{model} is not here (../shared/models)")
    with_passes = analyze(model, "stm32f746").arena_bytes
    without = analyze(model, "stm32f746", options=pipeline.BuildOptions(passes=())).arena_bytes
    assert with_passes < without


def _fc_residual_model() -> bytes:
    """x -> FC1 -> y1 -> FC2 -> FC3 -> ADD(y1, .): FC3 fuses with the ADD over y1 (FC2 reads y1, FC3 does not)."""
    sys.path.insert(0, str(ROOT / "tests"))
    import small_models as sm

    mm, rng = sm.mm, np.random.default_rng(3)
    mb = mm.ModelBuilder(description="edgemem FC residual")
    x = mb.tensor("x", (1, 16), np.int8, sm._Q)
    ys = []
    for i, src in enumerate([x, None, None]):
        w = mb.const(f"fc{i}/w", rng.integers(-127, 128, (16, 16)).astype(np.int8), mm.qparams([0.01], 0))
        b = mb.const(f"fc{i}/b", rng.integers(-500, 500, 16).astype(np.int32), mm.qparams([0.0005], 0))
        ys.append(mb.tensor(f"y{i}", (1, 16), np.int8, sm._Q))
        mb.op(mm.OP.FULLY_CONNECTED, [src if src is not None else ys[-2], w, b], [ys[-1]],
              *mm.fully_connected_options(mm.ACT.NONE), version=4)  # fmt: skip
    out = mb.tensor("out", (1, 16), np.int8, sm._Q)
    mb.op(mm.OP.ADD, [ys[0], ys[2]], [out], *mm.add_options(mm.ACT.NONE), version=2)
    return mb.serialize([x], [out])


def _conv_reads_skip_model() -> bytes:
    sys.path.insert(0, str(ROOT / "tests"))
    import small_models as sm

    return sm.residual_model(1)  # ADD(y1, conv(y1)): the convolution reads the skip, so nothing fuses in place


@pytest.mark.parametrize("path, fused", [
    (ROOT / "tests" / "models" / "arch" / "lstm_unrolled-int8.tflite", 0),
    (SHARED / "mlperf_ic_resnet8_int8.tflite", 3),
    (_fc_residual_model, 1),
    (_conv_reads_skip_model, 0),
], ids=lambda p: getattr(p, "stem", getattr(p, "__name__", "")).strip("_"))  # fmt: skip
def test_modeled_storage_is_the_lowered_graphs(path, fused, tmp_path):
    """On a converter-made model analyze was not tuned for (SPLITs that lowering slices per part, in-place
    element-wise kernels), on resnet8 (convolutions fused with their residual ADD, written over the skip), a
    FULLY_CONNECTED residual and a convolution reading its own skip (not fused in place):
    the storages analyze models from the flatbuffer are those of the lowered graph after the fixed passes
    (sizes, graph outputs, workspaces, in-place aliases) and so are the operators; the other
    architectures, arena against arena: benchmarks/analyze.md."""
    from edgemem.analysis import modeled_memory
    from edgemem.frontend.fold import fold_model
    from edgemem.frontend.tflite_import import import_tflite, read_tflite
    from edgemem.ir.graph import read_graph
    from edgemem.memory import from_graph
    from edgemem.passes.catalogue import catalogue
    from edgemem.passes.lower import lower_to_kernels
    from edgemem.passes.orchestrate import DEFAULT_SEQUENCE

    if callable(path):
        (tmp_path / "m.tflite").write_bytes(path())
        path = tmp_path / "m.tflite"
    if not path.exists():
        pytest.skip(f"{path} is not here (../shared/models)")
    m = import_tflite(path)
    mod = lower_to_kernels(m.relax_mod, m.op_labels)
    passes = {p.name: p for p in catalogue()}
    for name in DEFAULT_SEQUENCE:
        mod = passes[name](mod)
    graph = from_graph(read_graph(mod))
    flat = read_tflite(path)
    values, folded = fold_model(flat)
    mine = modeled_memory(flat, folded, 1, constants=frozenset(values))

    def shape(mm):
        return Counter((s.size, s.pinned, s.temp, s.alias is not None, s.producer is None) for s in mm.storages.values())

    assert mine.n == graph.n and shape(mine) == shape(graph)
    assert Counter(op.kind for op in mine.ops) == Counter(op.kind for op in graph.ops)
    assert sum("+ADD" in op.kind for op in graph.ops) == fused  # the residual pass did (not) fuse, as meant
