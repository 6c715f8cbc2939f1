"""The `edgemem` command: arguments in, one pipeline call, a report out. Nothing else lives here.

Every command runs under ``@_errors``: an EdgememError becomes one `error:` paragraph and its exit code, any
other exception an `internal error:` line (the traceback only with --debug), never a half-written output. Under
--json every output, a failure's too, is one JSON object on stdout with a top-level "schema" (README "JSON output").
"""

from __future__ import annotations

import functools
import json
import math
import re
import signal
import sys
from pathlib import Path
from typing import Callable, Optional

import typer
from rich.console import Console
from rich.markup import escape
from rich.table import Table
from typer.core import TyperGroup

from .build_info import JSON_SCHEMA, BuildInfo
from .errors import KINDS, DeviceError, DoesNotFitError, EdgememError, UnsupportedModelError
from .options import BuildOptions, input_outside, user_options
from .project_dir import Interrupted
from .sizes import parse_size


class _Commands(TyperGroup):
    """edgemem's commands. A usage error (unknown option, bad value, missing argument) is reported by typer before
    the command runs, so ``@_errors`` never sees it: under --json it also gets its JSON error on stdout here."""

    def main(self, args=None, *rest, **kwargs):
        argv = list(sys.argv[1:] if args is None else args)
        given = argv[: argv.index("--")] if "--" in argv else argv  # after "--" only arguments (a file "--json")
        _ARGV["json"] = "--json" in given
        return super().main(argv, *rest, **kwargs)

    def invoke(self, ctx):
        try:
            return super().invoke(ctx)
        except typer.TyperException as exc:  # typer's UsageError and its subclasses (BadParameter, NoSuchOption)
            if _ARGV["json"] and hasattr(exc, "format_message"):
                _json_error(getattr(exc, "exit_code", 2), exc.format_message())
            raise


app = typer.Typer(cls=_Commands, add_completion=False, no_args_is_help=True, pretty_exceptions_enable=False, help="Deploy a .tflite model to a microcontroller in the least RAM.")
out = Console()
err = Console(stderr=True)

_DEBUG = {"on": False}
_ARGV = {"json": False}  # --json among the arguments of this invocation (_Commands.main)
_CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f]")  # all but newline and tab: ANSI escapes, bells, CR


def _text(value) -> str:
    """A value a model, board file, path or tool supplied, for the console: its rich markup escaped (never read as
    styles), its control characters spelled \\xNN (a name cannot drive the terminal with escape sequences)."""
    return escape(_CONTROL.sub(lambda m: f"\\x{ord(m.group()):02X}", str(value)))


def _fail(exc: BaseException, as_json: bool = False) -> None:
    """One paragraph and a distinct exit code (and, with --json, the JSON error); the traceback only with --debug."""
    if _DEBUG["on"]:
        raise exc
    if isinstance(exc, EdgememError):
        _refuse(exc, as_json)
    message = f"{type(exc).__name__}: {exc}. This is a bug in edgemem; rerun with --debug for the traceback and report it."
    if as_json:
        _json_error(1, f"internal error: {message}")
    err.print(f"[bold red]internal error:[/] {_text(message)}", highlight=False, soft_wrap=True)
    raise typer.Exit(1)


def _refuse(exc: EdgememError, as_json: bool = False) -> None:
    """Exit with ``exc``'s code after its paragraph on stderr (and, with --json, its JSON error on stdout: a
    refused build's ``ways_out`` beside the message, ways_out.py)."""
    if as_json:
        ways = getattr(exc, "ways_out", None)
        extra = {"arena_bytes": getattr(exc, "arena_bytes", None), "ways_out": ways} if ways else {}
        _json({"error": {**_error_fields(exc.exit_code, str(exc)), **extra}})
    _say(exc)
    raise typer.Exit(exc.exit_code)


def _say(exc: EdgememError) -> None:
    # escaped: messages quote key paths ("[core].cpu") and user values, which rich would read as markup
    err.print(f"[bold red]error:[/] {_text(exc)}", highlight=False, soft_wrap=True)


def _interrupted(exc: BaseException, as_json: bool = False) -> None:
    """Stopped by a signal: say so (the output directory is never half-written: project_dir.OutputDir)."""
    signum = getattr(exc, "signum", signal.SIGINT)
    message = (f"interrupted ({signal.Signals(signum).name}): stopped; an output directory being written was left as "
               "it was before (or, if the signal came as it was swapped in, complete).")  # fmt: skip
    if as_json:
        _json_error(128 + signum, message)
    err.print(f"[bold red]interrupted[/]{_text(message.removeprefix('interrupted'))}", highlight=False, soft_wrap=True)
    raise typer.Exit(128 + signum)


def _errors(command):
    """The command, with every failure reported by _fail (typer's own exits and usage errors pass through)."""

    @functools.wraps(command)
    def guarded(*args, **kwargs):
        as_json = bool(kwargs.get("as_json"))
        try:
            return command(*args, **kwargs)
        except (typer.Exit, typer.Abort, typer.TyperException):
            raise
        except (KeyboardInterrupt, Interrupted) as exc:  # SIGINT/SIGTERM: a message and 128 + the signal
            _interrupted(exc, as_json)
        except Exception as exc:  # noqa: BLE001 - every failure becomes one message
            _fail(exc, as_json)

    return guarded


def _error_fields(exit_code: int, message: str) -> dict:
    """The "error" of a JSON output: the exit code, its kind (errors.KINDS; 128 + N: a signal) and the paragraph."""
    kind = KINDS.get(exit_code, "interrupted" if exit_code > 128 else "error")
    return {"exit_code": exit_code, "kind": kind, "message": message}


def _json_error(exit_code: int, message: str) -> None:
    _json({"error": _error_fields(exit_code, message)})


def _finish(result: dict, as_json: bool, show: Callable[[], None], failure: EdgememError | None = None) -> None:
    """A command's result: one JSON object on stdout (with its "error" when the verdict is a failure) or the
    tables (``show``); then a failure's paragraph on stderr and its exit code."""
    if as_json:
        _json({**result, **({"error": _error_fields(failure.exit_code, str(failure))} if failure else {})})
    else:
        show()
    if failure is not None:
        _say(failure)
        raise typer.Exit(failure.exit_code)


