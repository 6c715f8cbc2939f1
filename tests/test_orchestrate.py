"""The pass orchestrator (OPASS) on fake passes with known effects, and on real models.

The fake world: a module is (model features, facts the passes added); its figures come from a formula.
The oracle for "best sequence" is a brute force over every pass sequence up to a length that covers all
of them; the baselines are recomputed here by their own loops, not read from the orchestrator.
"""

from __future__ import annotations

import itertools
import sys
from pathlib import Path

import numpy as np
import pytest

from edgemem.passes.catalogue import GraphPass
from edgemem.passes.effects import EffectTable, learn
from edgemem.passes.orchestrate import ALL_BASELINES, DEFAULT_SEQUENCE, objective, orchestrate

from shared_models import model_path as _model

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks"))
import pass_baselines  # noqa: E402  (benchmark-only baselines: greedy)


# -- the fake world -------------------------------------------------------------------------------------


def _with(fact):
    return lambda mod: (mod[0], mod[1] | {fact})


def _fold(mod):
    features, facts = mod
    if "pad" not in features or "folded" in facts or "dw_inplace" in facts:  # an in-place depthwise blocks folding
        return mod
    return features, facts | {"folded"}


def _dw(mod):
    return (mod[0], mod[1] | {"dw_inplace"}) if "dw" in mod[0] else mod


def _elem(mod):
    return (mod[0], mod[1] | {"elem_inplace"}) if "elem" in mod[0] else mod


def _fuse(mod):
    return (mod[0], mod[1] | {"fused"}) if "branch" in mod[0] else mod


def _split(mod):
    return (mod[0], mod[1] | {"split"}) if "fused" in mod[1] else mod


def _broken(mod):
    raise RuntimeError("this pass always fails")


FAKE_PASSES = [
    GraphPass("fold_pad", "fake", _fold, "edgemem"),
    GraphPass("inplace_depthwise", "fake", _dw, "edgemem"),
    GraphPass("inplace_elementwise", "fake", _elem, "edgemem"),
    GraphPass("fuse", "fake: a worse step that enables split", _fuse, "tvm"),
    GraphPass("split", "fake", _split, "tvm"),
    GraphPass("noop", "fake: never changes anything", lambda mod: mod, "tvm"),
    GraphPass("broken", "fake: always raises", _broken, "tvm"),
]


def fake_measure(mod) -> dict:
    features, facts = mod
    arena = 1000
    if "pad" in features and "folded" not in facts:
        arena += 400
    if "dw_inplace" in facts:
        arena -= 100 if "folded" in facts else 0  # the depthwise at the peak reads the pad until it is folded
    if "elem_inplace" in facts and "dw_inplace" in facts and "folded" in facts:
        arena -= 50
    if "fused" in facts:
        arena += 300
        arena -= 700 if "split" in facts else 0
    inplace = len({"dw_inplace", "elem_inplace"} & facts)
    ops = 10 - ("folded" in facts) - ("fused" in facts) + ("split" in facts)
    return {"arena_bytes": arena, "peak_bytes": arena, "flash_bytes": 100 + 10 * ("fused" in facts), "macs": 5000,
            "ops": ops, "tensors": ops + 1, "inplace_tensors": inplace}  # fmt: skip


def fake_model(*features):
    return frozenset(features), frozenset()


MODELS_FAKE = {
    "pads": fake_model("pad", "dw", "elem"),
    "branchy": fake_model("pad", "dw", "branch"),
    "plain": fake_model("dw"),
    "elem_only": fake_model("elem"),
    "everything": fake_model("pad", "dw", "elem", "branch"),
}


def run_fake(mod, **kw):
    kw.setdefault("table", EffectTable())
    kw.setdefault("baselines", (*ALL_BASELINES, "greedy"))
    return orchestrate(mod, FAKE_PASSES, measure_fn=fake_measure, key_fn=lambda m: m, extra_baselines=pass_baselines.EXTRA, **kw)


def apply_safely(p, mod):
    try:
        return p(mod)
    except RuntimeError:
        return mod


