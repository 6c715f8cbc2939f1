"""QUANTIZE / DEQUANTIZE with int16 against TFLite Micro, bit for bit (float outputs too): float32 -> int16 and
int16 -> float32 (the edges of a 16x8 model with float edges), int16 -> int16, int8 -> int16 and int16 -> int8
(where the int8 and int16 parts of a mixed model join) on chosen inputs (every int8 / int16 value, float ties,
saturation); mixed int8 / int16 models joined by QUANTIZE; support decided from the flatbuffer (the registry's
``when`` predicate)."""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pytest

from edgemem.errors import UnsupportedModelError
from op_check import build_for_host, check_model

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "examples"))
import make_example_model as mm  # noqa: E402

I8, I16, F32 = np.int8, np.int16, np.float32


def _q(scale, zp):
    return mm.qparams([scale], [zp])


def check_inputs(model: bytes, tmp_path, input_sets: list[list[np.ndarray]]):
    """Build ``model`` for the host, run it on each of ``input_sets`` (chosen values) and require TFLM's
    outputs exactly (float outputs included: DEQUANTIZE is exact in TFLM's arithmetic)."""
    from edgemem.reference import model_io_specs, reference_outputs_many
    from edgemem.target.host import build_host, run_host

    path, project = build_for_host(model, tmp_path)
    exe = build_host(project, Path(tmp_path) / "host")
    _, outs = model_io_specs(path)
    wanted, oracle = reference_outputs_many(path, input_sets)
    assert oracle == "tflm"
    for inputs, want in zip(input_sets, wanted):
        raw = run_host(exe, [x.tobytes() for x in inputs], [int(np.prod(s)) * d.itemsize for _, s, d in outs]).outputs
        for r, (name, s, d), w, x in zip(raw, outs, want, inputs):
            got = np.frombuffer(r, dtype=d).reshape(s)
            bad = np.flatnonzero(got.reshape(-1).view(np.uint8 if d.itemsize == 1 else f"u{d.itemsize}")
                                 != np.asarray(w, d).reshape(-1).view(np.uint8 if d.itemsize == 1 else f"u{d.itemsize}"))
            assert bad.size == 0, (f"output {name}: {bad.size} elements differ from TFLM, first at {bad[0]}: input "
                                   f"{x.reshape(-1)[bad[0]]!r} -> {got.reshape(-1)[bad[0]]!r}, TFLM {np.asarray(w).reshape(-1)[bad[0]]!r}")


def quantize_model(op, shape, in_dtype, out_dtype, in_q=None, out_q=None) -> bytes:
    """x -> QUANTIZE / DEQUANTIZE -> y."""
    mb = mm.ModelBuilder(description=f"edgemem {op} test")
    x = mb.tensor("x", shape, in_dtype, None if in_q is None else _q(*in_q))
    y = mb.tensor("y", shape, out_dtype, None if out_q is None else _q(*out_q))
    mb.op(getattr(mm.OP, op), [x], [y])
    return mb.serialize([x], [y])


def side_by_side(specs) -> bytes:
    """Several independent one-operator graphs in one model (one build for many cases): each spec is
    ``(op, shape, in_dtype, out_dtype, in_q, out_q)`` with its own input and output."""
    mb = mm.ModelBuilder(description="edgemem int16 QUANTIZE/DEQUANTIZE/CAST test")
    xs, ys = [], []
    for k, (op, shape, in_dtype, out_dtype, in_q, out_q) in enumerate(specs):
        x = mb.tensor(f"x{k}", list(shape), in_dtype, None if in_q is None else _q(*in_q))
        y = mb.tensor(f"y{k}", list(shape), out_dtype, None if out_q is None else _q(*out_q))
        mb.op(getattr(mm.OP, op), [x], [y])
        xs.append(x)
        ys.append(y)
    return mb.serialize(xs, ys)


