"""The build's stages up to the plan on a long generated chain (issue 30), each timed in wall and CPU seconds:
    python benchmarks/time_limits.py [N]     (default 10,000 operators; benchmarks/time_limits.md)"""

from __future__ import annotations

import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))

from long_models import chain_model  # noqa: E402

from edgemem.board import load_board  # noqa: E402
from edgemem.budget import ram_budget  # noqa: E402
from edgemem.frontend.tflite_import import import_tflite  # noqa: E402
from edgemem.ir.graph import read_graph  # noqa: E402
from edgemem.passes.lower import lower_to_kernels  # noqa: E402
from edgemem.passes.optimize import optimize  # noqa: E402
from edgemem.pipeline import BuildOptions  # noqa: E402
from edgemem.plan.graph_plan import plan_graph  # noqa: E402
from edgemem.schedule.best import schedule_tried  # noqa: E402


def stage(name, fn):
    t, c = time.perf_counter(), time.process_time()
    result = fn()
    print(f"{name}: {time.perf_counter() - t:.1f} s wall, {time.process_time() - c:.1f} s CPU", flush=True)
    return result


def main(n: int) -> None:
    options = BuildOptions(opt_seconds=5.0, schedule_seconds=2.0)
    board = load_board("stm32f746")
    budget = ram_budget(board)
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / f"chain{n}.tflite"
        path.write_bytes(chain_model(n))
        model = stage("import", lambda: import_tflite(path))
    lowered = stage("lower", lambda: lower_to_kernels(model.relax_mod, model.op_labels))
    mod, report = stage("memory passes", lambda: optimize(lowered, board, options, budget))
    print("  stop", report.get("stop"), "trials", report.get("trials"), "sequence", [s["pass"] for s in report["sequence"]])
    graph = stage("graph", lambda: read_graph(mod))
    schedule, tried = stage("schedule", lambda: schedule_tried(graph, board.arena_align, options.schedule_seconds))
    _, plan = stage("plan", lambda: plan_graph(graph, schedule, board, path.name, False, budget, tried))
    print("  arena", plan.total_bytes, "scheduler", schedule.scheduler)


if __name__ == "__main__":
    main(int(sys.argv[1]) if len(sys.argv) > 1 else 10_000)
