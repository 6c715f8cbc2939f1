"""`edgemem analyze`: what a model needs and whether it fits a board, read from the flatbuffer alone (no TVM
lowering, no toolchain, no QEMU), in about a second.

Per operator: its type, output shape, MACs, weight bytes and the activation bytes live at its step in the file's
order (the storage model of edgemem.memory). For the model: every operator edgemem has no kernel for, listed at
once (frontend/support.py); the arena the build plans for the same options (the build's schedulers and
placements on the storage model the memory passes leave, read from the flatbuffer: see "the build's plan"
below); the RAM floor no order or placement can beat whatever the memory passes remove (memory/floor.py, the
build's own early check); the flash the image needs (the weights plus an estimate of the code, see
``flash_estimate``) and the firmware's static RAM next to the arena; and, for a model with a symbolic (-1)
dimension, the largest value of it whose plan fits.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from pathlib import Path

import numpy as np

from .board import load_board
from .frontend.footprint import indices, is_constant, op_names, tensor_bytes
from .frontend.tflite_import import read_tflite, tensor_name

_SYMBOLIC_RANGE = (1, 4096)  # values of a -1 dimension searched for the largest that fits

# The image's flash besides the flatbuffer's weights (code, the runtime, tables, requantization constants),
# measured on the 48 third-party models edgemem builds (benchmarks/public.md, linked flash less the weights):
# 5,488 B for one LEAKY_RELU, then 276 to 2,039 B per operator (median 1,035). The range: a 5,000 B runtime
# plus 256 to 2,560 B per operator; the estimate: 1,024 B per operator.
CODE_BASE_BYTES = 5000
CODE_PER_OP_BYTES = (256, 1024, 2560)  # low, estimate, high
# The firmware's own .data/.bss (runtime, drivers): 204 B on the stm32f746 image. An estimate: analyze says
# "may not fit" (never "does not fit") when the arena fits only without it; the build measures it when linking.
STATIC_RAM_ESTIMATE = 256


@dataclass
class OperatorRow:
    index: int
    name: str
    operand_type: str
    output: str
    output_shape: list[int]
    macs: int
    weight_bytes: int
    live_bytes: int  # activations live at this step in the file's order (0 for an operator folded at import)
    supported: bool


@dataclass
class Analysis:
    model: str
    board: str
    operators: list[OperatorRow]
    unsupported: list[str]  # "operator #i NAME (output 'x') on TYPE"
    arena_bytes: int  # the build's arena for the same options (its schedulers and planner, passes modeled)
    arena_pools: dict[str, int]
    lower_bound_bytes: int  # the chosen order's peak of live bytes
    scheduler: str
    schedulers_tried: dict[str, int]
    planner: str
    passes_modeled: list[str]  # the memory passes whose storage effects the arena counts
    plan_note: str  # how the figure relates to the build's (passes not modeled)
    arena_exact: bool  # False: float operators TVM's FuseOps may fuse while lowering (not modeled)
    ram_floor_bytes: int  # no order or placement uses less (whatever the memory passes remove)
    ram_floor_operator: int
    ram_floor_assumes: str  # what the floor assumed of the patch pass ("" when it splits nothing)
    file_order_arena_bytes: int  # the file's order, cheap placements, no pass
    ram_budget_bytes: int  # the board's RAM less its stack
    stack_bytes: int
    board_ram_bytes: int
    weights_bytes: int
    board_flash_bytes: int
    macs: int
    verdict: str  # "fits"; "may fit" (only passes not modeled could make the arena fit); "may not fit" (the arena fits
    # but the flash estimate's range or the static RAM estimate straddles the board's figure); "does not fit"
    flash_estimate_bytes: int = 0  # weights + the code estimate
    flash_range_bytes: tuple[int, int] = (0, 0)  # weights + the code range (low, high)
    static_ram_estimate_bytes: int = STATIC_RAM_ESTIMATE
    symbolic: dict = field(default_factory=dict)  # {"dim": name, "largest_fitting": n or None, "range": [lo, hi]}

    def to_json(self) -> dict:
        return asdict(self)


def _macs(name: str, shape_of, ins: list[int], outs: list[int], op=None) -> int:
    """Multiply-accumulates of the operators that do them, from the tensor shapes (TFLite layouts); a pooling
    window counts one per element it reads, as the kernels' own counts do."""
    if not outs or not ins:
        return 0
    if name in ("AVERAGE_POOL_2D", "MAX_POOL_2D") and op is not None:
        import tflite

        from .frontend.footprint import builtin_options

        o = builtin_options(op, tflite.Pool2DOptions)
        return int(np.prod(shape_of(outs[0]))) * o.FilterHeight() * o.FilterWidth() if o is not None else 0
    out = int(np.prod(shape_of(outs[0]))) if shape_of(outs[0]) else 0
    w = shape_of(ins[1]) if len(ins) > 1 else []
    if name == "CONV_2D" and len(w) == 4:  # [Cout, kh, kw, Cin]
        return out * w[1] * w[2] * w[3]
    if name == "DEPTHWISE_CONV_2D" and len(w) == 4:  # [1, kh, kw, Cout]
        return out * w[1] * w[2]
    if name == "FULLY_CONNECTED" and len(w) == 2:  # [Cout, K]
        return out * w[1]
    if name == "TRANSPOSE_CONV" and len(ins) > 2:  # inputs: shape, weights [Cout, kh, kw, Cin], x
        wt, x = shape_of(ins[1]), shape_of(ins[2])
        return int(np.prod(x)) * wt[0] * wt[1] * wt[2] if len(wt) == 4 and x else 0
    if name in ("MEAN", "SUM", "REDUCE_MAX", "REDUCE_MIN", "ARG_MAX", "ARG_MIN", "CUMSUM"):
        return int(np.prod(shape_of(ins[0])))  # every input element read once
    if name == "RESIZE_BILINEAR":
        return 4 * out
    if name == "BATCH_MATMUL":
        a = shape_of(ins[0])
        return out * a[-1] if a else 0
    return 0


