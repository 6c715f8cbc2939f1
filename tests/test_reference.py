"""Tests of the oracle in edgemem.reference and of examples/make_example_model.py.

The oracle is TFLite Micro's Python interpreter.  To catch a wrong oracle
(wrong API use, wrong input order, stale buffers, ...) its outputs are
checked against

* an independent numpy re-implementation of TFLM's int8 integer arithmetic
  (QuantizeMultiplier + MultiplyByQuantizedMultiplier with double rounding)
  for FULLY_CONNECTED, CONV_2D and DEPTHWISE_CONV_2D one-op models, bit for bit;
* LiteRT with its reference kernels (``OpResolverType.BUILTIN_REF``) on one-op
  models, the example model and the real third-party models;
* the float numpy network of the example model (float32 variant).
"""

from __future__ import annotations

import importlib.util
import math
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from edgemem import reference as ref

REPO = Path(__file__).resolve().parents[1]
MODELS = Path(__file__).resolve().parents[2] / "shared" / "models"
EXAMPLE_SCRIPT = REPO / "examples" / "make_example_model.py"

pytest.importorskip("tflite_micro")


def _load_example_module():
    spec = importlib.util.spec_from_file_location("edgemem_make_example_model", EXAMPLE_SCRIPT)
    mod = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = mod
    spec.loader.exec_module(mod)
    return mod


mem = _load_example_module()
OP, ACT, PAD = mem.OP, mem.ACT, mem.PAD


@pytest.fixture(scope="module")
def example_int8(tmp_path_factory) -> Path:
    p = tmp_path_factory.mktemp("kws") / "kws_tiny_int8.tflite"
    p.write_bytes(mem.build_kws_tiny())
    return p


@pytest.fixture(scope="module")
def example_float(tmp_path_factory) -> Path:
    p = tmp_path_factory.mktemp("kws") / "kws_tiny_float.tflite"
    p.write_bytes(mem.build_kws_tiny(float_model=True))
    return p


def _write(tmp_path: Path, name: str, data: bytes) -> Path:
    p = tmp_path / name
    p.write_bytes(data)
    return p


# ---------------------------------------------------------------------------
# Independent numpy model of TFLM's int8 arithmetic
# (tensorflow/lite/kernels/internal/common.h + quantization_util.cc semantics,
#  written from the documented algorithm, no code taken from TFLM)
# ---------------------------------------------------------------------------


def quantize_multiplier(real: float) -> tuple[int, int]:
    """real ~= m * 2**(shift - 31) with m a Q31 int in [2**30, 2**31)."""
    if real == 0.0:
        return 0, 0
    q, shift = math.frexp(real)  # real = q * 2**shift, 0.5 <= q < 1
    m = int(math.floor(q * (1 << 31) + 0.5))  # round half away from zero (q > 0)
    if m == (1 << 31):
        m //= 2
        shift += 1
    if shift < -31:
        return 0, 0
    return m, shift


def _srdhm(a: np.ndarray, b: int) -> np.ndarray:
    """SaturatingRoundingDoublingHighMul on int64 arrays holding int32 values."""
    ab = a.astype(np.int64) * np.int64(b)
    nudge = np.where(ab >= 0, np.int64(1 << 30), np.int64(1 - (1 << 30)))
    s = ab + nudge
    # C integer division truncates toward zero
    q = np.where(s >= 0, s >> 31, -((-s) >> 31))
    if b == -(1 << 31):
        q = np.where(a == -(1 << 31), (1 << 31) - 1, q)
    return q


def _rounding_divide_by_pot(x: np.ndarray, exponent: int) -> np.ndarray:
    mask = np.int64((1 << exponent) - 1)
    remainder = x & mask
    threshold = (mask >> 1) + (x < 0).astype(np.int64)
    return (x >> exponent) + (remainder > threshold).astype(np.int64)


def multiply_by_quantized_multiplier(x: np.ndarray, m: int, shift: int) -> np.ndarray:
    left = shift if shift > 0 else 0
    right = 0 if shift > 0 else -shift
    return _rounding_divide_by_pot(_srdhm(x.astype(np.int64) * (1 << left), m), right)


