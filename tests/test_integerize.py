"""edgemem.passes.integerize on real models, run on the host and checked against TFLite Micro.

The integerized Relax module (int8 call_tir kernels + reshapes) is compiled for the host CPU with
TVM's llvm target and run with the Relax VM; three seeded inputs per model are compared with the
`tflite_micro` interpreter (TFLM's reference kernels, no code shared with edgemem). Outputs must
be bit-exact, except those produced by SOFTMAX/LOGISTIC/TANH, which may differ by 1 LSB.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

tvm = pytest.importorskip("tvm")
pytest.importorskip("tflite_micro")
from tvm import relax

from edgemem.frontend.tflite_import import import_tflite
from edgemem.passes.integerize import integerize
from edgemem.reference import seeded_inputs, tflm_outputs

from shared_models import model_path as _model_path


CHECKED_MODELS = [
    "mlperf_kws_dscnn_int8", "mlperf_vww_96_int8", "mlperf_ic_resnet8_int8", "mlperf_ad_fc_autoencoder_int8",
    "mlperf_sww_int8", "tflm_person_detect_int8", "tflm_micro_speech_int8", "tflm_hello_world_int8",
]  # fmt: skip
SEEDS = (0, 1, 2)
TOLERANT = {"SOFTMAX", "LOGISTIC", "TANH"}  # TFLM's fixed-point exp/tanh: 1 LSB allowed


def _output_producers(path: Path) -> list[str]:
    """Builtin name of the operator writing each model output, in output order."""
    import tflite
    from tflite.BuiltinOperator import BuiltinOperator

    names = {v: k for k, v in BuiltinOperator.__dict__.items() if not k.startswith("_")}
    model = tflite.Model.GetRootAsModel(path.read_bytes(), 0)
    sg = model.Subgraphs(0)
    producer = {}
    for i in range(sg.OperatorsLength()):
        op = sg.Operators(i)
        code = model.OperatorCodes(op.OpcodeIndex())
        name = names.get(max(code.BuiltinCode(), code.DeprecatedBuiltinCode()), "?")
        for t in op.OutputsAsNumpy():
            producer[int(t)] = name
    return [producer.get(int(t), "INPUT") for t in sg.OutputsAsNumpy()]


def _run(vm, inputs: list[np.ndarray]) -> list[np.ndarray]:
    out = vm["main"](*[tvm.runtime.tensor(a) for a in inputs])
    outs = [out] if isinstance(out, tvm.runtime.Tensor) else list(out)
    return [o.numpy() for o in outs]


def _compile(path: Path):
    mod = integerize(import_tflite(path).relax_mod)
    return relax.VirtualMachine(tvm.compile(mod, target="llvm"), tvm.cpu())


def _check_against_tflm(path: Path, vm, seed: int) -> None:
    inputs = seeded_inputs(path, seed)
    expected = tflm_outputs(path, inputs)
    got = _run(vm, inputs)
    assert len(got) == len(expected)
    for i, (g, e, producer) in enumerate(zip(got, expected, _output_producers(path))):
        assert g.dtype == e.dtype and g.shape == e.shape, f"output {i}: {g.dtype}{g.shape} vs TFLM {e.dtype}{e.shape}"
        diff = int(np.abs(g.astype(np.int64) - e.astype(np.int64)).max(initial=0))
        allowed = 1 if producer in TOLERANT else 0
        assert diff <= allowed, f"{path.name} seed {seed} output {i} ({producer}) differs from TFLM by {diff}"


@pytest.fixture(scope="module", params=CHECKED_MODELS)
def host_model(request):
    """(path, Relax VM running the integerized module): compiled once per model."""
    path = _model_path(request.param)
    return path, _compile(path)


@pytest.mark.parametrize("seed", SEEDS)
def test_integerized_model_matches_tflm(host_model, seed):
    path, vm = host_model
    _check_against_tflm(path, vm, seed)


def test_conv_fed_directly_by_average_pool():
    """MicroNet-M's last CONV_2D reads the AVERAGE_POOL_2D output with no RESHAPE in between."""
    path = _model_path("armzoo_kws_micronet_m_int8")
    _check_against_tflm(path, _compile(path), 0)


