"""Patch-based execution (issue 20; MCUNetV2's patch stage, MAGIS's fission along H and W): the first
operators of a model run tile by tile, halos recomputed, so the large early tensors never exist whole.

    candidates(mod, max_overhead)  -> [Candidate(split, grid, arena, macs, ...)]  every (split, p x q) tried
    apply(mod, candidate)          -> the module with that stage run patch by patch
    patches(mod)                   the catalogue pass: the best candidate within the MAC limit (10 % with
                                   --input outside, 5 % with the input in the arena) whose built module has
                                   a lower arena than ``mod`` before and after the in-place passes; else
                                   ``mod`` unchanged
    pareto(candidates)             the (arena, MACs) points no other candidate beats on both

PADs are folded first (fold_pad) by the pass itself, and ``run_passes`` runs it before the other passes of a
``--passes`` list, so where it stands in the list never decides whether a split fires. As listed:
``--passes fold_pad,patches,inplace_depthwise,inplace_residual,
inplace_overlap,inplace_elementwise,concat_inplace`` (an in-place depthwise or element-wise kernel in the stage is
rebuilt out of place; a convolution already fused with its residual ADD ends the stage). Kernel symbols name
the split and grid (``em_k_patch1_s13_3x4_...``), so the report's operator table shows the patch loop.

**Stage.** The operators 0..t of the lowered module's order, where t's output S is a single-tensor cut (every
other tensor of the stage is read inside it only) and every operator is a CONV_2D, DEPTHWISE_CONV_2D or int8
MAX_POOL_2D rebuilt from its ``edgemem.spec`` (padding folded already: fold_pad runs first; a max pool never
reads its padding, so a window cut at a patch's edge is cut where the whole operator's was), a PAD along the
channels only (rebuilt per patch), an element-wise kernel whose operands all have the output's shape but for
constants broadcast over H and W (ADD, QUANTIZE, activations, PRELU with its alpha [1, 1, C]: retargeted to the
patch shape, the constant read whole by every patch), or a TRANSPOSE of the NCHW model input. Anything else (an
average pool, whose border average differs; a fused residual kernel; a reshape; a constant with the output's own
H and W) ends the candidate stages.

**Grid.** S is cut into p x q near-equal tiles (p row bands of q tiles; 1 <= p, q <= 4). Each tile's box
is propagated back through the stage (``memory/patches.py``): a tensor read by two operators gets the
bounding box, and an operator needing less of it reads a copied sub-box. Border tiles get the whole
operator's padding as their own (``patch_pad``), interior halos are real data: the result is bit-exact by
construction.

**Rewrite.** Per tile, tile by tile: a copy of the model input's box (STRIDED_SLICE; with the NCHW
TRANSPOSE folded in; an element-wise operator reading the model input, e.g. a float input's QUANTIZE, reads its
box in place instead, no copy), then each stage operator as a kernel built for the patch's shapes and padding with
the same constants, then the tiles joined into S by CONCATENATION (along W within a band, then along H;
``concat_inplace`` makes producers write straight into S). The binding order is the schedulers' hint.

**Choice.** Each (split, grid) is scored by the build's scheduler and planner on the patched operator graph
(made without building kernels) and by its MACs (each kernel's ``edgemem.macs``, patch kernels scaled by their
output pixels); only candidates within the MAC limit and with an arena strictly below the unsplit module's are
kept (a badly chosen split can raise the peak: tinyengine issue #104). They are ranked by (arena, the peak
inside the patch loop, MACs): where the tensors after the stage set the arena, the in-place passes lower those
further and the patch loop's own peak decides. The best is built and kept only if its arena is lower than the
unsplit module's both as it is and after the in-place passes (FINISH, applied to both); ties on the scored
arena with no more MACs are built too and the least arena after FINISH wins.

**Rolling candidates** (passes/rolling.py): beside the p x q grids, every stage is also tried as rolling row
buffers x q column tiles (1 <= q <= 4): one kernel for the whole stage whose scratch holds a few rows of each
stage tensor, rows never recomputed (only the column halos), scored, limited and confirmed exactly like the grids
(``Candidate.rolling``).

Not built: a second patch stage, patches of a stage that does not start at the model input.
"""

