"""Element-wise unary operators (frontend/ops/unary.py, activations.py) against TFLite Micro: hand-made
one-operator models (exact quantization, zero points at the int8 extremes, tiny and large scales, broadcast
alphas) and the converter-made models of tests/models/ops/ (tests/models/gen_unary.py)."""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pytest

from op_check import assert_outputs_match, check_model

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


def check_inputs(model: bytes, tmp_path, inputs: list[np.ndarray]):
    """Build ``model`` for the host and compare its outputs on ``inputs`` (not seeded: chosen values, e.g.
    every int8) with TFLM's."""
    from op_check import build_for_host

    from edgemem.reference import model_io_specs, reference_outputs
    from edgemem.target.host import build_host, run_host

    path, project = build_for_host(model, tmp_path)
    exe = build_host(project, Path(tmp_path) / "host")
    _, outs = model_io_specs(path)
    raw = run_host(exe, [x.tobytes() for x in inputs], [int(np.prod(s)) * d.itemsize for _, s, d in outs]).outputs
    got = [np.frombuffer(r, dtype=d).reshape(s) for r, (_, s, d) in zip(raw, outs)]
    want, oracle = reference_outputs(path, inputs)
    assert oracle == "tflm"
    assert_outputs_match(got, want, oracle, path.name)


# (input (scale, zp), output (scale, zp)) per operator: ordinary, zero points at the extremes, tiny and
# large scales
INT8_CASES = {
    "ABS": [((0.05, 3), (0.025, -128)), ((0.05, -128), (0.05, -128)), ((0.1, 127), (0.2, -128)), ((1e-4, 0), (2e-5, -100)),
            ((20.0, -5), (11.0, 0)), ((0.05, 10), (0.05, 10))],
    "RSQRT": [((0.02, -128), (0.05, -128)), ((0.5, -128), (0.004, -128)), ((1e-3, -128), (0.5, 0)), ((8.0, -128), (0.002, 127)),
              ((0.1, -128), (0.1, -50)), ((0.01, 0), (0.03, -128)), ((0.2, 100), (0.01, -128)), ((1e-5, -128), (1.0, -128))],
    "TANH": [((0.05, 3), (1 / 128, 0)), ((0.2, -128), (1 / 128, 0)), ((0.01, 127), (1 / 128, 0)), ((1e-4, 0), (1 / 128, 0)),
             ((3.0, 10), (1 / 128, 0)), ((0.0625, 0), (1 / 128, 0)), ((20.0, 0), (1 / 128, 0)), ((1e-6, -7), (1 / 128, 0))],
    "ELU": [((0.05, 3), (0.04, -60)), ((0.1, -128), (0.05, -128)), ((0.03, 127), (0.02, 127)), ((1e-4, 0), (1e-4, 0)),
            ((5.0, -1), (5.0, -1)), ((0.02, 0), (0.01, -28))],
    "HARD_SWISH": [((0.05, 3), (0.04, -60)), ((0.1, -128), (0.05, -128)), ((0.03, 127), (0.02, 127)), ((1e-4, 0), (1e-4, 5)),
                   ((2.0, -1), (1.0, -100)), ((0.05, 0), (0.3, -128)), ((0.2, 0), (0.002, 0))],
    "LEAKY_RELU": [((0.05, 3), (0.04, -60)), ((0.1, -128), (0.05, -128)), ((0.03, 127), (0.02, 127)), ((1e-4, 0), (1e-4, 0)),
                   ((5.0, -1), (3.0, 20))],
}
LEAKY_ALPHAS = (0.2, 0.01, 1.5, -0.3, 0.0)


def _q_id(q):
    (s_in, z_in), (s_out, z_out) = q
    return f"in{s_in:g}z{z_in}-out{s_out:g}z{z_out}"


def _table(op, q, alpha=0.2):
    from edgemem.kernels import unary as K

    (s_in, z_in), (s_out, z_out) = q
    if op == "TANH":
        return K.tanh_table(s_in, z_in)
    if op == "LEAKY_RELU":
        return K.leaky_relu_table(s_in, z_in, s_out, z_out, alpha)
    return {"ABS": K.abs_table, "RSQRT": K.rsqrt_table, "ELU": K.elu_table, "HARD_SWISH": K.hard_swish_table}[op](s_in, z_in, s_out, z_out)


