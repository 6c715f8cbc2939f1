"""float32 UNIDIRECTIONAL_SEQUENCE_LSTM (edgemem's float kernel) and the converter-made int8 LSTMs against TFLite
Micro (`tflite_micro`, the oracle).

- The converter-made models of tests/models/ops (tests/models/gen_lstm.py: tf_keras LSTM(12) on [1, 10, 8]
  returning the sequence or the last step, and other sizes; float32 and full-integer int8) on the host, three
  seeds each (op_check): float within 1e-5 relative, int8 bit-exact.
- One-operator float LSTMs written here with the project's flatbuffer writer for what the converter does not
  make: time-major, batch > 1 (each batch its own state), a cell clip, weights large enough to drive the gates
  into both of TFLM's sigmoid cut-offs (exp(x) below -9, 1 above 16.62).
- The state carries from one run to the next as in TFLM: under QEMU (two runs of the firmware on one input
  without a reset in between) and on the host (three runs on different inputs, then edgemem_reset()).
- The variants edgemem does not compute are refused with a message naming them.
"""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("tflite_micro")

from edgemem import device_run, pipeline  # noqa: E402
from edgemem.reference import seeded_inputs, tflm_interpreter  # noqa: E402
from op_check import FLOAT_RTOL, check_model  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
OPS = ROOT / "tests" / "models" / "ops"
sys.path.insert(0, str(ROOT / "examples"))
from make_example_model import ModelBuilder  # noqa: E402

CONVERTED = sorted(p.name for p in OPS.glob("UNIDIRECTIONAL_SEQUENCE_LSTM-*.tflite") if "int16" not in p.name)  # 16x8: test_lstm_int16.py


def test_the_converter_made_models_are_here():
    assert len([n for n in CONVERTED if n.endswith("-float32.tflite")]) >= 4
    assert len([n for n in CONVERTED if n.endswith("-int8.tflite")]) >= 4


@pytest.mark.parametrize("name", CONVERTED)
def test_converter_made_lstm_matches_tflm(name, tmp_path):
    result = check_model(OPS / name, tmp_path)
    assert result.oracle == "tflm"


def _float_lstm(n_in: int, n_cell: int, steps: int, batch: int = 1, time_major: bool = False, cell_clip: float = 0.0,
                weight_scale: float = 1.0, seed: int = 0, activation: int = 4, peephole: bool = False,
                projection: bool = False, cifg: bool = False, int8_weights: bool = False) -> bytes:
    """A one-operator float32 LSTM with seeded random weights (weight_scale times a Glorot-like size)."""
    import tflite
    from tflite.BuiltinOperator import BuiltinOperator
    from tflite.BuiltinOptions import BuiltinOptions

    rng = np.random.default_rng(seed)
    mb = ModelBuilder()
    x_shape = [steps, batch, n_in] if time_major else [batch, steps, n_in]
    x = mb.tensor("x", x_shape, np.float32)

    def weights(name, shape, fan_in):
        w = (rng.standard_normal(shape) * weight_scale / np.sqrt(fan_in)).astype(np.float32)
        if int8_weights:
            return mb.const(name, np.clip(np.round(w * 64), -127, 127).astype(np.int8), quant={"scale": [1 / 64], "zero_point": [0]})
        return mb.const(name, w)

    ins = [x]
    ins += [-1 if cifg and g == 0 else weights(f"wx{g}", (n_cell, n_in), n_in) for g in range(4)]
    ins += [-1 if cifg and g == 0 else weights(f"wh{g}", (n_cell, n_cell), n_cell) for g in range(4)]
    ins += [mb.const(f"peep{g}", rng.standard_normal(n_cell).astype(np.float32)) for g in range(3)] if peephole else [-1, -1, -1]
    ins += [-1 if cifg and g == 0 else mb.const(f"b{g}", (rng.standard_normal(n_cell) * weight_scale * 0.5).astype(np.float32)) for g in range(4)]
    if projection:
        ins += [weights("proj", (n_cell, n_cell), n_cell), -1]
    else:
        ins += [-1, -1]
    ins.append(mb.tensor("h", [batch, n_cell], np.float32, variable=True))
    ins.append(mb.tensor("c", [batch, n_cell], np.float32, variable=True))
    ins += [-1, -1, -1, -1]
    y = mb.tensor("y", [steps, batch, n_cell] if time_major else [batch, steps, n_cell], np.float32)

    def options(b):
        tflite.UnidirectionalSequenceLSTMOptionsStart(b)
        tflite.UnidirectionalSequenceLSTMOptionsAddFusedActivationFunction(b, activation)
        tflite.UnidirectionalSequenceLSTMOptionsAddCellClip(b, cell_clip)
        tflite.UnidirectionalSequenceLSTMOptionsAddTimeMajor(b, time_major)
        return tflite.UnidirectionalSequenceLSTMOptionsEnd(b)

    mb.op(BuiltinOperator.UNIDIRECTIONAL_SEQUENCE_LSTM, ins, [y], BuiltinOptions.UnidirectionalSequenceLSTMOptions, options)
    return mb.serialize([x], [y])