def activation_range(act: int, scale: float, zp: int) -> tuple[int, int]:
    def q(f):  # zero_point + TfLiteRound(f / scale), computed in float32
        v = np.float32(f) / np.float32(scale)
        return zp + int(math.copysign(math.floor(abs(float(v)) + 0.5), float(v)))

    lo, hi = -128, 127
    if act == ACT.RELU:
        lo = max(lo, q(0.0))
    elif act == ACT.RELU6:
        lo, hi = max(lo, q(0.0)), min(hi, q(6.0))
    elif act == ACT.RELU_N1_TO_1:
        lo, hi = max(lo, q(-1.0)), min(hi, q(1.0))
    return lo, hi


def _requantize(acc, in_scale, w_scales, out_scale, out_zp, act):
    """Per output channel (last axis) requantization of int64 accumulators."""
    out = np.empty(acc.shape, np.int64)
    for c in range(acc.shape[-1]):
        real = float(np.float32(in_scale)) * float(np.float32(w_scales[c])) / float(np.float32(out_scale))
        m, s = quantize_multiplier(real)
        out[..., c] = multiply_by_quantized_multiplier(acc[..., c], m, s)
    lo, hi = activation_range(act, out_scale, out_zp)
    return np.clip(out + out_zp, lo, hi).astype(np.int8)


def np_fully_connected_int8(x, x_zp, w, bias, in_scale, w_scale, out_scale, out_zp, act):
    acc = (x.astype(np.int64) - x_zp) @ w.astype(np.int64).T + bias.astype(np.int64)
    return _requantize(acc, in_scale, [w_scale] * w.shape[0], out_scale, out_zp, act)


def np_conv2d_int8(x, x_zp, w, bias, in_scale, w_scales, out_scale, out_zp, act, stride, padding, depthwise):
    xs = x.astype(np.int64) - x_zp  # padded positions contribute 0
    n, h, wd, _ = x.shape
    kh, kw = w.shape[1], w.shape[2]
    if padding == PAD.SAME:
        oh, pt, pb = mem._same_pads(h, kh, stride)
        ow, pl, pr = mem._same_pads(wd, kw, stride)
    else:
        oh, ow, pt, pb, pl, pr = (h - kh) // stride + 1, (wd - kw) // stride + 1, 0, 0, 0, 0
    xp = np.pad(xs, ((0, 0), (pt, pb), (pl, pr), (0, 0)))
    cout = w.shape[3] if depthwise else w.shape[0]
    acc = np.zeros((n, oh, ow, cout), np.int64)
    w64 = w.astype(np.int64)
    for i in range(kh):
        for j in range(kw):
            patch = xp[:, i : i + stride * (oh - 1) + 1 : stride, j : j + stride * (ow - 1) + 1 : stride, :]
            if depthwise:
                acc += patch * w64[0, i, j, :]
            else:
                acc += np.einsum("nhwc,oc->nhwo", patch, w64[:, i, j, :])
    acc += bias.astype(np.int64)
    return _requantize(acc, in_scale, w_scales, out_scale, out_zp, act)


# ---------------------------------------------------------------------------
# One-op models
# ---------------------------------------------------------------------------


def _fc_case(seed: int):
    rng = np.random.default_rng(seed)
    batch, k, n = int(rng.integers(1, 9)), int(rng.integers(1, 40)), int(rng.integers(1, 12))
    in_scale = np.float32(rng.uniform(0.005, 0.2))
    in_zp = int(rng.integers(-128, 128))
    w = rng.integers(-127, 128, size=(n, k), dtype=np.int8)
    w_scale = np.float32(rng.uniform(1e-4, 2e-2))
    bias = rng.integers(-5000, 5000, size=n, dtype=np.int32)
    # output scale around the accumulator's spread so that results use the range
    out_scale = np.float32(in_scale * w_scale * rng.uniform(0.3, 3.0) * 127 * math.sqrt(k) / 8)
    out_zp = int(rng.integers(-60, 60))
    act = [ACT.NONE, ACT.RELU, ACT.RELU6][seed % 3]
    mb = mem.ModelBuilder(description="fc one-op")
    xi = mb.tensor("x", (batch, k), np.int8, mem.qparams(in_scale, in_zp))
    wi = mb.const("w", w, mem.qparams(w_scale, 0))
    bi = mb.const("b", bias, mem.qparams(np.float32(in_scale * w_scale), 0))
    yi = mb.tensor("y", (batch, n), np.int8, mem.qparams(out_scale, out_zp))
    mb.op(OP.FULLY_CONNECTED, [xi, wi, bi], [yi], *mem.fully_connected_options(act), version=4)
    data = mb.serialize([xi], [yi])
    expect = lambda x: np_fully_connected_int8(x, in_zp, w, bias, in_scale, w_scale, out_scale, out_zp, act)
    return data, expect


