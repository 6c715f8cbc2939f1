"""Concatenation in place and DEQUANTIZE folding (passes/concat_inplace.py, passes/fold_dequantize.py).

Small int8 models are written here with the flatbuffer builder; each pass runs on the lowered module and
the module before and after runs on the Relax VM: outputs identical, and equal to TFLite Micro's (the
independent oracle). The byte change is measured on the graph the planner sees, and recomputed in the
test by hand from the tensor sizes. One model is built and run under QEMU with the pass applied.
"""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pytest
import tvm

from edgemem import device_run, pipeline
from edgemem.frontend.tflite_import import import_tflite
from edgemem.ir.graph import read_graph
from edgemem.kernels import int8_ops
from edgemem.kernels.int8_ops import Requant
from edgemem.kernels.redirect import RedirectError, dequantized, into_slice
from edgemem.passes.concat_inplace import concat_inplace
from edgemem.passes.fold_dequantize import fold_dequantize
from edgemem.passes.lower import lower_to_kernels
from edgemem.plan import Buffer, plan_arena
from edgemem.plan.check import check_plan
from edgemem.plan.model import ArenaPlan, Placement, PlanError
from edgemem.schedule.best import best_schedule
from edgemem.schedule.dag import Dag
from edgemem.schedule.liveness import live_ranges, peak_bytes

pytest.importorskip("tflite_micro")
from edgemem.reference import seeded_inputs, tflm_outputs  # noqa: E402

sys.path.insert(0, str(Path(__file__).resolve().parent))
from small_models import _Q, _concat_options, concat_model, widening_model  # noqa: E402  (puts examples/ on the path)
from relax_vm import run as run_vm  # noqa: E402
import make_example_model as mm  # noqa: E402

def _lowered(model: bytes, tmp_path: Path, name: str):
    path = tmp_path / f"{name}.tflite"
    path.write_bytes(model)
    return path, lower_to_kernels(import_tflite(path).relax_mod)


def _best_peak(mod) -> int:
    g = read_graph(mod)
    return best_schedule(Dag.from_graph(g, 4), 2.0)[1]


# -- the kernel rewrite ------------------------------------------------------------------------------


def test_into_slice_writes_only_its_slice_on_any_axis():
    rq = Requant(0, -128, 127)
    pool = int8_ops.max_pool2d((1, 6, 6, 4), (2, 2), (2, 2), (0, 0), (1, 3, 3, 4), rq)
    x = np.random.default_rng(1).integers(-128, 128, (1, 6, 6, 4)).astype(np.int8)
    pooled = x.reshape(1, 3, 2, 3, 2, 4).max(axis=(2, 4))
    for axis, full_shape, start in [(3, (1, 3, 3, 10), 4), (1, (1, 7, 3, 4), 2), (2, (1, 3, 5, 4), 1)]:
        f = tvm.compile(tvm.IRModule({"main": into_slice(pool, full_shape, axis, start)}), target="llvm")
        sentinel = np.full(full_shape, 77, np.int8)
        out = tvm.runtime.tensor(sentinel.copy())
        f(tvm.runtime.tensor(x), out)
        expect = sentinel.copy()
        index = [slice(None)] * 4
        index[axis] = slice(start, start + 3 if axis != 3 else start + 4)
        expect[tuple(index)] = pooled
        np.testing.assert_array_equal(out.numpy(), expect)


def test_dequantized_kernel_equals_kernel_then_dequantize():
    shape, scale, zp = (2, 50), 0.0371, -9
    requant = int8_ops.requantize(shape, 3, 1 << 30, -1, 4)
    x = np.random.default_rng(2).integers(-128, 128, shape).astype(np.int8)
    mid = tvm.runtime.tensor(np.zeros(shape, np.int8))
    tvm.compile(tvm.IRModule({"main": requant}), target="llvm")(tvm.runtime.tensor(x), mid)
    expect = tvm.runtime.tensor(np.zeros(shape, np.float32))
    tvm.compile(tvm.IRModule({"main": int8_ops.dequantize_float(shape, scale, zp)}), target="llvm")(mid, expect)
    got = tvm.runtime.tensor(np.zeros(shape, np.float32))
    tvm.compile(tvm.IRModule({"main": dequantized(requant, scale, zp)}), target="llvm")(tvm.runtime.tensor(x), got)
    np.testing.assert_array_equal(got.numpy().view(np.uint32), expect.numpy().view(np.uint32))  # bit for bit