def every(dtype) -> np.ndarray:
    info = np.iinfo(dtype)
    return np.arange(info.min, info.max + 1, dtype=dtype)


EVERY_I16 = every(I16).reshape(256, 256)
EVERY_I8 = every(I8).reshape(16, 16)


def float_cases(scale: float, zp: int, n: int = 4096, seed: int = 0) -> np.ndarray:
    """Floats for QUANTIZE float32 -> int16 at ``scale``: exact ties k.5 * scale (where float32 has them), their
    float32 neighbours, random values over the range, and values saturating both ways (and +-0)."""
    rng = np.random.default_rng(seed)
    k = rng.integers(-33000, 33000, n // 4).astype(np.float64) - zp
    ties = ((k + 0.5) * scale).astype(F32)
    up, down = np.nextafter(ties, F32(np.inf)), np.nextafter(ties, F32(-np.inf))
    spread = (rng.uniform(-1.1, 1.1, n // 4) * 32768 * scale).astype(F32)
    values = np.concatenate([ties, up, down, spread]).astype(F32)
    # saturation: far outside int16 but with x / scale inside int32 (beyond, TFLM's float -> int32 cast is
    # undefined: INT32_MIN on x86, where the oracle runs, saturating on Cortex-M; edgemem saturates)
    values[:8] = [0.0, -0.0, 2e9 * scale, -2e9 * scale, 40000 * scale, -40000 * scale, 0.5 * scale, -0.5 * scale]
    return values.reshape(n // 64, 64)


# ---------------------------------------------------------------- one operator, chosen inputs

# (name, (op, shape, in type, out type, in quant, out quant), inputs); each group is one model
GROUPS = {
    # float32 -> int16: a power-of-two scale (every tie exact in float32), an odd scale with a zero point
    "quantize-f32-i16": [
        ("pow2", ("QUANTIZE", (64, 64), F32, I16, None, (2.0 ** -9, 0)), lambda: float_cases(2.0 ** -9, 0)),
        ("odd-zp", ("QUANTIZE", (64, 64), F32, I16, None, (0.000123, 17)), lambda: float_cases(0.000123, 17)),
    ],
    # int16 -> float32: every int16 value, with and without a zero point
    "dequantize-i16-f32": [
        ("plain", ("DEQUANTIZE", (256, 256), I16, F32, (0.000171, 0), None), lambda: EVERY_I16),
        ("zp", ("DEQUANTIZE", (256, 256), I16, F32, (3.3e-5, -1234), None), lambda: EVERY_I16),
    ],
    "requantize": [
        # int16 -> int16: a multiplier below one, one above (saturating), equal scales, zero points
        ("i16-i16-down", ("QUANTIZE", (256, 256), I16, I16, (0.0003, 0), (0.0007, 0)), lambda: EVERY_I16),
        ("i16-i16-up-zp", ("QUANTIZE", (256, 256), I16, I16, (0.0005, 11), (0.0002, -300)), lambda: EVERY_I16),
        ("i16-i16-same", ("QUANTIZE", (256, 256), I16, I16, (0.0004, 0), (0.0004, 0)), lambda: EVERY_I16),
        # int8 -> int16: every int8 value, a multiplier far above one (a left shift) and one below
        ("i8-i16-up", ("QUANTIZE", (16, 16), I8, I16, (0.05, -3), (0.00017, 0)), lambda: EVERY_I8),
        ("i8-i16-down-zp", ("QUANTIZE", (16, 16), I8, I16, (0.02, 127), (0.09, 5)), lambda: EVERY_I8),
        # int16 -> int8: every int16 value, saturating, zero points at the ends
        ("i16-i8", ("QUANTIZE", (256, 256), I16, I8, (0.0001, 0), (0.02, -128)), lambda: EVERY_I16),
        ("i16-i8-zp", ("QUANTIZE", (256, 256), I16, I8, (0.00003, 25), (0.003, 127)), lambda: EVERY_I16),
    ],
    # CAST from and to int16 (TFLM's static_cast): every int8 / int16 value, int32 wrapping, floats inside
    # int16's range (outside, C's float -> int16 conversion is undefined), halves and near-integers
    "cast": [
        ("i16-i8", ("CAST", (256, 256), I16, I8, None, None), lambda: EVERY_I16),
        ("i16-i32", ("CAST", (256, 256), I16, np.int32, None, None), lambda: EVERY_I16),
        ("i16-f32", ("CAST", (256, 256), I16, F32, None, None), lambda: EVERY_I16),
        ("i8-i16", ("CAST", (16, 16), I8, I16, None, None), lambda: EVERY_I8),
        ("i32-i16", ("CAST", (256, 256), np.int32, I16, None, None),
         lambda: np.random.default_rng(0).integers(-2**31, 2**31, (256, 256), dtype=np.int32)),
        ("f32-i16", ("CAST", (70, 64), F32, I16, None, None),
         lambda: np.concatenate([np.random.default_rng(1).uniform(-32768.9, 32767.9, 4096), np.arange(-64, 64, 0.5),
                                 np.arange(-64, 64) + 0.999]).astype(F32).reshape(70, 64)),
    ],
}


@pytest.mark.parametrize("group", sorted(GROUPS))
def test_one_op(group, tmp_path):
    cases = GROUPS[group]
    check_inputs(side_by_side([spec for _, spec, _ in cases]), tmp_path, [[make() for _, _, make in cases]])


# ---------------------------------------------------------------- mixed int8 / int16 models joined by QUANTIZE

def _pool(filt, stride, padding=mm.PAD.VALID, act=mm.ACT.NONE):
    return mm.pool2d_options(filt, stride, padding, act)


def _mean_options(keep: bool):
    import tflite

    def fn(b):
        tflite.ReducerOptionsStart(b)
        tflite.ReducerOptionsAddKeepDims(b, keep)
        return tflite.ReducerOptionsEnd(b)

    return mm.OPTS.ReducerOptions, fn


def chain(x_spec, steps) -> bytes:
    """A model from a list of steps applied in turn to one tensor: ``x_spec`` = (shape, dtype, quant or None);
    each step (op, out shape, out dtype, out quant or None, options or None[, extra constant inputs])."""
    mb = mm.ModelBuilder(description="edgemem mixed int8/int16 test")
    shape, dtype, q = x_spec
    x = cur = mb.tensor("x", list(shape), dtype, None if q is None else _q(*q))
    for k, step in enumerate(steps):
        op, shape, dtype, q, opts = step[:5]
        extra = [mb.const(f"c{k}", v) for v in step[5]] if len(step) > 5 else []
        y = mb.tensor(f"t{k}", list(shape), dtype, None if q is None else _q(*q))
        mb.op(getattr(mm.OP, op), [cur, *extra], [y], *(opts or ()), version=2 if op in ("AVERAGE_POOL_2D", "MAX_POOL_2D", "QUANTIZE", "DEQUANTIZE") else 1)
        cur = y
    return mb.serialize([x], [cur])


Q8, Q16 = (0.05, -3), (0.0002, 0)

MIXED = {
    # int8 -> int8 pool -> QUANTIZE int16 -> int16 pools (fused RELU) -> QUANTIZE int8 -> int8 pool
    "int8-edges": lambda: chain(((1, 8, 8, 3), I8, Q8), [
        ("AVERAGE_POOL_2D", (1, 7, 7, 3), I8, Q8, _pool((2, 2), 1)),
        ("QUANTIZE", (1, 7, 7, 3), I16, Q16, None),
        ("AVERAGE_POOL_2D", (1, 7, 7, 3), I16, Q16, _pool((3, 3), 1, mm.PAD.SAME, mm.ACT.RELU)),
        ("MAX_POOL_2D", (1, 4, 4, 3), I16, Q16, _pool((2, 2), 2, mm.PAD.SAME)),
        ("QUANTIZE", (1, 4, 4, 3), I8, (0.04, 5), None),
        ("MAX_POOL_2D", (1, 3, 3, 3), I8, (0.04, 5), _pool((2, 2), 1)),
    ]),
    # float -> QUANTIZE int16 -> int16 pool -> QUANTIZE int8 -> int8 pool -> QUANTIZE int16 -> MEAN -> DEQUANTIZE
    "float-edges-int16": lambda: chain(((1, 6, 6, 4), F32, None), [
        ("QUANTIZE", (1, 6, 6, 4), I16, (4.0 / 32768, 0), None),
        ("MAX_POOL_2D", (1, 5, 5, 4), I16, (4.0 / 32768, 0), _pool((2, 2), 1)),
        ("QUANTIZE", (1, 5, 5, 4), I8, (0.03, -2), None),
        ("AVERAGE_POOL_2D", (1, 4, 4, 4), I8, (0.03, -2), _pool((2, 2), 1)),
        ("QUANTIZE", (1, 4, 4, 4), I16, (0.0001, 0), None),
        ("MEAN", (1, 1, 1, 4), I16, (0.00007, 0), _mean_options(True), [np.array([1, 2], np.int32)]),
        ("DEQUANTIZE", (1, 1, 1, 4), F32, None, None),
    ]),
    # float -> QUANTIZE int8 (integerize's model-input path) -> int8 pool -> QUANTIZE int16 -> pool -> DEQUANTIZE int16
    "float-edges-int8-in": lambda: chain(((1, 6, 6, 2), F32, None), [
        ("QUANTIZE", (1, 6, 6, 2), I8, (0.03, 4), None),
        ("AVERAGE_POOL_2D", (1, 3, 3, 2), I8, (0.03, 4), _pool((2, 2), 2)),
        ("QUANTIZE", (1, 3, 3, 2), I16, (0.00011, 0), None),
        ("MAX_POOL_2D", (1, 2, 2, 2), I16, (0.00011, 0), _pool((2, 2), 1)),
        ("DEQUANTIZE", (1, 2, 2, 2), F32, None, None),
    ]),
    # int16 -> QUANTIZE int8 -> int8 pool -> DEQUANTIZE int8 (integerize's model-output path)
    "int16-in-float-out": lambda: chain(((1, 5, 5, 3), I16, (0.0003, 0)), [
        ("SUM", (1, 5, 1, 3), I16, (0.002, 0), _mean_options(True), [np.array([2], np.int32)]),
        ("QUANTIZE", (1, 5, 1, 3), I8, (0.05, 1), None),
        ("MAX_POOL_2D", (1, 4, 1, 3), I8, (0.05, 1), _pool((2, 1), 1)),
        ("DEQUANTIZE", (1, 4, 1, 3), F32, None, None),
    ]),
    # a float island inside an int16 model: DEQUANTIZE int16 -> float FLOOR, MUL -> QUANTIZE int16
    "int16-float-island": lambda: chain(((1, 4, 5, 3), I16, (0.0003, 0)), [
        ("DEQUANTIZE", (1, 4, 5, 3), F32, None, None),
        ("FLOOR", (1, 4, 5, 3), F32, None, None),
        ("MUL", (1, 4, 5, 3), F32, None, None, [np.array([0.25], F32)]),
        ("QUANTIZE", (1, 4, 5, 3), I16, (0.0001, 0), None),
    ]),
}


@pytest.mark.parametrize("name", sorted(MIXED))
def test_mixed(name, tmp_path):
    result = check_model(MIXED[name](), tmp_path)
    assert result.oracle == "tflm"


# ---------------------------------------------------------------- support from the flatbuffer alone

def test_support_by_tensor_types():
    """The registry's predicate: a float32 QUANTIZE is edgemem's int16 lowering only when its output is int16
    (float32 -> int8 stays with TVM's import and integerize); int16 -> int32 is a lowering (TFLM's Requantize, tests/
    test_published.py), uint8 -> int16 (which TFLM's QUANTIZE refuses too) is refused up front."""
    import tflite

    from edgemem.frontend.ops import registry
    from edgemem.frontend.support import unsupported_operators

    def types(data):
        model = tflite.Model.GetRootAsModel(data, 0)
        sg = model.Subgraphs(0)
        return model, sg, registry.operator_types(sg, sg.Operators(0))

    _, _, t16 = types(quantize_model("QUANTIZE", (2, 3), F32, I16, None, (0.001, 0)))
    _, _, t8 = types(quantize_model("QUANTIZE", (2, 3), F32, I8, None, (0.01, 0)))
    assert registry.find("QUANTIZE", "float32", t16) is not None
    assert registry.find("QUANTIZE", "float32", t8) is None
    assert registry.find("QUANTIZE", "float32") is None  # no tensor types: predicates cannot be decided
    _, _, t32 = types(quantize_model("QUANTIZE", (2, 3), I16, np.int32, (0.001, 0), (0.0001, 0)))
    assert registry.find("QUANTIZE", "int16", t32) is not None
    model, _, tu8 = types(quantize_model("QUANTIZE", (2, 3), np.uint8, I16, (0.001, 0), (0.0001, 0)))
    assert registry.find("QUANTIZE", "uint8", tu8) is None
    missing = unsupported_operators(model, ["QUANTIZE"])
    assert [(u.index, u.name, u.operand_type) for u in missing] == [(0, "QUANTIZE", "uint8")]


def test_uint8_to_int16_refused(tmp_path):
    with pytest.raises(UnsupportedModelError, match=r"QUANTIZE \(uint8\)"):
        build_for_host(quantize_model("QUANTIZE", (2, 3), np.uint8, I16, (0.001, 0), (0.0001, 0)), tmp_path)


def test_planner_counts_int16_at_two_bytes(tmp_path):
    """The arena of a mixed model holds its int16 tensors at 2 bytes per element: int8 [1,16,16,8] -> int8 pool
    [1,15,15,8] (1,800 B) -> QUANTIZE int16 (3,600 B) -> int16 pool (3,600 B) -> ... The peak is the two int16
    [1,15,15,8] tensors live together, 7,200 B (3,848 B if int16 were counted as one byte); under QEMU
    (`edgemem build --run`) this model plans and measures 7,200 B and is bit-exact with TFLM."""
    from edgemem import pipeline
    from op_check import HUGE

    model = chain(((1, 16, 16, 8), I8, Q8), [
        ("AVERAGE_POOL_2D", (1, 15, 15, 8), I8, Q8, _pool((2, 2), 1)),
        ("QUANTIZE", (1, 15, 15, 8), I16, Q16, None),
        ("AVERAGE_POOL_2D", (1, 15, 15, 8), I16, Q16, _pool((3, 3), 1, mm.PAD.SAME, mm.ACT.RELU)),
        ("MAX_POOL_2D", (1, 8, 8, 8), I16, Q16, _pool((2, 2), 2, mm.PAD.SAME)),
        ("QUANTIZE", (1, 8, 8, 8), I8, (0.04, 5), None),
        ("MAX_POOL_2D", (1, 4, 4, 8), I8, (0.04, 5), _pool((2, 2), 2)),
    ])
    path = tmp_path / "mixed.tflite"
    path.write_bytes(model)
    opts = pipeline.BuildOptions(compile=False, ram=HUGE, flash=HUGE, overwrite=True, opt_seconds=0, schedule_seconds=0.5)
    result = pipeline.build(path, "stm32f746", tmp_path / "project", opts)
    int16 = sorted(t.nbytes for t in result.graph.activations() if t.dtype == "int16")
    assert int16 == [1024, 3600, 3600]
    assert result.plan.lower_bound == 7200 and 7200 <= result.plan.total_bytes <= 7200 + 64, result.plan
