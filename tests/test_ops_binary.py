"""Binary family (frontend/ops/binary.py): every operator x type x variant built for the host and compared with
TFLite Micro (bit-exact for integer and bool outputs, 1e-5 relative for float), on converter-made models
(tests/models/ops/, written by tests/models/gen_binary.py) and hand-made ones for the broadcast and
quantization edge cases."""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pytest
import tflite

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "examples"))

import make_example_model as mm  # noqa: E402
from op_check import SEEDS, assert_outputs_match, build_for_host  # noqa: E402

from edgemem.errors import UnsupportedModelError  # noqa: E402
from edgemem.reference import model_io_specs, seeded_inputs, tflm_outputs  # noqa: E402
from edgemem.target.host import build_host, run_host  # noqa: E402

OPS_DIR = Path(__file__).resolve().parent / "models" / "ops"
OP = mm.OP
ACT = mm.ACT
BOOL = np.bool_
TT_OF = {np.dtype(np.bool_): tflite.TensorType.BOOL}


def _run(model, tmp_path: Path, inputs_for) -> None:
    """Build for the host (ASan/UBSan, -Werror), run each input set, compare with TFLM bit for bit (float
    within 1e-5). TFLM runs in this process (op_check.check_model starts a child per seed, 3x slower): every
    model here is one TFLM is known to run."""
    path, project = build_for_host(model, tmp_path)
    exe = build_host(project, Path(tmp_path) / "host")
    _, outs = model_io_specs(path)
    for inputs in inputs_for(path):
        raw = run_host(exe, [x.tobytes() for x in inputs], [int(np.prod(s)) * d.itemsize for _, s, d in outs]).outputs
        got = [np.frombuffer(r, dtype=d).reshape(s) for r, (_, s, d) in zip(raw, outs)]
        assert_outputs_match(got, tflm_outputs(path, inputs), "tflm", path.name)


def check_model(model, tmp_path: Path, seeds=SEEDS) -> None:
    _run(model, tmp_path, lambda path: [seeded_inputs(path, seed) for seed in seeds])


# ---------------------------------------------------------------- converter-made models

FAMILY = (
    "SUB", "SQUARED_DIFFERENCE", "DIV", "MAXIMUM", "MINIMUM", "ADD_N", "FLOOR_DIV", "FLOOR_MOD", "EQUAL",
    "NOT_EQUAL", "LESS", "LESS_EQUAL", "GREATER", "GREATER_EQUAL", "LOGICAL_AND", "LOGICAL_OR", "LOGICAL_NOT",
    "SELECT_V2",
)  # fmt: skip
FLOAT_ADD_MUL = ("ADD-bcast-chan-relu", "ADD-bcast-row-col-relu6", "ADD-const-scalar", "MUL-bcast-chan-relu", "MUL-bcast-row-col", "MUL-const-chan-relu6")

# int8 models in which the converter kept float operators between DEQUANTIZE and QUANTIZE (FLOOR_MOD,
# ADD_N, SELECT_V2 with NEG, FLOOR_DIV): edgemem runs them as float islands (passes/integerize.py), compared
# with TFLM like the others.
FLOAT_ISLANDS = {
    "ADD_N-add-n4-int8": "float ADD_N, MUL, RELU between DEQUANTIZE/QUANTIZE",
    "ADD_N-add-n4-iofloat-int8": "float ADD_N, MUL between DEQUANTIZE/QUANTIZE",
    "FLOOR_MOD-same-int8": "float FLOOR_MOD between DEQUANTIZE/QUANTIZE",
    "FLOOR_MOD-same-iofloat-int8": "float FLOOR_MOD between DEQUANTIZE/QUANTIZE",
    "FLOOR_DIV-same-int8": "float FLOOR_DIV between DEQUANTIZE/QUANTIZE",
    "FLOOR_DIV-same-iofloat-int8": "float FLOOR_DIV between DEQUANTIZE/QUANTIZE",
    "SELECT_V2-bcast-chan-int8": "float NEG, GREATER, SELECT_V2 between DEQUANTIZE/QUANTIZE",
    "SELECT_V2-bcast-chan-iofloat-int8": "float NEG, GREATER, SELECT_V2 after QUANTIZE/DEQUANTIZE",
}