class _StageStatus:
    """The build's status on stderr: a spinner naming the running stage, then one line per finished stage
    with its time (pipeline.Stages calls it). Silent with --json, where stdout carries the one JSON object."""

    def __init__(self, console: Console, quiet: bool):
        self.console, self.quiet, self.status = console, quiet, None

    def __call__(self, stage: str, seconds: float | None) -> None:
        if self.quiet:
            return
        if seconds is None:
            if self.status is None:
                self.status = self.console.status(f"{stage} ...")
                self.status.start()
            else:
                self.status.update(f"{stage} ...")
        else:
            self.console.print(f"  [green]done[/] {stage:<14} {seconds:7.2f} s", highlight=False)

    def __enter__(self) -> _StageStatus:
        return self

    def __exit__(self, *exc) -> None:
        if self.status is not None:
            self.status.stop()


def _print_version(value: bool) -> None:
    if value:
        from .version import package_version

        sys.stdout.write(f"edgemem {package_version()}\n")
        raise typer.Exit()


@app.callback()
def main(
    debug: bool = typer.Option(False, "--debug", help="Show Python tracebacks."),
    version: bool = typer.Option(False, "--version", is_eager=True, callback=_print_version, help="Print edgemem's version and exit."),
) -> None:
    _DEBUG["on"] = debug


def _size(text: Optional[str]) -> Optional[int]:
    """A --ram/--flash value with its unit (320K, 320KiB, 1M, 0x50000 or bytes); a usage error otherwise."""
    if text is None:
        return None
    try:
        return parse_size(text)
    except ValueError as exc:
        raise typer.BadParameter(str(exc)) from None


def _percent(text: Optional[str]) -> Optional[float]:
    """--max-slowdown: a percentage (5, 2.5, 10%), finite and not negative; a usage error otherwise."""
    if text is None:
        return None
    try:
        value = float(str(text).strip().rstrip("%").strip())
    except ValueError:
        raise typer.BadParameter(f"{text!r} is not a percentage: give a number such as 5 or 2.5 (percent more "
                                 "predicted instructions than the fastest candidate).") from None  # fmt: skip
    if not math.isfinite(value) or value < 0:
        raise typer.BadParameter(f"{text!r} is not an allowed slowdown: give a finite percentage >= 0 (0: no slower "
                                 "than the fastest candidate; --minimize for any slowdown).") from None  # fmt: skip
    return value


def _seconds(text, *, zero: bool) -> Optional[float]:
    """A time option: a finite number of seconds, > 0 (or >= 0 where ``zero``); NaN would never time out."""
    if text is None:
        return None
    try:
        value = float(str(text).strip().removesuffix("s"))
    except ValueError:
        raise typer.BadParameter(f"{text!r} is not a number of seconds (give e.g. 30 or 2.5).") from None
    if not math.isfinite(value) or value < 0 or (value == 0 and not zero):
        raise typer.BadParameter(f"{text!r} is not a usable time: give a finite number of seconds "
                                 f"{'>= 0' if zero else '> 0'}, e.g. 30.")  # fmt: skip
    return value


def _timeout(text) -> Optional[float]:
    return _seconds(text, zero=False)


def _budget_seconds(text) -> Optional[float]:
    return _seconds(text, zero=True)


def _stack(text: Optional[str]):
    """--stack: "auto" or a size with its unit (4K, 8192)."""
    if text is None or text.strip().lower() == "auto":
        return None if text is None else "auto"
    return _size(text)


def _kib(n: int | None) -> str:
    return "-" if n is None else f"{n:,} B ({n / 1024:.1f} KiB)"


def _print_build(info: BuildInfo) -> None:
    t = Table(title=_text(f"{info.model_name} on {info.board}"), show_header=False)
    t.add_row("arena (planned)", _kib(info.arena_bytes) + _text(f"  planner: {info.planner}"))
    for pool, size in info.arena_pools.items():
        t.add_row(_text(f"  pool {pool}"), _kib(size))
    if info.input_outside:
        t.add_row("input outside arena", f"{info.input_outside['bytes']:,} B, in the caller's buffer (edgemem_run_from); not counted in the arena")
    t.add_row("lower bound", _kib(info.lower_bound_bytes) + _text(f"  ({info.scheduler} order)"))
    t.add_row("operator orders tried", _text(", ".join(f"{k}\u00a0{v:,}\u00a0B" for k, v in info.schedulers_tried.items())))  # no break inside
    if info.passes:
        t.add_row("memory passes", _text(_passes_line(info.passes, info.pass_baselines)))
    st = info.stack
    bound = (f"bound {st['bound_bytes']:,} B (call graph) + margin {st['margin_bytes']:,} B" if st and st["auto"]
             else f"call-graph bound {info.stack_estimate_bytes:,} B")  # fmt: skip
    fell_back = (st or {}).get("default_overflowed")
    how = (f" (auto: the board's default {fell_back['default_stack_bytes']:,} B did not fit)" if fell_back
           else " (auto)" if st and st["auto"] else "")  # fmt: skip
    t.add_row("stack", f"{_kib(info.stack_reserved_bytes)} reserved{how}, {bound}")
    state = f", of which model state kept across runs {info.state_bytes:,} B" if info.state_bytes else ""
    t.add_row("static RAM (.data+.bss)", _kib(info.static_ram_bytes) + state)
    t.add_row("total RAM", f"{_kib(info.total_ram_bytes)} of {_kib(info.board_ram_bytes)}")
    t.add_row("flash", f"{_kib(info.flash_bytes)} of {_kib(info.board_flash_bytes)} (weights {info.weights_bytes:,} B)")
    t.add_row("fits the board", "-" if info.fits is None else ("[green]yes[/]" if info.fits else "[red]no[/]"))
    out.print(t)
    if info.pareto:
        _print_pareto(info.pareto)


def _print_pareto(pareto: dict) -> None:
    """The memory/latency objective: the non-dominated points the orchestrator tried, the one taken and why."""
    t = Table("", "passes", "arena B", "MACs", "instr.*", "slower", title=f"Pareto points of {pareto['candidates']} "
              "pass sequences tried", caption="* predicted (passes/instr_model.json); slower: vs the fastest tried")  # fmt: skip
    for p in pareto["points"]:
        t.add_row("[bold]>[/]" if p["taken"] else "", _text(", ".join(p["sequence"]) or "none"), f"{p['arena_bytes']:,}",
                  f"{p['macs']:,}", f"{p['instructions']:,}", f"{p['slowdown_percent']:+.2f} %")  # fmt: skip
    out.print(t)
    out.print(_text(f"taken (>): {pareto['taken']['reason']}"), highlight=False)


