"""A light DAG of operators for scheduling, independent of TVM.

Every op has one output of ``sizes[op]`` bytes (already aligned) and reads the outputs of
``preds[op]``. Graph inputs are not ops: each is ``(bytes, consumer ops)``, live from step 0 until
its last consumer. A ``Dag`` is an *evaluator* of the storage model (``edgemem.memory``), built from
one by ``from_model`` (``from_graph``, ``from_tflite`` are the two adapters followed by it): an op's
storages become its one output (an op with several outputs owns their sum, dying after its last
reader), workspaces its temp, an in-place output over its only-read alias a negative temp.

``curve``/``peak`` evaluate the model itself (``to_model``); schedulers work on op sets as Python int
bitmasks, and ``mem(S)`` (bytes live between steps once the ops in S have run) and ``step(S, M, op)``
are the incremental form of the same rule, checked against the model by tests/test_memory_model.py.
"""

from __future__ import annotations

import time
from collections import deque

from ..memory import MemoryModel, from_graph, from_tflite, shared_bytes
from ..memory import aligned as aligned  # noqa: PLC0414 - re-exported (schedulers import it from here)
from ..memory.model import from_arrays


def bits(mask: int):
    """The indices of the set bits of ``mask``, lowest first."""
    while mask:
        low = mask & -mask
        yield low.bit_length() - 1
        mask ^= low


class OutOfBudget(Exception):
    """The time or state limit ran out."""


class Limits:
    """A deadline and a cap on states, shared by every search of one scheduler call (and by the tables a
    scheduler builds first: on a graph of thousands of ops those alone can outlast the budget)."""

    def __init__(self, seconds: float | None = None, max_states: int | None = None):
        self.deadline = None if seconds is None else time.perf_counter() + seconds
        self.max_states = max_states
        self.states = 0

    def charge(self, count: int) -> None:
        """Count ``count`` new states; raise OutOfBudget past a limit."""
        self.states += count
        if self.max_states is not None and self.states > self.max_states:
            raise OutOfBudget("state limit")
        if self.deadline is not None and time.perf_counter() > self.deadline:
            raise OutOfBudget("time limit")

    def tick(self, i: int) -> None:
        """Look at the clock every 256th iteration ``i`` of a long loop."""
        if not i & 255:
            self.charge(0)


NO_LIMITS = Limits()


