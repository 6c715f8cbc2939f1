"""16x8 UNIDIRECTIONAL_SEQUENCE_LSTM (int16 activations, int8 weights, int64 biases, int16 cell) against TFLite Micro
(`tflite_micro`, the oracle: EvalLstm<int16_t, int8_t, int16_t, int64_t>).

- The 16x8 models of tests/models/ops (tests/models/gen_lstm16.py: the converter's float32 LSTMs -- units
  8/12/16/20, 3/8/13 features, 5/10 steps, the whole sequence or the last step through STRIDED_SLICE --
  quantized to 16x8 as the converter quantizes the 8x8->16 LSTM, since it refuses a 16x8 one) on the host with
  the sanitizers, three seeds each (op_check): bit-exact. The two with float edges (QUANTIZE/DEQUANTIZE
  int16) are skipped while edgemem lacks those int16 operators.
- One-operator 16x8 LSTMs written here with seeded random weights for what those do not have: time-major, a
  cell clip, non-zero int16 zero points (TFLM applies them as offsets), inputs large enough to saturate the
  gates' int16 sums.
- Control: the kernel with the fully connected layers' multiplier truncated to 16 bits instead of rounded
  (TFLite's int64 MultiplyByQuantizedMultiplier rounds it) differs from TFLM, so the comparison can fail.
- The state carries from one run to the next as in TFLM (three runs without a reset, then edgemem_reset()).
- An int16 LSTM whose biases are int32 (TFLM reads int64 there) is refused.
- A small 16x8 denoiser with float edges (gen_lstm16.denoiser16_model: QUANTIZE, LSTM, FULLY_CONNECTED on 3-D,
  LOGISTIC, DEQUANTIZE) matches TFLM once edgemem has all its int16 operators (skipped, naming them, until then).
"""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("tflite_micro")

from edgemem import pipeline  # noqa: E402
from edgemem.kernels import lstm as lstm_kernel  # noqa: E402
from edgemem.reference import seeded_inputs, tflm_interpreter, tflm_outputs  # noqa: E402
from op_check import check_model, run_in_sequence  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
OPS = ROOT / "tests" / "models" / "ops"
sys.path.insert(0, str(ROOT / "tests" / "models"))
from gen_lstm16 import OP, denoiser16_model, lstm16_model  # noqa: E402

MODELS = sorted(p.name for p in OPS.glob("UNIDIRECTIONAL_SEQUENCE_LSTM-*-int16.tflite"))  # and iofloat-int16


def test_the_16x8_models_are_here():
    assert len([n for n in MODELS if "iofloat" not in n]) >= 5
    assert len([n for n in MODELS if "iofloat" in n]) >= 2


def _check_or_skip_missing(model, tmp_path):
    """check_model, skipped (naming them) while edgemem lacks some int16 operator of the model other than the
    LSTM (QUANTIZE / DEQUANTIZE, FULLY_CONNECTED, LOGISTIC: other families' work)."""
    from edgemem.errors import UnsupportedModelError

    try:
        return check_model(model, tmp_path)
    except UnsupportedModelError as exc:
        missing = str(exc).split("Missing: ")[-1].split(". ")[0]
        if "has no kernel" not in str(exc) or OP in missing:
            raise
        pytest.skip(f"edgemem lacks int16 operators of this model: {missing}")


@pytest.mark.parametrize("name", MODELS)
def test_16x8_lstm_matches_tflm(name, tmp_path):
    result = _check_or_skip_missing(OPS / name, tmp_path) if "iofloat" in name else check_model(OPS / name, tmp_path)
    assert result.oracle == "tflm"


