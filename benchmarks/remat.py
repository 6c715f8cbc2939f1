"""Rematerialization (passes/remat.py, issue 20): what the pass finds on every shared model (peak of the lowered
module before/after, the tensors recomputed, the pass's time), and the U-Net-like model of tests/test_remat.py
built for stm32f746 with edgemem's fixed passes with and without `remat`, run under QEMU (-icount shift=0).

    .venv/bin/python benchmarks/remat.py > benchmarks/remat.md
"""

from __future__ import annotations

import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "tests"))

from edgemem import pipeline  # noqa: E402
from edgemem.frontend.tflite_import import import_tflite  # noqa: E402
from edgemem.passes import remat as rm  # noqa: E402
from edgemem.passes.lower import lower_to_kernels  # noqa: E402
from edgemem.device_run import run as run_on_device

MODELS = ROOT.parent / "shared" / "models"
FIXED = ("fold_pad", "inplace_depthwise", "inplace_elementwise")


def shared_models() -> None:
    print("## Shared models\n")
    print("The lowered module (no other pass), peak of the evaluator's order (16-byte alignment), before/after.\n")
    print("| model | peak before | peak after | recomputed | seconds |")
    print("|---|---:|---:|---|---:|")
    for path in sorted(MODELS.glob("*.tflite")):
        m = import_tflite(path)
        mod = lower_to_kernels(m.relax_mod, m.op_labels)
        t0, report = time.perf_counter(), {}
        rm.remat(mod, 16, report=report)
        done = ", ".join(f"{r['kind']} {r['tensor']}" for r in report["recomputed"]) or "none"
        print(f"| {path.stem} | {report['peak_before']:,} | {report['peak_after']:,} | {done} | "
              f"{time.perf_counter() - t0:.2f} |", flush=True)  # fmt: skip


def unet() -> None:
    from test_remat import input_skip_model, unet_model

    print("\n## U-Net-like models (tests/test_remat.py), stm32f746, QEMU\n")
    print("*unet W*: the pooled encoder tensor added back at the low decoder level, bottleneck width W. *input skip*: a "
          "float input quantized once and added back at the end; *out* = `--input outside`.\n")
    print("| model | input | passes | arena B | high-water B | bit-exact | instructions | kernels | flash B |")
    print("|---|---|---|---:|---:|---|---:|---:|---:|")
    cases = [(f"unet {w}", unet_model(w), False) for w in (32, 4)]
    cases += [("input skip", input_skip_model(), False), ("input skip", input_skip_model(), True)]
    with tempfile.TemporaryDirectory() as tmp:
        for k, (name, data, outside) in enumerate(cases):
            model = Path(tmp) / f"m{k}.tflite"
            model.write_bytes(data)
            for passes in (FIXED, FIXED + ("remat",)):
                out = Path(tmp) / f"p{k}{len(passes)}"
                info = pipeline.build(model, "stm32f746", out, pipeline.BuildOptions(passes=passes, input_outside=outside)).info
                run = run_on_device(out, seed=0)
                print(f"| {name} | {'out' if outside else 'in'} | {', '.join(passes)} | {info['arena_bytes']:,} | "
                      f"{run['arena_high_water_bytes']:,} | {run['bit_exact']} | {run['instructions']:,} | {info['ops']} | "
                      f"{info['flash_bytes']:,} |", flush=True)  # fmt: skip


if __name__ == "__main__":
    print("# Rematerialization\n")
    print("Command: `.venv/bin/python benchmarks/remat.py > benchmarks/remat.md`.\n")
    shared_models()
    unet()
