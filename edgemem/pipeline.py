"""edgemem's pipeline, one stage a line: a .tflite file in, a firmware project and its RAM report out.

    import (frontend) -> lower to kernels (passes) -> operator graph (ir) -> order (schedule)
    -> arena plan + independent check (plan) -> C (codegen) -> firmware (target) -> report
"""

from __future__ import annotations

import dataclasses
import json
import os
import re
import shutil
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

from .board import Board, load_board
from .codegen.library import write_library
from .codegen.model_c import PoolLayout, compile_kernels, render_model, render_profile_inputs
from .errors import DoesNotFitError, EdgememError, ToolchainError
from .frontend.footprint import file_order_live_ranges, op_names, operator_floor_bytes
from .frontend.tflite_import import ImportedModel, import_tflite, read_tflite
from .ir.graph import OpGraph, read_graph
from .passes.lower import lower_to_kernels
from .report import memory_info, write_report
from .plan import ArenaPlan, Buffer, Pool, PlanError, check_plan, plan_arena
from .schedule import Schedule
from .schedule.best import best_schedule
from .schedule.dag import Dag
from .schedule.liveness import live_ranges
from .target.toolchain import DEVICE_DIR, FirmwareSizes, build_firmware, render_device_files, render_firmware_files

BUILD_INFO = "edgemem.json"  # what `run` needs to know about a build, next to the sources


@dataclass
class BuildOptions:
    ram: int | None = None  # override the board's RAM (bytes)
    flash: int | None = None  # override the board's flash (bytes)
    overwrite: bool = False  # replace an existing output directory
    compile: bool = True  # run arm-none-eabi-gcc
    pool_per_region: bool = False  # plan each board RAM region as its own pool (fast ones first)
    schedule_seconds: float = 2.0  # time budget of the operator schedulers
    profile: bool = False  # per-step reports over the UART, a seeded input in flash (`edgemem profile`)
    profile_seed: int = 0  # the seed of that input
    inplace: bool = True  # allow the in-place depthwise pass (TinyEngine's in-place)
    opt_seconds: float = 5.0  # time budget of the pass orchestrator (0: edgemem's fixed pass sequence)
    opt_seed: int = 0  # the orchestrator's seed (same seed, same passes)
    opt_margin: float = 0.1  # it stops once arena <= RAM budget * (1 - margin); 1.0: never early (minimize)
    passes: tuple[str, ...] | None = None  # run exactly these catalogue passes, in order (no orchestrator)


@dataclass
class BuildResult:
    model: Path
    board: Board
    out_dir: Path
    graph: OpGraph
    schedule: Schedule
    plan: ArenaPlan
    sizes: FirmwareSizes | None
    info: dict = field(default_factory=dict)  # the JSON report (also written to BUILD_INFO)


def board_with_budget(board: Board, ram: int | None, flash: int | None) -> Board:
    """The board with its RAM and/or flash replaced by the user's figures (one RAM region for --ram)."""
    if flash is not None and flash <= 0:
        raise EdgememError(f"--flash {flash} is not a size: give the flash budget in bytes or with a unit, e.g. --flash 1M.")
    if ram is not None and ram <= board.stack_size:
        raise EdgememError(
            f"--ram {ram:,} leaves nothing next to board {board.name}'s {board.stack_size:,}-byte stack: give the "
            f"RAM budget (bytes or with a unit) more than the stack, e.g. --ram {board.ram_bytes // 1024}K."
        )
    for what, size in (("--ram", ram), ("--flash", flash)):
        if size is not None and size % 32:  # checked here, not deep in the MPU code that needs it
            raise EdgememError(
                f"{what} {size:,} is not a multiple of 32 bytes, which the memory protection regions and the linker "
                f"script need: use {size // 32 * 32:,} or {(size // 32 + 1) * 32:,}."
            )
    if flash is not None:
        board = dataclasses.replace(board, flash=dataclasses.replace(board.flash, size=flash))
    if ram is not None:
        region = dataclasses.replace(board.default_ram, size=ram, default=True)
        board = dataclasses.replace(board, ram=(region,))
    return board


def _buffers(graph: OpGraph, schedule: Schedule, align: int) -> list[Buffer]:
    # Heat: how many kernels touch the tensor; the planner puts the hottest ones in fast pools.
    return [
        Buffer(r.name, r.size, r.first, r.last, align, heat=float(1 + len(graph.tensors[r.name].consumers)), alias=r.alias,
               shift=r.shift, rows=r.rows)
        for r in live_ranges(graph, schedule.order)
    ]


