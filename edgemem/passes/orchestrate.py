"""Which memory passes to run, and in which order: a search after OPASS (Yu et al., JSA 2026) over the
pass catalogue, on the lowered module.

States are modules, actions are passes. A pass is an *opportunity* on a module when applying it changes
the module's status: planned arena, flash, MACs, number of kernels, of storage-owning tensors, of in-place
tensors (an in-place rewrite changes nothing else, yet it is what a later pass builds on). The search:

- detects the opportunities of the input module (applies each pass, keeps those that change the status);
- then repeatedly picks a visited state by a rank-biased random choice on OPASS's score (initial arena /
  state arena x untried opportunities) and applies one of its untried opportunities, the most promising
  (measured or learned arena ratio) first;
- a new state inherits its parent's opportunities (minus the pass just applied), corrected by the learned
  effect table ("p keeps q", "p creates q"); with a small probability (0.03) its opportunities are
  re-detected for real; passes nobody has a belief about are tested only when nothing else is left (a learned
  "no" for a pass adding work counts as no belief: such passes are detected late, on few states);
- it stops when the arena meets ``target_bytes * (1 - margin)``, after ``max_trials`` pass applications,
  at ``time_budget`` seconds, or when nothing is left to try.

Time (issue 30: on a module of thousands of kernels one trial can take minutes): the whole call runs under a
deadline (edgemem/timelimit.py) at BASELINE_GRACE x ``time_budget`` that the passes' binding loops, the graph
reader and the measure's schedulers look at. The fixed sequence, the build's fallback, runs first without a
measure (as --opt-time 0 runs it: cut before the input's measure ends, the stage returns it as far as it got),
then the input module is measured, then the fixed sequence's modules, then the search: no trial starts after
``time_budget`` (the fixed sequence's time not counted) and each is cut at TRIAL_GRACE x the budget (a cut trial
is dropped); then the other baselines (TVM's pipeline, skipped when predicted longer than what is left;
benchmarks' own). Only the work-adding fallbacks, run when nothing reached fits, are not cut: without them the
build would be refused.

Objective (the board fit): arena bytes, then flash bytes, then MACs; ties go to the shorter sequence. The
build instead chooses by the memory/latency objective (``pareto=True``, passes/objective.py) among every state
the search and the baselines reached: the fewest predicted instructions that fit the target, or the least arena
within ``max_slowdown`` percent of the fastest; it reports the Pareto points (arena, MACs, instructions).
Parameterized passes (``variants``) enter as one move per variant (``expand_variants``).
The run is deterministic for a seed: every choice comes from ``random.Random(seed)`` and the measure is
deterministic (the schedulers and the planner finish well inside their budgets on these graphs). A time
stop only cuts the same trajectory shorter.

The module is split by job: the learned effect table is ``effects.py``; TVM's default pipeline, the
figure the build reports next to the search's, is ``tvm_baseline.py``; baselines that only benchmarks compare
against (greedy) live in ``benchmarks/pass_baselines.py`` and come in through ``extra_baselines``. This file
is the search and the build's choice between its result and the fixed sequence.
"""

from __future__ import annotations

import random
import time
from collections.abc import Callable, Hashable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from ..timelimit import TimeUp, check, deadline
from .effects import EffectTable
from .tvm_baseline import tvm_default_baseline

DEFAULT_SEQUENCE = ("fold_pad", "inplace_depthwise", "inplace_residual", "inplace_elementwise")  # edgemem's fixed sequence
REDETECT = 0.03  # OPASS's probability of re-detecting a new state's real opportunities
RANK_BIAS = 0.5  # the state (or opportunity) of rank r is chosen with weight RANK_BIAS ** r
STATUS_KEYS = ("arena_bytes", "flash_bytes", "macs", "ops", "tensors", "inplace_tensors", "peak_bytes")
ALL_BASELINES = ("none", "tvm_default", "fixed")  # the build's own; benchmarks add theirs (extra_baselines)
# A trial started within the budget may run to TRIAL_GRACE x the budget (then it is cut: on a module of thousands
# of kernels one trial can take minutes); the baselines, after the search, to BASELINE_GRACE x the budget.
TRIAL_GRACE, BASELINE_GRACE = 1.5, 2.0
TVM_DEFAULT_COST = 4.5  # TVM's pipeline + two measures, in measures of the input module (see _tvm_default)
TVM_MARGIN = 2.0  # under load its time strays further than a measure's: it ran 1 s past a 2 s stage deadline


