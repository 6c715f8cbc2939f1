"""The memory/latency objective of the memory-pass stage (issue 20, after MAGIS): what a candidate module
costs, which candidates are Pareto-optimal, and which one the build takes.

    costs(mod, measure_fn)            arena bytes (the build's scheduler + planner), MACs, predicted instructions
    InstructionModel.load().predict   instructions of a module's kernels: per kernel class a linear model
                                      (per MAC, per output element, per call), fitted on QEMU-measured
                                      per-operator counts (benchmarks/pareto_fit.py writes instr_model.json)
    pareto_front(points)              the non-dominated (arena, MACs, instructions) points
    choose(points, budget, max_slowdown)  the point the build takes, and why

The objective: by default, the fewest predicted instructions among the candidates whose arena fits the RAM
budget, so a model that already fits takes no pass that adds work (candidates with no more MACs predicted within
TIE_PERCENT of it count as as fast: the least arena of those is taken); with
``max_slowdown`` (percent; ``math.inf`` for ``--minimize``), the least arena among the candidates predicted at
most that much slower than the fastest candidate found (whether it fits or not: the slowdown is measured
against what the model can run at), and the build is refused when that arena does not fit.

The instruction model tells kernel variants apart (in place, over consumed rows, fused epilogues): the
overlapping kernels of passes/overlap.py were measured 3-8 % slower on vww and kws_dscnn, which the default
objective then declines where the plain arena fits (benchmarks/pareto.md has predicted vs measured).
"""

from __future__ import annotations

import json
import math
from dataclasses import asdict, dataclass
from functools import lru_cache
from pathlib import Path

from ..kernels import kernel_attrs

MODEL_JSON = Path(__file__).with_name("instr_model.json")
MAX_PER_CALL = 2_000  # instructions a kernel call may cost beyond its work (prologue, loops set up); fit.
# Predicted differences below this (percent), between candidates with no more MACs, are ties the default objective
# breaks by the arena: kernel variants of the same work (in place, over consumed rows) are predicted 0-5 % apart,
# within the model's own error on a whole model (up to 16 %, benchmarks/pareto.md), so among them the default
# keeps edgemem's memory-first choice; --max-slowdown is the strict bound.
TIE_PERCENT = 5.0
KEYS = ("arena_bytes", "macs", "instructions")  # the three costs, each smaller is better


# -- the instruction model ---------------------------------------------------------------------------------


def _elements(shape) -> int:
    return int(math.prod(int(d) for d in shape)) if shape else 1


def kernel_class(op, graph) -> str:
    """The class an operator's kernel is predicted by: its TFLite kind (the first of a fused group), a
    convolution split into 1x1 and kxk (their inner loops differ), how it writes its output (" inplace": over
    its input, the in-place depthwise's delayed form or an element-wise kernel; " overlap": over its input's
    consumed rows, passes/overlap.py's pixel order -- measured slower than the plain kernel), and the element
    type when not int8: ``KIND[+FUSED...][ VARIANT][/DTYPE]`` (``CONV_2D 1x1+ADD inplace``: a residual ADD fused
    into its convolution's stores, written over the skip)."""
    kind, *fused = op.kind.split("+")
    if kind == "CONV_2D" and len(op.inputs) > 1:
        w = graph.tensors[op.inputs[1]].shape  # OHWI
        kind = "CONV_2D 1x1" if len(w) == 4 and w[1] == w[2] == 1 else "CONV_2D kxk"
    kind = "+".join([kind, *fused])
    mark = kernel_attrs.inplace(op.prim)
    if mark is not None and mark.overlap is not None:
        kind += " overlap"
    elif mark is not None or op.writes_input is not None:
        kind += " inplace"
    dtype = graph.tensors[op.output].dtype
    return kind if dtype == "int8" else f"{kind}/{dtype}"


def _parent(klass: str) -> str:
    """Where a class with too few measured rows is fitted: without its element type, then without its variant
    (an in-place kernel with the plain ones), never without its fused epilogues (their work is in its rows)."""
    base, _, dtype = klass.partition("/")
    if dtype:
        return base
    for v in (" overlap", " inplace"):
        if base.endswith(v):
            return base.removesuffix(v)
    return "other"


def _fallbacks(klass: str) -> list[str]:
    """The classes to try for ``klass``, most specific first: itself, without the element type, without the
    variant, then the same without the fused epilogues (``predict_op`` then adds theirs), then ``other``."""
    base, _, dtype = klass.partition("/")
    variant = next((v for v in (" overlap", " inplace") if base.endswith(v)), "")
    kinds = base.removesuffix(variant)
    out = []
    for k in dict.fromkeys((kinds, kinds.split("+")[0])):
        out += [f"{k}{variant}/{dtype}" if dtype else f"{k}{variant}", f"{k}{variant}", f"{k}/{dtype}" if dtype else k, k]
    return [*dict.fromkeys(out), "other"]


