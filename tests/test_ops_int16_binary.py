"""int16 ("16x8") binary operators and joins (frontend/ops/binary.py, the int16 CONCATENATION / PAD of
frontend/ops/layout.py) against TFLite Micro, bit for bit: ADD, SUB, MUL, SQUARED_DIFFERENCE, MAXIMUM, MINIMUM,
SELECT_V2, CONCATENATION, PAD, PADV2 -- the binary operators TFLM has int16 kernels for (no int16 ADD_N or
comparisons but GREATER, whose int16 Prepare leaves the scaling unset: refused).

Converter-made 16x8 models (tests/models/ops/*-int16.tflite, *-iofloat-int16.tflite, tests/models/gen_binary.py;
the CONCATENATION / PAD ones run in tests/test_ops_layout.py) run on seeds 0, 1, 2; hand-made ones
(examples/make_example_model.py) cover what the converter does not write: zero points, scales where float32 and double multipliers differ, power-of-two scales (TFLite's "pot" ADD path,
which TFLM lacks), multipliers above 1 (MUL's shifted product wraps in int32 as in TFLM), saturation at the
int16 bounds, fused activations, 5-D and 6-D broadcasts, and every int16 value through ADD / SUB / MUL /
SQUARED_DIFFERENCE.

Converter models that also need an operator edgemem lacks (an int16 QUANTIZE or DEQUANTIZE: float edges, the
requantizing QUANTIZE the converter puts before MAXIMUM / MINIMUM) are strict expected failures naming it
(op_check.model_param) until it lands.
"""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "examples"))

import make_example_model as mm  # noqa: E402
from op_check import assert_outputs_match, build_for_host, check_model, model_param  # noqa: E402
from test_ops_binary import BOOL, MB, binary_model, q, select_model  # noqa: E402

from edgemem.errors import UnsupportedModelError  # noqa: E402
from edgemem.reference import model_io_specs, reference_outputs  # noqa: E402
from edgemem.target.host import build_host, run_host  # noqa: E402

OPS_DIR = Path(__file__).resolve().parent / "models" / "ops"
OP = mm.OP
ACT = mm.ACT
I16 = np.int16

# converter-made CONCATENATION / PAD models (gen_layout.py's and gen_binary.py's) run in tests/test_ops_layout.py
FAMILY = ("ADD", "SUB", "MUL", "SQUARED_DIFFERENCE", "MAXIMUM", "MINIMUM", "SELECT_V2")
CONVERTED = [p for p in sorted(OPS_DIR.glob("*int16.tflite")) if p.stem.split("-")[0] in FAMILY]


@pytest.mark.parametrize("path", [model_param(p) for p in CONVERTED])
def test_converted(path, tmp_path):
    assert check_model(path, tmp_path).oracle == "tflm"


def test_converted_models_present():
    stems = {p.stem for p in CONVERTED}
    for op in ("ADD", "SUB", "MUL", "SQUARED_DIFFERENCE", "MAXIMUM", "MINIMUM"):
        assert any(s.startswith(op + "-") and s.endswith("-int16") and "iofloat" not in s for s in stems), op
        assert any(s.startswith(op + "-") and s.endswith("-iofloat-int16") for s in stems), op


# ---------------------------------------------------------------- hand-made: seeds 0, 1, 2

def _check(model: bytes, tmp_path):
    assert check_model(model, tmp_path).oracle == "tflm"


QA, QB, QO = q(0.0013, 0), q(0.0021, 0), q(0.0031, 0)
POT_A, POT_B, POT_O = q(2.0**-10, 0), q(2.0**-12, 0), q(2.0**-11, 0)