def objective(figures: dict) -> tuple:
    """The board fit, smaller is better: arena, then flash, then MACs."""
    return figures["arena_bytes"], figures["flash_bytes"], figures["macs"]


def status(figures: dict) -> tuple:
    return tuple(figures.get(k) for k in STATUS_KEYS)


def measure(mod, align: int = 4, schedule_seconds: float = 0.5) -> dict:
    """catalogue.evaluate (the build's measure) plus the number of in-place tensors and the predicted
    instructions of its kernels (passes/objective.py's fitted model)."""
    from ..ir.graph import read_graph
    from .catalogue import evaluate
    from .objective import InstructionModel

    graph = read_graph(mod)
    figures = evaluate(mod, align, schedule_seconds, graph)
    check()  # each step is linear in the kernels, a second or more on thousands of them under load
    figures["inplace_tensors"] = sum(1 for t in graph.tensors.values() if t.alias_of)
    figures["instructions"] = InstructionModel.load().predict_graph(graph)
    check()
    return figures


def module_key(mod) -> Hashable:
    """Structural identity of a module: the same program reached by two sequences is one state. Each kernel
    is hashed once per object (rewrite.function_hash: a pass rewrites main and adds a few kernels; the rest are
    its parent's objects, on mcunetv2_large's 300 kernels most of a whole-module hash). main is hashed with
    free variables mapped, under which a GlobalVar counts by its name, as in the whole-module hash."""
    from .rewrite import function_hash, main_hash

    kernels, main = [], None
    for gv, func in mod.functions.items():
        check()  # thousands of kernels: under the stage's deadline
        if gv.name_hint == "main":
            main = main_hash(func)
        else:
            kernels.append((gv.name_hint, function_hash(func)))
    return main, tuple(sorted(kernels))


# -- the search -----------------------------------------------------------------------------------------


class _OutOfBudget(Exception):
    def __init__(self, reason: str):
        self.reason = reason


@dataclass
class _State:
    id: int
    mod: Any
    key: Hashable
    figures: dict
    path: tuple
    incoming: list = field(default_factory=list)  # (parent id, pass name)
    known: dict = field(default_factory=dict)  # pass -> measured: is it an opportunity here
    believed: set = field(default_factory=set)  # opportunities believed (measured, inherited or learned)
    unknown: set = field(default_factory=set)  # passes without any belief: tested when nothing else is left
    tried: set = field(default_factory=set)  # believed opportunities already applied


@dataclass
class Step:
    """One pass of the chosen sequence and what it did (after - before)."""

    name: str
    arena_bytes: int  # after the pass
    d_arena: int
    d_flash: int
    d_macs: int
    d_ops: int
    d_tensors: int
    d_inplace: int  # tensors written over their input

    def to_json(self) -> dict:
        return dict(self.__dict__)