def _family_models() -> list[Path]:
    found = []
    for path in sorted(OPS_DIR.glob("*.tflite")):
        stem = path.stem
        if stem.endswith("int16"):
            continue  # 16x8 models: tests/test_ops_int16_binary.py
        op = stem.split("-")[0]
        if op in FAMILY or any(stem.startswith(v + "-") for v in FLOAT_ADD_MUL):
            found.append(path)
    return found


CONVERTED = _family_models()


@pytest.mark.parametrize("path", CONVERTED, ids=lambda p: p.stem)
def test_converted(path, tmp_path):
    check_model(path, tmp_path)


def test_float_island_models_are_among_the_converted():
    assert FLOAT_ISLANDS.keys() <= {p.stem for p in CONVERTED}


def test_converted_models_present():
    stems = {p.stem for p in CONVERTED}
    for op in FAMILY:
        assert any(s.startswith(op + "-") for s in stems), op
    assert len(stems) >= 80


# ---------------------------------------------------------------- hand-made models

class MB(mm.ModelBuilder):
    """ModelBuilder that also writes bool tensors (TFLite type BOOL, one byte per element)."""

    def tensor(self, name, shape, dtype, quant=None, signature=None, variable=False):
        if np.dtype(dtype) == np.bool_:
            self.tensors.append(mm._Tensor(name, tuple(int(d) for d in shape), tflite.TensorType.BOOL, 0, quant, None, variable))
            return len(self.tensors) - 1
        return super().tensor(name, shape, dtype, quant, signature, variable)

    def const(self, name, array, quant=None):
        array = np.ascontiguousarray(array)
        if array.dtype != np.bool_:
            return super().const(name, array, quant)
        self.buffers.append(array.astype(np.uint8).tobytes())
        self.tensors.append(mm._Tensor(name, tuple(array.shape), tflite.TensorType.BOOL, len(self.buffers) - 1, quant))
        return len(self.tensors) - 1


def _opts(name: str, act=None):
    def fn(b):
        getattr(tflite, name + "Start")(b)
        if act is not None:
            getattr(tflite, name + "AddFusedActivationFunction")(b, act)
        return getattr(tflite, name + "End")(b)

    return getattr(mm.OPTS, name), fn


OPTIONS = {
    OP.ADD: lambda act: mm.add_options(act),
    OP.SUB: lambda act: _opts("SubOptions", act),
    OP.MUL: lambda act: _opts("MulOptions", act),
    OP.DIV: lambda act: _opts("DivOptions", act),
}


def q(scale, zp):
    return mm.qparams([scale], [zp])


def binary_model(op, a_shape, b_shape, out_shape, dtype, qa=None, qb=None, qo=None, act=None, out_dtype=None, b_const=None, a_const=None):
    mb = MB()
    a = mb.const("a", a_const, qa) if a_const is not None else mb.tensor("a", a_shape, dtype, qa)
    b = mb.const("b", b_const, qb) if b_const is not None else mb.tensor("b", b_shape, dtype, qb)
    y = mb.tensor("y", out_shape, out_dtype or dtype, qo)
    opts = OPTIONS[op](act if act is not None else ACT.NONE) if op in OPTIONS else (0, None)
    mb.op(op, [a, b], [y], *opts)
    inputs = [t for t, c in ((a, a_const), (b, b_const)) if c is None]
    return mb.serialize(inputs, [y])


QA, QB, QO = q(0.05, -3), q(0.02, 17), q(0.07, 5)
EDGE_A, EDGE_B, EDGE_O = q(0.013, -128), q(0.11, 127), q(0.09, -128)