from __future__ import annotations

import dataclasses
import re
from dataclasses import dataclass

import tvm
from tvm import relax, te

from ..ir.graph import Op, OpGraph, Tensor, linked
from ..memory.patches import StageOp, Window, box_size, grid, patch_pad, regions
from ..kernels import kernel_attrs
from ..kernels.specs import Conv2D, Depthwise, DepthwiseInplace, MaxPool, Pad
from ..timelimit import check
from . import kernel_spec
from .rewrite import Bindings, kernel_vars, rebuild

MAX_TILES = 4  # p and q each at most this
ELEMENTWISE = frozenset({
    "ADD", "SUB", "MUL", "QUANTIZE", "DEQUANTIZE", "RELU", "RELU6", "RELU_N1_TO_1", "LEAKY_RELU", "HARD_SWISH",
    "LOGISTIC", "TANH", "ABS", "NEG", "MAXIMUM", "MINIMUM", "PRELU",
})  # fmt: skip
STAGE_KINDS = ELEMENTWISE | {"CONV_2D", "DEPTHWISE_CONV_2D", "TRANSPOSE", "MAX_POOL_2D", "PAD"}  # the early floor's Patch capability
_PLAIN = (Conv2D, Depthwise, DepthwiseInplace)  # int8 convolutions (an in-place depthwise is rebuilt out of place)
NCHW_TO_NHWC = (0, 2, 3, 1)
# the one store of a TRANSPOSE kernel with that permutation (kernels/int8_ops.transpose): out[n, h, w, c] = x[n, c, h, w]
_NCHW_TO_NHWC = re.compile(r"\w+\[(\w+), (\w+), (\w+), (\w+)\] = \w+\[\1, \4, \2, \3\]")


@dataclass(frozen=True)
class Candidate:
    """Split after op ``split`` (its output ``tensor``), S in ``grid`` = (p, q) tiles. ``arena``: planned
    bytes of the patched graph; ``macs``: its total MACs; ``base_arena``/``base_macs``: the unsplit module's."""

    split: int
    tensor: str
    grid: tuple[int, int]
    arena: int
    macs: int
    base_arena: int
    base_macs: int
    stage_peak: int = 0  # the most bytes live during the patch loop
    rolling: bool = False  # rolling rows x grid[1] column tiles (passes/rolling.py), not a p x q grid

    @property
    def label(self) -> str:
        return f"after op {self.split}, " + (f"rolling x {self.grid[1]}" if self.rolling else f"{self.grid[0]}x{self.grid[1]}")

    def costs(self) -> tuple[int, int]:
        """What the Pareto filter compares (objective.pareto_front): arena, then MACs."""
        return (self.arena, self.macs)

    @property
    def overhead(self) -> float:
        return (self.macs - self.base_macs) / self.base_macs if self.base_macs else 0.0


@dataclass
class _Stage:
    """Ops 0..split of the module: their StageOps, kind per op ("conv", "ew", "gather"), S's name."""

    split: int
    ops: list  # StageOp per op
    kinds: list  # "conv" | "ew" | "gather"
    tensor: str


# -- reading the stages off the module ---------------------------------------------------------------


def _window(spec) -> Window:
    if isinstance(spec, MaxPool):
        (kh, kw), (sh, sw) = spec.pool, spec.stride
        return Window(int(kh), int(kw), int(sh), int(sw), 1, 1, int(spec.pad[0]), int(spec.pad[1]))
    kh, kw = int(spec.w_shape[0]), int(spec.w_shape[1])
    (sh, sw), (dh, dw) = spec.stride, spec.dilation
    return Window(kh, kw, int(sh), int(sw), int(dh), int(dw), int(spec.pad[0]), int(spec.pad[1]))


def _elementwise(prim, shape, consts=()) -> bool:
    """Every buffer of the kernel has the output's shape, but for constant operands (``consts``: their
    parameter positions) broadcast over H and W (e.g. PRELU's alpha [1, 1, C]: every patch reads all of it);
    its body is one loop nest over the output (checked again where it is retargeted)."""
    try:
        shapes = [tuple(int(d) for d in p.shape) for p in prim.params]
    except (AttributeError, TypeError):  # a scalar or symbolic parameter
        return False
    if len(shape) != 4 or not shapes:
        return False
    # a constant of the output's own shape is refused: a patch would need its box, not its origin
    return all(_spatial_broadcast(s, shape) if i in consts else s == tuple(shape) for i, s in enumerate(shapes))