def _every_int8(op, q):
    """Every int8 input TFLM takes (RSQRT refuses those below the input's zero point)."""
    lo = q[0][1] if op == "RSQRT" else -128
    return np.arange(lo, 128, dtype=np.int8)


@pytest.mark.parametrize("op,q", [(op, q) for op, qs in INT8_CASES.items() for q in qs], ids=lambda v: v if isinstance(v, str) else _q_id(v))
def test_int8_table(op, q):
    """The build-time table equals TFLM's output for every int8 input (TFLM in process: no build)."""
    from edgemem.reference import tflm_outputs

    x = _every_int8(op, q)
    opts = _leaky_options(0.2) if op == "LEAKY_RELU" else ()
    want = tflm_outputs(one_op(op, x.shape, q[0], q[1], opts), [x])[0]
    got = _table(op, q)[x.astype(np.int32) + 128]
    bad = np.nonzero(got != want)[0]
    assert bad.size == 0, f"{op}: {bad.size} inputs differ, e.g. x={x[bad[:5]]}: edgemem {got[bad[:5]]}, TFLM {want[bad[:5]]}"


@pytest.mark.parametrize("alpha", LEAKY_ALPHAS)
def test_int8_leaky_relu_alpha_table(alpha):
    from edgemem.reference import tflm_outputs

    q = ((0.05, 3), (0.03, -20))
    x = np.arange(-128, 128, dtype=np.int8)
    want = tflm_outputs(one_op("LEAKY_RELU", x.shape, q[0], q[1], _leaky_options(alpha)), [x])[0]
    np.testing.assert_array_equal(_table("LEAKY_RELU", q, np.float32(alpha)), want)


# end to end on the host (generated C, sanitizers) with every int8 input: one edge case per operator
E2E_CASES = [("ABS", 2), ("RSQRT", 5), ("TANH", 2), ("ELU", 1), ("HARD_SWISH", 4), ("LEAKY_RELU", 2)]


@pytest.mark.parametrize("op,case", E2E_CASES)
def test_int8_unary_host(op, case, tmp_path):
    q = INT8_CASES[op][case]
    x = _every_int8(op, q)
    opts = _leaky_options(-0.3) if op == "LEAKY_RELU" else ()
    check_inputs(one_op(op, (1, x.size), q[0], q[1], opts), tmp_path, [x.reshape(1, -1)])


# int8 RELU / RELU6 as operators of their own (frontend/ops/activations.py): RELU rescales to the output's
# quantization and clamps at its zero; TFLM's RELU6 clamps on the input's quantization and ignores the output's
RELU_CASES = [("RELU", (0.05, -3), (0.03, -128)), ("RELU", (0.02, 127), (0.05, 10)), ("RELU", (0.1, -128), (0.1, -128)),
              ("RELU6", (0.05, -3), (0.03, -128)), ("RELU6", (0.03, -128), (0.5, 7)), ("RELU6", (0.1, 60), (0.1, 60))]  # fmt: skip


@pytest.mark.parametrize("op,in_q,out_q", RELU_CASES, ids=lambda v: v if isinstance(v, str) else f"{v[0]:g}z{v[1]}")
def test_int8_relu_host(op, in_q, out_q, tmp_path):
    x = np.arange(-128, 128, dtype=np.int8).reshape(1, -1)
    check_inputs(one_op(op, x.shape, in_q, out_q), tmp_path, [x])


# QUANTIZE int8 -> int8 (a change of scale and zero point: TFLM's Requantize), integerize's island
REQUANT_CASES = [((0.05, -3), (0.03, 10)), ((0.02, 127), (0.2, -128)), ((0.1, -128), (0.013, 0))]


@pytest.mark.parametrize("in_q,out_q", REQUANT_CASES, ids=lambda v: f"{v[0]:g}z{v[1]}")
def test_int8_requantize_host(in_q, out_q, tmp_path):
    x = np.arange(-128, 128, dtype=np.int8).reshape(1, -1)
    check_inputs(one_op("QUANTIZE", x.shape, in_q, out_q), tmp_path, [x])


def test_int8_hard_swish_refuses_upscale(tmp_path):
    """TFLM refuses an int8 HARD_SWISH whose output multiplier needs a left shift; so does edgemem."""
    from edgemem.errors import UnsupportedModelError

    with pytest.raises(UnsupportedModelError, match="HARD_SWISH"):
        check_model(one_op("HARD_SWISH", (1, 8), (1.0, 0), (0.001, 0)), tmp_path)


