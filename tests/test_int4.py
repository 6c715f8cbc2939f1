"""int4 weights (TFLite's INT4 tensors, two 4-bit values a byte) against TFLite Micro.

TFLM takes an INT4 tensor only as the constant filter of CONV_2D, DEPTHWISE_CONV_2D and (quantized per tensor)
FULLY_CONNECTED with int8 activations, unpacking it to int8 at every invocation; edgemem unpacks it at import
(frontend/int4.py) and runs its int8 kernels. Checked here: the converter's int4 models (tests/models/int4/, made by
gen_int4.py with TF 2.21's low-bit QAT conversion) and hand-made ones (tests/int4_models.py: every nibble value, odd
weight counts with a nonzero spare nibble, per-channel and per-tensor scales, depth multiplier, fused activations, a
shared INT4 tensor) bit for bit with TFLM on the host, the small int4 net under QEMU; every other INT4 tensor and a
mis-sized INT4 buffer refused through the CLI with one paragraph.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

import int4_models as im
from edgemem import device_run, pipeline
from edgemem.frontend.int4 import unpack_int4
from edgemem.reference import _run_in_child, reference_outputs, seeded_inputs
from op_check import assert_outputs_match, check_model
from test_bad_input import FILE, UNSUPPORTED, build_fails

INT4_DIR = Path(__file__).resolve().parent / "models" / "int4"
CONVERTED = sorted(INT4_DIR.glob("*.tflite"))


def test_unpacking_is_tflms_nibble_order_and_sign_extension():
    # byte 0x8F holds -1 (low nibble 0xF) then -8 (high nibble 0x8); 0x70 holds 0 then 7; an odd count reads only
    # the low nibble of the last byte (0x3A -> -6)
    got = unpack_int4(np.array([0x8F, 0x70, 0x3A], np.uint8), 5)
    assert got.dtype == np.int8 and got.tolist() == [-1, -8, 0, 7, -6]
    every = np.arange(256, dtype=np.uint8)
    pairs = unpack_int4(every, 512).reshape(256, 2).astype(int)
    assert (pairs[:, 0] == (every & 0xF) - 16 * ((every & 0xF) >= 8)).all()
    assert (pairs[:, 1] == (every >> 4) - 16 * ((every >> 4) >= 8)).all()


def test_the_converter_models_are_there():
    assert len(CONVERTED) >= 9, "run tests/models/gen_int4.py with the TensorFlow venv"


@pytest.mark.parametrize("path", CONVERTED, ids=[p.stem for p in CONVERTED])
def test_converter_int4_model_matches_tflm(path, tmp_path):
    assert check_model(path, tmp_path).oracle == "tflm"


HANDMADE = {
    "fc-k7-n3-relu": lambda s: im.fc_model(s, 7, 3, act=im.ACT.RELU),  # 21 weights: a spare nibble
    "fc-k33-n5-nobias": lambda s: im.fc_model(s, 33, 5, bias=False),
    "fc-shared-k9": lambda s: im.fc_model(s, 9, 9, shared=True),  # 81 weights read by two operators
    "conv-k3-s2-perchannel-relu6": lambda s: im.conv_model(s, (7, 6), 3, 5, (3, 3), stride=2, act=im.ACT.RELU6),
    "conv-k2x3-valid-pertensor": lambda s: im.conv_model(s, (5, 5), 2, 3, (2, 3), padding=im.PAD.VALID, per_channel=False),
    "conv-k1-nobias": lambda s: im.conv_model(s, (4, 4), 5, 7, (1, 1), bias=False),
    "dw-k3-mult3-relu": lambda s: im.conv_model(s, (6, 5), 3, 0, (3, 3), depthwise=True, mult=3, act=im.ACT.RELU),
    "dw-k5-s2-pertensor": lambda s: im.conv_model(s, (9, 9), 4, 0, (5, 5), stride=2, depthwise=True, per_channel=False),
}


@pytest.mark.parametrize("seed", [1, 2])
@pytest.mark.parametrize("name", list(HANDMADE))
def test_handmade_int4_model_matches_tflm(name, seed, tmp_path):
    result = check_model(HANDMADE[name](seed), tmp_path)
    assert result.oracle == "tflm"


def test_int8_convolution_without_bias_matches_tflm(tmp_path):
    # a CONV_2D's bias left out (-1) is legal and TFLM runs it; TVM's importer read the placeholder as a tensor
    data = im.conv_model(3, (5, 4), 3, 4, (3, 3), bias=False, int4=False)
    assert check_model(data, tmp_path).oracle == "tflm"


def test_int4_weights_inside_a_while_loop_match_tflm(tmp_path, monkeypatch):
    # the RNN of tests/while_models.py with its recurrent and classifier weights INT4: the loop is unrolled first,
    # then the weights unpacked (two rewrites of the flatbuffer, one after the other)
    import while_models

    plain = im.mm.ModelBuilder.const

    def const(self, name, array, quant=None):
        if name in ("W", "y_w"):
            return im.int4_const(self, f"{name}_int4", np.asarray(array) // 16, quant)  # -127..127 -> -8..7
        return plain(self, name, array, quant)

    monkeypatch.setattr(im.mm.ModelBuilder, "const", const)
    data = while_models.rnn_int8(6)
    monkeypatch.undo()
    assert data.count(b"_int4") == 2
    assert check_model(data, tmp_path).oracle == "tflm"


def test_int4_net_runs_under_qemu_like_tflm(tmp_path):
    path = INT4_DIR / "net-small.tflite"
    options = pipeline.BuildOptions(opt_seconds=0, schedule_seconds=0.5)
    result = pipeline.build(path, "stm32f746", tmp_path / "proj", options)
    assert result.info["fits"]
    for seed in (0, 1):
        inputs = seeded_inputs(path, seed)
        run = device_run.run(tmp_path / "proj", inputs, timeout_s=600)
        want, oracle = reference_outputs(path, inputs)
        assert oracle == "tflm"
        assert_outputs_match(run["output_arrays"], want, oracle, f"net-small seed {seed}")
        assert run["arena_high_water_bytes"] <= result.info["arena_bytes"]


def _write(tmp_path: Path, data: bytes) -> Path:
    path = tmp_path / "int4.tflite"
    path.write_bytes(data)
    return path


@pytest.mark.parametrize("case, phrases", [
    ("fc-per-channel", ["operator #0 FULLY_CONNECTED", "tensor #1 'w_int4'", "per channel (3 scales)"]),
    ("add", ["operator #0 ADD", "tensor #2 'c_int4'", "input 1"]),
    ("bias", ["operator #0 FULLY_CONNECTED", "tensor #3 'b_int4'", "input 2"]),
    ("input", ["tensor #2 'f_int4'", "model input or output"]),
    ("int16-conv", ["operator #0 CONV_2D", "tensor #1 'filter_int4'", "not int8"]),
])
def test_int4_where_tflm_has_no_kernel_is_refused(case, phrases, tmp_path):
    data = {
        "fc-per-channel": lambda: im.fc_model(0, 6, 3, per_channel=True),
        "int16-conv": lambda: im.conv_model(0, (4, 4), 2, 3, (3, 3), in_dtype=np.int16),
    }.get(case, lambda: im.int4_elsewhere(case))()
    path = _write(tmp_path, data)
    if case in ("fc-per-channel", "int16-conv"):  # TFLM's Prepare refuses these; on ADD and the bias it reads the
        # packed bytes as int8 / int32 values (past the tensor's data): nothing to match
        assert isinstance(_run_in_child("tflm", path, [seeded_inputs(path, 0)], 120), str), "TFLM runs it"
    message = build_fails(path, tmp_path, UNSUPPORTED, "INT4", "TFLite Micro takes INT4 only", *phrases)
    assert "int8" in message


@pytest.mark.parametrize("nbytes", [10, 12])
def test_int4_buffer_of_the_wrong_size_is_refused(nbytes, tmp_path):
    # 21 weights take 11 bytes: one short (the last weight would be read past the buffer) or one too many
    good = im.pack_int4(np.zeros((3, 7), np.int8))
    assert len(good) == 11
    data = im.fc_model(0, 7, 3, data=(good + b"\0")[:nbytes])
    build_fails(_write(tmp_path, data), tmp_path, FILE, "'w_int4'", "INT4: two 4-bit values a byte", "needs 11 bytes",
                f"holds {nbytes}")