def _dims(shape) -> str:
    return ", ".join(str(int(d)) for d in shape)


def _spatial_broadcast(shape, out) -> bool:
    """``shape`` broadcasts (numpy-style, right-aligned) to the NHWC ``out`` with size 1 along H and W: one
    value per channel (or one in all), the same for every patch."""
    if len(shape) > len(out):
        return False
    aligned = (1,) * (len(out) - len(shape)) + tuple(shape)
    return aligned[1] == 1 and aligned[2] == 1 and all(a in (1, o) for a, o in zip(aligned, out))


def _stage_kind(graph: OpGraph, b: Bindings, var, op, params: set) -> tuple[str, object] | None:
    """("conv", Window) / ("ew", None) / ("gather", None) if ``op`` may be in a patch stage, else None."""
    value = b.defs[var]
    if getattr(value.op, "name", "") != "relax.call_tir" or isinstance(var.ty, relax.TupleType):
        return None
    if kernel_attrs.workspace(op.prim) is not None or kernel_attrs.state(op.prim):
        return None  # a workspace or a state tensor: not a pure function of one tile's inputs
    out = graph.tensors[op.output].shape
    if len(out) != 4 or out[0] != 1:
        return None
    spec = kernel_spec.of(op.prim)
    if op.kind in ("CONV_2D", "DEPTHWISE_CONV_2D", "MAX_POOL_2D"):
        if not isinstance(spec, (*_PLAIN, MaxPool)):
            return None  # e.g. a convolution fused with its residual ADD (no spec to rebuild it from)
        return "conv", _window(spec)  # a max pool never reads its padding: a patch's is its box's edge too
    if op.kind == "PAD":  # along the channels only (others are folded, fold_pad): per pixel, rebuilt per patch
        pads = (*spec.pad_before[:3], *spec.pad_after[:3]) if isinstance(spec, Pad) else (1,)
        return ("pad", None) if len(op.inputs) == 1 and not any(pads) else None
    if op.kind == "TRANSPOSE" and len(op.inputs) == 1 and op.inputs[0] in params:
        x = graph.tensors[op.inputs[0]].shape
        if len(x) == 4 and tuple(x[i] for i in NCHW_TO_NHWC) == out and _NCHW_TO_NHWC.search(op.prim.script()):
            return "gather", None
        return None
    # an in-place one is rebuilt out of place; its constant operands are its parameters at their operand positions
    consts = {i for i, x in enumerate(op.inputs) if graph.tensors[x].is_const}
    if len(op.prim.params) != len(op.inputs) + 1:
        consts = set()  # the parameters are not (operands..., output): no constant is told apart
    if op.kind in ELEMENTWISE and _elementwise(op.prim, out, consts) and _loop_nest(op.prim.script(), _dims(out)):
        return "ew", None
    return None


def stages(mod) -> list[_Stage]:
    """Every split point t such that ops 0..t form a patch stage ending in a single-tensor cut."""
    from ..ir.outside import planned_graph

    graph = planned_graph(mod)
    b = Bindings(mod)
    kvars = kernel_vars(mod)
    if len(kvars) != len(graph.ops) or len(graph.inputs) != 1:
        return []
    params = set(graph.inputs)
    outputs = {graph.storage_of(o).name for o in graph.outputs}
    ops, kinds, out = [], [], []
    produced: dict[str, int] = {}
    for t, (var, op) in enumerate(zip(kvars, graph.ops)):
        kind = _stage_kind(graph, b, var, op, params)
        if kind is None or (kind[0] == "gather" and t != 0):
            break
        acts = [x for x in op.inputs if not graph.tensors[x].is_const]
        if any(graph.tensors[x].storage != x for x in acts) or any(x not in produced and x not in params for x in acts):
            break  # a view, or a tensor from outside the stage
        ops.append(StageOp(tuple(acts), op.output, kind[1]))
        kinds.append(kind[0])
        produced[op.output] = t
        if graph.tensors[op.output].storage != op.output:
            break
        # a cut: every tensor of 0..t but op.output is read inside the stage only, and op.output is not returned
        internal = [n for n in produced if n != op.output]
        if any(n in outputs or any(c > t for c in graph.tensors[n].consumers) for n in internal):
            continue
        if op.output in outputs or graph.tensors[op.output].dtype != "int8" or not any(k == "conv" for k in kinds):
            continue
        if any(graph.tensors[p].storage != p or len(graph.tensors[p].shape) != 4 for p in params):
            continue
        out.append(_Stage(t, list(ops), list(kinds), op.output))
    return out


