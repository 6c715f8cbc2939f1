"""Small int8 models written with the flatbuffer builder (examples/make_example_model.py) for the pass tests:
a concatenation block, a widening layer with float output, a residual block."""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "examples"))
import make_example_model as mm  # noqa: E402

_Q = {"scale": [0.05], "zero_point": [-3]}  # every activation of the concat models (CONCATENATION needs one)


def _conv(mb, rng, name, x, c_in, c_out, k, out_shape, out=None):
    w = rng.integers(-127, 128, (c_out, k, k, c_in)).astype(np.int8)
    ws = (np.full(c_out, 0.004) * rng.uniform(0.5, 1.5, c_out)).astype(np.float32)
    wt = mb.const(f"{name}/w", w, mm.qparams(ws, 0, 0))
    b = mb.const(f"{name}/b", rng.integers(-2000, 2000, c_out).astype(np.int32), mm.qparams(ws * np.float32(_Q["scale"][0]), 0, 0))
    y = out if out is not None else mb.tensor(name, out_shape, np.int8, _Q)
    mb.op(mm.OP.CONV_2D, [x, wt, b], [y], *mm.conv2d_options(1, mm.PAD.SAME, mm.ACT.RELU), version=3)
    return y


def _concat_options(axis):
    import tflite

    def fn(b):
        tflite.ConcatenationOptionsStart(b)
        tflite.ConcatenationOptionsAddAxis(b, axis)
        tflite.ConcatenationOptionsAddFusedActivationFunction(b, mm.ACT.NONE)
        return tflite.ConcatenationOptionsEnd(b)

    return mm.OPTS.ConcatenationOptions, fn


def concat_model(axis: int, seed: int = 0) -> bytes:
    """x[1,8,8,3] -> a = conv1x1 (8), b = conv3x3 (8), c = conv1x1(a) (8); concat(a, b, c) on ``axis``
    (1: rows, 3: channels) -> conv1x1 (4). ``a`` is read by ``c`` too, so it stays a tensor of its own
    and is copied; ``b`` and ``c`` are written straight into the concatenation."""
    rng = np.random.default_rng(seed)
    mb = mm.ModelBuilder(description="edgemem concat test")
    x = mb.tensor("x", (1, 8, 8, 3), np.int8, _Q)
    a = _conv(mb, rng, "a", x, 3, 8, 1, (1, 8, 8, 8))
    b = _conv(mb, rng, "b", x, 3, 8, 3, (1, 8, 8, 8))
    c = _conv(mb, rng, "c", a, 8, 8, 1, (1, 8, 8, 8))
    cat_shape = (1, 24, 8, 8) if axis == 1 else (1, 8, 8, 24)
    cat = mb.tensor("cat", cat_shape, np.int8, _Q)
    mb.op(mm.OP.CONCATENATION, [a, b, c], [cat], *_concat_options(axis))
    y = _conv(mb, rng, "y", cat, 24 if axis == 3 else 8, 4, 1, cat_shape[:3] + (4,))
    return mb.serialize([x], [y])


def widening_model(seed: int = 0) -> bytes:
    """float x[1,16] -> QUANTIZE -> FULLY_CONNECTED 16 -> 256 -> DEQUANTIZE -> float [1,256]: the int8
    result (256 B) and the float one (1,024 B) meet at the DEQUANTIZE."""
    rng = np.random.default_rng(seed)
    mb = mm.ModelBuilder(description="edgemem dequantize-fold test")
    xf = mb.tensor("x", (1, 16), np.float32)
    q_in = {"scale": [0.02], "zero_point": [5]}
    q_out = {"scale": [0.1], "zero_point": [-7]}
    xq = mb.tensor("xq", (1, 16), np.int8, q_in)
    mb.op(mm.OP.QUANTIZE, [xf], [xq])
    w = rng.integers(-127, 128, (256, 16)).astype(np.int8)
    wt = mb.const("fc/w", w, mm.qparams([0.01], 0))
    bias = mb.const("fc/b", rng.integers(-500, 500, 256).astype(np.int32), mm.qparams([0.02 * 0.01], 0))
    yq = mb.tensor("yq", (1, 256), np.int8, q_out)
    mb.op(mm.OP.FULLY_CONNECTED, [xq, wt, bias], [yq], *mm.fully_connected_options(mm.ACT.NONE), version=4)
    yf = mb.tensor("y", (1, 256), np.float32)
    mb.op(mm.OP.DEQUANTIZE, [yq], [yf])
    return mb.serialize([xf], [yf])


def residual_model(seed: int = 0) -> bytes:
    rng = np.random.default_rng(seed)
    mb = mm.ModelBuilder(description="edgemem residual test")
    x = mb.tensor("x", (1, 8, 8, 8), np.int8, _Q)
    y1 = _conv(mb, rng, "c1", x, 8, 8, 1, (1, 8, 8, 8))
    y2 = _conv(mb, rng, "c2", y1, 8, 8, 3, (1, 8, 8, 8))
    out = mb.tensor("out", (1, 8, 8, 8), np.int8, _Q)
    mb.op(mm.OP.ADD, [y1, y2], [out], *mm.add_options(mm.ACT.NONE), version=2)
    return mb.serialize([x], [out])
