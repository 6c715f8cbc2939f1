"""The early floor: a RAM need read from the flatbuffer before lowering, sound under the memory passes.

Without any pass, every operator needs its non-constant inputs and its outputs in RAM at once, so no
schedule or placement goes below the largest such sum. But the passes of the catalogue
(passes/catalogue.py) remove some of those bytes, so a floor that ignores them refuses models the
pipeline would fit (issue 18: a widening FULLY_CONNECTED -> DEQUANTIZE needs 1,280 B at the
DEQUANTIZE step, but fused or folded the int8 tensor never exists and 1,040 B suffice). Each pass
therefore declares what it *may* remove, as capabilities:

- ``Elide(producers, consumers)``: a tensor written by an op of ``producers`` and read only by ops of
  ``consumers`` (``None``: any kind; never a graph input or output) may never exist in RAM: the ops
  become one kernel (PAD folded into a convolution, DEQUANTIZE folded into its producer, fusion).
- ``Overlap(kinds, all_inputs)``: an op of ``kinds`` may write its output over an input that dies
  there (``all_inputs``: over all of them, a CONCATENATION assembled in place).
- ``DropDead()``: an output nothing reads may vanish, an op with only such outputs with its step
  (dead-code elimination).

``operator_floor`` is then, per op v, what is live at v's kernel step in *every* outcome: the least, over
the sets of v's tensors that may vanish together (never joining two ``ANCHORS`` in one kernel), of v's
other tensors plus what the fused kernel holds instead of the vanished ones (the partner op's tensors
that cannot vanish), minus the overlap v's kind allows. A declaration
may promise more than its pass does (the floor only gets lower); one that promises less makes the
check refuse what a pass rescues: tests/test_memory_model.py checks on random models and pass
sequences that the floor never exceeds the arena the pipeline plans.
"""

from __future__ import annotations

from dataclasses import dataclass

from .model import MemoryModel


# TFLite operators that anchor a kernel: convolutions, matrix products, pooling and reductions, LUT-free
# softmax, recurrent loops. No pass joins two of them in one kernel (TVM's FuseOps gives each group one
# master; PAD folding joins a PAD to one convolution; DEQUANTIZE folding one producer to a DEQUANTIZE), so
# a tensor between two anchors (or read by two) never vanishes, and of two tensors whose removal would need
# two anchors in one kernel at most one vanishes.
ANCHORS = frozenset({
    "CONV_2D", "DEPTHWISE_CONV_2D", "TRANSPOSE_CONV", "FULLY_CONNECTED", "BATCH_MATMUL", "AVERAGE_POOL_2D",
    "MAX_POOL_2D", "L2_POOL_2D", "SOFTMAX", "LOG_SOFTMAX", "MEAN", "SUM", "REDUCE_MAX", "REDUCE_MIN", "REDUCE_PROD",
    "ARG_MAX", "ARG_MIN", "UNIDIRECTIONAL_SEQUENCE_LSTM", "LSTM", "SVDF", "CUMSUM",
})  # fmt: skip


@dataclass(frozen=True)
class Elide:
    producers: frozenset[str] | None  # op kinds; None: any
    consumers: frozenset[str] | None
    note: str = ""
    not_producers: frozenset[str] = frozenset()  # kinds excluded (with None above: any other kind)
    not_consumers: frozenset[str] = frozenset()

    def allows(self, producer: str, readers: list[str]) -> bool:
        def ok(kind, among, excluded):
            return (among is None or kind in among) and kind not in excluded

        return bool(readers) and ok(producer, self.producers, self.not_producers) and all(
            ok(r, self.consumers, self.not_consumers) for r in readers)

    def __str__(self) -> str:
        return self.note or f"elide {self.producers or 'any'} -> {self.consumers or 'any'}"


@dataclass(frozen=True)
class Overlap:
    kinds: frozenset[str]
    all_inputs: bool = False
    note: str = ""

    def __str__(self) -> str:
        return self.note or f"{'/'.join(sorted(self.kinds))} output over {'its inputs' if self.all_inputs else 'an input'}"


@dataclass(frozen=True)
class DropDead:
    """An output nothing reads (and no graph output) may vanish; an op with only such outputs, with its step."""

    note: str = "an op whose result nothing reads"

    def __str__(self) -> str:
        return self.note


@dataclass(frozen=True)
class Patch:
    """An op of ``kinds`` fed by the graph inputs through such ops only may run patch by patch
    (passes/patches.py): its tensors never exist whole but the stage's last output, whose readers keep
    their own floor. What stays is a graph input it reads: the step that reads a patch of it (the copy of
    the box, or the op reading it in place) holds it whole. So its floor is those inputs' bytes, none with
    ``input_outside`` (a promise of more than the pass does is sound: the pass's MAC limit is not weighed, and
    rolling rows (passes/rolling.py) run the same stages, so they are covered too)."""

    kinds: frozenset[str]
    note: str = "ops of a patch stage at the graph input run tile by tile"
    input_outside: bool = False  # the graph inputs are the caller's buffers (ir/outside.py): not even they stay

    def __str__(self) -> str:
        return self.note


