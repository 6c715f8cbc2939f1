"""Symbolic shapes: tensor sizes as TVM PrimExprs in a symbolic dimension with a range, and a
BladeDISC++-style list scheduler whose size comparisons hold for every value of the range.

A model whose input has a symbolic dimension (a batch or a number of frames ``n``, declared as -1 in
the .tflite ``shape_signature`` or named on the command line as ``--dim n=1..64``) is scheduled once
for all ``n``. Sizes are ``tvm.tirx`` expressions in ``int64`` vars; ``tvm.sym.Analyzer`` (TVM 0.27's
name for ``tvm.arith``), with each var bound to its range, decides comparisons. A comparison it cannot
prove is "unknown" and falls through to the next criterion (the values at the upper end of the range,
then at the lower end, then the file order), as BladeDISC++'s partial-order comparator does.

Binding rule of ``SymDag.from_tflite`` (one symbolic dimension per model):
- if some activation tensor has a -1 in its ``shape_signature``, every -1 is the dimension; only the
  leading (batch) position is accepted, anything else is reported as unsupported;
- otherwise the leading (batch) dimension of every activation tensor becomes the dimension (each must
  be 1 in the file): the model is planned as if run on a batch of ``n``.
Either way a tensor's size is ``n * (bytes of the other dims)``, rounded up to the arena alignment.

The memory model is ``edgemem.memory``'s (an op's output lives from its step to its last reader, graph
inputs from step 0, graph outputs to the end), with sizes as expressions: ``from_tflite`` is the
flatbuffer adapter ``memory.from_tflite`` with symbolic sizes, ``buffers``/``curve`` its ranges and
curve, and ``SymDag.at(env)`` the concrete ``Dag`` of the model evaluated at one value of the dimension,
which is how every symbolic result is checked.
"""

from __future__ import annotations

import operator
import re
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import tvm
from tvm import tirx
from tvm.sym import Analyzer

from ..errors import EdgememError, UnsupportedModelError
from ..memory import MemoryModel, from_tflite
from ..memory.model import from_arrays
from .dag import Dag

INDEX = "int64"  # dtype of every symbolic size


# ----------------------------------------------------------------------------- dimensions


@dataclass(frozen=True)
class SymDim:
    """A symbolic dimension and its inclusive range."""

    name: str
    lo: int
    hi: int


_DIM_SYNTAX = re.compile(r"^\s*([A-Za-z_]\w*)\s*=\s*(-?\d+)\s*\.\.\s*(-?\d+)\s*$", re.ASCII)  # NAME: a C identifier


def parse_dim(text: str) -> SymDim:
    """``"n=1..64"`` -> SymDim("n", 1, 64); bad syntax or range -> EdgememError."""
    m = _DIM_SYNTAX.match(text)
    if not m:
        raise EdgememError(
            f"--dim '{text}' is not of the form NAME=LO..HI. Name the symbolic dimension and its inclusive "
            "range, e.g. --dim n=1..64 for a batch (or number of frames) from 1 to 64."
        )
    name, lo, hi = m.group(1), int(m.group(2)), int(m.group(3))
    if lo < 1 or hi < lo or hi >= 1 << 31:
        raise EdgememError(
            f"--dim '{text}': the range {lo}..{hi} must satisfy 1 <= LO <= HI < 2**31 (a dimension of at least one "
            "element). Give e.g. --dim n=1..64."
        )
    return SymDim(name, lo, hi)


# ----------------------------------------------------------------------------- expressions

def _elementwise(scalar, vector):
    return lambda a, b: vector(a, b) if isinstance(a, np.ndarray) or isinstance(b, np.ndarray) else scalar(a, b)


_BINARY = {
    tirx.Add: operator.add, tirx.Sub: operator.sub, tirx.Mul: operator.mul,
    tirx.FloorDiv: operator.floordiv, tirx.FloorMod: operator.mod,
    tirx.Max: _elementwise(max, np.maximum), tirx.Min: _elementwise(min, np.minimum),
}  # fmt: skip

# A range of at most this many points (all dims together) is also decided by enumeration.
GRID_LIMIT = 1 << 16


def evaluate(expr, env: dict):
    """The integer value of a size expression with its vars set by ``env`` (Python's // and % are floor
    division and modulo, as tirx.floordiv / floormod). With numpy int64 arrays as values, the values at
    every point at once."""
    if isinstance(expr, int):
        return expr
    if isinstance(expr, tirx.IntImm):
        return int(expr.value)
    if isinstance(expr, tirx.Var):
        value = env[expr.name]
        return value if isinstance(value, np.ndarray) else int(value)
    if isinstance(expr, tirx.Cast):
        return evaluate(expr.value, env)
    fn = _BINARY.get(type(expr))
    if fn is None:
        raise ValueError(f"cannot evaluate a {type(expr).__name__} in a size expression: {expr}")
    return fn(evaluate(expr.a, env), evaluate(expr.b, env))