def _symbolic_dim(model) -> bool:
    sg = model.Subgraphs(0)
    for k in range(sg.InputsLength()):
        t = sg.Tensors(int(sg.Inputs(k)))
        if any(d < 0 for d in indices(t.ShapeSignatureAsNumpy())):
            return True
    return False


def _largest_fitting(path: Path, board, budget: int) -> dict:
    """The symbolic plan (schedule/symbolic.py, plan/symbolic.py: what `build --dim` does) over 1..4096."""
    from .plan.symbolic import plan_symbolic as place
    from .schedule.symbolic import SymDag, SymDim, schedule_symbolic

    from .errors import EdgememError

    dim = SymDim("n", *_SYMBOLIC_RANGE)
    try:
        dag = SymDag.from_tflite(path, [dim], board.arena_align)
    except EdgememError as exc:  # a -1 dimension the symbolic planner does not bind: say so, analyze the rest
        return {"dim": dim.name, "range": list(_SYMBOLIC_RANGE), "largest_fitting": None, "arena_expr": "",
                "note": " ".join(str(exc).split())}
    order, _, _ = schedule_symbolic(dag, 0.3)
    plan = place(dag, order, board.arena_align)
    return {"dim": dim.name, "range": list(_SYMBOLIC_RANGE), "largest_fitting": plan.largest_fitting(budget, dim.name),
            "arena_expr": plan.peak_text(), "note": ""}  # fmt: skip


def analyze(model_path: str | Path, board_name: str, ram: int | None = None, flash: int | None = None,
            options=None) -> Analysis:
    """``options``: the build's (options.BuildOptions: passes, opt_seconds, schedule_seconds, pool_per_region,
    stack); ``ram``/``flash`` override the board's figures as `build --ram/--flash` do."""
    from .frontend.fold import fold_model
    from .frontend.ops.registry import operand_type
    from .frontend.support import unsupported_operators
    from .memory import from_tflite
    from .passes.catalogue import catalogue, floor_capabilities
    from .budget import board_with_budget, file_order_plan, ram_budget, with_stack
    from .options import BuildOptions

    options = options or BuildOptions()
    path = Path(model_path)
    model = read_tflite(path)
    board = with_stack(board_with_budget(load_board(board_name), ram, flash), options.stack)
    sg = model.Subgraphs(0)
    names = op_names(model)
    missing = unsupported_operators(model, names)
    missing_at = {u.index for u in missing}
    folded_values, folded = fold_model(model)
    constants = frozenset(folded_values)  # outputs of operators evaluated at import: constants, not RAM

    def shape_of(t: int) -> list[int]:
        return indices(sg.Tensors(t).ShapeAsNumpy())

    mm = from_tflite(model, 1, folded=folded, constants=constants)
    live = mm.curve(list(range(mm.n)))
    live_at = {i: int(live[v]) for v, i in enumerate(mm.op_index)}
    rows, weights_seen = [], set()
    for i, name in enumerate(names):
        op = sg.Operators(i)
        ins = [t for t in indices(op.InputsAsNumpy()) if t >= 0]
        outs = [t for t in indices(op.OutputsAsNumpy()) if t >= 0]
        consts = [t for t in ins if is_constant(model, sg.Tensors(t)) and t not in weights_seen]
        weights_seen.update(consts)
        rows.append(OperatorRow(
            index=i, name=name, operand_type=operand_type(sg, op, model, name),
            output=tensor_name(sg, outs[0]) if outs else "none", output_shape=shape_of(outs[0]) if outs else [],
            macs=_macs(name, shape_of, ins, outs, op), weight_bytes=sum(tensor_bytes(sg.Tensors(t)) for t in consts),
            live_bytes=live_at.get(i, 0), supported=i not in missing_at,
        ))  # fmt: skip
    every_pass = [p.name for p in catalogue()]
    from .frontend.footprint import operator_floor_bytes

    from .budget import patch_assumption

    outside = bool(getattr(options, "input_outside", False))
    caps = floor_capabilities(every_pass, model, outside)
    floor, floor_op = operator_floor_bytes(model, capabilities=caps, input_outside=outside)
    assumes = patch_assumption(model, caps, outside).removeprefix("; assumed: ")
    file_bytes, _ = file_order_plan(model, board.arena_align)
    budget = ram_budget(board)
    plan = build_plan(model, folded, constants, board, options)
    floats = sorted({r.name for r in rows if r.operand_type == "float32" and r.name not in ("QUANTIZE", "DEQUANTIZE")
                     and r.index not in folded})  # fmt: skip
    if floats:
        plan["note"] += (f"; float operators ({', '.join(floats)}): lowering fuses float chains with TVM's FuseOps, "
                         "which this figure does not model, so the build's arena may differ")  # fmt: skip
    weights = sum(r.weight_bytes for r in rows)
    fits = plan["arena_bytes"] is not None and plan["arena_bytes"] <= budget
    verdict = "fits" if fits else ("may fit" if floor <= budget and plan["unmodeled"] else "does not fit")
    flash_low, flash_mid, flash_high = flash_estimate(weights, len(rows))
    if weights > board.flash_bytes or flash_low > board.flash_bytes:
        verdict = "does not fit"
    elif verdict == "fits" and (flash_high > board.flash_bytes or plan.get("static_tight")
                                or plan["arena_bytes"] + STATIC_RAM_ESTIMATE > budget):
        verdict = "may not fit"
    # with the input outside, the caller's buffer is no arena tensor (mcunetv2_large's 602,112 B float input)
    inputs = frozenset(int(t) for t in sg.InputsAsNumpy()) if outside and sg.InputsLength() else frozenset()
    big_bytes, big_name = _largest_activation(model, constants | inputs, _tiled(model, caps))
    if verdict == "may fit" and big_bytes > budget:  # the floor counted on a fusion the build does not do for it
        verdict = "does not fit"
        plan["note"] += (f"; tensor '{big_name}' alone is {big_bytes:,} B, more than the {budget:,} B of RAM for the "
                         "arena: no modeled pass removes it, so no build fits")  # fmt: skip
    searched = verdict == "may fit" and options.passes is None and options.opt_seconds > 0
    named = options.passes is not None and plan["unmodeled"] and verdict != "does not fit"  # --passes patches, ...
    if (searched or named) and not missing:
        why = (f"--passes names {', '.join(plan['unmodeled'])}, which only the lowered kernels tell" if named else
               f"the modeled passes' plan ({plan['arena_bytes']:,} B) does not fit" if plan["arena_bytes"] else
               "the modeled passes' plan does not fit")  # fmt: skip
        plan, verdict = _planned_by_build(path, board_name, ram, flash, options, plan, budget, why)
        if verdict == "fits" and (flash_high > board.flash_bytes or plan["arena_bytes"] + STATIC_RAM_ESTIMATE > budget):
            verdict = "may not fit"
    return Analysis(
        model=str(path), board=board.name, operators=rows, unsupported=[u.label() for u in missing],
        arena_bytes=plan["arena_bytes"], arena_pools=plan["arena_pools"], lower_bound_bytes=plan["lower_bound_bytes"],
        scheduler=plan["scheduler"], schedulers_tried=plan["schedulers_tried"], planner=plan["planner"],
        passes_modeled=plan["passes"], plan_note=plan["note"], arena_exact=not floats,
        ram_floor_bytes=floor, ram_floor_operator=floor_op, ram_floor_assumes=assumes, file_order_arena_bytes=file_bytes, ram_budget_bytes=budget,
        stack_bytes=board.stack_size, board_ram_bytes=board.ram_bytes, weights_bytes=weights,
        board_flash_bytes=board.flash_bytes, macs=sum(r.macs for r in rows), verdict=verdict,
        flash_estimate_bytes=flash_mid, flash_range_bytes=(flash_low, flash_high),
        symbolic=_largest_fitting(path, board, budget) if _symbolic_dim(model) else {},
    )  # fmt: skip