def features(op, graph) -> dict:
    """What the model multiplies: the operator's MACs (edgemem.macs of its kernel), its output elements
    (requantization and stores), and the fused epilogues (element-wise kinds after the first: ``CONV_2D+ADD``)."""
    return {"class": kernel_class(op, graph), "macs": int(op.macs), "outputs": _elements(graph.tensors[op.output].shape),
            "fused": op.kind.split("+")[1:]}  # fmt: skip


@dataclass(frozen=True)
class Coefficients:
    per_mac: float
    per_output: float
    per_call: float
    ops: int = 0  # operators it was fitted on

    def __call__(self, macs: int, outputs: int) -> float:
        return self.per_mac * macs + self.per_output * outputs + self.per_call


@dataclass
class InstructionModel:
    """Instructions of a kernel = per_mac x MACs + per_output x output elements + per_call, by kernel class;
    a class the fit never saw falls back to its kind without the element type, then to ``other``."""

    classes: dict  # class -> Coefficients
    board: str = ""
    command: str = ""  # what produced the fit
    fitted_on: tuple = ()

    @classmethod
    def load(cls, path: Path = MODEL_JSON) -> InstructionModel:
        return _load(str(path))

    def lookup(self, klass: str) -> tuple[str, Coefficients]:
        """The most specific fitted class for ``klass`` (see _fallbacks) and its coefficients."""
        for name in _fallbacks(klass):
            if name in self.classes:
                return name, self.classes[name]
        return "", Coefficients(2.0, 0.0, 0.0)  # an empty model: MACs as the proxy

    def coefficients(self, klass: str) -> Coefficients:
        return self.lookup(klass)[1]

    def predict_op(self, f: dict) -> float:
        name, c = self.lookup(f["class"])
        total = c(f["macs"], f["outputs"])
        if f["fused"] and "+" not in name:  # a fused epilogue the class does not include: what its own kernel costs
            total += sum(self.coefficients(kind).per_output for kind in f["fused"]) * f["outputs"]
        return total

    def predict_graph(self, graph) -> int:
        return int(round(sum(self.predict_op(features(op, graph)) for op in graph.ops)))

    def to_json(self) -> dict:
        return {"board": self.board, "command": self.command, "fitted_on": list(self.fitted_on),
                "classes": {k: asdict(v) for k, v in sorted(self.classes.items())}}  # fmt: skip


@lru_cache(maxsize=4)
def _load(path: str) -> InstructionModel:
    p = Path(path)
    if not p.is_file():
        return InstructionModel({})
    d = json.loads(p.read_text())
    return InstructionModel({k: Coefficients(**v) for k, v in d["classes"].items()}, d.get("board", ""),
                            d.get("command", ""), tuple(d.get("fitted_on", ())))  # fmt: skip


def _nnls(a, b):
    """Least squares with non-negative coefficients (a small active-set loop: few columns): a column whose
    coefficient comes out negative is dropped and the rest solved again."""
    import numpy as np

    cols = list(range(a.shape[1]))
    while cols:
        x, *_ = np.linalg.lstsq(a[:, cols], b, rcond=None)
        if (x >= 0).all():
            out = np.zeros(a.shape[1])
            out[cols] = x
            return out
        cols.pop(int(np.argmin(x)))
    return np.zeros(a.shape[1])


def fit(rows: list[dict], min_ops: int = 2) -> dict:
    """Coefficients per kernel class from measured rows ({"class", "macs", "outputs", "fused", "instructions"});
    least squares weighted by 1/sqrt(instructions) (between absolute, where the large kernels decide alone, and
    relative, where the many small ones do: the better of the three on models outside the fit), non-negative.
    Classes with fewer than ``min_ops`` rows fold into their parent (``_parent``), at last ``other``."""
    import numpy as np

    by_class: dict[str, list] = {}
    for r in rows:
        by_class.setdefault(r["class"], []).append(r)
    while True:  # a class with too few rows joins its parent (_parent: the variant or type dropped), else ``other``
        small = sorted((k for k, v in by_class.items() if len(v) < min_ops and k != "other"), key=len, reverse=True)
        if not small:
            break
        k = small[0]
        by_class.setdefault(_parent(k), []).extend(by_class.pop(k))
    out = {}
    for klass, rs in sorted(by_class.items()):
        a = np.array([[r["macs"], r["outputs"], 1.0] for r in rs], float)
        b = np.array([r["instructions"] for r in rs], float)
        w = 1.0 / np.sqrt(np.maximum(b, 1.0))
        x = _nnls(a * w[:, None], b * w)
        if x[2] > MAX_PER_CALL:  # an intercept that large stands for size effects, and would price patches' many calls
            x = _nnls(a[:, :2] * w[:, None], b * w).tolist() + [0.0]
        out[klass] = Coefficients(round(float(x[0]), 4), round(float(x[1]), 4), round(float(x[2]), 1), len(rs))
    return out


# -- candidates, the Pareto front, the choice ---------------------------------------------------------------


@dataclass(frozen=True)
class Point:
    """One candidate the search measured: a pass sequence and its three costs."""

    sequence: tuple  # the passes applied, in order
    arena_bytes: int
    macs: int
    instructions: int  # predicted
    source: str = "search"  # "search" or "baseline:<name>"

    def costs(self) -> tuple:
        return tuple(getattr(self, k) for k in KEYS)

    def to_json(self) -> dict:
        return {"sequence": list(self.sequence), "arena_bytes": self.arena_bytes, "macs": self.macs,
                "instructions": self.instructions, "source": self.source}  # fmt: skip


