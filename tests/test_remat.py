"""Rematerialization (passes/remat.py, issue 20).

- A generated U-Net-like model (two levels: conv, max-pool, a wide bottleneck, the pooled tensor added back
  at the decoder's low level, nearest-neighbour upsampling, the encoder tensor added back at the top):
  keeping the pooled tensor alive across the bottleneck holds the peak; the pass recomputes it from the
  encoder tensor (alive anyway) and the peak falls by its bytes. Built for stm32f746 and run under QEMU:
  bit-exact with TFLite Micro, measured arena high-water = plan, and the arena below the build without the
  pass. A narrow-bottleneck variant, whose peak the pooled tensor does not hold, is left unchanged.
- On the random graphs of schedule/random_graphs.py (every op cheap, and a random third of them): the
  search never raises the peak, measured independently by the storage model (edgemem.memory) on the
  evaluator's order of the transformed graph, and each copy computes exactly what its original does
  (same inputs, same size) with every original reader still served.
"""

from __future__ import annotations

import random
import shutil
import sys
from pathlib import Path

import numpy as np
import pytest

from edgemem import memory, pipeline
from edgemem.passes import remat as rm
from edgemem.passes.optimize import run_passes
from edgemem.device_run import run as run_on_device
from random_graphs import FAMILIES, generate

sys.path.insert(0, str(Path(__file__).resolve().parent))
from small_models import _Q, _conv, mm  # noqa: E402

needs_arm = pytest.mark.skipif(not shutil.which("arm-none-eabi-gcc") or not shutil.which("qemu-system-arm"),
                               reason="needs arm-none-eabi-gcc and qemu-system-arm")  # fmt: skip


FIXED = ("fold_pad", "inplace_depthwise", "inplace_elementwise")


def _resize_options():
    import tflite

    def fn(b):
        tflite.ResizeNearestNeighborOptionsStart(b)
        tflite.ResizeNearestNeighborOptionsAddAlignCorners(b, False)
        tflite.ResizeNearestNeighborOptionsAddHalfPixelCenters(b, False)
        return tflite.ResizeNearestNeighborOptionsEnd(b)

    return mm.OPTS.ResizeNearestNeighborOptions, fn


def unet_model(bottleneck: int = 32, seed: int = 0) -> bytes:
    """x 32x32x4 -> e1 conv3x3 (32x32x8) -> p1 max-pool 2x2 (16x16x8) -> e2, e3 conv3x3 (16x16x``bottleneck``)
    -> d2 conv1x1 (16x16x8) -> s2 = d2 + p1 -> u nearest x2 (32x32x8) -> s1 = u + e1 -> conv1x1 (32x32x2)."""
    rng = np.random.default_rng(seed)
    mb = mm.ModelBuilder(description="edgemem remat U-Net test")
    x = mb.tensor("x", (1, 32, 32, 4), np.int8, _Q)
    e1 = _conv(mb, rng, "e1", x, 4, 8, 3, (1, 32, 32, 8))
    p1 = mb.tensor("p1", (1, 16, 16, 8), np.int8, _Q)
    mb.op(mm.OP.MAX_POOL_2D, [e1], [p1], *mm.pool2d_options((2, 2), 2, mm.PAD.VALID), version=2)
    e2 = _conv(mb, rng, "e2", p1, 8, bottleneck, 3, (1, 16, 16, bottleneck))
    e3 = _conv(mb, rng, "e3", e2, bottleneck, bottleneck, 3, (1, 16, 16, bottleneck))
    d2 = _conv(mb, rng, "d2", e3, bottleneck, 8, 1, (1, 16, 16, 8))
    s2 = mb.tensor("s2", (1, 16, 16, 8), np.int8, _Q)
    mb.op(mm.OP.ADD, [d2, p1], [s2], *mm.add_options(mm.ACT.NONE), version=2)
    size = mb.const("up/size", np.array([32, 32], np.int32))
    u = mb.tensor("u", (1, 32, 32, 8), np.int8, _Q)
    mb.op(mm.OP.RESIZE_NEAREST_NEIGHBOR, [s2, size], [u], *_resize_options(), version=1)
    s1 = mb.tensor("s1", (1, 32, 32, 8), np.int8, _Q)
    mb.op(mm.OP.ADD, [u, e1], [s1], *mm.add_options(mm.ACT.NONE), version=2)
    out = _conv(mb, rng, "out", s1, 8, 2, 1, (1, 32, 32, 2))
    return mb.serialize([x], [out])


