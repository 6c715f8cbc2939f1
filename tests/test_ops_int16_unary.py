"""int16 activations and unary operators ("16x8": frontend/ops/unary.py, activations.py, matmul.py's SOFTMAX;
kernels/unary16.py) against TFLite Micro, bit for bit.

- Every int16 value (one input tensor of 65536 elements) through LOGISTIC and TANH at power-of-two input scales
  (TFLM's shortcut), near-power-of-two ones (CheckedLog2's tolerance) and others, through SOFTMAX as rows
  [v, 32767] that sweep both of its 513-entry tables, and through RELU, RELU6, LEAKY_RELU, ABS and PRELU with
  ordinary and extreme quantizations: hand-made flatbuffers.
- The converter's 16x8 models of these operators (tests/models/gen_unary.py, gen_matmul.py SOFTMAX16) on seeds
  0, 1, 2 (op_check.check_model).
- The unary operators TFLM has no int16 kernel for stay refused (exit 4 naming operator, index and type).
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

import numpy as np
import pytest

from op_check import check_model
from test_ops_unary import _leaky_options, check_inputs

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "examples"))
import make_example_model as mm  # noqa: E402

OPS_DIR = Path(__file__).resolve().parent / "models" / "ops"
EVERY = np.arange(-32768, 32768, dtype=np.int32).astype(np.int16).reshape(1, -1)
Q15 = (2.0**-15, 0)
ALL = bool(os.environ.get("EDGEMEM_ALL_OP_MODELS"))  # the cases left out of the ~90 s budget run too


def _cases(base: list, extra: list) -> list:
    return base + extra if ALL else base


def one_op(op: str, shape, in_q, out_q, options=(), alpha=None, alpha_q=None, quantized: bool = True) -> bytes:
    """x (int16) -> OP -> y (int16); alpha: PRELU's constant int8 alpha with alpha_q (scale, zero point)."""
    mb = mm.ModelBuilder(description=f"edgemem int16 {op} test")
    x = mb.tensor("x", shape, np.int16, mm.qparams([in_q[0]], [in_q[1]]) if quantized else None)
    y = mb.tensor("y", shape, np.int16, mm.qparams([out_q[0]], [out_q[1]]) if quantized else None)
    inputs = [x]
    if alpha is not None:
        inputs.append(mb.const("alpha", alpha.astype(np.int8), mm.qparams([alpha_q[0]], [alpha_q[1]])))
    mb.op(getattr(mm.OP, op), inputs, [y], *options)
    return mb.serialize([x], [y])


# ------------------------------------------------------------------ LOGISTIC, TANH: every int16 input

P12 = 2.0**-12
SIGMOID_SCALES = {
    "LOGISTIC": _cases([P12, P12 * 1.0005, P12 * 1.002, 2.0**-11, 1e-3, 1e-7], [3.1e-5, 2.0]),
    "TANH": _cases([P12, 2.0**-11, 2.0**-10, 1.37e-4, 1e-7, 2.0], [P12 * 0.9996, 1e-3]),
}


@pytest.mark.parametrize("op,scale", [(op, s) for op, ss in SIGMOID_SCALES.items() for s in ss], ids=lambda v: v if isinstance(v, str) else f"{v:g}")
def test_int16_sigmoid_tanh_every_input(op, scale, tmp_path):
    check_inputs(one_op(op, EVERY.shape, (scale, 0), Q15), tmp_path, [EVERY])


def test_int16_sigmoid_tanh_pot_detection():
    """The power-of-two shortcut is taken exactly where TFLM's float32 CheckedLog2 says so."""
    from edgemem.kernels.unary16 import sigmoid_tanh_params

    assert sigmoid_tanh_params(P12, tanh=False) == (0, 0)
    assert sigmoid_tanh_params(P12 * 1.0005, tanh=False) == (0, 0)
    assert sigmoid_tanh_params(2.0**-11, tanh=True) == (0, 1)
    assert sigmoid_tanh_params(2.0**-11, tanh=False)[0] != 0
    assert sigmoid_tanh_params(P12 * 1.002, tanh=True)[0] != 0


# ------------------------------------------------------------------ SOFTMAX

def _pairs():
    """Rows [v, 32767] for every int16 v: every difference to the row max in [-65535, 0]."""
    v = np.arange(-32768, 32768, dtype=np.int32)
    return np.stack([v, np.full_like(v, 32767)], 1).astype(np.int16)


# (input scale, beta): 10/65535 makes the rescaled difference the difference itself (the whole exp table, and
# sums over the whole reciprocal table); others rescale it up, down, or with a left shift (10.0: one that
# overflows int32 in TFLM's MultiplyByQuantizedMultiplier, which wraps)
SOFTMAX_CASES = _cases([(10.0 / 65535, 1.0), (3e-4, 0.5), (1e-3, 2.0), (0.01, 1.0), (10.0, 1.0)], [(P12, 1.0), (2e-5, 3.0)])


