"""Reductions, arg-min/max, cumulative sum, bilinear resize and pools against TFLite Micro: every converter-made
model of tests/models/ops/ this family owns (tests/models/gen_reduce.py), plus hand-made edge cases."""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pytest
import tflite

from edgemem.errors import UnsupportedModelError
from op_check import build_for_host, check_model

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "examples"))
import make_example_model as mm  # noqa: E402

OPS = Path(__file__).parent / "models" / "ops"
FAMILY = ("SUM", "REDUCE_MAX", "REDUCE_MIN", "REDUCE_ALL", "REDUCE_ANY", "MEAN", "ARG_MAX", "ARG_MIN", "CUMSUM",
          "RESIZE_BILINEAR", "L2_POOL_2D", "AVERAGE_POOL_2D", "MAX_POOL_2D")
# int16 models: tests/test_ops_int16_reduce.py
CONVERTED = sorted(p.name for p in OPS.glob("*.tflite") if p.name.split("-")[0] in FAMILY and not p.stem.endswith("int16"))


@pytest.mark.parametrize("name", CONVERTED)
def test_converted(name, tmp_path):
    result = check_model(OPS / name, tmp_path)
    # tf.argmax's default int64 output: TFLite Micro has only int32 (LiteRT is the oracle there)
    int64_arg = name.startswith(("ARG_MAX-axis-1-", "ARG_MIN-axis-1-"))
    assert int64_arg or result.oracle == "tflm", f"{name}: TFLite Micro did not run the model (oracle {result.oracle})"


# ---------------------------------------------------------------- hand-made models (exact quantization, edge cases)

mm._NP_TO_TT.setdefault(np.dtype(np.bool_), mm.TT.BOOL)


def _options(kind: str, **kw):
    """(options type, builder fn) of one TFLite options table."""
    start, end = getattr(tflite, f"{kind}Start"), getattr(tflite, f"{kind}End")

    def fn(b):
        start(b)
        for field, value in kw.items():
            getattr(tflite, f"{kind}Add{field}")(b, value)
        return end(b)

    return getattr(mm.OPTS, kind), fn


def _q(scale, zp):
    return mm.qparams([scale], [zp])


def reduce_model(op, shape, axes, keep, dtype=np.int8, in_q=(0.05, 3), out_q=(0.05, 3)) -> bytes:
    """One reducer (SUM, MEAN, REDUCE_MAX, REDUCE_MIN, REDUCE_ALL, REDUCE_ANY) of a model input."""
    mb = mm.ModelBuilder()
    quant = dtype == np.int8
    x = mb.tensor("x", shape, dtype, _q(*in_q) if quant else None)
    ax = mb.const("axes", np.array(axes, np.int32))
    norm = {a % len(shape) for a in axes}
    out_shape = [1 if a in norm else d for a, d in enumerate(shape) if keep or a not in norm]
    y = mb.tensor("y", out_shape, dtype, _q(*out_q) if quant else None)
    mb.op(getattr(mm.OP, op), [x, ax], [y], *_options("ReducerOptions", KeepDims=keep))
    return mb.serialize([x], [y])


def arg_model(op, shape, axis, dtype=np.int8, out=np.int32) -> bytes:
    mb = mm.ModelBuilder()
    x = mb.tensor("x", shape, dtype, _q(0.1, -5) if dtype == np.int8 else None)
    ax = mb.const("axis", np.array([axis], np.int32))
    y = mb.tensor("y", [d for a, d in enumerate(shape) if a != axis % len(shape)], out)
    kind = "ArgMaxOptions" if op == "ARG_MAX" else "ArgMinOptions"
    mb.op(getattr(mm.OP, op), [x, ax], [y], *_options(kind, OutputType=mm._NP_TO_TT[np.dtype(out)]))
    return mb.serialize([x], [y])


def cumsum_model(shape, axis, exclusive, reverse, dtype=np.float32, in_q=(0.02, 7), out_q=(0.1, -4)) -> bytes:
    mb = mm.ModelBuilder()
    quant = dtype == np.int8
    x = mb.tensor("x", shape, dtype, _q(*in_q) if quant else None)
    ax = mb.const("axis", np.array(axis, np.int32))
    y = mb.tensor("y", shape, dtype, _q(*out_q) if quant else None)
    mb.op(mm.OP.CUMSUM, [x, ax], [y], *_options("CumsumOptions", Exclusive=exclusive, Reverse=reverse))
    return mb.serialize([x], [y])


def resize_model(shape, size, align, half, dtype=np.int8) -> bytes:
    mb = mm.ModelBuilder()
    quant = dtype == np.int8
    x = mb.tensor("x", shape, dtype, _q(0.05, -2) if quant else None)
    sz = mb.const("size", np.array(size, np.int32))
    y = mb.tensor("y", [shape[0], *size, shape[3]], dtype, _q(0.05, -2) if quant else None)
    mb.op(mm.OP.RESIZE_BILINEAR, [x, sz], [y], *_options("ResizeBilinearOptions", AlignCorners=align, HalfPixelCenters=half),
          version=3 if half else 1)
    return mb.serialize([x], [y])


