"""The memory passes the orchestrator (OPASS) may run, each a Relax -> Relax transform of the *lowered*
module (one ``call_tir`` per kernel, what the graph reader, the schedulers and the planner see).

Every pass preserves the results bit for bit; what it changes is which tensors exist, how big they are
and in which order the bindings come (the file order the schedulers start from). ``evaluate`` measures
a module the way the build does: graph, best operator order, arena plan.

TVM passes left out because they cannot act on this form (each measured: the module is structurally
unchanged on all 21 shared models):
RewriteDataflowReshape (reshapes are already ``relax.reshape`` views, no reshape kernels are left);
DataflowUseInplaceCalls (it rewrites Relax operators it can legalize in place, not ``call_tir`` kernels:
edgemem's in-place passes do that for its kernels); ConvertLayout (it rewrites ``relax.nn`` operators,
which lowering has already turned into NHWC kernels, the layout TFLite's weights come in);
FoldConstant (it folds only kernels whose inputs are all constants: 0 such calls on the shared models,
the TFLite importer already folds them; run *before* lowering it would turn int8 weights into float32,
4x their flash -- tests/test_tvm_passes.py shows both).
FuseOps levels 1, 2 and 4 form the same groups on edgemem's kernels, so fusion has two entries by the
kernels it may group instead: all of TVM's groups, or only element-wise/injective chains.

Each pass also declares what it may remove from the whole-tensor picture of the flatbuffer
(``removes``: ``edgemem.memory.floor`` capabilities), so that the early floor check refuses only what
no pass that may run can rescue (``floor_capabilities``). A declaration may promise more than the pass
does (the floor is only lower); never less (tests/test_memory_model.py checks the floor against the
planned arena on random models and pass sequences).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

import tvm
from tvm import relax

from ..memory.floor import ANCHORS, DropDead, Elide, Overlap, Patch

_CONVS = frozenset({"CONV_2D", "DEPTHWISE_CONV_2D"})
# Fusion's capabilities: every kind but the anchors (memory/floor.py: convolutions, matrix products, pooling,
# reductions, ...) is assumed fusable both ways -- element-wise, broadcast, injective, and any kind edgemem may
# learn later --, which keeps the floor sound whatever FuseOps groups; a group never holds two anchors.
FUSION_ANCHORS = ANCHORS
_FUSE_ALL = (
    Elide(None, None, "a reader that is no anchor fused into its producer's kernel", not_consumers=FUSION_ANCHORS),
    Elide(None, None, "a producer that is no anchor inlined into its readers", not_producers=FUSION_ANCHORS),
)
_FUSE_ELEMENTWISE = (
    Elide(None, None, "element-wise/injective chains fused", not_producers=FUSION_ANCHORS, not_consumers=FUSION_ANCHORS),
)


@dataclass(frozen=True)
class GraphPass:
    name: str
    purpose: str  # one line
    transform: Callable[[tvm.IRModule], tvm.IRModule]
    origin: str  # "tvm" or "edgemem"
    removes: tuple = ()  # what it may remove from RAM: edgemem.memory.floor capabilities (Elide, Overlap, ...)
    # parameterized passes (e.g. a patch split): mod -> [(label, transform)], each a move of its own for the
    # orchestrator (orchestrate.expand_variants: "name[label]"), costed like any state; None: ``transform`` only
    variants: Callable[[tvm.IRModule], list] | None = None
    # adds work (MACs) and may cost many seconds per trial: the orchestrator tries it only once the passes
    # that add none are explored (its default objective is the fewest instructions that fit)
    deferred: bool = False

    def __call__(self, mod: tvm.IRModule) -> tvm.IRModule:
        return self.transform(mod)


def _tvm(pass_factory) -> Callable[[tvm.IRModule], tvm.IRModule]:
    def run(mod: tvm.IRModule) -> tvm.IRModule:
        with tvm.transform.PassContext(opt_level=3):
            return pass_factory()(mod)

    return run


def _edgemem_passes() -> list[GraphPass]:
    from .concat_inplace import concat_inplace
    from .fold_dequantize import fold_dequantize
    from .fold_pad import fold_pad
    from .inplace import _ELEMENTWISE, inplace_depthwise, inplace_elementwise
    from .overlap import overlap_convolutions
    from .patches import STAGE_KINDS, patches
    from .remat import remat
    from .residual import residual_inplace

    return [
        GraphPass("fold_pad", "a zero-point PAD read only by convolutions becomes their padding", fold_pad, "edgemem",
                  (Elide(frozenset({"PAD", "PADV2"}), _CONVS, "a PAD's output read only by convolutions"),)),
        GraphPass("inplace_depthwise", "a depthwise convolution writes over its dying input (one channel of scratch)",
                  inplace_depthwise, "edgemem", (Overlap(frozenset({"DEPTHWISE_CONV_2D"})),)),
        GraphPass("inplace_residual", "a convolution fused with the residual ADD that alone reads it, written over the skip",
                  residual_inplace, "edgemem",
                  (Elide(_CONVS | {"FULLY_CONNECTED"}, frozenset({"ADD"}), "a convolution's result read only by its ADD"),
                   Overlap(frozenset({"ADD"})))),
        GraphPass("inplace_overlap", "a convolution or pooling writes its output over input rows no later output pixel reads",
                  overlap_convolutions, "edgemem", (Overlap(_CONVS | {"MAX_POOL_2D", "AVERAGE_POOL_2D"}),)),
        GraphPass("inplace_elementwise", "QUANTIZE/ADD/MUL write over an input that dies there", inplace_elementwise, "edgemem",
                  (Overlap(frozenset(_ELEMENTWISE)),)),
        GraphPass("concat_inplace", "producers write straight into their slice of a CONCATENATION (no copy)",
                  concat_inplace, "edgemem",
                  (Overlap(frozenset({"CONCATENATION"}), True, "input/output co-liveness of CONCATENATION"),)),
        GraphPass("fold_dequantize", "a float output's DEQUANTIZE folded into its producer (no int8 copy)",
                  fold_dequantize, "edgemem", (Elide(None, frozenset({"DEQUANTIZE"}), "a DEQUANTIZE's int8 input"),)),
        # no floor capability: a copy has its original's inputs and output, so no operator's own need changes
        GraphPass("remat", "a cheap tensor (pooling, element-wise, PAD) held across the peak is recomputed for its late readers",
                  remat, "edgemem", deferred=True),
        GraphPass("patches", "the first operators run tile by tile (halos recomputed) so their large tensors never exist whole",
                  patches, "edgemem", (Patch(STAGE_KINDS | {"PAD", "PADV2"}),), deferred=True),  # PADs: folded first (fold_pad)
    ]  # fmt: skip


def _tvm_fusion(mod: tvm.IRModule) -> tvm.IRModule:
    from .tvm_fusion import fuse_ops

    return fuse_ops(mod)


def _tvm_fusion_elementwise(mod: tvm.IRModule) -> tvm.IRModule:
    from .tvm_fusion import INJECTIVE, fuse_ops

    return fuse_ops(mod, max_pattern=INJECTIVE)


TVM_PASSES = [
    GraphPass("tvm_fuse_ops", "TVM's FuseOps + FuseTIR, each fused kernel scheduled so no tensor between its parts remains",
              _tvm_fusion, "tvm", _FUSE_ALL),
    GraphPass("tvm_fuse_elementwise", "TVM's FuseOps + FuseTIR over element-wise/injective chains only (no convolution)",
              _tvm_fusion_elementwise, "tvm", _FUSE_ELEMENTWISE),
    GraphPass("remove_redundant_reshape", "drop reshapes of reshapes and reshapes to the same shape",
              _tvm(relax.transform.RemoveRedundantReshape), "tvm"),
    GraphPass("dead_code_elimination", "drop bindings nothing reads", _tvm(relax.transform.DeadCodeElimination), "tvm",
              (DropDead(),)),
    GraphPass("canonicalize_bindings", "fold trivial rebindings (x = y) away", _tvm(relax.transform.CanonicalizeBindings), "tvm"),
    GraphPass("eliminate_common_subexpr", "compute identical kernel calls once", _tvm(relax.transform.EliminateCommonSubexpr), "tvm"),
    GraphPass("topological_sort_depth_first", "reorder bindings depth first (the schedulers' starting order)",
              _tvm(lambda: relax.transform.TopologicalSort(order="depth-first")), "tvm"),
    GraphPass("topological_sort_breadth_first", "reorder bindings breadth first",
              _tvm(lambda: relax.transform.TopologicalSort(order="breadth-first")), "tvm"),
]  # fmt: skip


def catalogue() -> list[GraphPass]:
    """Every pass, edgemem's first; patches last (the orchestrator detects in this order, and it costs seconds)."""
    ours = _edgemem_passes()
    return [p for p in ours if p.name != "patches"] + TVM_PASSES + [p for p in ours if p.name == "patches"]