def test_a_kernel_that_reads_its_output_is_refused():
    from tvm import te

    x = te.placeholder((4,), "int8", name="x")
    prim = te.create_prim_func([x, te.compute((4,), lambda i: x[i], name="out")])
    out = prim.params[-1]
    body_reads_out = tvm.tirx.BufferStore(out, tvm.tirx.BufferLoad(out, [0]), [1])
    reader = tvm.tirx.PrimFunc(list(prim.params), tvm.tirx.SeqStmt([prim.body, body_reads_out]))
    with pytest.raises(RedirectError):
        into_slice(reader, (8,), 0, 4)


# -- concatenation in place --------------------------------------------------------------------------


@pytest.mark.parametrize("axis", [3, 1])
def test_concat_inplace_saves_the_copy_and_keeps_outputs(axis, tmp_path):
    path, plain = _lowered(concat_model(axis), tmp_path, f"concat{axis}")
    passed = concat_inplace(plain)
    kinds = [op.kind for op in read_graph(passed).ops]
    assert kinds.count("CONCATENATION") == 1  # only the copy of `a` (read by `c` too) is left
    # by hand, in file order (x, a, b, c, concat, y; int8 bytes): before, the concatenation step holds
    # a + b + c + cat = 512 * 3 + 1536; after, b's step holds x + a + cat = 192 + 512 + 1536 (or y's
    # step cat + y, where y is 24 rows of 8 x 4)
    y = 8 * 8 * 4 if axis == 3 else 24 * 8 * 4
    g = read_graph(passed)
    assert peak_bytes(read_graph(plain), list(range(6)), 4) == 3 * 512 + 1536
    assert peak_bytes(g, list(range(len(g.ops))), 4) == max(192 + 512 + 1536, 1536 + y)
    assert _best_peak(passed) < _best_peak(plain)
    for seed in (0, 1):
        inputs = seeded_inputs(path, seed)
        ref = tflm_outputs(path.read_bytes(), inputs)
        np.testing.assert_array_equal(run_vm(passed, inputs)[0], ref[0])
        np.testing.assert_array_equal(run_vm(plain, inputs)[0], ref[0])


def test_concat_inplace_leaves_a_concat_of_model_inputs_alone(tmp_path):
    mb = mm.ModelBuilder()
    a = mb.tensor("a", (1, 4, 4, 2), np.int8, _Q)
    b = mb.tensor("b", (1, 4, 4, 2), np.int8, _Q)
    cat = mb.tensor("cat", (1, 4, 4, 4), np.int8, _Q)
    mb.op(mm.OP.CONCATENATION, [a, b], [cat], *_concat_options(3))
    _, plain = _lowered(mb.serialize([a, b], [cat]), tmp_path, "inputs")
    assert concat_inplace(plain).same_as(plain)


def test_plan_of_the_concat_chain_passes_the_checker_and_a_shifted_one_does_not(tmp_path):
    _, plain = _lowered(concat_model(3), tmp_path, "c3")
    g = read_graph(concat_inplace(plain))
    order = list(range(len(g.ops)))
    buffers = [Buffer(r.name, r.size, r.first, r.last, 4, alias=r.alias) for r in live_ranges(g, order)]
    plan = plan_arena(buffers)
    check_plan(buffers, plan)
    # the concatenation's storage is one buffer, live from its first writer (b) to its reader (y)
    cat = next(b for b in buffers if b.size == 1536)
    writers = [i for i, op in enumerate(g.ops) if g.tensors[op.output].storage == cat.name]
    assert (cat.first, len(writers)) == (min(writers), 3)  # b, c and the copy of a write into it
    x = next(b for b in buffers if b.first == 0 and b.size == 192)
    bad = dict(plan.placements)
    bad[cat.name] = Placement(bad[x.name].pool, bad[x.name].offset)  # on top of x, live at b's step
    with pytest.raises(PlanError):
        check_plan(buffers, ArenaPlan(bad, {p: max(s, 4096) for p, s in plan.pool_sizes.items()}, 0, "test"))