# Room left in the default region for .data/.bss (runtime buffers, kernel constants) when planning
# per-region pools; the linker's ASSERTs check the real figure.
_STATIC_RESERVE = 1024


def _ram_budget(board: Board) -> int:
    """Bytes the default RAM region offers to data, bss and the arena once the stack is reserved."""
    region = next(r for r in board.link_regions() if r.default)
    return region.length - board.stack_size


def _pools(board: Board, per_region: bool) -> list[Pool]:
    """One pool over the default (merged, contiguous) RAM, or one pool per board RAM region."""
    if not per_region:
        return [Pool("arena", 1 << 40)]  # unbounded: the bytes needed are reported, then compared
    pools = []
    for r in board.ram:
        if not r.qemu:
            continue  # the image also runs under QEMU, which does not have this region
        reserve = board.stack_size + _STATIC_RESERVE if r is board.default_ram else 0
        pools.append(Pool(r.name, r.size - reserve, r.speed))
    return pools


def _tried(figures: dict) -> str:
    return ", ".join(f"{name} {size:,} B" for name, size in figures.items())


def _plan(graph: OpGraph, schedule: Schedule, board: Board, model_name: str, per_region: bool, schedulers: dict | None = None):
    buffers = _buffers(graph, schedule, board.arena_align)
    pools = _pools(board, per_region)
    orders = f"Operator orders tried (peak bytes): {_tried(schedulers or {})}."
    try:
        plan = plan_arena(buffers, pools)
    except PlanError as e:
        raise DoesNotFitError(f"{model_name} does not fit the RAM regions of board {board.name}: {e} {orders}") from e
    budget = _ram_budget(board)
    if not per_region and plan.total_bytes > budget:
        raise DoesNotFitError(
            f"{model_name} needs an arena of {plan.total_bytes:,} bytes (lower bound {plan.lower_bound:,} B "
            f"for the {schedule.scheduler} operator order) but board {board.name} has {budget:,} bytes of RAM left "
            f"after its {board.stack_size:,}-byte stack ({board.ram_bytes:,} B in all). Best plan found: the "
            f"{schedule.scheduler} order placed by {plan.algorithm}, {plan.total_bytes:,} B. {orders} Placements "
            f"tried (arena bytes): {_tried(plan.tried)}. Use a board with more RAM, a smaller model, or --ram to "
            "plan for a larger budget."
        )
    check_plan(buffers, plan, pools)  # the independent checker runs on every plan
    return buffers, plan


def _schedule(graph: OpGraph, board: Board, seconds: float) -> tuple[Schedule, dict]:
    """The lowest-peak operator order the schedulers find within the time budget, and each one's peak."""
    order, peak, report = best_schedule(Dag.from_graph(graph, board.arena_align), seconds)
    tried = {name: r["peak"] for name, r in report.items() if isinstance(r, dict)}
    return Schedule(order, peak, report["best"]), tried


def floor_passes(options: BuildOptions) -> tuple[str, ...]:
    """The catalogue passes the build may run: the user's ``--passes``, all of them when the orchestrator
    searches, else edgemem's fixed sequence (the in-place ones only with ``inplace``)."""
    from .passes.catalogue import catalogue
    from .passes.orchestrate import DEFAULT_SEQUENCE

    if options.passes is not None:
        return tuple(options.passes)
    names = [p.name for p in catalogue()] if options.opt_seconds > 0 else list(DEFAULT_SEQUENCE)
    return tuple(n for n in names if options.inplace or not n.startswith("inplace"))


def _inplace_kinds() -> frozenset[str]:
    from .memory import Overlap
    from .passes.catalogue import catalogue, floor_capabilities

    caps = floor_capabilities([p.name for p in catalogue() if p.name.startswith("inplace")])
    return frozenset(k for c in caps if isinstance(c, Overlap) for k in c.kinds)


_INPLACE_OPS = _inplace_kinds()  # what the in-place passes may run in place (their own declarations)


