"""A static arena plan whose offsets are expressions in the symbolic dimension (see
edgemem.schedule.symbolic): one plan, valid for every value of the range, evaluated at run time.

Placement is first fit in a given buffer order, symbolically: a buffer's candidate offsets are 0 and
the ends of the already placed buffers it shares steps with, tried lowest first (by value at the
range's upper end); the first candidate that is *proved* clear of every such buffer for the whole
range is taken (proved by tvm.sym.Analyzer, or by evaluating every value of the range when it has at
most GRID_LIMIT points, which is a proof too). If none is proved, the buffer goes on top of them all (the symbolic max of their
ends), which is always clear. Every offset is a sum of padded sizes (or a max of such), so it keeps
the alignment. Buffer orders tried: greedy by size (TFLM's rule, sizes compared by proof, unknown ->
value at hi; both tie-breaks), and the order of the concrete planner's best placement at the range's
ends (edgemem.plan.plan_arena, replayed symbolically). The plan with the provably (else at hi) lowest
peak wins.

The check is independent: at any concrete value, ``SymbolicPlan.check(env)`` evaluates the offsets
and runs ``edgemem.plan.check_plan`` (no overlaps, alignment, inside the arena) on them.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import NamedTuple

import numpy as np
from tvm import tirx

from ..schedule.symbolic import GRID_LIMIT, SymBuffer, SymDag, Symbols, aligned_expr, evaluate, expr_text
from .check import check_plan
from .model import ArenaPlan, Buffer, Placement, lower_bound


@dataclass
class SymbolicPlan:
    """``offsets[b]`` = max over ``refs[b]`` of (offset + size) of those buffers (0 if none), so each
    offset is a PrimExpr built from earlier ones; ``placed`` is the order that computes them."""

    symbols: Symbols
    buffers: list[SymBuffer]  # sizes already padded to ``align``
    refs: dict[str, list[str]]  # buffer -> the buffers whose ends bound its offset
    placed: list[str]  # buffer names in placement order (each one's refs come earlier)
    peak_refs: list[str]  # the arena is the max of these buffers' ends
    align: int
    algorithm: str
    tried: dict[str, dict] = field(default_factory=dict)  # algorithm -> {"peak", "at_lo", "at_hi"}

    def __post_init__(self) -> None:
        self.by_name = {b.name: b for b in self.buffers}
        self.offsets: dict[str, object] = {}
        for name in self.placed:
            self.offsets[name] = self._max_of_ends(self.refs[name])
        self.peak = self._max_of_ends(self.peak_refs)

    def _max_of_ends(self, names: list[str]):
        ends = [self.offsets[x] + self.by_name[x].size for x in names]
        out = ends[0] if ends else self.symbols.const(0)
        for e in ends[1:]:
            out = tirx.max(out, e)
        return out

    def offsets_at(self, env: dict) -> dict:
        """The offsets at one value, in placement order (linear in the plan, unlike walking the
        expressions, which share sub-expressions). With numpy arrays in ``env``, at many values at once."""
        size = {b.name: evaluate(b.size, env) for b in self.buffers}
        out: dict = {}
        for name in self.placed:
            out[name] = _max_all([out[x] + size[x] for x in self.refs[name]])
        return out

    def peak_at(self, env: dict):
        offsets = self.offsets_at(env)
        return _max_all([offsets[x] + evaluate(self.by_name[x].size, env) for x in self.peak_refs])

    def peak_text(self, limit: int = 400) -> str:
        """The arena expression, simplified, in plain notation (cut at ``limit`` characters)."""
        text = expr_text(self.symbols.simplify(self.peak))
        return text if len(text) <= limit else text[: limit - 3] + "..."

    def concrete(self, env: dict[str, int]) -> tuple[list[Buffer], ArenaPlan]:
        """The plan at one value: concrete buffers (zero-size ones left out) and their placement."""
        buffers = [Buffer(b.name, evaluate(b.size, env), b.first, b.last, self.align) for b in self.buffers]
        buffers = [b for b in buffers if b.size > 0]
        offsets = self.offsets_at(env)
        placements = {b.name: Placement("arena", offsets[b.name]) for b in buffers}
        plan = ArenaPlan(placements, {"arena": self.peak_at(env)}, lower_bound(buffers), f"symbolic {self.algorithm}")
        return buffers, plan

    def check(self, env: dict[str, int]) -> None:
        """Raise PlanError unless the evaluated plan is valid (edgemem.plan.check_plan)."""
        buffers, plan = self.concrete(env)
        check_plan(buffers, plan)

    def largest_fitting(self, budget: int, dim: str | None = None) -> int | None:
        """The largest value v of ``dim`` (other dims at their upper end) such that the arena fits
        ``budget`` bytes at every value from the range's lower end up to v; None if not even the lower
        end fits. Binary search (the peak is monotone for batch-like dims), then verified by evaluating
        every value up to the answer, since monotonicity is not assumed."""
        d = next(x for x in self.symbols.dims if dim is None or x.name == dim)

        def fits(v: int) -> bool:
            return self.peak_at({**self.symbols.hi_env, d.name: v}) <= budget

        if not fits(d.lo):
            return None
        lo, hi = d.lo, d.hi
        while lo < hi:  # invariant: fits(lo)
            mid = (lo + hi + 1) // 2
            lo, hi = (mid, hi) if fits(mid) else (lo, mid - 1)
        for start in range(d.lo, lo + 1, GRID_LIMIT):  # verify every value up to it, a chunk at a time
            values = np.arange(start, min(start + GRID_LIMIT, lo + 1), dtype=np.int64)
            env = {**{k: np.full(len(values), v, np.int64) for k, v in self.symbols.hi_env.items()}, d.name: values}
            over = np.nonzero(np.broadcast_to(self.peak_at(env), values.shape) > budget)[0]
            if len(over):
                return int(values[over[0]]) - 1
        return lo


def _max_all(values: list):
    """max of ints, or elementwise of arrays; 0 for none."""
    if not values:
        return 0
    out = values[0]
    for v in values[1:]:
        out = np.maximum(out, v) if isinstance(out, np.ndarray) or isinstance(v, np.ndarray) else max(out, v)
    return out


def padded_buffers(dag: SymDag, order, align: int) -> list[SymBuffer]:
    symbols = dag.symbols
    return [SymBuffer(b.name, aligned_expr(symbols, b.size, align), b.first, b.last) for b in dag.buffers(order)]


class _Value(NamedTuple):
    """An offset or an end as the placer keeps it: the expression, whether it is free of max (only then
    is the analyzer asked: max chains grow and it rarely proves them), its values at every point of the
    range (None if the range is too large to enumerate), and its values at the range's two ends."""

    expr: object
    plain: bool
    vec: object
    hi: int
    lo: int