@pytest.mark.parametrize("scale,beta", SOFTMAX_CASES, ids=lambda v: f"{v:g}")
def test_int16_softmax_every_difference(scale, beta, tmp_path):
    x = _pairs()
    check_inputs(one_op("SOFTMAX", x.shape, (scale, 0), Q15, mm.softmax_options(beta)), tmp_path, [x])


def test_int16_softmax_long_rows(tmp_path):
    """Rows of 64: constant rows (the largest sums), random ones, rows with one large value."""
    rng = np.random.default_rng(7)
    rows = [np.full(64, v) for v in (-32768, -5, 0, 32767)]
    rows += [rng.integers(-32768, 32768, 64) for _ in range(24)]
    rows += [rng.integers(-2000, 2000, 64) for _ in range(24)]
    spike = rng.integers(-3000, 0, (12, 64))
    spike[np.arange(12), rng.integers(0, 64, 12)] = 20000
    x = np.concatenate([np.stack(rows), spike]).astype(np.int16)
    check_inputs(one_op("SOFTMAX", x.shape, (1.2e-4, 0), Q15, mm.softmax_options(1.0)), tmp_path, [x])


@pytest.mark.parametrize("scale,beta", _cases([(0.1, 0.7), (1e-3, 3.0)], [(0.05, 1.0), (0.5, 1.0)]), ids=lambda v: f"{v:g}")
def test_int8_to_int16_softmax(scale, beta, tmp_path):
    """TFLM's mixed SOFTMAX: int8 input (any zero point), int16 output (1/65536, -32768): rows [v, 127] for every
    int8 v, rows [v, -128 ... ] and random rows of 40."""
    rng = np.random.default_rng(11)
    v = np.arange(-128, 128)
    pairs = np.zeros((256, 40), np.int64) - 128
    pairs[:, 0], pairs[:, 1] = v, 127
    x = np.concatenate([pairs, rng.integers(-128, 128, (64, 40)), np.full((4, 40), 5)]).astype(np.int8)
    mb = mm.ModelBuilder(description="edgemem int8 -> int16 SOFTMAX test")
    xt = mb.tensor("x", x.shape, np.int8, mm.qparams([scale], [-3]))
    yt = mb.tensor("y", x.shape, np.int16, mm.qparams([1.0 / 65536], [-32768]))
    mb.op(mm.OP.SOFTMAX, [xt], [yt], *mm.softmax_options(beta))
    check_inputs(mb.serialize([xt], [yt]), tmp_path, [x])


# ------------------------------------------------------------------ RELU, RELU6, LEAKY_RELU, ABS: every input

ELEMENTWISE_CASES = _cases([
    ("RELU", (1e-3, 0), (3e-3, 0), ()), ("RELU", (3e-3, 0), (1e-3, 0), ()),
    ("RELU6", (1e-3, 0), (1e-3, 0), ()), ("RELU6", (1e-4, 0), (1e-4, 0), ()), ("RELU6", (2e-4, 100), (2e-4, 100), ()),
    ("RELU6", (0.05, -1000), (0.05, 0), ()),
    ("LEAKY_RELU", (1e-3, 0), (1e-3, 0), _leaky_options(0.2)), ("LEAKY_RELU", (2e-3, 7), (1e-3, -30), _leaky_options(-0.3)),
    ("LEAKY_RELU", (1e-3, -32768), (2.5e-3, 32767), _leaky_options(1.5)), ("LEAKY_RELU", (1e-4, 0), (1e-4, 0), _leaky_options(0.0)),
    ("ABS", (1e-3, 0), (1e-3, 0), ()), ("ABS", (3e-3, 0), (1e-3, 0), ()),
    # scale ratios >= 2^15: TFLM's x * (1 << shift) wraps in int32
    ("RELU", (1.0, 0), (1e-5, 0), ()), ("LEAKY_RELU", (0.5, 3), (1e-5, 0), _leaky_options(0.2)), ("ABS", (1.0, 0), (2e-5, 0), ()),
], [("RELU", (1e-3, 0), (1e-3, 0), ()), ("RELU", (1e-4, 0), (1e-2, 0), ()), ("ABS", (1e-3, 0), (3e-3, 0), ())])  # fmt: skip


@pytest.mark.parametrize("op,in_q,out_q,opts", ELEMENTWISE_CASES,
                         ids=[f"{c[0]}-in{c[1][0]:g}z{c[1][1]}-out{c[2][0]:g}z{c[2][1]}-{i}" for i, c in enumerate(ELEMENTWISE_CASES)])
def test_int16_elementwise_every_input(op, in_q, out_q, opts, tmp_path):
    check_inputs(one_op(op, EVERY.shape, in_q, out_q, opts), tmp_path, [EVERY])


def test_int16_abs_not_quantized(tmp_path):
    """An int16 ABS without quantization: TFLM's std::abs path (-32768 stays -32768)."""
    check_inputs(one_op("ABS", EVERY.shape, None, None, quantized=False), tmp_path, [EVERY])


