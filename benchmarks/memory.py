"""Arena planning benchmark: for every model in a folder, TFLM's arena (measured live with tflite_micro) next to
the lower bound of the file order and edgemem's arena per placement algorithm.

    .venv/bin/python benchmarks/memory.py [--models ../shared/models] [--align 4] > benchmarks/memory.md

Live ranges come from the flatbuffer in the file's operator order with edgemem's memory model (views share
storage), so every model is measured, including those the lowering does not support yet.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from edgemem.frontend.footprint import file_order_live_ranges  # noqa: E402
from edgemem.frontend.tflite_import import read_tflite  # noqa: E402
from edgemem.plan import ALGORITHMS, EXACT_MAX_BUFFERS, Buffer, check_plan, plan_arena  # noqa: E402


def buffers_of(path: Path, align: int) -> list[Buffer]:
    return [Buffer(n, max(size, 1), a, b, align) for n, size, a, b in file_order_live_ranges(read_tflite(path))]


def tflm(path: Path) -> tuple[str, str]:
    try:
        from edgemem.reference import tflm_arena_bytes

        r = tflm_arena_bytes(path)
        return f"{r['head']:,}", f"{r['total']:,}"
    except Exception as e:  # noqa: BLE001 - TFLM refuses some models; the table says so
        return f"({type(e).__name__})", "-"


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--models", type=Path, default=ROOT.parent / "shared" / "models")
    ap.add_argument("--align", type=int, default=4)
    args = ap.parse_args(argv)
    algos = list(ALGORITHMS)
    print(f"Alignment {args.align} B; file operator order; times on this machine (2 cores, shared). "
          f"exact runs on up to {EXACT_MAX_BUFFERS} buffers.\n")
    print("| model | TFLM head | TFLM total | lower bound | " + " | ".join(algos) + " | chosen | ratio | plan s |")
    print("|---|---:|---:|---:|" + "---:|" * len(algos) + "---|---:|---:|")
    for path in sorted(args.models.glob("*.tflite")):
        bufs = buffers_of(path, args.align)
        t0 = time.perf_counter()
        plan = plan_arena(bufs)
        seconds = time.perf_counter() - t0
        check_plan(bufs, plan)
        per_algo = [
            "n/a" if a == "exact" and len(bufs) > EXACT_MAX_BUFFERS else f"{plan_arena(bufs, algorithms=[a]).total_bytes:,}"
            for a in algos
        ]
        head, total = tflm(path)
        cells = " | ".join(per_algo)
        print(f"| {path.stem} | {head} | {total} | {plan.lower_bound:,} | {cells} | {plan.algorithm} "
              f"| {plan.total_bytes / plan.lower_bound:.3f} | {seconds:.3f} |")
        sys.stdout.flush()
    return 0


if __name__ == "__main__":
    sys.exit(main())
