"""Operator schedulers: the Dag's memory model against liveness.py, exact against brute force,
every scheduler's order valid with the peak it reports, hierarchical against exact and RPO."""

from __future__ import annotations

import random

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from edgemem.ir.graph import Op, OpGraph, Tensor
from edgemem.schedule import exact, hierarchical, rpo
from edgemem.schedule import file_order
from edgemem.schedule.best import best_schedule, schedule_graph
from edgemem.schedule.dag import Dag
from edgemem.schedule.exact import file_or_topo, segments
from edgemem.schedule.liveness import peak_bytes
from random_graphs import FAMILIES, generate, suite

from shared_models import MODELS, model_path

# models the TVM pipeline reads in about a second (others take minutes or are not supported yet)
FAST_MODELS = [
    "mlperf_kws_dscnn_int8", "mlperf_vww_96_int8", "mlperf_sww_int8", "mlperf_ad_fc_autoencoder_int8",
    "tflm_micro_speech_int8", "tflm_hello_world_int8",
]  # fmt: skip


# -- random small Dags ------------------------------------------------------------------------


@st.composite
def small_dags(draw, max_ops: int = 8) -> Dag:
    n = draw(st.integers(1, max_ops))
    density = draw(st.sampled_from([0.2, 0.4, 0.7]))
    return random_dag(random.Random(draw(st.integers(0, 2**32 - 1))), n, density)


def random_dag(rnd: random.Random, n: int, density: float) -> Dag:
    preds = [[p for p in range(v) if rnd.random() < density] for v in range(n)]
    sizes = [rnd.choice([0, 4, 8, 12, 32, 64]) for _ in range(n)]
    own = [rnd.choice([0, 0, 0, 16]) for _ in range(n)]
    outputs = {v for v in range(n) if rnd.random() < 0.2}
    shared = [(rnd.choice([4, 24]), [v for v in range(n) if rnd.random() < 0.4]) for _ in range(rnd.choice([0, 0, 1, 2]))]
    return Dag(sizes, preds, own, outputs, shared, rnd.choice([0, 0, 8]))


def topo_orders(dag: Dag):
    """Every valid order (for brute force)."""
    seq = []

    def rec(done):
        if len(seq) == dag.n:
            yield list(seq)
            return
        for v in range(dag.n):
            if not done >> v & 1 and not dag.pred_mask[v] & ~done:
                seq.append(v)
                yield from rec(done | (1 << v))
                seq.pop()

    yield from rec(0)


def random_order(dag: Dag, rnd: random.Random) -> list[int]:
    done, order = 0, []
    while len(order) < dag.n:
        v = rnd.choice([v for v in range(dag.n) if not done >> v & 1 and not dag.pred_mask[v] & ~done])
        order.append(v)
        done |= 1 << v
    return order


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(small_dags())
def test_exact_equals_brute_force(dag):
    best = min(dag.peak(o) for o in topo_orders(dag))
    for plain in (False, True):  # edgemem's DP and the plain Serenity DP (the benchmark's baseline)
        order, peak, info = exact.schedule(dag, plain=plain)
        assert info["optimal"]
        assert dag.is_order(order) and dag.peak(order) == peak == best


@settings(max_examples=150, deadline=None)
@given(small_dags(max_ops=12), st.integers(0, 1000))
def test_incremental_model_equals_live_ranges(dag, seed):
    order = random_order(dag, random.Random(seed))
    assert dag.run(0, dag.mem(0), order)[0] == dag.peak(order)


@settings(max_examples=150, deadline=None)
@given(small_dags(max_ops=12), st.integers(0, 1000))
def test_lower_bound_holds(dag, seed):
    assert dag.lower_bound() <= dag.peak(random_order(dag, random.Random(seed)))


SCHEDULERS = {
    "rpo": rpo.schedule,
    "exact": exact.schedule,
    "hierarchical": hierarchical.schedule,
    "best": lambda d: best_schedule(d, time_budget=1.0),
}


@settings(max_examples=80, deadline=None)
@given(small_dags(max_ops=14))
def test_schedulers_return_valid_orders_with_their_peak(dag):
    for name, fn in SCHEDULERS.items():
        order, peak, _ = fn(dag)
        assert dag.is_order(order), name
        assert dag.peak(order) == peak, name