def _check_floor(model_path: Path, board: Board, options: BuildOptions | None = None) -> None:
    """Fail before lowering when even the largest single operator cannot fit the board, whatever the memory
    passes that may run remove (each declares it: passes/catalogue.py, memory/floor.py)."""
    from .passes.catalogue import floor_capabilities

    options = options or BuildOptions()
    model = read_tflite(model_path)
    passes = [n for n in floor_passes(options) if floor_capabilities((n,))]  # those that may remove bytes
    floor, op_index = operator_floor_bytes(model, capabilities=floor_capabilities(passes, model))
    budget = _ram_budget(board)
    if floor > budget:
        plan_bytes, algorithm = _file_order_plan(model, board.arena_align)
        raise DoesNotFitError(
            f"{model_path.name} needs at least {floor:,} bytes of activation RAM (operator #{op_index} "
            f"{op_names(model)[op_index]} alone keeps that much live whatever the memory passes that may run "
            f"({', '.join(passes) or 'none'}) remove, so no operator order or placement can use less) but board "
            f"{board.name} has {budget:,} bytes left after its {board.stack_size:,}-byte stack "
            f"({board.ram_bytes:,} B of RAM in all). Best plan found: the file's operator order placed by {algorithm}, "
            f"{plan_bytes:,} B; operator reordering and the placement searches were skipped, as none can beat that "
            "floor. Use a board with more RAM, a smaller input resolution, or --ram to plan for a larger budget."
        )


def _file_order_plan(model, align: int) -> tuple[int, str]:
    """Arena of the file's operator order with the cheap placements: what a plan would need, in milliseconds."""
    ranges = file_order_live_ranges(model)
    buffers = [Buffer(f"{i}:{name}", max(size, 1), first, last, align) for i, (name, size, first, last) in enumerate(ranges)]
    plan = plan_arena(buffers, algorithms=["greedy_by_size", "greedy_by_conflicts"])
    return plan.total_bytes, plan.algorithm


def _optimize(mod, board: Board, options: BuildOptions):
    """The memory passes on the lowered module: the orchestrator (passes/orchestrate.py) within
    ``opt_seconds``, stopping once the arena fits the board's RAM with ``opt_margin`` to spare; else
    edgemem's fixed default sequence (PAD folding, then in-place depthwise, which folding enables, then
    in-place element-wise). Returns the module and what each pass did (with the baselines when
    orchestrated)."""
    if options.passes is not None:
        return _run_passes(mod, options.passes)
    if options.opt_seconds > 0:
        return _orchestrate(mod, board, options)
    from .passes.fold_pad import fold_pad
    from .passes.inplace import inplace_depthwise, inplace_elementwise

    sequence = [("fold_pad", fold_pad)]
    if options.inplace:
        sequence += [("inplace_depthwise", inplace_depthwise), ("inplace_elementwise", inplace_elementwise)]
    report = []
    for name, transform in sequence:
        new = transform(mod)
        report.append({"pass": name, "changed": not new.same_as(mod)})
        mod = new
    return mod, {"sequence": report}


def _run_passes(mod, names: tuple[str, ...]):
    """The user's own pass sequence (``--passes``), each pass by its catalogue name."""
    from .passes.catalogue import catalogue

    known = {p.name: p for p in catalogue()}
    unknown = [n for n in names if n not in known]
    if unknown:
        raise EdgememError(f"unknown memory pass {', '.join(map(repr, unknown))} in --passes; the passes are: "
                         f"{', '.join(known)}.")  # fmt: skip
    report = []
    for name in names:
        new = known[name](mod)
        report.append({"pass": name, "changed": not new.same_as(mod)})
        mod = new
    return mod, {"sequence": report, "given": True}


def _orchestrate(mod, board: Board, options: BuildOptions):
    from .passes.catalogue import catalogue
    from .passes.orchestrate import DEFAULT_SEQUENCE, measure, orchestrate

    passes = [p for p in catalogue() if options.inplace or not p.name.startswith("inplace")]
    result = orchestrate(mod, passes, seed=options.opt_seed, time_budget=options.opt_seconds,
                         target_bytes=_ram_budget(board), margin=options.opt_margin, baselines=("none", "tvm_default", "fixed"),
                         fixed_sequence=DEFAULT_SEQUENCE, measure_fn=lambda m: measure(m, board.arena_align))  # fmt: skip
    report = result.report()
    report["sequence"] = [{"pass": s.pop("name"), **s} for s in report["sequence"]]
    return result.module, {**report, "baselines": result.baselines}