INT8_CASES = {
    # SUB
    "sub-same": (OP.SUB, (1, 4, 5, 3), (1, 4, 5, 3), (1, 4, 5, 3), QA, QB, QO, None),
    "sub-relu-chan": (OP.SUB, (1, 4, 5, 3), (3,), (1, 4, 5, 3), QA, QB, QO, ACT.RELU),
    "sub-relu6-both-sides": (OP.SUB, (2, 1, 3, 1), (1, 4, 1, 5), (2, 4, 3, 5), QA, QB, QO, ACT.RELU6),
    "sub-n1to1-scalar": (OP.SUB, (), (1, 3, 4), (1, 3, 4), q(0.01, 0), q(0.01, 3), q(0.008, -2), ACT.RELU_N1_TO_1),
    "sub-5d": (OP.SUB, (1, 2, 1, 3, 4), (2, 2, 1, 1), (1, 2, 2, 3, 4), QA, QB, QO, None),
    "sub-zp-extremes": (OP.SUB, (3, 7), (3, 7), (3, 7), EDGE_A, EDGE_B, EDGE_O, None),
    "sub-equal-scales": (OP.SUB, (3, 7), (1, 7), (3, 7), q(0.05, 0), q(0.05, 0), q(0.1, 0), None),
    # SQUARED_DIFFERENCE
    "sqdiff-same": (OP.SQUARED_DIFFERENCE, (1, 4, 5, 3), (1, 4, 5, 3), (1, 4, 5, 3), QA, QB, q(0.5, -128), None),
    "sqdiff-both-sides": (OP.SQUARED_DIFFERENCE, (2, 1, 3, 1), (1, 4, 1, 5), (2, 4, 3, 5), QA, QB, q(0.2, -100), None),
    "sqdiff-scalar-zp-extremes": (OP.SQUARED_DIFFERENCE, (1, 3, 4), (), (1, 3, 4), EDGE_A, EDGE_B, q(3.0, -128), None),
    # MAXIMUM / MINIMUM (raw int8)
    "max-both-sides": (OP.MAXIMUM, (2, 1, 3, 1), (1, 4, 1, 5), (2, 4, 3, 5), QA, QA, QA, None),
    "min-scalar": (OP.MINIMUM, (1, 3, 4), (), (1, 3, 4), QA, QA, QA, None),
    "max-5d": (OP.MAXIMUM, (1, 2, 1, 3, 4), (2, 2, 1, 1), (1, 2, 2, 3, 4), QA, QA, QA, None),
    # DIV: the divisor a tensor (256 x 256 table), values covered by broadcasting
    "div-all-pairs": (OP.DIV, (1, 256), (256, 1), (256, 256), q(4 / 255, 3), q(10 / 255, -20), q(8 / 255, 5), None),
    "div-relu6": (OP.DIV, (16, 16), (16, 16), (16, 16), q(0.02, -128), q(0.01, 0), q(0.03, -128), ACT.RELU6),
}
CMP_OPS = {"EQUAL": OP.EQUAL, "NOT_EQUAL": OP.NOT_EQUAL, "LESS": OP.LESS, "LESS_EQUAL": OP.LESS_EQUAL, "GREATER": OP.GREATER, "GREATER_EQUAL": OP.GREATER_EQUAL}
for name, code in CMP_OPS.items():
    INT8_CASES[f"{name.lower()}-same-scale"] = (code, (2, 3, 8), (2, 3, 8), (2, 3, 8), q(0.02, -1), q(0.02, -1), None, None)
    INT8_CASES[f"{name.lower()}-both-sides"] = (code, (2, 1, 3, 1), (1, 4, 1, 5), (2, 4, 3, 5), EDGE_A, q(0.05, 127), None, None)
    INT8_CASES[f"{name.lower()}-scalar"] = (code, (1, 3, 4), (), (1, 3, 4), q(0.3, 10), q(0.15, 20), None, None)


@pytest.mark.parametrize("case", INT8_CASES, ids=str)
def test_int8(case, tmp_path):
    op, sa, sb, so, qa, qb, qo, act = INT8_CASES[case]
    out_dtype = BOOL if op in CMP_OPS.values() else None
    check_model(binary_model(op, sa, sb, so, np.int8, qa, qb, qo, act, out_dtype), tmp_path)


