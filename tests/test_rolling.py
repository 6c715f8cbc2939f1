"""Rolling patch stages (issue 20; geometry in memory/rolling.py, the stage operator in passes/rolling.py).

Oracles: a row-by-row simulation of the rings against a brute-force enumeration of the rows and columns each
output row reads (the geometry: every row an op reads is in its input's ring when it runs, no row of any
tensor is computed twice along H, every S row once, no ring over its capacity); TFLite Micro (the rolling
module under QEMU). The control: a ring one row too small computes a wrong output.
"""

from __future__ import annotations

import random

import pytest

from edgemem.memory import patches as geo
from edgemem.memory import rolling

# -- geometry against a brute-force simulation ----------------------------------------------------------


def _rows_read(w: geo.Window | None, y: int, h_in: int) -> set[int]:
    if w is None:
        return {y}
    return {y * w.sh - w.pt + i * w.dh for i in range(w.kh)} & set(range(h_in))


def _cols_read(w: geo.Window | None, cols: tuple[int, int], w_in: int) -> set[int]:
    if w is None:
        return set(range(*cols))
    return {j * w.sw - w.pl + i * w.dw for j in range(*cols) for i in range(w.kw)} & set(range(w_in))


def _random_stage(rng: random.Random):
    """A chain of convolutions (k 1/3/5, stride 1/2, dilation 1/2, SAME-like padding) with residual ADDs."""
    h, w = rng.randrange(5, 40), rng.randrange(4, 30)
    hw = {"x": (h, w)}
    ops, cur, n = [], "x", rng.randrange(1, 7)
    for i in range(n):
        if i > 0 and rng.random() < 0.25 and ops[-1].window is not None:  # a residual: op i-1 + op i-1's input
            prev = ops[-1]
            if hw[prev.inputs[0]] == hw[prev.output]:
                name = f"t{i}"
                ops.append(geo.StageOp((prev.inputs[0], prev.output), name, None))
                hw[name] = hw[prev.output]
                cur = name
                continue
        k, s, d = rng.choice([1, 3, 3, 5]), rng.choice([1, 1, 2]), rng.choice([1, 1, 2])
        span = (k - 1) * d + 1
        ih, iw = hw[cur]
        oh, ow = -(-ih // s), -(-iw // s)
        pt = max(0, ((oh - 1) * s + span - ih) // 2)
        pl = max(0, ((ow - 1) * s + span - iw) // 2)
        name = f"t{i}"
        ops.append(geo.StageOp((cur,), name, geo.Window(k, k, s, s, d, d, pt, pl)))
        hw[name] = (oh, ow)
        cur = name
    return ops, hw


def _simulate(ops, hw, tp: rolling.TilePlan, shrink: str | None = None):
    """Run the tile's calls on lists of row indices; AssertionError where the schedule is wrong. ``shrink``:
    that tensor's ring holds one row fewer than planned (the control)."""
    s = ops[-1].output
    x = ops[0].inputs[0]
    ring = {t: [] for t in tp.capacity}  # rows held, in order
    computed = {t: set() for t in [*tp.capacity, s]}
    cap = dict(tp.capacity)
    if shrink:
        cap[shrink] -= 1
    for st in tp.steps:
        for call in st.calls:
            t = x if call.op < 0 else ops[call.op].output
            if call.op >= 0:
                op = ops[call.op]
                out_cols = tp.boxes[t]
                for i, (lo, hi), in_lo in zip(op.inputs, call.reads, call.in_lo):
                    want = tp.wants[(call.op, i)]
                    assert _cols_read(op.window, out_cols, hw[i][1]) <= set(range(*want))
                    assert tp.boxes[i][0] <= want[0] and want[1] <= tp.boxes[i][1]
                    rows = set().union(*(_rows_read(op.window, y, hw[i][0]) for y in range(*call.rows)))
                    assert rows <= set(range(lo, hi)) and set(range(lo, hi)) <= set(ring[i]), (call, i, ring[i])
                    assert ring[i][0] == in_lo  # where the kernel's input pointer is computed from
            new = list(range(*call.rows))
            assert not set(new) & computed[t], f"rows {set(new) & computed[t]} of {t} computed twice"
            computed[t] |= set(new)
            if t == s:
                assert call.rows == (st.r, st.r + 1)
                continue
            before = ring[t][0] if ring[t] else None
            ring[t] = [y for y in ring[t] if y >= call.lo]  # the shift: rows no later call reads
            assert ring[t] == list(range(call.lo, call.rows[0])), (t, call, ring[t])
            assert call.drop is None or before is None or call.drop == call.lo - before
            ring[t] += new
            assert len(ring[t]) <= cap[t], (t, st.r, len(ring[t]), cap[t])
    assert computed[s] == set(range(hw[s][0]))


def test_rings_hold_every_row_read_and_no_row_is_computed_twice():
    rng = random.Random(20)
    for _ in range(300):
        ops, hw = _random_stage(rng)
        q = rng.randrange(1, min(4, hw[ops[-1].output][1]) + 1)
        tiles = rolling.plan(ops, hw, "x", q)
        assert [t.cols for t in tiles] == geo.split(hw[ops[-1].output][1], q)
        for tp in tiles:
            _simulate(ops, hw, tp)


def test_a_ring_one_row_too_small_fails_the_simulation():
    rng = random.Random(3)
    failed = 0
    for _ in range(100):
        ops, hw = _random_stage(rng)
        tp = rolling.plan(ops, hw, "x", 1)[0]
        for t, c in tp.capacity.items():
            if c > 0:
                with pytest.raises(AssertionError):
                    _simulate(ops, hw, tp, shrink=t)
                failed += 1
    assert failed > 100


def test_interior_steps_repeat_and_rows_are_never_recomputed():
    """MobileNetV2's first block shape: a 3x3 stride-2 conv, a depthwise, 1x1s: every interior step has the
    same shape, and the ops compute each row of their output once (MACs = the unsplit op's along H)."""
    w3 = geo.Window(3, 3, 2, 2, 1, 1, 0, 0)
    dw = geo.Window(3, 3, 1, 1, 1, 1, 1, 1)
    one = geo.Window(1, 1, 1, 1, 1, 1, 0, 0)
    ops = [geo.StageOp(("x",), "a", w3), geo.StageOp(("a",), "b", dw), geo.StageOp(("b",), "c", one)]
    hw = {"x": (33, 33), "a": (16, 16), "b": (16, 16), "c": (16, 16)}
    tp = rolling.plan(ops, hw, "x", 1)[0]
    rows = {k: sum(c.rows[1] - c.rows[0] for st in tp.steps for c in st.calls if c.op == k) for k in range(3)}
    assert rows == {0: 16, 1: 16, 2: 16}
    shapes = {tuple((c.op, c.rows[0] - c.lo, c.drop, c.pad, tuple(b - a for a, b in c.reads),
                     tuple(a - lo for (a, _b), lo in zip(c.reads, c.in_lo))) for c in st.calls)
              for st in tp.steps[2:-2]}  # fmt: skip
    assert len(shapes) == 1
    # x: the 3x3 stride-2 conv reads 3 rows (2 new ones a row); a: the depthwise reads 3; b: the 1x1 reads 1
    assert tp.capacity == {"x": 3, "a": 3, "b": 1}


# -- the rolling stage kernel, run: host (ASan/UBSan) and QEMU, against TFLite Micro ---------------------

import json  # noqa: E402
import shutil  # noqa: E402

import numpy as np  # noqa: E402

from edgemem import build_info, device_run, pipeline  # noqa: E402
from edgemem.passes import patches as pp  # noqa: E402
from edgemem.passes import rolling as pr  # noqa: E402
from edgemem.reference import seeded_inputs, tflm_outputs  # noqa: E402
from edgemem.target.host import HOST_COMPILERS, build_host, run_host  # noqa: E402
from test_patches import cnn_model  # noqa: E402

PASSES = ("fold_pad", "patches", "inplace_depthwise", "inplace_overlap", "inplace_elementwise", "concat_inplace")
CC = next((cc for cc in HOST_COMPILERS if shutil.which(cc)), None)


def _force_rolling(monkeypatch, split: int | None, q: int):
    """The patch pass sees only the rolling candidate (split, q) (any MAC overhead: small test images make
    column halos expensive); it still keeps it only below the unsplit arena."""

    def only(mod, *_a, **_k):
        return [c for c in pr.candidates(mod, 10.0) if c.grid[1] == q and (split is None or c.split == split)][:1]

    monkeypatch.setattr(pp, "candidates", only)


def _build(path, out, **kw):
    return pipeline.build(path, "stm32f746", out, pipeline.BuildOptions(passes=PASSES, overwrite=True, **kw))


def _host_outputs(out, path, seed, tmp):
    info = json.loads((out / build_info.BUILD_INFO).read_text())
    exe = build_host(out, tmp, cc=CC, sanitize=True)
    x = seeded_inputs(path, seed)
    run = run_host(exe, [a.tobytes() for a in x], [o["bytes"] for o in info["outputs"]])
    assert run.stderr == "", run.stderr
    got = [np.frombuffer(r, dtype=o["dtype"]).reshape(o["shape"]) for r, o in zip(run.outputs, info["outputs"])]
    return got, tflm_outputs(path, x)


@pytest.mark.skipif(CC is None, reason="no host C compiler")
@pytest.mark.parametrize("model,split,q", [
    ((40, 21, 16, 2, True), 3, 3),  # S is the residual ADD's output: its skip input read through a column copy
    ((21, 19, 16, 3, True), 5, 4),
    ((21, 19, 16, 3, True), 4, 1),
])  # fmt: skip
def test_rolling_stage_bit_exact_on_the_host(tmp_path, monkeypatch, model, split, q):
    """CNNs of other sizes (odd sizes: the border steps differ), rolled after several cuts with 1 to 4 column
    tiles, built with -Werror and run under ASan/UBSan: TFLM's outputs bit for bit."""
    h, w, c, seed, residual = model
    path = tmp_path / "m.tflite"
    path.write_bytes(cnn_model(h, w, c, seed, residual=residual))
    _force_rolling(monkeypatch, split, q)
    result = _build(path, tmp_path / "r", compile=False)  # the pass keeps it only below the unsplit arena
    assert [op.kind for op in result.graph.ops].count(pr.KIND) == 1
    got, want = _host_outputs(tmp_path / "r", path, 0, tmp_path / "h")
    assert all(np.array_equal(g, w) for g, w in zip(got, want))


@pytest.mark.skipif(CC is None, reason="no host C compiler")
def test_control_a_ring_one_row_too_small_is_wrong(tmp_path, monkeypatch):
    """The first intermediate tensor's ring one row short: its producer's newest row lands in the next ring
    (or the previous row is gone), and the outputs differ from TFLM."""
    path = tmp_path / "m.tflite"
    path.write_bytes(cnn_model(21, 19, 16, 3))
    plan = rolling.tile_plan

    def short(ops, hw, x, cols):
        tp = plan(ops, hw, x, cols)
        first = ops[0].output
        if first in tp.capacity:  # (a stage of one op has no ring but the input's)
            tp.capacity = {**tp.capacity, first: tp.capacity[first] - 1}
        return tp

    monkeypatch.setattr(rolling, "tile_plan", short)
    _force_rolling(monkeypatch, 4, 1)
    _build(path, tmp_path / "r", compile=False)
    got, want = _host_outputs(tmp_path / "r", path, 0, tmp_path / "h")
    assert not all(np.array_equal(g, w) for g, w in zip(got, want))


def test_qemu_bit_exact_and_high_water_is_the_plan(tmp_path, monkeypatch):
    """Under QEMU (the board's arena): bit-exact with TFLM, and the measured arena high-water mark equals the
    plan (the rings are the stage kernel's workspace, placed by the planner)."""
    path = tmp_path / "m.tflite"
    path.write_bytes(cnn_model(33, 31, 16))
    _force_rolling(monkeypatch, None, 2)
    result = _build(path, tmp_path / "r", compile=True)
    assert any(op.kind == pr.KIND for op in result.graph.ops)
    res = device_run.run(tmp_path / "r", seed=0)
    assert res["bit_exact"]
    assert res["arena_high_water_bytes"] == result.info["arena_bytes"]


def nchw_model(h: int, w: int, c: int, seed: int) -> bytes:
    """An NCHW int8 input read through a TRANSPOSE (as tflm_xtensa_mobilenet_v2_224_int8), then conv3x3 s2 ->
    dw3x3 -> conv1x1 -> dw3x3 s2 -> conv1x1 -> conv3x3."""
    from test_patches import _Q, _conv, mm

    rng = np.random.default_rng(seed)
    mb = mm.ModelBuilder(description="edgemem rolling test")
    x = mb.tensor("x", (1, 3, h, w), np.int8, _Q)
    perm = mb.const("perm", np.array([0, 2, 3, 1], np.int32))
    t = mb.tensor("t", (1, h, w, 3), np.int8, _Q)
    mb.op(mm.OP.TRANSPOSE, [x, perm], [t])
    h2, w2 = -(-h // 2), -(-w // 2)
    h4, w4 = -(-h2 // 2), -(-w2 // 2)
    a = _conv(mb, rng, "a", t, 3, c, 3, 2, (1, h2, w2, c))
    b = _conv(mb, rng, "b", a, c, c, 3, 1, (1, h2, w2, c), depthwise=True)
    d = _conv(mb, rng, "c", b, c, c, 1, 1, (1, h2, w2, c))
    e = _conv(mb, rng, "e", d, c, c, 3, 2, (1, h4, w4, c), depthwise=True)
    f = _conv(mb, rng, "f", e, c, 2 * c, 1, 1, (1, h4, w4, 2 * c))
    g = _conv(mb, rng, "g", f, 2 * c, 4, 3, 1, (1, h4, w4, 4))
    return mb.serialize([x], [g])


@pytest.mark.skipif(CC is None, reason="no host C compiler")
def test_nchw_input_transposed_by_the_row_copies(tmp_path, monkeypatch):
    """The stage's leading TRANSPOSE of an NCHW input is folded into the rolling kernel's row copies."""
    path = tmp_path / "m.tflite"
    path.write_bytes(nchw_model(27, 25, 16, 5))
    _force_rolling(monkeypatch, 4, 2)
    result = _build(path, tmp_path / "r", compile=False)
    assert [op.kind for op in result.graph.ops][:1] == [pr.KIND]  # the TRANSPOSE is inside it
    got, want = _host_outputs(tmp_path / "r", path, 0, tmp_path / "h")
    assert all(np.array_equal(g, w) for g, w in zip(got, want))


def test_macs_count_what_the_stage_computes(tmp_path):
    """One column tile: exactly the unsplit stage's MACs (no row is recomputed); more tiles: more (the column
    halos), never less."""
    from test_patches import _lowered

    from edgemem.ir.graph import read_graph

    path = tmp_path / "m.tflite"
    path.write_bytes(cnn_model(33, 31, 16))
    mod = _lowered(path)
    graph = read_graph(mod)
    for stage in pp.stages(mod):
        whole = sum(op.macs for op in graph.ops[: stage.split + 1])
        macs = [pr.layout(graph, stage, q).macs for q in (1, 2, 3, 4)]
        assert macs[0] == whole and macs == sorted(macs), (stage.split, whole, macs)
