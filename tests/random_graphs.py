"""Seeded generators of irregular operator graphs, where operator order matters for memory.

Six families, sizes in bytes of int8 activations (H x W x C), 20..120 ops:
- ``randwire``: stages of randomly wired nodes (Watts-Strogatz graphs, as in RandWire);
- ``rwstage``: one wide randomly wired stage, nodes of similar size (the hard case);
- ``darts``: NAS cells (DARTS/NASNet search space) that read the two previous cells;
- ``nasnet``: the published NASNet-A and PNASNet-5 cells op by op as a .tflite holds them
  (a separable conv is four ops), the graphs of the HMCOS paper's evaluation;
- ``unet``: UNet++-like encoder-decoder with long and nested skips;
- ``inception``: blocks of parallel branches of different depth and width joined by a concat.
"""

from __future__ import annotations

import random

from edgemem.schedule.dag import Dag, aligned


class _Builder:
    """Ops appended in a topological order (so the index order is a valid "file order")."""

    def __init__(self, input_bytes: int):
        self.sizes, self.preds, self.names = [], [], []
        self.input_bytes = input_bytes
        self.first = []  # ops that read the graph input

    def op(self, name: str, nbytes: int, preds=()) -> int:
        self.sizes.append(aligned(max(int(nbytes), 1), 4))
        self.preds.append(sorted(set(preds)))
        self.names.append(name)
        return len(self.sizes) - 1

    def dag(self, outputs) -> Dag:
        inputs = [(aligned(self.input_bytes, 4), self.first)]
        return Dag(self.sizes, self.preds, None, set(outputs), inputs, 0, self.names)