@pytest.mark.parametrize(
    "case",
    ["sub", "sqdiff", "max", "equal", "div", "div-relu"],
)
def test_int8_const_operand(case, tmp_path):
    rng = np.random.default_rng(7)
    chan = rng.integers(-128, 128, size=(5,), dtype=np.int8)
    op, act, out_dtype, qo = {
        "sub": (OP.SUB, ACT.RELU, None, QO),
        "sqdiff": (OP.SQUARED_DIFFERENCE, None, None, q(0.4, -128)),
        "max": (OP.MAXIMUM, None, None, QA),
        "equal": (OP.GREATER_EQUAL, None, BOOL, None),
        "div": (OP.DIV, None, None, q(0.2, 0)),
        "div-relu": (OP.DIV, ACT.RELU, None, q(0.1, -50)),
    }[case]
    if op == OP.DIV:
        chan[chan == 17] = 18  # the divisor's zero point would be a division by zero
    check_model(binary_model(op, (1, 3, 4, 5), (5,), (1, 3, 4, 5), np.int8, QA, QB, qo, act, out_dtype, b_const=chan), tmp_path)


def test_int8_const_first_operand(tmp_path):
    """0.5 - x: the constant first, the activation second."""
    const = np.array([[37], [-90], [5]], np.int8)
    check_model(binary_model(OP.SUB, (3, 1), (2, 3, 6), (2, 3, 6), np.int8, QA, QB, QO, ACT.RELU6, a_const=const), tmp_path)


def _run_with_inputs(model: bytes, tmp_path: Path, inputs: list[np.ndarray]):
    _run(model, tmp_path, lambda path: [inputs])


DIV_PARAMS = {
    "shift4": (4 / 255, 3, 10 / 255, -20, 8 / 255, 5, ACT.NONE),
    "shift12-relu": (0.1, 0, 0.003, 10, 0.01, -3, ACT.RELU),
    "shift-3-zp-edges": (0.01, 127, 0.05, -128, 2.0, -128, ACT.NONE),
}


@pytest.mark.parametrize("params", DIV_PARAMS.values(), ids=DIV_PARAMS.keys())
def test_int8_div_exhaustive(params, tmp_path):
    """Every (dividend, divisor) int8 pair, the divisor's zero point and the small-over-large quotients where
    TFLM's shifts leave C's defined range included."""
    s1, z1, s2, z2, so, zo, act = params
    model = binary_model(OP.DIV, (1, 256), (256, 1), (256, 256), np.int8, q(s1, z1), q(s2, z2), q(so, zo), act)
    values = np.arange(-128, 128, dtype=np.int8)
    _run_with_inputs(model, tmp_path, [values.reshape(1, 256), values.reshape(256, 1)])


@pytest.mark.parametrize("kind", ["sub", "sqdiff", "cmp"])
def test_int8_exhaustive(kind, tmp_path):
    op, qo, out_dtype = {"sub": (OP.SUB, QO, None), "sqdiff": (OP.SQUARED_DIFFERENCE, q(0.3, -128), None), "cmp": (OP.LESS_EQUAL, None, BOOL)}[kind]
    model = binary_model(op, (1, 256), (256, 1), (256, 256), np.int8, q(0.031, 7), q(0.017, -9), qo, None, out_dtype)
    values = np.arange(-128, 128, dtype=np.int8)
    _run_with_inputs(model, tmp_path, [values.reshape(1, 256), values.reshape(256, 1)])


def add_n_model(n: int) -> bytes:
    """int8 ADD_N of n inputs sharing one quantization (zero points at the extremes for n = 5)."""
    mb = MB()
    qi = q(0.04, 25) if n != 5 else q(0.013, -128)
    xs = [mb.tensor(f"x{i}", (2, 3, 7), np.int8, qi) for i in range(n)]
    y = mb.tensor("y", (2, 3, 7), np.int8, q(0.09, -7) if n != 5 else q(0.05, 127))
    mb.op(OP.ADD_N, xs, [y])
    return mb.serialize(xs, [y])


@pytest.mark.parametrize("n", [2, 3, 5])
def test_int8_add_n(n, tmp_path):
    check_model(add_n_model(n), tmp_path)


def test_int8_comparison_scale_of_one_refused(tmp_path):
    model = binary_model(OP.LESS, (2, 3), (2, 3), (2, 3), np.int8, q(1.5, 0), q(0.1, 0), None, None, BOOL)
    with pytest.raises(UnsupportedModelError, match="not in \\(0, 1\\)"):
        build_for_host(model, tmp_path)


