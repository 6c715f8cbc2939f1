"""The arena planner against independent oracles: a brute-force optimum over all offsets, the lower bound,
TFLM's recorded head sizes, and the separately written checker (and the checker against hand-made bad plans)."""

from __future__ import annotations

import itertools
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from edgemem.plan import ALGORITHMS, ArenaPlan, Buffer, Placement, PlanError, Pool, check_plan, lower_bound, plan_arena

MODELS = Path(__file__).resolve().parents[2] / "shared" / "models"


@st.composite
def buffer_sets(draw, max_buffers=12, max_steps=10, max_units=8):
    n = draw(st.integers(1, max_buffers))
    align = draw(st.sampled_from([1, 4, 16]))
    out = []
    for i in range(n):
        first = draw(st.integers(0, max_steps - 1))
        last = draw(st.integers(first, max_steps - 1))
        out.append(Buffer(f"t{i}", draw(st.integers(1, max_units)) * align - draw(st.integers(0, align - 1)), first, last, align))
    return out


def brute_force_arena(buffers: list[Buffer]) -> int:
    """Smallest arena over every assignment of aligned offsets (tiny instances only)."""
    padded = [-(-b.size // b.align) * b.align for b in buffers]
    limit = sum(padded)
    choices = [range(0, limit - p + 1, b.align) for b, p in zip(buffers, padded)]
    best = limit
    for offs in itertools.product(*choices):
        end = max(o + p for o, p in zip(offs, padded))
        if end >= best:
            continue
        ok = all(
            not (a.first <= b.last and b.first <= a.last) or offs[i] + padded[i] <= offs[j] or offs[j] + padded[j] <= offs[i]
            for (i, a), (j, b) in itertools.combinations(enumerate(buffers), 2)
        )
        if ok:
            best = end
    return best


@settings(max_examples=150, deadline=None)
@given(buffer_sets())
def test_every_algorithm_gives_a_valid_plan_never_below_the_bound(buffers):
    bound = lower_bound(buffers)
    for name in ALGORITHMS:
        plan = plan_arena(buffers, algorithms=[name])
        check_plan(buffers, plan)
        assert plan.total_bytes >= bound, f"{name} beat the lower bound: a bug"


@settings(max_examples=120, deadline=None)
@given(buffer_sets(max_buffers=4, max_steps=4, max_units=3))
def test_exact_equals_brute_force(buffers):
    plan = plan_arena(buffers, algorithms=["exact"], time_limit=10.0)
    check_plan(buffers, plan)
    assert plan.total_bytes == brute_force_arena(buffers)


def test_lower_bound_by_hand():
    bufs = [Buffer("a", 10, 0, 1, 4), Buffer("b", 8, 1, 2, 4), Buffer("c", 4, 2, 2, 4)]
    assert lower_bound(bufs) == 12 + 8  # step 1: a (12 padded) + b (8); step 2: b + c = 12


def _plan(placements, sizes):
    return ArenaPlan({k: Placement(*v) for k, v in placements.items()}, sizes, 0, "hand")


def test_checker_rejects_bad_plans():
    a, b = Buffer("a", 16, 0, 1, 16), Buffer("b", 16, 1, 2, 16)
    check_plan([a, b], _plan({"a": ("p", 0), "b": ("p", 16)}, {"p": 32}))
    with pytest.raises(PlanError, match="overlap"):
        check_plan([a, b], _plan({"a": ("p", 0), "b": ("p", 0)}, {"p": 32}))
    with pytest.raises(PlanError, match="aligned"):
        check_plan([a, b], _plan({"a": ("p", 0), "b": ("p", 20)}, {"p": 48}))
    with pytest.raises(PlanError, match="beyond pool"):
        check_plan([a, b], _plan({"a": ("p", 0), "b": ("p", 16)}, {"p": 24}))
    with pytest.raises(PlanError, match="no placement"):
        check_plan([a, b], _plan({"a": ("p", 0)}, {"p": 32}))
    with pytest.raises(PlanError, match="capacity"):
        check_plan([a, b], _plan({"a": ("p", 0), "b": ("p", 16)}, {"p": 32}), [Pool("p", 16)])
    # not live together: sharing bytes is fine
    c = Buffer("c", 16, 2, 3, 16)
    check_plan([a, c], _plan({"a": ("p", 0), "c": ("p", 0)}, {"p": 16}))


def test_cnn_chain_hits_the_bound():
    """A chain where each op's input and output live together: the bound is the largest adjacent pair."""
    sizes = [3072, 8192, 8192, 4096, 4096, 2048, 1024, 64]
    bufs = [Buffer(f"t{i}", s, max(i - 1, 0), i, 16) for i, s in enumerate(sizes)]
    plan = plan_arena(bufs)
    check_plan(bufs, plan)
    assert plan.total_bytes == lower_bound(bufs) == 16384


def test_two_pools_split_when_the_fast_one_is_too_small():
    bufs = [Buffer("hot", 4000, 0, 2, 4, heat=10.0), Buffer("a", 30000, 0, 1, 4, heat=1.0), Buffer("b", 30000, 1, 2, 4, heat=1.0)]
    pools = [Pool("dtcm", 8192, "fast"), Pool("sram", 65536)]
    plan = plan_arena(bufs, pools)
    check_plan(bufs, plan, pools)
    assert plan.placements["hot"].pool == "dtcm" and {plan.placements["a"].pool, plan.placements["b"].pool} == {"sram"}


def test_everything_fits_the_fast_pool_uses_one_pool():
    bufs = [Buffer("a", 100, 0, 1, 4), Buffer("b", 100, 1, 2, 4)]
    plan = plan_arena(bufs, [Pool("sram", 1 << 20), Pool("dtcm", 1024, "fast")])
    assert set(plan.pool_sizes) == {"dtcm"}


def test_impossible_sets_name_the_numbers():
    bufs = [Buffer("a", 5000, 0, 1, 4), Buffer("b", 5000, 1, 2, 4)]
    with pytest.raises(PlanError, match=r"5,000 B.*dtcm 4,096 B"):
        plan_arena(bufs, [Pool("dtcm", 4096, "fast"), Pool("sram", 4096)])


def _model_buffers(name: str) -> list[Buffer]:
    from edgemem.frontend.footprint import file_order_live_ranges
    from edgemem.frontend.tflite_import import _op_name, read_tflite

    path = MODELS / f"{name}.tflite"
    if not path.is_file():
        pytest.skip(f"{path} is not here")
    model = read_tflite(path)
    sg = model.Subgraphs(0)
    names = [_op_name(model, sg.Operators(i)) for i in range(sg.OperatorsLength())]
    return [Buffer(n, s, a, b, 4) for n, s, a, b in file_order_live_ranges(model, names)]


@pytest.mark.parametrize("name, tflm_head", [("mlperf_vww_96_int8", 73728), ("mlperf_kws_dscnn_int8", 16000)])
def test_greedy_by_size_reproduces_tflm_and_the_best_reaches_the_bound(name, tflm_head):
    """TFLM's recorded head (anchors.md, measured with tflite_micro) is what its greedy planner gives."""
    bufs = _model_buffers(name)
    assert plan_arena(bufs, algorithms=["greedy_by_size"]).total_bytes == tflm_head
    plan = plan_arena(bufs)
    check_plan(bufs, plan)
    assert plan.total_bytes == plan.lower_bound
