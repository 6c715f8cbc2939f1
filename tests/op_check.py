"""Build a model with edgemem for the host, run it on seeded inputs, compare with the reference interpreter.

The comparison every operator test uses: `pipeline.build(compile=False)` (no memory budget: the host has
RAM), the generated C compiled for the host with -Wall -Wextra -Werror and AddressSanitizer + UBSan
(target/host.py), run on seeds 0, 1, 2 (reference.seeded_inputs), against TFLite Micro run in a child process
(reference.reference_outputs_many; LiteRT only where TFLM cannot run the model). Integer outputs must be TFLM's
bit for bit; float outputs within FLOAT_RTOL relative (the issue's 1e-5), with an absolute floor of
FLOAT_RTOL x the largest reference magnitude for values near zero; LITERT_STEPS where LiteRT is the oracle.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from edgemem import pipeline
from edgemem.device_run import dequantized_steps  # noqa: F401  (the tests import it from here)
from edgemem.reference import model_io_specs, reference_outputs_many, seeded_inputs
from edgemem.target.host import build_host, run_host

HUGE = 1 << 30
SEEDS = (0, 1, 2)
FLOAT_RTOL = 1e-5
# Where TFLM cannot run a model (no GELU or TILE kernel, or its binding aborts), LiteRT's kernels are the oracle and
# they round some operators one step away from TFLM's: per-channel FULLY_CONNECTED differs by one step on some
# elements of the transformer encoder's own layers (TFLM vs LiteRT, each layer cut out and run alone, while edgemem
# equals TFLM there), and steps compound through a few layers. int8 outputs (and float outputs a DEQUANTIZE made
# from int8, in steps of its scale) are then allowed this many steps.
LITERT_STEPS = 2


@dataclass
class Comparison:
    oracle: str
    seeds: tuple[int, ...]
    max_abs_diff: list[float] = field(default_factory=list)
    project: Path | None = None


def missing_operators(path: Path) -> list[str]:
    """The operators of the model at ``path`` that edgemem's support check refuses, as 'NAME (type)'."""
    from edgemem.frontend.support import unsupported_operators
    from edgemem.frontend.tflite_import import inspect_tflite

    model, op_names, _, _ = inspect_tflite(path)
    return sorted({f"{u.name} ({u.operand_type})" for u in unsupported_operators(model, op_names)})


def model_param(path: Path):
    """``path`` as a pytest parameter; a strict expected failure (UnsupportedModelError) naming what it lacks when the
    support check refuses one of its operators, so that it runs for real the day the operator lands."""
    import pytest

    from edgemem.errors import UnsupportedModelError

    missing = missing_operators(path)
    marks = [pytest.mark.xfail(strict=True, raises=UnsupportedModelError, reason=f"needs {', '.join(missing)}")] if missing else []
    return pytest.param(path, marks=marks, id=path.stem)


def _as_path(model, tmp: Path) -> Path:
    if isinstance(model, (bytes, bytearray)):
        path = tmp / "model.tflite"
        path.write_bytes(bytes(model))
        return path
    return Path(model)


def build_for_host(model, tmp: Path, **options) -> tuple[Path, Path]:
    """(model path, generated project) for ``model`` (a path or flatbuffer bytes), built without a budget."""
    tmp = Path(tmp)
    tmp.mkdir(parents=True, exist_ok=True)
    path = _as_path(model, tmp)
    opts = pipeline.BuildOptions(compile=False, ram=HUGE, flash=HUGE, overwrite=True, opt_seconds=0, schedule_seconds=0.5)
    for key, value in options.items():
        setattr(opts, key, value)
    project = tmp / "project"
    pipeline.build(path, "stm32f746", project, opts)
    return path, project


