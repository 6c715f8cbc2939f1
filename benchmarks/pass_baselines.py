"""Baselines only benchmarks compare the pass orchestrator against (the build has its own: none, fixed,
tvm_default, in edgemem/passes/orchestrate.py). Each is a function of the orchestrator's search, walking
from its root state with ``search.step`` (cached applications), passed as
``orchestrate(..., baselines=(..., "greedy"), extra_baselines=EXTRA)``."""

from __future__ import annotations

from edgemem.passes.orchestrate import objective


def greedy(search) -> tuple:
    """Each round the pass with the best objective, while it improves: (last state, [(pass, figures)])."""
    state, steps = search.states[0], []
    while True:
        best = None
        for name in search.pass_names:
            after = search.step(state, name)
            better = after is not None and objective(after.figures) < objective(state.figures)
            if better and (best is None or objective(after.figures) < objective(best.figures)):
                best = after
        if best is None:
            return state, steps
        state = best
        steps.append((state.path[-1], state.figures))


EXTRA = {"greedy": greedy}
