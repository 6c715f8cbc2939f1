"""In-place depthwise convolution (issue 5, after TinyEngine): the output written over its dying input.

Three layers, each against its own oracle:
- the kernel, compiled for the host and called with the *same* memory as input and output, against a
  numpy depthwise convolution with TFLM's requantization (test_integerize's reference helpers);
- the planner: an in-place pair may share its offset and nothing else may overlap it (the independent
  checker), the lower bound counts the shared bytes once, a partial overlap is still refused;
- whole models: the arena drops to TinyEngine's in-place figures (anchors.md) and the firmware stays
  bit-exact with TFLite Micro under QEMU.
"""

from __future__ import annotations

import ctypes
import random

import numpy as np
import pytest
from test_integerize import _mbqm, _tflm_quantize_multiplier
from test_kernels_c import HOST_CC, compile_shared

from edgemem import device_run, pipeline
from edgemem.codegen.kernels_c import prim_funcs_to_c
from edgemem.kernels import int8_ops
from edgemem.kernels.int8_ops import Requant
from edgemem.plan import ArenaPlan, Buffer, PlanError, Placement, check_plan, lower_bound, plan_arena
from edgemem.reference import seeded_inputs, tflm_outputs

from shared_models import model_path


def _depthwise_reference(x, w, bias, mult, shift, zp, stride, pad, out_hw, rq):
    """NHWC depthwise (multiplier 1), int64 accumulation, TFLM's per-channel requantization."""
    _, h, wd, c = x.shape
    kh, kw, _ = w.shape
    ho, wo = out_hw
    out = np.zeros((1, ho, wo, c), np.int8)
    for i in range(ho):
        for j in range(wo):
            for ch in range(c):
                acc = int(bias[ch])
                for r in range(kh):
                    for s in range(kw):
                        ih, iw = i * stride[0] + r - pad[0], j * stride[1] + s - pad[1]
                        if 0 <= ih < h and 0 <= iw < wd:
                            acc += (int(x[0, ih, iw, ch]) - zp) * int(w[r, s, ch])
                v = _mbqm(acc, int(mult[ch]), int(shift[ch])) + rq.out_zp
                out[0, i, j, ch] = min(max(v, rq.act_min), rq.act_max)
    return out


CASES = [  # (H, W, C, K, stride, pad top/left, output H, W)
    ((5, 6, 3), 3, (1, 1), (1, 1), (5, 6)),  # SAME, stride 1: output as big as the input
    ((7, 5, 4), 3, (2, 2), (1, 1), (4, 3)),  # stride 2: the output shrinks
    ((9, 4, 2), 5, (2, 1), (2, 2), (5, 4)),  # 5x5, mixed strides
    ((6, 6, 5), 3, (1, 1), (0, 0), (4, 4)),  # VALID
]


def test_delay_covers_the_last_reader_of_every_overwritten_pixel():
    # 3x3 stride 1 SAME on 6-wide rows: pixel p is last read by the output one row and one column on
    assert int8_ops.depthwise_inplace_delay((1, 5, 6, 3), (3, 3, 3), (1, 1), (1, 1), [1, 1, 1, 1], (1, 5, 6, 3)) == 6 + 2
    # mltk_kws_on_off_v3's 9x1 stride 2 with 3 rows of top padding: row 1 is last read by output 2
    assert int8_ops.depthwise_inplace_delay((1, 98, 1, 8), (9, 1, 8), (2, 2), (1, 1), [3, 0, 4, 0], (1, 49, 1, 8)) == 2
    # stride 2: every output only overwrites pixels already consumed
    assert int8_ops.depthwise_inplace_delay((1, 7, 5, 4), (3, 3, 4), (2, 2), (1, 1), [1, 1, 1, 1], (1, 4, 3, 4)) == 1


