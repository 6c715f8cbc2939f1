"""The ways out of a refusal (exit 5, issue 33): each alternative planned by the build's own stages, not guessed.

    plan_ways_out(model_path, board_name, options, error) -> dict   {"ways": [...], "not_tried": [...], ...}

A way out is a change of the build's options that a user makes with flags: the model input outside the arena
(``--input outside``), the stack sized from the call graph (``--stack auto``), one arena pool per RAM region
(``--pool-per-region``), the patch split allowed more recomputation (``--patch-macs``), those together, and the
smallest shipped board that fits (``--board``). Each is planned with pipeline.plan_only -- check, import, lower,
memory passes, graph, schedule, plan, exactly what ``edgemem build`` with its flags runs before the kernels -- so
its arena is the one the build takes (the searches are time-bounded: on a loaded machine a rebuild may find
another plan; tests/test_refusal.py rebuilds each way and compares). Its cost: the MACs and the instructions the
objective predicts (passes/objective.py) for the pass sequence taken, and its slowdown against the fastest
sequence tried for the same options (what ``--max-slowdown`` measures).

"fits" is what the link will check, before linking: the plan's arena in the default RAM region (its pool, with
pools per region) plus the firmware's static data -- estimated as the plan's own reserve for the runtime
(graph_plan.STATIC_RESERVE) and, with the input outside, the runner's input buffers -- within the region less the
stack. The shipped boards are tried in the order of their RAM: the default region, and, for a board of several
regions, all of them as pools (``--pool-per-region``).
The planning is bounded by ``options.ways_out_seconds`` (checked before each way: one that starts in time runs
to its end); the ways not planned are listed as such, never given a figure.
"""

from __future__ import annotations

import dataclasses
import shlex
import time
from pathlib import Path

from .errors import DoesNotFitError, EdgememError
from .options import DEFAULT_OPT_SECONDS, DEFAULT_SCHEDULE_SECONDS
from .passes.objective import percent_slower

# --patch-macs offered as a way out: more recomputation than the orchestrator's own limits (optimize.PATCH_LIMITS)
HIGHER_PATCH_LIMIT = 0.5


def plan_ways_out(model_path: Path, board_name: str, options, error: DoesNotFitError) -> dict:
    """The ways out of ``error`` (a refused build of ``model_path`` for ``board_name`` with ``options``), each
    planned (see the module doc), within ``options.ways_out_seconds``."""
    from .board import load_board

    if options.ways_out_seconds <= 0:
        return {"ways": [], "not_tried": [], "seconds": 0.0, "budget_seconds": 0.0, "fastest_instructions": None}
    board = load_board(board_name)
    started = time.perf_counter()
    deadline = started + options.ways_out_seconds
    ways, not_tried = [], []
    candidates = _option_ways(board, options)
    tried = [(_try(label, model_path, board_name, changed, options, deadline, ways, not_tried, board_name), changed)
             for label, changed in candidates]  # fmt: skip
    # together: those that never cost arena (pools per region may: a tensor larger than any one region)
    together = {k: v for _, c in candidates for k, v in c.items() if k != "pool_per_region"}
    if len(together) > 1 and not any(w["fits"] for w in ways):
        label = "those together" if len(together) == len(candidates) else "all but the pools together"
        tried.append((_try(label, model_path, board_name, together, options, deadline, ways, not_tried, board_name),
                      together))  # fmt: skip
    if not _try_boards(model_path, board, options, {}, deadline, ways, not_tried):
        best = _least_arena(tried)
        if best:  # the boards again with the flags of the least arena planned here (the fewest of equal arenas)
            _try_boards(model_path, board, options, best, deadline, ways, not_tried)
    fastest = [w["fastest_instructions"] for w in ways if w.get("fastest_instructions")]
    for w in ways:  # one reference for all: the searches are time-bounded, each found its own fastest
        if w["instructions"] is not None and fastest:
            w["slowdown_percent"] = round(percent_slower(w["instructions"], min(fastest)), 2)
    return {"ways": ways, "not_tried": not_tried, "seconds": round(time.perf_counter() - started, 3),
            "budget_seconds": options.ways_out_seconds, "fastest_instructions": min(fastest) if fastest else None}


def _least_arena(tried: list) -> dict:
    """Of (way, option changes), the changes whose plan had the least arena (of equal arenas, the fewest changes);
    {} if none was planned."""
    planned = [(w["arena_bytes"], len(c), i) for i, (w, c) in enumerate(tried) if w and w["arena_bytes"] is not None]
    return tried[min(planned)[2]][1] if planned else {}