# -- the patched program (abstract: used both to score a candidate and to emit it) ------------------


@dataclass
class _POp:
    what: str  # "slice" | "gather" | "conv" | "ew" | "concat"
    out: str
    inputs: list  # tensor names (program tensors, or the model input)
    shape: tuple
    dtype: str
    src: int | None = None  # stage op index for conv/ew/gather
    begin: tuple = ()  # slice/gather: (row, col) of the box in its source
    pad: tuple = ()  # conv: the patch's padding
    axis: int = 0  # concat
    macs: int = 0


def _program(graph: OpGraph, stage: _Stage, p: int, q: int) -> list[_POp]:
    """The patched stage: per tile the input copy, each op at patch shape, then the joins into S."""
    hw, shapes = {}, {}
    for name, t in graph.tensors.items():
        if len(t.shape) == 4:
            shapes[name] = t.shape
            hw[name] = (t.shape[1], t.shape[2])
    if stage.kinds[0] == "gather":
        x = graph.tensors[stage.ops[0].inputs[0]].shape
        hw[stage.ops[0].inputs[0]] = (x[2], x[3])
    s_shape = graph.tensors[stage.tensor].shape
    prog: list[_POp] = []
    bands = []
    for bi, band in enumerate(grid(s_shape[1], s_shape[2], p, q)):
        tiles = []
        for ci, tile in enumerate(band):
            tag = f"_p{bi}{ci}"
            boxes, wants = regions(stage.ops, tile, hw)
            have: dict[str, tuple[str, tuple]] = {}  # original tensor -> (program tensor, its box)
            for j, (sop, kind) in enumerate(zip(stage.ops, stage.kinds)):
                out_box = boxes[sop.output]
                oh, ow = box_size(out_box)
                full = graph.tensors[sop.output]
                name = f"{sop.output}{tag}"
                if kind == "gather":
                    x = sop.inputs[0]
                    prog.append(_POp("gather", name, [x], (1, oh, ow, full.shape[3]), full.dtype, j,
                                     begin=(out_box[0], out_box[2])))  # fmt: skip
                    have[sop.output] = (name, out_box)
                    continue
                ins = []
                for x in sop.inputs:
                    want = wants[(j, x)]
                    if x not in have and kind == "ew" and len(sop.inputs) == 1:  # reads the model input at its offset
                        ins.append(x)
                        continue
                    if x not in have:  # the model input: copy its box
                        src = graph.tensors[x]
                        bx = boxes[x]
                        bh, bw = box_size(bx)
                        prog.append(_POp("slice", f"{x}{tag}", [x], (1, bh, bw, src.shape[3]), src.dtype, begin=(bx[0], bx[2])))
                        have[x] = (f"{x}{tag}", bx)
                    pname, pbox = have[x]
                    if pbox != want:  # another reader needs more of it: copy the sub-box this op reads
                        wh, ww = box_size(want)
                        sub = f"{x}{tag}_for{j}"
                        prog.append(_POp("slice", sub, [pname], (1, wh, ww, shapes[x][3]), graph.tensors[x].dtype,
                                         begin=(want[0] - pbox[0], want[2] - pbox[2])))  # fmt: skip
                        ins.append(sub)
                    else:
                        ins.append(pname)
                op = graph.ops[j]
                fh, fw = full.shape[1], full.shape[2]
                macs = op.macs * oh * ow // (fh * fw) if op.macs else 0
                pad = patch_pad(sop.window, out_box, wants[(j, sop.inputs[0])]) if kind == "conv" else ()
                begin = (out_box[0], out_box[2]) if kind == "ew" and ins[0] in graph.inputs else ()
                prog.append(_POp(kind, name, ins, (1, oh, ow, full.shape[3]), full.dtype, j, pad=pad, macs=macs, begin=begin))
                have[sop.output] = (name, out_box)
            tiles.append(have[stage.tensor][0])
        if q > 1:
            band_shape = (1, band[0][1] - band[0][0], s_shape[2], s_shape[3])
            name = stage.tensor if p == 1 else f"{stage.tensor}_band{bi}"
            prog.append(_POp("concat", name, tiles, band_shape, "int8", axis=2))
            bands.append(name)
        else:
            bands.append(tiles[0])
    if p > 1:
        prog.append(_POp("concat", stage.tensor, bands, s_shape, "int8", axis=1))
    return prog


