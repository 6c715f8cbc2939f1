"""The build's options, typed, in one place: the CLI and the Python API (api.py) both make them with
``user_options`` from what a user gives, and the pipeline reads only ``BuildOptions``."""

from __future__ import annotations

import math
from dataclasses import dataclass

from .errors import EdgememError

DEFAULT_OPT_SECONDS = 5.0
DEFAULT_SCHEDULE_SECONDS = 2.0
EARLY_STOP_MARGIN = 0.1  # the orchestrator stops once the arena is 10 % under the RAM budget (not with minimize)


@dataclass
class BuildOptions:
    ram: int | None = None  # override the board's RAM (bytes)
    flash: int | None = None  # override the board's flash (bytes)
    overwrite: bool = False  # replace an existing output directory
    compile: bool = True  # run arm-none-eabi-gcc
    pool_per_region: bool = False  # plan each board RAM region as its own pool (fast ones first)
    schedule_seconds: float = DEFAULT_SCHEDULE_SECONDS  # time budget of the operator schedulers
    profile: bool = False  # per-step reports over the UART, a seeded input in flash (`edgemem profile`)
    profile_seed: int = 0  # the seed of that input
    inplace: bool = True  # allow the in-place depthwise pass (TinyEngine's in-place)
    opt_seconds: float = DEFAULT_OPT_SECONDS  # time budget of the pass orchestrator (0: edgemem's fixed pass sequence)
    opt_seed: int = 0  # the orchestrator's seed (same seed, same passes)
    opt_margin: float = EARLY_STOP_MARGIN  # it stops once arena <= RAM budget * (1 - margin); 1.0: never early (minimize)
    max_slowdown: float | None = None  # percent: the least arena predicted at most that much slower (passes/objective.py)
    passes: tuple[str, ...] | None = None  # run exactly these catalogue passes, in order (no orchestrator)
    stack: int | str | None = None  # reserved stack: bytes, "auto" (call-graph bound + margin), None: the board's
    input_outside: bool = False  # the model inputs are the caller's buffers, not in the arena (ir/outside.py)
    patch_limit: float | None = None  # --patch-macs: a last, higher MAC limit of the patch fallbacks (fraction)
    plan_only: bool = False  # stop after the plan and write nothing (ways_out.py plans each way out of a refusal)
    ways_out_seconds: float = 0.0  # a refusal plans its ways out within this (ways_out.py; the CLI's --ways-time: 60)


def user_options(*, ram: int | None = None, flash: int | None = None, force: bool = False, pool_per_region: bool = False,
                 schedule_seconds: float = DEFAULT_SCHEDULE_SECONDS, opt_seconds: float | None = None,
                 minimize: bool = False, max_slowdown: float | None = None, passes: tuple[str, ...] | None = None,
                 profile: bool = False, stack: int | str | None = None, input_where: str = "arena",
                 patch_macs: float | None = None, ways_seconds: float = 0.0) -> BuildOptions:  # fmt: skip
    """The options of `edgemem build` as a user gives them (sizes in bytes, percentages), checked together."""
    check_objective(max_slowdown, minimize=minimize, passes=passes is not None, fixed=opt_seconds == 0)
    if patch_macs is not None and (passes is not None or opt_seconds == 0):
        raise EdgememError(f"--patch-macs adds a patch split the orchestrator tries when nothing else fits, but "
                           f"{'--passes' if passes is not None else '--opt-time 0'} runs one fixed sequence without "
                           "it. Drop one of them.")  # fmt: skip
    return BuildOptions(ram=ram, flash=flash, overwrite=force, pool_per_region=pool_per_region,
                        schedule_seconds=schedule_seconds, profile=profile, passes=passes,
                        opt_seconds=DEFAULT_OPT_SECONDS if opt_seconds is None else opt_seconds, stack=stack,
                        opt_margin=1.0 if minimize else EARLY_STOP_MARGIN,
                        max_slowdown=math.inf if minimize else max_slowdown,
                        input_outside=input_outside(input_where),
                        patch_limit=None if patch_macs is None else patch_macs / 100, ways_out_seconds=ways_seconds)  # fmt: skip


def input_outside(where: str) -> bool:
    """--input arena|outside: whether the model inputs are the caller's buffers."""
    if where not in ("arena", "outside"):
        raise EdgememError(f"--input {where!r} is not a place for the model input: give 'arena' (the default: the "
                           "input is written into the arena) or 'outside' (the caller's buffer, edgemem_run_from).")
    return where == "outside"


def check_objective(max_slowdown: float | None, *, minimize: bool, passes: bool, fixed: bool) -> None:
    """--max-slowdown and --minimize choose among the orchestrator's candidates: one of them, and only with it."""
    given = "--max-slowdown" if max_slowdown is not None else "--minimize" if minimize else None
    if given is None:
        return
    if max_slowdown is not None and minimize:
        raise EdgememError("--max-slowdown and --minimize cannot be used together: --minimize takes the least arena "
                           "whatever the slowdown (an unbounded --max-slowdown). Give one of them.")  # fmt: skip
    if passes or fixed:
        raise EdgememError(f"{given} chooses among the memory-pass sequences the orchestrator tries, but "
                           f"{'--passes' if passes else '--opt-time 0'} runs one fixed sequence: there is nothing to "
                           f"choose from. Drop {'--passes' if passes else '--opt-time 0'} or {given}.")  # fmt: skip