@dataclass
class Orchestration:
    module: Any
    figures: dict
    sequence: list  # [Step]
    source: str  # "search" or "baseline:<name>" (a baseline beat the search)
    search_figures: dict  # the search's own best
    trials: int  # pass applications by the search (cache misses)
    trials_to_best: int  # ... until its best was first reached
    baseline_trials: int  # further applications the baselines needed
    states: int
    stop: str  # "target", "trials", "time" or "exhausted"
    seconds: float
    baselines: dict  # name -> {"arena_bytes", "flash_bytes", "macs", "sequence"} or {"arena_bytes": None, "reason"}
    observations: EffectTable  # what this run saw, for ``learn``
    table_models: int  # models the effect table used was learned from
    pareto: dict | None = None  # the objective's points and choice (objective.report), when chosen by it
    fits: bool = True  # the chosen module's arena fits target_bytes (always True without a target)

    def report(self) -> dict:
        return {**({"pareto": self.pareto} if self.pareto is not None else {}), "sequence": [s.to_json() if isinstance(s, Step) else dict(s) for s in self.sequence], "arena_bytes": self.figures.get("arena_bytes"),
                "source": self.source, "search_arena_bytes": self.search_figures.get("arena_bytes"),
                "trials": self.trials, "trials_to_best": self.trials_to_best, "baseline_trials": self.baseline_trials,
                "states": self.states, "stop": self.stop, "seconds": round(self.seconds, 3),
                "effect_table_models": self.table_models}  # fmt: skip