@settings(max_examples=80, deadline=None)
@given(small_dags(max_ops=8))
def test_hierarchical_never_beats_exact_on_small_dags(dag):
    assert exact.schedule(dag)[1] <= hierarchical.schedule(dag)[1]


def test_hierarchical_equals_exact_on_almost_every_small_dag():
    """The hierarchical scheduler is a heuristic: hypothesis once found an 8-op DAG where it peaks at 72 B and the
    exact DP at 60 B (7 of 2,000 random 8-op DAGs differ). On 300 seeded small DAGs it must match the optimum on
    at least 99 %."""
    rnd = random.Random(2026)
    dags = [random_dag(rnd, rnd.randint(1, 8), rnd.choice([0.2, 0.4, 0.7])) for _ in range(300)]
    worse = [d for d in dags if hierarchical.schedule(d)[1] != exact.schedule(d)[1]]
    assert len(worse) <= 3, len(worse)


def test_segments_end_at_cuts():
    dag = generate("randwire", 1, 64)
    segs = segments(dag)
    assert sorted(v for s in segs for v in s) == list(range(dag.n))
    anc = dag.ancestors()
    done = 0
    for seg in segs:  # every op of a segment depends only on earlier segments and itself
        mask = sum(1 << v for v in seg)
        assert all(not anc[v] & ~(done | mask) for v in seg)
        done |= mask


def test_cells_are_single_exit_and_laminar():
    for name, dag in suite(sizes=(40,), seeds=(0, 1)):
        regions = hierarchical.cells(dag)
        for c in regions:
            leaving = [v for v in range(dag.n) if c >> v & 1 and (dag.succ_mask[v] & ~c or v in dag.outputs)]
            assert len(leaving) == 1, name
            for k in regions:
                assert not c & k or c & k in (c, k), name


# -- the Dag against liveness.py ---------------------------------------------------------------


@st.composite
def op_graphs(draw):
    """OpGraphs as the reader builds them: inputs, kernel outputs, views, constants."""
    rnd = random.Random(draw(st.integers(0, 2**32 - 1)))
    tensors, live = {}, []

    def add(t):
        tensors[t.name] = t
        return t.name

    inputs = [add(Tensor(f"in{i}", (rnd.randint(1, 40),), rnd.choice(["int8", "int32"]), "input", f"in{i}")) for i in range(rnd.randint(1, 2))]
    live += inputs
    ops = []
    for k in range(draw(st.integers(1, 10))):
        ins = rnd.sample(live, min(len(live), rnd.randint(1, 3)))
        if rnd.random() < 0.5:
            ins.append(add(Tensor(f"c{k}", (3,), "int8", "const", f"c{k}", value=np.zeros(3, np.int8))))
        out = add(Tensor(f"t{k}", (rnd.randint(1, 50),), rnd.choice(["int8", "int16"]), "activation", f"t{k}", producer=k))
        for name in ins:
            _use(tensors, name, k)
        ops.append(Op(f"k{k}", "OP", ins, out, None))
        live.append(out)
        if rnd.random() < 0.3:  # a reshape: a view sharing its source's storage
            src = tensors[rnd.choice(live)]
            if not src.is_const:
                live.append(add(Tensor(f"v{k}", src.shape, src.dtype, "activation", src.storage, producer=src.producer)))
    outputs = rnd.sample(live, rnd.randint(1, min(3, len(live))))
    return OpGraph(ops, tensors, inputs, outputs)


def _use(tensors, name, op):
    t = tensors[name]
    if op not in t.consumers:
        t.consumers.append(op)
    if t.storage != name:
        _use(tensors, t.storage, op)


@settings(max_examples=200, deadline=None)
@given(op_graphs(), st.integers(0, 1000), st.sampled_from([1, 4, 8]))
def test_dag_peak_equals_liveness_on_random_graphs(graph, seed, align):
    dag = Dag.from_graph(graph, align)
    for order in (list(range(dag.n)), random_order(dag, random.Random(seed))):
        assert dag.peak(order) == peak_bytes(graph, order, align)
    best = schedule_graph(graph, align, time_budget=1.0)
    assert sorted(best.order) == list(range(len(graph.ops)))
    assert peak_bytes(graph, best.order, align) == best.peak_bytes <= file_order(graph, align).peak_bytes