@pytest.mark.parametrize("a_shape,in_q,a_q,out_q", [
    ((256,), (1e-3, 0), (0.01, 3), (1e-3, 0)),
    ((1,), (2e-3, 5), (0.004, -128), (1e-3, -9)),
    ((1, 256), (1e-4, 0), (0.05, 0), (3e-3, 0)),
], ids=["alpha-per-channel", "alpha-scalar-zps", "alpha-row-large"])
def test_int16_prelu_every_input(a_shape, in_q, a_q, out_q, tmp_path):
    """int16 PRELU with an int8 alpha broadcast over the last axis (the converter makes no 16x8 PRELU)."""
    rng = np.random.default_rng(3)
    alpha = rng.integers(-128, 128, a_shape)
    x = EVERY.reshape(1, 256, 256)
    check_inputs(one_op("PRELU", x.shape, in_q, out_q, alpha=alpha, alpha_q=a_q), tmp_path, [x])


# ------------------------------------------------------------------ converter-made 16x8 models, seeds 0, 1, 2

MODEL_OPS = ("LOGISTIC", "TANH", "SOFTMAX", "LEAKY_RELU", "RELU", "RELU6", "ABS")
MODELS = sorted(p for op in MODEL_OPS for p in OPS_DIR.glob(f"{op}-*-int16.tflite"))


@pytest.mark.parametrize("path", MODELS, ids=lambda p: p.stem)
def test_int16_converter_model(path, tmp_path):
    from edgemem.errors import UnsupportedModelError

    try:
        cmp = check_model(path, tmp_path)
    except UnsupportedModelError as exc:
        # float-edged models need int16 QUANTIZE / DEQUANTIZE (another family's operators)
        if "iofloat" in path.name and ("DEQUANTIZE (int16)" in str(exc) or "QUANTIZE (float32)" in str(exc)):
            pytest.skip(f"needs the int16 QUANTIZE/DEQUANTIZE lowerings: {exc}")
        raise
    assert cmp.oracle == "tflm"


def test_int16_models_exist():
    """Every operator above has converter-made int16 models (a generator that stopped writing them fails here)."""
    stems = {p.name.split("-")[0] for p in MODELS}
    assert stems == set(MODEL_OPS), stems


# ------------------------------------------------------------------ what TFLM does not take in int16

@pytest.mark.parametrize("op", ["RSQRT", "HARD_SWISH", "ELU", "LOG_SOFTMAX", "L2_NORMALIZATION", "EXP", "NEG", "GELU"])
def test_int16_refused_where_tflm_has_no_kernel(op, tmp_path):
    from edgemem.errors import UnsupportedModelError
    from edgemem.frontend.tflite_import import import_tflite

    path = tmp_path / "m.tflite"
    path.write_bytes(one_op(op, (1, 8), (1e-3, 0), (1e-3, 0)))
    with pytest.raises(UnsupportedModelError, match=rf"operator #0 {op} .*int16"):
        import_tflite(path)


@pytest.mark.parametrize("op,in_q,out_q,why", [
    ("LOGISTIC", (1e-3, 5), Q15, "zero points"), ("TANH", (1e-3, 0), (2.0**-14, 0), "2\\^-15"),
    ("SOFTMAX", (1e-3, 0), (1.0 / 256, 0), "1/32768"), ("RELU", (1e-3, 0), (1e-3, 4), "zero points"),
], ids=["logistic-zp", "tanh-out-scale", "softmax-out-scale", "relu-zp"])
def test_int16_refused_quantization(op, in_q, out_q, why, tmp_path):
    """Quantizations TFLM's int16 Prepare rejects are refused with the reason."""
    from edgemem.errors import UnsupportedModelError
    from edgemem.frontend.tflite_import import import_tflite

    path = tmp_path / "m.tflite"
    opts = mm.softmax_options(1.0) if op == "SOFTMAX" else ()
    path.write_bytes(one_op(op, (1, 8), in_q, out_q, opts))
    with pytest.raises(UnsupportedModelError, match=why):
        import_tflite(path)


def test_int16_chain_shares_tables(tmp_path):
    """LOGISTIC -> TANH -> SOFTMAX -> LOGISTIC -> SOFTMAX on seeds 0, 1, 2, and the firmware keeps one copy of the
    sigmoid table and of each SOFTMAX table (not one per operator)."""
    mb = mm.ModelBuilder(description="edgemem int16 chain")
    t = [mb.tensor("x", (2, 24), np.int16, mm.qparams([3e-4], [0]))]
    for k, op in enumerate(("LOGISTIC", "TANH", "SOFTMAX", "LOGISTIC", "SOFTMAX")):
        t.append(mb.tensor(f"t{k}", (2, 24), np.int16, mm.qparams([2.0**-15], [0])))
        mb.op(getattr(mm.OP, op), [t[-2]], [t[-1]], *(mm.softmax_options(2.0) if op == "SOFTMAX" else ()))
    cmp = check_model(mb.serialize([t[0]], [t[-1]]), tmp_path)
    weights = (cmp.project / "weights.c").read_text()
    assert weights.count("int16_t em_w_") == 3, weights[:400]
