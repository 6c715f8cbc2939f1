"""analyze's arena next to the build's on the converter-made architectures of tests/models/arch (models analyze
was not tuned for), with the fixed pass sequence (`--opt-time 0`). The build side runs the pipeline's own stages
up to the plan (import, lowering, passes, schedulers, placement; no C generation), to keep the sweep short.

    .venv/bin/python benchmarks/analyze_arch.py [names...]   (output quoted in benchmarks/analyze.md)
"""

from __future__ import annotations

import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from edgemem.analysis import analyze  # noqa: E402
from edgemem.board import load_board  # noqa: E402
from edgemem.budget import board_with_budget, ram_budget  # noqa: E402
from edgemem.frontend.tflite_import import import_tflite  # noqa: E402
from edgemem.ir.graph import read_graph  # noqa: E402
from edgemem.passes.lower import lower_to_kernels  # noqa: E402
from edgemem.passes.optimize import optimize  # noqa: E402
from edgemem.pipeline import BuildOptions  # noqa: E402
from edgemem.plan.graph_plan import plan_graph  # noqa: E402
from edgemem.schedule.best import schedule_tried  # noqa: E402

ARCH = ROOT / "tests" / "models" / "arch"


def main() -> None:
    paths = [ARCH / f"{n}.tflite" for n in sys.argv[1:]] or sorted(ARCH.glob("*.tflite"))
    print("| model | analyze arena | exact? | build arena (--opt-time 0) | equal | passes that changed the module |")
    print("|---|---:|---|---:|---|---|")
    counts = {"equal": 0, "differ, flagged estimate": 0, "differ, not flagged": 0}
    for path in paths:
        o = BuildOptions(opt_seconds=0)
        try:
            a = analyze(path, "stm32f746", options=o)
            board = board_with_budget(load_board("stm32f746"), None, None)
            m = import_tflite(path)
            mod, rep = optimize(lower_to_kernels(m.relax_mod, m.op_labels), board, o, ram_budget(board))
            g = read_graph(mod)
            s, tried = schedule_tried(g, board.arena_align, o.schedule_seconds)
            _, plan = plan_graph(g, s, board, path.name, False, ram_budget(board), tried)
        except Exception as exc:  # noqa: BLE001 - a refusal is a row, not the end of the sweep
            print(f"| {path.stem} | - | - | - | - | {type(exc).__name__} |", flush=True)
            continue
        same = plan.total_bytes == a.arena_bytes
        key = "equal" if same else ("differ, flagged estimate" if not a.arena_exact else "differ, not flagged")
        counts[key] += 1
        changed = ", ".join(x["pass"] for x in rep["sequence"] if x["changed"]) or "none"
        print(f"| {path.stem} | {a.arena_bytes:,} | {'yes' if a.arena_exact else 'estimate (float)'} | "
              f"{plan.total_bytes:,} | {'yes' if same else 'NO'} | {changed} |", flush=True)  # fmt: skip
    print("\n" + ", ".join(f"{k}: {v}" for k, v in counts.items()))


if __name__ == "__main__":
    main()