class Dag:
    """Ops 0..n-1. ``inputs_bytes[op]``: bytes of graph inputs read by that op alone;
    ``shared_inputs``: graph inputs read by several ops (or by none) as ``(bytes, ops)``;
    ``pinned``: bytes live at every step (a graph input that is also a graph output)."""

    def __init__(self, sizes, preds, inputs_bytes=None, outputs=(), shared_inputs=(), pinned=0, names=None, temps=None):
        n = len(sizes)
        self.n = n
        self.sizes = [int(s) for s in sizes]
        self.temps = [int(t) for t in temps] if temps is not None else [0] * n  # scratch live at the op's step only
        self.preds = [sorted(set(p)) for p in preds]
        self.outputs = frozenset(outputs)
        self.pinned = int(pinned)
        self.names = list(names) if names is not None else [str(i) for i in range(n)]
        ext = [(int(b), (op,)) for op, b in enumerate(inputs_bytes or [0] * n) if b]
        ext += [(int(b), tuple(sorted(set(ops)))) for b, ops in shared_inputs]
        self.ext = ext  # every graph input as (bytes, consumer ops)
        self._index()

    # -- derived tables -----------------------------------------------------------------------
    def _index(self):
        n = self.n
        if len(self.preds) != n:
            raise ValueError("preds must have one list per op")
        self.succs = [[] for _ in range(n)]
        for v, ps in enumerate(self.preds):
            for p in ps:
                if not 0 <= p < n or p == v:
                    raise ValueError(f"op {v} has an invalid predecessor {p}")
                self.succs[p].append(v)
        self.pred_mask = [sum(1 << p for p in ps) for ps in self.preds]
        self.succ_mask = [sum(1 << s for s in ss) for ss in self.succs]
        # ops whose output outlives their step: graph outputs, or read by someone
        self.keeps = [bool(self.succs[v]) or v in self.outputs for v in range(n)]
        self.ext_mask = [sum(1 << o for o in ops) for _, ops in self.ext]
        self.ext_of = [[] for _ in range(n)]  # op -> graph inputs it reads
        for e, (_, ops) in enumerate(self.ext):
            for o in ops:
                self.ext_of[o].append(e)
        self.idle = sum(b for b, ops in self.ext if not ops)  # unread inputs: live at step 0 only
        # per op, what its step may free: (readers mask, bytes) of its inputs (graph outputs never free)
        self.frees = [[(self.succ_mask[p], self.sizes[p]) for p in self.preds[v] if p not in self.outputs]
                      + [(self.ext_mask[e], self.ext[e][0]) for e in self.ext_of[v]] for v in range(n)]  # fmt: skip
        self.grows = [self.sizes[v] if self.keeps[v] else 0 for v in range(n)]
        self.full = (1 << n) - 1
        self.topo = self._topo()
        self._bounds = None
        self._model = None

    def _topo(self) -> list[int]:
        """A topological order (Kahn, first ready first); raises on a cycle."""
        indeg = [len(p) for p in self.preds]
        ready = deque(v for v in range(self.n) if not indeg[v])
        order = []
        while ready:
            v = ready.popleft()
            order.append(v)
            for s in self.succs[v]:
                indeg[s] -= 1
                if not indeg[s]:
                    ready.append(s)
        if len(order) != self.n:
            raise ValueError("the graph has a cycle")
        return order

    @property
    def inputs_bytes(self) -> list[int]:
        """Per op, the bytes of graph inputs it reads (shared inputs counted at each reader)."""
        out = [0] * self.n
        for b, ops in self.ext:
            for o in ops:
                out[o] += b
        return out

    def op_bound(self, v: int) -> int:
        """Bytes live at v's step in any order: its output, its inputs (and pinned bytes)."""
        return self.sizes[v] + self.temps[v] + sum(self.sizes[p] for p in self.preds[v]) + sum(self.ext[e][0] for e in self.ext_of[v]) + self.pinned

    def lower_bound(self, limits: Limits = NO_LIMITS) -> int:
        """No order has a lower peak (see ``bounds``)."""
        return max([b[0] for b in self.bounds(limits)] + [self.mem(0) + self.idle])

    def bounds(self, limits: Limits = NO_LIMITS) -> list[tuple[int, int, int]]:
        """Per op v, a lower bound on the bytes live at v's step in any order, as
        ``(static, extra_mask, most)``: at v's step, besides v's inputs and output, every op u run
        before v whose output is a graph output or is read by a descendant of v is live. The
        ancestors of v are run before it in every order (``static`` counts them); ``extra_mask`` are
        the other ops that count once they have run; ``most`` = static + all of extra_mask.
        ``limits``: OutOfBudget past its deadline (the table is kept only once complete)."""
        if self._bounds is None:
            anc, desc = self.ancestors(limits), self.descendants(limits)
            read_below = self._read_below(limits)
            outputs = sum(1 << u for u in self.outputs)
            out = []
            for v in range(self.n):
                limits.tick(v)
                d, skip = desc[v], self.pred_mask[v] | (1 << v) | desc[v]
                live_at_v = (outputs | read_below[v]) & ~skip
                ext = sum(b for (b, _), m in zip(self.ext, self.ext_mask) if m & d and not m >> v & 1)
                static = self.op_bound(v) + ext + self.size_of(live_at_v & anc[v], limits)
                extra = live_at_v & ~anc[v]
                out.append((static, extra, static + self.size_of(extra, limits)))
            self._bounds = out
        return self._bounds

    def _read_below(self, limits: Limits = NO_LIMITS) -> list[int]:
        """Per op v, the ops read by a descendant of v (a mask): one OR per edge instead of a scan of every op
        per op (7,500 ops: 12 s -> well under one)."""
        below = [0] * self.n
        for i, v in enumerate(reversed(self.topo)):
            limits.tick(i)
            for s in self.succs[v]:
                below[v] |= self.pred_mask[s] | below[s]
        return below

    def size_of(self, mask: int, limits: Limits = NO_LIMITS) -> int:
        """Bytes of the outputs of the ops in ``mask``."""
        total = 0
        for i, u in enumerate(bits(mask)):
            limits.tick(i)
            total += self.sizes[u]
        return total

    def pruner(self, ops_mask: int | None = None, top: int | None = None, limits: Limits = NO_LIMITS):
        """``exceeds(done, budget)``: whether some op not in ``done`` (among ``ops_mask``) must
        see at least ``budget`` bytes live at its step, whatever order follows. ``top``: look at
        only the ops with the ``top`` largest bounds (cheaper, prunes less; still sound)."""
        bounds = self.bounds(limits)
        ops = range(self.n) if ops_mask is None else bits(ops_mask)
        table = [(bounds[v][2], bounds[v][0], bounds[v][1], v) for v in ops]
        table.sort(reverse=True)
        table = table[:top]
        sizes = self.sizes

        def exceeds(done: int, budget: int) -> bool:
            for most, static, extra, v in table:
                if most < budget:
                    return False
                if done >> v & 1:
                    continue
                if static >= budget:
                    return True
                total = static
                for u in bits(done & extra):
                    total += sizes[u]
                if total >= budget:
                    return True
            return False

        def value(done: int) -> int:  # the largest such bound, for ranking states
            best = 0
            for most, static, extra, v in table:
                if most <= best:
                    break
                if not done >> v & 1:
                    total = static
                    for u in bits(done & extra):
                        total += sizes[u]
                    best = max(best, total)
            return best

        exceeds.value = value
        return exceeds

    # -- the memory model ---------------------------------------------------------------------
    def is_order(self, order) -> bool:
        """A permutation of the ops in which every op comes after its predecessors."""
        if sorted(order) != list(range(self.n)):
            return False
        done = 0
        for v in order:
            if self.pred_mask[v] & ~done:
                return False
            done |= 1 << v
        return True

    def curve(self, order) -> list[int]:
        """Bytes live at each step: the storage model's rule (edgemem.memory) on this Dag's model."""
        return self.to_model().curve(order)

    def to_model(self) -> MemoryModel:
        """The storage model this Dag evaluates: one storage per op output (its sum when the op had
        several), one per temp, one per graph input, pinned bytes as one input read by no one."""
        if self._model is None:
            self._model = from_arrays(self.sizes, self.preds, self.succs, self.outputs, self.ext,
                                      [self.pinned] if self.pinned else [], self.temps, self.names)  # fmt: skip
        return self._model

    def peak(self, order) -> int:
        return max(self.curve(order))

    def mem(self, done: int) -> int:
        """Bytes live between steps once the ops in ``done`` have run (idle inputs excluded)."""
        total = self.pinned
        for v in bits(done):
            if v in self.outputs or self.succ_mask[v] & ~done:
                total += self.sizes[v]
        for (b, _), m in zip(self.ext, self.ext_mask):
            if m & ~done:
                total += b
        return total

    def step(self, done: int, m: int, v: int) -> tuple[int, int]:
        """Run v after ``done`` (live bytes ``m``): (bytes live during v's step, bytes live after)."""
        now = done | (1 << v)
        during = m + self.sizes[v] + self.temps[v] + (self.idle if not done else 0)
        after = m + self.grows[v]
        for readers, size in self.frees[v]:
            if not readers & ~now:  # v is the last reader
                after -= size
        return during, after

    def run(self, done: int, m: int, seq) -> tuple[int, int, int]:
        """Run ``seq`` after ``done``: (peak of its steps, bytes live after, new done mask)."""
        peak = 0
        for v in seq:
            during, m = self.step(done, m, v)
            done |= 1 << v
            peak = max(peak, during)
        return peak, m, done

    def ancestors(self, limits: Limits = NO_LIMITS) -> list[int]:
        anc = [0] * self.n
        for i, v in enumerate(self.topo):
            limits.tick(i)
            for p in self.preds[v]:
                anc[v] |= anc[p] | (1 << p)
        return anc

    def descendants(self, limits: Limits = NO_LIMITS) -> list[int]:
        desc = [0] * self.n
        for i, v in enumerate(reversed(self.topo)):
            limits.tick(i)
            for s in self.succs[v]:
                desc[v] |= desc[s] | (1 << s)
        return desc

    # -- builders -----------------------------------------------------------------------------
    @classmethod
    def from_model(cls, model: MemoryModel) -> "Dag":
        """The Dag evaluating a storage model (sizes must be ints: see SymDag for expressions)."""
        n = model.n
        sizes, temps = [0] * n, [0] * n
        outputs, shared, pinned = set(), [], 0
        for s in model.storages.values():
            if s.producer is None:
                if s.pinned:
                    pinned += s.size
                else:
                    shared.append((s.size, list(s.readers)))
            elif s.temp:
                temps[s.producer] += s.size
            else:
                sizes[s.producer] += s.size
                if s.pinned:
                    outputs.add(s.producer)
        for s in model.storages.values():  # written over its alias, which dies there in every order
            a = model.storages.get(s.alias) if s.alias else None
            if a is not None and s.producer is not None and a.readers == [s.producer] and not a.pinned:
                temps[s.producer] -= shared_bytes(a.size, s.size, s.shift)  # shift: partial liveness
        return cls(sizes, model.preds(), None, outputs, shared, pinned, [op.name for op in model.ops], temps)

    @classmethod
    def from_graph(cls, graph, align: int = 1) -> "Dag":
        """From an OpGraph (memory.from_graph: views resolve to their storage, constants and state are left
        out, workspaces are temps, an in-place output shares its dying alias's bytes at its step)."""
        return cls.from_model(from_graph(graph, align))

    @classmethod
    def from_tflite(cls, path, align: int = 4, views=("RESHAPE", "SQUEEZE", "EXPAND_DIMS")) -> "Dag":
        """Straight from a .tflite flatbuffer (no TVM, memory.from_tflite): tensors with buffer data are
        constants, variable tensors state, ``views`` ops aliases (as edgemem lowers them)."""
        return cls.from_model(from_tflite(path, align, views))

    def __repr__(self) -> str:
        return f"Dag({self.n} ops, {sum(self.sizes)} B of outputs, {len(self.ext)} inputs)"