class _Search:
    def __init__(self, passes, table: EffectTable, measure_fn, key_fn, clock, time_budget, max_trials, seed, learn_all):
        self.passes = list(passes)
        self.by_name = {p.name: p for p in self.passes}
        self.index = {p.name: i for i, p in enumerate(self.passes)}
        self.table, self.measure_fn, self.key_fn, self.clock = table, measure_fn, key_fn, clock
        self.start, self.time_budget, self.max_trials = clock(), time_budget, max_trials
        self.rng = random.Random(seed)
        self.redetect = 1.0 if learn_all else REDETECT
        # passes adding work (catalogue.GraphPass.deferred): detected only when no other move is believed
        self.eager = [p.name for p in self.passes if not getattr(p, "deferred", False)]
        self.obs = EffectTable()
        self.applied: dict = {}  # (module key, pass) -> (module, key, figures or None)
        self.figures: dict = {}  # module key -> figures
        self.states: list[_State] = []
        self.by_key: dict = {}
        self.trials = 0
        self.extra_trials = 0  # made outside the search (baselines): up to BASELINE_GRACE x the budget
        self.budgeted = True
        self.fallback = False  # applying the fixed sequence after the search: no deadline
        self.best: _State | None = None
        self.trials_to_best = 0
        self.root_seconds = 0.0
        self.premade: list = []  # (module, pass, its result): the fixed sequence's, made before any measure

    # applying a pass --------------------------------------------------------------------------------
    def apply(self, state: _State, name: str):
        """(module, key, figures or None on failure), from the cache or by one trial."""
        cached = self.applied.get((state.key, name))
        if cached is not None:
            return cached
        elapsed = self.clock() - self.start
        if self.budgeted:
            if self.trials >= self.max_trials:
                raise _OutOfBudget("trials")
            if elapsed >= self.time_budget:
                raise _OutOfBudget("time")
            self.trials += 1
            left = TRIAL_GRACE * self.time_budget - elapsed
        elif self.fallback:  # the fixed sequence: what the build falls back to, as with --opt-time 0, always whole
            left = None
            self.extra_trials += 1
        else:
            left = BASELINE_GRACE * self.time_budget - elapsed
            if left <= 0:
                raise _OutOfBudget("time")
            self.extra_trials += 1
        try:
            with deadline(left):  # the pass's loops and the measure look at it (edgemem/timelimit.py)
                mod = self._premade(state.mod, name)
                mod = self.by_name[name](state.mod) if mod is None else mod
                key = self.key_fn(mod)
                figures = state.figures if key == state.key else self.figures.get(key)
                if figures is None:
                    figures = self.figures[key] = self.measure_fn(mod)
        except TimeUp:  # cut: nothing is learned or cached of this trial
            raise _OutOfBudget("time") from None
        except Exception:  # a failing pass is not applicable (OPASS)
            mod, key, figures = state.mod, state.key, None
        result = self.applied[(state.key, name)] = (mod, key, figures)
        return result

    def _premade(self, parent, name: str):
        """The module pass ``name`` made of ``parent`` before it was measured (_fixed_unmeasured), or None."""
        return next((child for p, n, child in self.premade if n == name and p is parent), None)

    def step(self, state: _State, name: str) -> _State | None:
        """``state`` after pass ``name`` as a detached state (not part of the search graph), None when the
        pass fails: what baselines walk with (cached like every application)."""
        mod, key, figures = self.apply(state, name)
        return None if figures is None else _State(-1, mod, key, figures, state.path + (name,))

    @property
    def pass_names(self) -> list[str]:
        return [p.name for p in self.passes]

    def opportunity(self, state: _State, result) -> bool:
        return result[2] is not None and status(result[2]) != status(state.figures)

    # what is known, and what it teaches ---------------------------------------------------------------
    def set_known(self, state: _State, name: str, opportunity: bool) -> None:
        if name in state.known:
            return
        state.known[name] = opportunity
        state.unknown.discard(name)
        if opportunity:
            state.believed.add(name)
        else:
            state.believed.discard(name)
        if state.id == 0:
            self.obs.saw_root(name, opportunity)
        for parent_id, p in state.incoming:  # this state as a child: did p keep or create `name`?
            parent = self.states[parent_id]
            if name in parent.known:
                self.obs.saw_after(p, name, parent.known[name], opportunity)
        for child in self.states:  # this state as a parent
            for parent_id, p in child.incoming:
                if parent_id == state.id and name in child.known:
                    self.obs.saw_after(p, name, opportunity, child.known[name])

    def detect(self, state: _State, names) -> None:
        for name in sorted(names, key=self.index.get):
            if name not in state.known:
                self.set_known(state, name, self.opportunity(state, self.apply(state, name)))

    # states -----------------------------------------------------------------------------------------
    def add_state(self, mod, key, figures, path, parent: _State | None, via: str | None) -> _State:
        state = _State(len(self.states), mod, key, figures, path)
        self.states.append(state)
        self.by_key[key] = state
        if parent is None:
            for name in self.index:  # a fresh module: what the table says of each pass, if anything
                belief = self._trusted(name, self.table.root_belief(name))
                if belief:
                    state.believed.add(name)
                elif belief is None:
                    state.unknown.add(name)
        else:
            state.incoming.append((parent.id, via))
            self.inherit(state, parent, via)
        if self.best is None or self.rank_key(state) < self.rank_key(self.best):
            self.best, self.trials_to_best = state, self.trials
        return state

    def inherit(self, child: _State, parent: _State, via: str) -> None:
        """The parent's opportunities minus ``via``, corrected by what the table learned about ``via``."""
        for name in self.index:
            was = parent.known.get(name, name in parent.believed)
            belief = self._trusted(name, self.table.after_belief(via, name, was))
            if belief is None and was and name != via:
                belief = True  # OPASS: an opportunity stays one
            if belief:
                child.believed.add(name)
            elif belief is None:
                child.unknown.add(name)

    def _trusted(self, name: str, belief: bool | None) -> bool | None:
        """The table's belief as the search takes it: a "no" for a pass adding work counts as no belief. Such a
        pass is detected only once nothing else is believed, so late and on few states, and a table learned
        across models says "no" for it wherever it has nothing to split (9 of the 21 shared models): taken at
        its word, the search never tried patches again (micronet_m 68,652 B instead of 25,060)."""
        return None if belief is False and name not in self.eager else belief

    def rank_key(self, state: _State) -> tuple:
        return objective(state.figures), len(state.path), state.path

    # the loop ---------------------------------------------------------------------------------------
    def expand(self, state: _State, name: str) -> None:
        state.tried.add(name)
        mod, key, figures = self.apply(state, name)
        opportunity = self.opportunity(state, (mod, key, figures))
        self.set_known(state, name, opportunity)
        if not opportunity:
            return
        self.obs.saw_gain(name, figures["arena_bytes"] / max(state.figures["arena_bytes"], 1))
        if key in self.by_key:  # the same program by another sequence: one state, one more edge
            other = self.by_key[key]
            if (state.id, name) not in other.incoming and other.id != state.id:
                other.incoming.append((state.id, name))
                for q, now in other.known.items():
                    if q in state.known:
                        self.obs.saw_after(name, q, state.known[q], now)
            return
        child = self.add_state(mod, key, figures, state.path + (name,), state, name)
        if self.rng.random() < self.redetect:
            self.detect(child, self.eager)

    def pick_state(self) -> _State | None:
        initial = max(self.states[0].figures["arena_bytes"], 1)
        open_states = [s for s in self.states if s.believed - s.tried]
        if not open_states:
            return None
        def score(s):  # OPASS: memory saved so far x opportunities left
            return initial / max(s.figures["arena_bytes"], 1) * len(s.believed - s.tried)

        scored = sorted(open_states, key=lambda s: (-score(s), s.id))
        return scored[self._biased_rank(len(scored))]

    def pick_pass(self, state: _State) -> str:
        def expected(name):
            cached = self.applied.get((state.key, name))
            if cached is not None and cached[2] is not None:
                return cached[2]["arena_bytes"] / max(state.figures["arena_bytes"], 1)
            return self.table.arena_ratio(name)

        open_moves = state.believed - state.tried
        names = sorted(open_moves.intersection(self.eager) or open_moves, key=lambda n: (expected(n), self.index[n]))
        return names[self._biased_rank(len(names))]

    def _biased_rank(self, n: int) -> int:
        weights = [RANK_BIAS**r for r in range(n)]
        return self.rng.choices(range(n), weights=weights)[0]

    def measure_root(self, mod) -> None:
        """The input module as state 0 (raises TimeUp when the stage's deadline cuts its measure)."""
        t0 = time.perf_counter()
        key = self.key_fn(mod)
        figures = self.figures[key] = self.measure_fn(mod)
        self.root_seconds = time.perf_counter() - t0  # what one measure of this module costs (real seconds)
        self.add_state(mod, key, figures, (), None, None)

    def run(self, target: float | None) -> str:
        try:
            while True:
                if target is not None and self.best.figures["arena_bytes"] <= target:
                    return "target"
                waiting = [s for s in self.states if s.unknown]
                root_eager = self.states[0].unknown.intersection(self.eager)
                if root_eager:  # the input module's opportunities come first (those adding work come last)
                    self.detect(self.states[0], root_eager)
                    continue
                state = self.pick_state()
                if state is not None:
                    self.expand(state, self.pick_pass(state))
                    continue
                if not waiting:
                    return "exhausted"
                state = min(waiting, key=self.rank_key)  # nothing believed left: test the best state's unknowns
                self.detect(state, set(state.unknown))
        except _OutOfBudget as stop:
            return stop.reason


