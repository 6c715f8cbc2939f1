"""Build a model with edgemem for the host, run it on seeded inputs, compare with the reference interpreter.

The comparison every operator test uses: `pipeline.build(compile=False)` (no memory budget: the host has
RAM), the generated C compiled for the host with -Wall -Wextra -Werror and AddressSanitizer + UBSan
(target/host.py), run on seeds 0, 1, 2 (reference.seeded_inputs), against TFLite Micro run in a child process
(reference.reference_outputs; LiteRT only where TFLM cannot run the model). Integer outputs must be TFLM's
bit for bit; float outputs within FLOAT_RTOL relative (the issue's 1e-5), with an absolute floor of
FLOAT_RTOL x the largest reference magnitude for values near zero.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from edgemem import pipeline
from edgemem.reference import model_io_specs, reference_outputs_many, seeded_inputs
from edgemem.target.host import build_host, run_host

HUGE = 1 << 30
SEEDS = (0, 1, 2)
FLOAT_RTOL = 1e-5
LITERT_INT_LSB = 1  # LiteRT rounds some ties differently from TFLM: within one step where it is the oracle


@dataclass
class Comparison:
    oracle: str
    seeds: tuple[int, ...]
    max_abs_diff: list[float] = field(default_factory=list)
    project: Path | None = None


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


def assert_outputs_match(got: list[np.ndarray], want: list[np.ndarray], oracle: str, what: str = "") -> float:
    """Integer outputs bit-exact with TFLM (within LITERT_INT_LSB of LiteRT), float within FLOAT_RTOL."""
    worst = 0.0
    for i, (g, w) in enumerate(zip(got, want)):
        w = np.asarray(w).reshape(g.shape)
        label = f"{what} output {i} ({g.dtype}{list(g.shape)}, oracle {oracle})"
        if np.issubdtype(g.dtype, np.floating):
            floor = FLOAT_RTOL * max(1.0, float(np.max(np.abs(w)))) if w.size else 0.0
            np.testing.assert_allclose(g, w, rtol=FLOAT_RTOL, atol=floor, err_msg=label)
            worst = max(worst, float(np.max(np.abs(g.astype(np.float64) - w))) if g.size else 0.0)
        else:
            diff = np.abs(g.astype(np.int64) - w.astype(np.int64))
            allowed = 0 if oracle == "tflm" else LITERT_INT_LSB
            assert diff.size == 0 or diff.max() <= allowed, f"{label}: max difference {diff.max()} at {np.argmax(diff)}"
            worst = max(worst, float(diff.max()) if diff.size else 0.0)
    return worst


def check_model(model, tmp: Path, seeds=SEEDS, **options) -> Comparison:
    """Build ``model`` for the host and compare its outputs with the reference on every seed (the reference runs
    all seeds in one child process)."""
    path, project = build_for_host(model, tmp, **options)
    exe = build_host(project, Path(tmp) / "host")
    _, outs = model_io_specs(path)
    input_sets = [seeded_inputs(path, seed) for seed in seeds]
    wanted, oracle = reference_outputs_many(path, input_sets)
    result = Comparison(oracle, tuple(seeds), project=project)
    for seed, inputs, want in zip(seeds, input_sets, wanted):
        raw = run_host(exe, [x.tobytes() for x in inputs], [int(np.prod(s)) * d.itemsize for _, s, d in outs]).outputs
        got = [np.frombuffer(r, dtype=d).reshape(s) for r, (_, s, d) in zip(raw, outs)]
        result.max_abs_diff.append(assert_outputs_match(got, want, oracle, f"{path.name} seed {seed}"))
    return result
