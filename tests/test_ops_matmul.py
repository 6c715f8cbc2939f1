"""The matmul family against TFLite Micro: FULLY_CONNECTED (per-tensor and per-channel int8, float32), BATCH_MATMUL,
TRANSPOSE_CONV, SOFTMAX with beta != 1, LOG_SOFTMAX, L2_NORMALIZATION.

Two sources of models: the converter's (tests/models/ops/<OP>-<variant>-<type>.tflite, written by
tests/models/gen_matmul.py with TensorFlow) and hand-made flatbuffers below for exact edge cases (zero points at
the ends of the range, multipliers above 1, keep_num_dims false on a 3-D input, batch > 1). int8 outputs must be
TFLM's bit for bit, float32 within 1e-5 relative (tests/op_check.py).
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

import numpy as np
import pytest

from op_check import check_model

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "examples"))
import make_example_model as mm  # noqa: E402

sys.path.insert(0, str(Path(__file__).resolve().parent))
from small_models import transpose_conv_options  # noqa: E402
import tflite  # noqa: E402

OPS_DIR = Path(__file__).resolve().parent / "models" / "ops"


# The converter's models in the default run: every int8 one, and the float-edged (QUANTIZE/DEQUANTIZE) and float32
# forms of the variants named here (the others add little once these pass; EDGEMEM_ALL_OP_MODELS=1 runs them all,
# the file's time budget is about two minutes on two cores).
_FIO_AND_FLOAT = {
    "FULLY_CONNECTED": {"fio": ("2d", "3d"), "float32": ("2d", "3d", "relu6")},
    "BATCH_MATMUL": {"fio": ("plain", "const-rhs", "attention"), "float32": ("bcast", "const-lhs", "adjxy", "attention")},
    "TRANSPOSE_CONV": {"fio": ("s2-same",), "float32": ("s2-same-k4-relu", "s1-valid-nobias")},
    "SOFTMAX": {"fio": ("scaled2",), "float32": ("scaled0.3-3d",)},
    "LOG_SOFTMAX": {"fio": ("2d",), "float32": ("3d",)},
    "L2_NORMALIZATION": {"fio": ("2d",), "float32": ("3d",)},
}


def _converted(op: str) -> list[Path]:
    # 16x8 models (-int16, -iofloat-int16) are test_ops_int16_conv.py's (SOFTMAX: test_ops_int16_unary.py's)
    paths = sorted(p for p in OPS_DIR.glob(f"{op}-*.tflite") if not p.stem.endswith("int16"))
    if os.environ.get("EDGEMEM_ALL_OP_MODELS"):
        return paths
    keep = _FIO_AND_FLOAT.get(op, {})
    chosen = []
    for p in paths:
        variant = p.stem[len(op) + 1:]
        if variant.endswith("-fio-int8"):
            ok = variant[: -len("-fio-int8")] in keep.get("fio", ())
        elif variant.endswith("-float32"):
            ok = variant[: -len("-float32")] in keep.get("float32", ())
        else:
            ok = True
        if ok:
            chosen.append(p)
    return chosen


def _ids(paths):
    return [p.stem for p in paths]


# ---------------------------------------------------------------- FULLY_CONNECTED

def _fc_options(act, keep_num_dims):
    def fn(b):
        tflite.FullyConnectedOptionsStart(b)
        tflite.FullyConnectedOptionsAddFusedActivationFunction(b, act)
        tflite.FullyConnectedOptionsAddKeepNumDims(b, keep_num_dims)
        return tflite.FullyConnectedOptionsEnd(b)

    return mm.OPTS.FullyConnectedOptions, fn


def fc_model(in_shape, units, *, per_channel=True, bias=True, act=mm.ACT.NONE, keep_num_dims=False,
             in_q=(0.05, -3), out_q=(0.1, 4), w_scale=0.004, seed=0) -> bytes:
    """int8 x -> FULLY_CONNECTED(units) -> int8 y. Per-channel weights get one scale per output row (spread over
    a factor of 30 so that the multipliers differ in exponent); ``w_scale`` large makes them exceed 1."""
    rng = np.random.default_rng(seed)
    k = in_shape[-1]
    mb = mm.ModelBuilder(description="edgemem fully_connected test")
    x = mb.tensor("x", in_shape, np.int8, mm.qparams([in_q[0]], [in_q[1]]))
    w = rng.integers(-127, 128, (units, k)).astype(np.int8)
    ws = (w_scale * np.exp(rng.uniform(-1.7, 1.7, units))).astype(np.float32) if per_channel else np.float32([w_scale])
    wt = mb.const("w", w, mm.qparams(ws, 0, 0))
    inputs = [x, wt]
    if bias:
        bs = (np.float32(in_q[0]) * ws).astype(np.float32)
        inputs.append(mb.const("b", rng.integers(-3000, 3000, units).astype(np.int32), mm.qparams(bs, 0, 0)))
    else:
        inputs.append(-1)
    out_shape = (*in_shape[:-1], units) if keep_num_dims else (int(np.prod(in_shape[:-1])), units)
    y = mb.tensor("y", out_shape, np.int8, mm.qparams([out_q[0]], [out_q[1]]))
    mb.op(mm.OP.FULLY_CONNECTED, inputs, [y], *_fc_options(act, keep_num_dims), version=5 if per_channel else 4)
    return mb.serialize([x], [y])


FC_CASES = {
    "pc-2d": dict(in_shape=(1, 16), units=10),
    "pc-batch3": dict(in_shape=(3, 7), units=5, seed=1),
    "pc-3d-flat": dict(in_shape=(2, 3, 8), units=5, seed=2),  # keep_num_dims false: output [6, 5]
    "pc-3d-keep": dict(in_shape=(1, 4, 9), units=6, keep_num_dims=True, seed=3),
    "pc-nobias-relu": dict(in_shape=(1, 20), units=7, bias=False, act=mm.ACT.RELU, seed=4),
    "pc-relu6": dict(in_shape=(1, 12), units=9, act=mm.ACT.RELU6, in_q=(0.02, 0), out_q=(0.03, -128), seed=5),
    "pc-relu-n1-1": dict(in_shape=(1, 12), units=9, act=mm.ACT.RELU_N1_TO_1, out_q=(0.01, 0), seed=6),
    "pc-zp-extremes": dict(in_shape=(1, 33), units=4, in_q=(0.03, -128), out_q=(0.2, 127), seed=7),
    "pc-multiplier-above-1": dict(in_shape=(1, 5), units=3, w_scale=4.0, out_q=(0.05, 0), seed=8),
    "pt-2d": dict(in_shape=(1, 16), units=10, per_channel=False, seed=9),
    "pt-3d-flat-relu": dict(in_shape=(2, 2, 6), units=4, per_channel=False, act=mm.ACT.RELU, seed=10),
}


@pytest.mark.parametrize("name", list(FC_CASES))
def test_fully_connected_int8_edge_cases(name, tmp_path):
    assert check_model(fc_model(**FC_CASES[name]), tmp_path).oracle == "tflm"


@pytest.mark.parametrize("path", _converted("FULLY_CONNECTED"), ids=_ids(_converted("FULLY_CONNECTED")))
def test_fully_connected_converted(path, tmp_path):
    assert check_model(path, tmp_path).oracle == "tflm"


# ---------------------------------------------------------------- BATCH_MATMUL

def _bmm_options(adj_x, adj_y):
    def fn(b):
        tflite.BatchMatMulOptionsStart(b)
        tflite.BatchMatMulOptionsAddAdjX(b, adj_x)
        tflite.BatchMatMulOptionsAddAdjY(b, adj_y)
        return tflite.BatchMatMulOptionsEnd(b)

    return mm.OPTS.BatchMatMulOptions, fn


def bmm_model(lhs_shape, rhs_shape, out_shape, *, adj_x=False, adj_y=False, dtype=np.int8, const=None, same=False,
              lhs_q=(0.05, -3), rhs_q=(0.04, 6), out_q=(0.3, 2), seed=0) -> bytes:
    """BATCH_MATMUL of two inputs (``const`` 'lhs' / 'rhs': that operand a constant; ``same``: x times x)."""
    rng = np.random.default_rng(seed)
    mb = mm.ModelBuilder(description="edgemem batch_matmul test")
    q = (lambda s: mm.qparams([s[0]], [s[1]])) if dtype == np.int8 else (lambda s: None)

    def operand(name, shape, qp):
        if const == name:
            if dtype == np.int8:
                return mb.const(name, rng.integers(-128, 128, shape).astype(np.int8), q(qp))
            return mb.const(name, rng.standard_normal(shape).astype(np.float32))
        return mb.tensor(name, shape, dtype, q(qp))

    a = operand("lhs", lhs_shape, lhs_q)
    b = a if same else operand("rhs", rhs_shape, rhs_q)
    y = mb.tensor("y", out_shape, dtype, q(out_q))
    mb.op(mm.OP.BATCH_MATMUL, [a, b], [y], *_bmm_options(adj_x, adj_y), version=4 if dtype == np.int8 else 1)
    inputs = [t for t, name in ((a, "lhs"), (b, "rhs")) if const != name]
    return mb.serialize(sorted(set(inputs)), [y])


BMM_CASES = {
    "int8-zp-extremes": dict(lhs_shape=(1, 3, 9), rhs_shape=(1, 9, 4), out_shape=(1, 3, 4), lhs_q=(0.02, -128), rhs_q=(0.03, 127), out_q=(0.5, -128)),
    "int8-multiplier-above-1": dict(lhs_shape=(2, 3), rhs_shape=(3, 2), out_shape=(2, 2), lhs_q=(0.5, 0), rhs_q=(0.5, 1), out_q=(0.1, 0), seed=1),
    "int8-bcast-lhs-rank5": dict(lhs_shape=(2, 1, 3, 2, 5), rhs_shape=(4, 1, 5, 3), out_shape=(2, 4, 3, 2, 3), seed=2),
    "int8-bcast-rhs-rank2-adjxy": dict(lhs_shape=(3, 2, 6, 4), rhs_shape=(5, 6), out_shape=(3, 2, 4, 5), adj_x=True, adj_y=True, seed=3),
    "int8-const-rhs-adjy": dict(lhs_shape=(1, 4, 7), rhs_shape=(1, 3, 7), out_shape=(1, 4, 3), adj_y=True, const="rhs", seed=4),
    "int8-const-lhs-bcast": dict(lhs_shape=(5, 4), rhs_shape=(2, 4, 3), out_shape=(2, 5, 3), const="lhs", seed=5),
    "int8-gram-same-input": dict(lhs_shape=(1, 4, 6), rhs_shape=(1, 4, 6), out_shape=(1, 4, 4), adj_y=True, same=True, seed=6),
    "float32-bcast-rank5-adjx": dict(lhs_shape=(2, 1, 3, 5, 2), rhs_shape=(4, 1, 5, 3), out_shape=(2, 4, 3, 2, 3), adj_x=True, dtype=np.float32, seed=7),
    "float32-const-lhs": dict(lhs_shape=(5, 4), rhs_shape=(2, 4, 3), out_shape=(2, 5, 3), const="lhs", dtype=np.float32, seed=8),
}


@pytest.mark.parametrize("name", list(BMM_CASES))
def test_batch_matmul_edge_cases(name, tmp_path):
    assert check_model(bmm_model(**BMM_CASES[name]), tmp_path).oracle == "tflm"


@pytest.mark.parametrize("path", _converted("BATCH_MATMUL"), ids=_ids(_converted("BATCH_MATMUL")))
def test_batch_matmul_converted(path, tmp_path):
    assert check_model(path, tmp_path).oracle == "tflm"


# ---------------------------------------------------------------- TRANSPOSE_CONV

def tconv_model(x_shape, w_shape, out_shape, *, stride=(1, 1), padding=mm.PAD.SAME, act=mm.ACT.NONE, bias=True,
                dtype=np.int8, per_channel=True, in_q=(0.05, -3), out_q=(0.1, 4), w_scale=0.01, seed=0) -> bytes:
    """x [N, H, W, I] -> TRANSPOSE_CONV(weights [O, KH, KW, I]) -> y ``out_shape``."""
    rng = np.random.default_rng(seed)
    o = w_shape[0]
    mb = mm.ModelBuilder(description="edgemem transpose_conv test")
    shape_t = mb.const("out_shape", np.asarray(out_shape, np.int32))
    if dtype == np.int8:
        ws = (w_scale * np.exp(rng.uniform(-1, 1, o))).astype(np.float32) if per_channel else np.float32([w_scale])
        x = mb.tensor("x", x_shape, np.int8, mm.qparams([in_q[0]], [in_q[1]]))
        w = mb.const("w", rng.integers(-127, 128, w_shape).astype(np.int8), mm.qparams(ws, 0, 0))
        b = mb.const("b", rng.integers(-2000, 2000, o).astype(np.int32), mm.qparams(np.float32(in_q[0]) * ws, 0, 0)) if bias else -1
        y = mb.tensor("y", out_shape, np.int8, mm.qparams([out_q[0]], [out_q[1]]))
    else:
        x = mb.tensor("x", x_shape, np.float32)
        w = mb.const("w", rng.standard_normal(w_shape).astype(np.float32))
        b = mb.const("b", rng.standard_normal(o).astype(np.float32)) if bias else -1
        y = mb.tensor("y", out_shape, np.float32)
    inputs = [shape_t, w, x] + ([b] if bias else [])
    mb.op(mm.OP.TRANSPOSE_CONV, inputs, [y], *transpose_conv_options(stride, padding, act), version=3)
    return mb.serialize([x], [y])


TCONV_CASES = {
    "int8-s2-same-odd-out": dict(x_shape=(1, 4, 4, 3), w_shape=(2, 3, 3, 3), out_shape=(1, 7, 7, 2), stride=(2, 2)),
    "int8-s21-valid-relu6": dict(x_shape=(1, 3, 4, 2), w_shape=(3, 2, 3, 2), out_shape=(1, 6, 6, 3), stride=(2, 1),
                                 padding=mm.PAD.VALID, act=mm.ACT.RELU6, in_q=(0.04, 0), out_q=(0.03, -128), seed=1),
    "int8-per-tensor-zp-extremes": dict(x_shape=(1, 3, 3, 4), w_shape=(3, 3, 3, 4), out_shape=(1, 6, 6, 3), stride=(2, 2),
                                        per_channel=False, in_q=(0.03, -128), out_q=(0.2, 127), seed=2),
    "int8-multiplier-above-1-nobias": dict(x_shape=(1, 2, 2, 2), w_shape=(2, 2, 2, 2), out_shape=(1, 4, 4, 2), stride=(2, 2),
                                           bias=False, w_scale=3.0, out_q=(0.05, 0), seed=3),
    "int8-batch2-s3": dict(x_shape=(2, 2, 3, 2), w_shape=(2, 3, 3, 2), out_shape=(2, 6, 9, 2), stride=(3, 3), seed=4),
    "float32-s2-same-odd-out-relu": dict(x_shape=(1, 4, 4, 3), w_shape=(2, 3, 3, 3), out_shape=(1, 7, 7, 2), stride=(2, 2),
                                         act=mm.ACT.RELU, dtype=np.float32, seed=5),
    "float32-s3-valid-nobias": dict(x_shape=(1, 3, 2, 2), w_shape=(4, 2, 4, 2), out_shape=(1, 8, 7, 4), stride=(3, 2),
                                    padding=mm.PAD.VALID, bias=False, dtype=np.float32, seed=6),
}


@pytest.mark.parametrize("name", list(TCONV_CASES))
def test_transpose_conv_edge_cases(name, tmp_path):
    assert check_model(tconv_model(**TCONV_CASES[name]), tmp_path).oracle == "tflm"


@pytest.mark.parametrize("path", _converted("TRANSPOSE_CONV"), ids=_ids(_converted("TRANSPOSE_CONV")))
def test_transpose_conv_converted(path, tmp_path):
    assert check_model(path, tmp_path).oracle == "tflm"


# ---------------------------------------------------------------- SOFTMAX (any beta), LOG_SOFTMAX, L2_NORMALIZATION

def unary_model(op, shape, *, dtype=np.int8, in_q=(0.1, 3), out_q=(1 / 256, -128), options=(0, None), version=1) -> bytes:
    mb = mm.ModelBuilder(description=f"edgemem {op} test")
    if dtype == np.int8:
        x = mb.tensor("x", shape, np.int8, mm.qparams([in_q[0]], [in_q[1]]))
        y = mb.tensor("y", shape, np.int8, mm.qparams([out_q[0]], [out_q[1]]))
    else:
        x, y = mb.tensor("x", shape, np.float32), mb.tensor("y", shape, np.float32)
    mb.op(getattr(mm.OP, op), [x], [y], *options, version=version)
    return mb.serialize([x], [y])


SOFTMAX_CASES = {
    "int8-beta2.5": dict(shape=(1, 10), options=mm.softmax_options(2.5)),
    "int8-beta0.05-rank1": dict(shape=(12,), in_q=(0.3, -20), options=mm.softmax_options(0.05)),
    "int8-beta1-wide-scale": dict(shape=(2, 5), in_q=(1.5, 0), options=mm.softmax_options(1.0)),  # multiplier capped
    "int8-beta1-tiny-scale-long-row": dict(shape=(2, 300), in_q=(0.002, -128), options=mm.softmax_options(1.0)),
    "int8-beta0.7-4d": dict(shape=(1, 2, 3, 17), in_q=(0.06, 10), options=mm.softmax_options(0.7)),
    # TFLM's fixed-point exp and a float softmax round apart about once in 400 such rows: 4,000 rows tell them apart
    "int8-beta1-4000-rows": dict(shape=(1, 4000, 8), in_q=(0.125, 0), options=mm.softmax_options(1.0)),
    "float32-beta0.4": dict(shape=(2, 9), dtype=np.float32, options=mm.softmax_options(0.4)),
    "float32-beta3-3d": dict(shape=(1, 3, 8), dtype=np.float32, options=mm.softmax_options(3.0)),
}


@pytest.mark.parametrize("name", list(SOFTMAX_CASES))
def test_softmax_edge_cases(name, tmp_path):
    assert check_model(unary_model("SOFTMAX", **SOFTMAX_CASES[name]), tmp_path).oracle == "tflm"


@pytest.mark.parametrize("path", _converted("SOFTMAX"), ids=_ids(_converted("SOFTMAX")))
def test_softmax_converted(path, tmp_path):
    assert check_model(path, tmp_path).oracle == "tflm"


def _l2_options():
    def fn(b):
        tflite.L2NormOptionsStart(b)
        tflite.L2NormOptionsAddFusedActivationFunction(b, mm.ACT.NONE)
        return tflite.L2NormOptionsEnd(b)

    return mm.OPTS.L2NormOptions, fn


L2_CASES = {
    # rows of one element: every small sum of squares (0, 1, 4, ...), the branches of TFLM's inverse square root
    "int8-depth1-500-rows": dict(shape=(1, 500, 1), in_q=(0.05, 7), out_q=(1 / 128, 0)),
    "int8-zp-extreme-4d": dict(shape=(1, 2, 3, 5), in_q=(0.02, -128), out_q=(1 / 128, 0)),
    "int8-rank1": dict(shape=(33,), in_q=(0.1, 0), out_q=(1 / 128, 0)),
    # a sum of squares above 2^29: TFLM's normalisation divides it by four first
    "int8-long-row": dict(shape=(1, 26000), in_q=(0.01, 127), out_q=(1 / 128, 0)),
    "float32-3d": dict(shape=(2, 3, 7), dtype=np.float32, options=_l2_options()),
}


@pytest.mark.parametrize("name", list(L2_CASES))
def test_l2_normalization_edge_cases(name, tmp_path):
    assert check_model(unary_model("L2_NORMALIZATION", **L2_CASES[name]), tmp_path).oracle == "tflm"


@pytest.mark.parametrize("path", _converted("L2_NORMALIZATION"), ids=_ids(_converted("L2_NORMALIZATION")))
def test_l2_normalization_converted(path, tmp_path):
    assert check_model(path, tmp_path).oracle == "tflm"


LOG_SOFTMAX_CASES = {
    "int8-rank1": dict(shape=(16,), in_q=(0.1, 3), out_q=(16 / 256, 127)),
    "int8-wide-scale": dict(shape=(3, 6), in_q=(1.2, -5), out_q=(16 / 256, 127)),  # most differences below diff_min
    "int8-tiny-scale-long-rows": dict(shape=(2, 700), in_q=(0.003, -128), out_q=(16 / 256, 127)),
    # many rows of few elements: sums all over [1, 8) in Q12.19, both normalisations of TFLM's log
    "int8-2000-rows": dict(shape=(1, 2000, 3), in_q=(0.05, 0), out_q=(16 / 256, 127)),
    "float32-4d": dict(shape=(1, 2, 3, 5), dtype=np.float32),
}


@pytest.mark.parametrize("name", list(LOG_SOFTMAX_CASES))
def test_log_softmax_edge_cases(name, tmp_path):
    assert check_model(unary_model("LOG_SOFTMAX", **LOG_SOFTMAX_CASES[name]), tmp_path).oracle == "tflm"


@pytest.mark.parametrize("path", _converted("LOG_SOFTMAX"), ids=_ids(_converted("LOG_SOFTMAX")))
def test_log_softmax_converted(path, tmp_path):
    assert check_model(path, tmp_path).oracle == "tflm"


# ---------------------------------------------------------------- SVDF

def _svdf_options(rank, act):
    def fn(b):
        tflite.SVDFOptionsStart(b)
        tflite.SVDFOptionsAddRank(b, rank)
        tflite.SVDFOptionsAddFusedActivationFunction(b, act)
        return tflite.SVDFOptionsEnd(b)

    return mm.OPTS.SVDFOptions, fn


def svdf_model(batch, n_input, n_filter, n_memory, rank, *, dtype=np.int8, state_dtype=np.int16, act=mm.ACT.NONE,
               bias=True, in_q=(0.05, -3), state_q=(0.02, 0), out_q=(0.08, 5), seed=0) -> bytes:
    """x [B, K] -> SVDF(weights_feature [F, K], weights_time [F, M], bias [F / rank], state [B, F*M]) -> y."""
    rng = np.random.default_rng(seed)
    n_unit = n_filter // rank
    mb = mm.ModelBuilder(description="edgemem svdf test")
    if dtype == np.int8:
        wf_s, wt_s = 0.01, 0.004
        x = mb.tensor("x", (batch, n_input), np.int8, mm.qparams([in_q[0]], [in_q[1]]))
        wf = mb.const("wf", rng.integers(-127, 128, (n_filter, n_input)).astype(np.int8), mm.qparams([wf_s], [0]))
        if state_dtype == np.int16:
            wt = mb.const("wt", rng.integers(-3000, 3000, (n_filter, n_memory)).astype(np.int16), mm.qparams([wt_s], [0]))
        else:
            wt = mb.const("wt", rng.integers(-127, 128, (n_filter, n_memory)).astype(np.int8), mm.qparams([wt_s], [0]))
        b = mb.const("b", rng.integers(-5000, 5000, n_unit).astype(np.int32), mm.qparams([np.float32(state_q[0]) * np.float32(wt_s)], [0]))
        st = mb.tensor("state", (batch, n_filter * n_memory), state_dtype, mm.qparams([state_q[0]], [state_q[1]]), variable=True)
        y = mb.tensor("y", (batch, n_unit), np.int8, mm.qparams([out_q[0]], [out_q[1]]))
    else:
        x = mb.tensor("x", (batch, n_input), np.float32)
        wf = mb.const("wf", rng.standard_normal((n_filter, n_input)).astype(np.float32))
        wt = mb.const("wt", rng.standard_normal((n_filter, n_memory)).astype(np.float32))
        b = mb.const("b", rng.standard_normal(n_unit).astype(np.float32)) if bias else -1
        st = mb.tensor("state", (batch, n_filter * n_memory), np.float32, variable=True)
        y = mb.tensor("y", (batch, n_unit), np.float32)
    mb.op(mm.OP.SVDF, [x, wf, wt, b, st], [y], *_svdf_options(rank, act), version=3 if dtype == np.int8 else 1)
    return mb.serialize([x], [y])


SVDF_CASES = {
    "int8-int16-state-rank1": dict(batch=1, n_input=12, n_filter=6, n_memory=5, rank=1),
    "int8-int16-state-rank2-batch2": dict(batch=2, n_input=7, n_filter=8, n_memory=4, rank=2, state_q=(0.01, 0), seed=1),
    "int8-int8-state-zp": dict(batch=1, n_input=10, n_filter=4, n_memory=3, rank=2, state_dtype=np.int8,
                               state_q=(0.05, 9), in_q=(0.04, -128), out_q=(0.03, 127), seed=2),
    "float32-rank2-relu": dict(batch=1, n_input=9, n_filter=6, n_memory=4, rank=2, dtype=np.float32, act=mm.ACT.RELU, seed=3),
    "float32-batch2-rank1": dict(batch=2, n_input=5, n_filter=3, n_memory=6, rank=1, dtype=np.float32, seed=4),
}


@pytest.mark.parametrize("name", list(SVDF_CASES))
def test_svdf_edge_cases(name, tmp_path):
    assert check_model(svdf_model(**SVDF_CASES[name]), tmp_path).oracle == "tflm"


@pytest.mark.parametrize("name", ["int8-int16-state-rank2-batch2", "int8-int8-state-zp", "float32-rank2-relu"])
def test_svdf_state_carries_across_runs_like_tflm(name, tmp_path):
    """Five runs in a row on a host build (gcc -Werror, no reset) = one TFLM interpreter invoked five times: the
    state shifts through its whole memory; edgemem_reset() then gives the first run's output again."""
    from edgemem.reference import seeded_inputs, tflm_interpreter
    from op_check import run_in_sequence

    path = tmp_path / "svdf.tflite"
    path.write_bytes(svdf_model(**SVDF_CASES[name]))
    inputs = [seeded_inputs(path, seed)[0] for seed in range(5)]
    got, again = run_in_sequence(path, tmp_path, inputs)
    interp = tflm_interpreter(path)
    expected = []
    for x in inputs:
        interp.set_input(x, 0)
        interp.invoke()
        expected.append(np.array(interp.get_output(0), copy=True))
    for k, (g, want) in enumerate(zip(got, expected)):
        if want.dtype == np.float32:
            np.testing.assert_allclose(g, want, rtol=1e-5, atol=1e-5 * max(1.0, float(np.abs(want).max())), err_msg=f"run {k}")
        else:
            np.testing.assert_array_equal(g, want, err_msg=f"run {k}")
    np.testing.assert_array_equal(again, got[0])
    assert not np.array_equal(expected[-1], expected[0])
