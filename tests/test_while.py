"""Control flow: WHILE loops with a trip count known at build time are unrolled at import
(edgemem/frontend/control_flow.py), then built like any model and compared with TFLite Micro, which runs the
original file with its WHILE kernel.

- The unrolled flatbuffer itself computes what the original does: TFLM runs both, outputs equal bit for bit
  (independent of edgemem's kernels).
- Keras 3's GRU and LSTM over 100 steps (tests/models/arch/*_seq100-float32.tflite, made by TensorFlow's
  converter) and a hand-made int8 RNN over 100 steps (tests/while_models.py: the converter crashes on int8
  WHILE models) build for the host and match TFLM on seeds 0, 1, 2: float within op_check's tolerance, int8 bit
  for bit. The 10-step GRU and LSTM run under QEMU in tests/test_architectures.py.
- A loop whose trip count is a run-time value is refused: tests/test_bad_input.py.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import tflite

from edgemem.frontend.control_flow import flatten_control_flow
from edgemem.frontend.tflite_import import read_tflite
from op_check import check_model
from while_models import if_float, rnn_int8, write

ARCH = Path(__file__).resolve().parent / "models" / "arch"


def _tflm(data: bytes, inputs: list[np.ndarray]) -> list[np.ndarray]:
    from tflite_micro.python.tflite_micro import runtime

    interp = runtime.Interpreter.from_bytes(data)
    for k, x in enumerate(inputs):
        interp.set_input(x, k)
    interp.invoke()
    outputs = tflite.Model.GetRootAsModel(data, 0).Subgraphs(0).OutputsLength()
    return [interp.get_output(k) for k in range(outputs)]


def _seeded(data: bytes, seed: int) -> list[np.ndarray]:
    m = tflite.Model.GetRootAsModel(data, 0)
    sg, rng = m.Subgraphs(0), np.random.default_rng(seed)
    t = sg.Tensors(sg.Inputs(0))
    shape = tuple(t.ShapeAsNumpy())
    return [rng.standard_normal(shape).astype(np.float32) if t.Type() == 0 else rng.integers(-128, 128, shape).astype(np.int8)]


@pytest.mark.parametrize("name", ["gru-float32", "lstm-float32", "gru_seq100-float32", "int8-rnn"])
def test_unrolled_flatbuffer_runs_like_the_loop_in_tflm(name):
    data = rnn_int8(100) if name == "int8-rnn" else (ARCH / f"{name}.tflite").read_bytes()
    model = tflite.Model.GetRootAsModel(data, 0)
    assert model.SubgraphsLength() == 3
    flat = flatten_control_flow(model, data, name)
    unrolled = tflite.Model.GetRootAsModel(flat, 0)
    assert unrolled.SubgraphsLength() == 1
    names = {unrolled.Subgraphs(0).Tensors(i).Name() for i in range(unrolled.Subgraphs(0).TensorsLength())}
    assert len(names) == unrolled.Subgraphs(0).TensorsLength()  # TVM's importer keys tensors by name
    for seed in (0, 1):
        inputs = _seeded(data, seed)
        for want, got in zip(_tflm(data, inputs), _tflm(flat, inputs)):
            np.testing.assert_array_equal(got, want)


def test_rewrite_keeps_lstm_intermediates_and_state():
    """The rewriter on a model whose int8 UNIDIRECTIONAL_SEQUENCE_LSTM has intermediates (its gates'
    quantization) and variable state tensors: TFLM computes the same outputs from the rewritten file."""
    data = (ARCH / "denoiser_lstm-int8.tflite").read_bytes()
    flat = flatten_control_flow(tflite.Model.GetRootAsModel(data, 0), data, "denoiser")
    sg = tflite.Model.GetRootAsModel(flat, 0).Subgraphs(0)
    assert sum(sg.Operators(i).IntermediatesLength() for i in range(sg.OperatorsLength())) == 5
    for seed in (0, 1):
        inputs = _seeded(data, seed)
        np.testing.assert_array_equal(_tflm(flat, inputs)[0], _tflm(data, inputs)[0])


def test_trip_count_is_the_loops(tmp_path):
    """100 steps of the body: one GATHER per step, each of a constant index 0..99 (the counter, evaluated)."""
    model = read_tflite(write(tmp_path, "rnn.tflite", rnn_int8(100)))
    sg = model.Subgraphs(0)
    gathers = []
    for i in range(sg.OperatorsLength()):
        op = sg.Operators(i)
        if model.OperatorCodes(op.OpcodeIndex()).BuiltinCode() == tflite.BuiltinOperator.GATHER:
            index = sg.Tensors(op.Inputs(1))
            gathers.append(int(np.frombuffer(model.Buffers(index.Buffer()).DataAsNumpy().tobytes(), np.int32)[0]))
    assert gathers == list(range(100))


@pytest.mark.parametrize("condition", [True, False])
def test_if_on_a_constant_becomes_its_branch(condition):
    data = if_float(condition)
    flat = flatten_control_flow(tflite.Model.GetRootAsModel(data, 0), data, "if")
    model = tflite.Model.GetRootAsModel(flat, 0)
    ops = [model.OperatorCodes(model.Subgraphs(0).Operators(i).OpcodeIndex()).BuiltinCode() for i in range(model.Subgraphs(0).OperatorsLength())]
    assert ops == [tflite.BuiltinOperator.RELU if condition else tflite.BuiltinOperator.TANH]
    inputs = _seeded(data, 0)
    np.testing.assert_array_equal(_tflm(flat, inputs)[0], _tflm(data, inputs)[0])


@pytest.mark.parametrize("name", ["gru_seq100-float32", "lstm_seq100-float32"])
def test_keras_while_model_matches_tflm(name, tmp_path):
    comparison = check_model(ARCH / f"{name}.tflite", tmp_path)
    assert comparison.oracle == "tflm"


@pytest.mark.parametrize("zero_state", [False, True], ids=["state-from-input", "zero-state"])
def test_int8_while_model_is_bit_exact(zero_state, tmp_path):
    comparison = check_model(write(tmp_path, "rnn_int8.tflite", rnn_int8(100, zero_state=zero_state)), tmp_path)
    assert comparison.oracle == "tflm" and comparison.max_abs_diff == [0, 0, 0]


def test_int8_while_model_under_qemu(tmp_path):
    """The unrolled int8 loop on the STM32F746 under QEMU (20 steps: the 100-step build is checked on the host),
    bit-exact with TFLM, within the arena the plan gives."""
    from edgemem import device_run, pipeline
    from edgemem.reference import reference_outputs, seeded_inputs

    path = write(tmp_path, "rnn20.tflite", rnn_int8(20))
    result = pipeline.build(path, "stm32f746", tmp_path / "proj", pipeline.BuildOptions(opt_seconds=0, schedule_seconds=0.5))
    inputs = seeded_inputs(path, 0)
    run = device_run.run(tmp_path / "proj", inputs, timeout_s=600)
    want, oracle = reference_outputs(path, inputs)
    assert oracle == "tflm"
    for got, expected in zip(run["output_arrays"], want):
        np.testing.assert_array_equal(got, expected)
    assert run["arena_high_water_bytes"] <= result.info["arena_bytes"]
