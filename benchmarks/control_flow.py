"""WHILE loops unrolled at import (edgemem/frontend/control_flow.py): build time, arena and TFLM's arena.

Per model: the build for the stm32f746 (firmware compiled; float32 models planned for QEMU's 4 MiB), its CPU
seconds (this process and the compilers it runs) and wall seconds, the planned arena and the lower bound, TFLite
Micro's arena for the original file (head: its activation plan; total: with its persistent structures), and the
outputs under QEMU against TFLM on seed 0. The models: Keras 3's GRU and LSTM over 10 and 100 steps
(tests/models/arch, TensorFlow's converter), the same 10-step GRU/LSTM unrolled by Keras itself (unroll=True:
no WHILE), and the hand-made int8 RNN of tests/while_models.py over 10 and 100 steps.

    .venv/bin/python benchmarks/control_flow.py > benchmarks/control_flow.md
"""

from __future__ import annotations

import resource
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))

ARCH = ROOT / "tests" / "models" / "arch"
KERAS = ["gru-float32", "gru_unrolled-float32", "gru_seq100-float32", "lstm-float32", "lstm_unrolled-float32", "lstm_seq100-float32"]


def _cpu() -> float:
    own, kids = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime + kids.ru_utime + kids.ru_stime


def measure(name: str, label: str, path: Path, tmp: Path) -> str:
    from edgemem import device_run, pipeline
    from edgemem.reference import reference_outputs, seeded_inputs, tflm_arena_bytes

    big = {"ram": 4 << 20, "flash": 4 << 20} if name.endswith("float32") else {}
    cpu, wall = _cpu(), time.time()
    result = pipeline.build(path, "stm32f746", tmp / name, pipeline.BuildOptions(opt_seconds=0, schedule_seconds=0.5, **big))
    cpu, wall = _cpu() - cpu, time.time() - wall
    inputs = seeded_inputs(path, 0)
    run = device_run.run(tmp / name, inputs, timeout_s=900)
    want, oracle = reference_outputs(path, inputs)
    diffs = [float(np.max(np.abs(np.asarray(g, np.float64) - np.asarray(w, np.float64)))) for g, w in zip(run["output_arrays"], want)]
    tflm = tflm_arena_bytes(path)
    info = result.info
    return (f"| {label} | {info['ops']} | {cpu:.1f} | {wall:.0f} | {info['arena_bytes']:,} | "
            f"{info.get('lower_bound_bytes', 0):,} | {tflm['head']:,} | {tflm['total']:,} | {run['arena_high_water_bytes']:,} | "
            f"{oracle}: max diff {max(diffs):g} |")  # fmt: skip


def main() -> None:
    from while_models import rnn_int8

    print(__doc__.split("\n\n    .venv")[0])
    print("\nCommand: `.venv/bin/python benchmarks/control_flow.py > benchmarks/control_flow.md`\n")
    print("| model | kernel calls | build CPU s | build wall s | arena B | lower bound B | TFLM head B | TFLM total B | QEMU high-water B | vs reference |")
    print("|---|---|---|---|---|---|---|---|---|---|")
    with tempfile.TemporaryDirectory() as d:
        tmp = Path(d)
        models = [(n, n, ARCH / f"{n}.tflite") for n in KERAS]
        for steps in (10, 100):
            path = tmp / f"rnn_int8_seq{steps}.tflite"
            path.write_bytes(rnn_int8(steps))
            models.append((f"rnn_int8_seq{steps}", f"rnn_int8_seq{steps} (hand-made)", path))
        for name, label, path in models:
            print(measure(name, label, path, tmp), flush=True)


if __name__ == "__main__":
    main()