def input_skip_model(seed: int = 0) -> bytes:
    """A float input quantized once and added back at the end (a denoising U-Net's input skip): x float32
    32x32x4 -> q QUANTIZE -> e1 conv3x3 (32x32x8) -> p1 max-pool -> e2 conv3x3 (16x16x16) -> u nearest x2
    (32x32x16) -> d conv1x1 (32x32x4) -> out = d + q. With the input in the arena, recomputing q late would
    keep the float input (4x q) alive: no gain. With the input outside, the input is free to read again."""
    rng = np.random.default_rng(seed)
    mb = mm.ModelBuilder(description="edgemem remat input-skip test")
    x = mb.tensor("x", (1, 32, 32, 4), np.float32)
    q = mb.tensor("q", (1, 32, 32, 4), np.int8, _Q)
    mb.op(mm.OP.QUANTIZE, [x], [q], version=1)
    e1 = _conv(mb, rng, "e1", q, 4, 8, 3, (1, 32, 32, 8))
    p1 = mb.tensor("p1", (1, 16, 16, 8), np.int8, _Q)
    mb.op(mm.OP.MAX_POOL_2D, [e1], [p1], *mm.pool2d_options((2, 2), 2, mm.PAD.VALID), version=2)
    e2 = _conv(mb, rng, "e2", p1, 8, 16, 3, (1, 16, 16, 16))
    size = mb.const("up/size", np.array([32, 32], np.int32))
    u = mb.tensor("u", (1, 32, 32, 16), np.int8, _Q)
    mb.op(mm.OP.RESIZE_NEAREST_NEIGHBOR, [e2, size], [u], *_resize_options(), version=1)
    d = _conv(mb, rng, "d", u, 16, 4, 1, (1, 32, 32, 4))
    out = mb.tensor("out", (1, 32, 32, 4), np.int8, _Q)
    mb.op(mm.OP.ADD, [d, q], [out], *mm.add_options(mm.ACT.NONE), version=2)
    return mb.serialize([x], [out])


@pytest.fixture(scope="module")
def models(tmp_path_factory) -> dict[str, Path]:
    d = tmp_path_factory.mktemp("unet")
    out = {}
    for name, width in (("wide", 32), ("narrow", 4)):
        out[name] = d / f"unet_{name}.tflite"
        out[name].write_bytes(unet_model(width))
    out["input_skip"] = d / "unet_input_skip.tflite"
    out["input_skip"].write_bytes(input_skip_model())
    return out


def _lowered(model: Path):
    from edgemem.frontend.tflite_import import import_tflite
    from edgemem.passes.lower import lower_to_kernels

    m = import_tflite(model)
    return lower_to_kernels(m.relax_mod, m.op_labels)


def test_unet_pass_recomputes_the_pooled_skip(models):
    from edgemem.ir.graph import read_graph
    from edgemem.schedule.best import best_schedule
    from edgemem.schedule.dag import Dag

    mod = _lowered(models["wide"])
    report: dict = {}
    new = rm.remat(mod, 16, report=report)
    assert [r["kind"] for r in report["recomputed"]] == ["MAX_POOL_2D"], report
    assert report["peak_before"] - report["peak_after"] == 16 * 16 * 8, report
    # the build's own scheduler agrees: the pooled tensor's bytes off the peak, one more kernel call
    before, after = read_graph(mod), read_graph(new)
    assert len(after.ops) == len(before.ops) + 1
    assert sum(op.kind == "MAX_POOL_2D" for op in after.ops) == 2
    peak = {k: best_schedule(Dag.from_graph(g, 16), 1.0)[1] for k, g in (("before", before), ("after", after))}
    assert peak["after"] == peak["before"] - 16 * 16 * 8, peak


def test_unet_narrow_bottleneck_unchanged(models):
    mod = _lowered(models["narrow"])
    report: dict = {}
    assert rm.remat(mod, 16, report=report).same_as(mod)
    assert report["recomputed"] == [] and report["peak_after"] == report["peak_before"]


@needs_arm
def test_unet_on_qemu_bit_exact_and_lower_arena(models, tmp_path):
    pytest.importorskip("tflite_micro")
    arenas = {}
    for passes in (("fold_pad", "inplace_depthwise", "inplace_elementwise"),
                   ("fold_pad", "inplace_depthwise", "inplace_elementwise", "remat")):  # fmt: skip
        out = tmp_path / str(len(passes))
        info = pipeline.build(models["wide"], "stm32f746", out, pipeline.BuildOptions(passes=passes)).info
        res = run_on_device(out, seed=1)
        assert res["bit_exact"] is True, res
        assert res["arena_high_water_bytes"] == info["arena_bytes"], res
        arenas[passes[-1]] = info["arena_bytes"]
    assert arenas["remat"] <= arenas["inplace_elementwise"] - 16 * 16 * 8, arenas


def _check_copies(dag, new, taken) -> None:
    """Each copy reads what its original reads and has its size; every reader of the original DAG reads the
    original or one of its copies (copies of copies included)."""
    origin = list(range(dag.n))
    d = dag
    for c in taken:
        origin.append(origin[c.op])
        n = d.n
        d = rm.with_copy(d, c)
        assert d.sizes[n] == d.sizes[c.op] and d.preds[n] == d.preds[c.op] and d.temps[n] == d.temps[c.op]
    assert d.n == new.n and d.preds == new.preds
    for v in range(dag.n):
        served = {origin[p] for p in new.preds[v]}
        assert served == set(dag.preds[v]), (v, served, dag.preds[v])


