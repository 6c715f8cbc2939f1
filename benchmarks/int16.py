"""16x8 whole models next to the same architectures in int8: arena, flash, instructions, bit-exactness.

For each architecture of tests/models/gen_architectures.py that has 16x8 forms (INT16: int16 activations, int8
weights), its int8 and int16 files (int8/int16 io) are built for the STM32F746 and run under QEMU (-icount
shift=0) on seed 0, compared with TFLite Micro; TFLM's own arena for the model (tflm_arena_bytes, its recording
allocator: head, the activations) stands beside edgemem's.

    .venv/bin/python benchmarks/int16.py > benchmarks/int16.md
"""

from __future__ import annotations

import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "tests" / "models"))
sys.path.insert(0, str(ROOT / "tests"))

from edgemem import device_run, pipeline  # noqa: E402
from edgemem.errors import EdgememError  # noqa: E402
from edgemem.reference import tflm_arena_bytes  # noqa: E402

ARCH = ROOT / "tests" / "models" / "arch"


def int16_architectures() -> list[str]:
    from gen_architectures import INT16

    return sorted(INT16)


def forms(arch: str, tmp: Path) -> list[tuple[str, str, Path]]:
    """(label, type, path) of the int8 and 16x8 files of ``arch``. The converter refuses a 16x8 LSTM, so the
    denoiser's 16x8 form is the one tests/models/gen_lstm16.py derives (float edges, like its int8 partner)."""
    if (ARCH / f"{arch}-int16.tflite").exists():
        return [(arch, "int8", ARCH / f"{arch}-int8.tflite"), (arch, "int16", ARCH / f"{arch}-int16.tflite")]
    if arch == "denoiser_lstm":
        from gen_lstm16 import denoiser16_model

        derived = tmp / "denoiser16.tflite"
        derived.write_bytes(denoiser16_model())
        return [(f"{arch} (float io)", "int8", ARCH / f"{arch}_floatio-int8.tflite"),
                (f"{arch} (float io; 16x8 derived by gen_lstm16.py)", "int16", derived)]
    return [(arch, "int8", ARCH / f"{arch}-int8.tflite")]


def measure(path: Path) -> dict:
    with tempfile.TemporaryDirectory() as tmp:
        t0 = time.perf_counter()
        result = pipeline.build(path, "stm32f746", Path(tmp) / "p", pipeline.BuildOptions(opt_seconds=0, schedule_seconds=0.5))
        seconds = time.perf_counter() - t0
        run = device_run.run(Path(tmp) / "p", seed=0, timeout_s=600)
    return {"info": result.info, "run": run, "seconds": seconds}


def tflm_head(path: Path) -> str:
    try:
        return f"{int(tflm_arena_bytes(path)['head']):,}"
    except Exception as exc:  # noqa: BLE001  (a table cell, not a crash of the benchmark)
        return f"n/a ({type(exc).__name__})"


def main() -> int:
    t0 = time.time()
    print("# 16x8 models (int16 activations, int8 weights) next to the same architectures in int8\n")
    print("Command: `.venv/bin/python benchmarks/int16.py > benchmarks/int16.md`. Board stm32f746, QEMU -icount "
          "shift=0, seed 0; `vs TFLM` compares the device's output with TFLite Micro's (int8 and int16 bit for bit); "
          "TFLM arena = its allocator's head (activations) for the same file.\n")
    print("| architecture | type | edgemem arena | lower bound | TFLM arena | flash | instructions | vs TFLM | arena int16/int8 | instructions int16/int8 |")
    print("|---|---|---:|---:|---:|---:|---:|---|---:|---:|")
    with tempfile.TemporaryDirectory() as tmp:
        for arch in int16_architectures():
            base = None
            for label, kind, path in forms(arch, Path(tmp)):
                try:
                    m = measure(path)
                except EdgememError as exc:
                    print(f"| {label} | {kind} | refused: {' '.join(str(exc).split())[:150]} |||||||||")
                    continue
                i, r = m["info"], m["run"]
                verdict = "bit-exact" if r["bit_exact"] else f"differs (max {r['max_abs_diff']})"
                ratios = "| |"
                if kind == "int8":
                    base = (i["arena_bytes"], r["instructions"])
                elif base:
                    ratios = f"| {i['arena_bytes'] / base[0]:.2f} | {r['instructions'] / base[1]:.2f} |"
                print(f"| {label} | {kind} | {i['arena_bytes']:,} | {i['lower_bound_bytes']:,} | {tflm_head(path)} "
                      f"| {i['flash_bytes']:,} | {r['instructions']:,} | {r.get('oracle', '?')}: {verdict} {ratios}")
                sys.stdout.flush()
    print(f"\n{time.time() - t0:.0f} s.")
    return 0


if __name__ == "__main__":
    sys.exit(main())