def _check_flash(graph: OpGraph, board: Board, model_name: str) -> None:
    weights = sum(t.nbytes for t in graph.constants())
    if weights > board.flash_bytes:
        raise DoesNotFitError(
            f"{model_name} has {weights:,} bytes of weights but board {board.name} has {board.flash_bytes:,} "
            "bytes of flash. Use a board with more flash or a smaller model (or --flash to override)."
        )


def _stack_estimate(project: Path, graph: OpGraph) -> int:
    """Deepest call chain main -> edgemem_run -> kernel, from gcc's -fstack-usage files."""
    frames: dict[str, int] = {}
    for su in project.glob("*.su"):
        for line in su.read_text().splitlines():
            m = re.match(r"^.*:\d+:\d+:(\w+)\s+(\d+)\s+\w+", line)
            if m:
                frames[m.group(1)] = max(frames.get(m.group(1), 0), int(m.group(2)))
    kernels = max((frames.get(op.name, 0) for op in graph.ops), default=0)
    return frames.get("main", 0) + frames.get("edgemem_run", 0) + kernels


def _check_output_dir(model_path: Path, out_dir: Path) -> None:
    """Replacing the output directory must not delete the model being built (a model kept inside it)."""
    if model_path.resolve().is_relative_to(out_dir.resolve()):
        raise EdgememError(
            f"the model '{model_path}' is inside the output directory '{out_dir}', which the build replaces: it would "
            "be deleted. Choose another directory with -o, or move the model out of it."
        )


def _write_atomically(out_dir: Path, overwrite: bool, fill) -> None:
    """Write the project into a temporary sibling and move it into place only when complete."""
    out_dir = out_dir.resolve()
    if out_dir.exists() and not overwrite:
        raise EdgememError(
            f"output directory '{out_dir}' already exists; edgemem does not overwrite it silently. "
            "Pass --force to replace it, or choose another directory with -o."
        )
    out_dir.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{out_dir.name}.", dir=out_dir.parent))
    try:
        fill(tmp)
        if out_dir.exists():
            shutil.rmtree(out_dir)
        os.replace(tmp, out_dir)
    finally:
        if tmp.exists():
            shutil.rmtree(tmp, ignore_errors=True)


def build(model_path: str | Path, board_name: str, out_dir: str | Path, options: BuildOptions | None = None) -> BuildResult:
    """The whole pipeline for one model and one board; raises EdgememError subclasses on bad input."""
    options = options or BuildOptions()
    t0 = time.perf_counter()
    _check_output_dir(Path(model_path), Path(out_dir))
    board = board_with_budget(load_board(board_name), options.ram, options.flash)
    _check_floor(Path(model_path), board, options)
    model: ImportedModel = import_tflite(model_path)
    lowered, passes_report = _optimize(lower_to_kernels(model.relax_mod, model.op_labels), board, options)
    graph = read_graph(lowered)
    _check_flash(graph, board, model.path.name)
    schedule, schedulers = _schedule(graph, board, options.schedule_seconds)
    buffers, plan = _plan(graph, schedule, board, model.path.name, options.pool_per_region, schedulers)
    kernels = compile_kernels(graph)
    pools = [PoolLayout(name, size) for name, size in plan.pool_sizes.items()]
    placements = {name: (p.pool, p.offset) for name, p in plan.placements.items()}
    sources = render_model(
        model_name=model.path.name, board=board, graph=graph, order=schedule.order, placements=placements,
        pools=pools, lower_bound=plan.lower_bound, scheduler=schedule.scheduler, algorithm=plan.algorithm,
        kernels=kernels, input_infos=model.inputs, output_infos=model.outputs,
    )  # fmt: skip
    if options.profile or (board.device is not None and options.compile):  # the board image carries its input too
        from .reference import seeded_inputs

        sources["profile_inputs.c"] = render_profile_inputs(
            model.path.name, seeded_inputs(model.path, options.profile_seed), options.profile_seed)
    result = BuildResult(model.path, board, Path(out_dir), graph, schedule, plan, None)

    def fill(project: Path) -> None:
        for name, text in sources.items():
            if name != "profile_inputs.c" or options.profile:
                (project / name).write_text(text)
        render_firmware_files(board, project, split_regions=options.pool_per_region, profile=options.profile)
        write_library(project, sources, board, model.path.name)
        if options.compile:
            result.sizes = _link(project, board, plan)
        device_sizes = _link_device(project, board, plan, sources) if board.device is not None and options.compile else None
        result.info = build_info(result, model, schedulers, stack_estimate=_stack_estimate(project, graph),
                                 seconds=time.perf_counter() - t0)  # fmt: skip
        result.info["pass_baselines"] = passes_report.pop("baselines", {})
        result.info["passes"] = passes_report
        result.info["memory"] = memory_info(graph, schedule, buffers, plan, board, _ram_budget(board))  # report.html's figures
        steps = predicted_steps(graph, schedule, buffers, plan, options.profile_seed) \
            if options.profile or device_sizes is not None else None  # fmt: skip
        if options.profile:
            result.info["profile"] = steps
        if device_sizes is not None:  # the board image always profiles (it has no other way to report)
            result.info["board_image"] = {"dir": DEVICE_DIR, "elf": f"{DEVICE_DIR}/firmware.elf", "bin": f"{DEVICE_DIR}/firmware.bin",
                                          "flash_bytes": device_sizes.flash_bytes, "ram_bytes": device_sizes.ram_bytes,
                                          "ticks": board.device.ticks, "cpu_hz": board.device.cpu_hz, "profile": steps}  # fmt: skip
        (project / BUILD_INFO).write_text(json.dumps(result.info, indent=2) + "\n")
        write_report(project, result.info)  # report.html (edgemem/report): timeline, curves, operators, passes

    _write_atomically(Path(out_dir), options.overwrite, fill)
    return result


