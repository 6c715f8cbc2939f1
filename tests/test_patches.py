"""Patch-based execution (issue 20, passes/patches.py; geometry in memory/patches.py).

Oracles: a brute-force enumeration of the input pixels each output pixel reads (the geometry); TFLite Micro
(the patched modules' outputs, run by the Relax VM on the host for many grids and by the firmware under QEMU
for one); the unsplit module's planned arena (the pass never returns a split above it). The control: a patch
whose input box is one row too small computes a wrong output.
"""

from __future__ import annotations

import itertools
import random

import numpy as np
import pytest
from relax_vm import run as vm_run

from edgemem import device_run, pipeline
from edgemem.memory import patches as geo
from edgemem.passes import patches as pp
from edgemem.passes.catalogue import evaluate
from edgemem.reference import seeded_inputs, tflm_outputs
from small_models import _Q, mm

# -- geometry against brute force -----------------------------------------------------------------------


def _reads(w: geo.Window, box, hw):
    """Every (row, col) of the input some output pixel in ``box`` reads (taps inside the tensor only)."""
    out = set()
    for i in range(box[0], box[1]):
        for j in range(box[2], box[3]):
            for r in range(w.kh):
                for s in range(w.kw):
                    y, x = i * w.sh - w.pt + r * w.dh, j * w.sw - w.pl + s * w.dw
                    if 0 <= y < hw[0] and 0 <= x < hw[1]:
                        out.add((y, x))
    return out


def test_needed_box_and_patch_padding_match_brute_force():
    rng = random.Random(7)
    for _ in range(400):
        k, s, d = rng.choice([1, 3, 5]), rng.choice([1, 2]), rng.choice([1, 1, 2])
        pt, pl = rng.randrange(0, (k - 1) * d + 1), rng.randrange(0, (k - 1) * d + 1)
        ho, wo = rng.randrange(1, 9), rng.randrange(1, 9)
        w = geo.Window(k, k, s, s, d, d, pt, pl)
        hw = (max(1, (ho - 1) * s - pt + 1 + rng.randrange(0, (k - 1) * d + 1)),) * 2
        r0 = rng.randrange(0, ho)
        c0 = rng.randrange(0, wo)
        box = (r0, rng.randrange(r0 + 1, ho + 1), c0, rng.randrange(c0 + 1, wo + 1))
        reads = _reads(w, box, hw)
        need = geo.needed(w, box, hw)
        if reads:  # the box is the bounding box of what is read (with dilation it may hold rows between taps)
            rows, cols = [y for y, _ in reads], [x for _, x in reads]
            tight = (min(rows), max(rows) + 1, min(cols), max(cols) + 1)
            if d == 1:
                assert need == tight, (w, box, hw)
            assert need[0] <= tight[0] and need[1] >= tight[1] and need[2] <= tight[2] and need[3] >= tight[3]
            assert 0 <= need[0] and need[1] <= hw[0] and 0 <= need[2] and need[3] <= hw[1]
        top, left, bottom, right = geo.patch_pad(w, box, need)
        # the patch kernel's tap (i, r) reads patch row i*s - top + r*d: the same pixel as the whole op's,
        # and it falls outside the patch exactly where the whole op's tap falls outside the tensor
        for i in range(box[1] - box[0]):
            for r in range(k):
                local = i * s - top + r * d
                absolute = (box[0] + i) * s - pt + r * d
                assert local + need[0] == absolute
                assert (0 <= local < need[1] - need[0]) == (0 <= absolute < hw[0])
        assert min(top, left, bottom, right) >= 0


def test_grid_tiles_cover_the_tensor_once():
    for h, w, p, q in itertools.product((1, 5, 7, 12), (3, 8, 11), (1, 2, 3, 4), (1, 3, 4)):
        if p > h or q > w:
            continue
        seen = np.zeros((h, w), int)
        for band in geo.grid(h, w, p, q):
            for r0, r1, c0, c1 in band:
                assert r1 > r0 and c1 > c0
                seen[r0:r1, c0:c1] += 1
        assert (seen == 1).all()


# -- small CNNs (flatbuffer builder) ----------------------------------------------------------------------