def floor_capabilities(names, model=None, input_outside: bool = False) -> tuple:
    """What the passes named may remove, together (the early floor is computed under these); with the
    flatbuffer ``model``, also what its lowering removes (``lowering_capabilities``). ``patches`` counts like
    any other: the orchestrator tries it (rolling rows included) whenever the whole-tensor plan does not fit
    (passes/optimize.py), so a floor without it would refuse models a patch stage fits (issue 33:
    MobileNetV2-224, 212,124 B). Its floor is the model input (none with ``input_outside``) on every operator
    a stage could run tile by tile; the MAC limit is not weighed, so the floor may be lower than any plan."""
    known = {p.name: p for p in catalogue()}
    caps = tuple(c for n in names if n in known for c in known[n].removes)
    if input_outside:
        caps = tuple(Patch(c.kinds, c.note, True) if isinstance(c, Patch) else c for c in caps)
    return caps + (lowering_capabilities(model) if model is not None else ())


_QUANTIZED_TYPES = (3, 7, 9)  # TFLite UINT8, INT16, INT8


def lowering_capabilities(model) -> tuple:
    """What lowering itself may remove (passes/lower.py), whatever passes follow. A float model (no QUANTIZE or
    DEQUANTIZE, no 8- or 16-bit activation) is legalized and grouped by TVM's FuseOps: fusion's capabilities.
    A quantized one goes through integerize, which runs a float island (DEQUANTIZE -> float ops -> QUANTIZE)
    in int8 where it can: the island's float tensors may vanish. Both drop what nothing reads."""
    from ..frontend.footprint import is_constant, op_names

    float_model = not any(k in ("QUANTIZE", "DEQUANTIZE") for k in op_names(model))
    sg = model.Subgraphs(0)
    for t in range(sg.TensorsLength()) if float_model else ():
        tensor = sg.Tensors(t)
        if tensor.Type() in _QUANTIZED_TYPES and not is_constant(model, tensor):
            float_model = False
            break
    if float_model:
        return (*_FUSE_ALL, DropDead())
    return _INTEGERIZE