CASES = {
    # ADD / SUB: TFLM's general path whatever the scales (power-of-two ones included), any zero points
    "add-pot-scales": (OP.ADD, (2, 3, 8), (2, 3, 8), (2, 3, 8), POT_A, POT_B, POT_O, None),
    "sub-pot-scales-equal": (OP.SUB, (2, 3, 8), (2, 3, 8), (2, 3, 8), POT_A, POT_A, POT_A, None),
    "add-zero-points-relu": (OP.ADD, (1, 4, 5, 3), (3,), (1, 4, 5, 3), q(0.0013, 5), q(0.0021, -7), q(0.0031, 3), ACT.RELU),
    "sub-zero-points-relu6": (OP.SUB, (2, 1, 3, 1), (1, 4, 1, 5), (2, 4, 3, 5), q(0.0013, -300), q(0.0021, 200), q(3e-4, -100), ACT.RELU6),
    "add-saturating": (OP.ADD, (3, 7), (3, 7), (3, 7), QA, QB, q(0.0004, 0), None),
    "sub-saturating-n1to1": (OP.SUB, (3, 7), (1, 7), (3, 7), QA, QB, q(1e-4, 0), ACT.RELU_N1_TO_1),
    "add-6d": (OP.ADD, (2, 1, 2, 1, 3, 1), (1, 2, 1, 2, 1, 4), (2, 2, 2, 2, 3, 4), QA, QB, QO, ACT.RELU6),
    "sub-5d-scalar": (OP.SUB, (), (1, 2, 3, 2, 4), (1, 2, 3, 2, 4), QA, QB, QO, None),
    # MUL: the multiplier above 1 (its left shift wraps the product in int32), below 1, activations
    "mul-multiplier-above-1": (OP.MUL, (4, 16), (4, 16), (4, 16), q(0.01, 0), q(0.02, 0), q(1e-7, 0), None),
    "mul-multiplier-4-relu": (OP.MUL, (4, 16), (16,), (4, 16), q(0.001, 0), q(0.002, 0), q(5e-7, 0), ACT.RELU),
    "mul-relu6-both-sides": (OP.MUL, (2, 1, 3, 1), (1, 4, 1, 5), (2, 4, 3, 5), q(0.3, 0), q(0.2, 0), q(3e-4, 0), ACT.RELU6),
    "mul-n1to1-6d": (OP.MUL, (2, 1, 2, 1, 3, 1), (1, 2, 1, 2, 1, 4), (2, 2, 2, 2, 3, 4), q(0.5, 0), q(0.5, 0), q(0.001, 0), ACT.RELU_N1_TO_1),
    # SQUARED_DIFFERENCE: output multiplier below and above 1
    "sqdiff-same": (OP.SQUARED_DIFFERENCE, (1, 4, 5, 3), (1, 4, 5, 3), (1, 4, 5, 3), q(0.001, 0), q(0.002, 0), q(0.1, 0), None),
    "sqdiff-multiplier-above-1": (OP.SQUARED_DIFFERENCE, (2, 1, 3, 1), (1, 4, 1, 5), (2, 4, 3, 5), q(0.001, 0), q(0.001, 0), q(1e-9, 0), None),
    # MAXIMUM / MINIMUM: raw values
    "max-both-sides": (OP.MAXIMUM, (2, 1, 3, 1), (1, 4, 1, 5), (2, 4, 3, 5), QA, QA, QA, None),
    "min-scalar": (OP.MINIMUM, (1, 3, 4), (), (1, 3, 4), QA, QA, QA, None),
    "max-5d": (OP.MAXIMUM, (1, 2, 1, 3, 4), (2, 2, 1, 1), (1, 2, 2, 3, 4), QA, QA, QA, None),
}


@pytest.mark.parametrize("case", CASES, ids=str)
def test_int16(case, tmp_path):
    op, sa, sb, so, qa, qb, qo, act = CASES[case]
    _check(binary_model(op, sa, sb, so, I16, qa, qb, qo, act), tmp_path)


@pytest.mark.parametrize("case", ["add-first", "sub-second", "mul", "sqdiff", "min"])
def test_int16_const_operand(case, tmp_path):
    rng = np.random.default_rng(7)
    const = rng.integers(-32768, 32768, size=(5,), dtype=np.int16)
    op, act, qo = {
        "add-first": (OP.ADD, ACT.RELU, QO),
        "sub-second": (OP.SUB, ACT.RELU6, q(3e-4, 0)),
        "mul": (OP.MUL, None, q(2e-6, 0)),
        "sqdiff": (OP.SQUARED_DIFFERENCE, None, q(0.05, 0)),
        "min": (OP.MINIMUM, None, QA),
    }[case]
    if case == "add-first":
        model = binary_model(op, (5,), (1, 3, 4, 5), (1, 3, 4, 5), I16, QA, QB, qo, act, a_const=const)
    else:
        model = binary_model(op, (1, 3, 4, 5), (5,), (1, 3, 4, 5), I16, QA, QB, qo, act, b_const=const)
    _check(model, tmp_path)


# ---------------------------------------------------------------- hand-made: every int16 value

def _run_inputs(model: bytes, tmp_path: Path, inputs: list[np.ndarray]):
    path, project = build_for_host(model, tmp_path)
    exe = build_host(project, Path(tmp_path) / "host")
    _, outs = model_io_specs(path)
    raw = run_host(exe, [x.tobytes() for x in inputs], [int(np.prod(s)) * d.itemsize for _, s, d in outs]).outputs
    got = [np.frombuffer(r, dtype=d).reshape(s) for r, (_, s, d) in zip(raw, outs)]
    want, oracle = reference_outputs(path, inputs)
    assert oracle == "tflm"
    assert_outputs_match(got, want, oracle, path.name)