def _option_ways(board, options) -> list[tuple[str, dict]]:
    """(what, the options it changes) for each flag the refused build did not already have."""
    out = []
    if not options.input_outside:
        out.append(("the model input outside the arena (your buffer)", {"input_outside": True}))
    if options.stack != "auto":
        out.append(("the stack sized from the firmware's call graph", {"stack": "auto"}))
    if not options.pool_per_region and options.ram is None and len([r for r in board.ram if r.qemu]) > 1:
        out.append(("one arena pool per RAM region", {"pool_per_region": True}))
    if options.passes is None and options.opt_seconds > 0 and (options.patch_limit or 0) < HIGHER_PATCH_LIMIT:
        out.append((f"patches allowed {HIGHER_PATCH_LIMIT:.0%} more MACs", {"patch_limit": HIGHER_PATCH_LIMIT}))
    return out


def _try_boards(model_path: Path, board, options, changes: dict, deadline: float, ways: list, not_tried: list) -> bool:
    """The shipped boards with more RAM left than ``board``'s, smallest first, with ``changes``, until one fits
    (--ram is dropped: it stands for the board's own RAM); whether one did."""
    from .board import list_boards, load_board
    from .budget import ram_budget, with_stack

    own = ram_budget(with_stack(board, options.stack)) if options.ram is None else options.ram - board.stack_size
    others = []
    for name in list_boards():
        try:
            other = with_stack(load_board(name), changes.get("stack", options.stack))
            room = ram_budget(other)  # a board without a QEMU stand-in is not built
        except (EdgememError, ValueError, KeyError):
            continue
        regions = [r for r in other.ram if r.qemu]
        if name == board.name:
            continue
        if room > own:
            others.append((room, name, {}))
        whole = sum(r.size for r in regions) - other.stack_size
        if len(regions) > 1 and not options.pool_per_region and whole > max(room, own):  # all its RAM, as pools
            others.append((whole, name, {"pool_per_region": True}))
    for room, name, pools in sorted(others, key=lambda o: o[:2]):
        way = _try(f"board {name} ({room:,} B of RAM {'in its regions ' if pools else ''}after the stack)", model_path,
                   name, {**changes, **pools, "ram": None}, options, deadline, ways, not_tried, board.name)  # fmt: skip
        if way is None or way["fits"]:
            return way is not None
    return False


def _try(label: str, model_path: Path, board_name: str, changes: dict, options, deadline: float, ways: list,
         not_tried: list, refused_board: str) -> dict | None:  # fmt: skip
    """Plan one way out and append what it gives to ``ways`` (or, past the deadline, its name to ``not_tried``)."""
    from .pipeline import plan_only

    opts = dataclasses.replace(options, **changes)
    command = command_line(model_path, board_name, opts)
    flags, dropped = _flags(opts, options, board_name, refused_board)
    if time.perf_counter() >= deadline:
        not_tried.append({"way": label, "flags": flags, "command": command})
        return None
    t0 = time.perf_counter()
    way = {"way": label, "board": board_name, "flags": flags, "without": dropped, "command": command,
           "arena_bytes": None, "floor_bytes": None, "static_estimate_bytes": None, "fits": False, "macs": None, "instructions": None,
           "slowdown_percent": None, "passes": None, "refusal": None}  # fmt: skip
    try:
        result = plan_only(model_path, board_name, opts)
    except DoesNotFitError as e:  # refused: its best plan's arena when it got that far, else its floor
        way["refusal"] = str(e)
        way["arena_bytes"] = getattr(e, "arena_bytes", None)
        way["floor_bytes"] = getattr(e, "floor_bytes", None)
        if getattr(e, "pareto", None):
            way.update(_costs(e.pareto, None))
    except EdgememError as e:  # e.g. --input outside with resource variables: not a way out for this model
        way["refusal"] = str(e)
    else:
        info = result.info
        way.update(arena_bytes=info.arena_bytes, macs=sum(int(op.macs) for op in result.graph.ops))
        way.update(_costs(info.pareto, result.graph))
        # the default region holds its pool and the firmware's static data: what the link will check
        in_default = info.arena_pools.get(result.board.default_ram.name, 0) if opts.pool_per_region else info.arena_bytes
        way["static_estimate_bytes"] = _static_estimate(result, opts)
        way["fits"] = in_default + way["static_estimate_bytes"] <= _ram_left(board_name, opts)
    way["ram_left_bytes"] = _ram_left(board_name, opts)
    way["seconds"] = round(time.perf_counter() - t0, 3)
    ways.append(way)
    return way


