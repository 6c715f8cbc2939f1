"""int16 ("16x8") binary operators and joins (frontend/ops/binary.py, the int16 CONCATENATION / PAD of
frontend/ops/layout.py) against TFLite Micro, bit for bit: ADD, SUB, MUL, SQUARED_DIFFERENCE, MAXIMUM, MINIMUM,
SELECT_V2, CONCATENATION, PAD, PADV2 -- the binary operators TFLM has int16 kernels for (no int16 ADD_N or
comparisons but GREATER, whose int16 Prepare leaves the scaling unset: refused).

Converter-made 16x8 models (tests/models/ops/*-int16.tflite, *-iofloat-int16.tflite, tests/models/gen_binary.py;
the CONCATENATION / PAD ones run in tests/test_ops_layout.py) run on seeds 0, 1, 2. Hand-made ones
(examples/make_example_model.py), several operators side by side in one model to keep the builds few, cover what
the converter does not write: zero points, scales where float32 and double multipliers differ, power-of-two
scales (TFLite's "pot" ADD path, which TFLM lacks), multipliers above 1 (MUL's shifted product wraps in int32 as
in TFLM), saturation at the int16 bounds, fused activations, 5-D and 6-D broadcasts, constant operands, raw
copies of differing scales (CONCATENATION), raw pad values (PAD, PADV2), and every int16 value through ADD /
SUB / MUL / SQUARED_DIFFERENCE.

Converter models that also need an operator edgemem lacks (an int16 QUANTIZE or DEQUANTIZE: float edges, the
requantizing QUANTIZE the converter puts before MAXIMUM / MINIMUM) are strict expected failures naming it
(op_check.model_param) until it lands.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

import numpy as np
import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "examples"))

import make_example_model as mm  # noqa: E402
from op_check import assert_outputs_match, build_for_host, check_model, model_param  # noqa: E402
from test_ops_binary import BOOL, MB, OPTIONS, binary_model, q  # noqa: E402

from edgemem.errors import UnsupportedModelError  # noqa: E402
from edgemem.reference import model_io_specs, reference_outputs  # noqa: E402
from edgemem.target.host import build_host, run_host  # noqa: E402

OPS_DIR = Path(__file__).resolve().parent / "models" / "ops"
OP = mm.OP
ACT = mm.ACT
I16 = np.int16

# converter-made CONCATENATION / PAD models (gen_layout.py's and gen_binary.py's) run in tests/test_ops_layout.py
FAMILY = ("ADD", "SUB", "MUL", "SQUARED_DIFFERENCE", "MAXIMUM", "MINIMUM", "SELECT_V2")
ALL_CONVERTED = [p for p in sorted(OPS_DIR.glob("*int16.tflite")) if p.stem.split("-")[0] in FAMILY]
# float-edged models differ from their int16-edged twins by the QUANTIZE/DEQUANTIZE at the edges (shared code): a
# few stand for all of them (EDGEMEM_ALL_OP_MODELS=1 runs every one)
IOFLOAT = {"ADD-same", "SUB-const-chan-relu", "MAXIMUM-same", "SQUARED_DIFFERENCE-bcast-chan"}
CONVERTED = [p for p in ALL_CONVERTED if "iofloat" not in p.stem or p.stem.split("-iofloat")[0] in IOFLOAT
             or os.environ.get("EDGEMEM_ALL_OP_MODELS") == "1"]  # fmt: skip


@pytest.mark.parametrize("path", [model_param(p) for p in CONVERTED])
def test_converted(path, tmp_path):
    assert check_model(path, tmp_path).oracle == "tflm"


def test_converted_models_present():
    stems = {p.stem for p in ALL_CONVERTED}
    assert {f"{v}-iofloat-int16" for v in IOFLOAT} <= stems
    for op in ("ADD", "SUB", "MUL", "SQUARED_DIFFERENCE", "MAXIMUM", "MINIMUM"):
        assert any(s.startswith(op + "-") and s.endswith("-int16") and "iofloat" not in s for s in stems), op
        assert any(s.startswith(op + "-") and s.endswith("-iofloat-int16") for s in stems), op


# ---------------------------------------------------------------- hand-made: seeds 0, 1, 2

QA, QB, QO = q(0.0013, 0), q(0.0021, 0), q(0.0031, 0)
POT_A, POT_B, POT_O = q(2.0**-10, 0), q(2.0**-12, 0), q(2.0**-11, 0)
CONST5 = np.random.default_rng(7).integers(-32768, 32768, size=(5,), dtype=np.int16)

# name -> (op, a shape, b shape, out shape, qa, qb, qo, act[, a_const, b_const]); grouped by what they exercise,
# each group one model (one build, one TFLM run) whose outputs are the cases in this order
GROUPS = {
    # ADD / SUB: TFLM's general path whatever the scales (power-of-two ones included), any zero points
    "add-sub": {
        "add-pot-scales": (OP.ADD, (2, 3, 8), (2, 3, 8), (2, 3, 8), POT_A, POT_B, POT_O, None),
        "sub-pot-scales-equal": (OP.SUB, (2, 3, 8), (2, 3, 8), (2, 3, 8), POT_A, POT_A, POT_A, None),
        "add-zero-points-relu": (OP.ADD, (1, 4, 5, 3), (3,), (1, 4, 5, 3), q(0.0013, 5), q(0.0021, -7), q(0.0031, 3), ACT.RELU),
        "sub-zero-points-relu6": (OP.SUB, (2, 1, 3, 1), (1, 4, 1, 5), (2, 4, 3, 5), q(0.0013, -300), q(0.0021, 200), q(3e-4, -100), ACT.RELU6),
        "add-zero-points-same-shape": (OP.ADD, (3, 7), (3, 7), (3, 7), q(0.0013, 1000), q(0.0021, -2000), q(0.0031, 77), None),
        "sub-zero-points-same-shape": (OP.SUB, (3, 7), (3, 7), (3, 7), q(0.0013, -1000), q(0.0021, 2000), q(0.0031, -77), None),
        "add-saturating": (OP.ADD, (3, 7), (3, 7), (3, 7), QA, QB, q(0.0004, 0), None),
        "sub-saturating-n1to1": (OP.SUB, (3, 7), (1, 7), (3, 7), QA, QB, q(1e-4, 0), ACT.RELU_N1_TO_1),
        "add-6d": (OP.ADD, (2, 1, 2, 1, 3, 1), (1, 2, 1, 2, 1, 4), (2, 2, 2, 2, 3, 4), QA, QB, QO, ACT.RELU6),
        "sub-5d-scalar": (OP.SUB, (), (1, 2, 3, 2, 4), (1, 2, 3, 2, 4), QA, QB, QO, None),
    },
    # MUL: the multiplier above 1 (its left shift wraps the product in int32) and below; SQUARED_DIFFERENCE's
    # output multiplier below and above 1
    "mul-sqdiff": {
        "mul-multiplier-above-1": (OP.MUL, (4, 16), (4, 16), (4, 16), q(0.01, 0), q(0.02, 0), q(1e-7, 0), None),
        "mul-multiplier-4-relu": (OP.MUL, (4, 16), (16,), (4, 16), q(0.001, 0), q(0.002, 0), q(5e-7, 0), ACT.RELU),
        "mul-relu6-both-sides": (OP.MUL, (2, 1, 3, 1), (1, 4, 1, 5), (2, 4, 3, 5), q(0.3, 0), q(0.2, 0), q(3e-4, 0), ACT.RELU6),
        "mul-n1to1-6d": (OP.MUL, (2, 1, 2, 1, 3, 1), (1, 2, 1, 2, 1, 4), (2, 2, 2, 2, 3, 4), q(0.5, 0), q(0.5, 0), q(0.001, 0), ACT.RELU_N1_TO_1),
        "sqdiff-same": (OP.SQUARED_DIFFERENCE, (1, 4, 5, 3), (1, 4, 5, 3), (1, 4, 5, 3), q(0.001, 0), q(0.002, 0), q(0.1, 0), None),
        "sqdiff-multiplier-above-1": (OP.SQUARED_DIFFERENCE, (2, 1, 3, 1), (1, 4, 1, 5), (2, 4, 3, 5), q(0.001, 0), q(0.001, 0), q(1e-9, 0), None),
    },
    # MAXIMUM / MINIMUM: raw values, whatever the quantization; constant operands (flash) of every operator
    "max-min-const": {
        "max-both-sides": (OP.MAXIMUM, (2, 1, 3, 1), (1, 4, 1, 5), (2, 4, 3, 5), QA, QA, QA, None),
        "min-scalar": (OP.MINIMUM, (1, 3, 4), (), (1, 3, 4), QA, QA, QA, None),
        "max-5d": (OP.MAXIMUM, (1, 2, 1, 3, 4), (2, 2, 1, 1), (1, 2, 2, 3, 4), QA, QB, QO, None),
        "const-add-first": (OP.ADD, (5,), (1, 3, 4, 5), (1, 3, 4, 5), QA, QB, QO, ACT.RELU, CONST5, None),
        "const-sub": (OP.SUB, (1, 3, 4, 5), (5,), (1, 3, 4, 5), QA, QB, q(3e-4, 0), ACT.RELU6, None, CONST5),
        "const-mul": (OP.MUL, (1, 3, 4, 5), (5,), (1, 3, 4, 5), QA, QB, q(2e-6, 0), None, None, CONST5),
        "const-sqdiff": (OP.SQUARED_DIFFERENCE, (1, 3, 4, 5), (5,), (1, 3, 4, 5), QA, QB, q(0.05, 0), None, None, CONST5),
        "const-min": (OP.MINIMUM, (1, 3, 4, 5), (5,), (1, 3, 4, 5), QA, QB, QA, None, None, CONST5),
    },
}


def _binary(mb, tag, op, sa, sb, so, qa, qb, qo, act, a_const=None, b_const=None):
    """Add one binary operator to ``mb``: (its non-constant inputs, its output)."""
    a = mb.const(f"{tag}_a", a_const, qa) if a_const is not None else mb.tensor(f"{tag}_a", sa, I16, qa)
    b = mb.const(f"{tag}_b", b_const, qb) if b_const is not None else mb.tensor(f"{tag}_b", sb, I16, qb)
    y = mb.tensor(f"{tag}_y", so, I16, qo)
    opts = OPTIONS[op](act if act is not None else ACT.NONE) if op in OPTIONS else (0, None)
    mb.op(op, [a, b], [y], *opts)
    return [t for t, c in ((a, a_const), (b, b_const)) if c is None], y


def group_model(cases: dict) -> bytes:
    """One model computing every case of ``cases`` side by side (inputs and outputs in the cases' order)."""
    mb = MB()
    inputs, outputs = [], []
    for tag, case in cases.items():
        ins, out = _binary(mb, tag.replace("-", "_"), *case)
        inputs += ins
        outputs.append(out)
    return mb.serialize(inputs, outputs)


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


# (op, s1, s2, so, act): float32 and double multipliers differ for the first two (TFLM's package rounds as
# double); the pot one would take TFLite's power-of-two path (not TFLM's); multipliers above 1
EXHAUSTIVE = {
    "add-float-vs-double": (OP.ADD, 0.0026002121157944202, 0.0026535200886428356, 0.00035154155921190977, ACT.NONE),
    "sub-float-vs-double-relu": (OP.SUB, 7.201187690952793e-05, 1.4514166650769766e-05, 0.00014128844486549497, ACT.RELU),
    "add-pot": (OP.ADD, 2.0**-10, 2.0**-12, 2.0**-11, ACT.NONE),
    "mul-wrapping": (OP.MUL, 0.01, 0.02, 1e-7, ACT.NONE),
    "mul-relu6": (OP.MUL, 0.0013, 0.0021, 0.0031, ACT.RELU6),
    "sqdiff-above-1": (OP.SQUARED_DIFFERENCE, 0.001, 0.0005, 1e-8, ACT.NONE),
}


def test_every_value(tmp_path):
    """Each case of EXHAUSTIVE (one model, side by side) on every int16 value as the first operand, against a
    seeded permutation of them as the second."""
    cases = {k: (op, (256, 256), (256, 256), (256, 256), q(s1, 0), q(s2, 0), q(so, 0), act) for k, (op, s1, s2, so, act) in EXHAUSTIVE.items()}
    a = np.arange(-32768, 32768, dtype=np.int16).reshape(256, 256)
    rng = np.random.default_rng(11)
    inputs = []
    for _ in cases:
        inputs += [a, rng.permutation(a.reshape(-1)).reshape(256, 256)]
    _run_inputs(group_model(cases), tmp_path, inputs)


# ---------------------------------------------------------------- SELECT_V2, CONCATENATION, PAD, PADV2

def select_models() -> bytes:
    """SELECT_V2 on int16 values: same shapes, broadcasting of all three operands, a scalar condition."""
    mb = MB()
    inputs, outputs = [], []
    for i, (c_shape, x_shape, z_shape, out_shape) in enumerate((
        ((2, 3, 4), (2, 3, 4), (2, 3, 4), (2, 3, 4)),
        ((1, 3, 1, 5), (2, 1, 4, 5), (5,), (2, 3, 4, 5)),
        ((), (3, 4), (1, 4), (3, 4)),
    )):
        c = mb.tensor(f"c{i}", c_shape, BOOL)
        x = mb.tensor(f"x{i}", x_shape, I16, q(0.001, 0))
        z = mb.tensor(f"z{i}", z_shape, I16, q(0.001, 0))
        y = mb.tensor(f"y{i}", out_shape, I16, q(0.001, 0))
        mb.op(OP.SELECT_V2, [c, x, z], [y])
        inputs += [c, x, z]
        outputs.append(y)
    return mb.serialize(inputs, outputs)


def select_from_int8_comparison() -> bytes:
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
    return mb.serialize([xa, xb, x], [y])


def mixed_int8_int16() -> bytes:
    """int8 in and out, int16 between (QUANTIZE joins): int16 ADD, MUL, SUB and PAD inside a model integerize
    rewrites (its int8 tensors), one int8 ADD alongside."""
    mb = MB()
    x8 = mb.tensor("x8", (1, 4, 4, 3), np.int8, q(0.03, -5))
    x16 = mb.tensor("x16", (1, 4, 4, 3), I16, q(0.001, 0))
    mb.op(OP.QUANTIZE, [x8], [x16])
    c = mb.const("c", np.array([-20000, 3, 31000], np.int16), q(0.0004, 0))
    s16 = mb.tensor("s16", (1, 4, 4, 3), I16, q(0.0015, 0))
    mb.op(OP.ADD, [x16, c], [s16], *OPTIONS[OP.ADD](ACT.RELU6))
    m16 = mb.tensor("m16", (1, 4, 4, 3), I16, q(0.002, 0))
    mb.op(OP.MUL, [s16, x16], [m16], *OPTIONS[OP.MUL](ACT.NONE))
    d16 = mb.tensor("d16", (1, 4, 4, 3), I16, q(0.002, 0))
    mb.op(OP.SUB, [m16, s16], [d16], *OPTIONS[OP.SUB](ACT.NONE))
    p16 = mb.tensor("p16", (1, 6, 5, 3), I16, q(0.002, 0))
    mb.op(OP.PAD, [d16, mb.const("pads", np.array([[0, 0], [1, 1], [0, 1], [0, 0]], np.int32))], [p16])
    y8 = mb.tensor("y8", (1, 6, 5, 3), np.int8, q(0.02, 3))
    mb.op(OP.QUANTIZE, [p16], [y8])
    z8 = mb.tensor("z8", (1, 4, 4, 3), np.int8, q(0.05, -1))
    mb.op(OP.ADD, [x8, x8], [z8], *OPTIONS[OP.ADD](ACT.NONE))
    return mb.serialize([x8], [y8, z8])


def _concat_options(axis: int):
    def fn(b):
        mm.tflite.ConcatenationOptionsStart(b)
        mm.tflite.ConcatenationOptionsAddAxis(b, axis)
        return mm.tflite.ConcatenationOptionsEnd(b)

    return mm.OPTS.ConcatenationOptions, fn


def concat_models() -> bytes:
    """TFLM's int16 CONCATENATION copies raw values even where the scales differ (no requantization): three
    inputs of different scales, one constant, a negative axis; and five inputs along axis 0."""
    mb = MB()
    a = mb.tensor("a", (2, 3, 4), I16, q(0.001, 0))
    b = mb.tensor("b", (2, 1, 4), I16, q(0.004, 0))
    c = mb.const("c", np.arange(-16, 0, dtype=np.int16).reshape(2, 2, 4) * 2000, q(0.0005, 0))
    y = mb.tensor("y", (2, 6, 4), I16, q(0.002, 0))
    mb.op(OP.CONCATENATION, [a, b, c], [y], *_concat_options(-2))
    xs = [mb.tensor(f"x{i}", (i % 2 + 1, 3, 2), I16, q(0.001, 0)) for i in range(5)]
    y5 = mb.tensor("y5", (7, 3, 2), I16, q(0.001, 0))
    mb.op(OP.CONCATENATION, xs, [y5], *_concat_options(0))
    return mb.serialize([a, b, *xs], [y, y5])


# (op, input shape, paddings, zero point, constant pad value, pad value a model input)
PADS = {
    "pad-hw": (OP.PAD, (1, 4, 5, 3), [(0, 0), (1, 2), (2, 1), (0, 0)], 0, None, False),
    "pad-zero-point-pads-0": (OP.PAD, (1, 4, 5, 3), [(0, 0), (1, 0), (0, 2), (0, 0)], 25, None, False),
    "pad-5d": (OP.PAD, (2, 1, 3, 2, 2), [(1, 0), (0, 2), (1, 1), (0, 0), (2, 1)], 0, None, False),
    "padv2-const": (OP.PADV2, (1, 4, 5, 3), [(0, 0), (2, 1), (0, 3), (1, 1)], 0, -32768, False),
    "padv2-value-input": (OP.PADV2, (2, 3, 4), [(1, 1), (0, 2), (3, 0)], 0, None, True),
}


def pad_models() -> bytes:
    """PAD pads with the raw 0, not the zero point; PADV2 with its raw value, a constant or a model input."""
    mb = MB()
    inputs, outputs = [], []
    for i, (op, x_shape, pads, zp, value, value_input) in enumerate(PADS.values()):
        x = mb.tensor(f"x{i}", x_shape, I16, q(0.001, zp))
        p = mb.const(f"paddings{i}", np.array(pads, np.int32))
        y = mb.tensor(f"y{i}", tuple(d + lo + hi for d, (lo, hi) in zip(x_shape, pads)), I16, q(0.001, zp))
        operands = [x, p]
        inputs.append(x)
        if value_input:
            v = mb.tensor(f"v{i}", (1,), I16, q(0.001, zp))
            operands.append(v)
            inputs.append(v)
        elif value is not None:
            operands.append(mb.const(f"v{i}", np.array([value], np.int16), q(0.001, zp)))
        mb.op(op, operands, [y])
        outputs.append(y)
    return mb.serialize(inputs, outputs)


# every hand-made model run on seeds 0, 1, 2 (benchmarks/ops.py can tabulate them too): name -> bytes builder
HANDMADE = {
    **{name: (lambda cases=cases: group_model(cases)) for name, cases in GROUPS.items()},
    "select": select_models,
    "select-from-int8-comparison": select_from_int8_comparison,
    "mixed-int8-int16": mixed_int8_int16,
    "concatenation": concat_models,
    "pad": pad_models,
}


@pytest.mark.parametrize("name", HANDMADE, ids=str)
def test_handmade(name, tmp_path):
    assert check_model(HANDMADE[name](), tmp_path).oracle == "tflm"


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