def _patched_graph(graph: OpGraph, stage: _Stage, prog: list[_POp]) -> OpGraph:
    """The operator graph with the stage replaced by ``prog`` (no kernels: for scoring)."""
    inner = {o.output for o in stage.ops}
    tensors = {n: dataclasses.replace(t, producer=None, consumers=[]) for n, t in graph.tensors.items() if n not in inner}
    ops = []
    for pop in prog:
        tensors[pop.out] = Tensor(pop.out, tuple(pop.shape), pop.dtype, "activation", pop.out)
        ops.append(Op(pop.out, pop.what.upper(), list(pop.inputs), pop.out, None, pop.macs))
    ops += [dataclasses.replace(op, inputs=list(op.inputs)) for op in graph.ops[stage.split + 1:]]
    return linked(ops, tensors, graph.inputs, graph.outputs)


# -- scoring --------------------------------------------------------------------------------------------


def _measure(graph: OpGraph, align: int, seconds: float, stage_ops: int = 0) -> tuple[int, int]:
    """(planned arena, the most bytes live at a step of the first ``stage_ops`` ops) of ``graph`` in the best
    order found: the second breaks ties where the arena is set by the tensors after the stage (which the
    in-place passes lower further, leaving the stage's own peak to decide)."""
    from ..plan import plan_arena
    from ..schedule.best import best_schedule
    from ..schedule.dag import Dag
    from ..schedule.liveness import arena_buffers

    dag = Dag.from_graph(graph, align)
    order, _, _ = best_schedule(dag, seconds)
    curve = dag.curve(order)
    stage = max((c for v, c in zip(order, curve) if v < stage_ops), default=0)
    return plan_arena(arena_buffers(graph, order, align)).total_bytes, stage


def candidates(mod, max_overhead: float | None = None, *, align: int = 4, seconds: float = 0.05,
               grids=None, keep_all: bool = False, rolling: bool = True) -> list[Candidate]:  # fmt: skip
    """Every (split, p x q) of ``mod``'s patch stages within ``max_overhead`` extra MACs (a fraction; None:
    the default for the module, ``default_overhead``), scored on the patched operator graph by the build's
    scheduler and planner. Sorted by (arena, MACs). Only candidates with an arena strictly below the unsplit
    module's unless ``keep_all`` (for the Pareto points)."""
    from ..ir.graph import read_graph
    from ..ir.outside import as_planned

    limit = default_overhead(mod) if max_overhead is None else max_overhead
    raw = read_graph(mod)
    graph = as_planned(mod, raw)
    base_macs = sum(op.macs for op in graph.ops)
    base = _measure(graph, align, seconds)[0]
    grids = grids or [(p, q) for p in range(1, MAX_TILES + 1) for q in range(1, MAX_TILES + 1) if p * q > 1]
    out = []
    for stage in stages(mod):
        s = graph.tensors[stage.tensor].shape
        for p, q in grids:
            check()  # each candidate is scheduled and placed: under the pass search's deadline
            if p > s[1] or q > s[2]:
                continue
            prog = _program(raw, stage, p, q)
            macs = base_macs - sum(op.macs for op in graph.ops[: stage.split + 1]) + sum(o.macs for o in prog)
            if base_macs and (macs - base_macs) > limit * base_macs:
                continue
            arena, peak = _measure(as_planned(mod, _patched_graph(raw, stage, prog)), align, seconds, len(prog))
            if arena < base or keep_all:
                out.append(Candidate(stage.split, stage.tensor, (p, q), arena, macs, base, base_macs, peak))
    if rolling:  # rolling rows x column tiles: the same scheduler, planner and MAC limit (passes/rolling.py)
        from . import rolling as roll

        out += roll.candidates(mod, limit, align=align, seconds=seconds, keep_all=keep_all)
    return sorted(out, key=lambda c: (c.arena, c.stage_peak, c.macs))


