"""Hierarchical memory-constrained scheduling, after HMCOS / OPASSMem (Wang et al., DAC 2022).

The op graph becomes a tree of blocks, each scheduled as one contiguous piece:
- cells: for a join op j (a concat or residual add), the ops dominated by j's immediate dominator
  and post-dominated by j -- a single-entry single-exit region, so running it in one piece is
  always possible; cells nest (a laminar family is kept);
- sequences: chains of blocks where one's only successor is the next and the next's only
  predecessor is the one (their order is fixed).
A cell's inner order comes from the dynamic program of the exact scheduler (exact.search) over
its children, memoised per cell and "context" (which outside tensors the cell will free: the only
thing outside it that changes its best inner order). The top level is searched under the best
peak so far; after each improvement the blocks holding the new peak are ungrouped down to the
ops involved (the op running at the peak step, the producers of the tensors live there, and
their readers), and it repeats until a search finds nothing better.
Two additions keep it fast on wide graphs: the graph is first split at single-node cuts (as in
the exact scheduler; segments already under the lower bound are skipped), and each layer of
the search (states with as many ops run) keeps at most ``beam`` states -- exhaustive on graphs
whose layers stay narrower, a beam search beyond; under a budget, states bound to exceed it by
the largest per-op bounds are dropped first.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field

from .dag import NO_LIMITS, Dag, bits
from .exact import Limits, OutOfBudget, file_or_topo, min_order, run_items, search, segments
from .rpo import rpo_order


@dataclass(eq=False)
class Block:
    kind: str  # "op" | "seq" | "cell" | "root"
    mask: int  # ops inside
    children: list["Block"] = field(default_factory=list)
    op: int = -1
    context: int = 0  # outside ops whose progress decides which outside tensors the cell frees
    preds: list[int] | None = None  # per child: mask of the children it waits for

    def __repr__(self) -> str:
        return f"{self.kind}({self.op if self.kind == 'op' else len(self.children)})"


# -- the tree ---------------------------------------------------------------------------------


MAX_NEST = 40  # cells nested deeper are not blocks of their own: each level is ~11 Python frames of recursion


def _idoms(n: int, preds, order, limits: Limits = NO_LIMITS) -> list[int]:
    """Immediate dominators on a DAG (Cooper, Harvey, Kennedy) with a virtual root ``n``:
    one pass in topological order suffices since every predecessor is final before its user."""
    idom, depth = [n] * (n + 1), [0] * (n + 1)

    def meet(a, b):
        while a != b:
            if depth[a] < depth[b]:
                a, b = b, a
            a = idom[a]
        return a

    for i, v in enumerate(order):
        limits.tick(i)
        ps = preds(v)
        d = ps[0]
        for p in ps[1:]:
            d = meet(d, p)
        idom[v], depth[v] = d, depth[d] + 1
    return idom


def _subtrees(n: int, idom, order, limits: Limits = NO_LIMITS) -> list[int]:
    """Per node (and the virtual root ``n``), the mask of the ops it dominates."""
    sub = [0] * (n + 1)
    for i, v in enumerate(reversed(order)):
        limits.tick(i)
        sub[v] |= 1 << v
        sub[idom[v]] |= sub[v]
    return sub


def cells(dag: Dag, limits: Limits = NO_LIMITS) -> list[int]:
    """Masks of single-entry single-exit regions closed by a join, a laminar family."""
    n, topo = dag.n, dag.topo
    idom = _idoms(n, lambda v: dag.preds[v] or [n], topo, limits)
    dom = _subtrees(n, idom, topo, limits)
    sink = lambda v: dag.succs[v] + ([n] if v in dag.outputs or not dag.succs[v] else [])  # noqa: E731
    ipdom = _idoms(n, sink, topo[::-1], limits)
    pdom = _subtrees(n, ipdom, topo[::-1], limits)
    found = set()
    for j in range(n):
        limits.tick(j)
        if len(dag.preds[j]) < 2:
            continue
        e = idom[j]
        region = dom[e] & ~(1 << e) & pdom[j] & dag.full
        if region.bit_count() >= 3 and region != dag.full:
            found.add(region)
    kept = []
    for i, c in enumerate(sorted(found, key=int.bit_count)):
        limits.tick(i)
        if all(not c & k or k & ~c == 0 for k in kept):  # disjoint or containing
            kept.append(c)
    return kept


def build(dag: Dag, mask: int | None = None, regions: list[int] | None = None, limits: Limits = NO_LIMITS) -> Block:
    """The block tree of the ops in ``mask`` (default all): root > cells > sequences of cells and ops.
    Cells nested more than MAX_NEST deep are left out (their ops go to the deepest cell kept): running a
    block recurses into its children, and a hostile chain of joins nests thousands of cells."""
    mask = dag.full if mask is None else mask
    root = Block("root", mask)
    regions = [c for c in (cells(dag, limits) if regions is None else regions) if c & mask == c and c != mask]
    tops, depth = [root], {id(root): 0}
    owner = dict.fromkeys(bits(mask), root)  # op -> the smallest block holding it
    for i, c in enumerate(sorted(regions, key=int.bit_count, reverse=True)):  # large to small: a laminar family, so
        limits.tick(i)  # the smallest larger block holding c is the last one that took any op of c
        parent = owner[(c & -c).bit_length() - 1]
        if depth[id(parent)] >= MAX_NEST:
            continue
        blk = Block("cell", c)
        depth[id(blk)] = depth[id(parent)] + 1
        parent.children.append(blk)
        tops.append(blk)
        for j, v in enumerate(bits(c)):
            limits.tick(j)
            owner[v] = blk
    for v in bits(mask):
        owner[v].children.append(Block("op", 1 << v, op=v))
    for i, blk in enumerate(tops):
        limits.tick(i)
        blk.children = _chains(dag, blk, blk.children)
        _context(dag, blk)
    return root


def _child_preds(dag: Dag, children: list[Block]) -> list[int]:
    """Per child, the mask of the sibling children it reads from."""
    where = {}
    for i, c in enumerate(children):
        for v in bits(c.mask):
            where[v] = i
    preds = []
    for c in children:
        m = 0
        for v in bits(c.mask):
            for p in dag.preds[v]:
                i = where.get(p)
                if i is not None and not c.mask >> p & 1:
                    m |= 1 << i
        preds.append(m)
    return preds


def _chains(dag: Dag, parent: Block, children: list[Block]) -> list[Block]:
    """Join chains of children into sequences: a child whose only successor (inside the parent,
    and nothing outside) is a child whose only predecessor is it."""
    preds = _child_preds(dag, children)
    succs = [0] * len(children)
    for i, pm in enumerate(preds):
        for p in bits(pm):
            succs[p] |= 1 << i
    escapes = [any(dag.succ_mask[v] & ~parent.mask or v in dag.outputs for v in bits(c.mask)) for c in children]

    def link(i):  # the child that must follow i, if any
        s = succs[i]
        if escapes[i] or s.bit_count() != 1:
            return None
        j = s.bit_length() - 1
        return j if preds[j] == 1 << i else None

    nxt = [link(i) for i in range(len(children))]
    heads = set(range(len(children))) - {j for j in nxt if j is not None}
    out = []
    for h in sorted(heads):
        chain, i = [], h
        while i is not None:
            chain.append(children[i])
            i = nxt[i]
        if len(chain) == 1:
            out.append(chain[0])
        else:
            seq = Block("seq", sum(c.mask for c in chain), chain)
            _context(dag, seq)
            out.append(seq)
    return out


def _context(dag: Dag, blk: Block) -> None:
    """The outside readers of what the block reads from outside: whether they have run decides
    which outside tensors the block frees, hence its best inner order (the memo key)."""
    ctx = 0
    for v in bits(blk.mask):
        for p in dag.preds[v]:
            if not blk.mask >> p & 1:
                ctx |= dag.succ_mask[p]
        for e in dag.ext_of[v]:
            ctx |= dag.ext_mask[e]
    blk.context = ctx & ~blk.mask


# -- scheduling -------------------------------------------------------------------------------


class _Scheduler:
    """Runs blocks in context (memoising cells and sequences) and searches the top level."""

    def __init__(self, dag: Dag, limits: Limits, beam: int | None):
        self.dag, self.limits, self.beam = dag, limits, beam
        self._prune = None
        self.memo = {}
        self.expand_of = {}  # block -> its children's expand function

    @property
    def prune(self):
        """Under a budget, drop states bound to exceed it: that frees beam places (nasnet-120-s1 missed its optimum
        without); only the 4 ops of largest bound are checked -- the full check made wide flat graphs 2-3x slower.
        Built on first use (under the limits): a long chain never searches."""
        if self._prune is None and self.dag.n:
            self._prune = self.dag.pruner(top=4, limits=self.limits)
        return self._prune

    def expand(self, blk: Block, done: int, m: int):
        """Run a block after ``done``: (ops, peak of its steps, bytes live after, done after)."""
        if blk.kind == "op":
            during, after = self.dag.step(done, m, blk.op)
            return (blk.op,), during, after, done | blk.mask
        key = (blk, done & blk.context, not done)  # the block itself, not id(): a freed block's id can be reused
        hit = self.memo.get(key)
        if hit is None:  # a sequence's order is fixed; a cell's is searched -- both memoised per context
            if blk.kind == "cell":
                ops, peak, after = self._inside(blk, done, m)
            else:
                ops, peak, after, _ = run_items(range(len(blk.children)), self._child_expand(blk), done, m)
            hit = self.memo[key] = (ops, peak - m, after - m)
        ops, dpeak, dafter = hit
        return ops, m + dpeak, m + dafter, done | blk.mask

    def _inside(self, blk: Block, done: int, m: int):
        """Best inner order of a cell: the DP over its children, from their topological order."""
        if blk.preds is None:
            blk.preds = _child_preds(self.dag, blk.children)
        expand = self._child_expand(blk)
        floor = max(self.dag.bounds()[v][0] for v in bits(blk.mask))
        seq, _ = min_order(blk.preds, expand, done, m, _topo(blk.preds), floor, self.limits, self.beam)
        ops, peak, after, _ = run_items(seq, expand, done, m)
        return ops, peak, after

    def _child_expand(self, blk: Block):
        """expand(i, done, m) over the block's children; single ops go straight to Dag.step."""
        if blk.kind != "root":  # a root's children change between rounds; others' never do
            cached = self.expand_of.get(blk)
            if cached is None:
                cached = self.expand_of[blk] = self._make_expand(blk)
            return cached
        return self._make_expand(blk)

    def _make_expand(self, blk: Block):
        step, expand = self.dag.step, self.expand

        def one(c):
            if c.kind != "op":
                return lambda done, m: expand(c, done, m)
            v, ops, bit = c.op, (c.op,), c.mask
            return lambda done, m: (ops, *step(done, m, v), done | bit)

        calls = [one(c) for c in blk.children]
        return lambda i, done, m: calls[i](done, m)

    def top(self, root: Block, done: int, m: int, budget: int):
        """The best order of the root's children run after ``done``, under ``budget`` (strict):
        (ops, peak) or None."""
        root.preds = _child_preds(self.dag, root.children)
        expand = self._child_expand(root)
        found = search(root.preds, expand, done, m, budget, self.limits, self.beam, self.prune)
        if found is None:
            return None
        return run_items(found[0], expand, done, m)[:2]


