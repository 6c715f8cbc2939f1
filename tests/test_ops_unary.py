"""Element-wise unary operators (frontend/ops/unary.py, activations.py) against TFLite Micro: hand-made
one-operator models (exact quantization, zero points at the int8 extremes, tiny and large scales, broadcast
alphas) and the converter-made models of tests/models/ops/ (tests/models/gen_unary.py)."""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pytest

from op_check import check_model

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "examples"))
import make_example_model as mm  # noqa: E402

OPS_DIR = Path(__file__).resolve().parent / "models" / "ops"
UNARY = ("HARD_SWISH", "LEAKY_RELU", "PRELU", "TANH", "ELU", "ABS", "NEG", "EXP", "LOG", "SQRT", "RSQRT", "SQUARE",
         "SIN", "COS", "CEIL", "FLOOR", "ROUND", "RELU", "RELU6", "LOGISTIC")  # fmt: skip


def _leaky_options(alpha):
    import tflite

    def fn(b):
        tflite.LeakyReluOptionsStart(b)
        tflite.LeakyReluOptionsAddAlpha(b, alpha)
        return tflite.LeakyReluOptionsEnd(b)

    return mm.OPTS.LeakyReluOptions, fn


def one_op(op: str, shape, in_q=None, out_q=None, options=(), dtype=np.int8, alpha=None, alpha_q=None) -> bytes:
    """x -> OP -> y; in_q/out_q (scale, zero point) for int8; alpha: PRELU's constant alpha."""
    mb = mm.ModelBuilder(description=f"edgemem {op} test")
    q = (lambda sz: mm.qparams([sz[0]], [sz[1]])) if dtype == np.int8 else (lambda sz: None)
    x = mb.tensor("x", shape, dtype, q(in_q))
    y = mb.tensor("y", shape, dtype, q(out_q))
    inputs = [x]
    if alpha is not None:
        inputs.append(mb.const("alpha", alpha, None if alpha_q is None else mm.qparams([alpha_q[0]], [alpha_q[1]])))
    mb.op(getattr(mm.OP, op), inputs, [y], *options)
    return mb.serialize([x], [y])


# (input (scale, zp), output (scale, zp)) per operator: ordinary, zero points at the extremes, tiny and
# large scales
INT8_CASES = {
    "ABS": [((0.05, 3), (0.025, -128)), ((0.05, -128), (0.05, -128)), ((0.1, 127), (0.2, -128)), ((1e-4, 0), (2e-5, -100)),
            ((20.0, -5), (11.0, 0))],
    "RSQRT": [((0.02, -128), (0.05, -128)), ((0.5, -128), (0.004, -128)), ((1e-3, -128), (0.5, 0)), ((8.0, -128), (0.002, 127)),
              ((0.1, -128), (0.1, -50))],
    "TANH": [((0.05, 3), (1 / 128, 0)), ((0.2, -128), (1 / 128, 0)), ((0.01, 127), (1 / 128, 0)), ((1e-4, 0), (1 / 128, 0)),
             ((3.0, 10), (1 / 128, 0))],
    "ELU": [((0.05, 3), (0.04, -60)), ((0.1, -128), (0.05, -128)), ((0.03, 127), (0.02, 127)), ((1e-4, 0), (1e-4, 0)),
            ((5.0, -1), (5.0, -1))],
    "HARD_SWISH": [((0.05, 3), (0.04, -60)), ((0.1, -128), (0.05, -128)), ((0.03, 127), (0.02, 127)), ((1e-4, 0), (1e-4, 5)),
                   ((2.0, -1), (1.0, -100)), ((0.05, 0), (0.3, -128))],
    "LEAKY_RELU": [((0.05, 3), (0.04, -60)), ((0.1, -128), (0.05, -128)), ((0.03, 127), (0.02, 127)), ((1e-4, 0), (1e-4, 0)),
                   ((5.0, -1), (3.0, 20))],
    "RELU": [((0.05, 3), (0.04, -128)), ((0.1, 127), (0.05, -128))],
    "RELU6": [((0.05, 3), (0.05, 3)), ((0.1, -128), (0.1, -128))],
    "LOGISTIC": [((0.05, 3), (1 / 256, -128)), ((0.5, 127), (1 / 256, -128))],
}
LEAKY_ALPHAS = (0.2, 0.01, 1.5, -0.3, 0.0)