_TEXT_INFIX = {tirx.Add: "+", tirx.Sub: "-", tirx.Mul: "*"}
_TEXT_CALL = {tirx.FloorDiv: "floordiv", tirx.FloorMod: "floormod", tirx.Max: "max", tirx.Min: "min"}


def expr_text(expr) -> str:
    """A size expression in plain notation for reports: ``16000*n``, ``max(a, b)``, ``floordiv(x, 4)``."""
    if isinstance(expr, (int, tirx.IntImm)):
        return str(int(expr if isinstance(expr, int) else expr.value))
    if isinstance(expr, tirx.Var):
        return expr.name
    if isinstance(expr, tirx.Cast):
        return expr_text(expr.value)
    if type(expr) is tirx.Mul and isinstance(expr.b, tirx.IntImm):  # n*c reads better as c*n
        return f"{expr_text(expr.b)}*{_operand(expr.a)}"
    if type(expr) in _TEXT_INFIX:
        op = _TEXT_INFIX[type(expr)]
        return f"{_operand(expr.a)}{op}{_operand(expr.b)}" if op == "*" else f"{expr_text(expr.a)} {op} {_operand(expr.b)}"
    if type(expr) in _TEXT_CALL:
        return f"{_TEXT_CALL[type(expr)]}({expr_text(expr.a)}, {expr_text(expr.b)})"
    return str(expr)


def _operand(expr) -> str:
    text = expr_text(expr)
    return f"({text})" if type(expr) in (tirx.Add, tirx.Sub) else text


class Symbols:
    """The symbolic vars, their ranges, and the analyzer that decides comparisons under them."""

    def __init__(self, dims: list[SymDim]):
        names = [d.name for d in dims]
        if len(set(names)) != len(names):
            raise EdgememError(f"each symbolic dimension may be given once; repeated: {names}.")
        self.dims = list(dims)
        self.vars = {d.name: tirx.Var(d.name, INDEX) for d in dims}
        self.analyzer = Analyzer()
        for d in dims:
            self.analyzer.bind(self.vars[d.name], tvm.ir.Range(d.lo, d.hi + 1))
        self.lo_env = {d.name: d.lo for d in dims}
        self.hi_env = {d.name: d.hi for d in dims}
        # how comparisons were decided: by the analyzer, by enumerating the range, or not at all
        self.stats = {"proved": 0, "enumerated": 0, "unknown": 0}
        points = 1
        for d in dims:
            points *= d.hi - d.lo + 1
        self.grid = None  # every point of the range, one int64 array per dim, when small enough
        if points <= GRID_LIMIT:
            axes = np.meshgrid(*[np.arange(d.lo, d.hi + 1, dtype=np.int64) for d in dims], indexing="ij")
            self.grid = {d.name: a.ravel() for d, a in zip(dims, axes)}
            self.points = points

    def vec(self, expr):
        """The values of ``expr`` at every point of the range (None if the range is too large)."""
        if self.grid is None:
            return None
        return np.broadcast_to(np.asarray(evaluate(expr, self.grid), dtype=np.int64), (self.points,))

    def always_le(self, a, b, a_vec=None, b_vec=None, use_analyzer: bool = True) -> bool:
        """Whether a <= b at every point of the range: proved by the analyzer, else (when the range is
        small enough) checked at every point, which is a proof too; False when neither can tell."""
        if use_analyzer and self.analyzer.can_prove(a <= b):
            self.stats["proved"] += 1
            return True
        if self.grid is not None:
            a_vec = self.vec(a) if a_vec is None else a_vec
            b_vec = self.vec(b) if b_vec is None else b_vec
            self.stats["enumerated"] += 1
            return bool(np.all(a_vec <= b_vec))
        self.stats["unknown"] += 1
        return False

    def const(self, value: int):
        return tirx.IntImm(INDEX, int(value))

    def simplify(self, expr):
        return self.analyzer.simplify(self.const(expr) if isinstance(expr, int) else expr)

    def compare(self, a, b) -> int | None:
        """-1, 0 or 1 if a <=, ==, >= b holds for every value of the range (a partial order: a <= b
        everywhere with a < b somewhere counts as -1); None when neither holds or neither is known."""
        a_vec, b_vec = self.vec(a), self.vec(b)
        le = self.always_le(a, b, a_vec, b_vec)
        ge = self.always_le(b, a, b_vec, a_vec)
        if le and ge:
            return 0
        return -1 if le else 1 if ge else None

    def decide(self, a, b) -> int:
        """compare(), and when it has no answer the values at the upper end of the range, then the lower end."""
        c = self.compare(a, b)
        if c is not None:
            return c
        for env in (self.hi_env, self.lo_env):
            x, y = evaluate(a, env), evaluate(b, env)
            if x != y:
                return -1 if x < y else 1
        return 0

    def max_of(self, exprs):
        """A max expression of ``exprs`` without the terms another term bounds everywhere (always_le)."""
        terms = sorted((self.simplify(e) for e in exprs), key=lambda e: -evaluate(e, self.hi_env))
        kept = []
        for e in terms:  # the largest at hi first: it bounds the most others
            e_vec = self.vec(e)
            if not any(self.always_le(e, k, e_vec, k_vec) for k, k_vec in kept):
                kept = [(k, k_vec) for k, k_vec in kept if not self.always_le(k, e, k_vec, e_vec)] + [(e, e_vec)]
        if not kept:
            return self.const(0)
        out = kept[0][0]
        for e, _ in kept[1:]:
            out = tirx.max(out, e)
        return out

    def sweep(self, points: int = 12) -> list[dict[str, int]]:
        """Environments over the range: the ends and Fibonacci-like points between (first dim; others at hi)."""
        if not self.dims:
            return [{}]
        d = self.dims[0]
        values, a, b = {d.lo, d.hi}, 1, 2
        while b <= d.hi and len(values) < points:
            if b >= d.lo:
                values.add(b)
            a, b = b, a + b
        return [{**self.hi_env, d.name: v} for v in sorted(values)]