def brute_force_best(mod, length=len(FAKE_PASSES)):
    """The best objective over every sequence of up to ``length`` passes (the states reachable)."""
    seen, frontier = {mod}, {mod}
    for _ in range(length):
        frontier = {apply_safely(p, m) for m in frontier for p in FAKE_PASSES} - seen
        seen |= frontier
    return min(objective(fake_measure(m)) for m in seen)


def greedy_independently(mod):
    while True:
        options = [apply_safely(p, mod) for p in FAKE_PASSES]
        best = min(options, key=lambda m: objective(fake_measure(m)))
        if objective(fake_measure(best)) >= objective(fake_measure(mod)):
            return fake_measure(mod)
        mod = best


def fixed_independently(mod):
    by_name = {p.name: p for p in FAKE_PASSES}
    for name in DEFAULT_SEQUENCE:  # as the orchestrator runs it: the names its passes have (no fake inplace_residual)
        mod = apply_safely(by_name[name], mod) if name in by_name else mod
    return fake_measure(mod)


# -- fake passes ----------------------------------------------------------------------------------------


@pytest.mark.parametrize("model", sorted(MODELS_FAKE))
def test_finds_the_best_sequence_and_beats_every_baseline(model):
    mod = MODELS_FAKE[model]
    result = run_fake(mod)
    assert objective(result.search_figures) == brute_force_best(mod)  # the search alone, no baseline help
    assert result.source == "search"
    baselines = {"none": fake_measure(mod), "fixed": fixed_independently(mod), "greedy": greedy_independently(mod)}
    for name, figures in baselines.items():
        assert result.baselines[name]["arena_bytes"] == figures["arena_bytes"], name
        assert result.figures["arena_bytes"] <= figures["arena_bytes"], name
    # the reported sequence replays to the reported figures, step by step
    by_name, state = {p.name: p for p in FAKE_PASSES}, mod
    for step in result.sequence:
        before, state = fake_measure(state), by_name[step.name](state)
        assert step.arena_bytes == fake_measure(state)["arena_bytes"]
        assert step.d_arena == fake_measure(state)["arena_bytes"] - before["arena_bytes"]
    assert fake_measure(state) == result.figures and result.module == state


def test_a_pass_adding_work_is_tried_after_the_others_and_still_found():
    # "patch" (deferred, as the catalogue's patches and remat: they add MACs and cost seconds) lowers the arena
    # most; the search first explores the other passes, then tries it and reaches the brute-force optimum
    tried = []

    def patch(mod):
        tried.append("patch")
        return (mod[0], mod[1] | {"patched"})

    def logged(p):
        return GraphPass(p.name, p.purpose, lambda mod: (tried.append(p.name), p(mod))[1], p.origin)

    passes = [logged(p) for p in FAKE_PASSES] + [GraphPass("patch", "fake: adds work", patch, "edgemem", deferred=True)]

    def measure(mod):
        figures = dict(fake_measure(mod))
        figures["arena_bytes"] -= 600 if "patched" in mod[1] else 0
        return figures

    mod = MODELS_FAKE["everything"]
    result = orchestrate(mod, passes, measure_fn=measure, key_fn=lambda m: m, table=EffectTable(), baselines=())
    seen, frontier = {mod}, {mod}
    for _ in range(len(passes)):
        frontier = {apply_safely(p, m) for m in frontier for p in passes} - seen
        seen |= frontier
    assert objective(result.search_figures) == min(objective(measure(m)) for m in seen)
    assert "patch" in [s.name for s in result.sequence]
    first = tried.index("patch")
    assert set(tried[:first]) >= {p.name for p in FAKE_PASSES}  # every other pass was tried before it
    assert len(tried[:first]) > len(FAKE_PASSES)  # and more than the root's detection: states below it too