def _ram_left(board_name: str, opts) -> int | None:
    """The default RAM region less the stack, with the way's --ram/--stack (budget.ram_budget)."""
    from .board import load_board
    from .budget import board_with_budget, ram_budget, with_stack

    try:
        return ram_budget(with_stack(board_with_budget(load_board(board_name), opts.ram, opts.flash), opts.stack))
    except EdgememError:
        return None


def _static_estimate(result, opts) -> int:
    """The firmware's static data in the default region, before it is linked: the runtime's (the plan's own
    reserve, graph_plan.STATIC_RESERVE) and, with the input outside, the runner's input buffers (host_main.c:
    NUM_INPUTS x the largest input, aligned), which the arena no longer holds."""
    from .plan.graph_plan import STATIC_RESERVE

    if not opts.input_outside:
        return STATIC_RESERVE
    align = result.board.arena_align
    sizes = [result.graph.tensors[n].nbytes for n in result.graph.inputs]
    return STATIC_RESERVE + len(sizes) * (-(-max(sizes, default=0) // align) * align)


def _costs(pareto: dict | None, graph) -> dict:
    """MACs, predicted instructions and slowdown of the pass sequence taken (the objective's figures; without
    the orchestrator, the instruction model on the planned graph and no slowdown)."""
    if pareto and pareto.get("taken"):
        taken = pareto["taken"]
        fastest = min(p["instructions"] for p in pareto["points"])
        return {"macs": taken["macs"], "instructions": taken["instructions"], "passes": taken["sequence"],
                "fastest_instructions": fastest,
                "slowdown_percent": round(percent_slower(taken["instructions"], fastest), 2)}  # fmt: skip
    from .passes.objective import InstructionModel

    return {"instructions": int(InstructionModel.load().predict_graph(graph))}


def _size(n: int) -> str:
    for unit, scale in (("M", 1 << 20), ("K", 1 << 10)):
        if n % scale == 0:
            return f"{n // scale}{unit}"
    return str(n)


def option_flags(options) -> list[str]:
    """The `edgemem build` flags that give ``options`` (pipeline.BuildOptions), as the CLI reads them."""
    import math

    f = []
    if options.ram is not None:
        f += ["--ram", _size(options.ram)]
    if options.flash is not None:
        f += ["--flash", _size(options.flash)]
    if options.pool_per_region:
        f.append("--pool-per-region")
    if options.schedule_seconds != DEFAULT_SCHEDULE_SECONDS:
        f += ["--schedule-time", f"{options.schedule_seconds:g}"]
    if options.opt_seconds != DEFAULT_OPT_SECONDS:
        f += ["--opt-time", f"{options.opt_seconds:g}"]
    if options.max_slowdown is not None and math.isinf(options.max_slowdown):
        f.append("--minimize")
    elif options.max_slowdown is not None:
        f += ["--max-slowdown", f"{options.max_slowdown:g}"]
    if options.passes is not None:
        f += ["--passes", ",".join(options.passes)]
    if options.patch_limit is not None:
        f += ["--patch-macs", f"{100 * options.patch_limit:g}"]
    if options.stack is not None:
        f += ["--stack", options.stack if options.stack == "auto" else str(options.stack)]
    if options.input_outside:
        f += ["--input", "outside"]
    return f


def _pairs(flags: list[str]) -> list[tuple[str, ...]]:
    """Each flag with its value, if it takes one."""
    out, i = [], 0
    while i < len(flags):
        takes = i + 1 < len(flags) and not flags[i + 1].startswith("--")
        out.append(tuple(flags[i : i + 2] if takes else flags[i : i + 1]))
        i += 2 if takes else 1
    return out


def _flags(new, old, board_name: str, old_board: str) -> tuple[list[str], list[str]]:
    """The flags that take ``new`` from the refused build's ``old`` options: those to add (--board first when it
    changes), and the names of those to drop (--ram for another board)."""
    have, want = _pairs(option_flags(old)), _pairs(option_flags(new))
    added = [x for p in want if p not in have for x in p]
    dropped = [p[0] for p in have if p[0] not in {q[0] for q in want}]
    return (["--board", board_name] if board_name != old_board else []) + added, dropped


def command_line(model_path: Path, board_name: str, options) -> str:
    """The whole `edgemem build` command of a way out (quoted for a POSIX shell; -o and --force left out)."""
    return shlex.join(["edgemem", "build", "--board", board_name, str(model_path), *option_flags(options)])