def aligned_expr(symbols: Symbols, expr, align: int):
    """``expr`` rounded up to a multiple of ``align`` (simplified: c*n stays c*n when align divides c)."""
    if align <= 1:
        return symbols.simplify(expr)
    return symbols.simplify(tirx.floordiv(expr + (align - 1), align) * align)


# ----------------------------------------------------------------------------- the symbolic DAG


@dataclass(frozen=True)
class SymBuffer:
    """One storage need of a schedule: ``size`` bytes (an expression) live in steps [first, last]."""

    name: str
    size: object  # PrimExpr
    first: int
    last: int

    def overlaps_in_time(self, other: "SymBuffer") -> bool:
        return self.first <= other.last and other.first <= self.last


class SymDag:
    """``Dag`` with sizes as expressions. ``ext``: graph inputs as ``(bytes, consumer ops)``;
    ``pinned``: bytes of graph inputs that are also graph outputs (live at every step)."""

    def __init__(self, symbols: Symbols, sizes, preds, outputs=(), ext=(), pinned=(), names=None):
        self.symbols = symbols
        self.sizes = [symbols.simplify(s) for s in sizes]
        self.preds = [sorted(set(p)) for p in preds]
        self.outputs = frozenset(outputs)
        self.ext = [(symbols.simplify(b), tuple(sorted(set(ops)))) for b, ops in ext]
        self.pinned = [symbols.simplify(p) for p in pinned]
        self.names = list(names) if names is not None else [str(i) for i in range(len(sizes))]
        # the structure (successors, topological order, validity of orders) from a Dag of dummy sizes
        self.shape = Dag([1] * len(sizes), self.preds, None, self.outputs, [(1, ops) for _, ops in self.ext], 0, self.names)
        self.tensor_bytes: dict[int, object] = {}  # .tflite tensor index -> bytes (unaligned), when read from a file
        self.model = self._model()

    def _model(self) -> MemoryModel:
        """The storage model with these sizes: one storage per op, per graph input, per pinned input."""
        return from_arrays(self.sizes, self.preds, self.shape.succs, self.outputs, self.ext, self.pinned, None, self.names,
                           lambda v: f"op{v}_{self.names[v]}")  # fmt: skip

    @property
    def n(self) -> int:
        return len(self.sizes)

    def at(self, env: dict[str, int]) -> Dag:
        """The concrete Dag at one value of the dimensions (the model evaluated there)."""
        return Dag.from_model(self.model.at(env))

    # -- the memory model, symbolically ----------------------------------------------------------
    def buffers(self, order) -> list[SymBuffer]:
        """Every storage need under ``order``: the model's live ranges."""
        if not self.shape.is_order(order):
            raise ValueError("not a topological order of the graph")
        return [SymBuffer(r.name, r.size, r.first, r.last) for r in self.model.ranges(order)]

    def curve(self, order) -> list:
        """Bytes live at each step, as expressions (the model's curve)."""
        if not self.shape.is_order(order):
            raise ValueError("not a topological order of the graph")
        return self.model.curve(order, self.symbols.const(0), self.symbols.simplify)

    def peak(self, order):
        """The order's peak as a max expression (dominated steps pruned)."""
        return self.symbols.max_of(self.curve(order))

    # -- builder --------------------------------------------------------------------------------
    @classmethod
    def from_model(cls, symbols: Symbols, model: MemoryModel) -> "SymDag":
        """The SymDag of a storage model whose sizes are expressions (an op with several outputs owns their sum)."""
        sizes = [symbols.const(0) for _ in range(model.n)]
        outputs, ext, pinned = set(), [], []
        for s in model.storages.values():
            if s.producer is None:
                if s.pinned:
                    pinned.append(s.size)
                else:
                    ext.append((s.size, list(s.readers)))
            else:
                sizes[s.producer] = sizes[s.producer] + s.size
                if s.pinned:
                    outputs.add(s.producer)
        return cls(symbols, sizes, model.preds(), outputs, ext, pinned, [op.name for op in model.ops])

    @classmethod
    def from_tflite(cls, path, dims: list[SymDim], align: int = 4, views=("RESHAPE", "SQUEEZE", "EXPAND_DIMS")) -> "SymDag":
        """From a .tflite flatbuffer: the adapter ``memory.from_tflite`` (constants in flash, variables state,
        views as aliases) with sizes in the symbolic dimension; an op with several outputs owns their sum."""
        from ..frontend.tflite_import import read_tflite

        symbols = Symbols(dims)
        model = read_tflite(Path(path))
        sg = model.Subgraphs(0)
        tensor_bytes = _symbolic_tensor_bytes(model, sg, symbols, Path(path).name)
        mm = from_tflite(model, 1, views, size_of=lambda t: aligned_expr(symbols, tensor_bytes[t], align))
        dag = cls.from_model(symbols, mm)
        dag.tensor_bytes = tensor_bytes
        return dag

    def __repr__(self) -> str:
        return f"SymDag({self.n} ops, dims {[f'{d.name}={d.lo}..{d.hi}' for d in self.symbols.dims]})"