def _topo(preds: list[int]) -> list[int]:
    """A valid item order (the incumbent of a cell's inner search)."""
    order, done = [], 0
    left = list(range(len(preds)))
    while left:
        i = next(i for i in left if not preds[i] & ~done)
        left.remove(i)
        order.append(i)
        done |= 1 << i
    return order


def peak_ops(dag: Dag, done: int, seq: list[int]) -> set[int]:
    """Ops that hold the peak of ``seq`` run after ``done`` (HMCOS: the groups holding the values
    live at the peak are ungrouped): the op running at a peak step, the producers of the tensors
    live there, and their readers and the peak op's (running a reader earlier frees a tensor
    sooner, running a producer later allocates it later). Why not wider: adding the chains that
    feed the producers and the readers of graph inputs ungrouped unet and nasnet graphs almost
    flat, doubling their states for no lower peak on any generated graph."""
    m, steps = dag.mem(done), []
    for v in seq:
        during, m = dag.step(done, m, v)
        done |= 1 << v
        steps.append((during, v, done))
    top = max(s[0] for s in steps)
    out = set()
    for during, v, after in steps:
        if during != top:
            continue
        out.add(v)
        out.update(dag.succs[v])
        before = after & ~(1 << v)
        for u in bits(before):  # outputs live through v's step
            if u in dag.outputs or dag.succ_mask[u] & ~before:
                out.add(u)
                out.update(dag.succs[u])
    return out


