"""TRANSPOSE_CONV in the forms published models have (issue 31), against TFLite Micro (tests/op_check.py: int16
bit for bit, float within FLOAT_RTOL), on small models made here:

- the output-shape input (int32) not a constant: a model input (TFLM's own tflm_transpose_conv0.tflite) or
  computed at run time by SHAPE (xmos_model_float32.tflite); TFLM never reads it. 16x8 and float32, several
  shapes, strides, paddings, odd sizes, seeds.
- a 16x8 int32 bias (xmos_denoise_16x8.tflite): TFLM reads any bias but an int16 one through an int64 pointer, so
  channel c takes the 8 bytes at 8 * c of the bias data, the second half of them the file's bytes after it. Biases
  whose int64 reading is sane, full-range ones whose sum and product wrap int64 in TFLM, an odd channel count;
  refused when those bytes would lie past the end of the file. int8 and float32 biases are read the same way
  (TFLM runs them). int64 biases keep working.
- an operator TVM imports but nothing lowers to a kernel is refused naming the TFLite operator.
"""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pytest
import tflite

from op_check import build_for_host, check_model

from edgemem.errors import UnsupportedModelError

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "examples"))
import make_example_model as mm  # noqa: E402

sys.path.insert(0, str(Path(__file__).resolve().parent))
from small_models import bias_as_tflm_reads_it, bias_moved_to_end, transpose_conv_options  # noqa: E402

TCONV_BIAS = 3  # TRANSPOSE_CONV's inputs: output shape, weights, data, bias



def _shape_options(b):
    tflite.ShapeOptionsStart(b)
    tflite.ShapeOptionsAddOutType(b, tflite.TensorType.INT32)
    return tflite.ShapeOptionsEnd(b)


def _int16_bias(rng, kind: str, o: int, scales) -> tuple[np.ndarray, dict]:
    """A bias of ``kind``: int64 / int16 (what TFLM reads as such), 'int32-paired' (pairs (v, sign of v) that
    read as int64 give channel c < o / 2 the bias v), 'int32-full' (full range: TFLM's sum and product wrap)."""
    q = mm.qparams(np.float32(1 / 4096) * scales, np.zeros(o, np.int64), 0)
    if kind == "int64":
        return rng.integers(-(1 << 24), 1 << 24, o).astype(np.int64), q
    if kind == "int32-full":
        return rng.integers(-(1 << 31), (1 << 31) - 1, o, endpoint=True).astype(np.int32), q
    if kind == "int16":  # TFLM widens it to int64
        return rng.integers(-(1 << 15), 1 << 15, o).astype(np.int16), q
    if kind in ("int8", "float32"):  # TFLM reads these through its int64 pointer too
        return rng.integers(-100, 100, o).astype(kind), q
    values = rng.integers(-(1 << 20), 1 << 20, o).astype(np.int32)
    values[1::2] = np.where(values[0::2][: len(values[1::2])] < 0, -1, 0)
    return values, q


