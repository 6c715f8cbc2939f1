"""Exact memory-optimal operator order, after Serenity (Ahn et al., MLSys 2020) and Liberis & Lane.

A dynamic program over partial schedules: the state is the set of ops already run (a bitmask),
because the bytes live afterwards depend on that set only; every state is kept once (memoised)
with the lowest peak of any path reaching it. Layer k of the program holds the states with k ops
run. What keeps it small:
- a soft budget: states whose peak reaches the budget are dropped; budgets are tried from the
  lower bound upward, and the first one under which a schedule exists gives the optimum (the
  last one is the best known peak: finding nothing under it proves that order optimal);
- divide and conquer at single-node cuts (ops that every path passes through): the ops before a
  cut always run before it, so each segment between cuts is solved on its own, and a segment
  already under the whole graph's lower bound needs no search;
- a lower bound per state (Dag.pruner): a state from which some op must see the budget is dropped;
- a dominance rule: an op (or block) that frees at least what it allocates and whose step stays
  under the peak so far runs at once, since moving it earlier never raises any later step.
A narrow beam search first gives a good incumbent. Past a time or state limit the scheduler
returns the best order found so far with ``optimal=False``.

``search`` is the same program over blocks of ops (the hierarchical scheduler uses it).
"""

from __future__ import annotations

import time

from .dag import NO_LIMITS, Dag, Limits, OutOfBudget, bits
from .rpo import rpo_order



def leaf_expand(dag: Dag, ops: list[int]):
    """Expansion function for items that are single ops."""
    step = dag.step

    def expand(i, done, m):
        v = ops[i]
        during, after = step(done, m, v)
        return (v,), during, after, done | (1 << v)

    return expand


def search(item_preds: list[int], expand, done: int, m: int, budget: int, limits: Limits,
           beam: int | None = None, prune=None, dominance: bool = True):
    """Lowest-peak sequence of items 0..k-1, where item i may run once the items in the mask
    ``item_preds[i]`` have; ``expand(i, done, m) -> (ops, peak of its steps, bytes live after,
    done after)`` runs one item after the ops ``done`` (``m`` bytes live).
    ``prune(done, budget)`` (Dag.pruner) drops states from which no order can stay under budget;
    ``dominance=False`` turns the dominance rule off (plain Serenity, for comparison).
    States are expanded in layers of equal ops run (items may hold many ops: a layer by items
    would weigh a state that ran five cells against one that ran five single ops).
    With ``beam``, each layer keeps only its ``beam`` states of lowest (peak, live bytes): no
    longer exact, but bounded (the hierarchical scheduler's speed setting).
    Returns (item sequence, peak) with peak < budget, or None if no sequence stays under it."""
    k = len(item_preds)
    if k == 0:
        return [], 0
    succs = [0] * k
    for i, pm in enumerate(item_preds):
        for p in bits(pm):
            succs[p] |= 1 << i
    ready0 = sum(1 << i for i in range(k) if not item_preds[i])
    full = (1 << k) - 1
    layers = {done.bit_count(): {0: (0, m, done, ready0)}}  # ops run -> state -> (peak, live bytes, done ops, ready items)
    parent, dead = {}, set()  # state -> the item run last on the best path to it; states pruned
    while layers:
        layer = layers.pop(min(layers))  # every way into it came from a smaller layer: it is final
        if beam is not None and len(layer) > beam:
            layer = dict(sorted(layer.items(), key=lambda kv: kv[1][:2])[:beam])
        limits.charge(len(layer))
        if full in layer:  # the only state of the last layer
            return _path(parent, full), layer[full][0]
        for count, (key, (peak, m, done, ready)) in enumerate(layer.items()):
            if count & 1023 == 1023:
                limits.charge(0)  # a layer can be long: look at the clock inside it too
            for i, during, after, done2 in _moves(ready, expand, peak, m, done, dominance):
                p2 = peak if during <= peak else during
                key2 = key | (1 << i)
                if p2 >= budget or key2 in dead:
                    continue
                level = done2.bit_count()
                nxt = layers.get(level)
                old = None if nxt is None else nxt.get(key2)
                if old is None:
                    if prune is not None and prune(done2, budget):
                        dead.add(key2)
                        continue
                    ready2 = ready & ~(1 << i)
                    rest = succs[i]
                    while rest:  # successors whose predecessors have all run become ready
                        low = rest & -rest
                        rest ^= low
                        if not item_preds[low.bit_length() - 1] & ~key2:
                            ready2 |= low
                    if nxt is None:
                        nxt = layers[level] = {}
                elif old[0] <= p2:
                    continue
                else:
                    ready2 = old[3]
                nxt[key2] = (p2, after, done2, ready2)
                parent[key2] = i
    return None


