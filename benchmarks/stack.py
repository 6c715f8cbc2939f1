"""`--stack auto` on the acceptance models: each built for a board with the stack sized from gcc's call graph
(edgemem/target/stack.py), run under QEMU on seeded inputs 0..2, and printed as a markdown table: the
reservation (bound + margin), the painted peak of the run, total RAM as reported (arena + static + reserved
stack) next to what the run used (arena high-water + static + painted stack), and bit-exactness vs TFLite Micro.

    .venv/bin/python benchmarks/stack.py [--board stm32f746] [--models DIR] [names...] > benchmarks/stack.md
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from edgemem import device_run, pipeline  # noqa: E402
from edgemem.board import load_board  # noqa: E402
from edgemem.reference import seeded_inputs, tflm_outputs  # noqa: E402

from e2e import DEFAULT  # noqa: E402  (the acceptance models: one list, benchmarks/e2e.py's)


def measure(path: Path, board: str) -> dict:
    with tempfile.TemporaryDirectory() as tmp:
        result = pipeline.build(path, board, Path(tmp) / "p", pipeline.BuildOptions(stack="auto"))
        info, st = result.info, result.info.stack
        runs = []
        for seed in range(3):
            x = seeded_inputs(path, seed)
            res = device_run.run(Path(tmp) / "p", x)
            exact = all(np.array_equal(o, r) for o, r in zip(res["output_arrays"], tflm_outputs(path, x)))
            runs.append((res, exact))
    peak = max(r["peak_stack_bytes"] for r, _ in runs)
    used = max(r["total_ram_bytes"] for r, _ in runs)
    return {"arena": info.arena_bytes, "static": info.static_ram_bytes, "reserved": st["reserved_bytes"],
            "main": st["main_path_bytes"], "irq": st["interrupt_bytes"], "margin": st["margin_bytes"], "peak": peak,
            "total": info.total_ram_bytes, "used": used, "default_total": info.total_ram_bytes - st["reserved_bytes"] + load_board(board).stack_size,
            "hw_ok": all(r["arena_high_water_bytes"] == info.arena_bytes for r, _ in runs),
            "exact": all(e for _, e in runs), "matches": all(r["matches_reference"] for r, _ in runs)}  # fmt: skip


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--board", default="stm32f746")
    ap.add_argument("--models", type=Path, default=ROOT.parent / "shared" / "models")
    ap.add_argument("names", nargs="*")
    args = ap.parse_args()
    print(f"# `--stack auto` (issue 22)\n\nCommand: `.venv/bin/python benchmarks/stack.py --board {args.board}`. Each model "
          "built with `--stack auto` and run under QEMU on seeded inputs 0, 1, 2. Reserved = the call graph's bound "
          "(deepest chain from the C entry + one interrupt: exception frame and handler; target/stack.py) + margin "
          "(an eighth, at least 64 B), rounded to 8. Peak = painted stack, max over the runs. Total (report) = arena "
          "section + static + reserved stack; used (QEMU) = arena high-water + static + painted peak; headroom = "
          "total - used. 'default total' = the same build with the board's 16 KiB reservation.\n")
    print("| model | arena | static | main chain | + interrupt | + margin | reserved | painted peak | total (report) "
          "| used (QEMU) | headroom | default total | arena hw = plan | vs TFLM (3 seeds) |")
    print("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|---|")
    for name in args.names or DEFAULT:
        path = args.models / f"{name}.tflite"
        r = measure(path, args.board)
        verdict = "bit-exact" if r["exact"] else ("within 1 LSB" if r["matches"] else "DIFFERS")
        print(f"| {name} | {r['arena']:,} | {r['static']:,} | {r['main']:,} | {r['irq']:,} | {r['margin']:,} | "
              f"{r['reserved']:,} | {r['peak']:,} | {r['total']:,} | {r['used']:,} | {r['total'] - r['used']:,} | "
              f"{r['default_total']:,} | {'yes' if r['hw_ok'] else 'NO'} | {verdict} |", flush=True)


if __name__ == "__main__":
    main()