def _passes_line(passes: dict, baselines: dict) -> str:
    """The passes run, each with its arena change; then how the orchestrator got there."""
    steps = ", ".join(f"{s['pass']} {s['d_arena']:+,} B" if "d_arena" in s else s["pass"] for s in passes["sequence"]) or "none"
    if "trials" not in passes:
        return steps + ("  (--passes)" if passes.get("given") else "  (fixed sequence)")
    others = ", ".join(f"{k} {v['arena_bytes']:,} B" for k, v in baselines.items() if v.get("arena_bytes") is not None)
    stop = {"target": "fits with margin", "time": "time budget", "trials": "trial budget", "exhausted": "nothing left to try"}
    return (f"{steps}  (orchestrator: {passes['trials']} trials, stopped: {stop.get(passes['stop'], passes['stop'])}, "
            f"result from {passes['source']}; baselines {others})")


def _print_run(res: dict) -> None:
    t = Table(title=_text(f"device run: {Path(res['model']).name} on {res['board']} (QEMU)"), show_header=False)
    t.add_row("arena planned / measured", f"{res['arena_bytes']:,} B / {res['arena_high_water_bytes']:,} B")
    t.add_row("peak stack (measured)", f"{res['peak_stack_bytes']:,} B")
    t.add_row("static RAM (.data+.bss)", f"{res['static_ram_bytes']:,} B")
    t.add_row("total RAM used", f"{res['total_ram_bytes']:,} B")
    t.add_row("instructions per inference", f"{res['instructions']:,}")
    t.add_row(*_oracle_verdict(res))
    if "invocations" in res:
        runs = res["invocations"]
        same = sum(bool(inv["matches_reference"]) and inv["status"] == 0 for inv in runs)
        exact = sum(bool(inv["bit_exact"]) for inv in runs)
        t.add_row(f"{len(runs)} invocations in a row", f"{same} match TFLite Micro invoked {len(runs)} times ({exact} bit-exact)")
    out.print(t)


def _run_invocations(project: Path, info, res: dict, inputs, seed: int, n: int) -> dict:
    """``edgemem run --invocations N``: the sequence's verdicts next to the single run's (device_run.run_sequence);
    the run matches only if every invocation does."""
    from .device_run import run_sequence
    from .reference import seeded_inputs

    sets = [inputs] * n if inputs is not None else [seeded_inputs(info.model, seed + k) for k in range(n)]
    seq = run_sequence(project, sets)
    res["invocations"] = [{k: v for k, v in inv.items() if k != "output_arrays"} for inv in seq["invocations"]]
    if not seq["matches_reference"]:
        res["matches_reference"] = False
        res["max_abs_diff"] = max(inv["max_abs_diff"] for inv in seq["invocations"])
    return res


def _oracle_verdict(res: dict) -> tuple[str, str]:
    """("vs <oracle>", verdict) of a device run: TFLite Micro, or LiteRT where TFLM cannot run the model (whose
    int8 rounding of some ties differs, so one step is a match, device_run.compare)."""
    if res["bit_exact"] is None:
        return "vs TFLite Micro", "oracle not installed (pip install 'edgemem[reference]')"
    label = "vs TFLite Micro" if res.get("oracle", "tflm") == "tflm" else "vs LiteRT (TFLM cannot run it)"
    verdict = "bit-exact" if res["bit_exact"] else f"max |diff| {res['max_abs_diff']}"
    if not res["bit_exact"] and res["matches_reference"]:
        verdict += " (within LiteRT's tie rounding)"
    return label, ("[green]" if res["matches_reference"] else "[red]") + _text(verdict) + "[/]"


def _print_symbolic(info: dict, out_dir: Path) -> None:
    (name, (lo, hi)), = info["dims"].items()
    out.print(f"symbolic plan written to [bold]{_text(out_dir)}[/] (edgemem_plan.c/.h: offsets as functions of {name}); "
              "no firmware: kernels are compiled for concrete shapes")  # fmt: skip
    t = Table(title=_text(f"{Path(info['model']).name} on {info['board']}, {name} = {lo}..{hi}"), show_header=False)
    t.add_row("arena (symbolic)", _text(f"{info['arena_expr']}  planner: {info['planner']}"))
    t.add_row("operator order", info["scheduler"])
    t.add_row("RAM budget", _kib(info["budget_bytes"]))
    largest = info["largest_fitting"][name]
    t.add_row(f"largest {name} that fits", f"{largest}" + (" (the whole range)" if largest == hi else ""))
    out.print(t)
    s = Table(name, "symbolic plan", "concrete plan", "ratio", "fits")
    for row in info["sweep"]:
        s.add_row(str(row[name]), f"{row['symbolic_bytes']:,} B", f"{row['concrete_bytes']:,} B", f"{row['ratio']:.3f}",
                  "yes" if row["fits"] else "[red]no[/]")  # fmt: skip
    out.print(s)


def _json(obj: dict) -> None:
    """The one JSON object of a --json run, with the schema version first (README "JSON output")."""
    obj = {"schema": JSON_SCHEMA, **{k: v for k, v in obj.items() if k != "output_arrays"}}
    sys.stdout.write(json.dumps(obj, indent=2) + "\n")


def _pass_names(text: Optional[str]) -> tuple[str, ...] | None:
    return None if text is None else tuple(n.strip() for n in text.split(",") if n.strip())


