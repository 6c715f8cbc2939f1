"""The storage model: which bytes are live at each step. The one implementation of that rule in edgemem.

A ``MemoryModel`` is a list of ops and of *storages* (the RAM-owning tensors). Views (reshapes, a
kernel writing in place into its argument) are names of a storage, not storages; constants live in
flash and state tensors outside the arena (static RAM), so neither is a storage. Sizes are ints, or
TVM expressions in a symbolic dimension (``schedule/symbolic.py``): the arithmetic below only adds
and takes the smaller of two sizes.

The rule, under an op order (``ranges``):
- a storage produced by an op is born at that op's step; a graph input (no producer) at step 0;
- it dies after the step of its last reader; one nobody reads dies at its birth step;
- a *pinned* storage (a graph output, or an input that is also an output) lives to the last step;
- a *temp* (a kernel's workspace) lives at its op's step only;
- an output that names an ``alias`` (an in-place kernel writing over an input that dies at that very
  step) shares their common bytes at that step: they count once (``live_events``).
At one step an op's inputs and outputs are live together (an input dies *after* its reader's step).

Everything that needs liveness calls this module: ``schedule/liveness.live_ranges`` (the planner's
buffers), ``plan/model.lower_bound``, the profiling prediction (``plan/graph_plan.predicted_steps``), the
file-order ranges and the early floor (``frontend/footprint.py``, ``memory/floor.py``), and the two DAG
evaluators (``schedule/dag.Dag``, ``schedule/symbolic.SymDag``), which are built *from* a model
(``Dag.from_model``) and keep their incremental forms (``Dag.mem``/``Dag.step``) only as fast
evaluators of this rule, checked against it by tests/test_memory_model.py.

Partial liveness (issue 20): an output born pixel by pixel over an input that dies pixel by pixel (a
convolution writing its output over input rows no later output pixel reads, memory/overlap.py) is the
alias rule with a ``shift``: the output sits ``shift`` bytes from its alias's start (offset(out) -
offset(alias)), and at their common step the bytes of ``[0, |alias|)`` and ``[shift, shift + |out|)`` they
share count once (``shift`` 0 is the whole-tensor in-place case above). The kernel's loop order proves the
shift safe: ``rows`` lists, per output pixel in write order, the output bytes written and the alias's bytes
still to be read afterwards, which the independent plan checker tests against the real offsets. Seen
from a fixed placement this is exact: at that step the pair occupies the union of the two intervals, and
the rows prove no byte of it is needed by both at once. The DAG evaluators read the shared bytes as a
negative temp of the writer's step (``Dag.from_model``).
"""

from __future__ import annotations

from dataclasses import dataclass, field


def shared_bytes(size_alias, size, shift=0):
    """Bytes an output of ``size`` at ``shift`` from its alias's start shares with the alias (ints or, at
    shift 0, TVM expressions)."""
    if not shift:
        return smaller(size, size_alias)
    return max(0, min(size_alias, shift + size) - max(0, shift))


def smaller(a, b):
    """min of two sizes, ints or TVM expressions."""
    if isinstance(a, int) and isinstance(b, int):
        return min(a, b)
    from tvm import tirx

    return tirx.min(a, b)


@dataclass
class Storage:
    """One RAM-owning tensor. ``producer`` None: a graph input (live from step 0)."""

    name: str
    size: object  # bytes: int or a TVM PrimExpr
    producer: int | None
    readers: list[int] = field(default_factory=list)  # op indices
    pinned: bool = False  # a graph output: live until the last step
    temp: bool = False  # a kernel's scratch: live at its producer's step only
    alias: str | None = None  # in place: the storage this one may be written over (it dies at our birth)
    shift: int = 0  # with an alias: offset(this) - offset(alias) the kernel's loop order allows (overlap.py)
    rows: tuple | None = field(default=None, compare=False, repr=False)  # per pixel (w0, w1, n0, n1): overlap.rows


@dataclass
class MemOp:
    """One step's op: the storages it reads and writes, and ops that must run before it besides the
    producers of what it reads (a kernel writing in place into a view its reader reads)."""

    name: str
    kind: str
    reads: list[str]
    writes: list[str]
    after: list[int] = field(default_factory=list)


@dataclass(frozen=True)
class Range:
    """The steps [first, last] (inclusive) during which a storage keeps ``size`` bytes."""

    name: str
    size: object
    first: int
    last: int
    alias: str | None = None
    shift: int = 0  # offset from the alias's start (partial liveness); 0: the same offset
    rows: tuple | None = field(default=None, compare=False, repr=False)  # the loop order's proof (overlap.rows)


