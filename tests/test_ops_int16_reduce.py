"""int16 (16x8) pools, SUM, MEAN and RESIZE_NEAREST_NEIGHBOR against TFLite Micro, bit for bit: the converter's
int16 models of tests/models/gen_reduce.py (int16 and float edges) plus hand-made edge cases (zero points,
multipliers above one, saturation, equal input and output scales for MEAN, fused activations, resize modes),
and what TFLite Micro has no int16 kernel for (REDUCE_MAX, REDUCE_MIN, RESIZE_BILINEAR...) refused by name."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import numpy as np
import pytest

from edgemem.errors import UnsupportedModelError
from op_check import build_for_host, check_model

sys.path.insert(0, str(Path(__file__).resolve().parent))
from test_ops_reduce import _options, mm  # noqa: E402

OPS = Path(__file__).parent / "models" / "ops"
FAMILY = ("SUM", "MEAN", "AVERAGE_POOL_2D", "MAX_POOL_2D", "RESIZE_NEAREST_NEIGHBOR")
# the same operator and variant as another kind tested here, or tested by test_ops_layout.py: run with
# EDGEMEM_ALL_OP_MODELS=1 (the time budget of this file is about 90 s on a busy machine)
EXTRA = {"SUM-axis12-keep-int16", "MEAN-axis12-keep-int16", "MEAN-axis12-int16", "AVERAGE_POOL_2D-valid-s2-int16",
         "RESIZE_NEAREST_NEIGHBOR-legacy-int16", "RESIZE_NEAREST_NEIGHBOR-up2-int16"}
CONVERTED = sorted(p.name for p in OPS.glob("*int16.tflite") if p.name.split("-")[0] in FAMILY
                   and (os.environ.get("EDGEMEM_ALL_OP_MODELS") == "1" or p.stem not in EXTRA))


@pytest.mark.parametrize("name", CONVERTED)
def test_converted(name, tmp_path):
    result = check_model(OPS / name, tmp_path)
    assert result.oracle == "tflm", f"{name}: TFLite Micro did not run the model (oracle {result.oracle})"


# ---------------------------------------------------------------- hand-made models (exact quantization, edge cases)

def _q(scale, zp):
    return mm.qparams([scale], [zp])


def reduce_model(op, shape, axes, keep, in_q, out_q) -> bytes:
    mb = mm.ModelBuilder()
    x = mb.tensor("x", shape, np.int16, _q(*in_q))
    ax = mb.const("axes", np.array(axes, np.int32))
    norm = {a % len(shape) for a in axes}
    out_shape = [1 if a in norm else d for a, d in enumerate(shape) if keep or a not in norm]
    y = mb.tensor("y", out_shape, np.int16, _q(*out_q))
    mb.op(getattr(mm.OP, op), [x, ax], [y], *_options("ReducerOptions", KeepDims=keep))
    return mb.serialize([x], [y])


def pool_model(op, shape, filt, stride, padding, act, q, out_q=None) -> bytes:
    mb = mm.ModelBuilder()
    x = mb.tensor("x", shape, np.int16, _q(*q))
    if padding == mm.PAD.SAME:
        oh, ow = -(-shape[1] // stride[0]), -(-shape[2] // stride[1])
    else:
        oh, ow = (shape[1] - filt[0]) // stride[0] + 1, (shape[2] - filt[1]) // stride[1] + 1
    y = mb.tensor("y", [shape[0], oh, ow, shape[3]], np.int16, _q(*(out_q or q)))
    opts = _options("Pool2DOptions", Padding=padding, StrideW=stride[1], StrideH=stride[0], FilterWidth=filt[1],
                    FilterHeight=filt[0], FusedActivationFunction=act)
    mb.op(getattr(mm.OP, op), [x], [y], *opts, version=3)
    return mb.serialize([x], [y])


def nearest_model(shape, size, align, half, op="RESIZE_NEAREST_NEIGHBOR") -> bytes:
    mb = mm.ModelBuilder()
    x = mb.tensor("x", shape, np.int16, _q(0.0003, 0))
    sz = mb.const("size", np.array(size, np.int32))
    y = mb.tensor("y", [shape[0], *size, shape[3]], np.int16, _q(0.0003, 0))
    kind = "ResizeNearestNeighborOptions" if op == "RESIZE_NEAREST_NEIGHBOR" else "ResizeBilinearOptions"
    mb.op(getattr(mm.OP, op), [x, sz], [y], *_options(kind, AlignCorners=align, HalfPixelCenters=half), version=4)
    return mb.serialize([x], [y])


HANDMADE = {
    # SUM: no 1/count; saturation (a multiplier far above one), zero points (TFLM does not require 0 for SUM)
    "sum-all-axes": lambda: reduce_model("SUM", [1, 3, 4, 5], [0, 1, 2, 3], False, (0.0002, 0), (0.03, 0)),
    "sum-saturates-zp": lambda: reduce_model("SUM", [2, 6, 5], [-1, 1], True, (0.0001, 100), (0.00005, -50)),
    # MEAN: equal input and output quantization (TFLM's int16 path is QuantizedMeanOrSum all the same), a count
    # that is no power of two, a multiplier above one, all axes, zero points
    "mean-same-scale-count7": lambda: reduce_model("MEAN", [2, 7, 3], [1], True, (0.0003, 0), (0.0003, 0)),
    "mean-up-saturates": lambda: reduce_model("MEAN", [3, 5, 4], [0, 2], False, (0.001, 0), (0.0001, 0)),
    "mean-all-axes-zp": lambda: reduce_model("MEAN", [2, 3, 5], [0, 1, 2], False, (0.0004, -700), (0.00002, 321)),
    # pools: fused activations inside int16's range, SAME with even windows, strides, a zero point
    "avgpool-same-2x2-s1-relu6": lambda: pool_model("AVERAGE_POOL_2D", [1, 5, 6, 3], (2, 2), (1, 1), mm.PAD.SAME, mm.ACT.RELU6, (0.0003, 0)),
    "avgpool-same-4x3-s3-n1to1-zp": lambda: pool_model("AVERAGE_POOL_2D", [1, 7, 8, 2], (4, 3), (3, 2), mm.PAD.SAME, mm.ACT.RELU_N1_TO_1, (0.00004, 1000)),
    "avgpool-valid-3x3-relu": lambda: pool_model("AVERAGE_POOL_2D", [2, 6, 6, 2], (3, 3), (1, 2), mm.PAD.VALID, mm.ACT.RELU, (0.001, 0)),
    "maxpool-same-3x3-s2-relu-zp": lambda: pool_model("MAX_POOL_2D", [1, 7, 6, 3], (3, 3), (2, 2), mm.PAD.SAME, mm.ACT.RELU, (0.0005, -2000)),
    "maxpool-same-2x4-s1-relu6": lambda: pool_model("MAX_POOL_2D", [1, 5, 7, 2], (2, 4), (1, 1), mm.PAD.SAME, mm.ACT.RELU6, (0.0003, 0)),
    # RESIZE_NEAREST_NEIGHBOR: up and down, align_corners, half_pixel_centers, size 1
    "nearest-up-legacy": lambda: nearest_model([1, 3, 4, 2], [7, 5], False, False),
    "nearest-down-half-pixel": lambda: nearest_model([2, 9, 7, 2], [4, 3], False, True),
    "nearest-align-corners": lambda: nearest_model([1, 5, 4, 3], [9, 7], True, False),
    "nearest-align-to-1": lambda: nearest_model([1, 5, 4, 3], [1, 3], True, False),
}


@pytest.mark.parametrize("name", sorted(HANDMADE))
def test_handmade(name, tmp_path):
    result = check_model(HANDMADE[name](), tmp_path)
    assert result.oracle == "tflm", f"{name}: TFLite Micro did not run the model (oracle {result.oracle})"


REFUSED = {
    # TFLite Micro has no int16 kernel for these: refused up front, naming the operator and its type
    r"REDUCE_MAX \(int16\)": lambda: reduce_model("REDUCE_MAX", [2, 3, 4], [1], False, (0.0003, 0), (0.0003, 0)),
    r"REDUCE_MIN \(int16\)": lambda: reduce_model("REDUCE_MIN", [2, 3, 4], [1], False, (0.0003, 0), (0.0003, 0)),
    r"RESIZE_BILINEAR \(int16\)": lambda: nearest_model([1, 3, 4, 2], [6, 8], False, False, op="RESIZE_BILINEAR"),
    # TFLite Micro requires one quantization for a pool
    "int16 AVERAGE_POOL_2D requires one quantization": lambda: pool_model(
        "AVERAGE_POOL_2D", [1, 4, 4, 2], (2, 2), (2, 2), mm.PAD.VALID, mm.ACT.NONE, (0.0003, 0), (0.0006, 0)),
}


@pytest.mark.parametrize("needle", sorted(REFUSED))
def test_refused(needle, tmp_path):
    with pytest.raises(UnsupportedModelError, match=needle):
        build_for_host(REFUSED[needle](), tmp_path)