def _moves(ready: int, expand, peak: int, m: int, done: int, dominance: bool):
    """The items that may run next, each as (item, step peak, live after, done after). If one
    frees at least what it allocates without raising the peak, only that one: moving it earlier
    in any order lowers or keeps every later step, so no better order starts otherwise."""
    moves = []
    while ready:
        low = ready & -ready
        ready ^= low
        i = low.bit_length() - 1
        _, during, after, done2 = expand(i, done, m)
        if dominance and during <= peak and after <= m:
            return [(i, during, after, done2)]
        moves.append((i, during, after, done2))
    return moves


def _path(parent: dict, key: int) -> list[int]:
    """The item sequence read back from the parent links, from the state ``key`` to the start."""
    seq = []
    while key:
        i = parent[key]
        seq.append(i)
        key ^= 1 << i
    return seq[::-1]


def run_items(seq, expand, done: int, m: int):
    """Replay an item sequence: (ops, peak, bytes live after, done after)."""
    ops, peak = [], 0
    for i in seq:
        part, during, m, done = expand(i, done, m)
        ops.extend(part)
        peak = max(peak, during)
    return ops, peak, m, done


def segments(dag: Dag, limits: Limits = NO_LIMITS) -> list[list[int]]:
    """The ops split at single-node cuts (every other op is an ancestor or a descendant of a
    cut); each segment, in topological order, ends with its cut. In linear time: the op at
    position i of the topological order is a cut iff every op before it has a successor at or
    before i (then following such successors reaches it: all are ancestors) and every op after it
    a predecessor at or after i (all are descendants)."""
    n, topo = dag.n, dag.topo
    pos = [0] * n
    for i, v in enumerate(topo):
        pos[v] = i
    reach = [min((pos[s] for s in dag.succs[v]), default=n) for v in topo]
    back = [max((pos[p] for p in dag.preds[v]), default=-1) for v in topo]
    after_ok = [True] * n  # every op after position i has a predecessor at or after i
    lowest = n
    for i in range(n - 1, -1, -1):
        limits.tick(i)
        after_ok[i] = lowest >= i
        lowest = min(lowest, back[i])
    out, start, highest = [], 0, -1
    for i in range(n):
        limits.tick(i)
        if highest <= i and after_ok[i]:
            out.append(topo[start:i + 1])
            start = i + 1
        highest = max(highest, reach[i])
    if start < n:
        out.append(topo[start:])
    return out


