"""The memory-pass stage of the build: which catalogue passes run on the lowered module, and in what order.

    optimize(mod, board, options)   the orchestrator's search, the user's --passes, or the fixed sequence
    floor_passes(options)           the passes that may run, for the early floor check (budget.check_floor)

Each returns, next to the module, a report of what each pass did (edgemem.json "passes").
"""

from __future__ import annotations

import math
import time

def floor_passes(options) -> tuple[str, ...]:
    """The catalogue passes the build may run: the user's ``--passes``, all of them when the orchestrator
    searches, else edgemem's fixed sequence (the in-place ones only with ``inplace``)."""
    from .catalogue import catalogue
    from .orchestrate import DEFAULT_SEQUENCE

    if options.passes is not None:
        return tuple(options.passes)
    names = [p.name for p in catalogue()] if options.opt_seconds > 0 else list(DEFAULT_SEQUENCE)
    return tuple(n for n in names if options.inplace or not n.startswith("inplace"))


def inplace_kinds() -> frozenset[str]:
    """The operator kinds the in-place passes may run in place (from their own floor declarations)."""
    from ..memory import Overlap
    from .catalogue import catalogue, floor_capabilities

    caps = floor_capabilities([p.name for p in catalogue() if p.name.startswith("inplace")])
    return frozenset(k for c in caps if isinstance(c, Overlap) for k in c.kinds)


def optimize(mod, board, options, ram_budget: int):
    """The memory passes on the lowered module: the orchestrator (passes/orchestrate.py) within
    ``opt_seconds``, stopping once the arena fits ``ram_budget`` with ``opt_margin`` to spare (searching on
    under a slowdown bound: ``max_slowdown``), then taking by the memory/latency objective
    (passes/objective.py) among every sequence it tried: the fewest predicted instructions that fit, or
    the least arena within the bound -- refused with a clear error when that arena does not fit; else the user's
    ``--passes``; else edgemem's fixed sequence (orchestrate.DEFAULT_SEQUENCE: PAD folding, then in-place
    depthwise, which folding enables, the residual ADD fused into its convolution over the skip, then in-place
    element-wise; the in-place ones only with ``inplace``).
    Returns the module and what each pass did (with the baselines when
    orchestrated)."""
    if options.passes is not None:
        return run_passes(mod, options.passes)
    if options.opt_seconds > 0:
        return _orchestrate(mod, board, options, ram_budget)
    from .orchestrate import DEFAULT_SEQUENCE

    names = tuple(n for n in DEFAULT_SEQUENCE if options.inplace or not n.startswith("inplace"))
    mod, report = run_passes(mod, names)
    del report["given"]
    return mod, report


def run_passes(mod, names: tuple[str, ...]):
    """A pass sequence, each pass by its catalogue name (the user's ``--passes``), ``patches`` first."""
    from ..errors import EdgememError
    from .catalogue import catalogue

    known = {p.name: p for p in catalogue()}
    unknown = [n for n in names if n not in known]
    if unknown:
        raise EdgememError(f"unknown memory pass {', '.join(map(repr, unknown))} in --passes; the passes are: "
                           f"{', '.join(known)}.")  # fmt: skip
    report = []
    # the split first: after an in-place pass a fused residual ends the stage sooner (passes/patches.py), so the
    # position of `patches` in the list would decide the split (issue 33)
    names = tuple(sorted(names, key=lambda n: n != "patches"))
    for name in names:
        new = known[name](mod)
        report.append({"pass": name, "changed": not new.same_as(mod)})
        mod = new
    return mod, {"sequence": report, "given": True}


def max_slowdown(options) -> float | None:
    """The objective's bound (passes/objective.py): the user's --max-slowdown; ``--minimize`` (an
    ``opt_margin`` of 1.0: never stop early) is an unbounded one; None: the fewest instructions that fit."""
    if getattr(options, "max_slowdown", None) is not None:
        return options.max_slowdown
    return math.inf if options.opt_margin >= 1.0 else None