def default_overhead(mod) -> float:
    """10 % extra MACs with the input outside the arena (MCUNetV2's accounting), 5 % with it inside."""
    from ..ir import outside

    return 0.10 if outside.marked(mod) else 0.05


# -- emitting the patched module ------------------------------------------------------------------------


def _tensor_type(shape, dtype):
    return relax.TensorType(tuple(int(d) for d in shape), dtype)


def _slice_kernel(x_shape, dtype, begin, out_shape, perm=None):
    """A copy of the box at ``begin`` (row, col) of an NHWC tensor, or, with ``perm`` = (0, 2, 3, 1), of
    an NCHW tensor into NHWC (the model input's TRANSPOSE folded into the copy)."""
    x = te.placeholder(tuple(x_shape), dtype, name="x")
    r, c = int(begin[0]), int(begin[1])
    if perm is None:
        out = te.compute(tuple(out_shape), lambda n, i, j, k: x[n, i + r, j + c, k], name="out")
    else:
        out = te.compute(tuple(out_shape), lambda n, i, j, k: x[n, k, i + r, j + c], name="out")
    return te.create_prim_func([x, out])


def _concat_kernel(shapes, axis):
    from ..kernels import int8_ops

    return int8_ops.concatenation([tuple(s) for s in shapes], axis)


def _retarget(prim, old_shape, new_shape, offset: tuple = ()):
    """An element-wise kernel (one loop nest over its output's shape, every buffer of that shape or a constant
    read independently of the row and column, e.g. PRELU's alpha) for another shape: its TVMScript with the
    shapes replaced, parsed again (the body depends on the indices only). With ``offset`` (row, col), its first
    parameter keeps the whole shape and is read at that offset (a patch of the model input read in place, with
    no copy of the box)."""
    text = prim.script()
    old, new = _dims(old_shape), _dims(new_shape)
    loops = _loop_nest(text, old)
    if loops is None:
        raise ValueError(f"kernel {prim.attrs.get('global_symbol')} is not a plain element-wise loop nest")
    first = re.search(r"def \w+\((\w+): T\.Buffer\(", text).group(1)
    if offset:  # the first parameter's declaration is kept whole; its every access is shifted
        text = text.replace(f"{first}: T.Buffer(({old}),", f"{first}: T.Buffer(({old}) ,", 1)
        v = [f"v_{i}" for i in loops]
        plain = f"{first}[{', '.join(v)}]"
        if text.count(plain) != text.count(f"{first}["):
            raise ValueError(f"kernel {prim.attrs.get('global_symbol')} reads its input off the output's index")
        text = text.replace(plain, f"{first}[{v[0]}, {v[1]} + {int(offset[0])}, {v[2]} + {int(offset[1])}, {v[3]}]")
    text = text.replace(f"T.Buffer(({old}),", f"T.Buffer(({new}),").replace(f"T.grid({old})", f"T.grid({new})")
    return tvm.script.from_source(text)


def _loop_nest(text: str, old: str) -> tuple | None:
    """The block variables' loop names of a kernel's TVMScript ``text`` that ``_retarget`` can retarget from
    the shape ``old`` (one loop nest over it, every buffer plain: ``_plain_buffers``), else None."""
    loops = re.findall(r"T\.axis\.remap\(\"SSSS\", \[(\w+), (\w+), (\w+), (\w+)\]\)", text)
    if text.count(f"T.grid({old})") != 1 or text.count("for ") != 1 or len(loops) != 1 or not _plain_buffers(text, old, loops[0]):
        return None
    return loops[0]