@pytest.fixture(scope="module")
def real_graphs():
    from edgemem.frontend.tflite_import import import_tflite
    from edgemem.ir.graph import read_graph
    from edgemem.passes.lower import lower_to_kernels

    graphs = {}
    for name in FAST_MODELS:
        path = MODELS / f"{name}.tflite"
        if path.is_file():
            graphs[name] = (path, read_graph(lower_to_kernels(import_tflite(path).relax_mod)))
    if not graphs:
        pytest.skip("no shared models here")
    return graphs


def test_dag_peak_equals_liveness_on_real_graphs(real_graphs):
    rnd = random.Random(0)
    for name, (path, graph) in real_graphs.items():
        dag = Dag.from_graph(graph, 4)
        for order in [list(range(dag.n))] + [random_order(dag, rnd) for _ in range(5)]:
            assert dag.peak(order) == peak_bytes(graph, order, 4), name
        order, peak, _ = exact.schedule(dag)
        assert peak_bytes(graph, order, 4) == peak, name
        best = schedule_graph(graph, 4)
        assert peak_bytes(graph, best.order, 4) == best.peak_bytes <= file_order(graph, 4).peak_bytes, name
        if any(op.workspace for op in graph.ops):
            continue  # in-place kernels: the flatbuffer has no such thing
        flat = Dag.from_tflite(path, align=4)  # the TVM-free path sees the same graph here
        assert flat.n == dag.n and flat.peak(list(range(flat.n))) == dag.peak(list(range(dag.n))), name


def test_kws_on_off_below_the_file_order():
    dag = Dag.from_tflite(model_path("mltk_kws_on_off_v3"), align=4)
    assert dag.peak(file_or_topo(dag)) == 21_560
    for name, fn in SCHEDULERS.items():
        order, peak, _ = fn(dag)
        assert dag.is_order(order) and dag.peak(order) == peak, name
        if name != "rpo":
            assert peak <= 19_600, name


def test_real_models_never_above_file_order():
    paths = sorted(MODELS.glob("*.tflite"))
    if not paths:
        pytest.skip("no shared models here")
    for path in paths:
        dag = Dag.from_tflite(path, align=4)
        order, peak, report = best_schedule(dag, time_budget=2.0)
        assert dag.is_order(order) and dag.peak(order) == peak
        assert peak <= report["file"]["peak"] and peak <= report["rpo"]["peak"], path.stem
        assert dag.lower_bound() <= peak


# -- generated graphs ------------------------------------------------------------------------


def test_generators_are_seeded_and_sized():
    for fam in FAMILIES:
        for ops in (20, 40, 64, 120):
            a, b = generate(fam, 3, ops), generate(fam, 3, ops)
            assert (a.sizes, a.preds) == (b.sizes, b.preds)
            assert 20 <= a.n <= 120 and a.is_order(a.topo)
            assert all(s > 0 for s in a.sizes)
    assert generate("unet", 1, 64).sizes != generate("unet", 2, 64).sizes


GENERATED = [(n, d) for n, d in suite(sizes=(24, 40, 64), seeds=(0, 1, 2)) if not (n.startswith("rwstage") and d.n > 40)]


@pytest.mark.parametrize("name,dag", GENERATED, ids=[n for n, _ in GENERATED])
def test_hierarchical_equals_exact_and_never_above_rpo(name, dag):
    h_order, h_peak, _ = hierarchical.schedule(dag)
    assert dag.is_order(h_order) and dag.peak(h_order) == h_peak
    assert h_peak <= rpo.schedule(dag)[1]
    e_order, e_peak, info = exact.schedule(dag, time_limit=30)
    assert dag.is_order(e_order) and dag.peak(e_order) == e_peak
    if info["optimal"]:
        assert h_peak == e_peak
    else:
        assert h_peak <= rpo.schedule(dag)[1]