def _planned_by_build(path: Path, board_name: str, ram, flash, options, modeled: dict, budget: int,
                      why: str) -> tuple[dict, str]:  # fmt: skip
    """(plan, verdict) when the modeled passes leave more than the budget but the floor does not (the orchestrator
    then tries the work-adding passes: patches, rolling rows, rematerialization, passes/optimize.py
    ``work_adding``), or --passes names a pass the storage model does not reproduce: those work on the lowered
    kernels, so the build's own stages up to the plan answer (pipeline.plan_only: seconds to a minute, not the
    second of the storage model) -- the same arena and verdict as `build`, not a guess (issue 33)."""
    import dataclasses
    import time

    from .errors import DoesNotFitError, EdgememError
    from .pipeline import plan_only

    t0 = time.perf_counter()
    try:
        result = plan_only(path, board_name, dataclasses.replace(options, ram=ram, flash=flash))
    except DoesNotFitError as exc:
        arena = getattr(exc, "arena_bytes", None)
        note = (f"{why}, so the build's own stages planned it (lowering and the memory passes), in "
                f"{time.perf_counter() - t0:.0f} s: refused"
                + (f", best plan {arena:,} B" if arena else ""))  # fmt: skip
        return {**modeled, "arena_bytes": arena if arena else modeled["arena_bytes"], "note": note}, "does not fit"
    except EdgememError as exc:  # a refusal the storage model does not foresee: keep its "may fit", say why
        return {**modeled, "note": modeled["note"] + f"; the build's own plan failed: {' '.join(str(exc).split())[:300]}"}, "may fit"
    info = result.info
    taken = ((info.pareto or {}).get("taken") or {}).get("sequence")  # the passes the objective took
    sequence = list(options.passes) if taken is None and options.passes is not None else list(taken or [])
    note = (f"{why}, so the build's own stages planned it (lowering and the memory passes), in "
            f"{time.perf_counter() - t0:.0f} s: passes {', '.join(sequence) or 'none'}")
    plan = {**modeled, "arena_bytes": info.arena_bytes, "arena_pools": dict(info.arena_pools),
            "lower_bound_bytes": info.lower_bound_bytes, "scheduler": info.scheduler, "planner": info.planner,
            "passes": sequence, "note": note}  # fmt: skip
    return plan, "fits" if info.arena_bytes <= budget else "does not fit"