def min_order(item_preds: list[int], expand, done: int, m: int, incumbent: list[int], floor: int, limits: Limits,
              beam: int | None = None, prune=None, dominance: bool = True):
    """Lowest-peak item sequence given a valid ``incumbent`` one, trying soft budgets upward
    from ``floor`` (a lower bound; a peak <= floor is good enough). Returns (sequence, peak)."""
    inc_peak = run_items(incumbent, expand, done, m)[1]
    if inc_peak <= floor or len(incumbent) <= 1:
        return incumbent, inc_peak
    for budget in sorted({floor + 1, (floor + inc_peak) // 2 + 1, inc_peak}):
        if floor < budget <= inc_peak:
            found = search(item_preds, expand, done, m, budget, limits, beam, prune, dominance)
            if found is not None:
                return found
    return incumbent, inc_peak  # nothing under the incumbent's peak: it is optimal


class Segment:
    """The ops between two cuts, to be ordered after the ops ``done`` (``m`` bytes live: the caller carries
    it from segment to segment; ``Dag.mem`` on each would scan every op run before, quadratic on long
    chains). The per-state bound is built on first use: most segments of a long chain never search."""

    def __init__(self, dag: Dag, ops: list[int], done: int, order: list[int], m: int, limits: Limits = NO_LIMITS):
        self.dag, self.ops, self.done, self.m, self.limits = dag, ops, done, m, limits
        index = {v: i for i, v in enumerate(ops)}
        self.item_preds = [sum(1 << index[p] for p in dag.preds[v] if p in index) for v in ops]
        self.expand = leaf_expand(dag, ops)
        self._prune = None
        self.seq = [index[v] for v in order]  # best item sequence so far
        self.peak = run_items(self.seq, self.expand, done, self.m)[1]

    @property
    def prune(self):
        if self._prune is None:
            self._prune = self.dag.pruner(sum(1 << v for v in self.ops), limits=self.limits)
        return self._prune

    @property
    def floor(self) -> int:
        bounds = self.dag.bounds(self.limits)
        return max(bounds[v][0] for v in self.ops)

    @property
    def order(self) -> list[int]:
        return [self.ops[i] for i in self.seq]

    def quick(self, width: int, limits: Limits) -> None:
        """A narrow beam under the current peak: a good order fast, which is what a timeout returns."""
        found = search(self.item_preds, self.expand, self.done, self.m, self.peak, limits, width, self.prune)
        if found is not None:
            self.seq, self.peak = found

    def solve(self, floor: int, limits: Limits, plain: bool = False) -> None:
        """The lowest peak (a peak <= ``floor`` is good enough: the whole schedule cannot go below);
        ``plain``: without the per-state bound and the dominance rule."""
        prune = None if plain else self.prune
        self.seq, self.peak = min_order(self.item_preds, self.expand, self.done, self.m, self.seq, max(floor, self.floor), limits, None, prune, not plain)


def _segments_in(dag: Dag, best: list[int], limits: Limits) -> list:
    """The segments, each in ``best``'s order: a Segment where there is a choice (two ops or more), else
    its one op as a list (a long chain has thousands of those and nothing to search)."""
    pos = {v: s for s, v in enumerate(best)}
    parts, done, m = [], 0, dag.mem(0)
    for i, seg in enumerate(segments(dag, limits)):
        limits.tick(i)
        ordered = sorted(seg, key=pos.get)
        if len(seg) > 1:
            parts.append(Segment(dag, seg, done, ordered, m, limits))
        else:
            parts.append(ordered)
        _, m, done = dag.run(done, m, ordered)
    return parts


def file_or_topo(dag: Dag) -> list[int]:
    """The ops in index order (the model file's order) if that is a valid order."""
    order = list(range(dag.n))
    return order if dag.is_order(order) else list(dag.topo)


def schedule(dag: Dag, time_limit: float | None = 60.0, max_states: int | None = None, incumbent: list[int] | None = None, quick: int | None = 64,
             plain: bool = False):
    """(order, peak, info) with ``info["optimal"]`` False when a limit stopped the search (the
    order is then the best found). Starts from the best of the file order, RPO, ``incumbent``
    and a ``quick`` beam search per segment. ``plain``: the DP as Serenity defines it -- memoised
    states, soft budgets, cuts, the limit -- without edgemem's additions (quick beam, per-state
    bound, dominance rule); the baseline the HMCOS paper measured its speed-up against."""
    start = time.perf_counter()
    limits = Limits(time_limit, max_states)
    candidates = [file_or_topo(dag), rpo_order(dag)] + ([list(incumbent)] if incumbent is not None else [])
    best = min(candidates, key=dag.peak)
    parts, optimal = [[v] for v in best], True  # what a limit returns before the segments are known: the best order
    try:
        parts = _segments_in(dag, best, limits)
        todo = [p for p in parts if isinstance(p, Segment)]
        floor = dag.lower_bound(limits) if todo else 0
        todo = sorted((p for p in todo if p.peak > floor), key=lambda p: -p.peak)
        if quick and not plain:
            for part in todo:
                part.quick(quick, limits)
        for part in sorted(todo, key=lambda p: -p.peak):  # the highest first: it raises the floor
            if part.peak > floor:
                part.solve(floor, limits, plain)
            floor = max(floor, part.peak)
    except OutOfBudget:
        optimal = False
    order = [v for part in parts for v in (part.order if isinstance(part, Segment) else part)]
    info = {"scheduler": "serenity" if plain else "exact", "optimal": optimal, "states": limits.states, "segments": len(parts),
            "seconds": time.perf_counter() - start}  # fmt: skip
    return order, dag.peak(order), info
