"""int8 UNIDIRECTIONAL_SEQUENCE_LSTM and int8 LOGISTIC against TFLite Micro (`tflite_micro`, the oracle).

- The sigmoid table edgemem's LSTM interpolates is read off tflite_micro's int16 TANH again here and must
  equal the stored one.
- The int8 LOGISTIC table (gemmlowp's fixed-point logistic re-done in Python integers) equals TFLM's
  LOGISTIC on all 256 inputs for fixed and random input quantizations (one-op models written here).
- The two LSTM models of ../shared/models build, run under QEMU on seeded inputs and are bit-exact with
  TFLM; the arena (the LSTM's state lives outside it, as in TFLM) is below TFLM's own non-persistent
  arena, measured here with TFLM's recording allocator.
- The LSTM state carries from one run to the next as in TFLM (three runs in a row on a host build, driven
  by a C driver written here), and edgemem_reset() restores it.
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
from edgemem.device_run import run as run_on_device

ROOT = Path(__file__).resolve().parents[1]
MODELS = ROOT.parent / "shared" / "models"
sys.path.insert(0, str(ROOT / "examples"))
from make_example_model import ModelBuilder  # noqa: E402


def measure_sigmoid_table() -> tuple[int, ...]:
    """Read the table off tflite_micro: an int16 TANH whose input scale 1/6144 makes the kernel's table
    index ``uh = |x| >> 7`` with no interpolation at x = 128 k, where its output is table[k] - 32768."""
    from tflite.BuiltinOperator import BuiltinOperator

    mb = ModelBuilder()
    x = mb.tensor("x", [1, 256], np.int16, quant={"scale": [1 / 6144], "zero_point": [0]})
    y = mb.tensor("y", [1, 256], np.int16, quant={"scale": [2.0**-15], "zero_point": [0]})
    mb.op(BuiltinOperator.TANH, [x], [y])
    probe = (np.arange(256, dtype=np.int32) * 128).astype(np.int16).reshape(1, 256)
    out = tflm_outputs(mb.serialize([x], [y]), [probe])[0].reshape(-1)
    return tuple(int(v) + 32768 for v in out)


def test_sigmoid_table_is_what_tflm_computes_with():
    assert measure_sigmoid_table() == lstm_kernel.SIGMOID_TABLE


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
        res = run_on_device(tmp_path / "p", x)
        np.testing.assert_array_equal(res["output_arrays"][0], tflm_outputs(path, x)[0])
        # the device touches the arena up to its last byte but the alignment padding (4)
        assert result.info["arena_bytes"] - 4 < res["arena_high_water_bytes"] <= result.info["arena_bytes"]


def test_lstm_state_carries_across_runs_like_tflm(tmp_path):
    """Three runs in a row on the host (gcc -Werror) = one TFLM interpreter invoked three times without a
    reset; edgemem_reset() gives the first run's output again; and the state matters (a fresh run on the
    second input differs), so the comparison can fail."""
    from edgemem.reference import tflm_interpreter
    from op_check import run_in_sequence

    path = MODELS / "tflm_dtln_noise_suppression.tflite"
    if not path.exists():
        pytest.skip(f"{path} is not here")
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


def _lstm_model(n_in: int, n_cell: int, steps: int, time_major: bool, cell_clip: float, seed: int, activation: int = 4,
                peephole: bool = False) -> bytes:
    """A one-operator int8 LSTM with seeded random weights, written here with the project's flatbuffer writer."""
    import tflite
    from tflite.BuiltinOperator import BuiltinOperator
    from tflite.BuiltinOptions import BuiltinOptions

    rng = np.random.default_rng(seed)
    mb = ModelBuilder()
    x_scale, x_zp, h_scale, h_zp = 0.05, int(rng.integers(-20, 20)), 1 / 128, int(rng.integers(-5, 5))
    x_shape = [steps, 1, n_in] if time_major else [1, steps, n_in]
    x = mb.tensor("x", x_shape, np.int8, quant={"scale": [x_scale], "zero_point": [x_zp]})
    ins = [x]
    w_scales = []
    for g in range(4):  # input weights: pre-activations of a few units
        w_scales.append(3.0 / (np.sqrt(n_in) * 127 * 40 * x_scale))
        ins.append(mb.const(f"wx{g}", rng.integers(-127, 128, (n_cell, n_in)).astype(np.int8), quant={"scale": [w_scales[-1]], "zero_point": [0]}))
    for g in range(4):
        s = 2.0 / (np.sqrt(n_cell) * 127 * 60 * h_scale)
        ins.append(mb.const(f"wh{g}", rng.integers(-127, 128, (n_cell, n_cell)).astype(np.int8), quant={"scale": [s], "zero_point": [0]}))
    if peephole:
        ins += [mb.const(f"peep{g}", rng.integers(-127, 128, (n_cell,)).astype(np.int8), quant={"scale": [0.01], "zero_point": [0]}) for g in range(3)]
    else:
        ins += [-1, -1, -1]
    for g in range(4):
        bias_scale = x_scale * w_scales[g]
        ins.append(mb.const(f"b{g}", (rng.normal(0, 1.0, n_cell) / bias_scale).astype(np.int32), quant={"scale": [bias_scale], "zero_point": [0]}))
    ins += [-1, -1]
    ins.append(mb.tensor("h", [1, n_cell], np.int8, quant={"scale": [h_scale], "zero_point": [h_zp]}, variable=True))
    ins.append(mb.tensor("c", [1, n_cell], np.int16, quant={"scale": [2.0**-11], "zero_point": [0]}, variable=True))
    ins += [-1, -1, -1, -1]
    out_shape = [steps, 1, n_cell] if time_major else [1, steps, n_cell]
    y = mb.tensor("y", out_shape, np.int8, quant={"scale": [h_scale], "zero_point": [h_zp]})

    def options(b):
        tflite.UnidirectionalSequenceLSTMOptionsStart(b)
        tflite.UnidirectionalSequenceLSTMOptionsAddFusedActivationFunction(b, activation)
        tflite.UnidirectionalSequenceLSTMOptionsAddCellClip(b, cell_clip)
        tflite.UnidirectionalSequenceLSTMOptionsAddTimeMajor(b, time_major)
        return tflite.UnidirectionalSequenceLSTMOptionsEnd(b)

    mb.op(BuiltinOperator.UNIDIRECTIONAL_SEQUENCE_LSTM, ins, [y], BuiltinOptions.UnidirectionalSequenceLSTMOptions, options)
    return mb.serialize([x], [y])