@dataclass
class MemoryModel:
    ops: list[MemOp]
    storages: dict[str, Storage]  # in creation order: graph inputs, then op outputs
    views: dict[str, str] = field(default_factory=dict)  # tensor name -> the storage it names
    states: dict[str, object] = field(default_factory=dict)  # state tensor -> bytes (outside the arena)

    @property
    def n(self) -> int:
        return len(self.ops)

    def storage_of(self, name: str) -> str:
        return self.views.get(name, name)

    def preds(self) -> list[list[int]]:
        """Per op, the ops that must run before it: producers of the storages it reads, and ``after``."""
        out = [set(op.after) for op in self.ops]
        for s in self.storages.values():
            if s.producer is not None and not s.temp:
                for r in s.readers:
                    if r != s.producer:
                        out[r].add(s.producer)
        return [sorted(p) for p in out]

    def ranges(self, order) -> list[Range]:
        """Every storage's live range under the op order ``order`` (op indices)."""
        step = {op: s for s, op in enumerate(order)}
        end = max(len(order) - 1, 0)
        out = []
        for s in self.storages.values():
            first = 0 if s.producer is None else step[s.producer]
            if s.temp:
                last = first
            elif s.pinned:
                last = end
            else:
                last = max((step[r] for r in s.readers), default=first)
            out.append(Range(s.name, s.size, first, last, s.alias, s.shift, s.rows))
        return out

    def curve(self, order, zero=0, simplify=None) -> list:
        """Bytes live at each step of ``order``."""
        return curve(self.ranges(order), len(order), zero, simplify=simplify)

    def at(self, env: dict) -> "MemoryModel":
        """The model with its size expressions evaluated at one point of the symbolic dimensions."""
        from ..schedule.symbolic import evaluate

        storages = {k: Storage(s.name, evaluate(s.size, env), s.producer, list(s.readers), s.pinned, s.temp, s.alias, s.shift, s.rows)
                    for k, s in self.storages.items()}  # fmt: skip
        return MemoryModel(self.ops, storages, self.views, {k: evaluate(v, env) for k, v in self.states.items()})


def from_arrays(sizes, preds, succs, outputs, ext=(), pinned=(), temps=None, names=None, label=None) -> MemoryModel:
    """The model of a DAG given as arrays (``schedule/dag.Dag``, ``schedule/symbolic.SymDag``): op v has one
    output of ``sizes[v]`` read by ``succs[v]`` (pinned if v is in ``outputs``), a temp of ``temps[v]``; graph
    inputs are ``ext`` as (bytes, reader ops) and ``pinned`` sizes (inputs that are outputs, live throughout)."""
    n = len(sizes)
    names = list(names) if names is not None else [str(v) for v in range(n)]
    label = label or (lambda v: f"op{v}")
    storages = {}
    for v in range(n):
        storages[label(v)] = Storage(label(v), sizes[v], v, list(succs[v]), pinned=v in outputs)
        if temps is not None and temps[v]:
            storages[f"temp{v}"] = Storage(f"temp{v}", temps[v], v, temp=True)
    for e, (size, ops) in enumerate(ext):
        storages[f"input{e}"] = Storage(f"input{e}", size, None, list(ops))
    for i, size in enumerate(pinned):
        storages[f"pinned{i}"] = Storage(f"pinned{i}", size, None, pinned=True)
    ops = [MemOp(names[v], names[v], [], [label(v)], list(preds[v])) for v in range(n)]
    return MemoryModel(ops, storages)


def live_events(ranges) -> dict[int, object]:
    """Step -> change of the live bytes at that step (the alias rule applied). ``ranges``: anything with
    name, size, first, last and alias (``Range``, ``plan.Buffer`` with its padded size via ``size_of``)."""
    return _events(ranges, lambda r: r.size)


def _events(ranges, size_of) -> dict[int, object]:
    events: dict[int, object] = {}

    def add(step, delta):
        events[step] = events[step] + delta if step in events else delta

    by_name = {r.name: r for r in ranges}
    for r in ranges:
        size = size_of(r)
        add(r.first, size)
        add(r.last + 1, -size)
        a = by_name.get(r.alias) if r.alias else None
        if a is not None and a.last == r.first:  # written over its dying alias: the shared bytes count once
            shared = shared_bytes(size_of(a), size, getattr(r, "shift", 0))
            add(r.first, -shared)
            add(r.first + 1, shared)
    return events


def curve(ranges, steps: int, zero=0, size_of=None, simplify=None) -> list:
    """Bytes live at each step 0..steps-1 (``simplify``: applied to each step's value, for expressions)."""
    events = _events(ranges, size_of or (lambda r: r.size))
    out, live = [], zero
    for s in range(max(steps, 1)):
        if s in events:
            live = live + events[s]
            if simplify is not None:
                live = simplify(live)
        out.append(live)
    return out


def live_at(ranges, step: int, size_of=None):
    """Bytes live at one step."""
    events = _events(ranges, size_of or (lambda r: r.size))
    live = 0
    for s in sorted(events):
        if s > step:
            break
        live = live + events[s]
    return live


def peak(ranges, size_of=None) -> int:
    """The largest number of bytes live at one step (ints): no placement of whole tensors goes lower."""
    events = _events(ranges, size_of or (lambda r: r.size))
    live = best = 0
    for s in sorted(events):
        live += events[s]
        best = max(best, live)
    return best