def flash_estimate(weights: int, operators: int) -> tuple[int, int, int]:
    """(low, estimate, high) bytes of flash an image of ``operators`` operators and ``weights`` bytes of weights
    takes: the weights plus the code range measured on the published models (CODE_PER_OP_BYTES)."""
    low, mid, high = (weights + CODE_BASE_BYTES + per_op * operators for per_op in CODE_PER_OP_BYTES)
    return low, mid, high


def _largest_activation(model, constants: frozenset, tiled: frozenset = frozenset()) -> tuple[int, str]:
    """(bytes, name) of the largest tensor the model declares that is not a constant nor ``tiled``: what RAM
    must hold whole unless a pass removes it."""
    sg = model.Subgraphs(0)
    best = (0, "")
    for t in range(sg.TensorsLength()):
        tensor = sg.Tensors(t)
        if t not in constants and t not in tiled and not is_constant(model, tensor):
            best = max(best, (tensor_bytes(tensor), tensor_name(sg, t)))
    return best


def _tiled(model, capabilities) -> frozenset:
    """The tensors a patch stage (the floor's assumption, passes/patches.py and rolling.py) never holds whole:
    made and read only by the stage's operators, not a model output. openmv_movenet_singlepose_192's 903,264-byte
    PAD output was counted whole, so analyze said "no build fits" a board the build fits (387,072 B)."""
    from .frontend.footprint import patch_stage_ops

    stage = set(patch_stage_ops(model, capabilities))
    sg = model.Subgraphs(0)
    made, read = {}, {}
    for i in range(sg.OperatorsLength()):
        op = sg.Operators(i)
        for t in indices(op.OutputsAsNumpy()):
            made[t] = i
        for t in indices(op.InputsAsNumpy()):
            read.setdefault(t, set()).add(i)
    outputs = set(indices(sg.OutputsAsNumpy()))
    return frozenset(t for t, i in made.items() if i in stage and t not in outputs and read.get(t, {-1}) <= stage)


# ---------------------------------------------------------------- the build's plan, from the flatbuffer
#
# The build's arena is: lowering, the memory passes, the operator schedulers (schedule/best.py) and the
# placements (plan/). Lowering builds every kernel (1-4 s on the larger models), too slow for an answer in
# about a second, but what the passes do to the *storage* is a function of the flatbuffer: which tensor
# vanishes, which output is written over which dying input, which kernel needs a workspace. So analyze
# builds the storage model from the flatbuffer (memory.from_tflite, as the early floor does), applies the
# fixed pass sequence's storage effects with the conditions the passes check (passes/fold_pad.py,
# passes/inplace.py, passes/residual.py: ``_residual_pairs``) and lowering's own reshaping of the graph (a
# SPLIT becomes one kernel per part), and then runs the build's own schedulers and planner on it. The result
# is the arena of `build --opt-time 0` (the fixed sequence); the orchestrator's result is never larger (it
# starts from that sequence, and stops there when it fits with its margin), and equal on every shared model
# (benchmarks/analyze.md). Partial liveness (passes/overlap.py, not in the fixed sequence) is modeled when
# named in --passes (``_overlaps``: the pass's own shift choice on the window geometry), after the others.
# Passes the model does not reproduce (concat_inplace, fold_dequantize, TVM's fusion) are named in
# ``Analysis.plan_note``; float operators, which lowering may fuse with TVM's FuseOps, make the figure an
# estimate (``arena_exact``).

_MODELED = ("fold_pad", "inplace_depthwise", "inplace_residual", "inplace_elementwise", "inplace_overlap")
_ELEMENTWISE = ("QUANTIZE", "ADD", "MUL")
_SPLITS = ("SPLIT", "SPLIT_V", "UNPACK")
_INT8, _INT16 = 9, 7  # TFLite tensor types


def _conv_padding(op, x_shape, w_shape, out_shape, options=None) -> tuple[list[int], list[int], list[int]]:
    """(stride, dilation, [top, left]) of a TFLite DEPTHWISE_CONV_2D (or, with ``options`` Conv2DOptions, a
    CONV_2D; weights [O or 1, KH, KW, ..] either way), padding as TFLite's SAME computes it."""
    import tflite

    from .frontend.footprint import builtin_options

    o = builtin_options(op, options or tflite.DepthwiseConv2DOptions)
    stride = [o.StrideH(), o.StrideW()]
    dil = [o.DilationHFactor() or 1, o.DilationWFactor() or 1]
    pad = [0, 0]
    if o.Padding() == tflite.Padding.SAME:
        for a in range(2):
            total = max((out_shape[1 + a] - 1) * stride[a] + (w_shape[1 + a] - 1) * dil[a] + 1 - x_shape[1 + a], 0)
            pad[a] = total // 2
    return stride, dil, pad


def _pad_amounts(model, op) -> list[list[int]] | None:
    """A PAD's [[before, after]] per dimension, from its constant paddings tensor (None if not constant)."""
    sg = model.Subgraphs(0)
    t = sg.Tensors(int(op.Inputs(1)))
    buf = model.Buffers(t.Buffer())
    if buf is None or buf.DataLength() == 0:
        return None
    dtype = np.int64 if t.Type() == 4 else np.int32
    return np.frombuffer(buf.DataAsNumpy().tobytes(), dtype=dtype).reshape(-1, 2).tolist()


