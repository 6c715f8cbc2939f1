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
        # the device touches the arena up to its last byte but the alignment padding (4)
        assert result.info["arena_bytes"] - 4 < res["arena_high_water_bytes"] <= result.info["arena_bytes"]


_SEQUENCE_DRIVER = r"""
#include <stdint.h>
#include <stdio.h>
#include "model.h"

/* Written for this test: runs the model on in0.bin .. in<K-1>.bin in sequence (no reset in between), writes
   out<k>.bin; then edgemem_reset() and in0.bin again -> again.bin. */
static int io(const char *name, void *buf, uint32_t n, int write)
{
    FILE *f = fopen(name, write ? "wb" : "rb");
    size_t done;
    if (f == NULL) {
        return -1;
    }
    done = write ? fwrite(buf, 1, n, f) : fread(buf, 1, n, f);
    fclose(f);
    return done == n ? 0 : -1;
}

int main(int argc, char **argv)
{
    char name[64];
    int k, runs = argc > 1 ? atoi(argv[1]) : 0;
    for (k = 0; k <= runs; k++) {
        if (k == runs) {
            edgemem_reset();
        }
        snprintf(name, sizeof name, "in%d.bin", k == runs ? 0 : k);
        if (io(name, edgemem_input(0), edgemem_input_bytes(0), 0) != 0 || edgemem_run() != 0) {
            return 1;
        }
        snprintf(name, sizeof name, k == runs ? "again.bin" : "out%d.bin", k);
        if (io(name, edgemem_output(0), edgemem_output_bytes(0), 1) != 0) {
            return 2;
        }
    }
    return 0;
}
"""


def test_lstm_state_carries_across_runs_like_tflm(tmp_path):
    """Three runs in a row on the host (gcc -Werror) = one TFLM interpreter invoked three times without a
    reset; edgemem_reset() gives the first run's output again; and the state matters (a fresh run on the
    second input differs), so the comparison can fail."""
    import shutil
    import subprocess

    from edgemem.reference import tflm_interpreter
    from edgemem.target.host import MODEL_HEADERS, MODEL_SOURCES, WARNING_FLAGS, host_compiler

    path = MODELS / "tflm_dtln_noise_suppression.tflite"
    if not path.exists():
        pytest.skip(f"{path} is not here")
    try:
        cc = host_compiler()
    except Exception as exc:  # noqa: BLE001 (no compiler: nothing to run the sequence with)
        pytest.skip(str(exc))
    project = tmp_path / "p"
    pipeline.build(path, "stm32f746", project, pipeline.BuildOptions(compile=False))
    work = tmp_path / "host"
    work.mkdir()
    for f in (*MODEL_SOURCES, *MODEL_HEADERS):
        text = (project / f).read_text()
        (work / f).write_text(text.replace('__attribute__((section(".edgemem_arena.arena"), ', "__attribute__(("))
    (work / "driver.c").write_text("#include <stdlib.h>\n" + _SEQUENCE_DRIVER)
    subprocess.run([cc, *WARNING_FLAGS, "-O1", *MODEL_SOURCES, "driver.c", "-lm", "-o", "seq"], cwd=work, check=True, timeout=300)
    inputs = [seeded_inputs(path, seed)[0] for seed in range(3)]
    for k, x in enumerate(inputs):
        (work / f"in{k}.bin").write_bytes(x.tobytes())
    subprocess.run(["./seq", "3"], cwd=work, check=True, timeout=120)

    interp = tflm_interpreter(path)
    expected = []
    for x in inputs:
        interp.set_input(x, 0)
        interp.invoke()
        expected.append(np.array(interp.get_output(0), copy=True))
    for k, want in enumerate(expected):
        got = np.frombuffer((work / f"out{k}.bin").read_bytes(), dtype=want.dtype).reshape(want.shape)
        np.testing.assert_array_equal(got, want)
    again = np.frombuffer((work / "again.bin").read_bytes(), dtype=expected[0].dtype).reshape(expected[0].shape)
    np.testing.assert_array_equal(again, expected[0])
    assert not np.array_equal(tflm_outputs(path, [inputs[1]])[0], expected[1])
    shutil.rmtree(work)