# ---------------------------------------------------------------- kernels of single operators
#
# Each kernel is compiled for the host and compared with a reference written here from TFLite
# Micro's reference code (tensorflow/lite/kernels/internal/reference/*, micro/kernels/*): Python
# integers with gemmlowp's textbook branches, sharing nothing with edgemem.kernels.

import math

from edgemem.kernels import int8_ops
from edgemem.kernels.fixed_point import mean_multiplier, mul_multiplier, rescale_multiplier
from edgemem.kernels.int8_ops import Requant
from edgemem.passes.integerize import nearest_neighbor_sources


def _tflm_quantize_multiplier(real: float) -> tuple[int, int]:
    """quantization_util.cc QuantizeMultiplier."""
    if real == 0.0:
        return 0, 0
    q, shift = math.frexp(real)
    q_fixed = int(math.copysign(math.floor(abs(q) * 2**31 + 0.5), q))
    if q_fixed == 2**31:
        q_fixed, shift = q_fixed // 2, shift + 1
    if shift < -31:
        return 0, 0
    return q_fixed, shift


def _wrap32(v: int) -> int:
    return (v + 2**31) % 2**32 - 2**31


def _srdhm(a: int, b: int) -> int:
    """gemmlowp SaturatingRoundingDoublingHighMul."""
    if a == b == -(2**31):
        return 2**31 - 1
    ab = a * b
    nudge = (1 << 30) if ab >= 0 else 1 - (1 << 30)
    total = ab + nudge
    quotient = abs(total) // 2**31  # C's division truncates toward zero
    return quotient if total >= 0 else -quotient


def _rdbpot(x: int, exponent: int) -> int:
    """gemmlowp RoundingDivideByPOT."""
    mask = (1 << exponent) - 1
    remainder = x & mask
    threshold = (mask >> 1) + (1 if x < 0 else 0)
    return (x >> exponent) + (1 if remainder > threshold else 0)


def _mbqm(x: int, multiplier: int, shift: int) -> int:
    """MultiplyByQuantizedMultiplier (double rounding, TFLM's default build)."""
    left, right = max(shift, 0), max(-shift, 0)
    return _rdbpot(_srdhm(_wrap32(x * (1 << left)), multiplier), right)


def _run_kernel(prim, inputs: list[np.ndarray], out_shape, out_dtype="int8") -> np.ndarray:
    lib = tvm.compile(prim, target="llvm")
    out = tvm.runtime.tensor(np.zeros(out_shape, out_dtype))
    lib["main"](*[tvm.runtime.tensor(np.ascontiguousarray(a)) for a in inputs], out)
    return out.numpy()


def _int8(rng, shape) -> np.ndarray:
    return rng.integers(-128, 128, size=shape, dtype=np.int8)


def test_pad_fills_with_the_given_value():
    rng = np.random.default_rng(0)
    x = _int8(rng, (1, 3, 4, 2))
    before, after = (0, 1, 0, 0), (0, 2, 1, 3)
    got = _run_kernel(int8_ops.pad(x.shape, before, after, -7), [x], (1, 6, 5, 5))
    np.testing.assert_array_equal(got, np.pad(x, list(zip(before, after)), constant_values=-7))