def dominates(p: tuple, q: tuple) -> bool:
    return all(a <= b for a, b in zip(p, q)) and p != q


def pareto_front(points: list) -> list:
    """The points no other point dominates (no worse in every cost, better in one); of points with equal costs
    only the first. Sorted by costs: a point can only be dominated by one before it in that order, so each is
    compared with the front kept so far."""
    front: list = []
    seen = set()
    for p in sorted(points, key=lambda p: p.costs()):
        c = p.costs()
        if c in seen or any(dominates(q.costs(), c) for q in front):
            continue
        seen.add(c)
        front.append(p)
    return front


@dataclass(frozen=True)
class Choice:
    point: Point
    fits: bool
    reason: str
    reference: Point | None = None  # the fastest candidate, what a slowdown is measured against


def slowdown(p: Point, fastest: Point) -> float:
    """Percent more predicted instructions than the fastest candidate."""
    return percent_slower(p.instructions, fastest.instructions)


def percent_slower(instructions: int, fastest: int) -> float:
    return 100.0 * (instructions - fastest) / max(fastest, 1)


def _least_arena(points: list, order: dict) -> Point:
    """The least arena; of several, the first in the caller's order (the orchestrator's: flash, MACs, the
    shorter sequence, by name), not the fewest predicted instructions: a time-bound search reaches sequences of
    equal arena in an order that depends on its budget, and which it reached must not decide (the choice may
    so be dominated in predicted instructions by an equal-arena sequence; the report then lists it too)."""
    least = min(p.arena_bytes for p in points)
    return min((p for p in points if p.arena_bytes == least), key=lambda p: order[id(p)])


def choose(points: list, budget: int, max_slowdown: float | None = None) -> Choice:
    """The candidate the build takes (see the module doc). ``points`` in the caller's order of preference,
    which breaks ties of the least arena (_least_arena; the orchestrator's order: flash, MACs, the shorter
    sequence, then by name)."""
    order = {id(p): i for i, p in enumerate(points)}
    fastest = min(points, key=lambda p: (p.instructions, p.arena_bytes, order[id(p)]))
    if max_slowdown is None:
        fitting = [p for p in points if p.arena_bytes <= budget]
        if fitting:
            quickest = min(fitting, key=lambda p: (p.instructions, p.arena_bytes, p.macs, order[id(p)]))
            # as fast: no more MACs and within the model's resolution on kernel variants; then the least arena
            same = [p for p in fitting if p.macs <= quickest.macs and slowdown(p, quickest) <= TIE_PERCENT]
            best = _least_arena(same, order)
            tie = (f"; the least arena of the {len(same)} within {TIE_PERCENT:g} % of it with no more MACs"
                   if best is not quickest else "")  # fmt: skip
            return Choice(best, True, f"the fewest predicted instructions among the {len(fitting)} candidates "
                                      f"that fit {budget:,} B{tie} ({slowdown(best, fastest):+.1f} % vs the "
                                      "fastest)", fastest)  # fmt: skip
        best = _least_arena(points, order)
        return Choice(best, False, f"no candidate fits {budget:,} B: the least arena", fastest)
    allowed = [p for p in points if slowdown(p, fastest) <= max_slowdown + 1e-9]
    best = _least_arena(allowed, order)
    bound = "any slowdown" if math.isinf(max_slowdown) else f"at most {max_slowdown:g} % slower than the fastest"
    return Choice(best, best.arena_bytes <= budget, f"the least arena among the {len(allowed)} candidates "
                                                    f"predicted {bound} ({slowdown(best, fastest):+.1f} %)", fastest)  # fmt: skip


def report(points: list, choice: Choice, max_slowdown: float | None, model: InstructionModel) -> dict:
    """edgemem.json's ``passes.pareto``: the objective, every non-dominated point tried, the one taken and why."""
    taken = choice.point
    # of candidates with the taken one's costs, the front shows the taken one (another sequence may tie)
    front = [taken if p.costs() == taken.costs() else p for p in pareto_front(points)]
    if taken not in front:  # a dominated choice cannot be a minimum of these rules; kept for safety
        front.append(taken)
    objective = ("least_instructions_fitting" if max_slowdown is None
                 else "least_arena" if math.isinf(max_slowdown) else "least_arena_within_slowdown")  # fmt: skip
    return {
        "objective": objective,
        "max_slowdown_percent": None if max_slowdown is None or math.isinf(max_slowdown) else max_slowdown,
        "candidates": len(points),
        "points": [{**p.to_json(), "slowdown_percent": round(slowdown(p, choice.reference), 2),
                    "taken": p is taken} for p in front],  # fmt: skip
        "taken": {**taken.to_json(), "fits": choice.fits, "reason": choice.reason},
        "instruction_model": {"board": model.board, "command": model.command, "fitted_on": list(model.fitted_on)},
    }