def predicted_steps(graph: OpGraph, schedule: Schedule, buffers: list[Buffer], plan: ArenaPlan, seed: int) -> dict:
    """What a profiling build must measure, step by step: the bytes live during the step (the storage model's
    curve, edgemem.memory) and, per pool, the high-water mark (highest planned byte written so far; graph
    inputs count from the start)."""
    from .memory import curve

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


def _link(project: Path, board: Board, plan: ArenaPlan) -> FirmwareSizes:
    try:
        return build_firmware(project, board)
    except ToolchainError as e:
        if "edgemem: " in str(e) and ("exceed" in str(e) or "does not fit" in str(e)):
            raise DoesNotFitError(
                f"the firmware does not fit board {board.name}: arena {plan.total_bytes:,} B + stack "
                f"{board.stack_size:,} B + static data exceed its {board.ram_bytes:,} B of RAM or the image exceeds "
                f"its {board.flash_bytes:,} B of flash. Linker said:\n{e}"
            ) from e
        raise


def _link_device(project: Path, board: Board, plan: ArenaPlan, sources: dict) -> FirmwareSizes:
    """The real board's image (project/board): the same model and plan, the board's own addresses, UART and
    cycle counter, no semihosting (what `edgemem flash` writes and `edgemem profile --port` reads)."""
    return _link(render_device_files(board, project, sources), board, plan)


def _tensor_json(info, graph: OpGraph, name: str) -> dict:
    t = graph.tensors[name]
    kind = graph.ops[t.producer].kind if t.producer is not None else "INPUT"
    return {"name": info.name, "shape": list(t.shape), "dtype": t.dtype, "scale": info.scale,
            "zero_point": info.zero_point, "bytes": t.nbytes, "producer": kind}  # fmt: skip


def build_info(result: BuildResult, model: ImportedModel, schedulers: dict, *, stack_estimate: int, seconds: float) -> dict:
    """The machine-readable build report (`edgemem build --json`), also saved as BUILD_INFO."""
    board, plan, sizes, graph = result.board, result.plan, result.sizes, result.graph
    info = {
        "model": str(model.path.resolve()),
        "board": board.name,
        "ops": len(graph.ops),
        "scheduler": result.schedule.scheduler,
        "schedulers_tried": schedulers,  # peak bytes of each operator order tried
        "planner": plan.algorithm,
        "planners_tried": dict(plan.tried),
        "arena_bytes": plan.total_bytes,
        "arena_pools": dict(plan.pool_sizes),
        "lower_bound_bytes": plan.lower_bound,
        "weights_bytes": sum(t.nbytes for t in graph.constants()),
        "state_bytes": sum(t.nbytes for t in graph.states()),  # kept across runs (.data), outside the arena
        "stack_reserved_bytes": board.stack_size,
        "stack_estimate_bytes": stack_estimate,
        "board_ram_bytes": board.ram_bytes,
        "board_flash_bytes": board.flash_bytes,
        "inputs": [_tensor_json(i, graph, n) for i, n in zip(model.inputs, graph.inputs)],
        "outputs": [_tensor_json(i, graph, n) for i, n in zip(model.outputs, graph.outputs)],
        "build_seconds": round(seconds, 3),
    }
    if sizes is not None:
        static = sizes.data_bytes + sizes.bss_bytes
        total = sizes.stack_bytes + static + sizes.arena_bytes
        info.update({
            "flash_bytes": sizes.flash_bytes,
            "static_ram_bytes": static,
            "total_ram_bytes": total,
            "fits": total <= board.ram_bytes and sizes.flash_bytes <= board.flash_bytes,
        })  # fmt: skip
    return info


