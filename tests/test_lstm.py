"""int8 UNIDIRECTIONAL_SEQUENCE_LSTM and int8 LOGISTIC against TFLite Micro (`tflite_micro`, the oracle).

- The sigmoid table edgemem's LSTM interpolates is read off tflite_micro's int16 TANH again here and must
  equal the stored one.
- The int8 LOGISTIC table (gemmlowp's fixed-point logistic re-done in Python integers) equals TFLM's
  LOGISTIC on all 256 inputs for fixed and random input quantizations (one-op models written here).
- The two LSTM models of ../shared/models build, run under QEMU on seeded inputs and are bit-exact with
  TFLM; the arena (input, output and the kernel's cell vector) is below TFLM's own non-persistent arena,
  measured here with TFLM's recording allocator.
"""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pytest

from edgemem import pipeline
from edgemem.kernels import lstm as lstm_kernel
from edgemem.kernels.logistic import logistic_table

pytest.importorskip("tflite_micro")
from edgemem.reference import seeded_inputs, tflm_arena_bytes, tflm_outputs  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
MODELS = ROOT.parent / "shared" / "models"
sys.path.insert(0, str(ROOT / "examples"))
from make_example_model import ModelBuilder  # noqa: E402


def test_sigmoid_table_is_what_tflm_computes_with():
    assert lstm_kernel.measure_sigmoid_table() == lstm_kernel.SIGMOID_TABLE


def _logistic_model(scale: float, zero_point: int) -> bytes:
    from tflite.BuiltinOperator import BuiltinOperator

    mb = ModelBuilder()
    x = mb.tensor("x", [1, 256], np.int8, quant={"scale": [scale], "zero_point": [zero_point]})
    y = mb.tensor("y", [1, 256], np.int8, quant={"scale": [1 / 256], "zero_point": [-128]})
    mb.op(BuiltinOperator.LOGISTIC, [x], [y])
    return mb.serialize([x], [y])


_RNG = np.random.default_rng(7)
LOGISTIC_QUANT = [(0.1, 0), (1 / 16, -128), (2.5, 7), (0.2, 127), (0.0123, 50)] + [
    (float(np.exp(_RNG.uniform(np.log(1e-3), np.log(4.0)))), int(_RNG.integers(-128, 128))) for _ in range(6)
]


@pytest.mark.parametrize("scale,zero_point", LOGISTIC_QUANT)
def test_logistic_table_equals_tflm_on_every_input(scale, zero_point):
    every_input = np.arange(-128, 128, dtype=np.int8).reshape(1, 256)
    expected = tflm_outputs(_logistic_model(scale, zero_point), [every_input])[0].reshape(-1)
    np.testing.assert_array_equal(logistic_table(scale, zero_point), expected)


def test_logistic_comparison_sees_a_one_percent_scale_error():
    """Control: a table for a scale 1 % off differs from TFLM somewhere, so the comparison above can fail."""
    every_input = np.arange(-128, 128, dtype=np.int8).reshape(1, 256)
    expected = tflm_outputs(_logistic_model(0.1, 0), [every_input])[0].reshape(-1)
    assert not np.array_equal(logistic_table(0.101, 0), expected)


@pytest.mark.parametrize("name", ["tflm_dtln_noise_suppression", "tflm_xtensa_micro_speech_lstm"])
def test_lstm_model_bit_exact_under_qemu(name, tmp_path):
    path = MODELS / f"{name}.tflite"
    if not path.exists():
        pytest.skip(f"{path} is not here")
    result = pipeline.build(path, "stm32f746", tmp_path / "p")
    assert "UNIDIRECTIONAL_SEQUENCE_LSTM" in [op.kind for op in result.graph.ops]
    assert result.info["arena_bytes"] < tflm_arena_bytes(path)["head"]
    for seed in (0, 1):
        x = seeded_inputs(path, seed)
        res = pipeline.run(tmp_path / "p", x)
        np.testing.assert_array_equal(res["output_arrays"][0], tflm_outputs(path, x)[0])
        assert res["arena_high_water_bytes"] == result.info["arena_bytes"]
