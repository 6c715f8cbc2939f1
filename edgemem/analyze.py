"""`edgemem analyze`: what a model needs and whether it fits a board, read from the flatbuffer alone (no TVM
lowering, no toolchain, no QEMU), in about a second.

Per operator: its type, output shape, MACs, weight bytes and the activation bytes live at its step in the file's
order (the storage model of edgemem.memory). For the model: every operator edgemem has no kernel for, listed at
once (frontend/support.py); the RAM floor no order or placement can beat whatever the memory passes remove
(memory/floor.py, the build's own early check), the arena of the file's order with the cheap placements (a plan
the build can always reach, since it tries that order and those placements among others), the weights against
the flash; and, for a model with a symbolic (-1) dimension, the largest value of it whose plan fits.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from pathlib import Path

import numpy as np

from .board import load_board
from .frontend.footprint import indices, is_constant, op_names, tensor_bytes
from .frontend.tflite_import import read_tflite, tensor_name

_SYMBOLIC_RANGE = (1, 4096)  # values of a -1 dimension searched for the largest that fits


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
    ram_floor_bytes: int  # no order or placement uses less (whatever the memory passes remove)
    ram_floor_operator: int
    file_order_arena_bytes: int  # the file's order, cheap placements: a plan the build reaches at worst
    ram_budget_bytes: int  # the board's RAM less its stack
    stack_bytes: int
    board_ram_bytes: int
    weights_bytes: int
    board_flash_bytes: int
    macs: int
    verdict: str  # "fits", "may fit" (between floor and file-order plan), "does not fit"
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


def analyze(model_path: str | Path, board_name: str, ram: int | None = None, flash: int | None = None) -> Analysis:
    from .frontend.fold import fold_model
    from .frontend.ops.registry import operand_type
    from .frontend.support import unsupported_operators
    from .memory import from_tflite
    from .passes.catalogue import catalogue, floor_capabilities
    from .budget import board_with_budget, file_order_plan, ram_budget

    path = Path(model_path)
    model = read_tflite(path)
    board = board_with_budget(load_board(board_name), ram, flash)
    sg = model.Subgraphs(0)
    names = op_names(model)
    missing = unsupported_operators(model, names)
    missing_at = {u.index for u in missing}
    _, folded = fold_model(model)

    def shape_of(t: int) -> list[int]:
        return indices(sg.Tensors(t).ShapeAsNumpy())

    mm = from_tflite(model, 1, folded=folded)
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
            index=i, name=name, operand_type=operand_type(sg, op, model),
            output=tensor_name(sg, outs[0]) if outs else "none", output_shape=shape_of(outs[0]) if outs else [],
            macs=_macs(name, shape_of, ins, outs, op), weight_bytes=sum(tensor_bytes(sg.Tensors(t)) for t in consts),
            live_bytes=live_at.get(i, 0), supported=i not in missing_at,
        ))  # fmt: skip
    every_pass = [p.name for p in catalogue()]
    from .frontend.footprint import operator_floor_bytes

    floor, floor_op = operator_floor_bytes(model, capabilities=floor_capabilities(every_pass, model))
    plan_bytes, _ = file_order_plan(model, board.arena_align)
    budget = ram_budget(board)
    weights = sum(r.weight_bytes for r in rows)
    verdict = "fits" if plan_bytes <= budget else ("may fit" if floor <= budget else "does not fit")
    if weights > board.flash_bytes:
        verdict = "does not fit"
    return Analysis(
        model=str(path), board=board.name, operators=rows, unsupported=[u.label() for u in missing],
        ram_floor_bytes=floor, ram_floor_operator=floor_op, file_order_arena_bytes=plan_bytes, ram_budget_bytes=budget,
        stack_bytes=board.stack_size, board_ram_bytes=board.ram_bytes, weights_bytes=weights,
        board_flash_bytes=board.flash_bytes, macs=sum(r.macs for r in rows), verdict=verdict,
        symbolic=_largest_fitting(path, board, budget) if _symbolic_dim(model) else {},
    )  # fmt: skip
