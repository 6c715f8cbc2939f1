"""Symbolic shapes: sizes, schedules and arena plans as expressions in a dimension n, checked at every
point of a sweep against independent oracles: LiteRT's own shape inference (reference kernels, input
resized to n) for the sizes, Dag.from_tflite for the structure, the concrete schedulers + planner run
at each n, edgemem.plan.check_plan on the evaluated offsets, TVM's analyzer for the values of the
expressions, and gcc on the host for the generated C."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import tvm

from edgemem.codegen.symbolic_c import render_plan_c
from edgemem.errors import EdgememError, UnsupportedModelError
from edgemem.plan import Buffer, PlanError, check_plan, plan_arena
from edgemem.plan.symbolic import SymbolicPlan, plan_symbolic
from edgemem.schedule.best import best_schedule
from edgemem.schedule.dag import Dag
from random_graphs import generate
from edgemem.schedule.symbolic import SymDag, Symbols, affine_from, evaluate, list_schedule, parse_dim, schedule_symbolic

ROOT = Path(__file__).resolve().parents[1]
MODELS = ROOT.parent / "shared" / "models"
EXAMPLE = ROOT / "examples" / "kws_tiny_batch_int8.tflite"
SWEEP = [1, 2, 3, 5, 8, 13, 21, 34, 55, 64]
SHARED = ["mlperf_ic_resnet8_int8", "mlperf_kws_dscnn_int8", "mlperf_ad_fc_autoencoder_int8", "mltk_kws_on_off_v3"]
ALIGN = 4


def model_path(name: str) -> Path:
    path = EXAMPLE if name == "example" else MODELS / f"{name}.tflite"
    if not path.is_file():
        pytest.skip(f"{path} is not here (the shared models live next to the repository)")
    return path


def tvm_value(expr, name: str, value: int) -> int:
    """The expression's value by TVM itself: bind the var to a constant and simplify."""
    analyzer = tvm.sym.Analyzer()
    for var in _vars(expr):
        if var.name == name:
            analyzer.bind(var, tvm.tirx.IntImm("int64", value))
            break
    out = analyzer.simplify(expr)
    assert isinstance(out, tvm.tirx.IntImm), out
    return int(out.value)


def _vars(expr) -> list:
    found, stack = [], [expr]
    while stack:
        e = stack.pop()
        if isinstance(e, tvm.tirx.Var):
            found.append(e)
        stack += [getattr(e, c) for c in ("a", "b", "value") if isinstance(getattr(e, c, None), tvm.tirx.Expr)]
    return found


def concrete_arena(dag: Dag) -> int:
    """The concrete path at one n, written here from the public pieces: the best operator order, live
    ranges as Dag.curve defines them, plan_arena."""
    order = best_schedule(dag, 0.2)[0]
    step = {v: s for s, v in enumerate(order)}
    end = len(order) - 1
    bufs = [Buffer(f"t{v}", dag.sizes[v], step[v], end if v in dag.outputs else max([step[s] for s in dag.succs[v]] or [step[v]]), ALIGN)
            for v in range(dag.n) if dag.sizes[v]]  # fmt: skip
    bufs += [Buffer(f"x{e}", b, 0, max([step[o] for o in ops] or [0]), ALIGN) for e, (b, ops) in enumerate(dag.ext) if b]
    bufs += [Buffer("pinned", dag.pinned, 0, end, ALIGN)] if dag.pinned else []
    plan = plan_arena(bufs)
    check_plan(bufs, plan)
    return plan.total_bytes


# ---------------------------------------------------------------------------------------- dimensions


def test_parse_dim_accepts_ranges_and_rejects_the_rest():
    d = parse_dim(" frames = 2..100 ")
    assert (d.name, d.lo, d.hi) == ("frames", 2, 100)
    for bad in ["n=1-64", "n=0..4", "n=9..3", "1n=1..4", "n", "n=1..99999999999"]:
        with pytest.raises(EdgememError, match="--dim"):
            parse_dim(bad)


# ---------------------------------------------------------------------------------------- sizes