def _q_id(q):
    (s_in, z_in), (s_out, z_out) = q
    return f"in{s_in:g}z{z_in}-out{s_out:g}z{z_out}"


@pytest.mark.parametrize("op,q", [(op, q) for op, qs in INT8_CASES.items() for q in qs], ids=lambda v: v if isinstance(v, str) else _q_id(v))
def test_int8_unary(op, q, tmp_path):
    opts = _leaky_options(0.2) if op == "LEAKY_RELU" else ()
    check_model(one_op(op, (1, 4, 5, 3), q[0], q[1], opts), tmp_path)


@pytest.mark.parametrize("alpha", LEAKY_ALPHAS)
def test_int8_leaky_relu_alpha(alpha, tmp_path):
    check_model(one_op("LEAKY_RELU", (2, 7), (0.05, 3), (0.03, -20), _leaky_options(alpha)), tmp_path)


# PRELU: alpha shapes broadcast against [1, 4, 5, 3] (per channel, per position, shared axes), its zero points
PRELU_CASES = [
    ((3,), (0.01, 0)), ((1, 1, 3), (0.004, -10)), ((5, 3), (0.02, 5)), ((4, 5, 3), (0.01, 0)), ((1, 5, 1), (0.003, -128)),
    ((1,), (0.002, 127)), ((1, 1, 1, 3), (0.01, 0)),
]  # fmt: skip


@pytest.mark.parametrize("alpha_shape,alpha_q", PRELU_CASES, ids=lambda v: "x".join(map(str, v)) if isinstance(v[0], int) and len(v) != 2 or isinstance(v, tuple) and all(isinstance(d, int) for d in v) else f"a{v[0]:g}z{v[1]}")
def test_int8_prelu(alpha_shape, alpha_q, tmp_path):
    alpha = np.random.default_rng(1).integers(-128, 128, alpha_shape).astype(np.int8)
    check_model(one_op("PRELU", (1, 4, 5, 3), (0.05, 3), (0.04, -20), alpha=alpha, alpha_q=alpha_q), tmp_path)


@pytest.mark.parametrize("in_q,out_q", [((0.1, -128), (0.05, 127)), ((1e-3, 127), (2e-3, -128)), ((4.0, 0), (1.0, 0))])
def test_int8_prelu_extremes(in_q, out_q, tmp_path):
    alpha = np.array([-128, 0, 127], np.int8)
    check_model(one_op("PRELU", (1, 4, 5, 3), in_q, out_q, alpha=alpha, alpha_q=(0.01, -3)), tmp_path)


FLOAT_OPS = ("HARD_SWISH", "TANH", "ELU", "ABS", "NEG", "EXP", "LOG", "SQRT", "RSQRT", "SQUARE", "SIN", "COS", "CEIL", "FLOOR",
             "ROUND", "RELU", "RELU6", "LOGISTIC")  # fmt: skip


@pytest.mark.parametrize("op", FLOAT_OPS)
def test_float_unary(op, tmp_path):
    check_model(one_op(op, (1, 4, 5, 3), dtype=np.float32), tmp_path)


@pytest.mark.parametrize("alpha", [0.2, -0.5, None])
def test_float_leaky_relu(alpha, tmp_path):
    opts = _leaky_options(alpha) if alpha is not None else ()
    check_model(one_op("LEAKY_RELU", (3, 5), dtype=np.float32, options=opts), tmp_path)


@pytest.mark.parametrize("alpha_shape", [(3,), (1, 5, 1), (4, 5, 3)])
def test_float_prelu(alpha_shape, tmp_path):
    alpha = np.random.default_rng(0).uniform(-1, 1, alpha_shape).astype(np.float32)
    check_model(one_op("PRELU", (1, 4, 5, 3), dtype=np.float32, alpha=alpha), tmp_path)


def _converted():
    return sorted(p for p in OPS_DIR.glob("*.tflite") if p.name.split("-")[0] in UNARY)


@pytest.mark.parametrize("path", _converted(), ids=lambda p: p.stem)
def test_converted(path, tmp_path):
    check_model(path, tmp_path)
