"""The residual ADD fused in place (passes/residual.py, issue 20): a convolution and the ADD that alone reads
its result run as one kernel whose result is written over the ADD's other operand, the skip tensor.

The blocks are written here with the flatbuffer builder: x -> conv -> y1 -> conv -> y2 -> ADD(y2, x), the
skip being the block input (read by the first convolution too). The oracle is TFLite Micro; the bytes are
recomputed by hand from the tensor sizes (S bytes each); the in-place kernel is also called on the host with
one buffer for both skip and result, where it is right, and where it would be wrong (the skip being the
convolution's own input, which the pass refuses).
"""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pytest
import tvm
from tvm import tirx

from edgemem import pipeline
from edgemem.device_run import run as run_on_device
from edgemem.frontend.tflite_import import import_tflite
from edgemem.ir.graph import read_graph
from edgemem.passes import residual
from edgemem.passes.catalogue import evaluate
from edgemem.passes.lower import lower_to_kernels

pytest.importorskip("tflite_micro")
from edgemem.reference import seeded_inputs, tflm_outputs  # noqa: E402

sys.path.insert(0, str(Path(__file__).resolve().parent))
from relax_vm import run as run_vm  # noqa: E402
from small_models import _Q, _conv, mm, residual_model  # noqa: E402

S = 8 * 8 * 8  # bytes of every activation of the blocks


def block_model(seed: int = 0, skip_first: bool = False, act=mm.ACT.NONE, out_q=None) -> bytes:
    """x[1,8,8,8] -> c1 3x3 -> y1 -> c2 3x3 -> y2; out = ADD(y2, x) (ADD(x, y2) with ``skip_first``), the
    ADD's output quantized by ``out_q`` (another scale than its inputs': TFLM's rescaling at work)."""
    rng = np.random.default_rng(seed)
    mb = mm.ModelBuilder(description="edgemem residual block test")
    x = mb.tensor("x", (1, 8, 8, 8), np.int8, _Q)
    y1 = _conv(mb, rng, "c1", x, 8, 8, 3, (1, 8, 8, 8))
    y2 = _conv(mb, rng, "c2", y1, 8, 8, 3, (1, 8, 8, 8))
    out = mb.tensor("out", (1, 8, 8, 8), np.int8, out_q or {"scale": [0.08], "zero_point": [5]})
    mb.op(mm.OP.ADD, [x, y2] if skip_first else [y2, x], [out], *mm.add_options(act), version=2)
    return mb.serialize([x], [out])


def _lowered(tmp_path, data: bytes, name="block.tflite"):
    path = tmp_path / name
    path.write_bytes(data)
    return path, lower_to_kernels(import_tflite(path).relax_mod)


def _fused_kernel(mod) -> tuple[str, tirx.PrimFunc]:
    return next((gv.name_hint, f) for gv, f in mod.functions.items()
                if isinstance(f, tirx.PrimFunc) and str((f.attrs or {}).get("edgemem.op", "")) == "CONV_2D+ADD")  # fmt: skip


@pytest.mark.parametrize("seed,skip_first,act", [(0, False, mm.ACT.NONE), (1, True, mm.ACT.RELU6)])
def test_fused_in_place_is_bit_exact_and_saves_a_tensor(tmp_path, seed, skip_first, act):
    path, plain = _lowered(tmp_path, block_model(seed, skip_first, act))
    mod = residual.residual_inplace(plain)
    assert [op.kind for op in read_graph(mod).ops] == ["CONV_2D", "CONV_2D+ADD"]
    _, kernel = _fused_kernel(mod)
    assert int(kernel.attrs["edgemem.inplace"]) == 5  # x, w, bias, mult, shift, then the skip
    # by hand: unfused, c2's step holds x, y1, y2 and the ADD's x, y2, out (3 S); fused, the one step holds
    # y1 and x, the result written over x (2 S)
    assert (evaluate(plain)["arena_bytes"], evaluate(mod)["arena_bytes"]) == (3 * S, 2 * S)
    inputs = seeded_inputs(path, seed)
    np.testing.assert_array_equal(run_vm(mod, inputs)[0], tflm_outputs(path.read_bytes(), inputs)[0])