@app.command()
@_errors
def build(
    model: Path = typer.Argument(..., help="The .tflite model."),
    board: str = typer.Option("stm32f746", "--board", "-b", help="Board name (see `edgemem boards`) or a board .toml."),
    output: Optional[Path] = typer.Option(None, "-o", "--output", help="Project directory (default out/<model>-<board>)."),
    ram: Optional[int] = typer.Option(None, "--ram", parser=_size, metavar="SIZE", help="Plan for this much RAM instead of the board's: bytes or with a unit (320K, 320KiB, 1M)."),
    flash: Optional[int] = typer.Option(None, "--flash", parser=_size, metavar="SIZE", help="Plan for this much flash instead of the board's: bytes or with a unit (1M, 512K)."),
    force: bool = typer.Option(False, "--force", help="Replace an existing output directory."),
    pool_per_region: bool = typer.Option(False, "--pool-per-region", help="Plan each board RAM region (DTCM, SRAM1, ...) as its own arena pool, fast ones first."),
    schedule_time: float = typer.Option(2.0, "--schedule-time", parser=_budget_seconds, metavar="SECONDS", help="Seconds the operator schedulers may take."),
    opt_time: Optional[float] = typer.Option(None, "--opt-time", parser=_budget_seconds, metavar="SECONDS", help="Seconds the memory-pass orchestrator may take (0: the fixed pass sequence) [default: 5]."),
    minimize: bool = typer.Option(False, "--minimize", help="The orchestrator searches for the least arena within --opt-time instead of stopping once the model fits the RAM budget with 10% to spare (e.g. to take inplace_overlap)."),
    max_slowdown: Optional[float] = typer.Option(None, "--max-slowdown", parser=_percent, metavar="PCT", help="Take the least arena among the memory-pass sequences predicted at most PCT% slower than the fastest one found (default: the fastest that fits the RAM budget; --minimize: any slowdown)."),
    patch_macs: Optional[float] = typer.Option(None, "--patch-macs", parser=_percent, metavar="PCT", help="When nothing else fits, also try the patch split with up to PCT% more MACs (beyond its own limits, up to 20%); a refusal lists it as a way out with its arena."),
    ways_time: float = typer.Option(60.0, "--ways-time", parser=_budget_seconds, metavar="SECONDS", help="When the model does not fit: seconds to plan its ways out (input outside, stack auto, pools per region, patches, larger boards; 0: none)."),
    passes: Optional[str] = typer.Option(None, "--passes", help="Run exactly these memory passes, comma-separated, in order, instead of the orchestrator ('' for none; names in the report)."),
    run_it: bool = typer.Option(False, "--run", help="Also run the firmware under QEMU (with --profile: profile it)."),
    profile: bool = typer.Option(False, "--profile", help="Profiling build: per-step RAM and ticks over the UART, for `edgemem profile`."),
    as_json: bool = typer.Option(False, "--json", help="Print one JSON object instead of the report."),
    stack: Optional[str] = typer.Option(None, "--stack", parser=_stack, metavar="SIZE|auto", help="Reserved stack: a size (4K, 8192) or auto (the call graph's bound + a margin); default the board's."),
    input_where: str = typer.Option("arena", "--input", help="Where the model input lives: 'arena' (written into edgemem_input(i)) or 'outside' (the caller's own buffer, passed to edgemem_run_from(); the arena excludes it)."),
    dim: list[str] = typer.Option([], "--dim", help="Symbolic dimension NAME=LO..HI (the model's -1 dims, else its batch dim): schedule and plan once for the whole range, report the largest value that fits, write the plan's offsets as C; no firmware (so not with --run, --profile, --passes, --opt-time, --minimize, --max-slowdown, --pool-per-region, --stack or --input outside)."),
) -> None:
    """Import, lower, schedule, plan, generate C and build the firmware."""
    from .project_dir import check_replaceable

    out_dir = output or Path("out") / f"{model.stem}-{Path(board).stem}"
    if dim:  # the symbolic-shape path stops after the plan (kernels need concrete shapes)
        _refuse_with_dim(run=run_it, profile=profile, passes=passes is not None, opt_time=opt_time is not None, minimize=minimize,
                         max_slowdown=max_slowdown is not None, patch_macs=patch_macs is not None,
                         pool_per_region=pool_per_region, stack=stack is not None,
                         input=input_outside(input_where))  # fmt: skip
        check_replaceable(out_dir, force, model)  # before importing TVM, which alone takes seconds
        from .symbolic import plan_for_range

        info = plan_for_range(model, board, dim, ram=ram, flash=flash, schedule_seconds=schedule_time, overwrite=force,
                              out_dir=out_dir)  # fmt: skip
        _json(info) if as_json else _print_symbolic(info, out_dir)
        return
    options = user_options(ram=ram, flash=flash, force=force, pool_per_region=pool_per_region,
                           schedule_seconds=schedule_time, opt_seconds=opt_time, minimize=minimize,
                           max_slowdown=max_slowdown, passes=_pass_names(passes), profile=profile, stack=stack,
                           input_where=input_where, patch_macs=patch_macs, ways_seconds=ways_time)  # fmt: skip
    # Refused at once, before importing TVM (seconds): pipeline.build checks again as it locks the directory.
    check_replaceable(out_dir, force, model)
    from . import pipeline

    with _StageStatus(err, quiet=as_json) as status:
        result = pipeline.build(model, board, out_dir, options, observer=status)
        res = None
        if run_it:
            from . import profiling
            from .device_run import run as run_on_device

            stage = pipeline.Stages(status)
            with stage("profile under QEMU" if profile else "run under QEMU"):
                res = profiling.profile(out_dir) if profile else run_on_device(out_dir)
            if profile:
                _refresh_report(out_dir, res)
    ran = {"run": {k: v for k, v in res.items() if k not in ("output_arrays", "schema")}} if res else {}

    def show() -> None:
        out.print(f"project written to [bold]{_text(out_dir)}[/] (firmware.elf, model.c/.h, Makefile)")
        _print_build(result.info)
        if res and profile:
            _print_profile(res)
        elif res:
            _print_run(res)

    _finish({**result.info.to_json(), "project": str(out_dir), **ran}, as_json, show,
            _verdict_error(res, profiled=profile) if res else None)  # fmt: skip


def _refuse_with_dim(**given: bool) -> None:
    """--dim plans from the flatbuffer without lowering: the options of the later stages do not apply."""
    options = [f"--{name.replace('_', '-')}" for name, on in given.items() if on]
    if options:
        raise EdgememError(
            f"{' and '.join(options)} cannot be used with --dim: a symbolic build schedules and plans the arena for the "
            "whole range straight from the flatbuffer, without lowering, memory passes or firmware (kernels are "
            "compiled for concrete shapes), so there is nothing to run, profile or optimize. Drop --dim to build a "
            "concrete model, or drop those options to plan the range."
        )


@app.command()
@_errors
def run(
    project: Path = typer.Argument(..., help="A directory made by `edgemem build`."),
    board: Optional[str] = typer.Option(None, "--board", "-b", help="Must match the build's board if given."),
    input_files: list[Path] = typer.Option([], "--input", help="Input tensor as .npy (once per model input)."),
    save_output: list[Path] = typer.Option([], "--save-output", help="Save the device's output as .npy (once per output)."),
    seed: int = typer.Option(0, "--seed", help="Seed of the random input used when no --input is given."),
    as_json: bool = typer.Option(False, "--json", help="Print one JSON object instead of the report."),
    invocations: int = typer.Option(1, "--invocations", min=1, max=10_000, help="Also run N invocations in a row, no reset in between (a stateful model's state carries), on seeds SEED..SEED+N-1 (or the --input N times), each compared with one TFLite Micro interpreter invoked N times."),
) -> None:
    """Run a built firmware under QEMU with the board's RAM enforced; compare with TFLite Micro."""
    import numpy as np

    from .device_run import run as run_on_device

    info = _check_board(project, board)
    inputs = [_load_npy(p) for p in input_files] or None
    if inputs is not None and len(inputs) != len(info.inputs):
        raise EdgememError(f"the model has {len(info.inputs)} input(s) but {len(inputs)} --input file(s) were given.")
    res = run_on_device(project, inputs, seed=seed)
    if invocations > 1:
        res = _run_invocations(project, info, res, inputs, seed, invocations)
    for path, arr in zip(save_output, res["output_arrays"]):
        np.save(path, arr)
    _finish(res, as_json, lambda: _print_run(res), _verdict_error(res, profiled=False))