@pytest.mark.parametrize("name", ["example", *SHARED])
def test_symbolic_sizes_equal_litert_shapes_at_every_n(name):
    """Each activation's bytes expression, evaluated at n, equals what LiteRT's shape inference gives
    once the input is resized to batch n."""
    from ai_edge_litert.interpreter import Interpreter, OpResolverType

    path = model_path(name)
    dag = SymDag.from_tflite(path, [parse_dim("n=1..64")], ALIGN)
    assert dag.tensor_bytes
    for n in (1, 3, 8, 21):
        it = Interpreter(model_path=str(path), experimental_op_resolver_type=OpResolverType.BUILTIN_REF)
        inp = it.get_input_details()[0]
        it.resize_tensor_input(inp["index"], [n, *inp["shape"][1:]], strict=True)
        it.allocate_tensors()
        details = {d["index"]: d for d in it.get_tensor_details()}
        for t, expr in dag.tensor_bytes.items():
            d = details[t]
            expected = int(np.prod(d["shape"])) * np.dtype(d["dtype"]).itemsize
            assert evaluate(expr, {"n": n}) == expected, (name, n, d["name"])


@pytest.mark.parametrize("name", ["example", *SHARED, "tflm_person_detect_int8"])
def test_structure_at_the_lowest_n_is_dag_from_tflite(name):
    """At n=1 the symbolic DAG is the concrete one the schedulers read (built by separate code)."""
    path = model_path(name)
    concrete = Dag.from_tflite(path, align=ALIGN)
    at_one = SymDag.from_tflite(path, [parse_dim("n=1..64")], ALIGN).at({"n": 1})
    assert at_one.sizes == concrete.sizes and at_one.preds == concrete.preds
    assert at_one.ext == concrete.ext and at_one.outputs == concrete.outputs and at_one.pinned == concrete.pinned


def test_unsupported_bindings_fail_clearly():
    path = model_path("tflm_xtensa_micro_speech_lstm")  # no -1; an activation [49, 257] has no batch 1
    with pytest.raises(UnsupportedModelError, match="batch"):
        SymDag.from_tflite(path, [parse_dim("n=1..8")], ALIGN)
    with pytest.raises(UnsupportedModelError, match="exactly one"):
        SymDag.from_tflite(model_path("example"), [parse_dim("n=1..8"), parse_dim("m=1..8")], ALIGN)


# ---------------------------------------------------------------------------------------- schedule


@pytest.mark.parametrize("name", ["example", *SHARED])
def test_list_schedule_peak_expression_is_the_concrete_peak(name):
    dag = SymDag.from_tflite(model_path(name), [parse_dim("n=1..64")], ALIGN)
    order, stats = list_schedule(dag)
    assert dag.shape.is_order(order)
    peak = dag.peak(order)
    for n in SWEEP:
        concrete = dag.at({"n": n})
        assert concrete.is_order(order)
        assert tvm_value(peak, "n", n) == concrete.peak(order), (name, n)


def random_symbolic(family: str, seed: int) -> SymDag:
    return affine_from(generate(family, seed, 30), Symbols([parse_dim("n=1..64")]), seed)


@pytest.mark.parametrize("family", ["randwire", "darts", "unet", "inception"])
def test_symbolic_schedule_on_sizes_that_cross(family):
    """Sizes a*n + b whose order changes over the range: the chosen order is valid and its peak
    expression is the concrete peak at every n."""
    dag = random_symbolic(family, 3)
    order, peak, report = schedule_symbolic(dag, 0.3)
    assert dag.shape.is_order(order) and report["best"] in report
    list_order, _ = list_schedule(dag)
    list_peak = dag.peak(list_order)
    for n in range(1, 65):
        concrete = dag.at({"n": n})
        assert concrete.peak(order) == dag.symbols.vec(peak)[n - 1]
        assert concrete.peak(list_order) == dag.symbols.vec(list_peak)[n - 1]


# ---------------------------------------------------------------------------------------- plan


@pytest.mark.parametrize("name", ["example", *SHARED])
def test_symbolic_plan_peak_equals_concrete_plan_peak(name):
    """The acceptance criterion: for every n of the sweep, the one symbolic plan evaluated at n is a valid
    placement (check_plan) and within 5 % of the concrete schedule + plan computed at that n."""
    dag = SymDag.from_tflite(model_path(name), [parse_dim("n=1..64")], ALIGN)
    order, _, _ = schedule_symbolic(dag, 0.5)
    plan = plan_symbolic(dag, order, ALIGN)
    for n in SWEEP:
        env = {"n": n}
        plan.check(env)
        symbolic, concrete = plan.peak_at(env), concrete_arena(dag.at(env))
        assert abs(symbolic - concrete) <= 0.05 * concrete, (name, n, symbolic, concrete)
        assert tvm_value(plan.peak, "n", n) == symbolic