# -- baselines, run after the search on its cache -------------------------------------------------------


def _run_sequence(search: _Search, names) -> tuple[_State, list]:
    """Apply ``names`` in order from the root (passes that change nothing included); the last state and
    the figures after each step. Out of time, the passes applied by then."""
    state, steps = search.states[0], []
    for name in names:
        try:
            state = search.step(state, name) or _State(-1, state.mod, state.key, state.figures, state.path + (name,))
        except _OutOfBudget:
            break
        steps.append((name, state.figures))
    return state, steps


def _steps_report(root_figures: dict, steps) -> list:
    out, before = [], root_figures
    for name, after in steps:
        out.append(Step(name, after["arena_bytes"], after["arena_bytes"] - before["arena_bytes"],
                        after["flash_bytes"] - before["flash_bytes"], after["macs"] - before["macs"],
                        after["ops"] - before["ops"], after["tensors"] - before["tensors"],
                        after.get("inplace_tensors", 0) - before.get("inplace_tensors", 0)))  # fmt: skip
        before = after
    return out


def _path_steps(search: _Search, state: _State) -> list:
    """The figures after each pass of a state's path, replayed from the cache."""
    cur, steps = search.states[0], []
    for name in state.path:
        _, key, figures = search.applied[(cur.key, name)]
        steps.append((name, figures))
        cur = search.by_key[key]
    return steps


