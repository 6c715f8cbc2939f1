"""The matmul family against TFLite Micro: FULLY_CONNECTED (per-tensor and per-channel int8, float32), BATCH_MATMUL,
TRANSPOSE_CONV, SOFTMAX with beta != 1, LOG_SOFTMAX, L2_NORMALIZATION.

Two sources of models: the converter's (tests/models/ops/<OP>-<variant>-<type>.tflite, written by
tests/models/gen_matmul.py with TensorFlow) and hand-made flatbuffers below for exact edge cases (zero points at
the ends of the range, multipliers above 1, keep_num_dims false on a 3-D input, batch > 1). int8 outputs must be
TFLM's bit for bit, float32 within 1e-5 relative (tests/op_check.py).
"""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pytest

from op_check import check_model

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "examples"))
import make_example_model as mm  # noqa: E402
import tflite  # noqa: E402

OPS_DIR = Path(__file__).resolve().parent / "models" / "ops"


def _converted(op: str) -> list[Path]:
    return sorted(OPS_DIR.glob(f"{op}-*.tflite"))


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
