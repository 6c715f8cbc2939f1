"""16x8 DEPTHWISE_CONV_2D with a bias narrower than int64, against TFLite Micro bit for bit (tests/op_check.py), on
small models made here. TFLM's int16 depthwise kernel reads its bias through an int64 pointer whatever its type
(depthwise_conv.cc: GetOptionalTensorData<int64_t>, no type check in Prepare), so channel c takes the 8 bytes at
8 * c of the bias data: for int32, a pair of values for the first half of the channels, the model file's bytes
after the bias for the rest. int32 biases whose int64 reading is sane, full-range ones whose int64 sum and product
wrap in TFLM, a depth multiplier of 2, an odd channel count; int16, int8 and float32 biases (TFLM runs those too);
refused when those bytes would lie past the end of the file.
(CONV_2D 16x8 is different: conv.cc switches to its int32 accumulator on an int32 bias; tests/test_ops_int16_conv.py.)
"""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pytest

from op_check import build_for_host, check_model

from edgemem.errors import UnsupportedModelError

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "examples"))
import make_example_model as mm  # noqa: E402

sys.path.insert(0, str(Path(__file__).resolve().parent))
from small_models import bias_as_tflm_reads_it, bias_moved_to_end, depthwise_options  # noqa: E402

BIAS_INPUT = 2



def _bias_values(rng, kind: str, oc: int) -> np.ndarray:
    """int32 'paired': pairs (v, sign of v) that read as int64 give channel c < oc / 2 the bias v; int32 'full':
    the full range (TFLM's int64 sum and product wrap); 'int16', 'int8', 'float32': small values of that type."""
    if kind == "full":
        return rng.integers(-(1 << 31), (1 << 31) - 1, oc, endpoint=True).astype(np.int32)
    if kind in ("int16", "int8", "float32"):
        return rng.integers(-100, 100, oc).astype(kind)
    values = rng.integers(-(1 << 20), 1 << 20, oc).astype(np.int32)
    values[1::2] = np.where(values[0::2][: len(values[1::2])] < 0, -1, 0)
    return values


def model(x_shape, kernel, multiplier, out_shape, *, stride=(1, 1), padding=mm.PAD.SAME, act=mm.ACT.NONE,
          bias="paired", seed=0) -> bytes:
    """x int16 -> DEPTHWISE_CONV_2D (int8 weights per channel, a bias of ``bias``: see _bias_values) -> y int16."""
    rng = np.random.default_rng(seed)
    oc = x_shape[3] * multiplier
    mb = mm.ModelBuilder(description="edgemem int16 depthwise int32 bias")
    x = mb.tensor("x", x_shape, np.int16, mm.qparams([1 / 4096], [0]))
    scales = (0.01 * np.exp(rng.uniform(-0.5, 0.5, oc))).astype(np.float32)
    w = mb.const("w", rng.integers(-127, 128, (1, *kernel, oc)).astype(np.int8), mm.qparams(scales, np.zeros(oc, np.int64), 3))
    b = mb.const("b", _bias_values(rng, bias, oc), mm.qparams(np.float32(1 / 4096) * scales, np.zeros(oc, np.int64), 0))
    taps = kernel[0] * kernel[1]
    out_scale = np.float32(1 / 4096) * np.float32(0.01) * np.float32(np.sqrt(taps) * 32767 * 127 / 3 / 8000)
    y = mb.tensor("y", out_shape, np.int16, mm.qparams([out_scale], [0]))
    mb.op(mm.OP.DEPTHWISE_CONV_2D, [x, w, b], [y], *depthwise_options(stride, padding, act, multiplier=multiplier), version=5)
    return mb.serialize([x], [y])


CASES = {
    "paired-4ch-3x3-same": dict(x_shape=(1, 5, 6, 4), kernel=(3, 3), multiplier=1, out_shape=(1, 5, 6, 4), seed=1),
    "paired-3x2ch-s2-valid-relu6": dict(x_shape=(1, 7, 6, 3), kernel=(3, 2), multiplier=2, out_shape=(1, 3, 3, 6), stride=(2, 2),
                                        padding=mm.PAD.VALID, act=mm.ACT.RELU6, seed=2),
    "paired-5ch-odd": dict(x_shape=(1, 4, 5, 5), kernel=(2, 3), multiplier=1, out_shape=(1, 4, 5, 5), act=mm.ACT.RELU, seed=3),
    "full-range-wraps-6ch": dict(x_shape=(1, 6, 6, 6), kernel=(3, 3), multiplier=1, out_shape=(1, 6, 6, 6), bias="full", seed=4),
    "full-range-wraps-mult2-s2": dict(x_shape=(1, 5, 7, 2), kernel=(3, 3), multiplier=2, out_shape=(1, 3, 4, 4), stride=(2, 2),
                                      bias="full", seed=5),
    "int16-bias-5ch": dict(x_shape=(1, 4, 4, 5), kernel=(3, 3), multiplier=1, out_shape=(1, 4, 4, 5), bias="int16", seed=6),
    "int8-bias-3x2ch": dict(x_shape=(1, 4, 5, 3), kernel=(2, 2), multiplier=2, out_shape=(1, 4, 5, 6), bias="int8", seed=7),
    "float32-bias-4ch-s2": dict(x_shape=(1, 6, 6, 4), kernel=(3, 3), multiplier=1, out_shape=(1, 3, 3, 4), stride=(2, 2),
                                bias="float32", seed=8),
}


@pytest.mark.parametrize("name", list(CASES))
def test_bias_as_tflm_reads_it(name, tmp_path):
    case = CASES[name]
    data = model(**case)
    read = bias_as_tflm_reads_it(data, 0, BIAS_INPUT)
    oc = case["x_shape"][3] * case["multiplier"]
    kind = case.get("bias", "paired")
    if kind == "paired":  # the first half of the channels read a sane int64 bias
        assert np.all(np.abs(read[: oc // 2]) < 1 << 20)
    elif kind == "full":  # TFLM's product (reduced multiplier >= 2^13 here) leaves int64 and wraps
        assert np.max(np.abs(read.astype(np.float64))) * (1 << 13) > 2.0**63
    result = check_model(data, tmp_path, seeds=(0, 1, 2))
    assert result.oracle == "tflm"


def test_paired_bias_outputs_are_not_saturated(tmp_path):
    """The sane channels' outputs are real values, not a clamp at the int16 ends (so bit-exactness is checked
    on arithmetic, not on saturation), and edgemem's are the same."""
    from edgemem.reference import seeded_inputs, tflm_outputs

    data = model(**CASES["paired-4ch-3x3-same"])
    path = tmp_path / "m.tflite"
    path.write_bytes(data)
    y = tflm_outputs(path, seeded_inputs(path, 0))[0]
    inside = (y[..., :2] > -32768) & (y[..., :2] < 32767)
    assert inside.mean() > 0.5
    assert check_model(data, tmp_path / "build", seeds=(0,)).oracle == "tflm"


def test_int32_bias_read_past_the_file_is_refused(tmp_path):
    data = bias_moved_to_end(model(**CASES["paired-4ch-3x3-same"]), 0, BIAS_INPUT)
    assert bias_as_tflm_reads_it(data, 0, BIAS_INPUT).size < 4  # the read leaves the file
    with pytest.raises(UnsupportedModelError, match="DEPTHWISE_CONV_2D reads it as 4 int64 values.*past the end of the model file"):
        build_for_host(data, tmp_path)