def _ws_edges(rng: random.Random, n: int, k: int, p: float) -> list[tuple[int, int]]:
    """Watts-Strogatz: a ring where each node links to its k/2 neighbours on each side, each link
    rewired with probability p; oriented from the lower to the higher index (a DAG)."""
    edges = set()
    for i in range(n):
        for j in range(1, k // 2 + 1):
            a, b = i, (i + j) % n
            if rng.random() < p:
                choices = [c for c in range(n) if c != a and (min(a, c), max(a, c)) not in edges]
                if choices:
                    b = rng.choice(choices)
            edges.add((min(a, b), max(a, b)))
    return sorted(edges)


def randwire(seed: int, ops: int = 40) -> Dag:
    """RandWire-like: stages of 16-40 Watts-Strogatz-wired nodes (WS(4, 0.75); each node reads all
    its predecessors); a node with no predecessor in its stage reads the stage input, the stage
    output averages the sinks, and a stride-2 op between stages halves H and W."""
    rng = random.Random(seed)
    hw, ch = 24, 8
    b = _Builder(hw * hw * 3)
    prev = b.op("stem", hw * hw * ch)
    b.first.append(prev)
    stage = 0
    while ops - len(b.sizes) - 3 >= 3:  # a stage: n nodes, its output and the stride-2 op; then the head
        n = min(rng.randint(16, 40), ops - len(b.sizes) - 3)
        edges = _ws_edges(rng, n, 4, 0.75)
        nodes = []
        for i in range(n):
            ins = [nodes[a] for a, c in edges if c == i] or [prev]
            width = max(2, int(ch * rng.choice([0.5, 1, 1, 2, 3])))
            nodes.append(b.op(f"s{stage}n{i}", hw * hw * width, ins))
        sinks = [nodes[i] for i in range(n) if not any(a == i for a, _ in edges)]
        out = b.op(f"s{stage}out", hw * hw * ch, sinks)
        stage += 1
        hw, ch = max(hw // 2, 3), ch * rng.choice([2, 4])  # H, W halved; C x2 or x4
        prev = b.op(f"s{stage}down", hw * hw * ch, [out])
    last = b.op("head", 10 * 4, [prev])
    return b.dag([last])


def rwstage(seed: int, ops: int = 40) -> Dag:
    """One wide RandWire stage (all ops but stem, output and head are WS(4, 0.75) nodes at the
    same H x W): no cut splits it and no node dominates the memory, the hard case for exact search."""
    rng = random.Random(seed)
    hw, ch = 16, 8
    b = _Builder(hw * hw * 3)
    stem = b.op("stem", hw * hw * ch)
    b.first.append(stem)
    n = max(ops - 3, 3)
    edges = _ws_edges(rng, n, 4, 0.75)
    nodes = []
    for i in range(n):
        ins = [nodes[a] for a, c in edges if c == i] or [stem]
        nodes.append(b.op(f"n{i}", hw * hw * max(2, int(ch * rng.choice([0.5, 1, 1, 2, 3]))), ins))
    out = b.op("out", hw * hw * ch, [nodes[i] for i in range(n) if not any(a == i for a, _ in edges)])
    return b.dag([b.op("head", 10 * 4, [out])])


def darts(seed: int, ops: int = 40) -> Dag:
    """DARTS/NASNet-like cells: each cell reads the two previous cells (so no single op cuts the
    graph), preprocesses both, builds up to 4 nodes as the sum of two ops on earlier nodes, and
    concatenates them; every third cell is a reduction (H, W halved, C doubled)."""
    rng = random.Random(seed)
    hw, ch = 16, 8
    b = _Builder(hw * hw * 3)
    stem = b.op("stem", hw * hw * ch * 2)
    b.first.append(stem)
    prev2, prev1, cell = stem, stem, 0
    for nodes in _cell_plan(ops - 2):
        reduce = cell % 3 == 2
        out_hw = max(hw // 2, 2) if reduce else hw
        out_ch = ch * 2 if reduce else ch
        act = out_hw * out_hw * out_ch
        states = [b.op(f"c{cell}pre0", act, [prev2]), b.op(f"c{cell}pre1", act, [prev1])]
        for node in range(nodes):
            branches = []
            for k, src in enumerate(rng.sample(range(len(states)), 2)):
                width = rng.choice([1, 1, 1, 2, 4])  # a sep-conv's inner expansion or a plain op
                branches.append(b.op(f"c{cell}n{node}op{k}", act * width // 2 + act // 2, [states[src]]))
            states.append(b.op(f"c{cell}n{node}add", act, branches))
        prev2, prev1 = prev1, b.op(f"c{cell}cat", act * nodes, states[2:])
        hw, ch, cell = out_hw, out_ch, cell + 1
    last = b.op("head", 10 * 4, [prev1])
    return b.dag([last])


def _cell_plan(room: int) -> list[int]:
    """Node counts (1..4) of cells of 3k + 3 ops filling ``room`` ops: the largest k that leaves
    either nothing usable (< 3) or room for another cell (>= 6)."""
    plan = []
    while room >= 6:
        k = next(k for k in range(min(4, room // 3 - 1), 0, -1) if not 3 <= room - 3 * k - 3 < 6 or k == 1)
        plan.append(k)
        room -= 3 * k + 3
    return plan


def unet(seed: int, ops: int = 40) -> Dag:
    """UNet++-like: node X[i][j] (level i, column j) convolves the concat of some earlier nodes of
    its level (always X[i][j-1]) and the upsampled X[i+1][j-1]; X[i][0] is the encoder; ops left
    over become second convs on random nodes. Long skips keep tensors live across the middle;
    columns can run in many orders."""
    rng = random.Random(seed)
    count = lambda d: (d + 1) + 3 * d * (d + 1) // 2 + 1  # noqa: E731  (encoder, up+cat+conv per node, head)
    depth = 3
    while depth < 7 and count(depth + 1) <= ops:
        depth += 1
    cells = [(i, j) for j in range(depth + 1) for i in range(depth + 1 - j)]
    twice = set(rng.sample(cells, min(len(cells), max(ops - count(depth), 0))))
    hw, ch = 32, 4
    b = _Builder(hw * hw * 1)
    size = [hw * hw * ch >> i for i in range(depth + 1)]  # H/2 and C*2 per level: half the bytes

    def conv(i, j, preds):
        node = b.op(f"x{i}{j}", size[i] * rng.choice([1, 1, 2]), preds)
        return b.op(f"x{i}{j}b", size[i], [node]) if (i, j) in twice else node

    x = {}
    for i in range(depth + 1):
        x[i, 0] = conv(i, 0, [x[i - 1, 0]] if i else [])
        if not i:
            b.first.append(0)
    for j in range(1, depth + 1):
        for i in range(depth + 1 - j):
            up = b.op(f"up{i}{j}", size[i], [x[i + 1, j - 1]])
            same = [x[i, k] for k in range(j - 1) if rng.random() < 0.5] + [x[i, j - 1]]
            cat = b.op(f"cat{i}{j}", size[i] * (len(same) + 1), same + [up])
            x[i, j] = conv(i, j, [cat])
    last = b.op("head", size[0] // 2, [x[0, depth]])
    return b.dag([last])


def inception(seed: int, ops: int = 40) -> Dag:
    """Blocks of 2-5 branches (1-3 ops of varied width each) from the block input to a concat,
    sometimes with a residual add of the block input (Inception-ResNet) or a reduction after."""
    rng = random.Random(seed)
    hw, ch = 16, 16
    b = _Builder(hw * hw * 3)
    prev = b.op("stem", hw * hw * ch)
    b.first.append(prev)
    block = 0
    while ops - len(b.sizes) - 2 >= 2:  # room for two branch ops, the concat and the head
        room = ops - len(b.sizes) - 2
        ends, total = [], 0
        for br in range(rng.randint(2, 5)):
            depth = min(rng.randint(1, 3), room - (len(ends) < 1))
            if depth < 1:
                break
            room -= depth
            node, width = prev, ch
            for d in range(depth):
                width = max(2, int(ch * rng.choice([0.25, 0.5, 1, 1.5, 3])))
                node = b.op(f"b{block}br{br}op{d}", hw * hw * width, [node])
            ends.append(node)
            total += width
        out = b.op(f"b{block}cat", hw * hw * total, ends)
        if room >= 2 and rng.random() < 0.5:  # residual: project back to the block's width, add the input
            proj = b.op(f"b{block}proj", hw * hw * ch, [out])
            out = b.op(f"b{block}add", hw * hw * ch, [prev, proj])
            room -= 2
        prev, block = out, block + 1
        if room >= 1 and rng.random() < 0.3 and hw > 4:
            hw, ch = hw // 2, ch * 2
            prev = b.op(f"b{block}reduce", hw * hw * ch, [prev])
    last = b.op("head", 10 * 4, [prev])
    return b.dag([last])


# NAS cells as (operations, used hidden states, hidden state indices), the configuration format of
# the published TF-slim models: combination k applies operations[2k] and [2k+1] to the hidden states
# indices[2k] and [2k+1] (0: the cell before the previous one, 1: the previous one, 2..: earlier
# combinations) and adds them; the cell concatenates the hidden states not used by any combination.
NASNET_A = (
    ("sep5", "sep3", "sep5", "sep3", "avg", "none", "avg", "avg", "sep3", "none"),
    (1, 0, 0, 0, 0, 0, 0),
    (0, 1, 1, 1, 0, 1, 1, 1, 0, 0),
)
NASNET_A_REDUCTION = (
    ("sep5", "sep7", "max", "sep7", "avg", "sep5", "none", "avg", "sep3", "max"),
    (1, 1, 1, 0, 0, 0, 0),
    (0, 1, 0, 1, 0, 1, 3, 2, 2, 0),
)
PNASNET_5 = (
    ("sep5", "max", "sep7", "max", "sep5", "sep3", "sep3", "max", "sep3", "none"),
    (1, 1, 0, 0, 0, 0, 0),
    (1, 1, 0, 0, 0, 0, 4, 0, 1, 0),
)


def nasnet(seed: int, ops: int = 40) -> Dag:
    """NASNet-A (even seeds) or PNASNet-5 (odd seeds) cells, op by op: each cell adjusts its two
    inputs (the two previous cells) with a 1x1 conv, runs five combinations of two operations
    (a separable conv is depthwise, pointwise, depthwise, pointwise; a pool is one op; "none" is the
    input itself) each summed by an add, and concatenates the unused states; every third cell
    reduces (stride 2 where it reads a cell input, filters doubled). The cell that meets the op
    budget keeps its first combinations, the last cut short. The seed also picks the filters (2..6 per 16 x 16)."""
    rng = random.Random(seed)
    normal = NASNET_A if seed % 2 == 0 else PNASNET_5
    hw, f = 16, rng.randint(2, 6)
    b = _Builder(hw * hw * 3)
    stem = b.op("stem", hw * hw * f * 3)
    b.first.append(stem)
    prev2 = prev1 = stem
    cell = 0
    while ops - len(b.sizes) >= 6:  # room for the two adjusts, a combination, the concat and the head
        reduce = cell % 3 == 2 and normal is NASNET_A
        kinds, used, index = NASNET_A_REDUCTION if reduce else normal
        out_hw, out_f = (hw // 2, f * 2) if reduce else (hw, f)
        act = out_hw * out_hw * out_f
        states = [b.op(f"c{cell}adj0", hw * hw * f, [prev2]), b.op(f"c{cell}adj1", hw * hw * f, [prev1])]
        combos = 0
        for k in range(5):
            room = ops - len(b.sizes) - 3  # the add, the concat and the head follow
            if room < 0:
                break
            branches = []
            for side in (0, 1):
                kind, src = kinds[2 * k + side], index[2 * k + side]
                count = _NAS_OPS[kind] or int(reduce and src < 2)  # "none" on a cell input of a reduction: a strided 1x1
                count = min(count, room)  # the op budget's last combination: its convs cut short
                room -= count
                node = states[src]
                for step in range(count):
                    node = b.op(f"c{cell}k{k}{kind}{side}.{step}", act, [node])
                branches.append(node)
            states.append(b.op(f"c{cell}k{k}add", act, branches))
            combos += 1
        read = set(index[: 2 * combos])  # a cell cut short: a state only later combinations would read is concatenated
        unused = [s for i, s in enumerate(states) if not used[i] or i not in read]
        prev2, prev1 = prev1, b.op(f"c{cell}cat", sum(b.sizes[s] for s in unused), unused)
        hw, f, cell = out_hw, out_f, cell + 1
    last = b.op("head", 10 * 4, [prev1])
    return b.dag([last])


_NAS_OPS = {"sep3": 4, "sep5": 4, "sep7": 4, "avg": 1, "max": 1, "none": 0}

FAMILIES = {"randwire": randwire, "rwstage": rwstage, "darts": darts, "nasnet": nasnet, "unet": unet, "inception": inception}


def generate(family: str, seed: int, ops: int = 40) -> Dag:
    """A graph of the family with about ``ops`` ops (20..120), the same for the same seed."""
    return FAMILIES[family](seed, ops)


def suite(sizes=(24, 40, 64, 96), seeds=(0, 1, 2)):
    """(name, Dag) for every family, target op count and seed."""
    return [(f"{fam}-{n}-s{seed}", generate(fam, seed, n)) for fam in FAMILIES for n in sizes for seed in seeds]