HANDMADE = {
    "time-major-batch2": dict(n_in=6, n_cell=5, steps=7, batch=2, time_major=True, seed=1),
    "batch-major-batch3": dict(n_in=4, n_cell=9, steps=5, batch=3, seed=2),
    "cell-clip": dict(n_in=8, n_cell=6, steps=9, cell_clip=0.7, weight_scale=3.0, seed=3),
    "time-major-clip-odd": dict(n_in=13, n_cell=3, steps=4, time_major=True, cell_clip=1.5, weight_scale=2.0, seed=4),
    "saturating": dict(n_in=5, n_cell=8, steps=6, weight_scale=20.0, seed=5),  # gates past both cut-offs
}


@pytest.mark.parametrize("name", list(HANDMADE))
def test_handmade_float_lstm_matches_tflm(name, tmp_path):
    assert check_model(_float_lstm(**HANDMADE[name]), tmp_path).oracle == "tflm"


def test_saturating_model_reaches_both_sigmoid_cutoffs(tmp_path):
    """The 'saturating' weights put sigmoid gate pre-activations below -9 and above 16.62, so both of TFLM's
    special cases run in the comparison above (measured with numpy: the first step's pre-activations, where the
    hidden state is still zero). Within 1e-5 those branches hardly differ from 1 / (1 + exp(-x)) (moving the
    lower cut-off from -9 to -8 still passes); the model checks that gates far in saturation come out right."""
    import tflite

    path = tmp_path / "m.tflite"
    path.write_bytes(_float_lstm(**HANDMADE["saturating"]))
    model = tflite.Model.GetRootAsModel(path.read_bytes(), 0)
    sg = model.Subgraphs(0)
    op = sg.Operators(0)

    def const(i):
        t = sg.Tensors(int(op.Inputs(i)))
        return np.frombuffer(model.Buffers(t.Buffer()).DataAsNumpy().tobytes(), np.float32).reshape(t.ShapeAsNumpy())

    x = seeded_inputs(path, 0)[0][0, 0]  # the first step's features
    pre = np.concatenate([const(1 + g) @ x + const(12 + g) for g in (0, 1, 3)])  # input, forget, output gates
    assert pre.min() < -9 and pre.max() > 16.619047