@pytest.mark.parametrize("n_in,n_cell,steps,time_major,cell_clip,seed", [
    (7, 5, 3, False, 0.0, 1),
    (16, 12, 6, True, 0.0, 2),
    (10, 9, 8, False, 2.5, 3),  # the cell clipped at +-2.5 (5,120 in int16 units)
    (33, 20, 4, True, 1.0, 4),
])  # fmt: skip
def test_generated_lstm_bit_exact_on_the_host(n_in, n_cell, steps, time_major, cell_clip, seed, tmp_path):
    """Generated LSTMs (sizes, time-major, cell clip) built for the host with the sanitizers: bit-exact with TFLM."""
    from edgemem.target.host import build_host, host_compiler, run_host

    try:
        host_compiler()
    except Exception as exc:  # noqa: BLE001
        pytest.skip(str(exc))
    path = tmp_path / "lstm.tflite"
    path.write_bytes(_lstm_model(n_in, n_cell, steps, time_major, cell_clip, seed))
    pipeline.build(path, "stm32f746", tmp_path / "p", pipeline.BuildOptions(compile=False))
    exe = build_host(tmp_path / "p", tmp_path / "host")
    for input_seed in (0, 1):
        x = seeded_inputs(path, input_seed)
        want = tflm_outputs(path, x)[0]
        got = run_host(exe, [x[0].tobytes()], [want.nbytes]).outputs[0]
        np.testing.assert_array_equal(np.frombuffer(got, np.int8).reshape(want.shape), want)
        assert len(np.unique(want)) > 3  # the outputs vary: the weights drive the gates out of saturation


@pytest.mark.parametrize("variant,message", [
    ({"peephole": True}, "peephole"),
    ({"activation": 1}, "not TANH"),
])
def test_lstm_variants_edgemem_does_not_compute_are_refused(variant, message, tmp_path):
    from edgemem.errors import UnsupportedModelError

    path = tmp_path / "lstm.tflite"
    path.write_bytes(_lstm_model(6, 4, 2, False, 0.0, 5, **variant))
    with pytest.raises(UnsupportedModelError, match=message):
        pipeline.build(path, "stm32f746", tmp_path / "p", pipeline.BuildOptions(compile=False))