# PRELU: alpha shapes broadcast against [1, 4, 5, 3] (per channel, per position, shared axes), alpha's and the
# activations' zero points at the extremes
PRELU_CASES = [
    ((3,), (0.01, 0), (0.05, 3), (0.04, -20)),
    ((1, 5, 1), (0.003, -128), (0.1, -128), (0.05, 127)),
    ((4, 5, 3), (0.02, 127), (1e-3, 127), (2e-3, -128)),
    ((1, 1, 1, 1), (0.01, -3), (4.0, 0), (1.0, 0)),
]


@pytest.mark.parametrize("alpha_shape,alpha_q,in_q,out_q", PRELU_CASES, ids=lambda v: "x".join(map(str, v)) if all(isinstance(d, int) for d in v) else f"{v[0]:g}z{v[1]}")
def test_int8_prelu(alpha_shape, alpha_q, in_q, out_q, tmp_path):
    alpha = np.random.default_rng(1).integers(-128, 128, alpha_shape).astype(np.int8)
    alpha.flat[0] = -128
    alpha.flat[-1] = 127
    check_model(one_op("PRELU", (1, 4, 5, 3), in_q, out_q, alpha=alpha, alpha_q=alpha_q), tmp_path)


@pytest.mark.parametrize("dtype", [np.int8, np.float32])
def test_prelu_alpha_input(dtype, tmp_path):
    """alpha as a second model input (not a constant), broadcast per channel."""
    mb = mm.ModelBuilder(description="edgemem PRELU alpha input")
    q = (lambda s, z: mm.qparams([s], [z])) if dtype == np.int8 else (lambda s, z: None)
    x = mb.tensor("x", (1, 4, 5, 3), dtype, q(0.05, 3))
    alpha = mb.tensor("alpha", (1, 1, 3), dtype, q(0.01, -5))
    y = mb.tensor("y", (1, 4, 5, 3), dtype, q(0.04, -20))
    mb.op(mm.OP.PRELU, [x, alpha], [y])
    check_model(mb.serialize([x, alpha], [y]), tmp_path)


def test_float_leaky_relu_without_options(tmp_path):
    """No LeakyReluOptions: TFLite's alpha is 0 (TVM's converter would assert)."""
    check_model(one_op("LEAKY_RELU", (3, 5), dtype=np.float32), tmp_path)


@pytest.mark.parametrize("op", ["ROUND", "ABS"])
def test_float_ties_and_signed_zeros(op, tmp_path):
    """ROUND rounds ties to even as TFLM does; ABS of -0.0 and of halves."""
    x = np.array([-3.5, -2.5, -1.5, -0.5, -0.0, 0.0, 0.5, 1.5, 2.5, 3.5, 0.49999997, -7.25], np.float32).reshape(1, 12)
    check_inputs(one_op(op, x.shape, dtype=np.float32), tmp_path, [x])


def _converted():
    # 16x8 models (-int16, -iofloat-int16) are tests/test_ops_int16_unary.py's
    return sorted(p for p in OPS_DIR.glob("*.tflite") if p.name.split("-")[0] in UNARY and not p.stem.endswith("int16"))


@pytest.mark.parametrize("path", _converted(), ids=lambda p: p.stem)
def test_converted(path, tmp_path):
    check_model(path, tmp_path)


@pytest.mark.parametrize("fn,c_name", [("abs", "fabsf"), ("exp", "expf"), ("log", "logf"), ("sqrt", "sqrtf"), ("sin", "sinf"),
                                       ("cos", "cosf"), ("floor", "floorf"), ("ceil", "ceilf"), ("round", "nearbyintf"),
                                       ("tanh", "tanhf"), ("exp2", "exp2f")])  # fmt: skip
def test_c_math_functions(fn, c_name):
    """Float math in a kernel prints the <math.h> float function (a float ABS used to end in 'tirx.fabs')."""
    import tvm
    from tvm import te

    from edgemem.codegen.kernels_c import prim_funcs_to_c

    x = te.placeholder((4,), "float32", name="x")
    y = te.compute((4,), lambda i: getattr(tvm.tirx, fn)(x[i]), name="y")
    src = prim_funcs_to_c({"k": te.create_prim_func([x, y])}).source
    assert f"{c_name}(x[" in src and "#include <math.h>" in src