def orchestrate(mod, passes=None, *, table: EffectTable | None = None, seed: int = 0, time_budget: float = 5.0,
                max_trials: int = 200, target_bytes: int | None = None, margin: float = 0.1,
                baselines: Iterable[str] = ALL_BASELINES, fixed_sequence: Iterable[str] = DEFAULT_SEQUENCE,
                extra_baselines: Mapping[str, Callable] | None = None,
                learn_all: bool = False, model_name: str | None = None, measure_fn: Callable | None = None, key_fn: Callable | None = None,
                clock: Callable[[], float] = time.perf_counter, pareto: bool = False, started: float | None = None,
                max_slowdown: float | None = None, fallbacks: Iterable[tuple[str, list]] = ()) -> Orchestration:  # fmt: skip
    """Search the best pass sequence for ``mod``; then the baselines on the same cache.

    ``passes``: GraphPass-like callables with ``.name`` (default: the catalogue). ``table``: the learned
    effects (default: the package's). ``target_bytes``: stop once the arena is at most
    ``target_bytes * (1 - margin)`` (None: minimize until a budget or nothing is left).
    ``learn_all``: re-detect every new state (a learning run: more trials, complete observations).
    ``model_name``: recorded with the observations (the table lists the models it learned from).
    ``measure_fn``/``key_fn``: figures and identity of a module (default: the build's measure and TVM's
    structural hash; tests pass their own). ``extra_baselines``: name -> function of the search returning
    (state, [(pass, figures)]) from ``search.states[0]`` through ``search.step`` (benchmarks/pass_baselines.py).
    ``pareto``: choose the result by the memory/latency objective (passes/objective.py: the fewest predicted
    instructions that fit ``target_bytes``, or with ``max_slowdown`` the least arena that much slower at most)
    among every state the search and the baselines reached, and report the Pareto points; else the board fit
    (least arena, flash, MACs) between the search's best and the baselines.
    A pass with ``variants(mod)`` (a list of (label, transform)) enters the search as one move per variant of
    the input module, named ``pass[label]``.
    ``started``: when the caller's stage began (time.perf_counter; default now): the deadline counts from it.
    ``fallbacks``: (name, [pass]) sequences adding work (a patch split, rematerialization), in order of more
    work; with ``pareto`` and ``target_bytes``, when no state reached fits, each is run from the input module
    (outside the time budget, like the baselines) until one fits, and competes under the objective."""
    table = EffectTable.load() if table is None else table
    measure_fn, key_fn = measure_fn or measure, key_fn or module_key
    t0 = clock()
    # the whole call bar the work-adding fallbacks, input measure and fixed sequence included, is cut at
    # BASELINE_GRACE x the budget (issue 30): on thousands of kernels either alone takes longer than the budget
    since = 0.0 if started is None else time.perf_counter() - started
    with deadline(BASELINE_GRACE * time_budget - since):
        if passes is None:
            from .catalogue import catalogue

            passes = catalogue()
        passes = expand_variants(passes, mod)  # cut: no variant (as when they cannot be listed)
        search = _Search(passes, table, measure_fn, key_fn, clock, time_budget, max_trials, seed, learn_all)
        baselines = list(baselines)
        # the fallback first, unmeasured (as --opt-time 0 runs it): what the stage returns if cut before any measure
        last, applied = _fixed_unmeasured(search, mod, fixed_sequence) if "fixed" in baselines else (mod, [])
        try:
            search.measure_root(mod)
        except TimeUp:
            return _unmeasured(last, applied, clock() - t0, len(table.models))
        fixed = _fixed_first(search, fixed_sequence) if "fixed" in baselines else None
        target = None if target_bytes is None else target_bytes * (1 - margin)
        stop = search.run(target)
        search.obs.models = [model_name] if model_name else []
        search_best = search.best
        search.budgeted = False  # the baselines always finish (they are short and mostly cached)
        root = search.states[0]
        best_state, best_steps, source = search_best, _path_steps(search, search_best), "search"
        report: dict = {}
        # (state, steps or None: its path, source), in the search's own order of preference (rank_key: arena,
        # flash, MACs, the shorter sequence, by name), which breaks the objective's ties; baselines after
        reached = [(s, None, "search") for s in sorted(search.states, key=search.rank_key)]
        for name in baselines:
            if name == "none":
                state, steps = root, []
            elif name == "fixed":
                state, steps = fixed
            elif name in (extra_baselines or {}):
                try:
                    state, steps = extra_baselines[name](search)
                except _OutOfBudget:
                    report[name] = {"arena_bytes": None, "reason": _NO_TIME}
                    continue
            elif name == "tvm_default":
                report[name] = _tvm_default(search, mod, measure_fn)
                continue
            else:
                known = ", ".join([*ALL_BASELINES, *(extra_baselines or {})])
                raise ValueError(f"unknown baseline {name!r}; known: {known} (benchmarks/pass_baselines.py has more)")
            report[name] = {**{k: state.figures[k] for k in ("arena_bytes", "flash_bytes", "macs")},
                            "sequence": [n for n, _ in steps]}  # fmt: skip
            reached.append((state, steps, f"baseline:{name}"))
            if (objective(state.figures), len(steps)) < (objective(best_state.figures), len(best_steps)):
                best_state, best_steps, source = state, steps, f"baseline:{name}"
    if pareto and target_bytes is not None:
        _run_fallbacks(search, list(fallbacks), target_bytes, reached, report)
    chosen, fits = None, True
    if pareto:
        chosen, fits = _choose(reached, target_bytes, max_slowdown)
        (best_state, steps, source), _ = chosen
        best_steps = _path_steps(search, best_state) if steps is None else steps
    return Orchestration(
        module=best_state.mod, figures=best_state.figures, sequence=_steps_report(root.figures, best_steps),
        source=source, search_figures=search_best.figures, trials=search.trials,
        trials_to_best=search.trials_to_best, baseline_trials=search.extra_trials, states=len(search.states),
        stop=stop, seconds=clock() - t0, baselines=report, observations=search.obs,
        table_models=len(table.models), pareto=chosen[1] if chosen else None, fits=fits,
    )  # fmt: skip


