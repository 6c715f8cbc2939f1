"""The arena plan of a lowered model on a board: the planner's buffers from the operator graph and its
schedule, the board's pools, the plan (checked by the independent checker), and what a profiling build
must then measure step by step.

    graph_buffers(graph, schedule, align)          live ranges (edgemem.memory) -> planner buffers
    board_pools(board, per_region)                 one pool, or one per RAM region QEMU has
    plan_graph(graph, schedule, board, ...)        plan + check, or DoesNotFitError saying what was tried
    predicted_steps(graph, schedule, buffers, plan, seed)   per-step live bytes and high-water marks
"""

from __future__ import annotations

from ..errors import DoesNotFitError
from . import ArenaPlan, Buffer, PlanError, Pool, check_plan, plan_arena

# Room left in the default region for .data/.bss (runtime buffers, kernels' and model's variables) when planning
# per-region pools before the firmware is linked: an estimate. The build then links, and if the default region
# overflows it plans again with the linker's figure (pipeline.py, target/link_use.py); a plan refused with the
# estimate is tried again with none, so the estimate never refuses a model that fits.
STATIC_RESERVE = 1024
SECTION_ALIGN = 16  # the linker script's arena sections are ALIGN(16): a pool takes its size rounded up to this


def graph_buffers(graph, schedule, align: int) -> list[Buffer]:
    """One planner buffer per storage tensor, live over its range in the schedule's order (also what the pass
    orchestrator measures candidates with: schedule/liveness.arena_buffers)."""
    from ..schedule.liveness import arena_buffers

    return arena_buffers(graph, schedule.order, align)


def board_pools(board, per_region: bool, static_bytes: int = STATIC_RESERVE) -> list[Pool]:
    """One pool over the default (merged, contiguous) RAM, or one pool per board RAM region; the default
    region's pool has what the stack and ``static_bytes`` (.data, .bss, padding) leave."""
    if not per_region:
        return [Pool("arena", 1 << 40)]  # unbounded: the bytes needed are reported, then compared
    pools = []
    for r in board.ram:
        if not r.qemu:
            continue  # the image also runs under QEMU, which does not have this region
        reserve = board.stack_size + static_bytes if r is board.default_ram else 0
        pools.append(Pool(r.name, max(0, r.size - reserve) // SECTION_ALIGN * SECTION_ALIGN, r.speed))
    return pools


def _tried(figures: dict) -> str:
    return ", ".join(f"{name} {size:,} B" for name, size in figures.items())


def plan_graph(graph, schedule, board, model_name: str, per_region: bool, ram_budget: int,
               schedulers: dict | None = None, static_bytes: int | None = None) -> tuple[list[Buffer], ArenaPlan]:  # fmt: skip
    """The arena plan of ``graph`` in ``schedule``'s order on ``board``, checked by the independent checker;
    DoesNotFitError (with every order and placement tried) when it exceeds ``ram_budget``. ``static_bytes``: the
    static RAM the linker measured in the default region (None: not linked yet, STATIC_RESERVE, then none)."""
    buffers = graph_buffers(graph, schedule, board.arena_align)
    orders = f"Operator orders tried (peak bytes): {_tried(schedulers or {})}."
    for static in (STATIC_RESERVE, 0) if static_bytes is None else (static_bytes,):
        pools = board_pools(board, per_region, static)
        try:
            plan = plan_arena(buffers, pools)
            break
        except PlanError as e:
            error = e
    else:
        measured = "" if static_bytes is None else f" (the default region less the firmware's {static_bytes:,} B of static data)"
        raise DoesNotFitError(
            f"{model_name} does not fit the RAM regions of board {board.name}{measured}: {error} {orders}") from error
    if not per_region and plan.total_bytes > ram_budget:
        err = DoesNotFitError(
            f"{model_name} needs an arena of {plan.total_bytes:,} bytes (lower bound {plan.lower_bound:,} B "
            f"for the {schedule.scheduler} operator order) but board {board.name} has {ram_budget:,} bytes of RAM left "
            f"after its {board.stack_size:,}-byte stack ({board.ram_bytes:,} B in all). Best plan found: the "
            f"{schedule.scheduler} order placed by {plan.algorithm}, {plan.total_bytes:,} B. {orders} Placements "
            f"tried (arena bytes): {_tried(plan.tried)}. Use a board with more RAM, a smaller model, or --ram to "
            "plan for a larger budget."
        )
        err.plan, err.buffers = plan, buffers  # the best plan found: the refusal's report draws it
        raise err
    check_plan(buffers, plan, pools)  # the independent checker runs on every plan
    return buffers, plan


def predicted_steps(graph, schedule, buffers: list[Buffer], plan: ArenaPlan, seed: int) -> dict:
    """What a profiling build must measure, step by step: the bytes live during the step (the storage model's
    curve, edgemem.memory) and, per pool, the high-water mark (highest planned byte written so far; graph
    inputs count from the start)."""
    from ..memory import curve

    pools = list(plan.pool_sizes)
    live = curve(buffers, len(schedule.order))
    steps = []
    for s, op_index in enumerate(schedule.order):
        op = graph.ops[op_index]
        hw = dict.fromkeys(pools, 0)
        for b in buffers:
            if b.first <= s:
                place = plan.placements[b.name]
                hw[place.pool] = max(hw[place.pool], place.offset + b.size)
        steps.append({"step": s, "op": op.name, "kind": op.kind, "live_bytes": live[s],
                      "high_water_bytes": [hw[p] for p in pools]})  # fmt: skip
    return {"seed": seed, "pools": pools, "steps": steps}