def _call_in_place(kernel: tirx.PrimFunc, args: list, alias: int) -> np.ndarray:
    """Run ``kernel`` on the host with its output buffer being argument ``alias``'s buffer (an int in
    ``args``: the same buffer as that argument)."""
    f = tvm.compile(tvm.IRModule({"main": kernel.with_attr("global_symbol", "main")}), target="llvm")
    bufs = []
    for a in args:
        bufs.append(bufs[a] if isinstance(a, int) else tvm.runtime.tensor(a))
    f["main"](*bufs, bufs[alias])
    return bufs[alias].numpy()


def _consts(mod, var_name: str) -> list[np.ndarray]:
    """The constant arguments (weights, bias, multipliers, shifts) of the call whose kernel is ``var_name``."""
    from tvm import relax

    for block in mod["main"].body.blocks:
        for b in block.bindings:
            v = b.value
            if isinstance(v, relax.Call) and getattr(v.op, "name", "") == "relax.call_tir" and v.args[0].name_hint == var_name:
                return [a.value.numpy() for a in v.args[1].fields if isinstance(a, tvm.ir.Constant)]
    raise AssertionError(var_name)


def test_one_buffer_for_skip_and_result_is_right_only_when_the_convolution_does_not_read_it(tmp_path):
    """The control: the fused kernel called with its result buffer being the skip's gives TFLM's output when
    the skip is the block input; when the skip is the convolution's own input (small_models.residual_model:
    ADD(y1, conv(y1))), the same in-place call overwrites input pixels the convolution still reads, and the
    output is wrong -- which is why residual_inplace refuses that block (and fuses it without the alias)."""
    path, plain = _lowered(tmp_path, block_model(3))
    mod = residual.residual_inplace(plain)
    name, kernel = _fused_kernel(mod)
    x = seeded_inputs(path, 0)[0]
    y1 = run_vm(_only_first_conv(plain), [x])[0]
    got = _call_in_place(kernel, [y1, *_consts(mod, name), x.copy()], alias=5)
    np.testing.assert_array_equal(got, tflm_outputs(path.read_bytes(), [x])[0])

    bad_path, bad_plain = _lowered(tmp_path, residual_model(4), "bad.tflite")
    assert residual.residual_inplace(bad_plain).same_as(bad_plain)
    fused = residual.fuse_pairs(bad_plain)
    bad_name, bad_kernel = _fused_kernel(fused)
    bx = seeded_inputs(bad_path, 0)[0]
    by1 = run_vm(_only_first_conv(bad_plain), [bx])[0]
    want = tflm_outputs(bad_path.read_bytes(), [bx])[0]
    np.testing.assert_array_equal(run_vm(fused, [bx])[0], want)  # fused, not in place: right
    wrong = _call_in_place(bad_kernel, [by1, *_consts(fused, bad_name), 0], alias=0)  # conv input = skip = result
    assert not np.array_equal(wrong, want)


def _only_first_conv(mod):
    """``mod`` returning the first kernel's result (y1) instead of the model output."""
    from tvm import relax

    func = mod["main"]
    block = func.body.blocks[0]
    first = block.bindings[0]
    bb = relax.BlockBuilder(tvm.IRModule({gv: f for gv, f in mod.functions.items() if gv.name_hint != "main"}))
    with bb.function("main", func.params):
        with bb.dataflow():
            out = bb.emit_output(first.value)
        bb.emit_func_output(out)
    return bb.get()


def test_in_place_block_bit_exact_under_qemu(tmp_path):
    """The build with the pass: planned 2 S (by hand, as above), measured the same under QEMU, bit-exact."""
    path = tmp_path / "block.tflite"
    path.write_bytes(block_model(7, act=mm.ACT.RELU))
    result = pipeline.build(path, "stm32f746", tmp_path / "p", pipeline.BuildOptions(passes=("inplace_residual",)))
    assert [op.kind for op in result.graph.ops] == ["CONV_2D", "CONV_2D+ADD"]
    assert result.plan.total_bytes == 2 * S
    run = run_on_device(tmp_path / "p", seed=1)
    assert run["bit_exact"] and run["arena_high_water_bytes"] == 2 * S, run


# the first seeds of tests/test_memory_model.py's random graphs (of range(40)) where the passes apply, one per
# kind of pair: a residual ADD (fused in place), a convolution and a FULLY_CONNECTED with their DEQUANTIZE
RANDOM_SEEDS = {0: ["CONV_2D+ADD"], 15: ["CONV_2D+DEQUANTIZE"], 17: ["CONV_2D+ADD", "FULLY_CONNECTED+DEQUANTIZE"]}