def modeled_memory(model, folded, align: int, passes=None, constants=frozenset(), input_outside: bool = False):
    """The storage model of the lowered graph after ``passes`` (the fixed sequence by default), read from the
    flatbuffer (``folded``/``constants``: frontend/fold.py's operators evaluated at import and their outputs).
    Sizes unaligned when ``align`` is 1, as the planner's buffers count them. ``input_outside``: the graph
    inputs are the caller's buffers, as ir/outside.py's ``inputs_outside`` plans them (no storage; an output
    in place over one gets its own)."""
    from .kernels.conv16 import MAX_INPLACE_DELAY16
    from .kernels.int8_ops import depthwise_inplace_delay
    from .memory import MemOp, MemoryModel, Storage, from_tflite
    from .memory.adapters import aligned

    if passes is None:
        from .passes.orchestrate import DEFAULT_SEQUENCE as passes
    sg = model.Subgraphs(0)
    mm = from_tflite(model, align, folded=folded, constants=constants)
    tensor_of = mm.tensor_of  # storage name -> tflite tensor
    views = dict(mm.views)  # the file's views (RESHAPE, ...): lowering's non-kernel bindings
    fop = {v: sg.Operators(i) for v, i in enumerate(mm.op_index)}

    def tensor(t):
        return sg.Tensors(t)

    def shape(t):
        return indices(tensor(t).ShapeAsNumpy())

    def zp(t):
        q = tensor(t).Quantization()
        return int(q.ZeroPointAsNumpy()[0]) if q is not None and q.ZeroPointLength() else 0

    def data_input(v):  # the tensor of input 0 of op v (None if absent)
        ins = indices(fop[v].InputsAsNumpy())
        return ins[0] if ins and ins[0] >= 0 else None

    removed: set[int] = set()
    conv_pad: dict[int, list[int]] = {}  # depthwise op -> extra [top, left] padding from a folded PAD
    conv_x: dict[int, str] = {}  # conv op -> the storage it reads once its PAD folded
    if "fold_pad" in passes:
        for v, op in enumerate(mm.ops):
            if op.kind not in ("PAD", "PADV2") or len(op.writes) != 1 or len(op.reads) != 1:
                continue
            out = mm.storages[op.writes[0]]
            t_out = tensor_of[out.name]
            amounts = _pad_amounts(model, fop[v])
            if out.pinned or not out.readers or amounts is None or len(amounts) != 4 or amounts[0] != [0, 0] \
                    or amounts[3] != [0, 0] or tensor(t_out).Type() != _INT8:  # fmt: skip
                continue
            if op.kind == "PADV2":
                ins = indices(fop[v].InputsAsNumpy())
                if len(ins) < 3 or ins[2] < 0:
                    continue
                buf = model.Buffers(tensor(ins[2]).Buffer())
                if buf is None or buf.DataLength() != 1 or int(np.frombuffer(buf.DataAsNumpy().tobytes(), np.int8)[0]) != zp(t_out):
                    continue
            readers = out.readers
            if not all(mm.ops[r].kind in ("CONV_2D", "DEPTHWISE_CONV_2D") and data_input(r) == t_out
                       and indices(fop[r].InputsAsNumpy()).count(t_out) == 1 for r in readers):  # fmt: skip
                continue
            removed.add(v)
            src = mm.storages[op.reads[0]]
            src.readers = [r for r in src.readers if r != v] + [r for r in readers if r not in src.readers]
            del mm.storages[out.name]
            mm.views[out.name] = src.name
            for r in readers:
                mm.ops[r].reads = [src.name if s == out.name else s for s in mm.ops[r].reads]
                conv_pad[r] = [amounts[1][0], amounts[2][0]]
                # the convolution now reads the PAD's input: its own storage, or a view the in-place pass refuses
                conv_x[r] = src.name if tensor_of.get(src.name) == indices(fop[v].InputsAsNumpy())[0] else None
    workspaces: dict[int, int] = {}
    if "inplace_depthwise" in passes:
        for v, op in enumerate(mm.ops):
            if v in removed or op.kind != "DEPTHWISE_CONV_2D" or len(op.writes) != 1:
                continue
            t_in = data_input(v)
            x_name = conv_x[v] if v in conv_x else next((s for s in op.reads if tensor_of.get(s) == t_in), None)
            if x_name is None:
                continue  # its input is a view (reshape) or a constant: the pass leaves it
            x = mm.storages[x_name]
            t_x = tensor_of[x_name]
            ins = indices(fop[v].InputsAsNumpy())
            xs, ws, os_ = shape(t_x), shape(ins[1]), shape(indices(fop[v].OutputsAsNumpy())[0])
            wide = tensor(t_x).Type() == _INT16
            if tensor(t_x).Type() not in (_INT8, _INT16) or len(xs) != 4 or xs[0] != 1 or ws[3] != xs[3] \
                    or int(np.prod(os_)) > int(np.prod(xs)) or x.readers != [v] or x.pinned:  # fmt: skip
                continue
            stride, dil, pad = _conv_padding(fop[v], shape(t_in), ws, os_)
            extra = conv_pad.get(v, [0, 0])
            delay = depthwise_inplace_delay(xs, ws[1:], stride, dil, [pad[0] + extra[0], pad[1] + extra[1]], os_)
            if wide and not 1 <= delay <= MAX_INPLACE_DELAY16:
                continue
            mm.storages[op.writes[0]].alias = x_name
            if delay == 0:
                workspaces[v] = xs[1] * xs[2]
    if "inplace_residual" in passes:
        for a, r, skip in _residual_pairs(model, mm, fop, removed, views, constants):
            anchor, add = mm.ops[a], mm.ops[r]
            conv_out = anchor.writes[0]
            # the fused kernel sits where the ADD was (the pass replaces the ADD's binding, drops the anchor's):
            # it reads the anchor's inputs, then the skip, and writes over the skip
            add.reads = list(dict.fromkeys([*anchor.reads, *(s for s in add.reads if s != conv_out)]))
            add.kind = f"{anchor.kind}+{add.kind}"
            for name in anchor.reads:
                st = mm.storages[name]
                st.readers = list(dict.fromkeys(r if x == a else x for x in st.readers))
            del mm.storages[conv_out]
            mm.storages[add.writes[0]].alias = skip
            removed.add(a)
    if "inplace_elementwise" in passes:
        aliased = {s.name for s in mm.storages.values() if s.alias}
        for v, op in enumerate(mm.ops):
            if v in removed or op.kind not in _ELEMENTWISE or len(op.writes) != 1 or op.writes[0] in aliased:
                continue
            t_out = tensor_of[op.writes[0]]
            for t in indices(fop[v].InputsAsNumpy()):
                name = next((s for s in op.reads if tensor_of.get(s) == t), None)
                if name is None:
                    continue
                x = mm.storages[name]
                same = shape(t) == shape(t_out)
                wide_enough = _itemsize(tensor(t)) >= _itemsize(tensor(t_out))
                if same and wide_enough and x.readers == [v] and not x.pinned:
                    mm.storages[op.writes[0]].alias = name
                    break
    overlaps: dict[str, tuple[int, tuple]] = {}  # output storage -> (shift, rows) over its alias
    if "inplace_overlap" in passes:
        overlaps = _overlaps(model, mm, fop, removed, conv_x, conv_pad, views)
        for name, (x_name, shift, rows) in overlaps.items():
            st = mm.storages[name]
            st.alias, st.shift, st.rows = x_name, shift, rows
    if input_outside:
        _drop_inputs(mm, {int(t) for t in indices(sg.InputsAsNumpy())})
    # SPLIT/SPLIT_V/UNPACK: lowering makes one strided-slice kernel per part (passes/split_slices.py)
    new_ops, index, op_index = [], {}, []
    producer: dict[str, int] = {}
    for v in range(mm.n):
        if v in removed:
            continue
        op = mm.ops[v]
        parts = [[w] for w in op.writes] if op.kind in _SPLITS and len(op.writes) > 1 else [op.writes]
        index[v] = []
        for writes in parts:
            index[v].append(len(new_ops))
            for w in writes:
                producer[w] = len(new_ops)
            new_ops.append(MemOp(op.name, op.kind, list(op.reads), list(writes), []))
            op_index.append(mm.op_index[v])
    storages = {}
    for st in mm.storages.values():
        readers = [k for r in st.readers if r in index for k in index[r]]
        storages[st.name] = Storage(st.name, st.size, producer.get(st.name) if st.producer is not None else None,
                                    readers, st.pinned, st.temp, st.alias, st.shift, st.rows)  # fmt: skip
    for v, size in workspaces.items():
        name = f"{mm.ops[v].name}#{v}:workspace"
        k = index[v][0]
        storages[name] = Storage(name, aligned(size, align), k, [], temp=True)
        new_ops[k].writes.append(name)
    out = MemoryModel(new_ops, storages, mm.views, mm.states)
    out.op_index = op_index
    out.tensor_of = tensor_of
    return out