def test_strided_slice_transpose_and_concatenation_copy_bytes():
    rng = np.random.default_rng(1)
    x = _int8(rng, (1, 6, 5, 16))
    got = _run_kernel(int8_ops.strided_slice(x.shape, (0, 1, 0, 8), (1, 2, 2, 1), (1, 3, 3, 8)), [x], (1, 3, 3, 8))
    np.testing.assert_array_equal(got, x[:, 1::2, 0::2, 8:16])
    got = _run_kernel(int8_ops.transpose(x.shape, (0, 3, 1, 2)), [x], (1, 16, 6, 5))
    np.testing.assert_array_equal(got, x.transpose(0, 3, 1, 2))
    parts = [_int8(rng, (1, 2, 3, c)) for c in (4, 1, 7)]
    got = _run_kernel(int8_ops.concatenation([p.shape for p in parts], 3), parts, (1, 2, 3, 12))
    np.testing.assert_array_equal(got, np.concatenate(parts, axis=3))


def _tflm_nearest(i: int, in_size: int, out_size: int, align_corners: bool, half_pixel: bool) -> int:
    """reference_ops GetNearestNeighbor, float32 like the C++."""
    f = np.float32
    scale = f(in_size - 1) / f(out_size - 1) if align_corners and out_size > 1 else f(in_size) / f(out_size)
    value = (f(i) + (f(0.5) if half_pixel else f(0.0))) * scale
    if align_corners:
        idx = int(math.copysign(math.floor(abs(float(value)) + 0.5), float(value)))  # roundf of a float32
    else:
        idx = math.floor(float(value))
    idx = min(idx, in_size - 1)
    return max(idx, 0) if half_pixel else idx


@pytest.mark.parametrize("in_hw,out_hw,align_corners,half_pixel", [
    ((6, 5), (12, 10), False, False), ((6, 6), (12, 12), False, True), ((5, 3), (8, 7), True, False), ((3, 4), (7, 9), False, True),
])  # fmt: skip
def test_resize_nearest_neighbor_matches_tflm_indices(in_hw, out_hw, align_corners, half_pixel):
    rng = np.random.default_rng(2)
    x = _int8(rng, (1, *in_hw, 3))
    rows = nearest_neighbor_sources(in_hw[0], out_hw[0], align_corners, half_pixel)
    cols = nearest_neighbor_sources(in_hw[1], out_hw[1], align_corners, half_pixel)
    got = _run_kernel(int8_ops.resize_nearest(x.shape, out_hw), [x, rows, cols], (1, *out_hw, 3))
    want_rows = [_tflm_nearest(i, in_hw[0], out_hw[0], align_corners, half_pixel) for i in range(out_hw[0])]
    want_cols = [_tflm_nearest(j, in_hw[1], out_hw[1], align_corners, half_pixel) for j in range(out_hw[1])]
    np.testing.assert_array_equal(got, x[:, want_rows][:, :, want_cols])


def _tflm_mean_multiplier(in_scale, out_scale, count: int) -> tuple[int, int]:
    """PrepareMeanOrSumHelper's multiplier, then QuantizedMeanOrSum's 1/count folding."""
    multiplier, shift = _tflm_quantize_multiplier(float(np.float32(in_scale)) / float(np.float32(out_scale)))
    extra = min(63 - (64 - count.bit_length()), 32, 31 + shift)  # 63 - CountLeadingZeros(count)
    return (multiplier << extra) // count, shift - extra


def _tflm_mean(x: np.ndarray, axes, keep_dims, in_scale, in_zp, out_scale, out_zp) -> np.ndarray:
    """reference_ops::QuantizedMeanOrSum (compute_sum=false)."""
    count = int(np.prod([x.shape[a] for a in axes]))
    multiplier, shift = _tflm_mean_multiplier(in_scale, out_scale, count)
    sums = x.astype(np.int64).sum(axis=tuple(axes), keepdims=keep_dims)
    out = [_mbqm(int(s) - in_zp * count, multiplier, shift) + out_zp for s in sums.reshape(-1)]
    return np.clip(np.array(out), -128, 127).astype(np.int8).reshape(sums.shape)