# ---------------------------------------------------------------- running a build


def load_build_info(out_dir: str | Path) -> dict:
    path = Path(out_dir) / BUILD_INFO
    if not path.is_file():
        raise EdgememError(f"'{out_dir}' is not an edgemem build (no {BUILD_INFO}); run `edgemem build` first.")
    return json.loads(path.read_text())


def _reference_outputs(model_path: str, inputs: list) -> tuple[list | None, str | None]:
    """(outputs, oracle) of the reference for the same inputs: TFLite Micro run in a child process (its Python
    binding aborts the whole process on some converter outputs, and cannot allocate some models at all: then
    LiteRT's, see reference.reference_outputs); (None, None) where TFLM is not installed or neither runs it."""
    from .reference import reference_outputs

    try:
        import tflite_micro  # noqa: F401  (the oracle is optional)
    except ImportError:
        return None, None
    try:
        return reference_outputs(model_path, inputs)
    except RuntimeError:
        return None, None


# Only these operators' int8 outputs may differ from TFLM by one LSB (float exp/log inside).
_LSB_TOLERANT = {"SOFTMAX", "LOGISTIC", "TANH"}


def run(out_dir: str | Path, inputs: list | None = None, *, seed: int = 0, timeout_s: float = 120.0) -> dict:
    """Run a built firmware under QEMU; returns the `edgemem run --json` report (device figures and the
    comparison with TFLite Micro). Without `inputs`, a seeded random input of the model's shape is used."""
    import numpy as np

    from .target.qemu import run_firmware

    info = load_build_info(out_dir)
    if "profile" in info:
        raise EdgememError(
            f"'{out_dir}' is a profiling build: its firmware reports over the UART with an input built into it. "
            f"Use `edgemem profile {out_dir}`, or rebuild without --profile to run it with your own inputs."
        )
    board = board_with_budget(load_board(info["board"]), None, None)
    if inputs is None:
        from .reference import seeded_inputs

        inputs = seeded_inputs(info["model"], seed)
    inputs = [_checked_input(np.asarray(x), spec, i) for i, (x, spec) in enumerate(zip(inputs, info["inputs"]))]
    report = run_firmware(Path(out_dir) / "firmware.elf", board, [x.tobytes() for x in inputs], timeout_s)
    outputs = device_arrays(report.outputs, info["outputs"])
    result = {
        "model": info["model"], "board": info["board"], "arena_bytes": info["arena_bytes"],
        "arena_pools": info["arena_pools"], "lower_bound_bytes": info["lower_bound_bytes"],
        "flash_bytes": info.get("flash_bytes"),
        "peak_stack_bytes": report.peak_stack_bytes,
        "arena_high_water_bytes": report.arena_high_water_bytes,
        "pool_high_water_bytes": report.pool_high_water_bytes,
        "static_ram_bytes": report.static_ram_bytes,
        "total_ram_bytes": report.static_ram_bytes + report.peak_stack_bytes + report.arena_high_water_bytes,
        "instructions": report.instructions,
    }  # fmt: skip
    reference, oracle = _reference_outputs(info["model"], inputs)
    result["oracle"] = oracle
    result.update(_compare(outputs, reference, info["outputs"], oracle))
    result["output_arrays"] = outputs  # numpy arrays: not part of the JSON report
    return result