def _fixed_first(search: _Search, fixed_sequence) -> tuple[_State, list]:
    """The fixed sequence from the input module, before the search: what the build falls back to, given the
    whole stage's time rather than what a search left of it (cut, the passes applied by then), its modules made
    already (_fixed_unmeasured). The search then finds its applications in the cache, and its own budget counts
    without them (as when the fixed sequence ran after it: the stage's deadline still holds)."""
    search.fallback, search.budgeted = True, False
    t0 = search.clock()
    try:
        return _run_sequence(search, [n for n in fixed_sequence if n in search.by_name])
    finally:
        search.fallback, search.budgeted = False, True
        search.start += search.clock() - t0


def _fixed_unmeasured(search: _Search, mod, fixed_sequence) -> tuple[Any, list]:
    """The fixed sequence applied to ``mod`` without a measure, until the deadline: the last module and [(pass,
    changed)]. A pass that fails is left out, as a failing trial. The modules are kept for the search's apply, and
    the search's budget counts without this time."""
    cur, applied, t0 = mod, [], search.clock()
    for name in (n for n in fixed_sequence if n in search.by_name):
        try:
            new = search.by_name[name](cur)
        except TimeUp:
            break
        except Exception:  # noqa: BLE001 - not applicable here (the measured run finds it failing too)
            continue
        search.premade.append((cur, name, new))
        applied.append((name, not (new.same_as(cur) if hasattr(new, "same_as") else new == cur)))
        cur = new
    search.start += search.clock() - t0
    return cur, applied


