"""`edgemem analyze` on every shared model: its time (in a fresh process, as a user runs it, and the analysis
alone in a warm one) and its arena next to the arena `edgemem build` plans for the same (default) options.

    .venv/bin/python benchmarks/analyze.py [--board stm32f746] [--models DIR] [--no-build] > benchmarks/analyze.md
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from edgemem import pipeline  # noqa: E402
from edgemem.analysis import analyze  # noqa: E402
from edgemem.errors import DoesNotFitError, EdgememError  # noqa: E402

INTRO = (
    "'cold' = `edgemem analyze MODEL --json` in a fresh process (Python start, imports -- TVM comes in with the "
    "flatbuffer reader, frontend/tflite_import.py, and the pass catalogue -- and the analysis): wall seconds, and "
    "CPU seconds (user + system, what the wall time is on an idle core); 'warm' = the `analyze()` call alone in a "
    "process that has analyzed another model already. 'build arena' = `edgemem build` with the same (default) "
    "options, lowered and planned (no compiler). analyze's arena is the fixed pass sequence's (fold_pad, "
    "inplace_depthwise, inplace_residual, inplace_elementwise, their storage effects modeled on the flatbuffer) "
    "through the "
    "build's schedulers and placements."
)


def cold_run(path: Path, board: str) -> tuple[float, float, dict]:
    """Wall seconds, CPU seconds and the JSON report of `edgemem analyze --json` in its own process."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.perf_counter()
    proc = subprocess.run([sys.executable, "-m", "edgemem.cli", "analyze", str(path), "--board", board, "--json"],
                          capture_output=True, text=True, cwd=ROOT, timeout=300)  # fmt: skip
    wall = time.perf_counter() - t0
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return wall, cpu, json.loads(proc.stdout) if proc.stdout.strip() else {"error": proc.stderr.strip()[-200:]}


def build_arena(path: Path, board: str) -> str:
    with tempfile.TemporaryDirectory() as tmp:
        try:
            info = pipeline.build(path, board, Path(tmp) / "p", pipeline.BuildOptions(compile=False)).info
            return f"{info['arena_bytes']:,}"
        except DoesNotFitError:
            return "does not fit"
        except EdgememError as exc:
            return f"refused: {type(exc).__name__}"


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--board", default="stm32f746")
    ap.add_argument("--models", type=Path, default=ROOT.parent / "shared" / "models")
    ap.add_argument("--no-build", action="store_true", help="skip the builds (the arena comparison)")
    args = ap.parse_args()
    paths = sorted(args.models.glob("*.tflite"))
    print(f"# `edgemem analyze` on every shared model (issue 22)\n\nCommand: `.venv/bin/python benchmarks/analyze.py "
          f"--board {args.board}` ({time.strftime('%Y-%m-%d')}, this machine: 2 cores shared with other sessions, "
          f"load average {os.getloadavg()[0]:.1f} at the start). {INTRO}\n")
    print("| model | ops | cold wall s | cold CPU s | warm s | analyze arena | build arena | equal | floor | verdict |")
    print("|---|---:|---:|---:|---:|---:|---:|---|---:|---|")
    analyze(paths[0], args.board)  # warm the imports
    worst = [0.0, 0.0, 0.0]
    equal = compared = 0
    for path in paths:
        wall, cpu, report = cold_run(path, args.board)
        t0 = time.perf_counter()
        a = analyze(path, args.board)
        warm = time.perf_counter() - t0
        worst = [max(worst[0], wall), max(worst[1], cpu), max(worst[2], warm)]
        built = "-" if args.no_build else build_arena(path, args.board)
        mine = "no placement" if a.arena_bytes is None else f"{a.arena_bytes:,}"
        same = "-"
        if built[:1].isdigit():
            compared += 1
            same = "yes" if built == mine else "NO"
            equal += same == "yes"
        elif built == "does not fit":
            same = "yes (both: does not fit)" if a.verdict == "does not fit" else "NO"
        cli = "" if "error" not in report else " (CLI: no JSON)"
        print(f"| {path.stem} | {len(a.operators)} | {wall:.2f} | {cpu:.2f} | {warm:.2f} | {mine} | {built} | {same} | "
              f"{a.ram_floor_bytes:,} | {a.verdict}{cli} |", flush=True)  # fmt: skip
    print(f"\nSlowest: cold {worst[0]:.2f} s wall / {worst[1]:.2f} s CPU, warm {worst[2]:.2f} s. Arena equal to the "
          f"build's on {equal} of the {compared} models the build plans.")


if __name__ == "__main__":
    main()
