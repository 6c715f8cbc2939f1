"""16x8 (int16 activations, int8 weights) CONV_2D, DEPTHWISE_CONV_2D, FULLY_CONNECTED, TRANSPOSE_CONV and
BATCH_MATMUL against TFLite Micro, bit for bit on seeds 0, 1, 2 (tests/op_check.py); and the converter's int8
CONV_2D / DEPTHWISE_CONV_2D one-operator models (integerize's kernels), which had no test of their own.

Two sources of models: the converter's (tests/models/ops/<OP>-<variant>-<int16|iofloat-int16|int8>.tflite,
written by tests/models/gen_conv.py and gen_matmul.py) and hand-made flatbuffers below for what the converter
does not write: int32 biases (TFLM's int32 accumulator), no bias with quantized_bias_type INT32, an int16
TRANSPOSE_CONV bias, per-tensor weights, multipliers above 1 (shift > 0) and outputs saturating at the int16
ends, nonzero zero points (ignored by TFLM's int16 convolutions except in the activation clamp; used by
FULLY_CONNECTED), grouped convolution, batches, depth multiplier 3; and the forms TFLM cannot run right, which
edgemem refuses (nonzero BATCH_MATMUL zero points, a depth_multiplier option the shapes contradict, activation
bounds beyond int32, scales of 128 and more; an int32 TRANSPOSE_CONV or DEPTHWISE_CONV_2D bias is built as TFLM
reads it, tests/test_transpose_conv_forms.py and test_depthwise16_bias.py). The int16
depthwise convolution written over its input (passes/inplace.py) is checked on its arena too.

Converter models with an operator edgemem refuses (the float-edged ones need int16 QUANTIZE / DEQUANTIZE, the
attention model an int16 SOFTMAX) are strict expected failures naming it (op_check.model_param), so they run
for real the day it lands.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

import numpy as np
import pytest

from op_check import build_for_host, check_model, model_param

from edgemem.errors import UnsupportedModelError

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "examples"))
import make_example_model as mm  # noqa: E402
import tflite  # noqa: E402

OPS_DIR = Path(__file__).resolve().parent / "models" / "ops"
MINE = ("CONV_2D", "DEPTHWISE_CONV_2D", "FULLY_CONNECTED", "TRANSPOSE_CONV", "BATCH_MATMUL")

# Run by default: every 16x8 converter model except those below, which repeat what others test (the float edges
# are int16 QUANTIZE / DEQUANTIZE around the same kernels; adj_x / adj_y are in adjxy and the hand-made cases),
# and the int8 conv models named here; EDGEMEM_ALL_OP_MODELS=1 runs them all (the file's budget is ~90 s).
_INT16_EXTRA = ("CONV_2D-3x3-valid-s2-relu-iofloat", "CONV_2D-conv1d-k3-iofloat", "DEPTHWISE_CONV_2D-3x3-same-s1-iofloat",
                "DEPTHWISE_CONV_2D-3x3-valid-s2-relu-iofloat", "FULLY_CONNECTED-3d-iofloat", "BATCH_MATMUL-adjx-",
                "BATCH_MATMUL-adjy-", "BATCH_MATMUL-dot-", "BATCH_MATMUL-bcast-int16")
_INT8_DEFAULT = ("CONV_2D-3x3-same-s1-int8", "CONV_2D-conv1d-k3-int8", "DEPTHWISE_CONV_2D-mult2-int8")


def _converted() -> list[Path]:
    every = os.environ.get("EDGEMEM_ALL_OP_MODELS")
    chosen = []
    for op in MINE:
        for p in sorted(OPS_DIR.glob(f"{op}-*.tflite")):
            if p.stem.endswith("int16"):
                if every or not any(p.stem.startswith(e) for e in _INT16_EXTRA):
                    chosen.append(p)
            elif op in ("CONV_2D", "DEPTHWISE_CONV_2D") and p.stem.endswith("-int8") and not p.stem.endswith("fio-int8"):
                if every or p.stem in _INT8_DEFAULT:
                    chosen.append(p)
    return chosen


def _check(model, tmp_path, **options):
    result = check_model(model, tmp_path, **options)
    assert result.oracle == "tflm"
    return result


@pytest.mark.parametrize("path", [model_param(p) for p in _converted()])
def test_converted(path, tmp_path):
    _check(path, tmp_path)


def test_converted_models_present():
    names = {p.stem for p in _converted()}
    for op in MINE:
        assert any(n.startswith(op + "-") and n.endswith("-int16") for n in names), op
    assert sum(n.endswith("-int16") and not n.endswith("iofloat-int16") for n in names) >= 34


# ---------------------------------------------------------------- hand-made models

I16 = np.int16


def _q(scale, zp=0):
    return mm.qparams([scale], [zp])


def _conv_options(stride, padding, act, dilation, bias_type):
    def fn(b):
        tflite.Conv2DOptionsStart(b)
        tflite.Conv2DOptionsAddPadding(b, padding)
        tflite.Conv2DOptionsAddStrideW(b, stride[1])
        tflite.Conv2DOptionsAddStrideH(b, stride[0])
        tflite.Conv2DOptionsAddFusedActivationFunction(b, act)
        tflite.Conv2DOptionsAddDilationWFactor(b, dilation[1])
        tflite.Conv2DOptionsAddDilationHFactor(b, dilation[0])
        tflite.Conv2DOptionsAddQuantizedBiasType(b, bias_type)
        return tflite.Conv2DOptionsEnd(b)

    return mm.OPTS.Conv2DOptions, fn


def _depthwise_options(stride, padding, act, dilation, multiplier):
    def fn(b):
        tflite.DepthwiseConv2DOptionsStart(b)
        tflite.DepthwiseConv2DOptionsAddPadding(b, padding)
        tflite.DepthwiseConv2DOptionsAddStrideW(b, stride[1])
        tflite.DepthwiseConv2DOptionsAddStrideH(b, stride[0])
        tflite.DepthwiseConv2DOptionsAddDepthMultiplier(b, multiplier)
        tflite.DepthwiseConv2DOptionsAddFusedActivationFunction(b, act)
        tflite.DepthwiseConv2DOptionsAddDilationWFactor(b, dilation[1])
        tflite.DepthwiseConv2DOptionsAddDilationHFactor(b, dilation[0])
        return tflite.DepthwiseConv2DOptionsEnd(b)

    return mm.OPTS.DepthwiseConv2DOptions, fn


def _fc_options(act, keep_num_dims, bias_type):
    def fn(b):
        tflite.FullyConnectedOptionsStart(b)
        tflite.FullyConnectedOptionsAddFusedActivationFunction(b, act)
        tflite.FullyConnectedOptionsAddKeepNumDims(b, keep_num_dims)
        tflite.FullyConnectedOptionsAddQuantizedBiasType(b, bias_type)
        return tflite.FullyConnectedOptionsEnd(b)

    return mm.OPTS.FullyConnectedOptions, fn


def _tconv_options(stride, padding, act):
    def fn(b):
        tflite.TransposeConvOptionsStart(b)
        tflite.TransposeConvOptionsAddPadding(b, padding)
        tflite.TransposeConvOptionsAddStrideH(b, stride[0])
        tflite.TransposeConvOptionsAddStrideW(b, stride[1])
        tflite.TransposeConvOptionsAddFusedActivationFunction(b, act)
        return tflite.TransposeConvOptionsEnd(b)

    return mm.OPTS.TransposeConvOptions, fn


def _bmm_options(adj_x, adj_y):
    def fn(b):
        tflite.BatchMatMulOptionsStart(b)
        tflite.BatchMatMulOptionsAddAdjX(b, adj_x)
        tflite.BatchMatMulOptionsAddAdjY(b, adj_y)
        return tflite.BatchMatMulOptionsEnd(b)

    return mm.OPTS.BatchMatMulOptions, fn


def _weights(rng, shape, wmax, channels, per_channel, w_scale, axis):
    """int8 weights in [-wmax, wmax] and their scales (per channel: spread over a factor of e^3, so that the
    channels' multipliers differ in exponent)."""
    w = rng.integers(-wmax, wmax + 1, shape).astype(np.int8)
    scales = (w_scale * np.exp(rng.uniform(-1.5, 1.5, channels))).astype(np.float32) if per_channel else np.float32([w_scale])
    return w, mm.qparams(scales, 0, axis), scales


def _auto_gain(gain, depth: int, wmax: int) -> float:
    """The multiplier (in * w / out) of a middle channel: given, or one that puts the output's standard deviation
    at about a quarter of the int16 range for full-range inputs (tests/op_check.py's seeded inputs) and weights
    uniform in [-wmax, wmax], so that few outputs saturate."""
    if gain is not None:
        return gain
    return 0.25 * 32767 / (np.sqrt(depth) * 18918 * max(wmax, 1) * 0.58)


def _bias(rng, mb, dtype, channels, in_scale, scales, magnitude):
    if dtype is None:
        return -1
    b = rng.integers(-magnitude, magnitude + 1, channels).astype(np.dtype(dtype))
    return mb.const("b", b, mm.qparams((np.float32(in_scale) * np.broadcast_to(scales, (channels,))).astype(np.float32), 0))


def conv_model(x_shape, w_shape, out_shape, *, stride=(1, 1), padding=mm.PAD.SAME, dilation=(1, 1), act=mm.ACT.NONE,
               bias="int64", bias_type=0, per_channel=True, in_q=(1 / 4096, 0), out_zp=0, out_scale=None, gain=None,
               wmax=127, bias_mag=1 << 20, seed=0) -> bytes:
    """int16 x -> CONV_2D (weights [O, KH, KW, C/groups]) -> int16 y. ``gain``: the multiplier of the middle
    channel (in * w / out) when ``out_scale`` is not given."""
    rng = np.random.default_rng(seed)
    o = w_shape[0]
    mb = mm.ModelBuilder(description="edgemem int16 conv test")
    x = mb.tensor("x", x_shape, I16, _q(*in_q))
    w, wq, scales = _weights(rng, w_shape, wmax, o, per_channel, 0.01, 0)
    gain = _auto_gain(gain, int(np.prod(w_shape[1:])), wmax)
    out_s = out_scale if out_scale is not None else float(in_q[0]) * 0.01 / gain
    inputs = [x, mb.const("w", w, wq), _bias(rng, mb, bias, o, in_q[0], scales, bias_mag)]
    y = mb.tensor("y", out_shape, I16, _q(out_s, out_zp))
    if bias is None:
        inputs = inputs[:2]  # the two-input form (FULLY_CONNECTED's cases write -1 instead)
    mb.op(mm.OP.CONV_2D, inputs, [y], *_conv_options(stride, padding, act, dilation, bias_type), version=4)
    return mb.serialize([x], [y])


def depthwise_model(x_shape, kernel, multiplier, out_shape, *, stride=(1, 1), padding=mm.PAD.SAME, dilation=(1, 1),
                    act=mm.ACT.NONE, bias="int64", per_channel=True, in_q=(1 / 4096, 0), out_zp=0, gain=None, wmax=127,
                    bias_mag=1 << 20, seed=0) -> bytes:
    rng = np.random.default_rng(seed)
    oc = x_shape[3] * multiplier
    mb = mm.ModelBuilder(description="edgemem int16 depthwise test")
    x = mb.tensor("x", x_shape, I16, _q(*in_q))
    w, wq, scales = _weights(rng, (1, *kernel, oc), wmax, oc, per_channel, 0.01, 3)
    inputs = [x, mb.const("w", w, wq), _bias(rng, mb, bias, oc, in_q[0], scales, bias_mag)]
    if bias is None:
        inputs = inputs[:2]  # TFLM crashes in Prepare on a -1 (left-out) DEPTHWISE_CONV_2D bias
    gain = _auto_gain(gain, kernel[0] * kernel[1], wmax)
    y = mb.tensor("y", out_shape, I16, _q(float(in_q[0]) * 0.01 / gain, out_zp))
    mb.op(mm.OP.DEPTHWISE_CONV_2D, inputs, [y], *_depthwise_options(stride, padding, act, dilation, multiplier), version=5)
    return mb.serialize([x], [y])


def fc_model(in_shape, units, *, out_shape=None, keep_num_dims=False, act=mm.ACT.NONE, bias="int64", bias_type=0,
             per_channel=False, in_q=(1 / 4096, 0), out_zp=0, gain=None, wmax=127, bias_mag=1 << 20, seed=0) -> bytes:
    rng = np.random.default_rng(seed)
    k = in_shape[-1]
    mb = mm.ModelBuilder(description="edgemem int16 fully_connected test")
    x = mb.tensor("x", in_shape, I16, _q(*in_q))
    w, wq, scales = _weights(rng, (units, k), wmax, units, per_channel, 0.01, 0)
    inputs = [x, mb.const("w", w, wq), _bias(rng, mb, bias, units, in_q[0], scales, bias_mag)]
    if out_shape is None:
        out_shape = (*in_shape[:-1], units) if keep_num_dims else (int(np.prod(in_shape[:-1])), units)
    gain = _auto_gain(gain, k, wmax)
    y = mb.tensor("y", out_shape, I16, _q(float(in_q[0]) * 0.01 / gain, out_zp))
    mb.op(mm.OP.FULLY_CONNECTED, inputs, [y], *_fc_options(act, keep_num_dims, bias_type), version=11)
    return mb.serialize([x], [y])


def tconv_model(x_shape, w_shape, out_shape, *, stride=(1, 1), padding=mm.PAD.SAME, act=mm.ACT.NONE, bias="int64",
                per_channel=True, in_q=(1 / 4096, 0), out_zp=0, gain=None, wmax=127, bias_mag=1 << 20, seed=0) -> bytes:
    rng = np.random.default_rng(seed)
    o = w_shape[0]
    mb = mm.ModelBuilder(description="edgemem int16 transpose_conv test")
    shape = mb.const("shape", np.array(out_shape, np.int32))
    x = mb.tensor("x", x_shape, I16, _q(*in_q))
    w, wq, scales = _weights(rng, w_shape, wmax, o, per_channel, 0.01, 0)
    inputs = [shape, mb.const("w", w, wq), x]
    if bias is not None:
        inputs.append(_bias(rng, mb, bias, o, in_q[0], scales, bias_mag))
    # an output gathers about KH * KW * I / stride^2 products
    gain = _auto_gain(gain, max(int(np.prod(w_shape[1:])) // (stride[0] * stride[1]), 1), wmax)
    y = mb.tensor("y", out_shape, I16, _q(float(in_q[0]) * 0.01 / gain, out_zp))
    mb.op(mm.OP.TRANSPOSE_CONV, inputs, [y], *_tconv_options(stride, padding, act), version=3)
    return mb.serialize([x], [y])


def bmm_model(lhs_shape, rhs_shape, out_shape, *, adj_x=False, adj_y=False, const_rhs=False, rhs_max=32767,
              scales=(1 / 4096, 1 / 4096, 0.05), zps=(0, 0, 0), seed=0) -> bytes:
    rng = np.random.default_rng(seed)
    mb = mm.ModelBuilder(description="edgemem int16 batch_matmul test")
    a = mb.tensor("lhs", lhs_shape, I16, _q(scales[0], zps[0]))
    if const_rhs:
        b = mb.const("rhs", rng.integers(-rhs_max, rhs_max + 1, rhs_shape).astype(np.int16), _q(scales[1], zps[1]))
    else:
        b = mb.tensor("rhs", rhs_shape, I16, _q(scales[1], zps[1]))
    y = mb.tensor("y", out_shape, I16, _q(scales[2], zps[2]))
    mb.op(mm.OP.BATCH_MATMUL, [a, b], [y], *_bmm_options(adj_x, adj_y), version=4)
    return mb.serialize([a] if const_rhs else [a, b], [y])


I32_BIAS = tflite.TensorType.INT32
HANDMADE = {
    # CONV_2D: TFLM's int32 accumulator (int32 bias, or none and quantized_bias_type INT32)
    "conv-int32-bias-relu": lambda: conv_model((1, 6, 6, 5), (4, 3, 3, 5), (1, 6, 6, 4), act=mm.ACT.RELU, bias="int32", seed=1),
    "conv-nobias-int32-accumulator": lambda: conv_model((1, 5, 7, 3), (6, 3, 2, 3), (1, 3, 4, 6), stride=(2, 2), bias=None,
                                                        bias_type=I32_BIAS, seed=2),
    "conv-nobias-int64": lambda: conv_model((1, 5, 5, 4), (3, 3, 3, 4), (1, 3, 3, 3), padding=mm.PAD.VALID, bias=None, seed=3),
    # multipliers 0.3 .. 6 (shifts up to 3) with weights in [-2, 2]: about half the outputs saturate at the ends
    "conv-multiplier-above-1-int64": lambda: conv_model((1, 4, 4, 1), (5, 1, 1, 1), (1, 4, 4, 5), wmax=2, gain=1.5, bias_mag=4000, seed=4),
    "conv-multiplier-above-1-int32": lambda: conv_model((1, 4, 4, 2), (5, 1, 1, 2), (1, 4, 4, 5), wmax=1, gain=1.2, bias="int32",
                                                        bias_mag=4000, seed=5),
    "conv-per-tensor-batch2-dil": lambda: conv_model((2, 7, 7, 3), (4, 3, 3, 3), (2, 7, 7, 4), dilation=(2, 1), per_channel=False, seed=6),
    # zero points: ignored by the int16 kernel, but RELU6's clamp is quantize(0) = zp .. quantize(6)
    "conv-zero-points-relu6": lambda: conv_model((1, 5, 5, 2), (3, 3, 3, 2), (1, 5, 5, 3), act=mm.ACT.RELU6, in_q=(1 / 4096, 37), out_zp=-900,
                                                 seed=7),
    "conv-groups2": lambda: conv_model((1, 6, 6, 4), (6, 3, 3, 2), (1, 6, 6, 6), seed=8),
    # DEPTHWISE_CONV_2D
    "depthwise-mult3-nobias-relu-n1-1": lambda: depthwise_model((1, 6, 5, 2), (3, 3), 3, (1, 6, 5, 6), act=mm.ACT.RELU_N1_TO_1, bias=None,
                                                               seed=9),
    "depthwise-per-tensor-multiplier-above-1": lambda: depthwise_model((1, 5, 5, 3), (2, 2), 1, (1, 4, 4, 3), padding=mm.PAD.VALID,
                                                                      per_channel=False, wmax=1, gain=1.05, bias_mag=4000, seed=10),
    "depthwise-zero-points-batch2-s2": lambda: depthwise_model((2, 7, 6, 4), (3, 3), 1, (2, 4, 3, 4), stride=(2, 2), act=mm.ACT.RELU,
                                                              in_q=(1 / 4096, -55), out_zp=300, seed=11),
    # FULLY_CONNECTED: per tensor (the converter writes per channel), zero points, int32 biases
    "fc-per-tensor-zero-points-batch3": lambda: fc_model((3, 20), 7, in_q=(1 / 4096, 120), out_zp=-2000, seed=12),
    "fc-per-tensor-int32-bias-relu": lambda: fc_model((1, 16), 9, bias="int32", act=mm.ACT.RELU, out_zp=50, seed=13),
    "fc-per-channel-int32-bias-relu6": lambda: fc_model((2, 12), 5, bias="int32", per_channel=True, act=mm.ACT.RELU6, seed=14),
    "fc-nobias-int32-accumulator-keepdims": lambda: fc_model((1, 3, 10), 4, keep_num_dims=True, bias=None, bias_type=I32_BIAS,
                                                            per_channel=True, seed=15),
    # FULLY_CONNECTED with a bias neither int64 nor int32: TFLM reads it through an int64 pointer all the same
    # (the model file's bytes after the bias too; a float32 zero bias gives its first half of units a zero one)
    "fc-int16-bias-per-tensor-zero-points": lambda: fc_model((3, 20), 7, bias="int16", in_q=(1 / 4096, 120), out_zp=-2000,
                                                            bias_mag=1000, seed=21),
    "fc-int8-bias-per-channel": lambda: fc_model((2, 12), 9, bias="int8", per_channel=True, bias_mag=100, seed=22),
    "fc-float32-zero-bias-relu": lambda: fc_model((2, 16), 6, bias="float32", bias_mag=0, act=mm.ACT.RELU, seed=23),
    "fc-multiplier-above-1": lambda: fc_model((4, 3), 6, wmax=1, gain=1.0, per_channel=True, bias_mag=4000, seed=16),
    # TRANSPOSE_CONV: an int16 bias (TFLM widens it to int64), per tensor, multipliers above 1
    "tconv-int16-bias-s2": lambda: tconv_model((1, 3, 4, 3), (4, 3, 3, 3), (1, 6, 8, 4), stride=(2, 2), bias="int16", bias_mag=20000, seed=17),
    "tconv-per-tensor-multiplier-above-1-relu": lambda: tconv_model((1, 3, 3, 1), (3, 2, 2, 1), (1, 4, 4, 3), padding=mm.PAD.VALID,
                                                                    act=mm.ACT.RELU, per_channel=False, wmax=1, gain=1.05, bias=None, seed=18),
    # BATCH_MATMUL: multiplier above 1 with a constant rhs, batch broadcast
    "bmm-multiplier-above-1-const-rhs": lambda: bmm_model((1, 3, 4), (1, 4, 2), (1, 3, 2), const_rhs=True, rhs_max=1,
                                                          scales=(1 / 4096, 1 / 4096, 1 / 4096 / 4096 / 1.1), seed=19),
    "bmm-bcast-adjx": lambda: bmm_model((2, 1, 5, 3), (4, 5, 2), (2, 4, 3, 2), adj_x=True, scales=(1 / 4096, 1 / 4096, 0.02), seed=20),
}


@pytest.mark.parametrize("name", list(HANDMADE))
def test_handmade(name, tmp_path):
    _check(HANDMADE[name](), tmp_path)


def _depthwise_wrong_multiplier() -> bytes:
    """A depthwise convolution whose weights make 2 outputs per input channel with depth_multiplier 1 written."""
    mb = mm.ModelBuilder(description="edgemem int16 depthwise test")
    x = mb.tensor("x", (1, 3, 3, 2), I16, _q(1 / 4096))
    w = mb.const("w", np.ones((1, 3, 3, 4), np.int8), mm.qparams([0.01], [0], 3))
    y = mb.tensor("y", (1, 3, 3, 4), I16, _q(0.01))
    mb.op(mm.OP.DEPTHWISE_CONV_2D, [x, w], [y], *_depthwise_options((1, 1), mm.PAD.SAME, mm.ACT.NONE, (1, 1), 1), version=5)
    return mb.serialize([x], [y])


REFUSED = {
    # TFLM's int16 BATCH_MATMUL fails its Prepare on nonzero zero points
    "bmm-zero-point": (lambda: bmm_model((1, 2, 3), (1, 3, 2), (1, 2, 2), zps=(0, 0, 5)), "zero points"),
    # TFLM loops over the depth_multiplier option, not the shapes
    "depthwise-multiplier-option-mismatch": (lambda: _depthwise_wrong_multiplier(), "depth_multiplier option is 1"),
    # 6 / output scale beyond int32 (a dead channel calibrated to a tiny scale): TFLM fails its Prepare
    "conv-relu6-bound-overflow": (lambda: conv_model((1, 3, 3, 1), (1, 1, 1, 1), (1, 3, 3, 1), act=mm.ACT.RELU6, in_q=(1e-9, 0), out_scale=1e-9),
                                  "bounds outside int32"),
    # an effective scale of 200 (shift 8): outside TFLM's int64 MultiplyByQuantizedMultiplier
    "fc-scale-200": (lambda: fc_model((1, 4), 3, gain=200.0), "scales below 128"),
}


@pytest.mark.parametrize("name", list(REFUSED))
def test_refused(name, tmp_path):
    make, words = REFUSED[name]
    with pytest.raises(UnsupportedModelError, match=words):
        build_for_host(make(), tmp_path)


def _arena(result) -> int:
    import json

    return json.loads((Path(result.project) / "edgemem.json").read_text())["arena_bytes"]


def test_depthwise_written_over_its_input(tmp_path):
    """passes/inplace.py rebuilds an int16 DEPTHWISE_CONV_2D (batch 1, multiplier 1) to write over its input (the
    streaming form, outputs held back on the stack): still TFLM's bits, one activation fewer in the arena."""
    model = depthwise_model((1, 10, 12, 8), (3, 3), 1, (1, 10, 12, 8), dilation=(2, 1), act=mm.ACT.RELU6, seed=21)
    inplace = _check(model, tmp_path / "inplace")
    apart = _check(model, tmp_path / "apart", inplace=False)
    assert _arena(apart) == 2 * 10 * 12 * 8 * 2
    assert _arena(inplace) == 10 * 12 * 8 * 2