@app.command("profile")
@_errors
def profile_cmd(
    project: Path = typer.Argument(..., help="A directory made by `edgemem build --profile`."),
    board: Optional[str] = typer.Option(None, "--board", "-b", help="Must match the build's board if given."),
    port: Optional[str] = typer.Option(None, "--port", help="Serial port of the board (/dev/ttyACM0) or a pyserial URL; without it the firmware runs under QEMU and is read over QEMU's UART."),
    baud: Optional[int] = typer.Option(None, "--baud", help="Serial baud rate (default: the board file's, else 115200)."),
    timeout: float = typer.Option(120.0, "--timeout", parser=_timeout, metavar="SECONDS", help="Seconds to wait for the whole report."),
    save: Optional[Path] = typer.Option(None, "--save", help="Where to write the JSON report (default PROJECT/profile.json)."),
    as_json: bool = typer.Option(False, "--json", help="Print one JSON object instead of the table."),
) -> None:
    """Measure RAM and time per operator on the device (or QEMU) over serial, next to the plan's prediction."""
    from . import profiling

    _check_board(project, board)
    with _Progress(err, "profiling") as progress:
        res = profiling.profile(project, port=port, baud=baud, timeout_s=timeout, save=save, progress=progress.reached)
    _refresh_report(project, res)
    _finish(res, as_json, lambda: _print_profile(res), _verdict_error(res, profiled=True))


def _verdict_error(res: dict, *, profiled: bool) -> EdgememError | None:
    """What fails a device run, after its table: a profiled arena that differs from the plan (exit 7), outputs
    that differ from the oracle (exit 8, as `edgemem validate`); None when it passed."""
    from .validation import MismatchError

    if profiled and not res["arena_matches_plan"]:
        return DeviceError(f"the measured arena high-water ({res['arena_high_water_bytes']:,} B) differs from the plan "
                           f"({res['arena_bytes']:,} B) at some step (MISMATCH rows of the profile): the firmware does not "
                           "use memory as planned. Rebuild the project; if it persists, report it with the model.")  # fmt: skip
    if res["matches_reference"] is False:
        label, _ = _oracle_verdict(res)
        return MismatchError(f"the device's outputs of {Path(res['model']).name} on {res['board']} differ from the oracle "
                             f"({label.removeprefix('vs ')}): max |diff| {res['max_abs_diff']}, beyond what is tolerated. "
                             "The firmware computes something else: rebuild it from the model (`edgemem build --force`) "
                             "and, if it persists, report it with the model and this run's --json.")  # fmt: skip
    return None


def _refresh_report(project: Path, profile: dict) -> None:
    """report.html again, with the measured figures next to the planned ones."""
    from .report import write_report

    write_report(project, profile={k: v for k, v in profile.items() if k != "saved_to"})


@app.command()
@_errors
def analyze(
    model: Path = typer.Argument(..., help="The .tflite model."),
    board: str = typer.Option("stm32f746", "--board", "-b", help="Board name (see `edgemem boards`) or a board .toml."),
    ram: Optional[int] = typer.Option(None, "--ram", parser=_size, metavar="SIZE", help="Judge against this much RAM instead of the board's (320K, 1M, bytes)."),
    flash: Optional[int] = typer.Option(None, "--flash", parser=_size, metavar="SIZE", help="Judge against this much flash instead of the board's."),
    pool_per_region: bool = typer.Option(False, "--pool-per-region", help="As `build --pool-per-region`."),
    schedule_time: float = typer.Option(2.0, "--schedule-time", parser=_budget_seconds, metavar="SECONDS", help="As `build --schedule-time`."),
    opt_time: float = typer.Option(5.0, "--opt-time", parser=_budget_seconds, metavar="SECONDS", help="As `build --opt-time` (the arena is the fixed pass sequence's, which the orchestrator never exceeds)."),
    passes: Optional[str] = typer.Option(None, "--passes", help="As `build --passes`."),
    stack: Optional[str] = typer.Option(None, "--stack", parser=_stack, metavar="SIZE|auto", help="As `build --stack` (auto: judged with the board's reservation)."),
    input_where: str = typer.Option("arena", "--input", help="As `build --input`: 'arena' (the default) or 'outside' (the caller's buffer; the arena excludes it)."),
    as_json: bool = typer.Option(False, "--json", help="Print one JSON object instead of the tables."),
) -> None:
    """What the model needs and whether it fits the board, from the file alone (no toolchain, no QEMU): per
    operator MACs, weights and live bytes; every operator edgemem lacks; the arena `build` plans with the same
    options, the RAM floor, next to the board's RAM; the largest value of a symbolic dimension that fits. Exit 4
    if an operator is unsupported, 5 if the model cannot fit, else 0."""
    from .analysis import analyze as run_analysis
    options = BuildOptions(pool_per_region=pool_per_region, schedule_seconds=schedule_time, opt_seconds=opt_time,
                           passes=_pass_names(passes), stack=stack, input_outside=input_outside(input_where))  # fmt: skip
    a = run_analysis(model, board, ram, flash, options)
    _finish(a.to_json(), as_json, lambda: _print_analysis(a), _analysis_error(a))


def _analysis_error(a) -> EdgememError | None:
    """The analysis's failing verdict: an operator without a kernel (exit 4), a model that cannot fit (exit 5)."""
    name = Path(a.model).name
    if a.unsupported:
        return UnsupportedModelError(f"{name}: edgemem has no kernel for {len(a.unsupported)} operator(s) of this model: "
                                     f"{'; '.join(a.unsupported)}, so `edgemem build` refuses it. Replace these layers in "
                                     "the model (or convert it with other types), or file an issue naming them.")  # fmt: skip
    if a.verdict != "does not fit":
        return None
    budget = f"the {a.ram_budget_bytes:,} B of RAM left for the arena ({a.board_ram_bytes:,} B less a {a.stack_bytes:,} B stack)"
    low = max(a.weights_bytes, a.flash_range_bytes[0])
    if low > a.board_flash_bytes:
        need = (f"its image needs at least {low:,} B of flash (weights {a.weights_bytes:,} B, plus the code's low "
                f"estimate), more than the board's {a.board_flash_bytes:,} B")  # fmt: skip
    elif a.ram_floor_bytes > a.ram_budget_bytes:
        need = (f"it needs at least {a.ram_floor_bytes:,} B of arena (its RAM floor, at operator #{a.ram_floor_operator}, "
                f"whatever the order or memory passes), more than {budget}")  # fmt: skip
    elif a.arena_bytes is not None and a.arena_bytes > a.ram_budget_bytes:
        need = f"the arena edgemem plans for it is {a.arena_bytes:,} B (memory passes included), more than {budget}"
    else:
        need = f"no arena fits {budget} ({a.plan_note.rsplit('; ', 1)[-1]})"
    return DoesNotFitError(f"{name} cannot fit board {a.board}: {need}. Use a board with more memory or a smaller model "
                           "(--ram/--flash judge against another budget).")  # fmt: skip