def ungroup(root: Block, ops: set[int]) -> bool:
    """Dissolve every block on the way from the root to the given ops: their children move up
    to the root's level. Returns whether anything was dissolved."""
    marked = set()
    stack = list(root.children)
    while stack:
        blk = stack.pop()
        if blk.kind != "op" and any(blk.mask >> v & 1 for v in ops):
            marked.add(id(blk))
            stack.extend(blk.children)
    if not marked:
        return False

    def flat(blk):
        return [x for c in blk.children for x in (flat(c) if id(c) in marked else [c])]

    root.children = flat(root)
    return True


def widen(root: Block) -> bool:
    """Dissolve every block at the root's level by one level (when ungrouping at the peak did not
    help, the obstacle is elsewhere). Returns whether anything was dissolved."""
    if all(c.kind == "op" for c in root.children):
        return False
    root.children = [x for c in root.children for x in (c.children if c.kind != "op" else [c])]
    return True


def _rounds(sched: _Scheduler, root: Block, done: int, m: int, incumbent: list[int], floor: int, patience: int):
    """HMCOS's loop on one segment: search the hierarchy under the best peak so far; after each
    improvement ungroup the blocks that hold the peak (if none does, dissolve one level of every
    block); stop at the first search that finds nothing better (or ``patience`` more, widening).
    Returns (ops, peak, rounds, complete); on a time or state limit, the best so far."""
    dag = sched.dag
    best, best_peak = incumbent, dag.run(done, m, incumbent)[0]
    budget, stale, rounds = None, 0, 0
    try:
        while best_peak > floor:
            rounds += 1
            result = sched.top(root, done, m, budget if budget is not None else 1 << 62)
            if result is not None:  # improved: ungroup what holds the new peak (or else widen)
                found, budget = result
                if budget < best_peak:
                    best, best_peak = found, budget
                if budget <= floor or not (ungroup(root, peak_ops(dag, done, found)) or widen(root)):
                    break
                continue
            stale += 1  # nothing under the budget in this hierarchy
            if stale > patience or not widen(root):
                break
    except OutOfBudget:
        return best, best_peak, rounds, False
    return best, best_peak, rounds, True