def _plain_buffers(text: str, old: str, loop: tuple) -> bool:
    """Every buffer of the kernel's TVMScript ``text`` has the shape ``old``, or is read at indices that
    name neither the row nor the column loop variable (the same values in every patch)."""
    buffers = re.findall(r"(\w+): T\.Buffer\(\(([^)]*)\),", text)
    if len(buffers) != len(re.findall(r"T\.Buffer\(", text)):
        return False
    spatial = re.compile(rf"\b(v_{loop[1]}|v_{loop[2]})\b")
    for name, shape in buffers:
        if shape == old:
            continue
        reads = re.findall(rf"\b{name}\[([^\]]*)\]", text)
        if not reads or any(spatial.search(idx) for idx in reads) or re.search(rf"\b{name}\[[^\]]*\]\s*=[^=]", text):
            return False  # read at the patch's own position, or written: not shared by every patch
    return True


def _clean(prim):
    """A tile's copy of ``prim``: not in place (its buffers are the tile's own), no spec (rebuilt per shape)."""
    prim = kernel_attrs.without_spec(kernel_attrs.without_inplace(prim))
    return prim.without_attr("global_symbol") if prim.attrs is not None and "global_symbol" in prim.attrs else prim


def _add(bb, prim, symbol: str, kind: str, macs: int, spec=None):
    prim = kernel_attrs.with_kind(_clean(prim), kind, int(macs), symbol=symbol)
    if spec is not None:  # later passes (in-place depthwise, overlap) rebuild the patch kernel from it
        prim = kernel_attrs.with_spec(prim, spec)
    return bb.add_func(prim, symbol)


def apply(mod, cand: Candidate) -> tvm.IRModule:
    """``mod`` with ops 0..cand.split run tile by tile in a cand.grid grid (or as one rolling-stage kernel)."""
    from ..ir.graph import read_graph

    if cand.rolling:
        from . import rolling as roll

        return roll.apply(mod, cand)

    graph = read_graph(mod)
    stage = next((s for s in stages(mod) if s.split == cand.split), None)
    if stage is None:
        raise ValueError(f"op {cand.split} ends no patch stage of this module")
    prog = _program(graph, stage, *cand.grid)
    b = Bindings(mod)
    kvars = kernel_vars(mod)
    taken = {str(f.attrs["global_symbol"]) for f in mod.functions.values() if f.attrs and "global_symbol" in f.attrs}
    k = 1
    while any(s.startswith(f"patch{k}_") for s in taken):
        k += 1
    param = {graph.inputs[0]: mod["main"].params[0]}

    def replacement(bb, env):
        vals = dict(param)
        value = None
        for n, pop in enumerate(prog):
            check()  # a kernel built per tile and operator
            ty = _tensor_type(pop.shape, pop.dtype)
            symbol = f"patch{k}_s{cand.split}_{cand.grid[0]}x{cand.grid[1]}_{n}_{pop.what}"  # the report names the grid
            if pop.what in ("slice", "gather"):
                x = vals[pop.inputs[0]]
                x_shape = tuple(int(d) for d in x.ty.shape.values)
                prim = _slice_kernel(x_shape, pop.dtype, pop.begin, pop.shape, NCHW_TO_NHWC if pop.what == "gather" else None)
                gv = _add(bb, prim, symbol, "STRIDED_SLICE" if pop.what == "slice" else "TRANSPOSE", 0)
                args = [x]
            elif pop.what == "concat":
                xs = [vals[i] for i in pop.inputs]
                prim = _concat_kernel([tuple(int(d) for d in x.ty.shape.values) for x in xs], pop.axis)
                gv = _add(bb, prim, symbol, "CONCATENATION", 0)
                args = xs
            else:
                var = kvars[pop.src]
                _gv, prim0, spec, args0 = b.kernel(var)
                op = graph.ops[pop.src]
                acts = iter(pop.inputs)
                args = [vals[next(acts)] if not graph.tensors[name].is_const else env.get(a, a)
                        for name, a in zip(op.inputs, args0)]  # fmt: skip
                if pop.what == "conv":
                    x_shape = tuple(int(d) for d in args[0].ty.shape.values)
                    new = dataclasses.replace(spec.out_of_place(), x_shape=tuple(x_shape), out_shape=tuple(pop.shape),
                                              pad=tuple(pop.pad))  # fmt: skip
                    gv = _add(bb, kernel_spec.build(new), symbol, op.kind, pop.macs, new)
                elif pop.what == "pad":
                    new = dataclasses.replace(spec, x_shape=tuple(int(d) for d in args[0].ty.shape.values))
                    gv = _add(bb, kernel_spec.build(new), symbol, op.kind, pop.macs, new)
                else:
                    prim = _retarget(prim0, graph.tensors[op.output].shape, pop.shape, pop.begin)
                    gv = _add(bb, prim, symbol, op.kind, pop.macs)
            call = relax.call_tir(gv, args, ty)
            if n == len(prog) - 1:
                value = call
            else:
                vals[pop.out] = bb.emit(call, name_hint=pop.out)
        return value

    drop = set(kvars[: stage.split])
    return rebuild(mod, {kvars[stage.split]: replacement}, drop)


