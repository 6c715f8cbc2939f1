"""The two ways a ``MemoryModel`` is built: from the lowered ``OpGraph`` and straight from the flatbuffer.

``from_graph``: storages are ``OpGraph.activations()`` (inputs and kernel outputs that own RAM),
workspaces are temps, views and ``call_tir_inplace`` results name their storage, an in-place output
names its alias, state tensors go outside the arena.

``from_tflite`` (no TVM, for models the lowering may not support yet, the early floor and the
symbolic path): tensors with buffer data are constants (flash), variable tensors are state, ops of
``views`` with one non-constant input and one output are views; every other output is a storage of
its own. ``size_of(t)`` gives a tensor's bytes (default: its static size, an unknown dim counting as 1;
the symbolic path passes expressions). ``folded``: op indices evaluated at build time and
``constants`` their outputs (frontend/fold.py): no ops, no RAM.
"""

from __future__ import annotations

from pathlib import Path

from .model import MemOp, MemoryModel, Storage

VIEW_OPS = ("RESHAPE", "SQUEEZE", "EXPAND_DIMS")  # same bytes, another shape: edgemem lowers them to views


def aligned(n, align: int):
    """``n`` rounded up to a multiple of ``align`` (``n`` unchanged for align 1: it may be an expression)."""
    return n if align <= 1 else -(-n // align) * align


def from_graph(graph, align: int = 1) -> MemoryModel:
    outs = {graph.storage_of(o).name for o in graph.outputs}
    workspaces = {op.workspace for op in graph.ops if op.workspace}
    storages = {}
    for t in graph.activations():
        storages[t.name] = Storage(t.name, aligned(t.nbytes, align), t.producer, list(t.consumers),
                                   pinned=t.name in outs, temp=t.name in workspaces, alias=t.alias_of,
                                   shift=t.alias_shift, rows=_overlap_rows(graph, t))  # fmt: skip
    views = {t.name: t.storage for t in graph.tensors.values() if t.kind in ("input", "activation") and t.storage != t.name}
    ops = []
    for op in graph.ops:
        reads = []
        for i in op.inputs:
            s = graph.tensors[i].storage
            if s in storages and s not in reads:
                reads.append(s)
        writes = [graph.tensors[op.output].storage] + ([op.workspace] if op.workspace else [])
        ops.append(MemOp(op.name, op.kind, reads, writes))
    for t in graph.tensors.values():  # a view an op writes into (call_tir_inplace): its readers wait for it
        if t.storage != t.name and t.producer is not None and t.producer != graph.tensors[t.storage].producer:
            for c in t.consumers:
                ops[c].after.append(t.producer)
    states = {t.name: t.nbytes for t in graph.states()}
    return MemoryModel(ops, storages, views, states)


def _overlap_rows(graph, t):
    """The loop order's proof of a partial-liveness output (passes/overlap.py marks its kernel with
    kernel_attrs' ``overlap``): per pixel, the bytes written and the alias's bytes still to be read (overlap.rows)."""
    if t.producer is None or not t.alias_of:
        return None
    from ..kernels import kernel_attrs
    from .overlap import kernel_rows

    prim = graph.ops[t.producer].prim
    inplace = kernel_attrs.inplace(prim)
    if inplace is None or inplace.overlap is None:
        return None
    return tuple(kernel_rows(prim))


def from_tflite(source, align: int = 4, views=VIEW_OPS, size_of=None, folded=frozenset(), constants=frozenset()) -> MemoryModel:
    """``source``: a path or a model read by frontend.tflite_import.read_tflite."""
    from ..frontend.footprint import is_constant, op_names, tensor_bytes
    from ..frontend.tflite_import import read_tflite, tensor_name

    model = read_tflite(Path(source)) if isinstance(source, (str, Path)) else source
    sg = model.Subgraphs(0)
    kinds = op_names(model)
    size_of = size_of or (lambda t: tensor_bytes(sg.Tensors(t)))
    const = {}

    def is_const(t):
        if t not in const:
            const[t] = t in constants or is_constant(model, sg.Tensors(t))
        return const[t]

    def name(t):
        return f"{t}:{tensor_name(sg, t)}"

    def ints(vector):
        return [] if isinstance(vector, int) else [int(v) for v in vector]

    root: dict[int, int] = {}  # tensor -> the tensor whose RAM it uses
    storages: dict[int, Storage] = {}
    states: dict[int, object] = {}
    ops: list[MemOp] = []
    op_ids: list[int] = []  # model op index -> file op index
    pending_reads = []
    for t in ints(sg.InputsAsNumpy()):
        if t >= 0 and not is_const(t):
            storages[t] = Storage(name(t), aligned(size_of(t), align), None)
    for i in range(sg.OperatorsLength()):
        if i in folded:
            continue
        op = sg.Operators(i)
        ins = []
        for t in ints(op.InputsAsNumpy()):
            if t < 0 or is_const(t):
                continue
            if sg.Tensors(t).IsVariable():
                states.setdefault(t, size_of(t))
                continue
            ins.append(root.get(t, t))
        outs = [t for t in ints(op.OutputsAsNumpy()) if t >= 0]
        if kinds[i] in views and len(ins) == 1 and len(outs) == 1:
            root[outs[0]] = ins[0]
            continue
        v = len(ops)
        for t in outs:
            storages[t] = Storage(name(t), aligned(size_of(t), align), v)
        reads = list(dict.fromkeys(ins))
        ops.append(MemOp(kinds[i], kinds[i], [name(t) for t in reads], [name(t) for t in outs]))
        op_ids.append(i)
        pending_reads.append((v, reads))
    for v, reads in pending_reads:
        for t in reads:
            if t not in storages:  # read but neither an input nor produced: live from step 0, as an input
                storages[t] = Storage(name(t), aligned(size_of(t), align), None)
            storages[t].readers.append(v)
    for t in ints(sg.OutputsAsNumpy()):
        t = root.get(t, t)
        if t in storages:
            storages[t].pinned = True
    ordered = {s.name: s for _, s in sorted(storages.items(), key=lambda kv: (kv[1].producer is not None, kv[1].producer or 0, kv[0]))}
    mm = MemoryModel(ops, ordered, {name(t): name(r) for t, r in root.items() if r in storages},
                     {name(t): s for t, s in states.items()})  # fmt: skip
    mm.op_index = op_ids  # file operator index of each op
    mm.tensor_of = {s.name: t for t, s in storages.items()}  # storage name -> .tflite tensor index
    return mm