def test_a_learned_no_for_a_pass_adding_work_leaves_it_to_be_tried():
    # a table that says "patch" is no opportunity at the root nor after any pass (as one learned on models where it
    # never applies: on the shared models 9 of 21 have no stage to patch) must not stop a search from trying it on
    # a model where it applies, once nothing else is believed: a pass adding work is detected late and on few
    # states, so a "no" learned for it is no reason never to try it (a "yes" still counts)
    def patch(mod):
        return (mod[0], mod[1] | {"patched"}) if "big" in mod[0] else mod

    passes = list(FAKE_PASSES) + [GraphPass("patch", "fake: adds work", patch, "edgemem", deferred=True)]

    def measure(mod):
        figures = dict(fake_measure(mod))
        figures["arena_bytes"] -= 600 if "patched" in mod[1] else 0
        return figures

    def run(mod, table):
        return orchestrate(mod, passes, measure_fn=measure, key_fn=lambda m: m, table=table, baselines=())

    never = EffectTable(root={"patch": [5, 0]}, after={p.name: {"patch": [5, 0, 5, 0]} for p in passes})
    assert never.root_belief("patch") is False and never.after_belief("fold_pad", "patch", True) is False
    big = fake_model("pad", "dw", "elem", "big")
    without, learned = run(big, EffectTable()), run(big, never)
    assert "patch" in [s.name for s in without.sequence]
    assert "patch" in [s.name for s in learned.sequence]
    assert learned.figures["arena_bytes"] == without.figures["arena_bytes"]


def test_search_takes_a_worse_step_greedy_does_not():
    mod = MODELS_FAKE["branchy"]
    result = run_fake(mod)
    names = [s.name for s in result.sequence]
    assert "fuse" in names and names.index("fuse") < names.index("split")
    assert result.figures["arena_bytes"] < greedy_independently(mod)["arena_bytes"]


def test_pass_order_matters_fold_before_inplace():
    result = run_fake(MODELS_FAKE["pads"])
    names = [s.name for s in result.sequence]
    assert names.index("fold_pad") < names.index("inplace_depthwise")
    assert result.figures["arena_bytes"] == 850


def test_deterministic_for_a_seed():
    mod = MODELS_FAKE["everything"]
    reports = [run_fake(mod, seed=seed).report() for seed in (0, 0, 7, 7)]
    drop_time = [{k: v for k, v in r.items() if k != "seconds"} for r in reports]
    assert drop_time[0] == drop_time[1] and drop_time[2] == drop_time[3]
    assert reports[0]["arena_bytes"] == reports[2]["arena_bytes"]  # another seed, another path, same best


def test_respects_the_trial_budget():
    mod = MODELS_FAKE["everything"]
    full = run_fake(mod)
    assert full.stop == "exhausted" and full.trials > 3
    cut = run_fake(mod, max_trials=3, baselines=())
    assert cut.trials == 3 and cut.stop == "trials"


def test_respects_the_time_budget():
    ticks = itertools.count()
    mod = MODELS_FAKE["everything"]
    # a clock that advances one second per reading: the search reads it once per trial
    cut = run_fake(mod, time_budget=4.5, clock=lambda: float(next(ticks)), baselines=())
    assert cut.stop == "time" and 0 < cut.trials < run_fake(mod).trials
    none = run_fake(mod, time_budget=0.0, baselines=())
    assert none.trials == 0 and none.stop == "time" and none.figures == fake_measure(mod)


def test_stops_when_the_target_is_met_with_margin():
    mod = MODELS_FAKE["pads"]
    full = run_fake(mod)
    # 1000 / (1 - 0.1) fits folding's 1000 bytes, not the root's 1400
    early = run_fake(mod, target_bytes=1112, margin=0.1, baselines=())
    assert early.stop == "target" and early.figures["arena_bytes"] <= 1112 * 0.9
    assert early.trials < full.trials


def test_a_failing_pass_is_not_an_opportunity():
    result = run_fake(MODELS_FAKE["everything"])
    assert "broken" not in [s.name for s in result.sequence] and "noop" not in [s.name for s in result.sequence]


def test_learned_table_reduces_trials_and_keeps_the_result(tmp_path):
    first = {name: run_fake(mod) for name, mod in MODELS_FAKE.items()}
    table = learn(r.observations for r in first.values())
    path = table.save(tmp_path / "effects.json")
    loaded = EffectTable.load(path)
    assert loaded.to_json() == table.to_json()
    assert loaded.root_belief("noop") is False and loaded.after_belief("fold_pad", "fold_pad", True) is False
    second = {name: run_fake(mod, table=loaded) for name, mod in MODELS_FAKE.items()}
    for name in MODELS_FAKE:
        assert second[name].figures["arena_bytes"] == first[name].figures["arena_bytes"], name
        assert second[name].trials <= first[name].trials, name
    assert sum(r.trials for r in second.values()) < sum(r.trials for r in first.values())
    # leave one out: a table learned from the other models still helps on the one it never saw
    for name, mod in MODELS_FAKE.items():
        others = learn(r.observations for n, r in first.items() if n != name)
        unseen = run_fake(mod, table=others)
        assert unseen.figures["arena_bytes"] == first[name].figures["arena_bytes"], name