def _unmeasured(mod, applied: list, seconds: float, table_models: int) -> Orchestration:
    """The stage's deadline cut the input module's first measure: the fixed sequence's module as far as it got
    (what --opt-time 0 returns, or a prefix of it), each pass as changed or not, nothing measured."""
    sequence = [{"name": name, "changed": changed} for name, changed in applied]
    return Orchestration(module=mod, figures={}, sequence=sequence, source="the fixed sequence, unmeasured (out of time)",
                         search_figures={}, trials=0, trials_to_best=0, baseline_trials=0, states=0, stop="time",
                         seconds=seconds, baselines={}, observations=EffectTable(), table_models=table_models)  # fmt: skip


def _run_fallbacks(search: _Search, fallbacks: list, target_bytes: int, reached: list, report: dict) -> None:
    """The work-adding sequences, while nothing reached fits ``target_bytes`` (issue 33: the search's time budget
    runs out before a patch trial of many seconds, and without a split MobileNetV2-224 needs 1.2 MB)."""
    for name, seq in fallbacks:
        if any(state.figures["arena_bytes"] <= target_bytes for state, _, _ in reached):
            return
        for p in seq:
            search.by_name.setdefault(p.name, p)
        search.fallback = True  # as the fixed sequence: no deadline, a split takes the seconds it takes
        try:
            state, steps = _run_sequence(search, [p.name for p in seq])
        finally:
            search.fallback = False
        report[name] = {**{k: state.figures[k] for k in ("arena_bytes", "flash_bytes", "macs")},
                        "sequence": [n for n, _ in steps]}  # fmt: skip
        reached.append((state, steps, f"fallback:{name}"))


_NO_TIME = "skipped: the --opt-time budget ran out"


def _tvm_default(search: _Search, mod, measure_fn) -> dict:
    """TVM's pipeline as a reference figure, within what is left of the baselines' time (BASELINE_GRACE). Its
    passes are TVM's, which no deadline stops: it is skipped when left with less than TVM_MARGIN x TVM_DEFAULT_COST measures
    of the input module (the pipeline legalizes every binding, 2.3 measures on a chain of 1,500 kernels; then
    it is measured twice)."""
    left = BASELINE_GRACE * search.time_budget - (search.clock() - search.start)
    if left <= 0 or left < TVM_MARGIN * TVM_DEFAULT_COST * search.root_seconds:
        return {"arena_bytes": None, "reason": _NO_TIME}
    try:
        with deadline(left):
            return tvm_default_baseline(mod, measure_fn)
    except TimeUp:
        return {"arena_bytes": None, "reason": _NO_TIME}


def _choose(reached: list, budget: int | None, max_slowdown: float | None):
    """The memory/latency objective over every state reached: ((state, steps, source), its report), fits."""
    from . import objective as obj

    points = []
    for state, _steps, source in reached:
        f = state.figures
        instructions = f.get("instructions", 2 * f["macs"])  # a measure without the model: MACs as the proxy
        points.append(obj.Point(tuple(state.path), f["arena_bytes"], f["macs"], instructions, source))
    choice = obj.choose(points, budget if budget is not None else 2**62, max_slowdown)
    taken = reached[next(i for i, p in enumerate(points) if p is choice.point)]
    return (taken, obj.report(points, choice, max_slowdown, obj.InstructionModel.load())), choice.fits


@dataclass(frozen=True)
class Variant:
    """One parameterization of a pass (e.g. a patch split): a move of its own in the search."""

    name: str
    transform: Callable

    def __call__(self, mod):
        return self.transform(mod)


def expand_variants(passes, mod) -> list:
    """Each pass that offers ``variants(mod)`` -> (label, transform) becomes one move per variant of ``mod``
    (``name[label]``); a pass whose variants cannot be listed on ``mod`` offers none."""
    out = []
    for p in passes:
        variants = getattr(p, "variants", None)
        if variants is None:
            out.append(p)
            continue
        try:
            listed = list(variants(mod))
        except Exception:  # noqa: BLE001 - as a failing pass: not applicable here
            listed = []
        out.extend(Variant(f"{p.name}[{label}]", fn) for label, fn in listed)
    return out
