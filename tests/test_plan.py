"""The arena planner against independent oracles: a brute-force optimum over all aligned offsets, the
lower bound, hand-computed TFLM results, TFLM's recorded head sizes, and the separately written checker
(itself tested against hand-made and corrupted bad plans)."""

from __future__ import annotations

import random
from dataclasses import replace
from pathlib import Path

import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st

from edgemem.errors import EdgememError
from edgemem.plan import ALGORITHMS, ArenaPlan, Buffer, Placement, PlanError, Pool, check_plan, lower_bound, plan_arena
from edgemem.plan.exact import exact_search
from edgemem.plan.greedy import greedy_by_size, greedy_by_size_stable
from edgemem.plan.hill_climb import hill_climb

MODELS = Path(__file__).resolve().parents[2] / "shared" / "models"


def _padded(b: Buffer) -> int:
    return -(-b.size // b.align) * b.align


def _end(buffers: list[Buffer], offsets: dict[str, int]) -> int:
    return max((offsets[b.name] + _padded(b) for b in buffers), default=0)


@st.composite
def buffer_sets(draw, max_buffers=14, max_steps=10, max_units=8, mixed_align=True):
    """Buffers with random lifetimes; sizes a few alignment units, minus a random remainder."""
    n = draw(st.integers(1, max_buffers))
    same = draw(st.sampled_from([1, 4, 16]))
    out = []
    for i in range(n):
        align = draw(st.sampled_from([1, 2, 4, 8])) if mixed_align and draw(st.booleans()) else same
        first = draw(st.integers(0, max_steps - 1))
        last = draw(st.integers(first, max_steps - 1))
        size = draw(st.integers(1, max_units)) * align - draw(st.integers(0, align - 1))
        heat = draw(st.sampled_from([0.0, 1.0, 5.0, 20.0]))
        out.append(Buffer(f"t{i}", size, first, last, align, heat))
    return out


def brute_force_arena(buffers: list[Buffer]) -> int:
    """Smallest arena over every assignment of aligned offsets (tiny instances only): backtracking that
    tries every offset below the best arena so far, pruning only invalid or already-worse branches."""
    padded = [_padded(b) for b in buffers]
    n = len(buffers)
    live_together = [[not (a.last < b.first or b.last < a.first) for b in buffers] for a in buffers]
    best = sum(padded)
    offs = [0] * n

    def visit(i: int, top: int) -> None:
        nonlocal best
        if top >= best:
            return
        if i == n:
            best = top
            return
        for o in range(0, best - padded[i] + 1, buffers[i].align):
            if all(not live_together[i][j] or o + padded[i] <= offs[j] or offs[j] + padded[j] <= o for j in range(i)):
                offs[i] = o
                visit(i + 1, max(top, o + padded[i]))

    visit(0, 0)
    return best


# ---------------------------------------------------------------- every algorithm, random buffer sets


@settings(max_examples=150, deadline=None)
@given(buffer_sets())
def test_every_algorithm_gives_a_valid_plan_never_below_the_bound(buffers):
    bound = lower_bound(buffers)
    for name in ALGORITHMS:
        plan = plan_arena(buffers, algorithms=[name])
        check_plan(buffers, plan)
        assert plan.total_bytes >= bound, f"{name} beat the lower bound: a bug"
        assert set(plan.pool_sizes) == {"arena"}
        offsets = ALGORITHMS[name](buffers)  # the raw place(buffers) interface
        assert set(offsets) == {b.name for b in buffers}
        assert all(offsets[b.name] % b.align == 0 for b in buffers)


@settings(max_examples=40, deadline=None)
@given(buffer_sets(max_buffers=30, max_steps=20, max_units=12))
def test_plan_arena_takes_the_best_it_tried_and_is_deterministic(buffers):
    plan = plan_arena(buffers)
    check_plan(buffers, plan)
    assert plan.total_bytes == min(plan.tried.values()) == plan.tried[plan.algorithm]
    assert plan.total_bytes <= plan_arena(buffers, algorithms=["greedy_by_size"]).total_bytes
    again = plan_arena(buffers)
    assert again.placements == plan.placements and again.algorithm == plan.algorithm


@settings(max_examples=60, deadline=None)
@given(buffer_sets(max_buffers=30, max_steps=15))
def test_hill_climb_never_worse_than_its_incumbent(buffers):
    start = greedy_by_size(buffers)
    climbed = hill_climb(buffers, start, work=100_000)
    assert _end(buffers, climbed) <= _end(buffers, start)
    assert climbed == hill_climb(buffers, start, work=100_000)  # seeded: same input, same plan


@settings(max_examples=200, deadline=None)
@given(buffer_sets(max_buffers=5, max_steps=5, max_units=3))
def test_exact_equals_brute_force(buffers):
    offsets, optimal = exact_search(buffers)
    assert optimal
    assert _end(buffers, offsets) == brute_force_arena(buffers)
    plan = plan_arena(buffers, algorithms=["exact"])
    check_plan(buffers, plan)
    assert plan.total_bytes == brute_force_arena(buffers)


def test_exact_finds_an_optimum_above_the_lower_bound():
    """A set found by random search where no placement reaches the lower bound (38): the optimum is 39."""
    spec = [(4, 5, 8), (8, 1, 7), (2, 2, 8), (4, 6, 6), (9, 1, 8), (8, 6, 7), (3, 3, 6), (10, 1, 5), (10, 8, 8),
            (6, 2, 3), (6, 7, 8), (1, 8, 8)]  # fmt: skip
    bufs = [Buffer(f"b{i}", s, f, la, 1) for i, (s, f, la) in enumerate(spec)]
    assert lower_bound(bufs) == 38
    offsets, optimal = exact_search(bufs)
    assert optimal and _end(bufs, offsets) == 39
    plan = plan_arena(bufs)
    check_plan(bufs, plan)
    assert plan.total_bytes == 39


def test_lower_bound_by_hand():
    bufs = [Buffer("a", 10, 0, 1, 4), Buffer("b", 8, 1, 2, 4), Buffer("c", 4, 2, 2, 4)]
    assert lower_bound(bufs) == 12 + 8  # step 1: a (12 padded) + b (8); step 2: b + c = 12
    assert lower_bound([]) == 0


def test_empty_and_single_buffer():
    assert plan_arena([]).total_bytes == 0
    plan = plan_arena([Buffer("x", 5, 3, 3, 8)])
    assert plan.placements == {"x": Placement("arena", 0)} and plan.pool_sizes == {"arena": 8}


def test_bad_inputs_are_refused():
    with pytest.raises(ValueError, match="size"):
        Buffer("x", 0, 0, 0)
    with pytest.raises(ValueError, match="first step"):
        Buffer("x", 4, 3, 2)
    with pytest.raises(ValueError, match="power of two"):
        Buffer("x", 4, 0, 0, 12)
    with pytest.raises(ValueError, match="unique"):
        plan_arena([Buffer("x", 4, 0, 0), Buffer("x", 4, 1, 1)])
    with pytest.raises(ValueError, match="unknown placement"):
        plan_arena([Buffer("x", 4, 0, 0)], algorithms=["magic"])
    assert issubclass(PlanError, EdgememError)


def test_many_buffers_plan_and_check():
    """~200 tensors of a branchy graph: planned (well under a second here; no timing assertion) and valid."""
    rng = random.Random(0)
    bufs = []
    for i in range(200):
        first = rng.randrange(200)
        last = min(199, first + rng.choice([0, 1, 1, 2, 3, 5, 20]))
        bufs.append(Buffer(f"t{i}", rng.choice([1, 2, 4, 8, 16, 32]) * rng.randrange(100, 2000), first, last, 16))
    plan = plan_arena(bufs)
    check_plan(bufs, plan)
    assert plan.lower_bound <= plan.total_bytes <= 1.05 * plan.lower_bound
    assert plan_arena(bufs).placements == plan.placements


# ---------------------------------------------------------------- the checker


def _plan(placements, sizes):
    return ArenaPlan({k: Placement(*v) for k, v in placements.items()}, sizes, 0, "hand")


def test_checker_rejects_bad_plans():
    a, b = Buffer("a", 16, 0, 1, 16), Buffer("b", 16, 1, 2, 16)
    check_plan([a, b], _plan({"a": ("p", 0), "b": ("p", 16)}, {"p": 32}))
    check_plan([a, b], _plan({"a": ("p", 0), "b": ("q", 0)}, {"p": 16, "q": 16}))  # two pools: no clash
    with pytest.raises(PlanError, match="overlap"):
        check_plan([a, b], _plan({"a": ("p", 0), "b": ("p", 0)}, {"p": 32}))
    a8, b8 = replace(a, align=8), replace(b, align=8)
    with pytest.raises(PlanError, match="overlap"):  # partly
        check_plan([a8, b8], _plan({"a": ("p", 8), "b": ("p", 0)}, {"p": 32}))
    with pytest.raises(PlanError, match="aligned"):
        check_plan([a, b], _plan({"a": ("p", 0), "b": ("p", 20)}, {"p": 48}))
    with pytest.raises(PlanError, match="aligned"):
        check_plan([a, b], _plan({"a": ("p", -16), "b": ("p", 16)}, {"p": 32}))
    with pytest.raises(PlanError, match="beyond pool"):
        check_plan([a, b], _plan({"a": ("p", 0), "b": ("p", 16)}, {"p": 24}))
    with pytest.raises(PlanError, match="no size"):
        check_plan([a, b], _plan({"a": ("p", 0), "b": ("q", 16)}, {"p": 32}))
    with pytest.raises(PlanError, match="no placement"):
        check_plan([a, b], _plan({"a": ("p", 0)}, {"p": 32}))
    with pytest.raises(PlanError, match="unknown buffers"):
        check_plan([a], _plan({"a": ("p", 0), "b": ("p", 16)}, {"p": 32}))
    with pytest.raises(PlanError, match="capacity"):
        check_plan([a, b], _plan({"a": ("p", 0), "b": ("p", 16)}, {"p": 32}), [Pool("p", 16)])
    with pytest.raises(PlanError, match="not one of the pools"):
        check_plan([a, b], _plan({"a": ("p", 0), "b": ("q", 0)}, {"p": 16, "q": 16}), [Pool("p", 64)])


def test_checker_accepts_what_is_allowed():
    a, c = Buffer("a", 16, 0, 1, 16), Buffer("c", 16, 2, 3, 16)
    check_plan([a, c], _plan({"a": ("p", 0), "c": ("p", 0)}, {"p": 16}))  # not live together: may share bytes
    d, e = Buffer("d", 10, 0, 0, 16), Buffer("e", 10, 0, 0, 16)
    check_plan([d, e], _plan({"d": ("p", 0), "e": ("p", 16)}, {"p": 32}))  # padding between them


@settings(max_examples=100, deadline=None)
@given(buffer_sets(max_buffers=10), st.data())
def test_checker_catches_a_buffer_moved_onto_a_live_neighbour(buffers, data):
    plan = plan_arena(buffers)
    at = {name: p.offset for name, p in plan.placements.items()}
    pairs = [(a, b) for a in buffers for b in buffers
             if a is not b and a.first <= b.last and b.first <= a.last and at[b.name] % a.align == 0]  # fmt: skip
    assume(pairs)
    a, b = data.draw(st.sampled_from(pairs))
    moved = dict(plan.placements)
    moved[a.name] = plan.placements[b.name]
    bad = ArenaPlan(moved, {"arena": plan.total_bytes + 1024}, plan.lower_bound, "moved")
    with pytest.raises(PlanError, match="overlap"):
        check_plan(buffers, bad)


# ---------------------------------------------------------------- CNN-like chains and real models


def test_greedy_by_size_reproduces_tflm_on_a_chain():
    """t0 -> op0 -> t1 -> op1 -> t2 -> op2 -> t3: each op's input and output live together.

    t0 3 KiB [0,0], t1 2 KiB [0,1], t2 3 KiB [1,2], t3 3 KiB [2,3]; lower bound 6 KiB (t2 + t3 at step 2).
    TFLM sorts by size, equal sizes last-added first: t3, t2, t0, t1. t3 -> 0, t2 (live with t3) -> 3K,
    t0 -> 0, t1 (live with t0 at 0-3K and t2 at 3K-6K) -> 6K: 8 KiB. Equal sizes in insertion order
    (t0, t2, t3, t1): t0 -> 0, t2 -> 0, t3 -> 3K, t1 (live with t0 and t2, both at 0-3K) -> 3K: 6 KiB.
    """
    sizes = [3072, 2048, 3072, 3072]
    bufs = [Buffer(f"t{i}", s, max(i - 1, 0), i, 16) for i, s in enumerate(sizes)]
    assert lower_bound(bufs) == 6144
    assert greedy_by_size(bufs) == {"t0": 0, "t1": 6144, "t2": 3072, "t3": 0}
    assert greedy_by_size_stable(bufs) == {"t0": 0, "t1": 3072, "t2": 0, "t3": 3072}
    plan = plan_arena(bufs)
    check_plan(bufs, plan)
    assert plan.tried["greedy_by_size"] == 8192
    assert plan.total_bytes == plan.lower_bound == 6144 and plan.algorithm == "greedy_by_size_stable"


def test_cnn_chain_hits_the_bound():
    """A longer chain: the bound is the largest adjacent pair, and the planner reaches it."""
    sizes = [3072, 8192, 8192, 4096, 4096, 2048, 1024, 64]
    bufs = [Buffer(f"t{i}", s, max(i - 1, 0), i, 16) for i, s in enumerate(sizes)]
    plan = plan_arena(bufs)
    check_plan(bufs, plan)
    assert plan.total_bytes == lower_bound(bufs) == 16384


def _model_buffers(name: str) -> list[Buffer]:
    from edgemem.frontend.footprint import file_order_live_ranges
    from edgemem.frontend.tflite_import import read_tflite

    path = MODELS / f"{name}.tflite"
    if not path.is_file():
        pytest.skip(f"{path} is not here")
    return [Buffer(n, s, a, b, 4) for n, s, a, b in file_order_live_ranges(read_tflite(path))]


@pytest.mark.parametrize(
    "name, tflm_head, bound", [("mlperf_vww_96_int8", 73728, 55296), ("mlperf_kws_dscnn_int8", 16000, 16000)]
)
def test_greedy_by_size_reproduces_tflm_and_the_best_reaches_the_bound(name, tflm_head, bound):
    """TFLM's recorded head (anchors.md, measured with tflite_micro) is what its greedy planner gives."""
    bufs = _model_buffers(name)
    assert plan_arena(bufs, algorithms=["greedy_by_size"]).total_bytes == tflm_head
    plan = plan_arena(bufs)
    check_plan(bufs, plan)
    assert plan.total_bytes == plan.lower_bound == bound


# ---------------------------------------------------------------- pools


def test_everything_fits_the_fast_pool_uses_one_pool():
    bufs = [Buffer("a", 100, 0, 1, 4), Buffer("b", 100, 1, 2, 4)]
    pools = [Pool("sram", 1 << 20), Pool("dtcm", 1024, "fast"), Pool("itcm", 4096, "fast")]
    plan = plan_arena(bufs, pools)
    check_plan(bufs, plan, pools)
    assert set(plan.pool_sizes) == {"dtcm"} and plan.total_bytes == 200


def test_two_pools_split_when_the_fast_one_is_too_small():
    bufs = [Buffer("hot", 4000, 0, 2, 4, heat=10.0), Buffer("a", 30000, 0, 1, 4, heat=1.0),
            Buffer("b", 30000, 1, 2, 4, heat=1.0)]  # fmt: skip
    pools = [Pool("dtcm", 8192, "fast"), Pool("sram", 61000)]  # the whole 64,000 B arena fits neither
    plan = plan_arena(bufs, pools)
    check_plan(bufs, plan, pools)
    assert plan.placements["hot"].pool == "dtcm"
    assert {plan.placements["a"].pool, plan.placements["b"].pool} == {"sram"}
    assert plan.pool_sizes == {"dtcm": 4000, "sram": 60000}


def test_split_uses_both_pools_for_the_big_tensors():
    """Neither pool holds the 3 x 24 KiB peak; the hottest tensor goes to the fast pool first."""
    bufs = [Buffer(f"t{i}", 24576, max(i - 1, 0), i + 1, 16, heat=float(i)) for i in range(5)]
    pools = [Pool("sram", 50000), Pool("dtcm", 30000, "fast")]
    plan = plan_arena(bufs, pools)
    check_plan(bufs, plan, pools)
    assert set(plan.pool_sizes) == {"dtcm", "sram"} and plan.placements["t4"].pool == "dtcm"


def test_arena_in_the_slow_pool_hot_buffers_move_to_the_fast_one():
    """The arena fits only SRAM: SRAM keeps it (never grows) and DTCM takes the hottest tensors it holds."""
    bufs = [Buffer("in", 20000, 0, 0, 16, heat=1.0), Buffer("mid", 20000, 0, 1, 16, heat=1.0),
            Buffer("acc", 2000, 1, 2, 16, heat=50.0), Buffer("out", 10000, 1, 2, 16, heat=1.0)]  # fmt: skip
    pools = [Pool("dtcm", 4096, "fast"), Pool("sram", 1 << 20)]
    alone = plan_arena(bufs)
    plan = plan_arena(bufs, pools)
    check_plan(bufs, plan, pools)
    assert plan.placements["acc"].pool == "dtcm"
    assert plan.pool_sizes["sram"] <= alone.total_bytes


def test_impossible_sets_name_the_numbers():
    pools = [Pool("dtcm", 4096, "fast"), Pool("sram", 4096)]
    bufs = [Buffer("a", 5000, 0, 1, 4), Buffer("b", 5000, 1, 2, 4)]
    with pytest.raises(PlanError) as err:
        plan_arena(bufs, pools)
    msg = str(err.value)
    assert "10,000 bytes" in msg and "dtcm 4,096 B (fast), sram 4,096 B (8,192 B in all)" in msg
    assert "'a' alone needs 5,000 B" in msg
    # each tensor fits a pool, but three live together do not fit two pools of one tensor each
    bufs = [Buffer(f"t{i}", 3000, 0, 0, 4) for i in range(3)]
    with pytest.raises(PlanError) as err:
        plan_arena(bufs, pools)
    msg = str(err.value)
    assert "9,000 bytes" in msg and "lower bound 9,000 B" in msg and "(3,000 B, live with 6,000 B" in msg


@settings(max_examples=150, deadline=None)
@given(buffer_sets(max_buffers=12), st.lists(st.tuples(st.integers(0, 400), st.booleans()), min_size=1, max_size=3))
def test_random_pools_valid_plan_or_plan_error(buffers, specs):
    pools = [Pool(f"p{i}", cap, "fast" if fast else "normal") for i, (cap, fast) in enumerate(specs)]
    single = plan_arena(buffers).total_bytes
    try:
        plan = plan_arena(buffers, pools)
    except PlanError as e:
        assert max(p.capacity for p in pools) < single, "one pool could hold the whole arena"
        assert f"{single:,} bytes" in str(e)
        return
    check_plan(buffers, plan, pools)
    fitting_fast = [p for p in pools if p.speed == "fast" and p.capacity >= single]
    if fitting_fast:  # the whole arena in one fast pool
        assert len(plan.pool_sizes) == 1 and plan.total_bytes == single
        assert plan.pool_sizes.keys() <= {p.name for p in fitting_fast}


def test_inputs_are_left_alone():
    bufs = [Buffer("a", 64, 0, 1), Buffer("b", 64, 1, 2)]
    pools = [Pool("dtcm", 64, "fast"), Pool("sram", 1000)]
    before = (list(bufs), list(pools))
    plan_arena(bufs, pools)
    assert (bufs, pools) == before