def test_learning_run_detects_every_state():
    mod = MODELS_FAKE["everything"]
    full = run_fake(mod, learn_all=True, model_name="everything")
    # every (state, pass) was measured: one root observation per pass, and the models are recorded
    assert all(seen == 1 for seen, _ in full.observations.root.values()) and full.observations.models == ["everything"]
    assert len(full.observations.root) == len(FAKE_PASSES)
    assert full.figures == run_fake(mod).figures


def test_package_table_loads():
    table = EffectTable.load()  # shipped with the package (may be empty before the first `learn`)
    assert isinstance(table.models, list)


# -- real models ----------------------------------------------------------------------------------------


@pytest.mark.parametrize("name, plain, best, patched", [
    # 69,092 in place; 68,652 with partial liveness (inplace_overlap); 25,060 with patches (a rolling stage; 35,000
    # with the best p x q grid, 4x1 after op 2, +1.1 % MACs)
    ("armzoo_kws_micronet_m_int8", 86_100, 68_652, 25_060),
    ("mltk_kws_mobilenetv2_int8", 76_176, 36_032, 10_960),  # 42,000 in place; 36,032 with partial liveness
])  # fmt: skip
def test_real_model_reaches_the_known_best_bit_exact(name, plain, best, patched, tmp_path, monkeypatch):
    from edgemem.frontend.tflite_import import import_tflite
    from edgemem.passes.lower import lower_to_kernels
    from edgemem.reference import seeded_inputs, tflm_outputs

    path = _model(name)
    mod = lower_to_kernels(import_tflite(path).relax_mod)
    result = orchestrate(mod, table=EffectTable(), time_budget=60.0, baselines=("none", "fixed", "tvm_default"))
    assert result.baselines["none"]["arena_bytes"] == plain
    if any(step.name == "patches" for step in result.sequence):  # patches takes seconds: reached within the budget
        best = patched
    assert result.search_figures["arena_bytes"] == best == result.figures["arena_bytes"]
    assert result.baselines["tvm_default"]["arena_bytes"] >= best  # measured now (graph part + fused scratch)
    assert result.sequence and result.sequence[-1].arena_bytes == best
    x = seeded_inputs(path, 0)
    for g, t in zip(_outputs(path, result.module, x, tmp_path, monkeypatch), tflm_outputs(path, x)):
        np.testing.assert_array_equal(np.asarray(g).reshape(np.shape(t)), t)


def _outputs(path, module, x, tmp_path, monkeypatch) -> list:
    """``module``'s outputs on ``x``: the Relax VM on the host, or, for a module with a rolling patch stage (a
    kernel calling its patch kernels by name: plain C only, passes/rolling.py), the generated C compiled for
    the host (the build's own C for that very module: the build's memory passes are replaced by it)."""
    import json

    import tvm
    from tvm import relax

    from edgemem import build_info, pipeline
    from edgemem.ir.graph import read_graph
    from edgemem.passes import optimize as opt
    from edgemem.passes.rolling import KIND
    from edgemem.target.host import build_host, run_host

    if not any(op.kind == KIND for op in read_graph(module).ops):
        vm = relax.VirtualMachine(tvm.compile(module, target="llvm"), tvm.cpu())
        out = vm["main"](*[tvm.runtime.tensor(a) for a in x])
        return [o.numpy() for o in ([out] if isinstance(out, tvm.runtime.Tensor) else list(out))]
    real = opt.optimize
    monkeypatch.setattr(opt, "optimize", lambda mod, *a: (module, real(mod, *a)[1]))
    out = tmp_path / "c"
    pipeline.build(path, "stm32f746", out, pipeline.BuildOptions(passes=("fold_pad",), compile=False, ram=1 << 30))
    info = json.loads((out / build_info.BUILD_INFO).read_text())
    run = run_host(build_host(out, tmp_path / "host", sanitize=True), [a.tobytes() for a in x], [o["bytes"] for o in info["outputs"]])
    assert run.stderr == "", run.stderr
    return [np.frombuffer(r, dtype=o["dtype"]) for r, o in zip(run.outputs, info["outputs"])]