def int16_model(x_shape, w_shape, out_shape, *, stride=(1, 1), padding=mm.PAD.SAME, act=mm.ACT.NONE,
                shape_as="input", bias="int64", seed=0) -> bytes:
    """x int16 -> TRANSPOSE_CONV (int8 weights per channel) -> y int16; the output shape a model input
    (``shape_as`` 'input', listed first as in tflm_transpose_conv0), computed by SHAPE of the input ('shape_of_x')
    or a constant ('const')."""
    rng = np.random.default_rng(seed)
    o = w_shape[0]
    mb = mm.ModelBuilder(description="edgemem int16 transpose_conv forms")
    x = mb.tensor("x", x_shape, np.int16, mm.qparams([1 / 4096], [0]))
    shape, inputs = _shape_tensor(mb, out_shape, shape_as, x)
    scales = (0.01 * np.exp(rng.uniform(-0.5, 0.5, o))).astype(np.float32)
    w = mb.const("w", rng.integers(-127, 128, w_shape).astype(np.int8), mm.qparams(scales, np.zeros(o, np.int64), 0))
    ins = [shape, w, x]
    if bias is not None:
        values, q = _int16_bias(rng, bias, o, scales)
        ins.append(mb.const("b", values, q))
    taps = max(int(np.prod(w_shape[1:])) // (stride[0] * stride[1]), 1)
    out_scale = np.float32(1 / 4096) * np.float32(0.01) * np.float32(np.sqrt(taps) * 32767 * 127 / 3 / 8000)
    y = mb.tensor("y", out_shape, np.int16, mm.qparams([out_scale], [0]))
    mb.op(mm.OP.TRANSPOSE_CONV, ins, [y], *transpose_conv_options(stride, padding, act), version=3)
    return mb.serialize(inputs + [x], [y])


def float_model(x_shape, w_shape, out_shape, *, stride=(1, 1), padding=mm.PAD.SAME, act=mm.ACT.NONE, shape_as="input",
                bias=True, seed=0) -> bytes:
    rng = np.random.default_rng(seed)
    mb = mm.ModelBuilder(description="edgemem float transpose_conv forms")
    x = mb.tensor("x", x_shape, np.float32)
    shape, inputs = _shape_tensor(mb, out_shape, shape_as, x)
    w = mb.const("w", rng.standard_normal(w_shape).astype(np.float32))
    ins = [shape, w, x] + ([mb.const("b", rng.standard_normal(w_shape[0]).astype(np.float32))] if bias else [])
    y = mb.tensor("y", out_shape, np.float32)
    mb.op(mm.OP.TRANSPOSE_CONV, ins, [y], *transpose_conv_options(stride, padding, act), version=3)
    return mb.serialize(inputs + [x], [y])


def _shape_tensor(mb, out_shape, shape_as: str, x) -> tuple[int, list[int]]:
    """(the output-shape tensor, the model inputs that go before x)."""
    if shape_as == "const":
        return mb.const("out_shape", np.asarray(out_shape, np.int32)), []
    shape = mb.tensor("out_shape", (4,), np.int32)
    if shape_as == "input":
        return shape, [shape]
    mb.op(mm.OP.SHAPE, [x], [shape], mm.OPTS.ShapeOptions, _shape_options)  # x has the output's shape
    return shape, []


SAME, VALID, RELU, RELU6 = mm.PAD.SAME, mm.PAD.VALID, mm.ACT.RELU, mm.ACT.RELU6

INT16 = {
    # the form of tflm_transpose_conv0: a 1 x W input, stride (1, 2), output shape a model input
    "shape-input-s12-same": dict(x_shape=(1, 1, 5, 6), w_shape=(4, 3, 4, 6), out_shape=(1, 3, 12, 4), stride=(1, 2), seed=1),
    "shape-input-s2-valid-odd": dict(x_shape=(1, 3, 4, 3), w_shape=(5, 3, 3, 3), out_shape=(1, 7, 9, 5), stride=(2, 2),
                                     padding=VALID, seed=2),
    "shape-input-s3-same-relu-int16-bias": dict(x_shape=(1, 2, 3, 2), w_shape=(3, 4, 2, 2), out_shape=(1, 5, 8, 3), stride=(3, 3),
                                                act=RELU, bias="int16", seed=3),
    "shape-input-batch2-nobias": dict(x_shape=(2, 3, 2, 3), w_shape=(2, 2, 3, 3), out_shape=(2, 6, 5, 2), stride=(2, 2), bias=None, seed=4),
    "shape-of-x-s1-same": dict(x_shape=(1, 5, 7, 3), w_shape=(3, 3, 3, 3), out_shape=(1, 5, 7, 3), shape_as="shape_of_x", seed=5),
    # the form of xmos_denoise_16x8's last layer: an int32 bias of one channel, read with the 4 bytes after it
    "int32-bias-1ch-s12-valid": dict(x_shape=(1, 1, 8, 6), w_shape=(1, 1, 5, 6), out_shape=(1, 1, 19, 1), stride=(1, 2),
                                            padding=VALID, shape_as="const", bias="int32-paired", seed=6),
    "int32-bias-paired-4ch-s2-same": dict(x_shape=(1, 3, 3, 4), w_shape=(4, 3, 3, 4), out_shape=(1, 6, 6, 4), stride=(2, 2),
                                          shape_as="const", bias="int32-paired", seed=7),
    "int32-bias-paired-3ch-odd-relu6": dict(x_shape=(1, 4, 3, 2), w_shape=(3, 2, 3, 2), out_shape=(1, 7, 5, 3), stride=(2, 2),
                                            act=RELU6, bias="int32-paired", seed=8),
    "int32-bias-full-range-wraps": dict(x_shape=(1, 2, 5, 3), w_shape=(6, 2, 3, 3), out_shape=(1, 4, 10, 6), stride=(2, 2),
                                        bias="int32-full", seed=9),
    "int32-bias-full-range-s1-valid": dict(x_shape=(1, 4, 4, 2), w_shape=(5, 3, 3, 2), out_shape=(1, 6, 6, 5), padding=VALID,
                                           shape_as="const", bias="int32-full", seed=10),
    "int8-bias-4ch-s2-same": dict(x_shape=(1, 3, 3, 4), w_shape=(4, 3, 3, 4), out_shape=(1, 6, 6, 4), stride=(2, 2),
                                  shape_as="const", bias="int8", seed=12),
    "float32-bias-5ch-s1-valid": dict(x_shape=(1, 4, 4, 2), w_shape=(5, 3, 3, 2), out_shape=(1, 6, 6, 5), padding=VALID,
                                      shape_as="const", bias="float32", seed=13),
    "int64-bias-shape-input-s21": dict(x_shape=(1, 3, 4, 2), w_shape=(3, 3, 2, 2), out_shape=(1, 6, 4, 3), stride=(2, 1), seed=11),
}

FLOAT = {
    "shape-input-s2-same-odd": dict(x_shape=(1, 4, 4, 3), w_shape=(2, 3, 3, 3), out_shape=(1, 7, 7, 2), stride=(2, 2), seed=1),
    # the form of xmos_model_float32: 1 x W, stride (1, 2), SAME, an output width of 2 W + 1
    "shape-input-s12-same-1xw": dict(x_shape=(1, 1, 8, 5), w_shape=(4, 1, 5, 5), out_shape=(1, 1, 17, 4), stride=(1, 2), seed=2),
    "shape-input-s3-valid-relu-nobias": dict(x_shape=(1, 3, 2, 2), w_shape=(4, 2, 4, 2), out_shape=(1, 8, 7, 4), stride=(3, 2),
                                             padding=VALID, act=RELU, bias=False, seed=3),
    "shape-of-x-s1-same-relu6": dict(x_shape=(1, 6, 5, 4), w_shape=(4, 3, 2, 4), out_shape=(1, 6, 5, 4), act=RELU6,
                                     shape_as="shape_of_x", seed=4),
    "shape-input-batch2-s2-valid": dict(x_shape=(2, 2, 3, 3), w_shape=(3, 3, 3, 3), out_shape=(2, 5, 7, 3), stride=(2, 2),
                                        padding=VALID, seed=5),
}


def _check(model: bytes, tmp_path):
    result = check_model(model, tmp_path, seeds=(0, 1, 2, 3))
    assert result.oracle == "tflm"
    return result


@pytest.mark.parametrize("name", list(INT16))
def test_int16(name, tmp_path):
    model = int16_model(**INT16[name])
    bias = INT16[name].get("bias", "int64")
    if bias == "int32-paired":  # the first half of the channels read a sane int64 bias: real arithmetic there
        read = bias_as_tflm_reads_it(model, -1, TCONV_BIAS)[: INT16[name]["w_shape"][0] // 2]
        assert np.all(np.abs(read) < 1 << 20)
    if bias == "int32-full":  # TFLM's product (reduced multiplier >= 2^14) leaves int64 and wraps
        assert np.max(np.abs(bias_as_tflm_reads_it(model, -1, TCONV_BIAS).astype(np.float64))) * (1 << 14) > 2.0**63
    _check(model, tmp_path)


@pytest.mark.parametrize("name", list(FLOAT))
def test_float(name, tmp_path):
    _check(float_model(**FLOAT[name]), tmp_path)


def test_int32_bias_paired_outputs_are_not_saturated(tmp_path):
    from edgemem.reference import seeded_inputs, tflm_outputs

    model = int16_model(**INT16["int32-bias-paired-4ch-s2-same"])
    path = tmp_path / "m.tflite"
    path.write_bytes(model)
    y = tflm_outputs(path, seeded_inputs(path, 0))[0]
    inside = (y[..., :2] > -32768) & (y[..., :2] < 32767)
    assert inside.mean() > 0.5  # channels 0 and 1: the int64 reading of the pairs, a real bias
    _check(model, tmp_path / "build")


def test_int32_bias_read_past_the_file_is_refused(tmp_path):
    model = bias_moved_to_end(int16_model(**INT16["int32-bias-paired-4ch-s2-same"]), -1, TCONV_BIAS)
    assert bias_as_tflm_reads_it(model, -1, TCONV_BIAS).size < 4  # the read leaves the file
    with pytest.raises(UnsupportedModelError, match="past the end of the model file"):
        build_for_host(model, tmp_path)


def test_unlowered_operator_is_named(tmp_path, monkeypatch):
    """Without edgemem's float TRANSPOSE_CONV kernel the operator goes to TVM's importer, whose NHWC
    conv2d_transpose no pass lowers: the refusal names the TFLite operator, not a Relax variable."""
    from edgemem.frontend.ops import registry

    find = registry.find
    monkeypatch.setattr(registry, "find", lambda name, *a, **k: None if name == "TRANSPOSE_CONV" else find(name, *a, **k))
    model = float_model(**{**FLOAT["shape-input-s2-same-odd"], "shape_as": "const"})
    with pytest.raises(UnsupportedModelError, match=r"operator #0 TRANSPOSE_CONV \(output 'y'\).*relax\.nn\.conv2d_transpose"):
        build_for_host(model, tmp_path)