@pytest.mark.parametrize("family,seed", [("randwire", 0), ("rwstage", 1), ("darts", 2), ("unet", 1), ("inception", 0)])
def test_symbolic_plan_is_valid_at_every_n_when_sizes_cross(family, seed):
    dag = random_symbolic(family, seed)
    order, _, _ = schedule_symbolic(dag, 0.3)
    plan = plan_symbolic(dag, order, ALIGN)
    for n in range(1, 65):
        plan.check({"n": n})
        buffers, concrete = plan.concrete({"n": n})
        assert concrete.pool_sizes["arena"] >= concrete.lower_bound


def test_checker_rejects_a_broken_symbolic_plan():
    """The check can fail: put a buffer at offset 0 next to a neighbour also at 0."""
    dag = SymDag.from_tflite(model_path("example"), [parse_dim("n=1..64")], ALIGN)
    order, _, _ = schedule_symbolic(dag, 0.2)
    plan = plan_symbolic(dag, order, ALIGN)
    victim = next(name for name in plan.placed if plan.refs[name])
    refs = {**plan.refs, victim: []}
    broken = SymbolicPlan(plan.symbols, plan.buffers, refs, plan.placed, plan.peak_refs, plan.align, "broken")
    with pytest.raises(PlanError, match="overlap"):
        broken.check({"n": 5})


def _wavy_dag() -> SymDag:
    """A chain whose sizes rise and fall with n (floormod): a peak that is not monotone in n."""
    symbols = Symbols([parse_dim("n=1..64")])
    n = symbols.vars["n"]
    wave = tvm.tirx.floormod(n, 7) * 400 + n * 8 + 64
    return SymDag(symbols, [wave, n * 16 + 32, wave], [[], [0], [1]], {2}, [(n * 4 + 4, [0])], [])


@pytest.mark.parametrize("make", [lambda: random_symbolic("darts", 1), _wavy_dag])
def test_largest_fitting_is_the_brute_force_answer(make):
    dag = make()
    order, _, _ = schedule_symbolic(dag, 0.2)
    plan = plan_symbolic(dag, order, ALIGN)
    peaks = [plan.peak_at({"n": n}) for n in range(1, 65)]
    for budget in sorted({peaks[0] - 1, peaks[0], peaks[10], peaks[40] + 1, max(peaks) - 1, max(peaks)}):
        fitting = [n for n in range(1, 65) if all(p <= budget for p in peaks[:n])]
        assert plan.largest_fitting(budget) == (max(fitting) if fitting else None)
    for n in range(1, 65):
        plan.check({"n": n})


# ---------------------------------------------------------------------------------------- C


def _compile_and_sweep(plan: SymbolicPlan, tmp_path: Path) -> dict[int, list[int]]:
    for name, text in render_plan_c(plan).items():
        (tmp_path / name).write_text(text)
    (tmp_path / "main.c").write_text(
        '#include <stdio.h>\n#include "edgemem_plan.h"\nint main(void) {\n'
        "    uint32_t off[EDGEMEM_PLAN_BUFFERS];\n"
        "    for (int32_t n = EDGEMEM_DIM_N_MIN - 1; n <= EDGEMEM_DIM_N_MAX + 1; n++) {\n"
        "        int32_t status = edgemem_plan_offsets(n, off);\n"
        '        printf("%d %d %u", (int)n, (int)status, (unsigned)edgemem_plan_arena_bytes(n));\n'
        '        for (int i = 0; status == 0 && i < EDGEMEM_PLAN_BUFFERS; i++) printf(" %u", (unsigned)off[i]);\n'
        '        printf("\\n");\n    }\n    return 0;\n}\n'
    )  # fmt: skip
    exe = tmp_path / "plan"
    cc = subprocess.run(["gcc", "-std=c99", "-O2", "-Wall", "-Wextra", "-Werror", "-o", str(exe),
                         str(tmp_path / "main.c"), str(tmp_path / "edgemem_plan.c")], capture_output=True, text=True)  # fmt: skip
    assert cc.returncode == 0, cc.stderr
    rows = [list(map(int, line.split())) for line in subprocess.run([str(exe)], capture_output=True, text=True, check=True).stdout.splitlines()]
    d = plan.symbols.dims[0]
    assert rows[0][:3] == [d.lo - 1, -1, 0] and rows[-1][:3] == [d.hi + 1, -1, 0]  # out of range
    return {row[0]: row[2:] for row in rows[1:-1] if row[1] == 0}