def _conv_case(seed: int, depthwise: bool):
    rng = np.random.default_rng(1000 + seed)
    h, wd = int(rng.integers(3, 12)), int(rng.integers(3, 12))
    cin = int(rng.integers(1, 6))
    cout = cin if depthwise else int(rng.integers(1, 8))
    k = int(rng.choice([1, 3, 5]))
    stride = int(rng.integers(1, 3))
    padding = [PAD.SAME, PAD.VALID][seed % 2] if min(h, wd) >= k else PAD.SAME
    act = [ACT.NONE, ACT.RELU, ACT.RELU6][seed % 3]
    in_scale = np.float32(rng.uniform(0.005, 0.1))
    in_zp = int(rng.integers(-128, 128))
    if depthwise:
        w = rng.integers(-127, 128, size=(1, k, k, cout), dtype=np.int8)
        axis = 3
    else:
        w = rng.integers(-127, 128, size=(cout, k, k, cin), dtype=np.int8)
        axis = 0
    w_scales = rng.uniform(1e-3, 2e-2, size=cout).astype(np.float32)
    bias = rng.integers(-3000, 3000, size=cout, dtype=np.int32)
    fan = k * k * (1 if depthwise else cin)
    out_scale = np.float32(in_scale * w_scales.mean() * 127 * math.sqrt(fan) / 16 * rng.uniform(0.5, 2))
    out_zp = int(rng.integers(-60, 60))
    if padding == PAD.SAME:
        oh, ow = -(-h // stride), -(-wd // stride)
    else:
        oh, ow = (h - k) // stride + 1, (wd - k) // stride + 1
    mb = mem.ModelBuilder(description="conv one-op")
    xi = mb.tensor("x", (1, h, wd, cin), np.int8, mem.qparams(in_scale, in_zp))
    wi = mb.const("w", w, mem.qparams(w_scales, 0, axis))
    bi = mb.const("b", bias, mem.qparams(in_scale * w_scales, 0, 0))
    yi = mb.tensor("y", (1, oh, ow, cout), np.int8, mem.qparams(out_scale, out_zp))
    if depthwise:
        mb.op(OP.DEPTHWISE_CONV_2D, [xi, wi, bi], [yi], *mem.depthwise_options(stride, padding, act), version=3)
    else:
        mb.op(OP.CONV_2D, [xi, wi, bi], [yi], *mem.conv2d_options(stride, padding, act), version=3)
    data = mb.serialize([xi], [yi])
    expect = lambda x: np_conv2d_int8(
        x, in_zp, w, bias, in_scale, w_scales, out_scale, out_zp, act, stride, padding, depthwise
    )
    return data, expect


def _pool_case(seed: int):
    rng = np.random.default_rng(2000 + seed)
    h, wd, c = int(rng.integers(2, 10)), int(rng.integers(2, 10)), int(rng.integers(1, 6))
    s, z = np.float32(rng.uniform(0.01, 0.1)), int(rng.integers(-128, 128))
    mb = mem.ModelBuilder(description="avgpool one-op")
    xi = mb.tensor("x", (1, h, wd, c), np.int8, mem.qparams(s, z))
    yi = mb.tensor("y", (1, 1, 1, c), np.int8, mem.qparams(s, z))
    mb.op(OP.AVERAGE_POOL_2D, [xi], [yi], *mem.pool2d_options((h, wd), 1, PAD.VALID), version=2)
    return mb.serialize([xi], [yi])


def _add_case(seed: int):
    rng = np.random.default_rng(3000 + seed)
    shape = (1, int(rng.integers(1, 6)), int(rng.integers(1, 6)), int(rng.integers(1, 9)))
    mb = mem.ModelBuilder(description="add one-op")
    q = lambda: mem.qparams(np.float32(rng.uniform(0.01, 0.2)), int(rng.integers(-128, 128)))
    a, b = mb.tensor("a", shape, np.int8, q()), mb.tensor("b", shape, np.int8, q())
    y = mb.tensor("y", shape, np.int8, q())
    mb.op(OP.ADD, [a, b], [y], *mem.add_options(ACT.NONE), version=2)
    return mb.serialize([a, b], [y])


def _litert_ref(model_path, inputs):
    li = pytest.importorskip("ai_edge_litert.interpreter")
    it = li.Interpreter(model_path=str(model_path), experimental_op_resolver_type=li.OpResolverType.BUILTIN_REF)
    it.allocate_tensors()
    # LiteRT lists inputs in the model's input order
    for d, x in zip(it.get_input_details(), inputs):
        it.set_tensor(d["index"], x)
    it.invoke()
    return [it.get_tensor(d["index"]).copy() for d in it.get_output_details()]


def _max_abs_diff(a, b):
    return max(int(np.abs(x.astype(np.int64) - y.astype(np.int64)).max()) for x, y in zip(a, b))


# ---------------------------------------------------------------------------
# (a) the oracle agrees with independent arithmetic
# ---------------------------------------------------------------------------


@pytest.mark.parametrize("seed", range(12))
def test_tflm_fully_connected_bit_exact_vs_numpy(tmp_path, seed):
    data, expect = _fc_case(seed)
    p = _write(tmp_path, "fc.tflite", data)
    for s in range(3):
        x = ref.seeded_inputs(p, s)
        (got,) = ref.tflm_outputs(p, x)
        np.testing.assert_array_equal(got, expect(x[0]))


@pytest.mark.parametrize("depthwise", [False, True], ids=["conv", "depthwise"])
@pytest.mark.parametrize("seed", range(8))
def test_tflm_conv_bit_exact_vs_numpy(tmp_path, seed, depthwise):
    data, expect = _conv_case(seed, depthwise)
    p = _write(tmp_path, "conv.tflite", data)
    x = ref.seeded_inputs(p, seed)
    (got,) = ref.tflm_outputs(p, x)
    np.testing.assert_array_equal(got, expect(x[0]))


def test_tflm_outputs_follow_the_inputs(tmp_path):
    """The oracle really feeds the given arrays (no stale or zeroed inputs)."""
    data, expect = _fc_case(3)
    p = _write(tmp_path, "fc.tflite", data)
    x = ref.seeded_inputs(p, 0)
    (got,) = ref.tflm_outputs(p, x)
    np.testing.assert_array_equal(got, expect(x[0]))
    x2 = ref.seeded_inputs(p, 1)
    (got2,) = ref.tflm_outputs(p, x2)
    np.testing.assert_array_equal(got2, expect(x2[0]))
    assert not np.array_equal(got2, got)


@pytest.mark.parametrize("seed", range(4))
def test_tflm_matches_litert_reference_on_one_op_models(tmp_path, seed):
    cases = {
        "conv": _conv_case(seed, False)[0],
        "dw": _conv_case(seed, True)[0],
        "pool": _pool_case(seed),
        "add": _add_case(seed),
    }
    for name, data in cases.items():
        p = _write(tmp_path, f"{name}.tflite", data)
        x = ref.seeded_inputs(p, seed)
        got, want = ref.tflm_outputs(p, x), _litert_ref(p, x)
        assert _max_abs_diff(got, want) == 0, name


def test_example_model_tflm_matches_litert(example_int8):
    for seed in range(5):
        x = ref.seeded_inputs(example_int8, seed)
        got, want = ref.tflm_outputs(example_int8, x), _litert_ref(example_int8, x)
        # exact in practice; FULLY_CONNECTED ties may differ by 1 LSB between runtimes
        assert _max_abs_diff(got, want) <= 1


def test_example_float_model_matches_numpy_network(example_float):
    weights = mem.make_float_weights(mem.DEFAULT_SEED)
    for seed in range(3):
        x = ref.seeded_inputs(example_float, seed)
        assert x[0].dtype == np.float32
        (got,) = ref.tflm_outputs(example_float, x)
        want = mem.float_forward(weights, x[0].astype(np.float64))["probs"]
        np.testing.assert_allclose(got, want, atol=2e-5)


def test_example_int8_model_tracks_float_model(example_int8, example_float):
    """Quantization sanity: on in-distribution inputs int8 ~ float probabilities."""
    interp = ref.tflm_interpreter(example_int8)
    qp = interp.get_input_details(0)["quantization_parameters"]
    s, z = float(qp["scales"][0]), int(qp["zero_points"][0])
    weights = mem.make_float_weights(mem.DEFAULT_SEED)
    xs = mem.calibration_inputs(mem.DEFAULT_SEED + 99, 8)
    for xf in xs:
        xq = np.clip(np.round(xf / s) + z, -128, 127).astype(np.int8)[None]
        (yq,) = ref.tflm_outputs(example_int8, [xq])
        probs_q = (yq.astype(np.float64) + 128) / 256
        probs_f = mem.float_forward(weights, ((xq.astype(np.float64) - z) * s))["probs"]
        assert np.abs(probs_q - probs_f).max() < 0.05


REAL_MODELS = [
    "mlperf_kws_dscnn_int8",
    "mlperf_vww_96_int8",
    "mlperf_ic_resnet8_int8",
    "mlperf_ad_fc_autoencoder_int8",
    "mlperf_sww_int8",
    "tflm_micro_speech_int8",
    "tflm_hello_world_int8",
]


@pytest.mark.parametrize("name", REAL_MODELS)
def test_real_models_tflm_matches_litert_reference(name):
    p = MODELS / f"{name}.tflite"
    if not p.exists():
        pytest.skip(f"{p} not available")
    x = ref.seeded_inputs(p, 0)
    got, want = ref.tflm_outputs(p, x), _litert_ref(p, x)
    assert [g.shape for g in got] == [w.shape for w in want]
    # the MLPerf AD autoencoder shows 1-LSB FULLY_CONNECTED rounding differences
    assert _max_abs_diff(got, want) <= 1


def test_person_detect_runs():
    """LiteRT rejects this file (bias quantized_dimension), TFLM runs it."""
    p = MODELS / "tflm_person_detect_int8.tflite"
    if not p.exists():
        pytest.skip(f"{p} not available")
    (y,) = ref.tflm_outputs(p, ref.seeded_inputs(p, 0))
    assert y.shape == (1, 2) and y.dtype == np.int8


# ---------------------------------------------------------------------------
# (b) seeded inputs
# ---------------------------------------------------------------------------


def test_seeded_inputs_deterministic_shape_dtype(example_int8, example_float):
    a, b, c = (ref.seeded_inputs(example_int8, s) for s in (5, 5, 6))
    assert len(a) == 1
    assert a[0].shape == (1, 49, 10, 1) and a[0].dtype == np.int8
    np.testing.assert_array_equal(a[0], b[0])
    assert not np.array_equal(a[0], c[0])
    # uniform over the full int8 range
    big = np.concatenate([ref.seeded_inputs(example_int8, s)[0].ravel() for s in range(20)])
    assert big.min() == -128 and big.max() == 127
    assert abs(big.astype(np.float64).mean() + 0.5) < 3
    f = ref.seeded_inputs(example_float, 5)
    assert f[0].dtype == np.float32 and f[0].shape == (1, 49, 10, 1)
    np.testing.assert_array_equal(f[0], ref.seeded_inputs(example_float, 5)[0])
    assert abs(float(f[0].std()) - 1.0) < 0.15


def test_seeded_inputs_multi_input_order(tmp_path):
    p = _write(tmp_path, "add.tflite", _add_case(0))
    x = ref.seeded_inputs(p, 1)
    ins, _ = ref.model_io_specs(p)
    assert [(a.shape, a.dtype) for a in x] == [(s, d) for _n, s, d in ins]
    assert len(x) == 2 and not np.array_equal(x[0], x[1])


@pytest.mark.parametrize("name", REAL_MODELS + ["tflm_person_detect_int8"])
def test_seeded_inputs_match_tflm_input_details(name):
    p = MODELS / f"{name}.tflite"
    if not p.exists():
        pytest.skip(f"{p} not available")
    interp = ref.tflm_interpreter(p)
    for i, a in enumerate(ref.seeded_inputs(p, 0)):
        d = interp.get_input_details(i)
        assert a.shape == tuple(d["shape"]) and a.dtype == np.dtype(d["dtype"])


def test_tflm_outputs_rejects_wrong_input(example_int8):
    with pytest.raises(ValueError):
        ref.tflm_outputs(example_int8, [np.zeros((1, 49, 10, 1), np.float32)])
    with pytest.raises(ValueError):
        ref.tflm_outputs(example_int8, [])


# ---------------------------------------------------------------------------
# (c) the example model script
# ---------------------------------------------------------------------------


def _run_script(*args):
    return subprocess.run([sys.executable, str(EXAMPLE_SCRIPT), *args], check=True, capture_output=True, text=True)


def test_make_example_model_is_deterministic_and_loads(tmp_path):
    a, b, f = tmp_path / "a.tflite", tmp_path / "b.tflite", tmp_path / "f.tflite"
    _run_script("-o", str(a))
    _run_script("-o", str(b))
    _run_script("--float", "-o", str(f))
    assert a.read_bytes() == b.read_bytes()
    assert a.read_bytes() == mem.build_kws_tiny()
    assert f.read_bytes() == mem.build_kws_tiny(float_model=True)
    for p in (a, f):
        interp = ref.tflm_interpreter(p)  # loads and allocates in tflite_micro
        assert tuple(interp.get_input_details(0)["shape"]) == (1, 49, 10, 1)
        (y,) = ref.tflm_outputs(p, ref.seeded_inputs(p, 0))
        assert y.shape == (1, 4)
    d = ref.tflm_interpreter(a).get_output_details(0)["quantization_parameters"]
    assert float(d["scales"][0]) == 1 / 256 and int(d["zero_points"][0]) == -128


def test_committed_example_files_are_current():
    for fname, is_float in (("kws_tiny_int8.tflite", False), ("kws_tiny_float.tflite", True)):
        p = REPO / "examples" / fname
        if not p.exists():
            pytest.skip(f"{p} not generated")
        assert p.read_bytes() == mem.build_kws_tiny(float_model=is_float), (
            f"{fname} is stale: rerun examples/make_example_model.py"
        )


def test_example_model_structure(example_int8):
    import tflite

    m = tflite.Model.GetRootAsModel(example_int8.read_bytes(), 0)
    sg = m.Subgraphs(0)
    ops = []
    for i in range(sg.OperatorsLength()):
        oc = m.OperatorCodes(sg.Operators(i).OpcodeIndex())
        ops.append(max(oc.BuiltinCode(), oc.DeprecatedBuiltinCode()))
    assert ops == [
        OP.CONV_2D, OP.DEPTHWISE_CONV_2D, OP.CONV_2D, OP.CONV_2D, OP.ADD,
        OP.AVERAGE_POOL_2D, OP.RESHAPE, OP.FULLY_CONNECTED, OP.SOFTMAX,
    ]
    # ADD inputs carry different scales
    add = sg.Operators(4)
    s = [sg.Tensors(int(t)).Quantization().Scale(0) for t in add.InputsAsNumpy()]
    assert s[0] != s[1]
    # per-channel conv weights, zero point 0
    w = sg.Tensors(int(sg.Operators(0).InputsAsNumpy()[1])).Quantization()
    assert w.ScaleLength() == 8 and not w.ZeroPointAsNumpy().any()


# ---------------------------------------------------------------------------
# arena
# ---------------------------------------------------------------------------


def test_tflm_arena_bytes(example_int8):
    a = ref.tflm_arena_bytes(example_int8)
    assert a["total"] == a["head"] + a["tail"]
    # the largest pair of simultaneously live activations: ADD reads two
    # 25*5*16 tensors and writes a third
    assert a["head"] >= 2 * 25 * 5 * 16
    assert ref.tflm_arena_bytes(example_int8) == a


def test_tflm_arena_bytes_matches_published_baseline():
    p = MODELS / "mlperf_kws_dscnn_int8.tflite"
    if not p.exists():
        pytest.skip(f"{p} not available")
    # tflm_baseline.csv: tflm_total 24272 = head 16000 + tail 8272
    assert ref.tflm_arena_bytes(p) == {"head": 16000, "tail": 8272, "total": 24272}