class _Placer:
    """Symbolic first fit (see the module docstring)."""

    def __init__(self, symbols: Symbols, buffers: list[SymBuffer]):
        self.symbols = symbols
        self.buffers = buffers
        self.size_vec = [symbols.vec(b.size) for b in buffers]
        self.size_hi = [evaluate(b.size, symbols.hi_env) for b in buffers]
        self.size_lo = [evaluate(b.size, symbols.lo_env) for b in buffers]
        self.zero = _Value(symbols.const(0), True, None if symbols.grid is None else np.zeros(symbols.points, np.int64), 0, 0)

    def place(self, order: list[int]) -> tuple[dict[str, list[str]], list[str], list[str]]:
        """Place the buffers in ``order``: (refs, placement order, peak refs) for SymbolicPlan."""
        bufs = self.buffers
        off: dict[int, _Value] = {}
        refs: dict[str, list[str]] = {}
        for i in order:
            neighbours = [j for j in off if bufs[j].overlaps_in_time(bufs[i])]
            candidates = [(self.zero, [])] + [(self._end(j, off[j]), [j]) for j in neighbours]
            candidates.sort(key=lambda c: (c[0].hi, c[0].lo))  # lowest first, by value at hi then lo
            chosen = next((c for c in candidates if self._clear(i, c[0], neighbours, off)), None)
            if chosen is None:  # on top of every neighbour: always clear
                chosen = self._top(self._undominated([(self._end(j, off[j]), j) for j in neighbours]))
            off[i] = chosen[0]
            refs[bufs[i].name] = [bufs[j].name for j in chosen[1]]
        ends = self._undominated([(self._end(j, off[j]), j) for j in order])
        return refs, [bufs[i].name for i in order], [bufs[j].name for _, j in ends]

    def _top(self, ends: list[tuple[_Value, int]]) -> tuple[_Value, list[int]]:
        """The max of the given ends, and the buffers they belong to."""
        expr = ends[0][0].expr
        for e, _ in ends[1:]:
            expr = tirx.max(expr, e.expr)
        vec = None if self.symbols.grid is None else np.max(np.stack([e.vec for e, _ in ends]), axis=0)
        plain = len(ends) == 1 and ends[0][0].plain
        return _Value(expr, plain, vec, max(e.hi for e, _ in ends), max(e.lo for e, _ in ends)), [j for _, j in ends]

    def _end(self, j: int, at: _Value) -> _Value:
        """Where buffer j ends when placed at ``at``."""
        size = self.buffers[j].size
        expr = self.symbols.simplify(at.expr + size) if at.plain else at.expr + size
        vec = None if at.vec is None else at.vec + self.size_vec[j]
        return _Value(expr, at.plain, vec, at.hi + self.size_hi[j], at.lo + self.size_lo[j])

    def _le(self, a: _Value, b: _Value) -> bool:
        """a <= b at every point of the range: the analyzer on plain expressions, else enumeration."""
        return self.symbols.always_le(a.expr, b.expr, a.vec, b.vec, use_analyzer=a.plain and b.plain)

    def _clear(self, i: int, at: _Value, neighbours: list[int], off: dict[int, _Value]) -> bool:
        """Whether buffer i at ``at`` misses every neighbour at every point of the range."""
        mine = self._end(i, at)
        return all(self._le(mine, off[j]) or self._le(self._end(j, off[j]), at) for j in neighbours)

    def _undominated(self, items: list[tuple[_Value, int]]) -> list[tuple[_Value, int]]:
        """The (end, buffer) items whose end no other kept end bounds everywhere, largest at hi first."""
        kept = []
        for item in sorted(items, key=lambda it: (-it[0].hi, -it[0].lo)):
            if not any(self._le(item[0], k[0]) for k in kept):
                kept.append(item)
        return kept