def _drop_inputs(mm, inputs: set[int]) -> None:
    """The graph inputs out of the storage model (ir/outside.py's rule on the OpGraph): no storage, no read of
    them, and an output written over one keeps its own storage (the kernel still runs in place, the planner
    just cannot overlap it with the caller's buffer)."""
    gone = {name for name, st in mm.storages.items() if st.producer is None and mm.tensor_of.get(name) in inputs}
    for name in gone:
        del mm.storages[name]
    for op in mm.ops:
        op.reads = [r for r in op.reads if r not in gone]
    for st in mm.storages.values():
        if st.alias in gone:
            st.alias, st.shift, st.rows = None, 0, None
    for view, source in list(mm.views.items()):
        if source in gone:
            del mm.views[view]


def _residual_pairs(model, mm, fop, removed, views, constants) -> list[tuple[int, int, str]]:
    """(anchor op, ADD op, skip storage) for each ADD passes/residual.py's ``residual_inplace`` fuses in place,
    read from the storage model as the pass reads the lowered module. The pass's conditions, in flatbuffer
    terms: the anchor is a fast int8 kernel (residual.ANCHORS; int8 in and out, FULLY_CONNECTED with symmetric
    weights and no reshape after it; not already in place, as an in-place depthwise is) whose output, no graph output and no view's
    source, only the ADD reads, once (``_pair``); the ADD is the same-shape int8 one (a single store per
    element: ``fuse_epilogue``); its other operand, the skip, owns its storage (no view: ``_owns_storage``), is
    no graph output, and no view of it and not the anchor reads it (``_skip_slot``). An ADD of two such
    convolutions fuses the one last in the file (``_one_per_reader``)."""
    from .passes.residual import ANCHORS

    sg = model.Subgraphs(0)
    viewed = set(views.values())  # storages some view reads (a reshape binding in the lowered module)

    def tensor(t):
        return sg.Tensors(t)

    def storage(t):  # the storage of tensor t if it owns one (not a view, not a constant)
        return next((s for s, x in mm.tensor_of.items() if x == t and s in mm.storages), None)

    def int8(t):
        return tensor(t).Type() == _INT8

    def fast_fully_connected(v, ins) -> bool:
        """Symmetric weights (integerize's fast kernel), and an output the importer leaves as the kernel writes
        it: a 2-D input and no keep_num_dims (else a reshape binding reads it, which the pass does not fuse)."""
        import tflite

        from .frontend.footprint import builtin_options

        if len(ins) < 2 or len(indices(tensor(ins[0]).ShapeAsNumpy())) != 2:
            return False
        o = builtin_options(fop[v], tflite.FullyConnectedOptions)
        q = tensor(ins[1]).Quantization()
        symmetric = q is None or not q.ZeroPointLength() or not np.any(q.ZeroPointAsNumpy())
        return symmetric and not (o is not None and o.KeepNumDims())

    chosen: dict[int, tuple[int, int, str]] = {}
    for a, op in enumerate(mm.ops):
        if a in removed or op.kind not in ANCHORS or len(op.writes) != 1:
            continue
        out = mm.storages[op.writes[0]]
        ins = indices(fop[a].InputsAsNumpy())
        t_out = mm.tensor_of[out.name]
        if out.alias or out.pinned or out.name in viewed or len(out.readers) != 1 or not int8(t_out) \
                or not ins or ins[0] < 0 or not int8(ins[0]) \
                or (op.kind == "FULLY_CONNECTED" and not fast_fully_connected(a, ins)):  # fmt: skip
            continue
        r = out.readers[0]
        add_ins = [t for t in indices(fop[r].InputsAsNumpy()) if t >= 0]
        add_outs = indices(fop[r].OutputsAsNumpy())
        if mm.ops[r].kind != "ADD" or len(add_ins) != 2 or add_ins.count(t_out) != 1 or len(add_outs) != 1:
            continue
        t_skip = add_ins[1 - add_ins.index(t_out)]
        shape = indices(tensor(add_outs[0]).ShapeAsNumpy())
        if t_skip in constants or any(indices(tensor(t).ShapeAsNumpy()) != shape or not int8(t)
                                      for t in (*add_ins, add_outs[0])):  # fmt: skip
            continue  # a broadcast or constant operand: not the single-store ADD
        skip = storage(t_skip)
        if skip is None or skip in viewed or mm.storages[skip].pinned or skip in op.reads:
            continue
        chosen[r] = (a, r, skip)  # a later anchor of the same ADD replaces an earlier one
    return list(chosen.values())