def _segment_contexts(dag: Dag, segs, best: list[int], limits: Limits):
    """Per segment its ops in ``best``'s order, the (ops done, bytes live) it starts from (only where it has a
    choice: one mask of every op per segment is quadratic on a long chain), and its peak in that order."""
    pos = {v: s for s, v in enumerate(best)}
    chosen, context, peaks, done, m = [], {}, [], 0, dag.mem(0)
    for k, seg in enumerate(segs):
        limits.tick(k)
        chosen.append(sorted(seg, key=pos.get))
        if len(seg) > 1:
            context[k] = (done, m)
        peak, m, done = dag.run(done, m, chosen[k])
        peaks.append(peak)
    return chosen, context, peaks


def schedule(dag: Dag, time_limit: float | None = 30.0, max_states: int | None = None, patience: int = 0, beam: int | None = 1024):
    """(order, peak, info). Split at single-node cuts like the exact scheduler; each segment
    starts from the better of the file order and RPO, so the result is never above either.
    ``beam``: states kept per search layer (None: exhaustive, exact within the hierarchy);
    ``patience``: fruitless searches tolerated, each after dissolving one more level everywhere;
    on ``time_limit`` or ``max_states`` it returns the best so far (``info["complete"]`` False)."""
    start = time.perf_counter()
    limits = Limits(time_limit, max_states)
    sched = _Scheduler(dag, limits, beam)
    best = min([rpo_order(dag), file_or_topo(dag)], key=dag.peak)
    chosen, segs, rounds, complete = [best], [], 0, True  # on a limit before the segments are known: the best order
    try:
        segs = segments(dag, limits)
        chosen, context, seg_peaks = _segment_contexts(dag, segs, best, limits)
        work = [k for k in range(len(segs)) if len(segs[k]) > 1]
        floor = dag.lower_bound(limits) if work else 0
        regions = None
        for k in sorted(work, key=lambda k: -seg_peaks[k]):  # the highest first: it raises the floor
            if seg_peaks[k] <= floor:
                continue
            regions = cells(dag, limits) if regions is None else regions
            root = build(dag, sum(1 << v for v in segs[k]), regions, limits)
            chosen[k], peak, r, complete = _rounds(sched, root, *context[k], chosen[k], floor, patience)
            floor, rounds = max(floor, peak), rounds + r
            if not complete:
                break
    except OutOfBudget:
        complete = False
    order = [v for seg in chosen for v in seg]
    info = {"scheduler": "hierarchical", "rounds": rounds, "complete": complete, "states": limits.states,
            "memo": len(sched.memo), "segments": len(segs), "seconds": time.perf_counter() - start}  # fmt: skip
    return order, dag.peak(order), info