def _random_lstm(n_in: int, n_cell: int, steps: int, seed: int, x_range: float = 3.0, time_major: bool = False,
                 cell_clip: float = 0.0, x_zp: int = 0, h_zp: int = 0, bias_dtype=np.int64) -> bytes:
    """A one-operator 16x8 LSTM, Glorot-like random weights; the seeded (full int16 range) inputs span
    +-x_range, the hidden state +-1, the cell +-8 (scale 2^-12)."""
    rng = np.random.default_rng(seed)
    wx = rng.standard_normal((4, n_cell, n_in)) / np.sqrt(n_in)
    wh = rng.standard_normal((4, n_cell, n_cell)) / np.sqrt(n_cell)
    bias = rng.standard_normal((4, n_cell)) * 0.5
    x_shape = [steps, 1, n_in] if time_major else [1, steps, n_in]
    return lstm16_model(wx, wh, bias, x_shape, x_range / 32767, 1 / 32767, 2.0**-12, cell_clip, time_major,
                        x_zp=x_zp, h_zp=h_zp, bias_dtype=bias_dtype)  # fmt: skip


RANDOM = {  # case: (model, how many distinct outputs seed 0 gives at least)
    "time-major-clip": (dict(n_in=7, n_cell=9, steps=6, seed=1, time_major=True, cell_clip=1.5), 30),
    # a non-zero hidden zero point also checks the reset value: TFLM resets an int16 variable tensor to 0, not to it
    "zero-points": (dict(n_in=5, n_cell=6, steps=4, seed=2, x_zp=-1200, h_zp=700), 20),
    "saturating": (dict(n_in=12, n_cell=10, steps=5, seed=3, x_range=400.0), 10),  # most gates at +-1
}


@pytest.mark.parametrize("case", RANDOM)
def test_random_16x8_lstm_matches_tflm(case, tmp_path):
    params, distinct = RANDOM[case]
    result = check_model(_random_lstm(**params), tmp_path)
    assert result.oracle == "tflm"
    want = tflm_outputs(tmp_path / "model.tflite", seeded_inputs(tmp_path / "model.tflite", 0))[0]
    assert len(np.unique(want)) >= distinct  # the outputs vary: not every gate is saturated


def test_comparison_sees_a_truncated_multiplier(tmp_path, monkeypatch):
    """Control: TFLite's int64 requantization rounds the Q0.31 multiplier to 16 bits; truncating it instead
    changes some outputs, which the comparison must see."""
    path = tmp_path / "lstm.tflite"
    path.write_bytes(_random_lstm(8, 8, 6, seed=4))
    monkeypatch.setattr(lstm_kernel, "reduced_multiplier", lambda m, s: (m >> 16, 15 - s))
    with pytest.raises(AssertionError, match="max difference"):
        check_model(path, tmp_path, seeds=(0,))


def test_16x8_lstm_state_carries_across_runs_like_tflm(tmp_path):
    """Three runs in a row on the host = one TFLM interpreter invoked three times without a reset;
    edgemem_reset() gives the first run's output again; the state matters (a fresh run differs)."""
    path = OPS / "UNIDIRECTIONAL_SEQUENCE_LSTM-seq-t5-i3-u20-int16.tflite"
    inputs = [seeded_inputs(path, seed)[0] for seed in range(3)]
    got, again = run_in_sequence(path, tmp_path, inputs)
    interp = tflm_interpreter(path)
    expected = []
    for x in inputs:
        interp.set_input(x, 0)
        interp.invoke()
        expected.append(np.array(interp.get_output(0), copy=True))
    for g, want in zip(got, expected):
        np.testing.assert_array_equal(g, want)
    np.testing.assert_array_equal(again, expected[0])
    assert not np.array_equal(tflm_outputs(path, [inputs[1]])[0], expected[1])


def test_int16_lstm_with_int32_biases_is_refused(tmp_path):
    from edgemem.errors import UnsupportedModelError

    path = tmp_path / "lstm.tflite"
    path.write_bytes(_random_lstm(4, 3, 2, seed=5, bias_dtype=np.int32))
    with pytest.raises(UnsupportedModelError, match="int64 biases"):
        pipeline.build(path, "stm32f746", tmp_path / "p", pipeline.BuildOptions(compile=False))


def test_16x8_denoiser_matches_tflm(tmp_path):
    assert _check_or_skip_missing(denoiser16_model(), tmp_path).oracle == "tflm"
