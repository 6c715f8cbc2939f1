"""The model's inputs outside the arena (``edgemem build --input outside``).

The caller hands each input as its own buffer (``edgemem_run_from(const void *input)``: a camera frame
already in RAM, or a const array in flash), so the arena holds no copy of it. In the operator graph an
input then becomes an *external* tensor: like a state tensor it owns no arena storage (``OpGraph.
activations()`` leaves it out, so the storage model, the schedulers, the planner and the checker never
see it), and the kernels that read it (or a view of it) get the caller's pointer instead of an arena
offset (codegen/model_c.py).

The caller's buffer is read-only for the run (the API takes ``const void *``; the same frame may be run
again), so no kernel may write into it. An in-place kernel whose ``alias`` is the input is fine (its
kernel is correct at any offset; the planner just cannot overlap the two), but a ``call_tir_inplace``
that writes into the input's storage is not, nor an input that is also a graph output: ``inputs_outside``
refuses those with one clear error.

Accounting (what the report states, MCUNetV2's convention): the arena excludes the input bytes; the
application's RAM is arena + its own input buffer(s) (``outside_info``).
"""

from __future__ import annotations

import dataclasses

from ..errors import EdgememError
from .graph import OpGraph

EXTERNAL = "external"  # Tensor.kind of an input the caller owns


def inputs_outside(graph: OpGraph) -> OpGraph:
    """The graph with every model input external (outside the arena). Raises EdgememError where a kernel
    would write into the caller's buffer or an input is also an output."""
    inputs = set(graph.inputs)
    outputs = {graph.storage_of(o).name for o in graph.outputs}
    for name in graph.inputs:
        if name in outputs:
            raise EdgememError(
                f"--input outside: model input '{name}' is also a model output, which must live in the arena "
                "(an output stays valid after the run). Build without --input outside."
            )
    for op in graph.ops:
        if op.writes_input is not None and graph.tensors[op.inputs[op.writes_input]].storage in inputs:
            raise EdgememError(
                f"--input outside: kernel {op.name} ({op.kind}) writes in place into model input "
                f"'{graph.tensors[op.inputs[op.writes_input]].storage}', but the caller's input buffer is read-only "
                "(edgemem_run_from takes a const pointer). Build without --input outside, or with --passes naming "
                "passes that do not write into the input."
            )
    tensors = {}
    for name, t in graph.tensors.items():
        if name in inputs:
            t = dataclasses.replace(t, kind=EXTERNAL, consumers=list(t.consumers))
        elif t.alias_of in inputs:  # the in-place kernel still runs; its output just cannot overlap the input
            t = dataclasses.replace(t, alias_of=None, consumers=list(t.consumers))
        tensors[name] = t
    return OpGraph(graph.ops, tensors, list(graph.inputs), list(graph.outputs))


def is_external(graph: OpGraph, name: str) -> bool:
    """Whether ``name`` (a tensor or a view of one) is a caller-owned input."""
    return graph.storage_of(name).kind == EXTERNAL


def outside_info(graph: OpGraph) -> dict:
    """The report's accounting of the inputs outside the arena."""
    names = [n for n in graph.inputs if graph.tensors[n].kind == EXTERNAL]
    total = sum(graph.tensors[n].nbytes for n in names)
    return {
        "inputs": names,
        "bytes": total,
        "accounting": f"the arena excludes the model input ({total:,} B): the caller passes it to edgemem_run_from() "
                      "in its own buffer (RAM or flash), which the application's RAM must add",
    }  # fmt: skip


# The build marks the lowered module (an attribute of main, kept by every pass) so that the passes that measure
# memory on their own -- the orchestrator's evaluate, remat -- count the inputs as the build will.
MARK = "edgemem.input_outside"


def mark(mod):
    """``mod`` with main marked: its inputs are planned outside the arena."""
    import tvm

    funcs = {gv: (f.with_attr(MARK, 1) if gv.name_hint == "main" else f) for gv, f in mod.functions.items()}
    return tvm.IRModule(funcs, attrs=mod.attrs, global_infos=mod.global_infos)


def marked(mod) -> bool:
    attrs = mod["main"].attrs
    return attrs is not None and MARK in attrs and int(attrs[MARK]) == 1


def planned_graph(mod) -> OpGraph:
    """The OpGraph of a lowered module as the build plans it: inputs external when the module is marked (and
    no kernel writes into them; such a module is measured with its inputs in the arena, and the build itself
    refuses it with inputs_outside's message)."""
    from .graph import read_graph

    return as_planned(mod, read_graph(mod))


def as_planned(mod, graph: OpGraph) -> OpGraph:
    """``graph`` (read from ``mod``, or derived from it) as the build plans it: planned_graph's rule."""
    if marked(mod):
        try:
            return inputs_outside(graph)
        except EdgememError:
            return graph
    return graph
