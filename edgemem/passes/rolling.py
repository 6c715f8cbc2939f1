"""Rolling patch stages (issue 20): the candidate of the patch pass whose rows are never recomputed.

    layout(graph, stage, q)   -> Layout   per column tile the rolling steps (memory/rolling.py), where each
                                          ring sits in the stage's scratch, the MACs really computed
    candidates(mod, limit)    -> [Candidate(rolling=True)]  one per (split, q), scored like the p x q grids
    apply(mod, cand)          -> the module with ops 0..split replaced by ONE kernel call

**One operator for the whole stage.** The stage (ops 0..split of passes/patches.py's ``stages``) becomes a
single kernel ``ROLLING_STAGE(x, constants...) -> (S, scratch)``: it reads the model input, writes S, and its
scratch (``kernel_attrs.workspace``) holds the rings, placed by the planner like any kernel's workspace (live
at that one step). Its body is a loop nest in TIR (so it goes through the same C generator as every kernel):
for each column tile, for each run of S rows whose steps have the same shapes, shift each ring (drop the
rows no reader needs any more), copy the input's new rows, then call each op's patch kernel
(``T.call_extern``) on pointers into the rings; the last op writes its S row in place (one S row of a tile
is a contiguous NHWC run). The patch kernels are built like passes/patches.py builds them (a convolution from
its spec for the call's shapes and padding, an element-wise kernel retargeted) and travel with the stage
kernel (``kernel_attrs.subkernels``): codegen/model_c.py compiles them next to it. Its ``macs`` counts what it
computes (every call's output pixels), so the MAC limit and the objective see the column halos.

A reader that needs fewer columns than its input's ring holds (e.g. a residual ADD's skip input, whose ring
is as wide as the 3x3 convolution reading it needs) reads a copy of its columns (a small buffer in the same
scratch). Only int8 stage tensors (the rings are byte buffers), but for a uint8 model input read by
element-wise operators only (a camera model's QUANTIZE first: its ring holds the input's bytes and the
QUANTIZE's patch kernel reads them back as uint8); a stage reading an NCHW input through a TRANSPOSE of a
uint8 input, or a float input, is left to the p x q grids.
"""

from __future__ import annotations

import dataclasses
import re
from dataclasses import dataclass, field

import tvm
from tvm import relax

from ..ir.graph import Op, OpGraph, Tensor, linked
from ..kernels import kernel_attrs
from ..kernels.specs import Pad
from ..memory import rolling as geo
from ..timelimit import check
from . import kernel_spec
from .rewrite import Bindings, kernel_vars, rebuild

KIND = "ROLLING_STAGE"
MAX_COLUMN_TILES = 4
ALIGN = 4  # each ring starts at a word boundary of the scratch


@dataclass
class Layout:
    """``tiles``: the geometry per column tile; ``ring``: tensor -> (offset in the scratch, bytes);
    ``sub``: (op, input) -> (offset, bytes) of a column copy; ``nbytes``: the scratch; ``macs``: computed."""

    stage: object
    q: int
    tiles: list
    hw: dict
    channels: dict
    ops: list = field(default_factory=list)  # the StageOps the rings serve (without a leading TRANSPOSE)
    x: str = ""  # the tensor copied from the model input: the input itself, or the NHWC TRANSPOSE of an NCHW one
    base: int = 0  # graph op of ops[0] (1 when the stage starts with that TRANSPOSE, folded into the copy)
    ring: dict = field(default_factory=dict)
    sub: dict = field(default_factory=dict)
    nbytes: int = 0
    macs: int = 0


def _width(box) -> int:
    return box[1] - box[0]


def eligible(graph: OpGraph, stage) -> bool:
    """A stage the rolling kernel runs: starts at an int8 model input (NHWC, or NCHW read through a TRANSPOSE,
    which the row copies do), or at a uint8 NHWC one read by element-wise operators only (a camera model's
    QUANTIZE: its ring holds the input's bytes, see ``_bytes_input``), int8 tensors throughout."""
    if len(stage.ops) < 2 and stage.kinds[0] == "gather":
        return False
    x = graph.inputs[0]
    names = [op.output for op in stage.ops]
    if graph.tensors[x].dtype == "uint8":
        readers = [j for j, op in enumerate(stage.ops) if x in op.inputs]
        if any(stage.kinds[j] != "ew" or stage.ops[j].inputs != (x,) or graph.ops[j].inputs[0] != x for j in readers):
            return False  # e.g. a TRANSPOSE of a uint8 input: left to the p x q grids
    else:
        names.insert(0, x)
    shapes_ok = len(graph.tensors[x].shape) == 4
    return shapes_ok and all(graph.tensors[n].dtype == "int8" and len(graph.tensors[n].shape) == 4 for n in names)