def _overlaps(model, mm, fop, removed, conv_x, conv_pad, views) -> dict:
    """Output storage -> (input storage, shift, rows) for each kernel passes/overlap.py's ``overlap_convolutions``
    writes over its dying input, read from the storage model as the pass reads the lowered module: a plain
    int8 CONV_2D / DEPTHWISE_CONV_2D (not fused, not already in place) or an int8 MAX/AVERAGE_POOL_2D whose int8
    input owns its storage (no view), is no graph output and is read by it alone; the shift and the loop order
    are the pass's own choice (``_choose``, on the window geometry memory/overlap.py takes), chained through the
    outputs already written over their input, in file order. Modeled after the other passes."""
    import tflite

    from .memory import overlap as geometry
    from .passes.overlap import _POOLS, _choose

    sg = model.Subgraphs(0)
    viewed = set(views.values())

    def shape(t):
        return indices(sg.Tensors(t).ShapeAsNumpy())

    at: dict[str, tuple[str, int]] = {}  # storage -> (chain root, offset from the root's start)
    extent: dict[str, tuple[int, int]] = {}
    found = {}
    for v, op in enumerate(mm.ops):
        if v in removed or len(op.writes) != 1:
            continue
        out = mm.storages.get(op.writes[0])
        if out is None:
            continue
        if out.alias:  # written over its input at the same offset (in place, the fused residual): same place
            if out.alias in at:
                at[out.name] = at[out.alias]
            continue
        ins = indices(fop[v].InputsAsNumpy())
        t_out = mm.tensor_of[out.name]
        if op.kind in ("CONV_2D", "DEPTHWISE_CONV_2D"):
            x_name = conv_x[v] if v in conv_x else next((s for s in op.reads if mm.tensor_of.get(s) == ins[0]), None)
        elif op.kind in _POOLS:
            x_name = next((s for s in op.reads if mm.tensor_of.get(s) == ins[0]), None)
        else:
            continue
        if x_name is None or sg.Tensors(t_out).Type() != _INT8:
            continue
        x = mm.storages[x_name]
        t_x = mm.tensor_of[x_name]
        if sg.Tensors(t_x).Type() != _INT8 or x.readers != [v] or x.pinned or x_name in viewed or len(shape(t_x)) != 4:
            continue
        xs, os_ = shape(t_x), shape(t_out)
        if op.kind in _POOLS:
            from .frontend.footprint import builtin_options
            from .frontend.ops.reductions import _same_padding

            o = builtin_options(fop[v], tflite.Pool2DOptions)
            k, stride = (o.FilterHeight(), o.FilterWidth()), (o.StrideH(), o.StrideW())
            pad = [_same_padding(xs[1 + a], k[a], stride[a])[1] if o.Padding() == tflite.Padding.SAME else 0 for a in range(2)]
            g = {"x_shape": xs, "out_shape": os_, "kernel": k, "stride": stride, "dilation": (1, 1), "pad": pad}
            orders = (geometry.FORWARD,)
        else:
            ws = shape(ins[1])
            opts = tflite.Conv2DOptions if op.kind == "CONV_2D" else tflite.DepthwiseConv2DOptions
            stride, dil, pad = _conv_padding(fop[v], shape(ins[0]), ws, os_, opts)
            extra = conv_pad.get(v, [0, 0])
            g = {"x_shape": xs, "out_shape": os_, "kernel": (ws[1], ws[2]), "stride": stride, "dilation": dil,
                 "pad": [pad[0] + extra[0], pad[1] + extra[1]]}  # fmt: skip
            orders = (geometry.FORWARD, geometry.REVERSE)
        root, pos = at.get(x_name, (x_name, 0))
        choice = _choose(g, pos, extent.get(root, (0, int(np.prod(xs)))), orders)
        if choice is None:
            continue
        order, shift, extent[root] = choice
        at[out.name] = (root, pos + shift)
        found[out.name] = (x_name, shift, tuple(geometry.rows(**g, order=order)))
    return found


