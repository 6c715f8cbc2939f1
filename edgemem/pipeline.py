"""edgemem's build, one stage a line: a .tflite file in, a firmware project and its RAM report out.

    check (budget) -> import (frontend) -> lower to kernels (passes) -> memory passes (passes/optimize)
    -> operator graph (ir) -> order (schedule) -> arena plan + independent check (plan)
    -> C (codegen) -> firmware (target) -> report (build_info, report)

Each stage lives in its own module; this file only calls them in order and times them (``Stages``: the
CLI's status line, and the report's "stage_seconds"). What happens after a build lives elsewhere: the
device run and its comparison with the oracle in device_run.py, profiling in profiling.py, the symbolic
entry point (--dim) in symbolic.py.
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

from .board import Board, load_board
from .budget import board_with_budget, check_flash, check_floor, ram_budget, with_stack
from .build_info import BuildInfo, collect_build_info
from .errors import DoesNotFitError, ToolchainError, UnsupportedModelError
from .ir.graph import OpGraph
from .options import BuildOptions
from .plan import ArenaPlan
from .project_dir import OutputDir
from .schedule import Schedule
from .target.image import DEVICE_DIR
from .target.link_use import LinkDoesNotFitError
from .target.toolchain import FirmwareSizes


# Plans again with the static RAM the linker measured (pool per region): one replan suffices, as the static RAM
# does not depend on the plan; the second is a safety net.
MAX_REPLANS = 2


@dataclass
class BuildResult:
    model: Path
    board: Board
    out_dir: Path
    graph: OpGraph
    schedule: Schedule
    plan: ArenaPlan
    sizes: FirmwareSizes | None
    info: BuildInfo | None = None  # the report (also written to edgemem.json)


# A stage observer: called with (stage, None) when a stage starts and (stage, seconds) when it ends.
StageObserver = Callable[[str, "float | None"], None]


@dataclass
class Stages:
    """Times each stage of a build and tells an observer (the CLI's status line) when one starts and ends."""

    observer: StageObserver | None = None
    seconds: dict[str, float] = field(default_factory=dict)

    @contextmanager
    def __call__(self, name: str) -> Iterator[None]:
        if self.observer is not None:
            self.observer(name, None)
        t0 = time.perf_counter()
        yield  # a failing stage raises through: the observer hears only of stages that finished
        self.seconds[name] = round(time.perf_counter() - t0, 3)
        if self.observer is not None:
            self.observer(name, self.seconds[name])


def build(model_path: str | Path, board_name: str, out_dir: str | Path, options: BuildOptions | None = None,
          observer: StageObserver | None = None) -> BuildResult:  # fmt: skip
    """The whole pipeline for one model and one board; raises EdgememError subclasses on bad input.

    The output directory is checked and locked first (project_dir.OutputDir): a directory that may not be
    written is refused before the expensive stages, and the old one stays until the new one is complete."""
    options = options or BuildOptions()
    with OutputDir(out_dir, options.overwrite, model_path) as target:
        try:
            return _build(model_path, board_name, target, options, observer)
        except DoesNotFitError as e:
            raise _refused(e, model_path, board_name, target, options, observer) from e


def _refused(e: DoesNotFitError, model_path, board_name: str, target: OutputDir, options: BuildOptions,
             observer: StageObserver | None) -> DoesNotFitError:  # fmt: skip
    """A build refused (exit 5): its ways out planned (ways_out.py), and the output directory replaced by the
    refusal's report.html and refusal.json alone (nothing of the half-built project: report/refusal.py)."""
    from .report.refusal import refusal_message, write_refusal
    from .ways_out import plan_ways_out

    with Stages(observer)("ways out"):
        ways = plan_ways_out(Path(model_path), board_name, options, e)
    error = DoesNotFitError(refusal_message(e, ways, Path(target.out_dir)))
    error.ways_out, error.arena_bytes = ways, getattr(e, "arena_bytes", None)
    target.write(lambda project: write_refusal(project, e, ways, str(error), Path(model_path).name, board_name),
                 fresh=True)  # fmt: skip
    return error


def plan_only(model_path: str | Path, board_name: str, options: BuildOptions) -> BuildResult:
    """The build's stages up to the arena plan (check, import, lower, memory passes, graph, schedule, plan) with
    ``options``, writing nothing: the plan a build with those options would take (ways_out.py)."""
    return _build(model_path, board_name, None, dataclasses.replace(options, plan_only=True, compile=False), None)


def _build(model_path: str | Path, board_name: str, target: OutputDir | None, options: BuildOptions,
           observer: StageObserver | None) -> BuildResult:  # fmt: skip
    from .codegen.library import write_library
    from .codegen.model_c import PoolLayout, compile_kernels, render_model, render_profile_inputs
    from .frontend.tflite_import import import_tflite
    from .ir import outside
    from .ir.graph import read_graph
    from .passes.lower import lower_to_kernels
    from .passes.optimize import floor_passes, optimize
    from .plan.graph_plan import plan_graph, predicted_steps
    from .report import memory_info, model_names, write_report
    from .schedule.best import schedule_tried
    from .target.image import qemu_image
    from .target.toolchain import render_image

    out_dir = target.out_dir if target is not None else None
    stage = Stages(observer)
    t0 = time.perf_counter()
    with stage("check"):  # what can be refused from the file alone, before the expensive stages
        board = with_stack(board_with_budget(load_board(board_name), options.ram, options.flash), options.stack)
        budget = ram_budget(board)
        if not options.input_outside:  # the flatbuffer floor counts the input in the arena at every reader
            check_floor(Path(model_path), board, floor_passes(options))
    with stage("import"):
        model = import_tflite(model_path)
        if options.input_outside and model.variables:
            raise UnsupportedModelError(
                f"{model.path.name}: --input outside with resource variables (VAR_HANDLE/READ_VARIABLE/ASSIGN_VARIABLE): "
                "edgemem copies a variable's kept value into the arena next to the inputs and does not build that "
                "with the inputs outside. Build without --input outside."
            )
    with stage("lower"):
        lowered = lower_to_kernels(model.relax_mod, model.op_labels)
        if options.input_outside:  # the passes that measure memory (orchestrator, remat) then count as the plan will
            lowered = outside.mark(lowered)
    with stage("memory passes"):
        lowered, passes_report = optimize(lowered, board, options, budget)
    with stage("graph"):
        graph = read_graph(lowered)
        if options.input_outside:
            graph = outside.inputs_outside(graph)
        check_flash(graph, board, model.path.name)
    with stage("schedule"):
        schedule, schedulers = schedule_tried(graph, board.arena_align, options.schedule_seconds)
    best = lambda plan, buffers: _best_plan(model, board, graph, schedule, buffers, plan, schedulers, passes_report,
                                            budget, options)  # noqa: E731 - the refusal's report.html, if refused
    with stage("plan"), _cut_hint(passes_report, options), _best_plan_on_refusal(best, pareto=passes_report.get("pareto")):
        buffers, plan = plan_graph(graph, schedule, board, model.path.name, options.pool_per_region, budget, schedulers)
    if options.plan_only:
        result = BuildResult(model.path, board, Path("."), graph, schedule, plan, None)
        result.info = collect_build_info(model, board, graph, schedule, plan, None, schedulers, stack_estimate=0,
                                         seconds=time.perf_counter() - t0)  # fmt: skip
        result.info.pareto = passes_report.get("pareto")
        return result
    with stage("kernels"):
        kernels = compile_kernels(graph)
    board_image = board.device is not None and options.compile

    def render_sources(plan: ArenaPlan) -> dict[str, str]:
        return render_model(
            model_name=model.path.name, board=board, graph=graph, order=schedule.order,
            placements={name: (p.pool, p.offset) for name, p in plan.placements.items()},
            pools=[PoolLayout(name, size) for name, size in plan.pool_sizes.items()], lower_bound=plan.lower_bound,
            scheduler=schedule.scheduler, algorithm=plan.algorithm, kernels=kernels, input_infos=model.inputs,
            output_infos=model.outputs, variables=model.variables,
        )  # fmt: skip

    with stage("C sources"):
        sources = render_sources(plan)
        if options.profile or board_image:  # the board image carries its input too
            from .reference import seeded_inputs

            sources["profile_inputs.c"] = render_profile_inputs(
                model.path.name, seeded_inputs(model.path, options.profile_seed), options.profile_seed)
    result = BuildResult(model.path, board, Path(out_dir), graph, schedule, plan, None)

    def link_replanning(project: Path, image) -> None:
        """Link; with pools per region, plan again with the static RAM the linker measured if the default
        region overflowed (the first plan had only an estimate of it)."""
        nonlocal plan, buffers
        for replans in range(MAX_REPLANS + 1):
            try:
                result.sizes = _link(project, board, image, model.path.name)
                return
            except LinkDoesNotFitError as e:
                static = e.default_static_bytes()
                if not options.pool_per_region or static is None or replans == MAX_REPLANS:
                    raise
            buffers, plan = plan_graph(graph, schedule, board, model.path.name, True, budget, schedulers,
                                       static_bytes=static)  # fmt: skip
            result.plan = plan
            sources.update(render_sources(plan))
            _write_sources(project, sources, options.profile)
            write_library(project, sources, board, model.path.name)

    def fill(project: Path) -> None:
        with stage("firmware"), _best_plan_on_refusal(best, lambda: (plan, buffers)):
            _write_sources(project, sources, options.profile)
            image = qemu_image(board, split_regions=options.pool_per_region, profile=options.profile)
            render_image(image, project)
            write_library(project, sources, board, model.path.name)
            stack = None
            if options.compile:
                try:
                    link_replanning(project, image)
                except LinkDoesNotFitError as e:
                    # --stack auto: the stack planned until compiling (budget.AUTO_STACK_PLANNED) may be what
                    # overflows; the call graph comes from the compiler, so size it and link again: that link decides
                    if options.stack != "auto" or e.use.flash_over > 0:
                        raise
                stack = _stack_bound(project, board)
                _check_stack(options.stack, stack, "the firmware")
                if options.stack == "auto":  # relink with the call graph's bound + margin (target/stack.py)
                    result.board = _auto_stack(project, board, stack, options.pool_per_region, options.profile)
                    result.sizes = _link(project, result.board, dataclasses.replace(image, board=result.board),
                                         model.path.name)  # fmt: skip
        device_sizes = None
        if board_image:
            with stage("board image"):
                device_sizes = _link_device(project, board, model.path.name, sources, options.stack)
        with stage("report"):
            info = collect_build_info(model, result.board, graph, schedule, plan, result.sizes, schedulers,
                                      stack_estimate=stack.bytes if stack else 0, seconds=0.0)  # fmt: skip
            if stack is not None:
                info.stack = _stack_info(stack, result.sizes.stack_bytes, options.stack == "auto")
            info.pass_baselines = passes_report.pop("baselines", {})
            info.pareto = passes_report.pop("pareto", None)  # the objective's points (passes/objective.py)
            info.passes = passes_report
            if options.input_outside:
                info.input_outside = outside.outside_info(graph)  # the accounting: the arena excludes the input
            shown = model_names(graph, model)  # the model's own names for its inputs and outputs (not t<i>)
            info.memory = memory_info(graph, schedule, buffers, plan, board, budget, kernels.scratch_bytes, shown)  # report.html's figures
            steps = predicted_steps(graph, schedule, buffers, plan, options.profile_seed) \
                if options.profile or device_sizes is not None else None  # fmt: skip
            if options.profile:
                info.profile = steps
            if device_sizes is not None:  # the board image always profiles (it has no other way to report)
                info.board_image = {"dir": DEVICE_DIR, "elf": f"{DEVICE_DIR}/firmware.elf", "bin": f"{DEVICE_DIR}/firmware.bin",
                                    "flash_bytes": device_sizes.flash_bytes, "ram_bytes": device_sizes.ram_bytes,
                                    "ticks": board.device.ticks, "cpu_hz": board.device.cpu_hz, "profile": steps}  # fmt: skip
            write_report(project, info.to_json())  # report.html (edgemem/report): timeline, curves, operators, passes
        info.stage_seconds = dict(stage.seconds)
        info.build_seconds = round(time.perf_counter() - t0, 3)
        info.write(project)
        result.info = info

    target.write(fill)
    return result


@contextmanager
def _best_plan_on_refusal(best: Callable, current: Callable | None = None, pareto: dict | None = None) -> Iterator[None]:
    """A refusal at the plan or the link carries the best plan found (``best_plan``: what report.html draws) and
    its arena (``arena_bytes``), for the refusal's report and its ways out: the plan the error holds (plan_graph's
    refusal), else ``current()``'s (the plan being linked)."""
    try:
        yield
    except DoesNotFitError as e:
        plan, buffers = getattr(e, "plan", None), getattr(e, "buffers", None)
        if plan is None and current is not None:
            plan, buffers = current()
        e.pareto = getattr(e, "pareto", None) or pareto  # the objective's figures of the passes taken
        if plan is not None and getattr(e, "best_plan", None) is None:
            e.arena_bytes = plan.total_bytes
            e.best_plan = lambda: best(plan, buffers)
        raise


def _best_plan(model, board, graph, schedule, buffers, plan, schedulers, passes_report, budget, options) -> dict:
    """edgemem.json's figures of a plan that was refused (report.html draws them, marked "does not fit")."""
    from .report import memory_info, model_names

    info = collect_build_info(model, board, graph, schedule, plan, None, schedulers, stack_estimate=0, seconds=0.0)
    info.fits = False
    info.pass_baselines = passes_report.get("baselines", {})
    info.pareto = passes_report.get("pareto")
    info.passes = {k: v for k, v in passes_report.items() if k not in ("baselines", "pareto")}
    if options.input_outside:
        from .ir import outside

        info.input_outside = outside.outside_info(graph)
    info.memory = memory_info(graph, schedule, buffers, plan, board, budget, None, model_names(graph, model))
    return info.to_json()


def _write_sources(project: Path, sources: dict[str, str], profile: bool) -> None:
    """The model's C into the project; a file whose text is unchanged is not rewritten (make keeps its object)."""
    for name, text in sources.items():
        path = project / name
        if (name != "profile_inputs.c" or profile) and not (path.is_file() and path.read_text() == text):
            path.write_text(text)


@contextmanager
def _cut_hint(passes_report: dict, options: BuildOptions) -> Iterator[None]:
    """A refusal after --opt-time cut edgemem's fixed sequence (issue 30: thousands of operators) says so: with
    the passes it left out the model may fit."""
    try:
        yield
    except DoesNotFitError as e:
        left_out = passes_report.get("fixed_cut")
        if left_out:
            e.args = (f"{e} The memory passes stopped at --opt-time {options.opt_seconds:g} s before edgemem's fixed "
                      f"sequence ran whole ({', '.join(left_out)} not run): a larger --opt-time, or --opt-time 0 (the "
                      f"fixed sequence whole, without a time bound), may fit.",)  # fmt: skip
        raise


def _link(project: Path, board: Board, image, model_name: str) -> FirmwareSizes:
    """arm-none-eabi-gcc on the image's project; when a region overflows, the linker's own figures (a probe link,
    target/link_use.py) become a LinkDoesNotFitError naming the region and the bytes."""
    from .target.link_use import measure
    from .target.toolchain import build_firmware

    try:
        return build_firmware(project / image.subdir, board)
    except ToolchainError as e:
        if not _overflowed(str(e)):
            raise
        failure = e
    use = measure(project, image, board.stack_size)
    error = LinkDoesNotFitError.from_use(use, board, model_name, image)
    if error is None:  # the probe fits everywhere: an overflow it does not model; say what the linker said
        raise DoesNotFitError(f"the firmware of {model_name} does not link for board {board.name}: {failure}") from failure
    raise error


def _overflowed(text: str) -> bool:
    return any(s in text for s in ("will not fit in region", "overflowed by", "edgemem: "))


def _link_device(project: Path, board: Board, model_name: str, sources: dict, stack: int | str | None = None) -> FirmwareSizes:
    """The real board's image (project/board): the same model and plan, the board's own addresses, UART and
    cycle counter, no semihosting (what `edgemem flash` writes and `edgemem profile --port` reads); with
    ``stack`` "auto" its stack sized from its own call graph (its UART runtime differs from QEMU's), with a
    size in bytes that size checked against that graph."""
    from .target.image import device_image
    from .target.toolchain import render_image, render_linker_script

    image = device_image(board)
    render_image(image, project, sources=sources)
    device_dir = project / DEVICE_DIR
    sizes = _link(project, board, image, model_name)
    _check_stack(stack, _stack_bound(device_dir, board), "the board image")
    if stack == "auto":
        from .target.stack import auto_stack_size, stack_bound

        size = auto_stack_size(stack_bound(device_dir, board.core.has_fpu))
        render_linker_script(image, project, stack_size=size)
        sizes = _link(project, dataclasses.replace(board, stack_size=size), image, model_name)
    return sizes


def _check_stack(reserved: int | str | None, bound, what: str) -> None:
    """Refuse a --stack size below the call graph's bound (target/stack.py): the firmware could overflow it."""
    if not isinstance(reserved, int) or bound is None or reserved >= bound.bytes:
        return
    from .target.stack import auto_stack_size

    irq = f" + {bound.interrupt_bytes:,} B for an interrupt ({bound.interrupt_handler})" if bound.interrupt_bytes else ""
    raise DoesNotFitError(
        f"--stack {reserved:,} is below the stack {what} can use: its call graph's bound is {bound.bytes:,} B (the "
        f"deepest chain {' -> '.join(bound.main_path)} {bound.main_bytes:,} B{irq}), so the stack could overflow into "
        f"the data and the arena. Give --stack {auto_stack_size(bound):,} (the bound + a margin) or more, or --stack auto."
    )


def _stack_bound(project: Path, board: Board):
    """The firmware's worst-case stack from gcc's call graph (target/stack.py), None without the .ci files."""
    from .target.stack import stack_bound

    try:
        return stack_bound(project, board.core.has_fpu)
    except ToolchainError:
        return None


def _auto_stack(project: Path, board: Board, bound, split_regions: bool, profile: bool) -> Board:
    """``--stack auto``: the linker script again with the stack sized from the call graph (bound + margin)."""
    from .target.image import qemu_image
    from .target.stack import auto_stack_size, stack_bound
    from .target.toolchain import render_linker_script

    if bound is None:
        bound = stack_bound(project, board.core.has_fpu)  # raises with the reason (no .ci files, recursion)
    board = dataclasses.replace(board, stack_size=auto_stack_size(bound))
    render_linker_script(qemu_image(board, split_regions=split_regions, profile=profile), project)
    return board


def _stack_info(bound, reserved: int, auto: bool) -> dict:
    """edgemem.json's ``stack``: the call graph's bound (target/stack.py) next to the reservation."""
    return {"auto": auto, "reserved_bytes": reserved, "bound_bytes": bound.bytes, "main_path_bytes": bound.main_bytes,
            "main_path": bound.main_path, "interrupt_bytes": bound.interrupt_bytes,
            "interrupt_handler": bound.interrupt_handler, "fault_bytes": bound.fault_bytes,
            "margin_bytes": reserved - bound.bytes}  # fmt: skip