def test_int8_add_n_mixed_quantization_refused(tmp_path):
    mb = MB()
    xs = [mb.tensor("x0", (4,), np.int8, q(0.1, 0)), mb.tensor("x1", (4,), np.int8, q(0.2, 0))]
    y = mb.tensor("y", (4,), np.int8, q(0.3, 0))
    mb.op(OP.ADD_N, xs, [y])
    with pytest.raises(UnsupportedModelError, match="ADD_N"):
        build_for_host(mb.serialize(xs, [y]), tmp_path)


# ---------------------------------------------------------------- SELECT_V2 and the logical operators

def select_model(dtype, c_shape, x_shape, y_shape, out_shape, quant=None):
    mb = MB()
    c = mb.tensor("c", c_shape, BOOL)
    x = mb.tensor("x", x_shape, dtype, quant)
    z = mb.tensor("z", y_shape, dtype, quant)
    y = mb.tensor("y", out_shape, dtype, quant)
    mb.op(OP.SELECT_V2, [c, x, z], [y])
    return mb.serialize([c, x, z], [y])


@pytest.mark.parametrize("dtype", [np.int8, np.float32], ids=lambda d: np.dtype(d).name)  # TFLM: no int32
@pytest.mark.parametrize(
    "shapes",
    [((2, 3, 4), (2, 3, 4), (2, 3, 4), (2, 3, 4)), ((1, 3, 1, 5), (2, 1, 4, 5), (5,), (2, 3, 4, 5)), ((), (3, 4), (1, 4), (3, 4))],
    ids=["same", "all-broadcast", "scalar-cond"],
)
def test_select_v2(dtype, shapes, tmp_path):
    quant = q(0.05, -3) if dtype == np.int8 else None
    check_model(select_model(dtype, *shapes, quant), tmp_path)


@pytest.mark.parametrize("dtype", [np.int8, np.float32], ids=lambda d: np.dtype(d).name)
def test_select_v2_const_condition(dtype, tmp_path):
    """A constant bool condition (flash) and a LOGICAL_OR with a constant bool operand."""
    quant = q(0.05, -3) if dtype == np.int8 else None
    mb = MB()
    cond = mb.const("cond", np.array([[True], [False], [True]]))
    mask = mb.const("mask", np.array([False, True, False, False]))
    c = mb.tensor("c", (3, 4), BOOL)
    mb.op(OP.LOGICAL_OR, [cond, mask], [c])
    x = mb.tensor("x", (2, 3, 4), dtype, quant)
    z = mb.tensor("z", (4,), dtype, quant)
    y = mb.tensor("y", (2, 3, 4), dtype, quant)
    mb.op(OP.SELECT_V2, [c, x, z], [y])
    check_model(mb.serialize([x, z], [y]), tmp_path)


@pytest.mark.parametrize("name", ["and", "or", "not", "equal", "not_equal"])
def test_bool_io(name, tmp_path):
    """bool model inputs and outputs: TVM's ops in a model without int8 tensors."""
    mb = MB()
    a = mb.tensor("a", (2, 3, 4), BOOL)
    if name == "not":
        y = mb.tensor("y", (2, 3, 4), BOOL)
        mb.op(OP.LOGICAL_NOT, [a], [y])
        model = mb.serialize([a], [y])
    else:
        b = mb.tensor("b", (3, 1), BOOL)
        y = mb.tensor("y", (2, 3, 4), BOOL)
        mb.op({"and": OP.LOGICAL_AND, "or": OP.LOGICAL_OR, "equal": OP.EQUAL, "not_equal": OP.NOT_EQUAL}[name], [a, b], [y])
        model = mb.serialize([a, b], [y])
    check_model(model, tmp_path)