def _ints(vector) -> list[int]:
    """A flatbuffer int vector as a list (the reader returns 0, not an empty array, when it is absent)."""
    return [] if isinstance(vector, int) else [int(v) for v in vector]


def _symbolic_tensor_bytes(model, sg, symbols: Symbols, model_name: str) -> dict[int, object]:
    """Bytes of every activation tensor as an expression, by the binding rule of the module docstring."""
    from ..frontend.footprint import is_constant, tensor_bytes
    from ..frontend.tflite_import import tensor_name

    if len(symbols.dims) != 1:
        raise UnsupportedModelError(
            f"{model_name}: edgemem binds exactly one symbolic dimension of a .tflite model (the -1 dims of its "
            f"shape_signature, or the batch dim); {len(symbols.dims)} --dim options were given. Give one, e.g. --dim n=1..64."
        )
    n = symbols.vars[symbols.dims[0].name]
    shapes = {}
    for t in range(sg.TensorsLength()):
        tensor = sg.Tensors(t)
        if is_constant(model, tensor):
            continue
        shape = _ints(tensor.ShapeAsNumpy())
        sig = _ints(tensor.ShapeSignatureAsNumpy()) if tensor.ShapeSignatureLength() else shape
        elems = 1
        for d in shape:
            elems *= max(d, 1)
        shapes[t] = (sig, shape, tensor_bytes(tensor) // max(elems, 1), tensor_name(sg, t))
    marked = {t for t, (sig, *_) in shapes.items() if any(d < 0 for d in sig)}
    if marked:
        bad = [name for t, (sig, _, _, name) in shapes.items() if t in marked and any(d < 0 for d in sig[1:])]
        if bad:
            raise UnsupportedModelError(
                f"{model_name}: tensor '{bad[0]}' has a symbolic (-1) dimension other than the leading (batch) one; "
                "edgemem's symbolic planning binds only a leading dimension. Plan it with concrete shapes (no --dim)."
            )
    else:
        bad = [name for sig, shape, _, name in shapes.values() if not shape or shape[0] != 1]
        if bad:
            raise UnsupportedModelError(
                f"{model_name} has no -1 dimension, so --dim binds the leading (batch) dimension of every activation "
                f"tensor, but tensor '{bad[0]}' does not start with a batch dimension of 1. Plan it with concrete "
                "shapes (no --dim)."
            )
    out = {}
    for t, (sig, shape, itemsize, _) in shapes.items():
        symbolic = bool(sig) and sig[0] < 0 if marked else True  # a 0-d tensor (no signature) is not symbolic
        rest = 1
        for d in (shape[1:] if symbolic else shape):
            rest *= max(d, 1)
        out[t] = symbols.simplify(n * (rest * itemsize)) if symbolic else symbols.const(rest * itemsize)
    return out


# ----------------------------------------------------------------------------- the list scheduler


def _delta(dag: SymDag, v: int, placed: set[int]):
    """Bytes live after v's step minus before it, when every op in ``placed`` runs after v."""
    shape = dag.shape
    terms = [dag.sizes[v]] if shape.keeps[v] else []
    for p in dag.preds[v]:
        if p not in dag.outputs and not any(s in placed for s in shape.succs[p]):
            terms.append(-dag.sizes[p])  # v is p's last reader
    for e in shape.ext_of[v]:
        if not any(o in placed for o in dag.ext[e][1]):
            terms.append(-dag.ext[e][0])
    return dag.symbols.simplify(sum(terms[1:], terms[0]) if terms else 0)


def list_schedule(dag: SymDag) -> tuple[list[int], dict]:
    """BladeDISC++'s list scheduler: walk from the outputs back to the inputs; among the ready ops (all
    their readers placed), place last the one that increases memory most, so memory-increasing ops run
    as late as possible. Ties and unknown comparisons: the value at the range's upper end, then lower
    end (Symbols.decide), then the file order (a later op is placed later). Returns (order, stats)."""
    symbols, shape = dag.symbols, dag.shape
    pending = [len(s) for s in shape.succs]
    ready = [v for v in range(dag.n) if not pending[v]]
    placed: set[int] = set()
    backwards = []
    before = dict(symbols.stats)
    while ready:
        deltas = {v: _delta(dag, v, placed) for v in ready}
        best = ready[0]
        for v in ready[1:]:
            c = symbols.decide(deltas[v], deltas[best])
            if c > 0 or (c == 0 and v > best):
                best = v
        ready.remove(best)
        placed.add(best)
        backwards.append(best)
        for p in dag.preds[best]:
            pending[p] -= 1
            if not pending[p]:
                ready.append(p)
    order = backwards[::-1]
    assert shape.is_order(order)
    return order, {k: symbols.stats[k] - before[k] for k in before}


def schedule_symbolic(dag: SymDag, time_budget: float = 1.0) -> tuple[list[int], object, dict]:
    """The symbolically lowest peak among: the list scheduler, the file order, and the concrete best
    schedules (edgemem.schedule.best) at the range's upper and lower ends, each re-evaluated as an
    expression. Peaks are compared by proof; unknown -> value at hi, then at lo, then this order of
    candidates. Returns (order, peak expression, report)."""
    from .best import best_schedule
    from .exact import file_or_topo

    symbols = dag.symbols
    candidates = {}
    order, stats = list_schedule(dag)
    candidates["list"] = order
    candidates["file"] = file_or_topo(dag.shape)
    for label, env in (("best@hi", symbols.hi_env), ("best@lo", symbols.lo_env)):
        candidates[label] = best_schedule(dag.at(env), time_budget / 2)[0]
    peaks = {name: dag.peak(o) for name, o in candidates.items()}
    best = "list"
    for name in candidates:
        if symbols.decide(peaks[name], peaks[best]) < 0:
            best = name
    report = {
        name: {"peak": expr_text(peaks[name]), "at_lo": evaluate(peaks[name], symbols.lo_env),
               "at_hi": evaluate(peaks[name], symbols.hi_env)}
        for name in candidates
    }  # fmt: skip
    report["best"] = best
    report["list_comparisons"] = stats
    return candidates[best], peaks[best], report


def affine_from(dag: Dag, symbols: Symbols, seed: int, align: int = 4) -> SymDag:
    """A SymDag with the structure of ``dag`` and sizes ``a*n + b`` (first dim ``n``): each size s of
    ``dag`` is split at random into a part that scales with n and a constant part, so the order of sizes
    changes over the range (for tests and benchmarks of the symbolic comparisons)."""
    import random

    rng = random.Random(seed)
    n = symbols.vars[symbols.dims[0].name]

    def size(s: int):
        scaled = rng.randint(0, s) // max(symbols.dims[0].hi // 4, 1)
        return aligned_expr(symbols, n * scaled + (s - scaled), align)

    ext = [(size(b), ops) for b, ops in dag.ext]
    return SymDag(symbols, [size(s) for s in dag.sizes], dag.preds, dag.outputs, ext,
                  [size(dag.pinned)] if dag.pinned else [], dag.names)  # fmt: skip