@pytest.mark.parametrize("seed", sorted(RANDOM_SEEDS))
def test_random_graphs_fuse_bit_exact_and_never_raise_the_arena(tmp_path, seed):
    from test_memory_model import _random_model

    path, plain = _lowered(tmp_path, _random_model(seed))
    fused, inplace = residual.fuse_pairs(plain), residual.residual_inplace(plain)
    assert sorted(op.kind for op in read_graph(fused).ops if "+" in op.kind) == RANDOM_SEEDS[seed]
    before = evaluate(plain)["arena_bytes"]
    assert evaluate(fused)["arena_bytes"] <= before and evaluate(inplace)["arena_bytes"] <= before
    assert [op.kind for op in read_graph(inplace).ops if "+" in op.kind] == [k for k in RANDOM_SEEDS[seed] if k.endswith("+ADD")]
    # the in-place kernel is the fused one with an alias (which the VM does not take: QEMU tests do)
    inputs = seeded_inputs(path, seed)
    for got, ref in zip(run_vm(fused, inputs), tflm_outputs(path.read_bytes(), inputs)):
        np.testing.assert_array_equal(got, ref)


def _copy_kernels():
    """Three stand-ins for a fast kernel, [1, 2, 2, 1] int8: one storing its output only, one also storing
    through an int32 view of the output's data, one reading its output back."""
    from tvm.script import tirx as T

    @T.prim_func
    def stores(x: T.Buffer((1, 2, 2, 1), "int8"), out: T.Buffer((1, 2, 2, 1), "int8")):
        for i in range(2):
            for j in range(2):
                out[0, i, j, 0] = x[0, i, j, 0]

    @T.prim_func
    def viewed(x: T.Buffer((1, 2, 2, 1), "int8"), out: T.Buffer((1, 2, 2, 1), "int8")):
        o32 = T.decl_buffer((1,), "int32", data=out.data)
        o32[0] = T.int32(0)
        for i in range(2):
            out[0, i, 0, 0] = x[0, i, 0, 0]

    @T.prim_func
    def reads(x: T.Buffer((1, 2, 2, 1), "int8"), out: T.Buffer((1, 2, 2, 1), "int8")):
        for i in range(2):
            for j in range(2):
                out[0, i, j, 0] = x[0, i, j, 0]
        for i in range(2):
            out[0, i, 1, 0] = out[0, i, 0, 0]

    return [f.with_attr("edgemem.op", "CONV_2D") for f in (stores, viewed, reads)]


def test_only_kernels_that_name_their_output_in_stores_alone_are_rewritten():
    """fuse_epilogue rewrites the stores into the output: a kernel that also writes it through a view, or reads
    it back, would keep old values there or read the reader's results; it is left alone."""
    from edgemem.kernels import int8_ops

    add = int8_ops.add((1, 2, 2, 1), -3, -3, 20, 1 << 30, 0, 1 << 30, 0, 1 << 30, -1, int8_ops.Requant(0, -128, 127))
    stores, viewed, reads = _copy_kernels()
    fused = residual.fuse_epilogue(stores, add, 0)
    assert fused is not None and [str(p.name) for p in fused.params] == ["x", "b", "out"]
    assert residual.fuse_epilogue(viewed, add, 0) is None and residual.fuse_epilogue(reads, add, 0) is None
    # only the fast kernels' kinds (passes/residual.py ANCHORS): the others are TVM's FuseOps' business
    assert residual.fuse_epilogue(stores.with_attr("edgemem.op", "AVERAGE_POOL_2D"), add, 0) is None


def test_in_place_block_profiles_step_by_step_as_planned(tmp_path):
    """The profiler's per-step prediction takes the alias: each step measured under QEMU as predicted, by hand
    x and y1 at the first convolution, y1 and x (the result over it) at the fused step."""
    from edgemem import profiling

    path = tmp_path / "block.tflite"
    path.write_bytes(block_model(8, skip_first=True))
    pipeline.build(path, "stm32f746", tmp_path / "p", pipeline.BuildOptions(passes=("inplace_residual",), profile=True))
    res = profiling.profile(tmp_path / "p", timeout_s=120)
    assert [row["kind"] for row in res["steps"]] == ["CONV_2D", "CONV_2D+ADD"]
    assert [row["measured_high_water_bytes"] for row in res["steps"]] == [2 * S, 2 * S]
    assert all(row["predicted_high_water_bytes"] == row["measured_high_water_bytes"] for row in res["steps"])
    assert res["bit_exact"]