def _print_analysis(a) -> None:
    from rich import box

    t = Table("#", "operator", "type", "output", "MACs", "weights", "live", title=_text(f"{Path(a.model).name}: operators"),
              caption="live: activation bytes at the operator's step, file order", box=box.SIMPLE_HEAD,
              pad_edge=False)  # fmt: skip
    for column in t.columns[:2]:
        column.no_wrap = True
    for column in t.columns[4:]:
        column.justify = "right"
    peak = max((r.live_bytes for r in a.operators), default=0)
    for r in a.operators:
        name = _text(r.name) if r.supported else f"[red]{_text(r.name)} (no kernel)[/]"
        live = f"[bold]{r.live_bytes:,}[/]" if r.live_bytes == peak and peak else f"{r.live_bytes:,}"
        t.add_row(str(r.index), name, _text(r.operand_type), "x".join(map(str, r.output_shape)) or "scalar", f"{r.macs:,}",
                  f"{r.weight_bytes:,}", live)  # fmt: skip
    out.print(t)
    s = Table(title=_text(f"{Path(a.model).name} on {a.board}"), show_header=False)
    arena = "no placement fits" if a.arena_bytes is None else f"{a.arena_bytes:,} B"
    s.add_row("arena (as build)" if a.arena_exact else "arena (estimate)",
              _text(f"{arena}: {a.scheduler} order, {a.planner or '-'}; passes {', '.join(a.passes_modeled) or 'none'}"))
    if not a.arena_exact:
        s.add_row("", _text(a.plan_note.rsplit("; ", 1)[-1]))
    s.add_row("lower bound", f"{a.lower_bound_bytes:,} B (that order's peak live bytes)")
    assumed = f"; assumed: {a.ram_floor_assumes}" if a.ram_floor_assumes else ""
    s.add_row("RAM floor", f"{a.ram_floor_bytes:,} B (operator #{a.ram_floor_operator}: no order or pass goes lower{assumed})")
    s.add_row("RAM for the arena", f"{a.ram_budget_bytes:,} B ({a.board_ram_bytes:,} B less a {a.stack_bytes:,} B stack)")
    s.add_row("weights (flash)", f"{a.weights_bytes:,} B of {a.board_flash_bytes:,} B")
    low, high = a.flash_range_bytes
    s.add_row("flash (estimate)", f"{a.flash_estimate_bytes:,} B: weights + code, {low:,} to {high:,} B; the board has "
              f"{a.board_flash_bytes:,} B" + ("" if high <= a.board_flash_bytes else " (`build --flash` for more)"))
    s.add_row("static RAM (estimate)", f"{a.static_ram_estimate_bytes:,} B besides the arena (.data/.bss of the firmware)")
    s.add_row("MACs", f"{a.macs:,}")
    if a.symbolic:
        n = a.symbolic["largest_fitting"]
        s.add_row("symbolic dimension", _text(a.symbolic["note"] or (
            f"arena {a.symbolic['arena_expr']} B; largest {a.symbolic['dim']} that fits: "
            f"{'none' if n is None else n} (searched {a.symbolic['range'][0]}..{a.symbolic['range'][1]})")))  # fmt: skip
    colour = {"fits": "green", "may fit": "yellow", "may not fit": "yellow", "does not fit": "red"}[a.verdict]
    s.add_row("verdict", f"[{colour}]{a.verdict}[/]")
    out.print(s)


@app.command("report")
@_errors
def report_cmd(
    project: Path = typer.Argument(..., help="A directory made by `edgemem build`."),
    output: Optional[Path] = typer.Option(None, "-o", "--output", help="Where to write the page (default PROJECT/report.html)."),
    profile_json: Optional[Path] = typer.Option(None, "--profile", help="The `edgemem profile` report to show (default PROJECT/profile.json when there)."),
) -> None:
    """Write the build's HTML report: memory timeline, live bytes per step, operators, passes (and, after
    `edgemem profile`, the measured figures). One self-contained file: open it in any browser."""
    from .report import write_report

    profile = None
    if profile_json is not None:
        try:
            profile = json.loads(profile_json.read_text())
        except (OSError, ValueError) as exc:
            raise EdgememError(f"cannot read the profile report '{profile_json}' ({exc}); `edgemem profile DIR` writes it.") from exc
    path = write_report(project, profile=profile, path=output)
    out.print(f"report written to [bold]{_text(path)}[/]", highlight=False)


@app.command("export")
@_errors
def export_cmd(
    project: Path = typer.Argument(..., help="A directory made by `edgemem build`."),
    to: str = typer.Option(..., "--to", help="The build system: cmake, zephyr, platformio, arduino or esp-idf."),
    output: Optional[Path] = typer.Option(None, "-o", "--output", help="Package directory (default PROJECT-SYSTEM next to PROJECT)."),
    name: Optional[str] = typer.Option(None, "--name", help="Package name (default: the model file's name reduced to a-z, 0-9 and _)."),
    force: bool = typer.Option(False, "--force", help="Replace an existing package directory edgemem made."),
) -> None:
    """Write the build's model library as a package of an embedded build system, with an example application."""
    from .export import export

    out_dir = output or project.parent / f"{project.name}-{to}"
    path = export(project, to, out_dir, name=name, force=force)
    out.print(f"{_text(to)} package written to [bold]{_text(path)}[/]", highlight=False)