def _bytes_input(prim):
    """An element-wise patch kernel reading a uint8 model input's ring: the ring is an int8 byte buffer, so
    its first parameter becomes int8 and every read casts the byte back to uint8 (two's complement both ways:
    the values TFLM's kernel reads, bit for bit)."""
    text = prim.script()
    m = re.search(r"def \w+\((\w+): T\.Buffer\(\(([^)]*)\), \"uint8\"\)", text)
    if m is None:
        raise ValueError(f"kernel {prim.attrs.get('global_symbol')} does not read a uint8 first parameter")
    x = m.group(1)
    text = text.replace(m.group(0), m.group(0).replace('"uint8"', '"int8"'), 1)
    body = re.sub(rf"(?<![\w.])(?<!T\.reads\(){x}\[([^\]]*)\]", rf'T.Cast("uint8", {x}[\1])', text.split("\n", 1)[1])
    return tvm.script.from_source(text.split("\n", 1)[0] + "\n" + body)


def layout(graph: OpGraph, stage, q: int) -> Layout:
    base = 1 if stage.kinds[0] == "gather" else 0
    ops = stage.ops[base:]
    x = stage.ops[0].output if base else graph.inputs[0]
    names = [x] + [op.output for op in ops]
    hw = {n: tuple(graph.tensors[n].shape[1:3]) for n in names}
    ch = {n: int(graph.tensors[n].shape[3]) for n in names}
    tiles = geo.plan(ops, hw, x, q)
    lay = Layout(stage, q, tiles, hw, ch, ops=ops, x=x, base=base)
    off = 0
    for t in names[:-1]:
        nbytes = max(tp.capacity[t] * _width(tp.boxes[t]) * ch[t] for tp in tiles)
        lay.ring[t] = (off, nbytes)
        off += -(-nbytes // ALIGN) * ALIGN
    for k, op in enumerate(ops):
        for j, i in enumerate(op.inputs):
            sizes = [(c.reads[j][1] - c.reads[j][0]) * _width(tp.wants[(k, i)]) * ch[i] for tp in tiles
                     if tp.wants[(k, i)] != tp.boxes[i] for st in tp.steps for c in st.calls if c.op == k]  # fmt: skip
            if sizes:
                lay.sub[(k, i)] = (off, max(sizes))
                off += -(-max(sizes) // ALIGN) * ALIGN
    # no padding after the last buffer: every byte of the scratch is written at some step (the device's
    # high-water mark then equals the plan when the scratch is at the arena's end)
    lay.nbytes = max(o + n for o, n in [*lay.ring.values(), *lay.sub.values()])
    for tp in tiles:
        for st in tp.steps:
            for c in st.calls:
                if c.op < 0:
                    continue
                op = graph.ops[c.op + base]
                full = hw[op.output][0] * hw[op.output][1]
                lay.macs += op.macs * (c.rows[1] - c.rows[0]) * _width(tp.boxes[ops[c.op].output]) // full
    return lay


# -- scoring ---------------------------------------------------------------------------------------------


def scored_graph(graph: OpGraph, stage, lay: Layout) -> OpGraph:
    """The operator graph with the stage as one op (its constants, S, the scratch as its workspace)."""
    inner = {o.output for o in stage.ops}
    consts = _constants(graph, stage)
    tensors = {
        n: dataclasses.replace(t, producer=None, consumers=[])
        for n, t in graph.tensors.items()
        if n not in inner or n == stage.tensor
    }
    ws = f"{stage.tensor}__rings"
    tensors[ws] = Tensor(ws, (lay.nbytes,), "int8", "activation", ws)
    s = graph.tensors[stage.tensor]
    tensors[stage.tensor] = Tensor(s.name, s.shape, s.dtype, "activation", s.name)
    ops = [Op(f"em_k_rolling_{stage.split}", KIND, [graph.inputs[0], *consts], stage.tensor, None, lay.macs, ws)]
    ops += [dataclasses.replace(op, inputs=list(op.inputs)) for op in graph.ops[stage.split + 1 :]]
    return linked(ops, tensors, graph.inputs, graph.outputs)


def _constants(graph: OpGraph, stage) -> list[str]:
    out: list[str] = []
    for j in range(stage.split + 1):
        for n in graph.ops[j].inputs:
            if graph.tensors[n].is_const and n not in out:
                out.append(n)
    return out


def candidates(mod, max_overhead: float | None = None, *, align: int = 4, seconds: float = 0.05,
               keep_all: bool = False) -> list:  # fmt: skip
    """One rolling candidate per (split, q columns tiles) within the MAC limit, scored by the build's scheduler
    and planner on the graph with the stage as one op; only those strictly below the unsplit arena unless
    ``keep_all``."""
    from ..ir.graph import read_graph
    from ..ir.outside import as_planned
    from .patches import Candidate, _measure, default_overhead, stages

    limit = default_overhead(mod) if max_overhead is None else max_overhead
    raw = read_graph(mod)
    graph = as_planned(mod, raw)
    base_macs = sum(op.macs for op in graph.ops)
    base = _measure(graph, align, seconds)[0]
    out = []
    for stage in stages(mod):
        if not eligible(raw, stage):
            continue
        w = raw.tensors[stage.tensor].shape[2]
        for q in range(1, min(MAX_COLUMN_TILES, w) + 1):
            check()  # each candidate is scheduled and placed: under the pass search's deadline
            lay = layout(raw, stage, q)
            macs = base_macs - sum(op.macs for op in graph.ops[: stage.split + 1]) + lay.macs
            if base_macs and (macs - base_macs) > limit * base_macs:
                continue
            arena, peak = _measure(as_planned(mod, scored_graph(raw, stage, lay)), align, seconds, 1)
            if arena < base or keep_all:
                out.append(
                    Candidate(stage.split, stage.tensor, (0, q), arena, macs, base, base_macs, peak, rolling=True)
                )
    return sorted(out, key=lambda c: (c.arena, c.stage_peak, c.macs))


# -- emitting the stage kernel ---------------------------------------------------------------------------


def _kernels(mod, graph: OpGraph, stage, lay: Layout, prefix: str) -> tuple[dict, dict]:
    """Patch kernels per distinct (op, input rows x cols, output rows x cols, padding): (key -> C name,
    C name -> PrimFunc)."""
    from .patches import _clean, _retarget

    b = Bindings(mod)
    kvars = kernel_vars(mod)
    names: dict = {}
    prims: dict = {}
    for tp in lay.tiles:
        for st in tp.steps:
            for c in st.calls:
                if c.op < 0:
                    continue
                sop = lay.ops[c.op]
                key = _key(tp, lay, c)
                _op, in_rows, in_w, out_rows, out_w, _pad = key
                if key in names:
                    continue
                name = f"{prefix}_v{len(names)}"
                _gv, prim0, spec, _args = b.kernel(kvars[c.op + lay.base])
                op = graph.ops[c.op + lay.base]
                oshape = (1, out_rows, out_w, lay.channels[sop.output])
                if sop.window is not None:
                    xshape = (1, in_rows, in_w, lay.channels[sop.inputs[0]])
                    new = dataclasses.replace(spec.out_of_place(), x_shape=xshape, out_shape=oshape, pad=tuple(c.pad))
                    prim = kernel_spec.build(new)
                elif isinstance(spec, Pad):  # along the channels: the patch's own rows and columns
                    prim = kernel_spec.build(dataclasses.replace(spec, x_shape=(1, out_rows, out_w, lay.channels[sop.inputs[0]])))
                else:
                    prim = _retarget(prim0, graph.tensors[op.output].shape, oshape)
                    if graph.tensors[sop.inputs[0]].dtype == "uint8":
                        prim = _bytes_input(prim)
                prim = _clean(prim)
                pix = out_rows * out_w
                full = lay.hw[sop.output][0] * lay.hw[sop.output][1]
                prims[name] = kernel_attrs.with_kind(prim, op.kind, op.macs * pix // full)
                names[key] = name
    return names, prims


def _buffer_decl(name: str, shape, dtype: str) -> str:
    dims = ", ".join(str(int(d)) for d in shape)
    return f'{name}: T.Buffer(({dims}{"," if len(shape) == 1 else ""}), "{dtype}")'


def _first(name: str, ndim: int) -> str:
    return f"T.address_of({name}[{', '.join(['0'] * ndim) if ndim else '()'}])"


def _key(tp, lay, c) -> tuple:
    """What a call's patch kernel depends on: op, input rows x columns, output rows x columns, padding."""
    sop = lay.ops[c.op]
    return (c.op, c.reads[0][1] - c.reads[0][0], _width(tp.wants[(c.op, sop.inputs[0])]), c.rows[1] - c.rows[0],
            _width(tp.boxes[sop.output]), c.pad)  # fmt: skip


def _step_text(graph, stage, lay: Layout, tp, st, names, consts, r_expr: str, y_expr) -> list[str]:
    """The TIR lines of one step (absolute rows as expressions of the loop variable r): per call, the shift
    of its output's ring, then the copy of a model input row, or the column copies and the patch kernel's call."""
    x = lay.x
    s = stage.tensor
    ch = lay.channels
    row = {t: _width(tp.boxes[t]) * ch[t] for t in lay.ring}  # bytes of one ring row in this tile
    lines: list[str] = []
    ind = "        "
    copies = 0
    for c in st.calls:
        t = x if c.op < 0 else lay.ops[c.op].output
        if t != s:
            keep = (c.rows[0] - c.lo) * row[t]
            if keep > 0 and c.drop:
                off = lay.ring[t][0]
                lines.append(f"{ind}for i in range({keep}):")
                lines.append(f"{ind}    ws[{off} + i] = ws[{off + c.drop * row[t]} + i]")
            out_off = lay.ring[t][0] + (c.rows[0] - c.lo) * row[t]
        if c.op < 0:  # a row of the model input, the tile's columns
            c0, w = tp.boxes[x][0], _width(tp.boxes[x])
            lines.append(f"{ind}for j, k in T.grid({w}, {ch[x]}):")
            src = (
                f"x[0, k, {y_expr(copies)}, {c0} + j]" if lay.base else f"x[0, {y_expr(copies)}, {c0} + j, k]"
            )  # NCHW: the TRANSPOSE
            if graph.tensors[graph.inputs[0]].dtype == "uint8":
                src = f'T.Cast("int8", {src})'  # the byte as it is, into the byte ring
            lines.append(f"{ind}    ws[{out_off} + j * {ch[x]} + k] = {src}")
            copies += 1
            continue
        sop = lay.ops[c.op]
        op = graph.ops[c.op + lay.base]
        ptrs = []
        acts = iter(zip(sop.inputs, c.reads, c.in_lo))
        for n in op.inputs:
            if graph.tensors[n].is_const:
                ptrs.append(_first(f"c{consts.index(n)}", len(graph.tensors[n].shape)))
                continue
            i, (lo, hi), in_lo = next(acts)
            src = lay.ring[i][0] + (lo - in_lo) * row[i]
            if (c.op, i) in lay.sub and tp.wants[(c.op, i)] != tp.boxes[i]:
                want = tp.wants[(c.op, i)]
                dst = lay.sub[(c.op, i)][0]
                ww, wi = _width(want), _width(tp.boxes[i])
                skip = (want[0] - tp.boxes[i][0]) * ch[i]
                lines.append(f"{ind}for i, j in T.grid({hi - lo}, {ww * ch[i]}):")
                lines.append(f"{ind}    ws[{dst} + i * {ww * ch[i]} + j] = ws[{src + skip} + i * {wi * ch[i]} + j]")
                ptrs.append(f"T.address_of(ws[{dst}])")
            else:
                ptrs.append(f"T.address_of(ws[{src}])")
        if t == s:
            ptrs.append(f"T.address_of(s[0, {r_expr}, {tp.cols[0]}, 0])")
        else:
            ptrs.append(f"T.address_of(ws[{out_off}])")
        lines.append(f'{ind}T.evaluate(T.call_extern("int32", "{names[_key(tp, lay, c)]}", {", ".join(ptrs)}))')
    return lines


def _runs(tp, ops, s: str) -> list[tuple[int, int, int]]:
    """(first step, steps, input row advance per step): maximal runs of steps with the same relative shape
    (every call, shift and offset inside the rings equal) whose input rows all advance by one constant."""

    def shape(st):
        return tuple((c.op, c.rows[0] - c.lo, c.drop, c.pad, tuple((a - lo, b - a) for (a, b), lo in zip(c.reads, c.in_lo)))
                     for c in st.calls)  # fmt: skip

    def copies(st):
        return [c.rows[0] for c in st.calls if c.op < 0]

    shapes = [shape(st) for st in tp.steps]
    out, i, n = [], 0, len(tp.steps)
    while i < n:
        j, delta = i + 1, None
        while j < n and shapes[j] == shapes[i]:
            ds = {b - a for a, b in zip(copies(tp.steps[j - 1]), copies(tp.steps[j]))}
            if len(ds) > 1 or (delta is not None and ds and ds != {delta}):
                break
            delta = next(iter(ds)) if ds else 0
            j += 1
        out.append((i, j - i, delta or 0))
        i = j
    return out


def stage_kernel(mod, cand, prefix: str):
    """(the stage's PrimFunc, its constants' graph names): the loop nest over column tiles and runs of steps."""
    from ..ir.graph import read_graph
    from .patches import stages

    graph = read_graph(mod)
    stage = next((s for s in stages(mod) if s.split == cand.split), None)
    if stage is None or not eligible(graph, stage):
        raise ValueError(f"op {cand.split} ends no rolling stage of this module")
    lay = layout(graph, stage, cand.grid[1])
    names, prims = _kernels(mod, graph, stage, lay, prefix)
    consts = _constants(graph, stage)
    x = graph.inputs[0]
    params = [_buffer_decl("x", graph.tensors[x].shape, graph.tensors[x].dtype)]
    params += [_buffer_decl(f"c{i}", graph.tensors[n].shape, graph.tensors[n].dtype) for i, n in enumerate(consts)]
    params += [_buffer_decl("s", graph.tensors[stage.tensor].shape, "int8"), _buffer_decl("ws", (lay.nbytes,), "int8")]
    lines = ["@T.prim_func(private=True)", f"def stage({', '.join(params)}):"]
    for tp in lay.tiles:
        for first, count, delta in _runs(tp, lay.ops, stage.tensor):
            st = tp.steps[first]
            ys = [c.rows[0] for c in st.calls if c.op < 0]
            lines.append(f"    for r in range({count}):")
            body = _step_text(graph, stage, lay, tp, st, names, consts, f"r + {st.r}",
                              lambda m, ys=ys, d=delta: f"r * {d} + {ys[m]}")  # fmt: skip
            lines += body or ["        T.evaluate(0)"]
    text = "# from tvm.script import tirx as T\n\n" + "\n".join(lines) + "\n"
    prim = tvm.script.from_source(text)
    prim = kernel_attrs.with_workspace(prim, lay.nbytes)
    prim = kernel_attrs.with_subkernels(prim, prims)
    return prim, consts, lay


def apply(mod, cand) -> tvm.IRModule:
    """``mod`` with ops 0..cand.split replaced by one rolling-stage kernel call."""
    from ..ir.graph import read_graph

    graph = read_graph(mod)
    taken = {str(f.attrs["global_symbol"]) for f in mod.functions.values() if f.attrs and "global_symbol" in f.attrs}
    k = 1
    while any(s.startswith(f"roll{k}_") for s in taken):
        k += 1
    symbol = f"roll{k}_s{cand.split}_q{cand.grid[1]}"
    prim, consts, lay = stage_kernel(mod, cand, f"em_k_{symbol}")
    b = Bindings(mod)
    kvars = kernel_vars(mod)
    stage_ops = range(cand.split + 1)
    const_expr: dict = {}
    for j in stage_ops:
        _gv, _p, _s, args0 = b.kernel(kvars[j])
        for name, a in zip(graph.ops[j].inputs, args0):
            if graph.tensors[name].is_const:
                const_expr.setdefault(name, a)
    s_ty = relax.TensorType(tuple(int(d) for d in graph.tensors[cand.tensor].shape), "int8")
    ws_ty = relax.TensorType((lay.nbytes,), "int8")

    def replacement(bb, env):
        gv = bb.add_func(kernel_attrs.with_kind(prim, KIND, lay.macs, symbol=symbol), symbol)
        args = [mod["main"].params[0], *[env.get(const_expr[n], const_expr[n]) for n in consts]]
        both = bb.emit(relax.call_tir(gv, args, [s_ty, ws_ty]))
        return relax.TupleGetItem(both, 0)

    return rebuild(mod, {kvars[cand.split]: replacement}, set(kvars[: cand.split]))


__all__ = ["KIND", "Layout", "apply", "candidates", "eligible", "layout", "scored_graph", "stage_kernel"]