def patchable(model: MemoryModel, capabilities) -> set[int]:
    """The ops a Patch capability may run tile by tile: its kinds, reading graph inputs or such ops' outputs."""
    kinds = set().union(*(c.kinds for c in capabilities if isinstance(c, Patch)))
    out: set[int] = set()
    for v, op in enumerate(model.ops):  # ops are in a topological order
        if op.kind in kinds and all(model.storages[t].producer is None or model.storages[t].producer in out
                                    for t in op.reads if t in model.storages):  # fmt: skip
            out.add(v)
    return out


MAX_WORLD_BITS = 10  # vanishing tensors of one op enumerated exactly (more: all vanish, a weaker floor)


def _joined(model: MemoryModel, t: str) -> set[int]:
    """The ops that must share one kernel for tensor ``t`` to vanish: its producer and all its readers."""
    s = model.storages[t]
    return {s.producer, *s.readers} - {None}


def _anchors(model: MemoryModel, ops) -> int:
    return sum(model.ops[u].kind in ANCHORS for u in ops)


def vanishing(model: MemoryModel, capabilities) -> set[str]:
    """The storages some capability may remove from RAM."""
    elides = [c for c in capabilities if isinstance(c, Elide)]
    out = set()
    drop_dead = any(isinstance(c, DropDead) for c in capabilities)
    for s in model.storages.values():
        if drop_dead and s.producer is not None and not s.readers and not s.pinned and not s.temp:
            out.add(s.name)  # nothing reads it: its kernel need not write it
            continue
        if s.producer is None or s.pinned or s.temp or _anchors(model, _joined(model, s.name)) > 1:
            continue
        kind = model.ops[s.producer].kind
        readers = [model.ops[r].kind for r in s.readers]
        if any(c.allows(kind, readers) for c in elides):
            out.add(s.name)
    return out


def op_floors(model: MemoryModel, capabilities=()) -> list[int]:
    """Per op, the bytes live at its kernel's step whatever the passes with ``capabilities`` do."""
    size = {name: s.size for name, s in model.storages.items()}
    gone = vanishing(model, capabilities)
    overlaps = [c for c in capabilities if isinstance(c, Overlap)]
    drop_dead = any(isinstance(c, DropDead) for c in capabilities)
    patched = patchable(model, capabilities)
    outside = any(c.input_outside for c in capabilities if isinstance(c, Patch))
    out = []
    for v, op in enumerate(model.ops):
        if v in patched:
            out.append(0 if outside else sum(size[t] for t in op.reads if t in size and model.storages[t].producer is None))
            continue
        if drop_dead and op.writes and all(
                not model.storages[t].readers and not model.storages[t].pinned for t in op.writes if t in size):
            out.append(0)
            continue
        ins = [t for t in op.reads if t in size]
        outs = [t for t in op.writes if t in size and t not in ins]
        # a vanishing tensor of v: in a world where it vanishes, v's kernel holds instead what its partner op
        # (producer or reader) keeps in RAM (nothing, if the partner may write over its input)
        stands_for = {}
        for t in [t for t in ins + outs if t in gone]:
            s = model.storages[t]
            options = []
            for u in ([s.producer] if t in ins else list(s.readers)):
                if u == v:
                    continue
                o = model.ops[u]
                if any(o.kind in c.kinds for c in overlaps):
                    options.append(set())
                    continue
                group = _joined(model, t)
                options.append({x for x in o.reads + o.writes if x in size and x not in ins + outs and (
                    x not in gone or _anchors(model, group | _joined(model, x)) > 1)})  # x cannot vanish too
            stands_for[t] = min(options, key=lambda r: sum(size[x] for x in r)) if options else set()
        # the floor is the least over the worlds: which of them vanish (never joining two anchors in one kernel)
        names = list(stands_for)
        worlds = range(1 << len(names)) if len(names) <= MAX_WORLD_BITS else [(1 << len(names)) - 1]
        total = None
        for mask in worlds:
            vanished = [t for i, t in enumerate(names) if mask >> i & 1]
            if len(names) <= MAX_WORLD_BITS and _anchors(model, {v}.union(*(_joined(model, t) for t in vanished))) > 1:
                continue
            r_in = set().union(*(stands_for[t] for t in vanished if t in ins))
            r_out = set().union(*(stands_for[t] for t in vanished if t in outs)) - r_in
            if len(names) > MAX_WORLD_BITS:  # too many to enumerate: every one vanishes, standing for nothing
                r_in = r_out = set()
            in_bytes = [size[t] for t in ins if t not in vanished] + ([sum(size[x] for x in r_in)] if r_in else [])
            out_bytes = sum(size[t] for t in outs if t not in vanished) + sum(size[x] for x in r_out)
            here = sum(in_bytes) + out_bytes
            for c in overlaps:  # the output written over an input (all inputs) that dies there
                if op.kind in c.kinds and in_bytes:
                    here -= min(out_bytes, sum(in_bytes) if c.all_inputs else max(in_bytes))
                    break
            total = here if total is None else min(total, here)
        out.append(total)
    return out


def operator_floor(model: MemoryModel, capabilities=()) -> tuple[int, int]:
    """(bytes, op index in ``model``) of the op whose floor is largest ((0, -1) without ops)."""
    best = (0, -1)
    for v, b in enumerate(op_floors(model, capabilities)):
        best = max(best, (b, v))
    return best