def _print_profile(res: dict) -> None:
    on_qemu = "total_instructions" in res
    t = Table("step", "op", "live (plan)", "high-water (plan)", "measured", "stack",
              "instructions" if on_qemu else res.get("tick_unit", "ticks"), title=_text(f"profile: {Path(res['model']).name} on {res['board']}, {res['source']}"))  # fmt: skip
    for r in res["steps"]:
        ok = "" if r["pools_match"] else " [red]MISMATCH[/]"
        t.add_row(str(r["step"]), _text(r["kind"]), f"{r['predicted_live_bytes']:,}", f"{r['predicted_high_water_bytes']:,}",
                  f"{r['measured_high_water_bytes']:,}{ok}", f"{r['stack_high_water_bytes']:,}",
                  f"{r['instructions' if on_qemu else 'ticks']:,}")  # fmt: skip
    total = res["total_instructions"] if on_qemu else res["total_ticks"]
    t.add_row("", "total", "", f"{res['arena_bytes']:,}", f"{res['arena_high_water_bytes']:,}", f"{res['peak_stack_bytes']:,}", f"{total:,}")
    out.print(t)
    verdict = {True: "[green]yes[/]", False: "[red]no[/]"}
    label, outputs = _oracle_verdict(res)
    out.print(f"measured arena = plan at every step: {verdict[res['arena_matches_plan']]}; outputs {label}: {outputs}; "
              f"saved to {_text(res['saved_to'])}")  # fmt: skip
    if res.get("tick_note"):
        out.print(f"[yellow]{_text(res['tick_note'])}[/]")


def _load_npy(path: Path):
    import numpy as np

    try:
        return np.load(path, allow_pickle=False)
    except (OSError, ValueError) as exc:
        raise EdgememError(f"cannot read input '{path}' as a .npy array ({exc}); save it with numpy.save.") from exc


def _check_board(project: Path, board: Optional[str]) -> BuildInfo:
    """The build's edgemem.json, after checking it was built for `board` (when given): a board name must be the
    recorded board's, a board file must hold the recorded definition. The commands then use that recorded
    definition, never a board looked up by name."""
    from .board import is_board_file, load_board
    from .build_info import build_board, load_build_info

    info = load_build_info(project)
    built = build_board(info, project)
    if board is None:
        return info
    if is_board_file(board):
        if load_board(board).definition != built.definition:
            raise EdgememError(f"'{project}' was built for another definition of board {built.name} than the one in "
                               f"{board}; rebuild it with --board {board}, or leave --board out to use the build's own.")  # fmt: skip
    elif board != info.board:
        raise EdgememError(f"'{project}' was built for board {info.board}, not {board}; rebuild it with --board {board}.")
    return info


@app.command()
@_errors
def flash(
    project: Path = typer.Argument(..., help="A directory made by `edgemem build`."),
    board: str = typer.Option(..., "--board", "-b", help="The board to flash; must match the build's board."),
    tool: Optional[str] = typer.Option(None, "--tool", help="Use this flasher (openocd, st-flash, pyocd) instead of the board's first installed one."),
    timeout: Optional[float] = typer.Option(None, "--timeout", parser=_timeout, metavar="SECONDS", help="Seconds before the flasher is stopped (default: the board's, 120)."),
) -> None:
    """Write the built image (firmware.bin) to a real board with openocd, st-flash or pyocd."""
    from .build_info import build_board
    from .target.flash import flash as flash_image

    b = build_board(_check_board(project, board), project)
    res = flash_image(project, b, tool=tool, timeout_s=timeout)
    out.print(f"$ {res.command_line}", highlight=False, soft_wrap=True, markup=False)
    out.print(res.output.strip(), highlight=False, soft_wrap=True, markup=False)
    out.print(f"[green]flashed[/] {_text(res.image)} ({res.image.stat().st_size:,} B) at 0x{res.address:08X} on {_text(b.name)} with {_text(res.tool)}",
              highlight=False)  # fmt: skip
    if res.note:
        out.print(f"[yellow]note:[/] {_text(res.note)}", highlight=False, soft_wrap=True)


@app.command()
@_errors
def validate(
    project: Path = typer.Argument(..., help="A directory made by `edgemem build`."),
    board: Optional[str] = typer.Option(None, "--board", "-b", help="Must match the build's board if given."),
    count: int = typer.Option(10, "--count", "-n", help="Number of seeded random inputs to run."),
    seed: int = typer.Option(0, "--seed", help="First seed (runs use seed, seed+1, ...; as `edgemem run --seed`)."),
    port: Optional[str] = typer.Option(None, "--port", help="Serial port (or pyserial URL) of a board running its board image (or any UART build): inputs go over the UART. Default: QEMU runs."),
    bit_exact: bool = typer.Option(False, "--bit-exact", help="Fail unless every output is bit-exact (no 1-LSB tolerance)."),
    as_json: bool = typer.Option(False, "--json", help="Print one JSON object instead of the table."),
    data: Optional[Path] = typer.Option(None, "--data", help="Your own samples instead of seeded ones: a .npz (x, optional y labels) or a folder of .npy files (one subfolder per class for labels); floats are quantized with the input's scale. Reports accuracy, a confusion matrix and top-1 agreement with TFLite Micro."),
    reference: Optional[Path] = typer.Option(None, "--reference", help="With --data: the float .tflite of the same model, to compare top-1 and accuracy with."),
) -> None:
    """Run N seeded inputs (or your --data) on the device and compare each with TFLite Micro; exit 8 if any run
    differs."""
    from .validation import MismatchError, mismatch_message, validate as run_validation

    _check_board(project, board)
    if reference is not None and data is None:
        raise EdgememError("--reference compares the float model on your own samples: give them with --data.")
    if data is not None:
        _validate_data(project, data, reference, port, as_json)
        return
    with _Progress(err, "validating", count) as progress:

        def seed_done(run: dict) -> None:  # one line per seed, also where stderr is a log file
            verdict = ("bit-exact" if run["bit_exact"] else "within tolerance" if run["matches_reference"] else
                       "DIFFERS") + ("" if run["bit_exact"] else f" (max |diff| {run['max_abs_diff']})")  # fmt: skip
            ran = f", {run['instructions']:,} instructions" if run["instructions"] else ""
            progress.say(f"  seed {run['seed']}: {verdict}{ran}  ({progress.done + 1}/{count})")
            progress.reached(progress.done + 1, count)

        report = run_validation(project, count, first_seed=seed, port=port, require_bit_exact=bit_exact, progress=seed_done)
    failure = None if report["all_match"] else MismatchError(mismatch_message(report))
    _finish(report, as_json, lambda: _print_validation(report), failure)


def _validate_data(project: Path, data: Path, reference: Optional[Path], port: Optional[str], as_json: bool) -> None:
    from .validation import MismatchError, data_mismatch_message, validate_data

    with _Progress(err, "validating") as progress:
        report = validate_data(project, data, port=port, reference=reference, progress=progress.reached)
    failure = None if report["all_match"] else MismatchError(data_mismatch_message(report))
    _finish(report, as_json, lambda: _print_data_validation(report), failure)


