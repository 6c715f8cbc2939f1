"""End-to-end benchmark: build each model for a board, run it under QEMU (-icount shift=0), and print a
markdown table next to TFLite Micro's arena (../shared/models/tflm_baseline.csv, measured with tflite_micro).

    .venv/bin/python benchmarks/e2e.py [--board stm32f746] [--models DIR] [names...] > benchmarks/e2e.md
"""

from __future__ import annotations

import argparse
import csv
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from edgemem import device_run, pipeline  # noqa: E402
from edgemem.errors import EdgememError  # noqa: E402

DEFAULT = [
    "mlperf_kws_dscnn_int8", "mlperf_vww_96_int8", "mlperf_ic_resnet8_int8", "mlperf_ad_fc_autoencoder_int8",
    "mlperf_sww_int8", "tflm_person_detect_int8", "tflm_micro_speech_int8", "tflm_hello_world_int8",
]  # fmt: skip


def tflm_baseline(models: Path) -> dict[str, dict]:
    path = models / "tflm_baseline.csv"
    if not path.is_file():
        return {}
    with path.open() as f:
        return {row["model"].removesuffix(".tflite"): row for row in csv.DictReader(f)}


def measure(path: Path, board: str) -> dict:
    with tempfile.TemporaryDirectory() as tmp:
        t0 = time.perf_counter()
        result = pipeline.build(path, board, Path(tmp) / "p")
        seconds = time.perf_counter() - t0
        res = device_run.run(Path(tmp) / "p", seed=0)
    return {"info": result.info, "run": res, "seconds": seconds}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("names", nargs="*", default=DEFAULT)
    ap.add_argument("--board", default="stm32f746")
    ap.add_argument("--models", type=Path, default=ROOT.parent / "shared" / "models")
    args = ap.parse_args(argv)
    base = tflm_baseline(args.models)
    print(f"Board {args.board}; QEMU -icount shift=0; TFLM figures from tflm_baseline.csv (tflite_micro, x86).\n")
    print("| model | edgemem arena | lower bound | TFLM head | TFLM total | device arena high-water | device RAM total "
          "| flash | instructions | vs TFLM | build s |")
    print("|---|---:|---:|---:|---:|---:|---:|---:|---:|---|---:|")
    for name in args.names:
        b = base.get(name, {})
        try:
            m = measure(args.models / f"{name}.tflite", args.board)
        except EdgememError as e:
            print(f"| {name} | failed: {str(e).splitlines()[0][:120]} |||||||||")
            continue
        i, r = m["info"], m["run"]
        verdict = "bit-exact" if r["bit_exact"] else (f"max diff {r['max_abs_diff']}" if r["bit_exact"] is not None else "-")
        print(f"| {name} | {i['arena_bytes']:,} | {i['lower_bound_bytes']:,} | {int(b.get('tflm_head', 0) or 0):,} "
              f"| {int(b.get('tflm_total', 0) or 0):,} | {r['arena_high_water_bytes']:,} | {r['total_ram_bytes']:,} "
              f"| {i['flash_bytes']:,} | {r['instructions']:,} | {verdict} | {m['seconds']:.1f} |")
        sys.stdout.flush()
    return 0


if __name__ == "__main__":
    sys.exit(main())