def test_reader_of_the_concatenation_waits_for_every_writer(tmp_path):
    _, plain = _lowered(concat_model(3), tmp_path, "c3")
    g = read_graph(concat_inplace(plain))
    dag = Dag.from_graph(g, 4)
    reader = next(i for i, op in enumerate(g.ops) if op.kind == "CONV_2D" and g.tensors[op.output].shape[-1] == 4)
    ancestors, todo = set(), [reader]
    while todo:
        for p in dag.preds[todo.pop()]:
            if p not in ancestors:
                ancestors.add(p)
                todo.append(p)
    assert ancestors == set(range(len(g.ops))) - {reader}


def test_concat_inplace_bit_exact_under_qemu(tmp_path):
    path = tmp_path / "concat3.tflite"
    path.write_bytes(concat_model(3, seed=4))
    result = pipeline.build(path, "stm32f746", tmp_path / "p", pipeline.BuildOptions(opt_seconds=0, passes=("concat_inplace",)))
    assert [s["pass"] for s in result.info["passes"]["sequence"] if s["changed"]] == ["concat_inplace"]
    assert [op.kind for op in result.graph.ops].count("CONCATENATION") == 1  # the copy of `a` only
    for seed in (0, 1):
        run = device_run.run(tmp_path / "p", seed=seed)
        assert run["bit_exact"], run


# -- DEQUANTIZE folded into its producer -------------------------------------------------------------


def test_fold_dequantize_saves_the_int8_copy_and_keeps_the_floats(tmp_path):
    path, plain = _lowered(widening_model(), tmp_path, "widen")
    passed = fold_dequantize(plain)
    assert [op.kind for op in read_graph(plain).ops] == ["QUANTIZE", "FULLY_CONNECTED", "DEQUANTIZE"]
    assert [op.kind for op in read_graph(passed).ops] == ["QUANTIZE", "FULLY_CONNECTED"]
    g0, g1 = read_graph(plain), read_graph(passed)
    # before: the DEQUANTIZE step holds 256 int8 + 1,024 float; after, the FULLY_CONNECTED step 16 + 1,024
    assert peak_bytes(g0, [0, 1, 2], 4) == 256 + 1024
    assert peak_bytes(g1, [0, 1], 4) == 16 + 1024  # the float input (64 B) died at the QUANTIZE
    for seed in (0, 1, 2):
        inputs = seeded_inputs(path, seed)
        ref = tflm_outputs(path.read_bytes(), inputs)[0]
        got = run_vm(passed, inputs)[0]
        np.testing.assert_array_equal(got.view(np.uint32), run_vm(plain, inputs)[0].view(np.uint32))
        np.testing.assert_array_equal(got, ref)


def test_fold_dequantize_leaves_a_dequantized_model_input_alone(tmp_path):
    mb = mm.ModelBuilder()
    x = mb.tensor("x", (1, 8), np.int8, {"scale": [0.5], "zero_point": [1]})
    y = mb.tensor("y", (1, 8), np.float32)
    mb.op(mm.OP.DEQUANTIZE, [x], [y])
    _, plain = _lowered(mb.serialize([x], [y]), tmp_path, "dq")
    assert fold_dequantize(plain).same_as(plain)


def test_fold_dequantize_bit_exact_under_qemu(tmp_path):
    path = tmp_path / "widen.tflite"
    path.write_bytes(widening_model(seed=3))
    result = pipeline.build(path, "stm32f746", tmp_path / "p", pipeline.BuildOptions(opt_seconds=0, passes=("fold_dequantize",)))
    assert [op.kind for op in result.graph.ops] == ["QUANTIZE", "FULLY_CONNECTED"]
    assert result.plan.total_bytes == 16 + 1024  # without the pass 256 + 1,024 at the DEQUANTIZE
    for seed in (0, 1):
        run = device_run.run(tmp_path / "p", seed=seed)
        assert run["bit_exact"], run


def test_an_unknown_pass_name_is_refused_before_anything_is_written(tmp_path):
    from edgemem.errors import EdgememError

    path = tmp_path / "widen.tflite"
    path.write_bytes(widening_model())
    with pytest.raises(EdgememError, match="unknown memory pass 'fold_everything'.*concat_inplace"):
        pipeline.build(path, "stm32f746", tmp_path / "p", pipeline.BuildOptions(passes=("fold_everything",)))
    assert not (tmp_path / "p").exists()