def _print_data_validation(report: dict) -> None:
    out.print(f"{_text(Path(report['model']).name)} on {_text(report['board'])} ({_text(report['device'])}): "
              f"{report['count']:,} samples of {_text(report['data'])}", highlight=False)  # fmt: skip
    if report["accuracy"] is not None:
        t = Table("label → predicted", *map(_text, report["classes"]), title="confusion matrix (device)", pad_edge=False)
        for name, row in zip(report["classes"], report["confusion_matrix"]):
            t.add_row(_text(name), *(str(v) for v in row))
        out.print(t)
        line = f"accuracy {report['accuracy']:.4f}"
        if report.get("float_accuracy") is not None:
            line += f" (float model {report['float_accuracy']:.4f})"
        out.print(line, highlight=False)
    agree = f"top-1 agreement with {report['oracle']} {report['top1_agreement']:.4f}"
    if "float_top1_agreement" in report:
        agree += f", with the float model {report['float_top1_agreement']:.4f} (max |diff| {report['float_max_abs_diff']:.4g})"
    out.print(agree, highlight=False)
    colour = "green" if report["all_match"] else "red"
    out.print(f"[{colour}]{report['bit_exact_count']}/{report['count']} bit-exact, {report['matching_count']}/{report['count']} "
              f"matching {report['oracle']}[/], max |diff| {report['max_abs_diff']}", highlight=False)  # fmt: skip


class _Progress:
    """Progress on stderr (stdout carries the table or the one JSON object): a bar counting the units done
    (validate's runs, profile's steps) when stderr is a terminal, erased at the end; ``say`` prints a line above it."""

    def __init__(self, console: Console, label: str, total: int | None = None):
        self.console, self.label, self.total, self.done, self.bar = console, label, total, 0, None

    def __enter__(self) -> _Progress:
        if self.console.is_terminal:
            from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

            self.bar = Progress(TextColumn(self.label), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(),
                                console=self.console, transient=True)  # fmt: skip
            self.task = self.bar.add_task(self.label, total=self.total)
            self.bar.start()
        return self

    def say(self, line: str) -> None:
        self.console.print(line, markup=False, highlight=False)

    def reached(self, done: int, total: int) -> None:
        self.done, self.total = done, total
        if self.bar is not None:
            self.bar.update(self.task, completed=done, total=total)

    def __exit__(self, *exc) -> None:
        if self.bar is not None:
            self.bar.stop()


def _print_validation(report: dict) -> None:
    t = Table("seed", "bit-exact", "max |diff|", "matches", "instructions",
              title=_text(f"validate: {Path(report['model']).name} on {report['board']} ({report['device']}) "
                         f"{'vs LiteRT (TFLM cannot run it)' if report.get('oracle') == 'litert' else 'vs TFLite Micro'}"))  # fmt: skip
    for r in report["runs"]:
        t.add_row(str(r["seed"]), "yes" if r["bit_exact"] else "[red]no[/]", str(r["max_abs_diff"]),
                  "yes" if r["matches_reference"] else "[red]no[/]", f"{r['instructions']:,}" if r["instructions"] else "-")  # fmt: skip
    out.print(t)
    colour = "green" if report["all_match"] else "red"
    out.print(f"[{colour}]{report['bit_exact_count']}/{report['count']} bit-exact, {report['matching_count']}/{report['count']} "
              f"matching[/], max |diff| {report['max_abs_diff']}", highlight=False)  # fmt: skip


def _size_short(n: int) -> str:
    """A memory size in 5 characters or fewer: 16K, 320K, 1M, 8512K."""
    return f"{n >> 20}M" if n >= 1 << 20 and n % (1 << 20) == 0 else f"{n >> 10}K" if n % 1024 == 0 else f"{n:,}"


def _core_short(core) -> str:
    """cortex-m7 with an FPU -> M7F, cortex-m0plus -> M0+."""
    name = core.cpu.removeprefix("cortex-").upper().replace("PLUS", "+")
    return name + ("F" if core.has_fpu else "")


@app.command()
@_errors
def boards(
    as_json: bool = typer.Option(False, "--json", help="Print one JSON object (each board's core, RAM regions, flash, QEMU stand-in) instead of the tables."),
) -> None:
    """List the boards edgemem knows, with their RAM, flash, QEMU stand-in and real-board image (serial port, ticks)."""
    from rich import box

    from .board import list_boards, load_board

    if as_json:
        _json({"boards": [_board_json(load_board(name)) for name in list_boards()]})
        return
    compact = {"box": box.SIMPLE_HEAD, "pad_edge": False}  # no vertical rules: one line per board in 80 columns
    t = Table("board", "core", "RAM", "flash", "QEMU stand-in", "board image", title="boards", **compact)
    r = Table("board", "RAM regions (fast: hot tensors first with --pool-per-region)", **compact)
    for column in t.columns:
        column.no_wrap = True
    for column in t.columns[2:4]:
        column.justify = "right"
    r.columns[0].no_wrap = True
    for name in list_boards():
        b = load_board(name)
        image = f"{b.device.uart}, {b.device.ticks}" if b.device else "-"
        t.add_row(_text(name), _text(_core_short(b.core)), _size_short(b.ram_bytes), _size_short(b.flash_bytes),
                  _text(b.qemu.machine) if b.qemu else "none yet", _text(image))  # fmt: skip
        r.add_row(_text(name), _text(", ".join(f"{x.name} {_size_short(x.size)}{' fast' if x.speed == 'fast' else ''}" for x in b.ram)))
    out.print(t)
    out.print(r)


def _board_json(b) -> dict:
    """One board of `boards --json` (README "JSON output"): what a build for it plans with and runs on."""
    from dataclasses import asdict

    return {
        "name": b.name, "description": b.description, "core": asdict(b.core),
        "ram_bytes": b.ram_bytes, "ram": [asdict(r) for r in b.ram], "default_ram": b.default_ram.name,
        "flash": {"base": b.flash.base, "size": b.flash.size}, "stack_bytes": b.stack_size, "arena_align": b.arena_align,
        "qemu": {"machine": b.qemu.machine, "cpu": b.qemu.cpu} if b.qemu else None,
        "board_image": {"uart": b.device.uart, "ticks": b.device.ticks, "cpu_hz": b.device.cpu_hz} if b.device else None,
        "flashers": list(b.flasher.order) if b.flasher else [], "serial_baud": b.serial_baud,
    }  # fmt: skip


if __name__ == "__main__":  # pragma: no cover
    app()