def assert_outputs_match(got: list[np.ndarray], want: list[np.ndarray], oracle: str, what: str = "",
                         steps: list[float | None] | None = None) -> float:
    """Integer outputs bit-exact with TFLM, float within FLOAT_RTOL; with LiteRT as the oracle, quantized (int8,
    int16) outputs and float outputs dequantized from int8 (``steps``: their scales, from ``dequantized_steps``)
    within LITERT_STEPS steps (indices and bools stay exact). Returns the largest difference (in steps where
    compared in steps)."""
    worst = 0.0
    steps = steps or [None] * len(got)
    for i, (g, w, step) in enumerate(zip(got, want, steps)):
        w = np.asarray(w).reshape(g.shape)
        label = f"{what} output {i} ({g.dtype}{list(g.shape)}, oracle {oracle})"
        if oracle != "tflm" and (step is not None or g.dtype in (np.int8, np.int16)):  # indices, bools: exact
            diff = np.abs(g.astype(np.float64) - w.astype(np.float64)) / (1.0 if step is None else step)
            assert diff.max(initial=0) <= LITERT_STEPS + 1e-3, f"{label}: {diff.max():.3f} steps from LiteRT at {np.argmax(diff)}"
            worst = max(worst, float(diff.max(initial=0)))
        elif np.issubdtype(g.dtype, np.floating):
            floor = FLOAT_RTOL * max(1.0, float(np.max(np.abs(w)))) if w.size else 0.0
            np.testing.assert_allclose(g, w, rtol=FLOAT_RTOL, atol=floor, err_msg=label)
            worst = max(worst, float(np.max(np.abs(g.astype(np.float64) - w))) if g.size else 0.0)
        else:
            diff = np.abs(g.astype(np.int64) - w.astype(np.int64))
            assert diff.max(initial=0) == 0, f"{label}: max difference {diff.max()} at {np.argmax(diff)}"
    return worst


def check_model(model, tmp: Path, seeds=SEEDS, **options) -> Comparison:
    """Build ``model`` for the host and compare its outputs with the reference on every seed (the reference runs
    all seeds in one child process)."""
    path, project = build_for_host(model, tmp, **options)
    return compare_built(path, project, tmp, seeds)


def compare_built(path: Path, project: Path, tmp: Path, seeds=SEEDS) -> Comparison:
    """The host program of an already generated ``project`` against the reference on every seed."""
    exe = build_host(project, Path(tmp) / "host")
    _, outs = model_io_specs(path)
    input_sets = [seeded_inputs(path, seed) for seed in seeds]
    wanted, oracle = reference_outputs_many(path, input_sets)
    result = Comparison(oracle, tuple(seeds), project=project)
    steps = dequantized_steps(path)
    for seed, inputs, want in zip(seeds, input_sets, wanted):
        raw = run_host(exe, [x.tobytes() for x in inputs], [int(np.prod(s)) * d.itemsize for _, s, d in outs]).outputs
        got = [np.frombuffer(r, dtype=d).reshape(s) for r, (_, s, d) in zip(raw, outs)]
        result.max_abs_diff.append(assert_outputs_match(got, want, oracle, f"{path.name} seed {seed}", steps))
    return result


_SEQUENCE_DRIVER = r"""
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include "model.h"

/* Written for the tests: runs the model on in0.bin .. in<K-1>.bin in sequence (no reset in between), writes
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


def run_in_sequence(model, tmp: Path, inputs: list[np.ndarray]) -> tuple[list[np.ndarray], np.ndarray]:
    """A stateful model (LSTM, SVDF: state tensors kept across runs) built for the host (gcc/clang -Werror) and run
    on each input in turn with no reset in between; returns output 0 of each run, and output 0 of a run on the
    first input again after ``edgemem_reset()``."""
    import subprocess

    from edgemem.target.host import MODEL_SOURCES, WARNING_FLAGS, host_compiler, write_host_sources

    path, project = build_for_host(model, tmp)
    work = Path(tmp) / "sequence"
    write_host_sources(project, work)  # the model's sources, pools as plain globals
    (work / "driver.c").write_text(_SEQUENCE_DRIVER)
    cmd = [host_compiler(), *WARNING_FLAGS, "-O1", *MODEL_SOURCES, "driver.c", "-lm", "-o", "seq"]
    subprocess.run(cmd, cwd=work, check=True, timeout=300, capture_output=True)
    for k, x in enumerate(inputs):
        (work / f"in{k}.bin").write_bytes(np.ascontiguousarray(x).tobytes())
    subprocess.run(["./seq", str(len(inputs))], cwd=work, check=True, timeout=120, capture_output=True)
    _, outs = model_io_specs(path)
    _, shape, dtype = outs[0]

    def read(name: str) -> np.ndarray:
        return np.frombuffer((work / name).read_bytes(), dtype=dtype).reshape(shape)

    return [read(f"out{k}.bin") for k in range(len(inputs))], read("again.bin")
