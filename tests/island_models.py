"""int8 models with float islands, written with the flatbuffer builder: DEQUANTIZE of an int8 activation ->
float operators -> QUANTIZE, as TensorFlow's converter leaves them around operators it cannot quantize (its
float fallback: TFLITE_BUILTINS next to TFLITE_BUILTINS_INT8). TFLM runs those operators in float."""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "examples"))
import make_example_model as mm  # noqa: E402


def _sub_options():
    import tflite

    def fn(b):
        tflite.SubOptionsStart(b)
        tflite.SubOptionsAddFusedActivationFunction(b, mm.ACT.NONE)
        return tflite.SubOptionsEnd(b)

    return mm.OPTS.SubOptions, fn


def _mean_options():
    import tflite

    def fn(b):
        tflite.ReducerOptionsStart(b)
        tflite.ReducerOptionsAddKeepDims(b, True)
        return tflite.ReducerOptionsEnd(b)

    return mm.OPTS.ReducerOptions, fn


def chain_model(seed: int = 0) -> bytes:
    """x int8[1,4,8] -> DEQUANTIZE -> f; TANH(f) * c + f (float) -> QUANTIZE -> int8 ADD with x -> y int8."""
    rng = np.random.default_rng(seed)
    mb = mm.ModelBuilder(description="edgemem float island: chain")
    qx = mm.qparams([0.05], [-3])
    x = mb.tensor("x", (1, 4, 8), np.int8, qx)
    f = mb.tensor("f", (1, 4, 8), np.float32)
    mb.op(mm.OP.DEQUANTIZE, [x], [f])
    t = mb.tensor("t", (1, 4, 8), np.float32)
    mb.op(mm.OP.TANH, [f], [t])
    c = mb.const("c", rng.uniform(-2, 2, 8).astype(np.float32))
    m = mb.tensor("m", (1, 4, 8), np.float32)
    mb.op(mm.OP.MUL, [t, c], [m], *mm.mul_options())
    s = mb.tensor("s", (1, 4, 8), np.float32)
    mb.op(mm.OP.ADD, [m, f], [s], *mm.add_options())
    q = mb.tensor("q", (1, 4, 8), np.int8, mm.qparams([0.04], [2]))
    mb.op(mm.OP.QUANTIZE, [s], [q])
    y = mb.tensor("y", (1, 4, 8), np.int8, mm.qparams([0.07], [-1]))
    mb.op(mm.OP.ADD, [q, x], [y], *mm.add_options())
    return mb.serialize([x], [y])


def layernorm_model(seed: int = 0) -> bytes:
    """x int8[1,6,16] -> FULLY_CONNECTED (int8) -> DEQUANTIZE -> LayerNormalization in float (MEAN, SUB, MUL,
    MEAN, ADD eps, RSQRT, MUL gamma, ADD beta) -> QUANTIZE -> y int8, and the float normalised tensor as a
    second, float output (an island that ends at a model output too)."""
    rng = np.random.default_rng(seed)
    mb = mm.ModelBuilder(description="edgemem float island: layer norm")
    x = mb.tensor("x", (1, 6, 16), np.int8, mm.qparams([0.05], [4]))
    w = mb.const("w", rng.integers(-127, 128, (16, 16)).astype(np.int8), mm.qparams([0.01], [0]))
    b = mb.const("b", rng.integers(-500, 500, 16).astype(np.int32), mm.qparams([0.0005], [0]))
    h = mb.tensor("h", (1, 6, 16), np.int8, mm.qparams([0.12], [-5]))

    def fc_options(b_):
        import tflite

        tflite.FullyConnectedOptionsStart(b_)
        tflite.FullyConnectedOptionsAddFusedActivationFunction(b_, mm.ACT.NONE)
        tflite.FullyConnectedOptionsAddKeepNumDims(b_, True)
        return tflite.FullyConnectedOptionsEnd(b_)

    mb.op(mm.OP.FULLY_CONNECTED, [x, w, b], [h], mm.OPTS.FullyConnectedOptions, fc_options)
    f = mb.tensor("f", (1, 6, 16), np.float32)
    mb.op(mm.OP.DEQUANTIZE, [h], [f])
    axis = mb.const("axis", np.array([-1], np.int32))
    mean = mb.tensor("mean", (1, 6, 1), np.float32)
    mb.op(mm.OP.MEAN, [f, axis], [mean], *_mean_options())
    d = mb.tensor("d", (1, 6, 16), np.float32)
    mb.op(mm.OP.SUB, [f, mean], [d], *_sub_options(), version=1)
    d2 = mb.tensor("d2", (1, 6, 16), np.float32)
    mb.op(mm.OP.MUL, [d, d], [d2], *mm.mul_options())
    var = mb.tensor("var", (1, 6, 1), np.float32)
    mb.op(mm.OP.MEAN, [d2, axis], [var], *_mean_options())
    eps = mb.const("eps", np.array([1e-3], np.float32))
    ve = mb.tensor("ve", (1, 6, 1), np.float32)
    mb.op(mm.OP.ADD, [var, eps], [ve], *mm.add_options())
    r = mb.tensor("r", (1, 6, 1), np.float32)
    mb.op(mm.OP.RSQRT, [ve], [r])
    n = mb.tensor("n", (1, 6, 16), np.float32)
    mb.op(mm.OP.MUL, [d, r], [n], *mm.mul_options())
    gamma = mb.const("gamma", rng.uniform(0.5, 1.5, 16).astype(np.float32))
    g = mb.tensor("g", (1, 6, 16), np.float32)
    mb.op(mm.OP.MUL, [n, gamma], [g], *mm.mul_options())
    beta = mb.const("beta", rng.uniform(-0.5, 0.5, 16).astype(np.float32))
    o = mb.tensor("o", (1, 6, 16), np.float32)
    mb.op(mm.OP.ADD, [g, beta], [o], *mm.add_options())
    y = mb.tensor("y", (1, 6, 16), np.int8, mm.qparams([0.03], [0]))
    mb.op(mm.OP.QUANTIZE, [o], [y])
    return mb.serialize([x], [y, n])


def single_op_model(seed: int = 0) -> bytes:
    """x int8[1,64] -> DEQUANTIZE -> float MUL(f, f) -> QUANTIZE -> y: one float operator between a DEQUANTIZE
    and a QUANTIZE has the same Relax form as an int8 MUL, but TFLM runs it in float (the rounding differs)."""
    mb = mm.ModelBuilder(description="edgemem float island: one operator")
    x = mb.tensor("x", (1, 64), np.int8, mm.qparams([0.0731], [5]))
    f = mb.tensor("f", (1, 64), np.float32)
    mb.op(mm.OP.DEQUANTIZE, [x], [f])
    m = mb.tensor("m", (1, 64), np.float32)
    mb.op(mm.OP.MUL, [f, f], [m], *mm.mul_options())
    y = mb.tensor("y", (1, 64), np.int8, mm.qparams([0.1], [-128]))
    mb.op(mm.OP.QUANTIZE, [m], [y])
    return mb.serialize([x], [y])