def _orchestrate(mod, board, options, ram_budget: int):
    started = time.perf_counter()  # the stage's deadline counts its setup too
    from .catalogue import catalogue
    from .orchestrate import DEFAULT_SEQUENCE, measure, orchestrate

    bound = max_slowdown(options)
    passes = [p for p in catalogue() if options.inplace or not p.name.startswith("inplace")]
    result = orchestrate(mod, passes, seed=options.opt_seed, time_budget=options.opt_seconds,  # a bound: search on
                         target_bytes=ram_budget, margin=1.0 if bound is not None else options.opt_margin,
                         baselines=("none", "tvm_default", "fixed"), fixed_sequence=DEFAULT_SEQUENCE,
                         measure_fn=lambda m: measure(m, board.arena_align, options.schedule_seconds),
                         pareto=True, max_slowdown=bound, fallbacks=work_adding(passes, getattr(options, "patch_limit", None)), started=started)  # fmt: skip
    if bound is not None and not result.fits:
        _refuse_slowdown(result.pareto, ram_budget, bound)
    report = result.report()
    report["sequence"] = [{"pass": s.pop("name"), **s} for s in report["sequence"]]
    fixed = [n for n in DEFAULT_SEQUENCE if n in {p.name for p in passes}]
    done = result.baselines["fixed"]["sequence"] if "fixed" in result.baselines else [s["pass"] for s in report["sequence"]]
    if len(done) < len(fixed):  # the stage's deadline cut the fixed sequence (issue 30): the plan's refusal says so
        report["fixed_cut"] = fixed[len(done) :]
    return result.module, {**report, "baselines": result.baselines}


# the patch pass's MAC limits tried in turn when nothing else fits (None: its own default, 5 % with the input in
# the arena, 10 % outside); each trial costs seconds, and a larger limit only adds work
PATCH_LIMITS = (None, 0.10, 0.20)


def work_adding(passes, higher_limit: float | None = None) -> list:
    """The orchestrator's fallbacks (orchestrate ``fallbacks``): rematerialization after the fixed sequence, then a
    patch split (rolling rows included) at each of PATCH_LIMITS followed by the in-place passes -- the sequence an
    expert gives (``--passes fold_pad,patches,inplace_...``), tried when no sequence without added work fits;
    ``higher_limit`` (``--patch-macs``) a last limit beyond those."""
    from .orchestrate import DEFAULT_SEQUENCE, Variant
    from .patches import FINISH, patches

    known = {p.name: p for p in passes}
    out = []
    if "remat" in known:
        out.append(("remat", [known[n] for n in (*DEFAULT_SEQUENCE, "remat") if n in known]))
    if "patches" not in known:
        return out
    finish = [known[n] for n in FINISH if n in known]
    limits = PATCH_LIMITS + ((higher_limit,) if higher_limit and higher_limit > max(PATCH_LIMITS[1:]) else ())
    for limit in limits:
        label = "patches" if limit is None else f"patches[<= {limit:.0%} MACs]"
        split = known["patches"] if limit is None else Variant(label, lambda m, limit=limit: patches(m, limit))
        out.append((label, [split, *finish]))
    return out


def _refuse_slowdown(pareto: dict, budget: int, bound: float) -> None:
    """--max-slowdown and the RAM budget cannot both hold: say what each would take. (When no candidate
    fits at all, the plan stage refuses the build as without the bound.)"""
    from ..errors import DoesNotFitError
    from .objective import percent_slower

    fitting = [p for p in pareto["points"] if p["arena_bytes"] <= budget]
    if not fitting:
        return
    fastest = min(p["instructions"] for p in pareto["points"])  # the fastest candidate is on the front
    best = min(fitting, key=lambda p: p["instructions"])
    need = math.ceil(100 * percent_slower(best["instructions"], fastest)) / 100  # rounded up to 0.01 %
    taken = pareto["taken"]
    raise DoesNotFitError(
        f"no memory-pass sequence meets both the RAM budget and --max-slowdown {bound:g}: the least arena predicted "
        f"at most {bound:g} % slower than the fastest candidate is {taken['arena_bytes']:,} B, more than the "
        f"{budget:,} B of RAM left after the stack; the fastest that fits ({best['arena_bytes']:,} B, passes "
        f"{', '.join(best['sequence']) or 'none'}) is predicted {need:g} % slower. Allow --max-slowdown {need:g} "
        f"or more, or give more RAM (--ram)."
    )