def _conv(mb, rng, name, x, c_in, c_out, k, stride, out_shape, depthwise=False, padding=mm.PAD.SAME, act=mm.ACT.RELU):
    if depthwise:
        w = rng.integers(-127, 128, (1, k, k, c_out)).astype(np.int8)
    else:
        w = rng.integers(-127, 128, (c_out, k, k, c_in)).astype(np.int8)
    ws = (np.full(c_out, 0.004) * rng.uniform(0.5, 1.5, c_out)).astype(np.float32)
    wt = mb.const(f"{name}/w", w, mm.qparams(ws, 0, 3 if depthwise else 0))
    b = mb.const(f"{name}/b", rng.integers(-2000, 2000, c_out).astype(np.int32),
                 mm.qparams(ws * np.float32(_Q["scale"][0]), 0, 0))  # fmt: skip
    y = mb.tensor(name, out_shape, np.int8, _Q)
    if depthwise:
        mb.op(mm.OP.DEPTHWISE_CONV_2D, [x, wt, b], [y], *mm.depthwise_options(stride, padding, act), version=3)
    else:
        mb.op(mm.OP.CONV_2D, [x, wt, b], [y], *mm.conv2d_options(stride, padding, act), version=3)
    return y


def cnn_model(h: int = 13, w: int = 11, c: int = 8, seed: int = 0, residual: bool = True, float_input: bool = False,
              pad: bool = False, uint8_input: bool = False) -> bytes:
    """x -> conv3x3 s2 -> dw3x3 -> conv1x1 (+ the s2 conv's output: a residual ADD) -> dw3x3 s2 -> conv1x1 ->
    conv3x3 (after any split) -> out. Odd sizes, so border patches differ from interior ones. ``float_input``:
    a float32 x and a QUANTIZE first (as tinyengine_mcunet_vww); ``uint8_input``: a uint8 x and a QUANTIZE
    first (as a camera model, e.g. openmv_palm_detection), with another scale (a real requantize). ``pad``: the dw3x3 s2 as an explicit PAD
    then a VALID depthwise convolution (as MobileNetV2-224's stride-2 blocks)."""
    rng = np.random.default_rng(seed)
    mb = mm.ModelBuilder(description="edgemem patches test")
    x = mb.tensor("x", (1, h, w, 3), np.int8, _Q)
    model_input = x
    if float_input:
        model_input = mb.tensor("xf", (1, h, w, 3), np.float32)
        mb.op(mm.OP.QUANTIZE, [model_input], [x])
    elif uint8_input:
        model_input = mb.tensor("xu", (1, h, w, 3), np.uint8, mm.qparams([0.03], [120]))
        mb.op(mm.OP.QUANTIZE, [model_input], [x])
    h2, w2 = -(-h // 2), -(-w // 2)
    h4, w4 = -(-h2 // 2), -(-w2 // 2)
    a = _conv(mb, rng, "a", x, 3, c, 3, 2, (1, h2, w2, c))
    b = _conv(mb, rng, "b", a, c, c, 3, 1, (1, h2, w2, c), depthwise=True)
    d = _conv(mb, rng, "c", b, c, c, 1, 1, (1, h2, w2, c))
    if residual:
        s = mb.tensor("add", (1, h2, w2, c), np.int8, _Q)
        mb.op(mm.OP.ADD, [a, d], [s], *mm.add_options(mm.ACT.NONE), version=2)
        d = s
    if pad:  # SAME for stride 2: (k - 1) - (size - 1) % 2 rows/columns of padding, the larger half after
        pr, pc = 2 - (h2 - 1) % 2, 2 - (w2 - 1) % 2
        padded = mb.tensor("padded", (1, h2 + pr, w2 + pc, c), np.int8, _Q)
        pads = mb.const("pads", np.array([[0, 0], [pr // 2, pr - pr // 2], [pc // 2, pc - pc // 2], [0, 0]], np.int32))
        mb.op(mm.OP.PAD, [d, pads], [padded])
        e = _conv(mb, rng, "e", padded, c, c, 3, 2, (1, h4, w4, c), depthwise=True, padding=mm.PAD.VALID)
    else:
        e = _conv(mb, rng, "e", d, c, c, 3, 2, (1, h4, w4, c), depthwise=True)
    f = _conv(mb, rng, "f", e, c, 2 * c, 1, 1, (1, h4, w4, 2 * c))
    g = _conv(mb, rng, "g", f, 2 * c, 4, 3, 1, (1, h4, w4, 4))
    return mb.serialize([model_input], [g])


def _prelu(mb, rng, name, x, alpha_shape, shape):
    """PRELU with a constant int8 alpha broadcast over H and W (as the converter writes Keras' PReLU with
    shared_axes=[1, 2]), alphas of both signs."""
    alpha = rng.integers(-128, 128, alpha_shape).astype(np.int8)
    a = mb.const(f"{name}/alpha", alpha, mm.qparams([0.01], [5]))
    y = mb.tensor(name, shape, np.int8, _Q)
    mb.op(mm.OP.PRELU, [x, a], [y])
    return y


def prelu_model(h: int = 40, w: int = 36, c: int = 16, seed: int = 0) -> bytes:
    """x -> conv3x3 s2 -> PRELU (alpha [1, 1, C]) -> dw3x3 -> conv1x1 (+ the PRELU's output) -> PRELU (alpha
    [C]) -> dw3x3 s2 -> conv1x1 -> conv3x3 -> out (as palm detection's first blocks; convolutions before a
    PRELU without activation, so both of its branches are taken)."""
    rng = np.random.default_rng(seed)
    mb = mm.ModelBuilder(description="edgemem patches PRELU test")
    x = mb.tensor("x", (1, h, w, 3), np.int8, _Q)
    h2, w2 = -(-h // 2), -(-w // 2)
    h4, w4 = -(-h2 // 2), -(-w2 // 2)
    a = _conv(mb, rng, "a", x, 3, c, 3, 2, (1, h2, w2, c), act=mm.ACT.NONE)
    pa = _prelu(mb, rng, "pa", a, (1, 1, c), (1, h2, w2, c))
    b = _conv(mb, rng, "b", pa, c, c, 3, 1, (1, h2, w2, c), depthwise=True)
    d = _conv(mb, rng, "c", b, c, c, 1, 1, (1, h2, w2, c), act=mm.ACT.NONE)
    s = mb.tensor("add", (1, h2, w2, c), np.int8, _Q)
    mb.op(mm.OP.ADD, [pa, d], [s], *mm.add_options(mm.ACT.NONE), version=2)
    ps = _prelu(mb, rng, "ps", s, (c,), (1, h2, w2, c))
    e = _conv(mb, rng, "e", ps, c, c, 3, 2, (1, h4, w4, c), depthwise=True)
    f = _conv(mb, rng, "f", e, c, 2 * c, 1, 1, (1, h4, w4, 2 * c))
    g = _conv(mb, rng, "g", f, 2 * c, 4, 3, 1, (1, h4, w4, 4))
    return mb.serialize([x], [g])


def downsample_model(h: int = 25, w: int = 21, c: int = 8, seed: int = 0) -> bytes:
    """Palm detection's downsampling block: x -> conv3x3 -> PRELU -> [dw3x3 s2 -> conv1x1 to 2C] + [MAX_POOL 2x2 s2
    -> PAD the channels to 2C] -> ADD -> PRELU -> conv3x3 -> out. SAME pooling on odd sizes: the bottom and right
    windows are cut at the tensor's end (a patch's window is cut at its box's end only there)."""
    rng = np.random.default_rng(seed)
    mb = mm.ModelBuilder(description="edgemem patches downsampling test")
    x = mb.tensor("x", (1, h, w, 3), np.int8, _Q)
    h2, w2 = -(-h // 2), -(-w // 2)
    a = _conv(mb, rng, "a", x, 3, c, 3, 1, (1, h, w, c), act=mm.ACT.NONE)
    pa = _prelu(mb, rng, "pa", a, (1, 1, c), (1, h, w, c))
    b = _conv(mb, rng, "b", pa, c, c, 3, 2, (1, h2, w2, c), depthwise=True)
    d = _conv(mb, rng, "d", b, c, 2 * c, 1, 1, (1, h2, w2, 2 * c), act=mm.ACT.NONE)
    m = mb.tensor("pool", (1, h2, w2, c), np.int8, _Q)
    mb.op(mm.OP.MAX_POOL_2D, [pa], [m], *mm.pool2d_options((2, 2), 2, mm.PAD.SAME))
    padded = mb.tensor("padded", (1, h2, w2, 2 * c), np.int8, _Q)
    pads = mb.const("pads", np.array([[0, 0], [0, 0], [0, 0], [0, c]], np.int32))
    mb.op(mm.OP.PAD, [m, pads], [padded])
    s = mb.tensor("add", (1, h2, w2, 2 * c), np.int8, _Q)
    mb.op(mm.OP.ADD, [padded, d], [s], *mm.add_options(mm.ACT.NONE), version=2)
    ps = _prelu(mb, rng, "ps", s, (1, 1, 2 * c), (1, h2, w2, 2 * c))
    g = _conv(mb, rng, "g", ps, 2 * c, 4, 3, 1, (1, h2, w2, 4))
    return mb.serialize([x], [g])


def _lowered(path, outside: bool = False):
    from edgemem.frontend.tflite_import import import_tflite
    from edgemem.ir import outside as out
    from edgemem.passes.lower import lower_to_kernels
    from edgemem.passes.optimize import run_passes

    m = import_tflite(path)
    mod = lower_to_kernels(m.relax_mod, m.op_labels)
    mod = out.mark(mod) if outside else mod
    return run_passes(mod, ("fold_pad",))[0]


@pytest.fixture(scope="module")
def cnn(tmp_path_factory):
    path = tmp_path_factory.mktemp("patches") / "cnn.tflite"
    path.write_bytes(cnn_model())
    mod = _lowered(path)
    inputs = [seeded_inputs(path, s) for s in (0, 1)]
    return path, mod, inputs, [tflm_outputs(path, x) for x in inputs]


def test_float_input_quantize_reads_the_input_in_place(tmp_path):
    """A float input's QUANTIZE in the stage: each patch quantizes its box of the caller's buffer directly
    (no float copy of the box); bit-exact with TFLM."""
    path = tmp_path / "f.tflite"
    path.write_bytes(cnn_model(11, 9, 4, seed=3, float_input=True))
    mod = _lowered(path, outside=True)
    new = pp.apply(mod, _cand(mod, 4, (2, 2)))
    from edgemem.ir.graph import read_graph

    assert not any(op.kind == "STRIDED_SLICE" and op.inputs[0] == "xf" for op in read_graph(new).ops)
    x = seeded_inputs(path, 0)
    assert all(np.array_equal(g, e) for g, e in zip(vm_run(new, x), tflm_outputs(path, x)))


def _cand(mod, split, grid):
    stage = next(s for s in pp.stages(mod) if s.split == split)
    return pp.Candidate(split, stage.tensor, grid, 0, 0, 0, 0)


def test_stages_stop_at_the_first_non_patchable_cut(cnn):
    _, mod, _, _ = cnn
    # ops: conv s2, dw, conv1x1, ADD, dw s2, conv1x1, conv3x3: cuts after every op but those inside the residual
    # block (a and b are read after them), and never the model output
    assert [s.split for s in pp.stages(mod)] == [0, 3, 4, 5]


@pytest.mark.parametrize("split,grid", [(3, (1, 3)), (3, (4, 1)), (3, (3, 3)), (5, (2, 3)), (0, (2, 2))])
def test_patched_module_bit_exact_with_tflm(cnn, split, grid):
    _, mod, inputs, expected = cnn
    new = pp.apply(mod, _cand(mod, split, grid))
    for x, want in zip(inputs, expected):
        got = vm_run(new, x)
        assert all(np.array_equal(g, e) for g, e in zip(got, want)), (split, grid)


def test_control_one_row_too_few_is_wrong(cnn, monkeypatch):
    """The stage input's box one row short at an interior tile edge: the patch kernels then pad where the
    whole operator read real data, and the result differs from TFLM."""
    _, mod, inputs, expected = cnn
    regions = geo.regions

    def short(ops, tile, hw):
        boxes, wants = regions(ops, tile, hw)
        x = ops[0].inputs[0]
        r0, r1, c0, c1 = boxes[x]
        if r1 < hw[x][0]:  # not at the tensor's end: drop the last halo row
            boxes[x] = (r0, r1 - 1, c0, c1)
            wants = {k: (v if k[1] != x else (v[0], v[1] - 1, v[2], v[3])) for k, v in wants.items()}
        return boxes, wants

    monkeypatch.setattr(pp, "regions", short)
    new = pp.apply(mod, _cand(mod, 3, (2, 1)))
    got = vm_run(new, inputs[0])
    assert not all(np.array_equal(g, e) for g, e in zip(got, expected[0]))


def _random_cnn(tmp_path, seed):
    rng = random.Random(seed)
    path = tmp_path / f"r{seed}.tflite"
    path.write_bytes(cnn_model(rng.randrange(6, 24), rng.randrange(6, 24), rng.choice([4, 8, 16]), seed,
                               residual=rng.random() < 0.5))  # fmt: skip
    return path


@pytest.mark.parametrize("outside", [False, True])
def test_never_a_split_above_the_unsplit_arena(tmp_path, outside):
    """Every candidate's planned arena is below the unsplit module's (tinyengine #104: a badly chosen split
    raises the peak), and the pass, which confirms its choice after the in-place passes, never raises it."""
    for seed in range(3):
        mod = _lowered(_random_cnn(tmp_path, seed + 10 * outside), outside)
        base = evaluate(mod)["arena_bytes"]
        found = pp.candidates(mod, 0.5, keep_all=True)
        assert found and all(c.base_arena == base for c in found)
        assert any(c.rolling for c in found) and any(not c.rolling for c in found)  # both kinds (passes/rolling.py)
        kept = pp.candidates(mod, 0.5)
        assert all(c.arena < base for c in kept)
        assert {(c.split, c.grid) for c in kept} == {(c.split, c.grid) for c in found if c.arena < base}
        if seed == 0:
            new = pp.patches(mod, 0.5)
            assert evaluate(new)["arena_bytes"] <= base
            assert pp._finished(new) <= pp._finished(mod)


def test_qemu_bit_exact_and_below_the_unsplit_arena(tmp_path):
    """The whole pipeline with --input outside: patches then the in-place passes, under QEMU."""
    path = tmp_path / "cnn.tflite"
    path.write_bytes(cnn_model(33, 31, 16))
    passes = ("fold_pad", "patches", "inplace_depthwise", "inplace_overlap", "inplace_elementwise", "concat_inplace")
    whole = pipeline.build(path, "stm32f746", tmp_path / "w", pipeline.BuildOptions(
        passes=passes[:1] + passes[2:], input_outside=True, compile=False, overwrite=True))  # fmt: skip
    result = pipeline.build(path, "stm32f746", tmp_path / "p", pipeline.BuildOptions(
        passes=passes, input_outside=True, compile=True, overwrite=True))  # fmt: skip
    assert any(op.name.startswith(("em_k_patch", "em_k_roll")) for op in result.graph.ops)
    assert result.info["arena_bytes"] < whole.info["arena_bytes"]
    res = device_run.run(tmp_path / "p", seed=0)
    assert res["bit_exact"]
    assert res["arena_high_water_bytes"] == result.info["arena_bytes"]


def _patch_kernels(mod) -> list[str]:
    """The split as the kernel symbols name it (``em_k_patch<split>_s<...>_<grid>``, ``em_k_roll...``)."""
    from edgemem.ir.graph import read_graph

    return sorted(op.name for op in read_graph(mod).ops if op.name.startswith(("em_k_patch", "em_k_roll")))


def test_the_order_of_passes_never_decides_the_split(tmp_path):
    """Issue 33: `patches` before fold_pad (an unfolded PAD ended the stage) or after inplace_residual (a fused
    residual ends it) left the model unsplit; wherever `patches` stands in --passes, the module is the expert
    order's (the same program: the same split, the same kernels). Its outputs are checked under QEMU by
    test_qemu_bit_exact_and_below_the_unsplit_arena (a rolling stage's C kernel does not run in the Relax VM)."""
    from edgemem.ir import outside as out
    from edgemem.frontend.tflite_import import import_tflite
    from edgemem.passes.lower import lower_to_kernels
    from edgemem.passes.optimize import run_passes
    from edgemem.passes.orchestrate import module_key

    path = tmp_path / "cnn_pad.tflite"
    path.write_bytes(cnn_model(33, 31, 16, pad=True))
    m = import_tflite(path)
    mod = out.mark(lower_to_kernels(m.relax_mod, m.op_labels))
    expert = ("fold_pad", "patches", *pp.FINISH)
    done = {order: run_passes(mod, order)[0] for order in (expert, ("patches", "fold_pad", *pp.FINISH),
                                                           ("fold_pad", *pp.FINISH, "patches"))}  # fmt: skip
    assert _patch_kernels(done[expert]), "the expert order splits this model"
    assert len({module_key(new) for new in done.values()}) == 1, {o: _patch_kernels(n) for o, n in done.items()}


def test_prelu_with_a_broadcast_alpha_stays_in_the_patch_stage(tmp_path):
    """Issue 31 (palm detection): PRELU's alpha [1, 1, C] or [C] has not the output's shape, and the patch stage
    used to end at the first PRELU, leaving the early tensors whole. Now the stage runs through both PRELUs: a
    grid of patches is bit-exact with TFLM in the Relax VM, and the default build (a RAM budget the whole-tensor
    plan misses) runs the stage as rolling rows, below the whole-tensor plan and bit-exact with TFLM on the host."""
    from op_check import compare_built

    path = tmp_path / "prelu.tflite"
    path.write_bytes(prelu_model())
    mod = _lowered(path)
    # ops: conv s2, PRELU, dw, conv1x1, ADD, PRELU, dw s2, conv1x1, conv3x3: cuts before and after the residual block
    assert [s.split for s in pp.stages(mod)] == [0, 1, 4, 5, 6, 7]
    x = seeded_inputs(path, 0)
    want = tflm_outputs(path, x)
    new = pp.apply(mod, _cand(mod, 6, (2, 3)))
    assert all(np.array_equal(g, e) for g, e in zip(vm_run(new, x), want))

    whole = pipeline.build(path, "stm32f746", tmp_path / "w", pipeline.BuildOptions(
        passes=("fold_pad", *pp.FINISH), compile=False, overwrite=True))  # fmt: skip
    assert whole.info["arena_bytes"] == 11520  # the residual block's three 20x18x16 tensors, less what runs in place
    result = pipeline.build(path, "stm32f746", tmp_path / "p", pipeline.BuildOptions(
        ram=16384 + 10240, compile=False, overwrite=True))  # fmt: skip
    assert [op.name for op in result.graph.ops if op.name.startswith(("em_k_patch", "em_k_roll"))] == ["em_k_roll1_s6_q1"]
    assert result.info["arena_bytes"] == 8964
    compare_built(path, tmp_path / "p", tmp_path)


def test_a_constant_operand_of_the_output_shape_ends_the_stage(tmp_path):
    """An ADD of a constant with the output's own H and W: a patch would need the constant's box, not all of it
    (the patched module failed to build: a patch-shaped kernel given the whole constant), so the stage ends
    before it; a broadcast constant (the PRELU test above) is the same for every patch and stays in."""
    rng = np.random.default_rng(0)
    mb = mm.ModelBuilder(description="edgemem patches full constant")
    x = mb.tensor("x", (1, 12, 10, 3), np.int8, _Q)
    a = _conv(mb, rng, "a", x, 3, 8, 3, 2, (1, 6, 5, 8), act=mm.ACT.NONE)
    k = mb.const("k", rng.integers(-128, 128, (1, 6, 5, 8)).astype(np.int8), mm.qparams([0.05], [-3]))
    s = mb.tensor("s", (1, 6, 5, 8), np.int8, _Q)
    mb.op(mm.OP.ADD, [a, k], [s], *mm.add_options(mm.ACT.NONE), version=2)
    b = _conv(mb, rng, "b", s, 8, 4, 3, 1, (1, 6, 5, 4))
    path = tmp_path / "full_constant.tflite"
    path.write_bytes(mb.serialize([x], [b]))
    assert [st.split for st in pp.stages(_lowered(path))] == [0]


def test_max_pool_and_a_channel_pad_stay_in_the_patch_stage(tmp_path):
    """Palm detection's downsampling block (a MAX_POOL beside the strided depthwise, its channels PADded to the
    conv's): the stage used to end before it, leaving the full-resolution tensor whole for both readers. Now the
    stage runs through to the block's ADD and PRELU: grids bit-exact with TFLM in the Relax VM, and the default
    build (a RAM budget the whole-tensor plan misses) runs it as a rolling stage, bit-exact on the host."""
    from op_check import compare_built

    path = tmp_path / "down.tflite"
    path.write_bytes(downsample_model())
    mod = _lowered(path)
    from edgemem.ir.graph import read_graph

    kinds = [op.kind for op in read_graph(mod).ops]
    last = len(kinds) - 2  # the PRELU before the last convolution
    assert kinds[last] == "PRELU" and "MAX_POOL_2D" in kinds[:last] and "PAD" in kinds[:last]
    assert last in [st.split for st in pp.stages(mod)]
    x = seeded_inputs(path, 0)
    want = tflm_outputs(path, x)
    for grid in ((2, 2), (3, 1), (1, 4)):
        new = pp.apply(mod, _cand(mod, last, grid))
        assert all(np.array_equal(g, e) for g, e in zip(vm_run(new, x), want)), grid

    whole = pipeline.build(path, "stm32f746", tmp_path / "w", pipeline.BuildOptions(
        passes=("fold_pad", *pp.FINISH), compile=False, overwrite=True))  # fmt: skip
    result = pipeline.build(path, "stm32f746", tmp_path / "p", pipeline.BuildOptions(
        ram=16384 + whole.info["arena_bytes"] * 3 // 4 // 32 * 32, compile=False, overwrite=True))  # fmt: skip
    assert any(op.name.startswith(f"em_k_patch1_s{last}_") for op in result.graph.ops)
    assert (whole.info["arena_bytes"], result.info["arena_bytes"]) == (8400, 4576)
    compare_built(path, tmp_path / "p", tmp_path)


def test_a_uint8_input_quantize_starts_a_rolling_stage(tmp_path):
    """A camera model (openmv_palm_detection: uint8 input, QUANTIZE to int8 first): a rolling stage used to
    need an int8 model input, so only recomputing grids were offered and none fit. Now the rolling stage starts
    at the QUANTIZE (its ring holds the input's bytes, no row recomputed): the default build under a RAM budget
    the whole-tensor plan misses runs ops 0..5 as one rolling kernel, below that plan, bit-exact with TFLM on
    the host (gcc -Werror, sanitizers)."""
    from op_check import compare_built

    path = tmp_path / "u8.tflite"
    path.write_bytes(cnn_model(32, 24, 16, seed=3, uint8_input=True))
    whole = pipeline.build(path, "stm32f746", tmp_path / "w", pipeline.BuildOptions(
        passes=("fold_pad", *pp.FINISH), compile=False, overwrite=True))  # fmt: skip
    assert whole.info["arena_bytes"] == 6144  # the residual block's 16x12x16 tensors, less what runs in place
    result = pipeline.build(path, "stm32f746", tmp_path / "p", pipeline.BuildOptions(
        ram=16384 + 5120, compile=False, overwrite=True))  # fmt: skip
    ops = [op.name for op in result.graph.ops]
    assert ops[0] == "em_k_roll1_s5_q1" and not any(op.kind == "QUANTIZE" for op in result.graph.ops), ops
    assert result.info["arena_bytes"] == 4896  # the uint8 input (2,304 B), S (768 B) and the rings
    compare_built(path, tmp_path / "p", tmp_path)