def _itemsize(t) -> int:
    from .frontend.footprint import _ITEMSIZE

    return _ITEMSIZE.get(t.Type(), 4)


def build_plan(model, folded, constants, board, options) -> dict:
    """The build's schedule and arena plan (schedule.best.schedule_tried, plan.graph_plan's placements and
    pools) on the storage model the memory passes of ``options`` leave, without lowering."""
    from .memory import MemoryModel, Storage
    from .memory.adapters import aligned
    from .passes.optimize import floor_passes
    from .plan import Buffer, PlanError, plan_arena
    from .plan.graph_plan import STATIC_RESERVE, board_pools
    from .schedule.best import best_schedule
    from .schedule.dag import Dag

    if options.passes is not None:  # --passes: exactly those, in that order
        wanted = [p for p in options.passes if options.inplace or not p.startswith("inplace")]
        note = "--passes"
    else:  # the orchestrator starts from the fixed sequence and never keeps a worse result
        from .passes.orchestrate import DEFAULT_SEQUENCE

        wanted = [p for p in DEFAULT_SEQUENCE if options.inplace or not p.startswith("inplace")]
        note = ("the fixed pass sequence (= build --opt-time 0); the orchestrator's search keeps that sequence "
                "unless another is smaller" if options.opt_seconds > 0 else "the fixed pass sequence")  # fmt: skip
    modeled = [p for p in wanted if p in _MODELED]
    # passes the figure leaves out: with --passes those analyze cannot model; else those the orchestrator's
    # search may add to the fixed sequence (inplace_overlap, concat_inplace, ...), which only lower the arena
    unmodeled = [p for p in (wanted if options.passes is not None else floor_passes(options))
                 if p not in (_MODELED if options.passes is not None else modeled)]  # fmt: skip
    mm = modeled_memory(model, folded, 1, tuple(modeled), constants, bool(getattr(options, "input_outside", False)))
    al = MemoryModel(mm.ops, {k: Storage(s.name, aligned(s.size, board.arena_align), s.producer, list(s.readers),
                                         s.pinned, s.temp, s.alias, s.shift, s.rows) for k, s in mm.storages.items()},
                     mm.views, mm.states)  # fmt: skip

    def buffers_in(order):
        return [Buffer(r.name, r.size, r.first, r.last, board.arena_align,
                       heat=float(1 + len(mm.storages[r.name].readers)), alias=r.alias, shift=r.shift, rows=r.rows)
                for r in mm.ranges(order)]  # fmt: skip

    # ties on the peak go to the order that places smaller, as in the build (schedule.best)
    order, peak, report = best_schedule(Dag.from_model(al), options.schedule_seconds,
                                        lambda o: plan_arena(buffers_in(o)).total_bytes)
    buffers = buffers_in(order)
    result = {"passes": modeled, "unmodeled": unmodeled, "scheduler": report["best"],
              "schedulers_tried": {k: r["peak"] for k, r in report.items() if isinstance(r, dict)},
              "note": note + (f"; not modeled: {', '.join(unmodeled)} (they can only lower the build's arena)"
                              if unmodeled and options.passes is None else
                              f"; not modeled: {', '.join(unmodeled)}" if unmodeled else "")}  # fmt: skip
    # as the build (plan/graph_plan.py): pools with its estimate of the static RAM, else with none (then the link
    # decides, so the figure is only "may not fit")
    for static in (STATIC_RESERVE, 0):
        try:
            plan = plan_arena(buffers, board_pools(board, options.pool_per_region, static))
            break
        except PlanError as exc:
            error = exc
    else:
        return {**result, "arena_bytes": None, "arena_pools": {}, "lower_bound_bytes": int(peak), "planner": "",
                "note": result["note"] + f"; no placement fits the board's pools: {error}"}  # fmt: skip
    return {**result, "arena_bytes": plan.total_bytes, "arena_pools": dict(plan.pool_sizes),
            "lower_bound_bytes": plan.lower_bound, "planner": plan.algorithm, "static_tight": static == 0}
