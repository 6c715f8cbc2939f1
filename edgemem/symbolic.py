"""The symbolic entry point (`edgemem build --dim n=LO..HI`): schedule and plan once for a range of a
symbolic dimension, straight from the flatbuffer.

No TVM lowering and no kernels (they are compiled for concrete shapes), so none of the build's later stages
(memory passes, firmware, device run, profiling) apply; the CLI refuses those options with --dim.
"""

from __future__ import annotations

import json
import time
from pathlib import Path

from .board import load_board
from .budget import board_with_budget, ram_budget
from .build_info import JSON_SCHEMA
from .errors import DoesNotFitError
from .project_dir import check_replaceable, write_atomically

SYMBOLIC_INFO = "edgemem_symbolic.json"


def plan_for_range(model_path: str | Path, board_name: str, dims: list, *, ram: int | None = None,
                    flash: int | None = None, schedule_seconds: float = 2.0, overwrite: bool = False,
                    out_dir: str | Path | None = None) -> dict:  # fmt: skip
    """Schedule and plan once for a range of a symbolic dimension (``dims``: "n=1..64" strings or SymDims).

    Read from the flatbuffer (edgemem.schedule.symbolic: the -1 dims of the model, or its batch dim).
    Returns the report (also written, with the plan's C edgemem_plan.c/.h, to ``out_dir`` if given): the
    arena as an expression, a sweep comparing it with the concrete plan at each point, and the largest value
    that fits the board. Raises DoesNotFitError when even the lowest value of the range does not fit."""
    from .codegen.symbolic_c import render_plan_c
    from .plan.symbolic import concrete_plan_bytes
    from .plan.symbolic import plan_symbolic as place
    from .schedule.symbolic import SymDag, parse_dim, schedule_symbolic

    t0 = time.perf_counter()
    path = Path(model_path)
    if out_dir is not None:  # refused before the planning, not after it (checked again under the lock)
        check_replaceable(Path(out_dir), overwrite, path)
    board = board_with_budget(load_board(board_name), ram, flash)
    parsed = [parse_dim(d) if isinstance(d, str) else d for d in dims]
    dag = SymDag.from_tflite(path, parsed, board.arena_align)
    order, _, schedulers = schedule_symbolic(dag, schedule_seconds)
    plan = place(dag, order, board.arena_align)
    dim, budget = parsed[0], ram_budget(board)
    need = plan.peak_at(dag.symbols.lo_env)
    if need > budget:
        raise DoesNotFitError(
            f"{path.name} needs an arena of {need:,} bytes even at {dim.name}={dim.lo}, the lowest value of "
            f"--dim {dim.name}={dim.lo}..{dim.hi}, but board {board.name} has {budget:,} bytes of RAM left after its "
            f"{board.stack_size:,}-byte stack ({board.ram_bytes:,} B in all). Use a board with more RAM, a smaller "
            "model, or --ram to plan for a larger budget."
        )
    points = dag.symbols.sweep()
    sweep = []
    for env in points:
        plan.check(env)  # the independent checker on the evaluated offsets
        concrete = concrete_plan_bytes(dag.at(env), board.arena_align, schedule_seconds / len(points))
        arena = plan.peak_at(env)
        sweep.append({dim.name: env[dim.name], "symbolic_bytes": arena, "concrete_bytes": concrete,
                      "ratio": round(arena / concrete, 4) if concrete else 1.0, "fits": arena <= budget})  # fmt: skip
    info = {
        "schema": JSON_SCHEMA, "model": str(path.resolve()), "board": board.name, "ops": dag.n,
        "dims": {d.name: [d.lo, d.hi] for d in parsed},
        "scheduler": schedulers["best"],
        "schedulers_tried": {k: v for k, v in schedulers.items() if isinstance(v, dict) and "peak" in v},
        "planner": plan.algorithm, "planners_tried": plan.tried,
        "arena_expr": plan.peak_text(), "budget_bytes": budget,
        "largest_fitting": {dim.name: plan.largest_fitting(budget, dim.name)},
        "sweep": sweep, "comparisons": dict(dag.symbols.stats),
        "note": "symbolic path: schedule and arena plan only (kernels are compiled for concrete shapes); "
                "the plan's offsets are the C functions in edgemem_plan.c",
        "plan_seconds": round(time.perf_counter() - t0, 3),
    }  # fmt: skip
    if out_dir is not None:
        sources = render_plan_c(plan)

        def fill(project: Path) -> None:
            for name, text in sources.items():
                (project / name).write_text(text)
            (project / SYMBOLIC_INFO).write_text(json.dumps(info, indent=2) + "\n")

        write_atomically(Path(out_dir), overwrite, fill, path)
        info["files"] = sorted(sources)
    return info