def _run_family(family: str) -> tuple[int, int]:
    """The properties on three seeded graphs of ``family`` (two sets of cheap ops each); returns (copies
    taken, candidates that did not lower the peak)."""
    taken_total = rejected = 0
    for seed in range(3):
        dag = generate(family, seed, ops=24)
        rng = random.Random(seed)
        for cheap in (set(range(dag.n)), {v for v in range(dag.n) if rng.random() < 0.33}):
            taken, new, before, after = rm.choose(dag, cheap, max_rounds=3, max_evaluations=12)
            assert after <= before
            assert (after < before) == bool(taken)
            # independently: the storage model's curve of the evaluator's orders, on both graphs
            peak0, order0 = rm.evaluate(dag)
            peak1, order1 = rm.evaluate(new)
            assert new.is_order(order1) and dag.is_order(order0)
            m0 = max(memory.curve(dag.to_model().ranges(order0), dag.n))
            m1 = max(memory.curve(new.to_model().ranges(order1), new.n))
            assert (m0, m1) == (peak0, peak1) == (before, after)
            _check_copies(dag, new, taken)
            # never taken when it does not lower the peak: with no first-round candidate below the peak, nothing
            lowers = [rm.evaluate(rm.with_copy(dag, c))[0] < peak0 for c in rm.candidates(dag, order0, cheap)][:12]
            rejected += lowers.count(False)
            if not any(lowers):
                assert taken == []
            taken_total += len(taken)
    return taken_total, rejected


@pytest.mark.parametrize("family", FAMILIES)
def test_never_raises_the_peak_on_random_graphs(family):
    _run_family(family)


def test_random_graphs_exercise_both_outcomes():
    """Guard against a vacuous property: on these graphs copies are taken, and candidates are refused."""
    taken, rejected = map(sum, zip(*(_run_family(f) for f in ("randwire", "rwstage", "inception"))))
    assert taken >= 5 and rejected >= 1, (taken, rejected)


@pytest.mark.parametrize("width,seed", [(8, 2), (64, 4)])
def test_unet_widths_never_raised_after_the_inplace_passes(models, width, seed, tmp_path):
    """Other bottleneck widths and weights, after edgemem's fixed passes (as a build runs it): the lowered
    graph's peak by the build's own scheduler never rises, and falls exactly when a copy was taken."""
    from edgemem.ir.graph import read_graph
    from edgemem.schedule.best import best_schedule
    from edgemem.schedule.dag import Dag

    path = tmp_path / "u.tflite"
    path.write_bytes(unet_model(width, seed))
    mod, _ = run_passes(_lowered(path), ("fold_pad", "inplace_depthwise", "inplace_elementwise"))
    report: dict = {}
    new = rm.remat(mod, 16, report=report)
    before, after = (best_schedule(Dag.from_graph(read_graph(m), 16), 0.5)[1] for m in (mod, new))
    assert after <= before
    assert (after < before) == bool(report["recomputed"]), (width, before, after, report)


def test_input_outside_makes_the_input_free_to_recompute_from(models, tmp_path):
    """--input outside and remat together: the quantized input held to the end is recomputed from the caller's
    buffer only when that buffer is outside the arena; built and run under QEMU, bit-exact, high-water = plan,
    and the arena below the input-outside build without remat by the quantized tensor's bytes."""
    from edgemem.ir.outside import mark

    mod = _lowered(models["input_skip"])
    inside: dict = {}
    assert rm.remat(mod, 16, report=inside).same_as(mod) and inside["recomputed"] == []
    outside: dict = {}
    rm.remat(mark(mod), 16, report=outside)
    assert [r["kind"] for r in outside["recomputed"]] == ["QUANTIZE"], outside
    arenas = {}
    for passes in (FIXED, FIXED + ("remat",)):  # the QUANTIZE is in place over the input: its copy too
        out = tmp_path / passes[-1]
        info = pipeline.build(models["input_skip"], "stm32f746", out,
                              pipeline.BuildOptions(passes=passes, input_outside=True, compile=bool(shutil.which("qemu-system-arm")))).info  # fmt: skip
        arenas[passes[-1]] = info["arena_bytes"]
        if shutil.which("qemu-system-arm") and shutil.which("arm-none-eabi-gcc"):
            pytest.importorskip("tflite_micro")
            res = run_on_device(out, seed=2)
            assert res["bit_exact"] is True and res["arena_high_water_bytes"] == info["arena_bytes"], res
    assert arenas["remat"] == arenas["inplace_elementwise"] - 32 * 32 * 4, arenas