def pool_model(op, shape, filt, stride, padding, act, dtype=np.int8, q=(0.05, -20)) -> bytes:
    mb = mm.ModelBuilder()
    quant = dtype == np.int8
    x = mb.tensor("x", shape, dtype, _q(*q) if quant else None)
    if padding == mm.PAD.SAME:
        oh, ow = -(-shape[1] // stride[0]), -(-shape[2] // stride[1])
    else:
        oh, ow = (shape[1] - filt[0]) // stride[0] + 1, (shape[2] - filt[1]) // stride[1] + 1
    y = mb.tensor("y", [shape[0], oh, ow, shape[3]], dtype, _q(*q) if quant else None)
    opts = _options("Pool2DOptions", Padding=padding, StrideW=stride[1], StrideH=stride[0], FilterWidth=filt[1],
                    FilterHeight=filt[0], FusedActivationFunction=act)
    mb.op(getattr(mm.OP, op), [x], [y], *opts, version=2 if quant else 1)
    return mb.serialize([x], [y])


HANDMADE = {
    # SUM int8: the output rescaled from the input's scale without 1/count; extreme zero points, saturation
    "sum-int8-all-axes": lambda: reduce_model("SUM", [1, 3, 4, 5], [0, 1, 2, 3], False, in_q=(0.02, -128), out_q=(0.5, 10)),
    "sum-int8-axis0-keep": lambda: reduce_model("SUM", [3, 5, 2], [0], True, in_q=(0.03, 127), out_q=(0.07, -100)),
    "sum-int8-dup-neg-axes": lambda: reduce_model("SUM", [2, 6, 5], [-1, 2, 1], False, in_q=(0.01, 0), out_q=(0.3, 0)),
    "sum-int8-saturates": lambda: reduce_model("SUM", [1, 8, 8, 2], [1, 2], True, in_q=(0.1, 0), out_q=(0.01, 0)),
    "mean-int8-axis0-2": lambda: reduce_model("MEAN", [3, 5, 7], [0, 2], False, in_q=(0.04, -128), out_q=(0.01, 50)),
    "mean-int8-all-axes": lambda: reduce_model("MEAN", [2, 3, 4], [0, 1, 2], False, in_q=(0.05, -30), out_q=(0.01, 4)),
    "mean-int8-count7": lambda: reduce_model("MEAN", [2, 7, 3], [1], True, in_q=(0.05, 3), out_q=(0.02, -7)),
    "mean-float-axis12-keep": lambda: reduce_model("MEAN", [2, 5, 6, 3], [1, 2], True, np.float32),
    "max-int8-all-axes": lambda: reduce_model("REDUCE_MAX", [2, 3, 4], [0, 1, 2], False, in_q=(0.05, 127), out_q=(0.05, 127)),
    "min-int8-axis0-keep": lambda: reduce_model("REDUCE_MIN", [5, 3, 4], [0], True, in_q=(0.05, -128), out_q=(0.05, -128)),
    "max-float-axis-2": lambda: reduce_model("REDUCE_MAX", [3, 4, 5], [-2], False, np.float32),
    "all-bool-axis1": lambda: reduce_model("REDUCE_ALL", [3, 2, 4], [1], False, np.bool_),
    "any-bool-axis-1": lambda: reduce_model("REDUCE_ANY", [3, 2, 4], [-1], False, np.bool_),
    # ARG_MAX / ARG_MIN: int8 ties (first index wins), axis 0 and middle axes, int32 (TFLM's) output
    "argmax-int8-axis0": lambda: arg_model("ARG_MAX", [40, 3], 0),
    "argmin-int8-axis1": lambda: arg_model("ARG_MIN", [2, 30, 3], 1),
    "argmax-float-axis2": lambda: arg_model("ARG_MAX", [2, 3, 5, 4], 2, np.float32),
    "argmin-float-axis-1-int64": lambda: arg_model("ARG_MIN", [3, 6], -1, np.float32, np.int64),
    # CUMSUM: float and int8 (TFLM's int8 running sum starts at the rescaled -zero point)
    "cumsum-float-axis0": lambda: cumsum_model([6, 3, 2], 0, False, False),
    "cumsum-float-axis-1-exclusive": lambda: cumsum_model([3, 7], -1, True, False),
    "cumsum-float-exclusive-reverse": lambda: cumsum_model([4, 5], 1, True, True),
    "cumsum-int8-long-wraps": lambda: cumsum_model([40, 2], 0, False, False, np.int8, in_q=(0.02, -128), out_q=(0.2, 0)),
    "cumsum-int8-exclusive": lambda: cumsum_model([3, 6, 2], 1, True, False, np.int8),
    "cumsum-int8-reverse-axis0": lambda: cumsum_model([5, 4], 0, False, True, np.int8, in_q=(0.05, -128), out_q=(0.05, 0)),
    "cumsum-int8-exclusive-reverse": lambda: cumsum_model([4, 5], -1, True, True, np.int8, in_q=(0.01, 100), out_q=(0.2, 30)),
    # RESIZE_BILINEAR int8 and float: up and down, align_corners, half_pixel_centers, size 1
    "resize-int8-up-legacy": lambda: resize_model([1, 3, 4, 2], [7, 5], False, False),
    "resize-int8-down-half-pixel": lambda: resize_model([2, 9, 7, 2], [4, 3], False, True),
    "resize-int8-align-corners": lambda: resize_model([1, 5, 4, 3], [9, 7], True, False),
    "resize-int8-align-to-1": lambda: resize_model([1, 5, 4, 3], [1, 3], True, False),
    "resize-float-half-pixel": lambda: resize_model([1, 3, 5, 2], [7, 4], False, True, np.float32),
    # pools: fused activations, SAME with even windows, strides, extreme zero points
    "avgpool-int8-same-2x2-s1-relu": lambda: pool_model("AVERAGE_POOL_2D", [1, 5, 6, 3], (2, 2), (1, 1), mm.PAD.SAME, mm.ACT.RELU),
    "avgpool-int8-same-4x3-s3-n1to1": lambda: pool_model("AVERAGE_POOL_2D", [1, 7, 8, 2], (4, 3), (3, 2), mm.PAD.SAME, mm.ACT.RELU_N1_TO_1, q=(0.01, 5)),
    "avgpool-int8-valid-relu6-zp127": lambda: pool_model("AVERAGE_POOL_2D", [2, 6, 6, 2], (3, 3), (1, 2), mm.PAD.VALID, mm.ACT.RELU6, q=(0.03, 127)),
    "maxpool-int8-same-3x3-s2-relu": lambda: pool_model("MAX_POOL_2D", [1, 7, 6, 3], (3, 3), (2, 2), mm.PAD.SAME, mm.ACT.RELU, q=(0.05, 40)),
    "maxpool-int8-same-2x4-s1-relu6": lambda: pool_model("MAX_POOL_2D", [1, 5, 7, 2], (2, 4), (1, 1), mm.PAD.SAME, mm.ACT.RELU6, q=(0.03, -128)),
    "avgpool-float-same-2x2-relu6": lambda: pool_model("AVERAGE_POOL_2D", [1, 5, 6, 3], (2, 2), (2, 1), mm.PAD.SAME, mm.ACT.RELU6, np.float32),
    "maxpool-float-same-3x2-n1to1": lambda: pool_model("MAX_POOL_2D", [1, 5, 6, 3], (3, 2), (1, 2), mm.PAD.SAME, mm.ACT.RELU_N1_TO_1, np.float32),
    "l2pool-float-same-3x3-s2-relu": lambda: pool_model("L2_POOL_2D", [1, 7, 5, 2], (3, 3), (2, 2), mm.PAD.SAME, mm.ACT.RELU, np.float32),
}


@pytest.mark.parametrize("name", sorted(HANDMADE))
def test_handmade(name, tmp_path):
    result = check_model(HANDMADE[name](), tmp_path)
    if "int64" not in name and "any" not in name:  # TFLM has no int64 ARG_MAX/ARG_MIN output, no REDUCE_ANY
        assert result.oracle == "tflm", f"{name}: TFLite Micro did not run the model (oracle {result.oracle})"


def _pool_requantizing() -> bytes:
    """An int8 AVERAGE_POOL_2D whose output zero point differs from its input's."""
    mb = mm.ModelBuilder()
    x = mb.tensor("x", [1, 4, 4, 2], np.int8, _q(0.05, 1))
    y = mb.tensor("y", [1, 2, 2, 2], np.int8, _q(0.05, 2))
    mb.op(mm.OP.AVERAGE_POOL_2D, [x], [y], *_options("Pool2DOptions", Padding=mm.PAD.VALID, StrideW=2, StrideH=2,
                                                      FilterWidth=2, FilterHeight=2, FusedActivationFunction=0))
    return mb.serialize([x], [y])


REFUSED = {
    "REDUCE_MAX.*quantized differently": lambda: reduce_model("REDUCE_MAX", [2, 3, 4], [1], False, in_q=(0.05, 0), out_q=(0.1, 0)),
    "AVERAGE_POOL_2D requires one quantization": _pool_requantizing,
}


@pytest.mark.parametrize("needle", sorted(REFUSED))
def test_refused(needle, tmp_path):
    """What TFLite Micro refuses is refused with a message saying why (not run with some other arithmetic)."""
    with pytest.raises(UnsupportedModelError, match=needle):
        build_for_host(REFUSED[needle](), tmp_path)