def test_nasnet_cells_follow_the_published_configuration():
    # counted by hand from the NASNet-A normal cell of the TF-slim model: two 1x1 adjusts; combinations
    # sep5+sep3, sep5+sep3, avg+none, avg+avg, sep3+none (a separable conv is 4 ops) each with an add;
    # the concat of hidden states 1..6
    dag = generate("nasnet", 0, 64)
    names = dag.names
    first = [v for v in range(dag.n) if names[v].startswith("c0")]
    assert len(first) == 2 + (8 + 1) + (8 + 1) + (1 + 1) + (2 + 1) + (4 + 1) + 1 == 31
    cat = names.index("c0cat")
    assert sorted(names[p] for p in dag.preds[cat]) == ["c0adj1"] + [f"c0k{k}add" for k in range(5)]
    assert [names[p] for p in dag.preds[names.index("c0k4add")]] == ["c0adj0", "c0k4sep30.3"]  # sep3(h0) + none(h0)
    pnas = generate("nasnet", 1, 64)  # PNASNet-5: combination 3 is sep3 of combination 2's add (state 4) + max(h0)
    sep = [pnas.names[p] for p in pnas.preds[pnas.names.index("c0k3sep30.0")]]
    assert sep == ["c0k2add"]
    assert sorted(pnas.names[p] for p in pnas.preds[pnas.names.index("c0k3add")]) == ["c0k3max1.0", "c0k3sep30.3"]


def test_hierarchical_needs_far_fewer_states_than_serenity_on_nasnet():
    """The paper's speed-up in a machine-independent unit: states the search visits. On a NASNet-A
    graph, the plain Serenity DP proves the optimum; hierarchical finds it visiting < 1/25 of the states
    (measured 1/29: 31,810 vs 916,392; on this small graph its last round is the proof of a hierarchy not yet flat)."""
    dag = generate("nasnet", 0, 40)
    s_order, s_peak, s_info = exact.schedule(dag, plain=True)
    h_order, h_peak, h_info = hierarchical.schedule(dag)
    assert s_info["optimal"] and dag.peak(s_order) == s_peak
    assert h_info["complete"] and dag.peak(h_order) == h_peak == s_peak
    assert s_peak > dag.lower_bound()  # no shortcut: proving the optimum needs the search
    assert 25 * h_info["states"] < s_info["states"]


def test_exact_reports_a_limit():
    dag = generate("rwstage", 0, 96)
    order, peak, info = exact.schedule(dag, time_limit=0.3)
    assert not info["optimal"]
    assert dag.is_order(order) and dag.peak(order) == peak <= rpo.schedule(dag)[1]


def test_best_schedule_reports_every_scheduler():
    dag = generate("darts", 0, 40)
    order, peak, report = best_schedule(dag, time_budget=3.0)
    assert {"file", "rpo", "hierarchical", "exact"} <= set(report)
    assert peak == min(report[k]["peak"] for k in ("file", "rpo", "hierarchical", "exact"))
    assert report[report["best"]]["peak"] == peak
    assert all(report[k]["seconds"] >= 0 for k in ("file", "rpo", "hierarchical", "exact"))


@pytest.mark.parametrize("family", ["rwstage", "darts", "unet", "inception"])
def test_sunk_orders_keep_the_peak_and_the_tie_break_never_places_worse(family):
    from edgemem.plan import plan_arena
    from edgemem.plan.symbolic import _dag_buffers
    from edgemem.schedule.best import _least_placed, sunk

    def placed(order):
        return plan_arena(_dag_buffers(dag, order, 4)).total_bytes

    for seed in range(3):
        dag = generate(family, seed, 30)
        order = hierarchical.schedule(dag, time_limit=0.2)[0]
        moved = sunk(dag, order)
        assert dag.is_order(moved) and dag.peak(moved) <= dag.peak(order)
        _, chosen = _least_placed(dag, [(dag.peak(order), 0, "hierarchical", order)], placed)
        assert dag.is_order(chosen) and dag.peak(chosen) == dag.peak(order)
        assert placed(chosen) <= placed(order)


def test_equal_peak_orders_are_told_apart_by_their_placement():
    # rwstage-0 at n=13 (benchmarks/symbolic.md): two orders of the same 65,480 B peak place at 69,996 B and
    # 66,880 B; the build's concrete path must not take the worse one. 2 s, not 0.2 s: under a load of 11 on two cores
    # 0.2 s of wall time left the search too little CPU to reach the second order (81,356 B in a full-suite run)
    from edgemem.plan.symbolic import concrete_plan_bytes
    from edgemem.schedule.symbolic import Symbols, affine_from, parse_dim

    dag = affine_from(generate("rwstage", 0, 40), Symbols([parse_dim("n=1..64")]), 0).at({"n": 13})
    assert concrete_plan_bytes(dag, 4, 2.0) <= 66_880