# (op, s1, z1, s2, z2, so, zo, act): float32 and double multipliers differ for the first two (TFLM's package
# rounds as double), the pot ones would take TFLite's power-of-two path (not TFLM's)
EXHAUSTIVE = {
    "add-float-vs-double": (OP.ADD, 0.0026002121157944202, 0, 0.0026535200886428356, 0, 0.00035154155921190977, 0, ACT.NONE),
    "sub-float-vs-double-relu": (OP.SUB, 7.201187690952793e-05, 0, 1.4514166650769766e-05, 0, 0.00014128844486549497, 0, ACT.RELU),
    "add-pot": (OP.ADD, 2.0**-10, 0, 2.0**-12, 0, 2.0**-11, 0, ACT.NONE),
    "mul-wrapping": (OP.MUL, 0.01, 0, 0.02, 0, 1e-7, 0, ACT.NONE),
    "mul-relu6": (OP.MUL, 0.0013, 0, 0.0021, 0, 0.0031, 0, ACT.RELU6),
    "sqdiff-above-1": (OP.SQUARED_DIFFERENCE, 0.001, 0, 0.0005, 0, 1e-8, 0, ACT.NONE),
}


@pytest.mark.parametrize("case", EXHAUSTIVE, ids=str)
def test_int16_every_value(case, tmp_path):
    """Every int16 value as the first operand, against a seeded permutation of them as the second."""
    op, s1, z1, s2, z2, so, zo, act = EXHAUSTIVE[case]
    model = binary_model(op, (256, 256), (256, 256), (256, 256), I16, q(s1, z1), q(s2, z2), q(so, zo), act)
    a = np.arange(-32768, 32768, dtype=np.int16).reshape(256, 256)
    b = np.random.default_rng(11).permutation(a.reshape(-1)).reshape(256, 256)
    _run_inputs(model, tmp_path, [a, b])


# ---------------------------------------------------------------- SELECT_V2

@pytest.mark.parametrize(
    "shapes",
    [((2, 3, 4), (2, 3, 4), (2, 3, 4), (2, 3, 4)), ((1, 3, 1, 5), (2, 1, 4, 5), (5,), (2, 3, 4, 5)), ((), (3, 4), (1, 4), (3, 4))],
    ids=["same", "all-broadcast", "scalar-cond"],
)
def test_select_v2(shapes, tmp_path):
    _check(select_model(I16, *shapes, q(0.001, 0)), tmp_path)


def test_select_v2_from_int8_comparison(tmp_path):
    """A bool condition computed by an int8 LESS choosing between int16 values (a mixed model)."""
    mb = MB()
    xa = mb.tensor("xa", (2, 3, 4), np.int8, q(0.05, -3))
    xb = mb.tensor("xb", (4,), np.int8, q(0.02, 17))
    c = mb.tensor("c", (2, 3, 4), BOOL)
    mb.op(OP.LESS, [xa, xb], [c])
    x = mb.tensor("x", (2, 3, 4), I16, q(0.001, 0))
    z = mb.const("z", np.array([[-32768], [0], [32767]], np.int16), q(0.001, 0))
    y = mb.tensor("y", (2, 3, 4), I16, q(0.001, 0))
    mb.op(OP.SELECT_V2, [c, x, z], [y])
    _check(mb.serialize([xa, xb, x], [y]), tmp_path)


# ---------------------------------------------------------------- CONCATENATION, PAD, PADV2

def _concat_options(axis: int):
    def fn(b):
        mm.tflite.ConcatenationOptionsStart(b)
        mm.tflite.ConcatenationOptionsAddAxis(b, axis)
        return mm.tflite.ConcatenationOptionsEnd(b)

    return mm.OPTS.ConcatenationOptions, fn


def test_concatenation_raw_copy_of_differing_scales(tmp_path):
    """TFLM's int16 CONCATENATION copies raw values even where the scales differ (no requantization); a
    constant input, a negative axis."""
    mb = MB()
    a = mb.tensor("a", (2, 3, 4), I16, q(0.001, 0))
    b = mb.tensor("b", (2, 1, 4), I16, q(0.004, 0))
    c = mb.const("c", np.arange(-16, 0, dtype=np.int16).reshape(2, 2, 4) * 2000, q(0.0005, 0))
    y = mb.tensor("y", (2, 6, 4), I16, q(0.002, 0))
    mb.op(OP.CONCATENATION, [a, b, c], [y], *_concat_options(-2))
    _check(mb.serialize([a, b], [y]), tmp_path)