def _checked_input(x, spec: dict, index: int):
    import numpy as np

    if tuple(x.shape) != tuple(spec["shape"]) or x.dtype != np.dtype(spec["dtype"]):
        raise EdgememError(
            f"input {index} ('{spec['name']}') must be {spec['dtype']}{spec['shape']}, got {x.dtype}{list(x.shape)}. "
            "Quantize and reshape it to the model's input first."
        )
    return x


def device_arrays(raw_outputs: list[bytes], specs: list[dict]) -> list:
    """The device's output bytes as arrays of the build's output dtypes and shapes."""
    import numpy as np

    return [np.frombuffer(raw, dtype=spec["dtype"]).reshape(spec["shape"]) for raw, spec in zip(raw_outputs, specs)]


def _compare(outputs: list, reference: list | None, specs: list[dict], oracle: str | None = "tflm") -> dict:
    import numpy as np

    if reference is None:
        return {"bit_exact": None, "max_abs_diff": None, "matches_reference": None}
    diffs, tolerated = [], True
    for out, ref, spec in zip(outputs, reference, specs):
        d = int(np.max(np.abs(out.astype(np.int64) - np.asarray(ref).astype(np.int64)))) if out.size else 0
        if np.issubdtype(out.dtype, np.floating):
            d = float(np.max(np.abs(out.astype(np.float64) - np.asarray(ref, np.float64))))
        diffs.append(d)
        if np.issubdtype(out.dtype, np.floating):  # float sums may round differently: 1e-5 relative
            allowed = 1e-5 * max(1.0, float(np.max(np.abs(np.asarray(ref, np.float64)), initial=0.0)))
        else:
            # LiteRT (where TFLM cannot run the model) rounds some operators a step away from TFLM, e.g. per-channel
            # FULLY_CONNECTED, and steps compound through layers: two steps, as tests/op_check.py allows
            allowed = 2 if oracle != "tflm" else 1 if spec["producer"] in _LSB_TOLERANT else 0
        tolerated &= d <= allowed
    return {"bit_exact": all(d == 0 for d in diffs), "max_abs_diff": max(diffs, default=0),
            "matches_reference": bool(tolerated)}  # fmt: skip


# ---------------------------------------------------------------- symbolic shapes (--dim)

SYMBOLIC_INFO = "edgemem_symbolic.json"


def plan_symbolic(model_path: str | Path, board_name: str, dims: list, options: BuildOptions | None = None,
                  out_dir: str | Path | None = None) -> dict:  # fmt: skip
    """Schedule and plan once for a range of a symbolic dimension (``dims``: "n=1..64" strings or SymDims).

    Read from the flatbuffer (edgemem.schedule.symbolic: the -1 dims of the model, or its batch dim);
    no TVM lowering and no kernels, which are compiled for concrete shapes. Returns the report (also
    written, with the plan's C edgemem_plan.c/.h, to ``out_dir`` if given): the arena as an expression,
    a sweep comparing it with the concrete plan at each point, and the largest value that fits the board.
    Raises DoesNotFitError when even the lowest value of the range does not fit."""
    from .codegen.symbolic_c import render_plan_c
    from .plan.symbolic import concrete_plan_bytes
    from .plan.symbolic import plan_symbolic as place
    from .schedule.symbolic import SymDag, parse_dim, schedule_symbolic

    options = options or BuildOptions()
    t0 = time.perf_counter()
    board = board_with_budget(load_board(board_name), options.ram, options.flash)
    path = Path(model_path)
    parsed = [parse_dim(d) if isinstance(d, str) else d for d in dims]
    dag = SymDag.from_tflite(path, parsed, board.arena_align)
    order, _, schedulers = schedule_symbolic(dag, options.schedule_seconds)
    plan = place(dag, order, board.arena_align)
    dim, budget = parsed[0], _ram_budget(board)
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
        concrete = concrete_plan_bytes(dag.at(env), board.arena_align, options.schedule_seconds / len(points))
        arena = plan.peak_at(env)
        sweep.append({dim.name: env[dim.name], "symbolic_bytes": arena, "concrete_bytes": concrete,
                      "ratio": round(arena / concrete, 4) if concrete else 1.0, "fits": arena <= budget})  # fmt: skip
    info = {
        "model": str(path.resolve()), "board": board.name, "ops": dag.n,
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

        _write_atomically(Path(out_dir), options.overwrite, fill)
        info["files"] = sorted(sources)
    return info