def test_build_runs_the_orchestrator_and_reports_it(tmp_path):
    from edgemem import pipeline

    path = _model("armzoo_kws_micronet_m_int8")
    minimizing = pipeline.build(path, "stm32f746", tmp_path / "min", pipeline.BuildOptions(compile=False, opt_margin=1.0))
    info = minimizing.info
    steps = [s["pass"] for s in info["passes"]["sequence"]]
    assert steps[:2] == ["inplace_depthwise", "inplace_overlap"] and steps[2:] in ([], ["patches"])  # within 5 s
    assert info["passes"]["sequence"][0]["d_arena"] == 69_092 - 86_100
    # partial liveness (issue 20): 68,652; then patches, if the search reaches it in its 5 s: 25,060 (rolling stage)
    assert info["arena_bytes"] == (25_060 if "patches" in steps else 68_652) and info["passes"]["source"] == "search"
    assert info["pass_baselines"]["none"]["arena_bytes"] == 86_100
    assert info["pass_baselines"]["fixed"]["arena_bytes"] == 69_092
    assert info["pass_baselines"]["tvm_default"]["arena_bytes"] == 86_100  # no fusion group in MicroNet: the plain graph
    # the plain graph already fits the board with the default margin: no search trial, the fixed sequence
    early = pipeline.build(path, "stm32f746", tmp_path / "early", pipeline.BuildOptions(compile=False))
    assert early.info["passes"]["stop"] == "target" and early.info["passes"]["trials"] == 0
    assert early.info["passes"]["source"] == "baseline:fixed" and early.info["arena_bytes"] == 69_092
    fixed = pipeline.build(path, "stm32f746", tmp_path / "fixed", pipeline.BuildOptions(compile=False, opt_seconds=0))
    assert [s["pass"] for s in fixed.info["passes"]["sequence"]] == list(DEFAULT_SEQUENCE)
    assert fixed.info["arena_bytes"] == 69_092 and fixed.info["pass_baselines"] == {}


def test_the_search_measures_what_the_build_then_plans(tmp_path):
    """The orchestrator's figure for the module it hands over is the build's own arena: both come from one
    measure (catalogue.evaluate = best_schedule + schedule.liveness.arena_buffers + plan_arena, with the
    build's scheduling budget)."""
    from edgemem import pipeline

    result = pipeline.build(_model("mlperf_kws_dscnn_int8"), "stm32f746", tmp_path / "p", pipeline.BuildOptions(compile=False, opt_seconds=2.0))
    assert result.info["passes"]["arena_bytes"] == result.info["arena_bytes"] == result.plan.total_bytes