def test_float_lstm_state_carries_across_runs_on_the_host(tmp_path):
    """Three runs in a row on different inputs (host build, gcc -Werror) = one TFLM interpreter invoked three
    times without a reset; edgemem_reset() gives the first run's output again; a fresh run on the second input
    differs from the second run (the state matters, so the comparison can fail). Batch 2, time-major."""
    from op_check import run_in_sequence

    path = tmp_path / "lstm.tflite"
    path.write_bytes(_float_lstm(**HANDMADE["time-major-batch2"]))
    inputs = [seeded_inputs(path, seed)[0] for seed in range(3)]
    got, again = run_in_sequence(path, tmp_path, inputs)
    expected = _tflm_sequence(path, inputs)
    for k, (g, want) in enumerate(zip(got, expected)):
        _assert_close(g, want, f"run {k}")
    _assert_close(again, expected[0], "after edgemem_reset")
    assert not np.allclose(_tflm_sequence(path, [inputs[1]])[0], expected[1], rtol=1e-3, atol=1e-4)


def _tflm_sequence(path: Path, inputs: list[np.ndarray]) -> list[np.ndarray]:
    """One TFLM interpreter invoked on each input in turn, no reset in between (its state carries)."""
    interp = tflm_interpreter(path)
    outs = []
    for x in inputs:
        interp.set_input(x, 0)
        interp.invoke()
        outs.append(np.array(interp.get_output(0), copy=True))
    return outs


def _assert_close(got, want, what):
    floor = FLOAT_RTOL * max(1.0, float(np.abs(want).max()))
    np.testing.assert_allclose(got, want, rtol=FLOAT_RTOL, atol=floor, err_msg=what)


# main.c runs the model twice (two stack/arena paints), each from edgemem_reset(), and refuses different outputs.
# For this test the second pass keeps the state of the first: the firmware then prints the second run's outputs.
_MAIN_PATCHES = [
    ("edgemem_reset(); /* every pass from the initial state", "if (pass == 0u) edgemem_reset(); /* every pass from the initial state"),
    ("} else if (h != hash0 || st != status) {", "} else if ((h == hash0 && 0) || st != status) {"),
]


def test_float_lstm_state_carries_across_two_runs_under_qemu(tmp_path):
    """The firmware (arm-none-eabi-gcc, Cortex-M7 FPU, QEMU) runs the converter-made LSTM(12) twice on one input
    without a reset in between: its output equals TFLM's second invocation (within 1e-5), and differs from the
    first (so the state is what is compared)."""
    import shutil

    from edgemem.target.toolchain import build_firmware

    if shutil.which("arm-none-eabi-gcc") is None or shutil.which("qemu-system-arm") is None:
        pytest.skip("no arm-none-eabi-gcc or qemu-system-arm")
    path = OPS / "UNIDIRECTIONAL_SEQUENCE_LSTM-seq-t10-i8-u12-float32.tflite"
    project = tmp_path / "p"
    pipeline.build(path, "stm32f746", project, pipeline.BuildOptions(compile=False))
    main_c = (project / "main.c").read_text()
    for old, new in _MAIN_PATCHES:
        assert main_c.count(old) == 1, f"main.c no longer has {old!r}: update this test"
        main_c = main_c.replace(old, new)
    (project / "main.c").write_text(main_c)
    build_firmware(project)
    x = seeded_inputs(path, 0)
    got = device_run.run(project, x)["output_arrays"][0]
    first, second = _tflm_sequence(path, [x[0], x[0]])
    _assert_close(got, second, "second run under QEMU")
    assert not np.allclose(first, second, rtol=1e-3, atol=1e-4)


@pytest.mark.parametrize("variant,message", [
    ({"peephole": True}, "peephole"),
    ({"projection": True}, "projection"),
    ({"cifg": True}, "CIFG"),
    ({"activation": 1}, "not TANH"),
    ({"int8_weights": True}, "hybrid"),
])  # fmt: skip
def test_float_lstm_variants_edgemem_does_not_compute_are_refused(variant, message, tmp_path):
    from edgemem.errors import UnsupportedModelError

    path = tmp_path / "lstm.tflite"
    path.write_bytes(_float_lstm(6, 4, 3, seed=7, **variant))
    with pytest.raises(UnsupportedModelError, match=message):
        pipeline.build(path, "stm32f746", tmp_path / "p", pipeline.BuildOptions(compile=False))