@pytest.mark.parametrize("name", ["example", "mlperf_kws_dscnn_int8"])
def test_generated_c_computes_the_offsets_tvm_computes(name, tmp_path):
    dag = SymDag.from_tflite(model_path(name), [parse_dim("n=1..64")], ALIGN)
    plan = plan_symbolic(dag, schedule_symbolic(dag, 0.2)[0], ALIGN)
    values = _compile_and_sweep(plan, tmp_path)
    assert sorted(values) == list(range(1, 65))
    for n in SWEEP:
        offsets = [tvm_value(plan.offsets[b.name], "n", n) for b in plan.buffers]
        assert values[n] == [tvm_value(plan.peak, "n", n), *offsets]


def test_generated_c_on_sizes_that_cross(tmp_path):
    """floordiv of non-multiples, maxes of ends: C equals Python's evaluation at every n."""
    dag = random_symbolic("rwstage", 1)
    plan = plan_symbolic(dag, schedule_symbolic(dag, 0.2)[0], ALIGN)
    values = _compile_and_sweep(plan, tmp_path)
    for n in range(1, 65):
        offsets = plan.offsets_at({"n": n})
        assert values[n] == [plan.peak_at({"n": n}), *[offsets[b.name] for b in plan.buffers]]


# ---------------------------------------------------------------------------------------- CLI


def _cli(*args: str, cwd: Path) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "edgemem.cli", *args], cwd=cwd, capture_output=True, text=True, timeout=600)


def test_cli_dim_reports_the_largest_fitting_n(tmp_path):
    p = _cli("build", str(model_path("example")), "--dim", "n=1..64", "--ram", "96K", "-o", str(tmp_path / "p"),
             "--json", "--schedule-time", "0.5", cwd=tmp_path)  # fmt: skip
    assert p.returncode == 0, p.stderr
    info = json.loads(p.stdout)
    budget = info["budget_bytes"]
    assert budget == 98304 - 16384  # --ram minus the board's stack
    dag = SymDag.from_tflite(model_path("example"), [parse_dim("n=1..64")], ALIGN)
    by_n = {row["n"]: row for row in info["sweep"]}
    assert all(abs(r["symbolic_bytes"] - r["concrete_bytes"]) <= 0.05 * r["concrete_bytes"] for r in by_n.values())
    largest = info["largest_fitting"]["n"]
    assert 1 <= largest < 64
    # the plan's C says the same: arena at largest fits, at largest + 1 it does not
    assert (tmp_path / "p" / "edgemem_plan.c").is_file() and (tmp_path / "p" / "edgemem_symbolic.json").is_file()
    plan = plan_symbolic(dag, schedule_symbolic(dag, 0.5)[0], ALIGN)
    assert plan.peak_at({"n": largest}) <= budget < plan.peak_at({"n": largest + 1})


def test_cli_dim_fails_when_the_lowest_n_does_not_fit(tmp_path):
    p = _cli("build", str(model_path("example")), "--dim", "n=8..64", "--ram", "40000", cwd=tmp_path)
    assert p.returncode == 5, p.stderr
    msg = " ".join(p.stderr.split())
    assert "n=8" in msg and "23,616 bytes" in msg and "Traceback" not in p.stderr
    need = int(msg.split("arena of ")[1].split(" bytes")[0].replace(",", ""))
    assert need > 23616


# ---------------------------------------------------------------------------------------- the example


def test_symbolic_example_is_current_and_is_kws_tiny():
    """examples/kws_tiny_batch_int8.tflite is what the script makes, declares batch -1, and at batch 1
    TFLite Micro gives exactly kws_tiny's outputs (same network, only the signature differs)."""
    import importlib.util

    from edgemem.reference import seeded_inputs, tflm_outputs

    spec = importlib.util.spec_from_file_location("make_example_model", ROOT / "examples" / "make_example_model.py")
    script = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = script  # its dataclasses look their module up there
    spec.loader.exec_module(script)
    path = model_path("example")
    assert path.read_bytes() == script.build_kws_tiny(symbolic_batch=True), "rerun make_example_model.py --symbolic-batch"
    import tflite

    sg = tflite.Model.GetRootAsModel(path.read_bytes(), 0).Subgraphs(0)
    assert list(sg.Tensors(int(sg.Inputs(0))).ShapeSignatureAsNumpy()) == [-1, 49, 10, 1]
    plain = ROOT / "examples" / "kws_tiny_int8.tflite"
    for seed in (0, 1):
        x = seeded_inputs(plain, seed)
        assert np.array_equal(tflm_outputs(path, x)[0], tflm_outputs(plain, x)[0])