def test_kernels_inside_int8_model(tmp_path):
    """A model with int8 tensors goes through integerize, which keeps only edgemem's kernels: there the bool,
    float32 and int32 operators of this family are edgemem kernels too (LOGICAL_*, SELECT_V2 on float,
    int32 ADD/SUB/MUL/SQUARED_DIFFERENCE with wrapping)."""
    mb = MB()
    xa = mb.tensor("xa", (2, 3, 4), np.int8, QA)
    xb = mb.tensor("xb", (4,), np.int8, QB)
    lt = mb.tensor("lt", (2, 3, 4), BOOL)
    mb.op(OP.LESS, [xa, xb], [lt])
    c = mb.tensor("c", (2, 3, 4), BOOL)
    both = mb.tensor("both", (2, 3, 4), BOOL)
    mb.op(OP.LOGICAL_AND, [lt, c], [both])
    nb = mb.tensor("nb", (2, 3, 4), BOOL)
    mb.op(OP.LOGICAL_NOT, [both], [nb])
    either = mb.tensor("either", (2, 3, 4), BOOL)
    mb.op(OP.LOGICAL_OR, [nb, lt], [either])
    fa = mb.tensor("fa", (2, 3, 4), np.float32)
    fb = mb.tensor("fb", (3, 1), np.float32)
    fsel = mb.tensor("fsel", (2, 3, 4), np.float32)
    mb.op(OP.SELECT_V2, [either, fa, fb], [fsel])
    ia = mb.tensor("ia", (2, 3, 4), np.int32)
    ib = mb.tensor("ib", (4,), np.int32)
    outs = [either, fsel]
    for code, act in ((OP.ADD, ACT.RELU), (OP.SUB, ACT.RELU), (OP.MUL, ACT.RELU6), (OP.SQUARED_DIFFERENCE, None)):
        r = mb.tensor(f"i{code}", (2, 3, 4), np.int32)
        opts = OPTIONS[code](act) if code in OPTIONS else (0, None)
        mb.op(code, [ia, ib], [r], *opts)
        outs.append(r)
    check_model(mb.serialize([xa, xb, c, fa, fb, ia, ib], outs), tmp_path)


# ---------------------------------------------------------------- float32 and int32 through TVM

FLOAT_OPS = {
    "add": (OP.ADD, ACT.RELU6), "sub": (OP.SUB, ACT.RELU_N1_TO_1), "mul": (OP.MUL, ACT.RELU), "div": (OP.DIV, ACT.RELU),
    "sqdiff": (OP.SQUARED_DIFFERENCE, None), "max": (OP.MAXIMUM, None), "min": (OP.MINIMUM, None),
    "floor_div": (OP.FLOOR_DIV, None), "floor_mod": (OP.FLOOR_MOD, None),
}  # fmt: skip


@pytest.mark.parametrize("name", FLOAT_OPS)
def test_float32(name, tmp_path):
    op, act = FLOAT_OPS[name]
    check_model(binary_model(op, (2, 1, 3, 1), (1, 4, 1, 5), (2, 4, 3, 5), np.float32, act=act), tmp_path)


INT32_CASES = [(n, None) for n in ("add", "sub", "mul", "div", "sqdiff", "max", "min")] + [(n, ACT.RELU) for n in ("add", "sub", "mul", "div")]


@pytest.mark.parametrize("name,act", INT32_CASES, ids=[f"{n}-{'relu' if a else 'none'}" for n, a in INT32_CASES])
def test_int32(name, act, tmp_path):
    """Full-range int32 inputs: ADD/SUB/MUL/SQUARED_DIFFERENCE overflow and wrap as in TFLM (WrappingMul &c.)."""
    op = FLOAT_OPS[name][0]
    check_model(binary_model(op, (1, 3, 4, 5), (5,), (1, 3, 4, 5), np.int32, act=act), tmp_path)


@pytest.mark.parametrize("dtype", [np.float32, np.int32], ids=lambda d: np.dtype(d).name)
@pytest.mark.parametrize("name", list(CMP_OPS))
def test_comparison(name, dtype, tmp_path):
    check_model(binary_model(CMP_OPS[name], (2, 1, 3, 1), (1, 4, 1, 5), (2, 4, 3, 5), dtype, out_dtype=BOOL), tmp_path)


def test_float_add_n(tmp_path):
    mb = MB()
    xs = [mb.tensor(f"x{i}", (2, 3, 5), np.float32) for i in range(4)]
    y = mb.tensor("y", (2, 3, 5), np.float32)
    mb.op(OP.ADD_N, xs, [y])
    check_model(mb.serialize(xs, [y]), tmp_path)