@pytest.mark.skipif(HOST_CC is None, reason="host gcc not installed")
@pytest.mark.parametrize("case", CASES)
@pytest.mark.parametrize("workspace", [True, False])  # a channel plane of scratch, or outputs held back
def test_inplace_depthwise_with_aliased_memory_matches_reference(case, workspace, tmp_path):
    (h, w, c), k, stride, pad, (ho, wo) = case
    rng = np.random.default_rng(h * 100 + c)
    x = rng.integers(-128, 128, size=(1, h, w, c), dtype=np.int8)
    wt = rng.integers(-127, 128, size=(k, k, c), dtype=np.int8)
    bias = rng.integers(-5000, 5000, size=c, dtype=np.int32)
    pairs = [_tflm_quantize_multiplier(float(s)) for s in rng.uniform(0.0005, 0.05, size=c)]
    mult = np.array([m for m, _ in pairs], np.int32)
    shift = np.array([s for _, s in pairs], np.int32)
    zp, rq = -7, Requant(3, -100, 120)
    expected = _depthwise_reference(x, wt, bias, mult, shift, zp, stride, pad, (ho, wo), rq)

    delay = 0 if workspace else int8_ops.depthwise_inplace_delay((1, h, w, c), (k, k, c), stride, (1, 1), [*pad, 0, 0], (1, ho, wo, c))
    assert workspace or delay >= 1
    prim = int8_ops.depthwise_conv2d_inplace((1, h, w, c), (k, k, c), zp, stride, (1, 1), [*pad, 0, 0], (1, ho, wo, c), rq, delay)
    ck = prim_funcs_to_c({"dw_inplace": prim}, {"dw_inplace": {1, 2, 3, 4}}, scratch="error")
    assert "restrict" not in ck.source.split("dw_inplace(")[1].split(")")[0]  # aliasing is allowed
    lib = compile_shared(ck, tmp_path, "dw")
    memory = np.ascontiguousarray(x.reshape(-1)).copy()  # input and output: one buffer
    tmp = np.zeros(h * w, np.int8)
    fn = lib.dw_inplace
    fn.restype = ctypes.c_int32
    ptr = memory.ctypes.data_as(ctypes.c_void_p)
    args = [ptr, wt.ctypes.data_as(ctypes.c_void_p), bias.ctypes.data_as(ctypes.c_void_p),
            mult.ctypes.data_as(ctypes.c_void_p), shift.ctypes.data_as(ctypes.c_void_p), ptr]
    args += [tmp.ctypes.data_as(ctypes.c_void_p)] if workspace else []  # fmt: skip
    assert fn(*args) == 0
    np.testing.assert_array_equal(memory[: ho * wo * c].reshape(1, ho, wo, c), expected)


# ---------------------------------------------------------------- the planner's in-place pairs


def test_inplace_pair_shares_an_offset_and_the_bound_counts_it_once():
    buffers = [
        Buffer("x", 1000, 0, 1, 4),  # dies at step 1
        Buffer("y", 400, 1, 2, 4, alias="x"),  # written over x at step 1
        Buffer("ws", 100, 1, 1, 4),  # the kernel's workspace
        Buffer("z", 400, 2, 2, 4),
    ]
    assert lower_bound(buffers) == 1100  # step 1: x (y inside it) + ws
    plan = plan_arena(buffers)
    check_plan(buffers, plan)
    assert plan.placements["y"].offset == plan.placements["x"].offset
    assert plan.total_bytes == 1100


def test_checker_refuses_a_partial_overlap_of_an_inplace_pair():
    buffers = [Buffer("x", 1000, 0, 1, 4), Buffer("y", 400, 1, 2, 4, alias="x")]
    shifted = ArenaPlan({"x": Placement("arena", 0), "y": Placement("arena", 8)}, {"arena": 1000}, 1000, "hand")
    with pytest.raises(PlanError, match="overlap"):
        check_plan(buffers, shifted)
    same = ArenaPlan({"x": Placement("arena", 0), "y": Placement("arena", 0)}, {"arena": 1000}, 1000, "hand")
    check_plan(buffers, same)
    # an alias that outlives the writer's first step is no in-place pair
    late = [Buffer("x", 1000, 0, 2, 4), Buffer("y", 400, 1, 2, 4, alias="x")]
    with pytest.raises(PlanError, match="overlap"):
        check_plan(late, same)


def test_random_plans_with_inplace_pairs_pass_the_checker():
    rnd = random.Random(7)
    for _ in range(200):
        buffers, step = [], 0
        for i in range(rnd.randint(2, 12)):
            first = rnd.randint(0, 8)
            b = Buffer(f"b{i}", rnd.randint(1, 64) * 4, first, first + rnd.randint(0, 4), 4)
            if buffers and rnd.random() < 0.4:
                a = rnd.choice(buffers)
                b = Buffer(b.name, b.size, a.last, a.last + rnd.randint(0, 3), 4, alias=a.name)
            buffers.append(b)
            step += 1
        plan = plan_arena(buffers)
        check_plan(buffers, plan)
        assert plan.total_bytes >= lower_bound(buffers)


# ---------------------------------------------------------------- whole models under QEMU