_INTEGERIZE = (
    Elide(frozenset({"DEQUANTIZE"}), None, "a float island's dequantized input (integerize runs it in int8)"),
    Elide(None, frozenset({"QUANTIZE"}), "a float island's result before its QUANTIZE (integerize runs it in int8)"),
    DropDead(),
)


def evaluate(mod: tvm.IRModule, align: int = 4, schedule_seconds: float = 0.5, graph=None) -> dict:
    """What the build would get from ``mod``: arena bytes (best order found, then planned), flash bytes of
    constants, MACs, number of kernels and of RAM tensors. The same steps as the build's (best_schedule on
    the graph's Dag, its buffers by schedule.liveness.arena_buffers, plan_arena in one pool); the build
    passes its own scheduling budget. ``graph``: ``mod``'s OpGraph when the caller has read it already."""
    from ..ir.outside import as_planned, planned_graph
    from ..plan import plan_arena
    from ..schedule.best import best_schedule
    from ..schedule.dag import Dag
    from ..schedule.liveness import arena_buffers

    from ..timelimit import check, remaining

    graph = planned_graph(mod) if graph is None else as_planned(mod, graph)  # the inputs outside the arena when the build plans them there (ir/outside.py)
    left = remaining()  # under the pass search's deadline, the schedulers get at most what is left of it
    order, peak, _ = best_schedule(Dag.from_graph(graph, align), schedule_seconds if left is None else max(min(schedule_seconds, left), 0.0))
    check()
    plan = plan_arena(arena_buffers(graph, order, align))
    check()
    return {
        "arena_bytes": plan.total_bytes,
        "peak_bytes": peak,
        "flash_bytes": sum(t.nbytes for t in graph.constants()),
        "macs": sum(op.macs for op in graph.ops),
        "ops": len(graph.ops),
        "tensors": len(graph.activations()),
    }