def test_concatenation_five_inputs_axis0(tmp_path):
    mb = MB()
    xs = [mb.tensor(f"x{i}", (i % 2 + 1, 3, 2), I16, q(0.001, 0)) for i in range(5)]
    y = mb.tensor("y", (7, 3, 2), I16, q(0.001, 0))
    mb.op(OP.CONCATENATION, xs, [y], *_concat_options(0))
    _check(mb.serialize(xs, [y]), tmp_path)


def pad_model(op, x_shape, pads, zp=0, value=None, value_input=False) -> bytes:
    mb = MB()
    x = mb.tensor("x", x_shape, I16, q(0.001, zp))
    p = mb.const("paddings", np.array(pads, np.int32).reshape(len(x_shape), 2))
    out_shape = tuple(d + a + b for d, (a, b) in zip(x_shape, pads))
    y = mb.tensor("y", out_shape, I16, q(0.001, zp))
    inputs, model_inputs = [x, p], [x]
    if value_input:
        v = mb.tensor("v", (1,), I16, q(0.001, zp))
        inputs.append(v)
        model_inputs.append(v)
    elif value is not None:
        inputs.append(mb.const("v", np.array([value], np.int16), q(0.001, zp)))
    mb.op(op, inputs, [y])
    return mb.serialize(model_inputs, [y])


PADS = {
    "pad-hw": (OP.PAD, (1, 4, 5, 3), [(0, 0), (1, 2), (2, 1), (0, 0)], 0, None, False),
    "pad-zero-point-pads-0": (OP.PAD, (1, 4, 5, 3), [(0, 0), (1, 0), (0, 2), (0, 0)], 25, None, False),
    "pad-5d": (OP.PAD, (2, 1, 3, 2, 2), [(1, 0), (0, 2), (1, 1), (0, 0), (2, 1)], 0, None, False),
    "padv2-const": (OP.PADV2, (1, 4, 5, 3), [(0, 0), (2, 1), (0, 3), (1, 1)], 0, -32768, False),
    "padv2-value-input": (OP.PADV2, (2, 3, 4), [(1, 1), (0, 2), (3, 0)], 0, None, True),
}


@pytest.mark.parametrize("case", PADS, ids=str)
def test_pad(case, tmp_path):
    op, shape, pads, zp, value, value_input = PADS[case]
    _check(pad_model(op, shape, pads, zp, value, value_input), tmp_path)


# ---------------------------------------------------------------- what TFLM does not run on int16: refused

def test_comparison_refused(tmp_path):
    """TFLM's int16 GREATER leaves its scaling unset (all false); the other comparisons have no int16 kernel."""
    for op in (OP.GREATER, OP.LESS, OP.EQUAL):
        model = binary_model(op, (2, 3), (2, 3), (2, 3), I16, q(0.001, 0), q(0.002, 0), None, None, BOOL)
        with pytest.raises(UnsupportedModelError, match="int16"):
            build_for_host(model, tmp_path / str(op))


def test_add_n_refused(tmp_path):
    mb = MB()
    xs = [mb.tensor(f"x{i}", (4,), I16, q(0.001, 0)) for i in range(2)]
    y = mb.tensor("y", (4,), I16, q(0.002, 0))
    mb.op(OP.ADD_N, xs, [y])
    with pytest.raises(UnsupportedModelError, match="ADD_N"):
        build_for_host(mb.serialize(xs, [y]), tmp_path)


@pytest.mark.parametrize("op", [OP.MUL, OP.SQUARED_DIFFERENCE])
def test_zero_point_refused(op, tmp_path):
    """TFLM's int16 MUL and SQUARED_DIFFERENCE require zero points 0 (its Prepare fails otherwise)."""
    model = binary_model(op, (2, 3), (2, 3), (2, 3), I16, q(0.001, 3), q(0.002, 0), q(0.003, 0))
    with pytest.raises(UnsupportedModelError, match="zero point"):
        build_for_host(model, tmp_path)


def test_padv2_float_value_refused(tmp_path):
    """The converter's 16x8 PADV2 keeps a float32 pad value, which TFLM refuses too."""
    mb = MB()
    x = mb.tensor("x", (1, 2, 2, 1), I16, q(0.001, 0))
    p = mb.const("paddings", np.array([[0, 0], [1, 0], [0, 1], [0, 0]], np.int32))
    v = mb.const("v", np.array(0.75, np.float32))
    y = mb.tensor("y", (1, 3, 3, 1), I16, q(0.001, 0))
    mb.op(OP.PADV2, [x, p, v], [y])
    with pytest.raises(UnsupportedModelError, match="constant_values"):
        build_for_host(mb.serialize([x], [y]), tmp_path)