@pytest.mark.parametrize("shape,axes,keep_dims,in_q,out_q", [
    ((1, 7, 9, 16), (1, 2), True, (0.05, -3), (0.02, 5)),
    ((1, 7, 9, 16), (1, 2), False, (0.05, -3), (0.11, -128)),
    ((1, 28, 28, 8), (1, 2), True, (2.85e-07, -128), (2.85e-07, -128)),  # same scale (mcunetv2's SE blocks)
    ((1, 16, 3, 3), (3,), False, (0.031, 6), (0.029, 2)),  # mcunet_vww: one axis after a TRANSPOSE
    ((1, 300, 250, 1), (1, 2), True, (1e-3, 0), (9e-4, 0)),  # 75,000 elements: 1/count folded in with a 16-bit shift
])  # fmt: skip
def test_mean_matches_tflm_quantized_mean(shape, axes, keep_dims, in_q, out_q):
    rng = np.random.default_rng(3)
    x = _int8(rng, shape)
    count = int(np.prod([shape[a] for a in axes]))
    m, s = mean_multiplier(in_q[0], out_q[0], count)
    assert (m, s) == _tflm_mean_multiplier(in_q[0], out_q[0], count)
    want = _tflm_mean(x, axes, keep_dims, *in_q, *out_q)
    got = _run_kernel(int8_ops.mean(shape, axes, keep_dims, in_q[1], m, s, out_q[1]), [x], want.shape)
    np.testing.assert_array_equal(got, want)


def test_mean_multiplier_clamps_its_shift_like_tflm():
    """A tiny rescale (shift -18) over 75,000 elements: TFLM folds in only 31 - 18 = 13 of the 16 bits of 1/count."""
    for in_scale, out_scale, count in [(1e-6, 0.5, 75_000), (0.05, 0.02, 63), (2.85e-07, 2.85e-07, 784), (0.3, 0.001, 2**33)]:
        assert mean_multiplier(in_scale, out_scale, count) == _tflm_mean_multiplier(in_scale, out_scale, count)


def _tflm_mul(a, b, a_q, b_q, out_q, act=(-128, 127)) -> np.ndarray:
    """reference_integer_ops::MulElementwise over numpy-broadcast operands."""
    real = float(np.float32(a_q[0])) * float(np.float32(b_q[0])) / float(np.float32(out_q[0]))
    multiplier, shift = _tflm_quantize_multiplier(real)
    a_b, b_b = np.broadcast_arrays(a.astype(np.int64), b.astype(np.int64))
    out = [_mbqm((int(u) - a_q[1]) * (int(v) - b_q[1]), multiplier, shift) + out_q[1] for u, v in zip(a_b.ravel(), b_b.ravel())]
    return np.clip(np.array(out), *act).astype(np.int8).reshape(a_b.shape)


@pytest.mark.parametrize("a_shape,b_shape", [((1, 4, 5, 8), (8,)), ((1, 4, 5, 8), (1, 1, 1, 8)), ((1, 4, 5, 8), (1, 4, 5, 8)), ((1, 1, 1, 6), (1,))])
def test_mul_matches_tflm_with_broadcasting(a_shape, b_shape):
    rng = np.random.default_rng(4)
    a, b = _int8(rng, a_shape), _int8(rng, b_shape)
    a_q, b_q, out_q = (0.028, 4), (0.0079, 0), (0.0281, -3)
    out_shape = np.broadcast_shapes(a_shape, b_shape)
    m, s = mul_multiplier(a_q[0], b_q[0], out_q[0])
    prim = int8_ops.mul(a_shape, b_shape, out_shape, a_q[1], b_q[1], m, s, Requant(out_q[1], -20, 127))
    np.testing.assert_array_equal(_run_kernel(prim, [a, b], out_shape), _tflm_mul(a, b, a_q, b_q, out_q, (-20, 127)))


