"""The build's stages up to the C sources on a long generated model (issue 30), each timed in wall and CPU seconds:
    python benchmarks/time_limits.py [N] [chain|fanout] [OPT_SECONDS] [--no-codegen]
(default a chain of 10,000 operators, --opt-time 5; --schedule-time 2; --no-codegen: stop after the plan;
benchmarks/time_limits.md)"""

from __future__ import annotations

import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))

from long_models import chain_model, fanout_model  # noqa: E402

from edgemem.board import load_board  # noqa: E402
from edgemem.codegen.model_c import PoolLayout, compile_kernels, render_model  # noqa: E402
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


def main(n: int, kind: str = "chain", opt_seconds: float = 5.0, codegen: bool = True) -> None:
    options = BuildOptions(opt_seconds=opt_seconds, schedule_seconds=2.0)
    board = load_board("stm32f746")
    budget = ram_budget(board)
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / f"{kind}{n}.tflite"
        path.write_bytes((chain_model if kind == "chain" else fanout_model)(n))
        model = stage("import", lambda: import_tflite(path))
    lowered = stage("lower", lambda: lower_to_kernels(model.relax_mod, model.op_labels))
    mod, report = stage("memory passes", lambda: optimize(lowered, board, options, budget))
    print("  stop", report.get("stop"), "trials", report.get("trials"), "sequence", [s["pass"] for s in report["sequence"]])
    graph = stage("graph", lambda: read_graph(mod))
    schedule, tried = stage("schedule", lambda: schedule_tried(graph, board.arena_align, options.schedule_seconds))
    _, plan = stage("plan", lambda: plan_graph(graph, schedule, board, path.name, False, budget, tried))
    print("  arena", plan.total_bytes, "scheduler", schedule.scheduler, "kernels", len(graph.ops), flush=True)
    if not codegen:
        return
    kernels = stage("kernels", lambda: compile_kernels(graph))
    stage("C sources", lambda: render_model(
        model_name=path.name, board=board, graph=graph, order=schedule.order,
        placements={name: (p.pool, p.offset) for name, p in plan.placements.items()},
        pools=[PoolLayout(name, size) for name, size in plan.pool_sizes.items()], lower_bound=plan.lower_bound,
        scheduler=schedule.scheduler, algorithm=plan.algorithm, kernels=kernels, input_infos=model.inputs,
        output_infos=model.outputs))  # fmt: skip


if __name__ == "__main__":
    args = [a for a in sys.argv[1:] if a != "--no-codegen"]
    main(int(args[0]) if args else 10_000, args[1] if len(args) > 1 else "chain", float(args[2]) if len(args) > 2 else 5.0,
         "--no-codegen" not in sys.argv)  # fmt: skip