def _size_order(symbols: Symbols, buffers: list[SymBuffer], last_added_first: bool) -> list[int]:
    """Indices by size, largest first (sizes compared by Symbols.decide); equal sizes in reverse insertion
    order (TFLM's GreedyMemoryPlanner) or in insertion order."""
    import functools

    def cmp(i, j):
        c = symbols.decide(buffers[j].size, buffers[i].size)
        if c:
            return c
        return (j - i) if last_added_first else (i - j)

    return sorted(range(len(buffers)), key=functools.cmp_to_key(cmp))


def _concrete_order(buffers: list[SymBuffer], env: dict[str, int], align: int) -> list[int]:
    """The order of the concrete planner's best placement at ``env``: by offset, then larger first."""
    from . import plan_arena

    sized = [(i, evaluate(b.size, env)) for i, b in enumerate(buffers)]
    concrete = [Buffer(buffers[i].name, s, buffers[i].first, buffers[i].last, align) for i, s in sized if s > 0]
    plan = plan_arena(concrete, algorithms=["greedy_by_size", "greedy_by_size_stable", "greedy_by_conflicts", "hill_climb"])
    off = {name: p.offset for name, p in plan.placements.items()}
    return sorted(range(len(buffers)), key=lambda i: (off.get(buffers[i].name, 0), -sized[i][1], i))


def plan_symbolic(dag: SymDag, order: list[int], align: int = 4) -> SymbolicPlan:
    """The best of the symbolic placements of the module docstring for the op order ``order``."""
    symbols = dag.symbols
    buffers = padded_buffers(dag, order, align)
    orders = {
        "greedy_by_size": _size_order(symbols, buffers, True),
        "greedy_by_size_stable": _size_order(symbols, buffers, False),
        "replay@hi": _concrete_order(buffers, symbols.hi_env, align),
        "replay@lo": _concrete_order(buffers, symbols.lo_env, align),
    }
    placer = _Placer(symbols, buffers)
    best = None
    tried = {}
    for name, buffer_order in orders.items():
        plan = SymbolicPlan(symbols, buffers, *placer.place(buffer_order), align, name)
        tried[name] = {"peak": plan.peak_text(), "at_lo": plan.peak_at(symbols.lo_env), "at_hi": plan.peak_at(symbols.hi_env)}
        if best is None or _better(symbols, plan, best):
            best = plan
    best.tried = tried
    return best


def _better(symbols: Symbols, a: SymbolicPlan, b: SymbolicPlan) -> bool:
    """a's arena is below b's: everywhere (enumerated) if known, else at the upper end, then the lower end."""
    if symbols.grid is not None:
        va = np.array([a.peak_at(_env(symbols, k)) for k in range(symbols.points)]) if symbols.points <= 256 else None
        vb = np.array([b.peak_at(_env(symbols, k)) for k in range(symbols.points)]) if va is not None else None
        if va is not None and not np.array_equal(va, vb):
            if np.all(va <= vb):
                return True
            if np.all(vb <= va):
                return False
    pa = (a.peak_at(symbols.hi_env), a.peak_at(symbols.lo_env))
    pb = (b.peak_at(symbols.hi_env), b.peak_at(symbols.lo_env))
    return pa < pb


def _env(symbols: Symbols, k: int) -> dict[str, int]:
    return {name: int(values[k]) for name, values in symbols.grid.items()}


def concrete_plan_bytes(dag, align: int, seconds: float) -> int:
    """What the concrete path reaches at one value: the best operator order (edgemem.schedule.best, ties on
    the peak broken by the placed arena as in a build) and plan_arena on its live ranges (those of Dag.curve)."""
    from ..schedule.best import best_schedule
    from . import plan_arena

    def placed(order):
        return plan_arena(_dag_buffers(dag, order, align)).total_bytes

    return placed(best_schedule(dag, max(seconds, 0.01), placed)[0])


def _dag_buffers(dag, order, align: int) -> list:
    step = {v: s for s, v in enumerate(order)}
    end = max(len(order) - 1, 0)
    buffers = []
    for v in range(dag.n):
        last = end if v in dag.outputs else max((step[s] for s in dag.succs[v]), default=step[v])
        if dag.sizes[v]:
            buffers.append(Buffer(f"op{v}", dag.sizes[v], step[v], last, align))
    for e, (size, ops) in enumerate(dag.ext):
        if size:
            buffers.append(Buffer(f"input{e}", size, 0, max((step[o] for o in ops), default=0), align))
    if dag.pinned:
        buffers.append(Buffer("pinned", dag.pinned, 0, end, align))
    return buffers