def test_broadcast_add_matches_tflm_add_arithmetic():
    """reference_integer_ops::AddElementwise per element (left shift 20), one operand broadcast."""
    rng = np.random.default_rng(5)
    a, b = _int8(rng, (1, 3, 4, 6)), _int8(rng, (6,))
    (s1, z1), (s2, z2), (so, zo) = (0.0253, 1), (6.8e-3, -9), (0.013, -128)
    twice_max = 2 * float(max(np.float32(s1), np.float32(s2)))
    m1, sh1 = _tflm_quantize_multiplier(float(np.float32(s1)) / twice_max)
    m2, sh2 = _tflm_quantize_multiplier(float(np.float32(s2)) / twice_max)
    mo, sho = _tflm_quantize_multiplier(twice_max / ((1 << 20) * float(np.float32(so))))
    a_b, b_b = np.broadcast_arrays(a.astype(np.int64), b.astype(np.int64))
    want = []
    for u, v in zip(a_b.ravel(), b_b.ravel()):
        su = _mbqm((int(u) - z1) * (1 << 20), m1, sh1)
        sv = _mbqm((int(v) - z2) * (1 << 20), m2, sh2)
        want.append(min(max(_mbqm(su + sv, mo, sho) + zo, -128), 127))
    prim = int8_ops.broadcast_add(a.shape, b.shape, a.shape, z1, z2, 20, m1, sh1, m2, sh2, mo, sho, Requant(zo, -128, 127))
    np.testing.assert_array_equal(_run_kernel(prim, [a, b], a.shape), np.array(want, np.int8).reshape(a.shape))


def test_requantize_matches_tflm():
    rng = np.random.default_rng(6)
    x = _int8(rng, (2, 50))
    in_q, out_q = (0.0123, 7), (0.0456, -11)
    multiplier, shift = _tflm_quantize_multiplier(float(np.float32(in_q[0])) / float(np.float32(out_q[0])))
    want = np.array([min(max(_mbqm(int(v) - in_q[1], multiplier, shift) + out_q[1], -128), 127) for v in x.ravel()], np.int8)
    m, s = rescale_multiplier(*(q[0] for q in (in_q, out_q)))
    got = _run_kernel(int8_ops.requantize(x.shape, in_q[1], m, s, out_q[1]), [x], x.shape)
    np.testing.assert_array_equal(got, want.reshape(x.shape))


def test_quantize_float_rounds_ties_away_from_zero_like_tflm():
    """AffineQuantize: round(val / float(scale)) + zp with std::round; ties are exact with scale 0.25."""
    scale, zp = 0.25, -3
    ties = (np.arange(-40, 40, dtype=np.float32) + np.float32(0.5)) * np.float32(scale)
    rng = np.random.default_rng(7)
    x = np.concatenate([ties, rng.standard_normal(200).astype(np.float32) * 20, np.float32([1e9, -1e9, 0.0, -0.0])])
    q = (x / np.float32(scale)).astype(np.float64)  # float32 division, then exact widening
    want = np.clip(np.sign(q) * np.floor(np.abs(q) + 0.5) + zp, -128, 127).astype(np.int8)
    got = _run_kernel(int8_ops.quantize_float(x.shape, scale, zp), [x], x.shape)
    np.testing.assert_array_equal(got, want)
    # a scale that is not a power of two: float32 quotients, rounded the same way
    scale = 0.0078393071889877319
    q = (x / np.float32(scale)).astype(np.float64)
    want = np.clip(np.sign(q) * np.floor(np.abs(q) + 0.5), -128, 127).astype(np.int8)
    np.testing.assert_array_equal(_run_kernel(int8_ops.quantize_float(x.shape, scale, 0), [x], x.shape), want)


def test_dequantize_float_is_tflms_double_product():
    x = np.arange(-128, 128, dtype=np.int8)
    scale, zp = 0.14687846601009369, 1
    want = (float(np.float32(scale)) * (x.astype(np.float64) - zp)).astype(np.float32)
    got = _run_kernel(int8_ops.dequantize_float(x.shape, scale, zp), [x], x.shape, "float32")
    np.testing.assert_array_equal(got, want)