# The in-place passes a patched module is confirmed under (next to the unsplit one under the same): a split must
# lower the arena both before them and after them, since they may lower the unsplit module's more.
FINISH = ("inplace_depthwise", "inplace_residual", "inplace_overlap", "inplace_elementwise", "concat_inplace")
CONFIRM = 2  # confirmed candidates compared (each is built and measured: seconds on a VWW-sized model)
MAX_TRIES = 3  # candidates built at most while none confirms


def _finished(mod) -> int:
    from .catalogue import evaluate
    from .optimize import run_passes

    return evaluate(run_passes(mod, FINISH)[0])["arena_bytes"]


def _confirm(mod, found: list[Candidate], base: int, base_finished: int, confirm: int):
    """The best of ``found`` (ranked) once built: ((arena after FINISH, MACs), candidate, module) or None."""
    from .catalogue import evaluate

    best = None
    tried = 0
    for cand in found:
        if tried >= MAX_TRIES or (best is not None and tried >= confirm):
            break
        if best is not None and not (cand.arena == best[1].arena and cand.macs <= best[1].macs):
            continue  # after one is kept, only a tie on the scored arena with no more MACs may still win
        tried += 1
        new = apply(mod, cand)
        finished = _finished(new)
        if evaluate(new)["arena_bytes"] < base and finished < base_finished and (best is None or (finished, cand.macs) < best[0]):
            best = ((finished, cand.macs), cand, new)
    return best


def patches(mod, max_overhead: float | None = None, *, report: dict | None = None, confirm: int = CONFIRM) -> tvm.IRModule:
    """The catalogue pass: the best-scored candidates are built in turn (at most MAX_TRIES) and kept if the
    module's arena is lower than ``mod``'s both without and after the in-place passes (FINISH). Once one is
    kept, candidates tying with it on the scored arena with no more MACs are built too (``confirm`` in all), and
    the least arena after the in-place passes wins (ties: fewer MACs). The p x q grids and the rolling stages
    are confirmed separately (their scores before FINISH do not compare: the in-place passes lower a grid's
    whole-tensor stage more), the least arena after FINISH of the two wins. ``mod`` unchanged if none is kept."""
    from .catalogue import evaluate
    from .fold_pad import fold_pad

    given, mod = mod, fold_pad(mod)  # a stage ends at an unfolded PAD: folded here, whatever ran before (issue 33)
    found = candidates(mod, max_overhead)
    if report is not None:
        report["candidates"] = [dataclasses.asdict(c) for c in found]
    if not found:
        return given
    base, base_finished = evaluate(mod)["arena_bytes"], _finished(mod)
    kept = [b for b in (_confirm(mod, [c for c in found if c.rolling == kind], base, base_finished, confirm)
                        for kind in (False, True)) if b is not None]  # fmt: skip
    if not kept:
        return given
    best = min(kept, key=lambda b: b[0])
    if report is not None:
        report["taken"] = {**dataclasses.asdict(best[1]), "finished_arena": best[0][0], "base_finished_arena": base_finished}
    return best[2]


def pareto(points: list[Candidate]) -> list[Candidate]:
    """The candidates no other beats on both arena and MACs (the objective's own filter)."""
    from .objective import pareto_front

    return pareto_front(points)


__all__ = ["Candidate", "apply", "candidates", "default_overhead", "pareto", "patches", "stages"]