def test_module_key_tells_modules_apart_as_the_whole_module_hash_does():
    """module_key (per-kernel hashes kept per object, main hashed with free variables mapped) against TVM's whole-module structural hash, the oracle: on modules one and two catalogue passes from a
    real model, two keys are equal exactly when the two hashes are; a copy with fresh GlobalVar objects keeps
    its key; swapping two kernels' bodies under their names, or which of the two main calls where, changes it."""
    import tvm
    import tvm_ffi
    from tvm import relax

    from edgemem.frontend.tflite_import import import_tflite
    from edgemem.passes.catalogue import catalogue
    from edgemem.passes.lower import lower_to_kernels
    from edgemem.passes.orchestrate import module_key

    root = lower_to_kernels(import_tflite(_model("mlperf_kws_dscnn_int8")).relax_mod)
    passes = [p for p in catalogue() if not p.deferred]
    mods = [root]
    for p in passes:
        try:
            first = p(root)
        except Exception:  # noqa: BLE001 - a pass that does not apply here
            continue
        mods.append(first)
        for q in passes[:6]:
            try:
                mods.append(q(first))
            except Exception:  # noqa: BLE001
                pass
    fresh = {gv: relax.GlobalVar(gv.name_hint) for gv in root.functions}  # the same program, new GlobalVar objects
    copy = tvm.IRModule({fresh[gv]: f for gv, f in root.functions.items() if gv.name_hint != "main"})
    copy[fresh[root.get_global_var("main")]] = tvm_ffi.structural_map(root["main"], [(relax.GlobalVar, lambda g: fresh.get(g, g))])
    some = next(gv for gv in root.functions if gv.name_hint != "main")
    assert not copy.get_global_var(some.name_hint).same_as(some)
    assert tvm_ffi.structural_hash(copy) == tvm_ffi.structural_hash(root) and module_key(copy) == module_key(root)
    mods.append(copy)
    kernels = [gv for gv, f in root.functions.items() if gv.name_hint != "main"]
    a, b = next((x, y) for x in kernels for y in kernels if tvm_ffi.structural_hash(root[x]) != tvm_ffi.structural_hash(root[y]))
    swapped = tvm.IRModule({gv: (root[b] if gv.same_as(a) else root[a] if gv.same_as(b) else f) for gv, f in root.functions.items()})
    crossed = tvm.IRModule(dict(root.functions.items()))  # main calls b where it called a, and a where b
    crossed[root.get_global_var("main")] = tvm_ffi.structural_map(root["main"], [(relax.GlobalVar, lambda g: b if g.same_as(a) else a if g.same_as(b) else g)])
    mods += [swapped, crossed]
    assert module_key(swapped) != module_key(root) and module_key(crossed) != module_key(root)
    keys = [module_key(m) for m in mods]
    hashes = [tvm_ffi.structural_hash(m) for m in mods]
    pairs = [(i, j) for i in range(len(mods)) for j in range(i)]
    assert all((keys[i] == keys[j]) == (hashes[i] == hashes[j]) for i, j in pairs)
    assert any(hashes[i] == hashes[j] and mods[i] is not mods[j] for i, j in pairs)  # some equal pairs: the test can fail both ways
    assert len(set(hashes)) > 5


def test_when_nothing_fits_the_work_adding_fallbacks_run_until_one_fits():
    """Issue 33: the search's time budget ran out before a patch trial of many seconds, and the build refused a
    model a split fits. With nothing reached under the target, the fallbacks run from the input module (outside
    the time budget), in order of more work, until one fits; the objective then takes the fitting one. With a
    whole-tensor state that fits, none runs."""
    ran = []

    def cut(gain, macs):
        def apply(mod):
            ran.append(gain)
            return (mod[0], mod[1] | {f"cut{gain}"})
        return GraphPass(f"cut{gain}", "fake: adds work", apply, "edgemem", deferred=True), gain, macs

    def measure(mod):
        figures = dict(fake_measure(mod))
        for fact in mod[1]:
            if fact.startswith("cut"):
                figures["arena_bytes"] -= int(fact[3:])
                figures["macs"] += int(fact[3:])  # more work for a deeper cut
        return figures

    small, big, bigger = cut(200, 1), cut(500, 2), cut(700, 3)
    fallbacks = [(p.name, [p]) for p, _, _ in (small, big, bigger)]
    mod = MODELS_FAKE["plain"]  # 1000 B, 900 B with the in-place depthwise... never below 900 without a cut
    kw = dict(measure_fn=measure, key_fn=lambda m: m, table=EffectTable(), baselines=("none", "fixed"), pareto=True,
              time_budget=0.0)
    result = orchestrate(mod, FAKE_PASSES, target_bytes=600, fallbacks=fallbacks, **kw)
    assert ran == [200, 500]  # the 700-byte cut was not needed
    assert result.fits and result.figures["arena_bytes"] == 500 and result.source == "fallback:cut500"
    assert result.baselines["cut200"]["arena_bytes"] == 800
    ran.clear()
    result = orchestrate(mod, FAKE_PASSES, target_bytes=1000, fallbacks=fallbacks, **kw)
    assert ran == [] and result.fits and result.figures["arena_bytes"] == 1000