@pytest.mark.parametrize("name, without, with_inplace", [
    ("armzoo_kws_micronet_m_int8", 86_100, 69_092),  # TinyEngine (in-place): 69,092
    ("mltk_kws_mobilenetv2_int8", 45_360, 42_000),  # TinyEngine (in-place): 42,000
    ("mltk_kws_on_off_v3", 19_600, 15_680),  # TinyEngine (in-place): 15,680
])  # fmt: skip
def test_inplace_depthwise_models_shrink_and_stay_bit_exact(name, without, with_inplace, tmp_path):
    path = model_path(name)
    plain = pipeline.build(path, "stm32f746", tmp_path / "plain", pipeline.BuildOptions(inplace=False, compile=False))
    result = pipeline.build(path, "stm32f746", tmp_path / "p")
    assert plain.info["arena_bytes"] == without
    assert result.info["arena_bytes"] == result.info["lower_bound_bytes"] == with_inplace
    assert any(t.alias_of for t in result.graph.tensors.values())
    # the plan really puts outputs over their inputs
    shared = [t for t in result.graph.tensors.values() if t.alias_of
              and result.plan.placements[t.name] == result.plan.placements[t.alias_of]]  # fmt: skip
    assert shared
    x = seeded_inputs(path, 1)
    res = device_run.run(tmp_path / "p", x)
    for out, ref in zip(res["output_arrays"], tflm_outputs(path, x)):
        np.testing.assert_array_equal(out, ref)
    # the device's high-water mark is the planned end of the highest buffer (before its alignment padding)
    top = max(result.plan.placements[b].offset + result.graph.tensors[b].nbytes for b in result.plan.placements)
    assert res["arena_high_water_bytes"] == top and result.info["arena_bytes"] - 4 < top


@pytest.mark.skipif(HOST_CC is None, reason="host gcc not installed")
def test_a_too_short_delay_is_wrong(tmp_path):
    """The control: held back one output too few (here: none), a stride-1 depthwise over its own input
    reads pixels it already overwrote."""
    h, w, c = 5, 6, 3
    rng = np.random.default_rng(3)
    x = rng.integers(-128, 128, size=(1, h, w, c), dtype=np.int8)
    wt = rng.integers(1, 128, size=(3, 3, c), dtype=np.int8)
    bias, mult, shift = np.zeros(c, np.int32), np.full(c, 1 << 30, np.int32), np.full(c, -4, np.int32)
    rq = Requant(0, -128, 127)
    expected = _depthwise_reference(x, wt, bias, mult, shift, 0, (1, 1), (1, 1), (h, w), rq)
    delay = int8_ops.depthwise_inplace_delay((1, h, w, c), (3, 3, c), (1, 1), (1, 1), [1, 1, 1, 1], (1, h, w, c)) - 1
    prim = int8_ops.depthwise_conv2d_inplace((1, h, w, c), (3, 3, c), 0, (1, 1), (1, 1), [1, 1, 1, 1], (1, h, w, c), rq, delay)
    lib = compile_shared(prim_funcs_to_c({"dw_inplace": prim}, {"dw_inplace": {1, 2, 3, 4}}, scratch="error"), tmp_path, "dw")
    memory = x.reshape(-1).copy()
    ptr = memory.ctypes.data_as(ctypes.c_void_p)
    lib.dw_inplace(ptr, wt.ctypes.data_as(ctypes.c_void_p), bias.ctypes.data_as(ctypes.c_void_p),
                   mult.ctypes.data_as(ctypes.c_void_p), shift.ctypes.data_as(ctypes.c_void_p), ptr)
    assert not np.array_equal(memory.reshape(1, h, w, c), expected)


def test_workspace_form_end_to_end(tmp_path, monkeypatch):
    """Where holding outputs back would take too much stack, the kernel takes a channel plane of arena
    workspace instead (a tensor live for one step); forced here on kws_dscnn (fixed pass sequence: the
    orchestrator would skip a pass that saves nothing on this model), still bit-exact."""
    monkeypatch.setattr(int8_ops, "MAX_INPLACE_DELAY", 0)
    path = model_path("mlperf_kws_dscnn_int8")
    result = pipeline.build(path, "stm32f746", tmp_path / "p", pipeline.BuildOptions(opt_seconds=0))
    workspaces = [op.workspace for op in result.graph.ops if op.workspace]
    assert len(workspaces) == 4 and all(result.graph.tensors[w].nbytes == 25 * 5 for w in workspaces)
    assert result.info["arena_bytes"] == result.info["lower_bound_bytes"] == 16_000  # the peak is at a conv step
    x = seeded_inputs(path, 0)
    res = device_run.run(tmp_path / "p", x)
    np.testing.assert_array_equal(res["output_arrays"][0], tflm_outputs(path, x)[0])
