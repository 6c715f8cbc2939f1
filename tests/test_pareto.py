"""The memory/latency objective (passes/objective.py, issue 20): Pareto points, the choice, --max-slowdown.

- The Pareto filter against a brute-force one (every pair compared) on random point sets with ties and
  duplicates; the choice rules against a brute-force search of the same sets.
- The U-Net-like graph of tests/test_remat.py, where recomputing the pooled skip (``remat``, +MACs) lowers the
  arena: with RAM to spare the default build takes no remat; with a budget the plain arena still fits but the
  search goes on (budget x 0.9 not met) remat is tried and still not taken; with a budget only remat meets, it
  is taken; ``max_slowdown=0`` refuses it (a clear does-not-fit error naming the slowdown needed), and with RAM
  to spare takes the plain arena where 1 % takes remat. The plain and the remat builds run bit-exact under QEMU
  with measured high-water = plan, and their measured instructions are within INSTRUCTION_ERROR of the
  prediction (the U-Net is none of the models the instruction model was fitted on).
- The committed instruction model predicts every measured model outside its fit within INSTRUCTION_ERROR.
- The CLI: --max-slowdown validated where it enters; --minimize still takes the least arena.
"""

from __future__ import annotations

import json
import math
import os
import random
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from edgemem import pipeline
from edgemem.board import load_board
from edgemem.errors import DoesNotFitError
from edgemem.passes import objective as obj

sys.path.insert(0, str(Path(__file__).resolve().parent))
from test_remat import unet_model  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
INSTRUCTION_ERROR = 0.20  # the model's stated error on models outside its fit (benchmarks/pareto.md: at most 16.2 %)
needs_arm = pytest.mark.skipif(not shutil.which("arm-none-eabi-gcc") or not shutil.which("qemu-system-arm"),
                               reason="needs arm-none-eabi-gcc and qemu-system-arm")  # fmt: skip


# -- the filter and the choice, against brute force ------------------------------------------------------


def _random_points(rng: random.Random, n: int) -> list:
    hi = rng.choice((3, 6, 50))  # small ranges: many ties and duplicates
    base = rng.choice((0, 1000))  # around 1,000 instructions some differ by less than TIE_PERCENT
    return [obj.Point((f"p{i}",), rng.randint(0, hi), rng.randint(0, hi), base + rng.randint(1, hi + 1)) for i in range(n)]


def _brute_front(costs: list[tuple]) -> set:
    def worse_or_equal(a, b):  # a no better than b in every cost
        return a[0] >= b[0] and a[1] >= b[1] and a[2] >= b[2]

    return {a for a in costs if not any(worse_or_equal(a, b) and a != b for b in costs)}


def test_pareto_front_matches_brute_force():
    rng = random.Random(20)
    for _ in range(400):
        points = _random_points(rng, rng.randint(0, 25))
        front = obj.pareto_front(points)
        costs = [p.costs() for p in front]
        assert len(costs) == len(set(costs))  # one point per distinct cost
        assert set(costs) == _brute_front([p.costs() for p in points])
        assert all(any(p is q for q in points) for p in front)


def _brute_least_arena(cands: list) -> obj.Point:
    return next(p for p in cands if p.arena_bytes == min(q.arena_bytes for q in cands))  # the first in order


def test_choice_against_brute_force():
    rng = random.Random(7)
    for _ in range(400):
        points = _random_points(rng, rng.randint(1, 20))
        budget = rng.randint(0, 60)
        fastest = min(p.instructions for p in points)
        fitting = [p for p in points if p.arena_bytes <= budget]
        c = obj.choose(points, budget)
        if fitting:  # the fewest instructions that fit; of those as fast (no more MACs, within TIE_PERCENT), the least arena
            q = min(fitting, key=lambda p: (p.instructions, p.arena_bytes, p.macs))
            ties = [p for p in fitting if p.macs <= q.macs and (p.instructions - q.instructions) * 100 <= obj.TIE_PERCENT * q.instructions]
            assert c.fits and c.point is _brute_least_arena(ties)
        else:
            assert not c.fits and c.point is _brute_least_arena(points)
        for pct in (0.0, 10.0, 50.0, math.inf):
            c = obj.choose(points, budget, pct)
            allowed = [p for p in points if p.instructions * 100 <= fastest * (100 + pct)]
            assert c.point is _brute_least_arena(allowed)
            assert c.fits == (c.point.arena_bytes <= budget)


# -- the U-Net where remat lowers the arena ---------------------------------------------------------------

PLAIN, REMAT = 26_624, 24_576  # without the in-place passes (inplace=False keeps the search short): measured here


@pytest.fixture(scope="module")
def unet(tmp_path_factory) -> Path:
    path = tmp_path_factory.mktemp("pareto") / "unet_wide.tflite"
    path.write_bytes(unet_model(32))
    return path


def _build(unet: Path, out: Path, budget: int | None = None, compile: bool = False, **kw):
    """A build whose RAM budget (after the stack) is ``budget``; the search runs to exhaustion (not the clock)."""
    ram = None if budget is None else budget + load_board("stm32f746").stack_size
    options = pipeline.BuildOptions(compile=compile, ram=ram, inplace=False, opt_seconds=600, **kw)
    return pipeline.build(unet, "stm32f746", out, options).info


def _sequences(info) -> list:
    return [p["sequence"] for p in info.pareto["points"]]


def test_default_objective_takes_remat_only_when_the_ram_asks(unet, tmp_path):
    plenty = _build(unet, tmp_path / "plenty")  # fits with 10 % to spare: the search stops at once
    assert plenty.arena_bytes == PLAIN and plenty.pareto["taken"]["sequence"] == []
    # fits, but not with the margin: the search goes on and tries remat, which is smaller and slower
    near = _build(unet, tmp_path / "near", budget=PLAIN + 384)
    assert near.passes["stop"] == "exhausted" and ["remat"] in _sequences(near)
    assert near.arena_bytes == PLAIN and near.pareto["taken"]["sequence"] == []
    points = {tuple(p["sequence"]): p for p in near.pareto["points"]}
    assert points[("remat",)]["arena_bytes"] == REMAT and points[("remat",)]["macs"] > points[()]["macs"]
    assert points[("remat",)]["instructions"] > points[()]["instructions"] and not points[("remat",)]["taken"]
    tight = _build(unet, tmp_path / "tight", budget=REMAT + 448)  # only remat fits
    assert tight.arena_bytes == REMAT and tight.pareto["taken"]["sequence"] == ["remat"]
    assert tight.pareto["objective"] == "least_instructions_fitting" and tight.pareto["taken"]["fits"]
    assert [s["pass"] for s in tight.passes["sequence"]] == ["remat"]


def test_max_slowdown(unet, tmp_path):
    with pytest.raises(DoesNotFitError) as e:
        _build(unet, tmp_path / "refused", budget=REMAT + 448, max_slowdown=0.0)
    assert "--max-slowdown 0" in str(e.value) and f"{REMAT:,} B, passes remat" in str(e.value)
    # nothing half-written: the refusal's report alone (report/refusal.py)
    assert sorted(p.name for p in (tmp_path / "refused").iterdir()) == [".edgemem-output", "refusal.json", "report.html"]
    # with RAM to spare, the bound decides: 0 % keeps the plain arena, 1 % (remat costs ~0.9 %) takes remat
    zero = _build(unet, tmp_path / "zero", max_slowdown=0.0)
    one = _build(unet, tmp_path / "one", max_slowdown=1.0)
    assert zero.arena_bytes == PLAIN and zero.pareto["objective"] == "least_arena_within_slowdown"
    assert one.arena_bytes == REMAT and 0 < one.pareto["taken"]["instructions"] / zero.pareto["taken"]["instructions"] - 1 <= 0.01
    minimize = _build(unet, tmp_path / "min", opt_margin=1.0)  # what --minimize asks: any slowdown
    assert minimize.arena_bytes == REMAT and minimize.pareto["objective"] == "least_arena"


@needs_arm
def test_both_choices_bit_exact_under_qemu_and_predicted(unet, tmp_path):
    pytest.importorskip("tflite_micro")
    from edgemem.device_run import run as run_on_device

    for name, budget, arena in (("plain", None, PLAIN), ("remat", REMAT + 448, REMAT)):
        info = _build(unet, tmp_path / name, budget=budget, compile=True)
        assert info.arena_bytes == arena
        res = run_on_device(tmp_path / name, seed=3)
        assert res["bit_exact"] is True and res["arena_high_water_bytes"] == arena, res
        predicted = info.pareto["taken"]["instructions"]
        assert abs(predicted - res["instructions"]) <= INSTRUCTION_ERROR * res["instructions"], (name, predicted, res["instructions"])


# -- the instruction model ---------------------------------------------------------------------------------


def test_instruction_model_within_its_error_outside_the_fit():
    """The committed coefficients against the committed QEMU counts (benchmarks/pareto_fit.py measure) of every
    measured model the fit did not use; and on the fitted ones too (a fit that misses its own data is wrong)."""
    model = obj.InstructionModel.load()
    data = json.loads((ROOT / "benchmarks" / "pareto_fit_data.json").read_text())
    outside = [n for n in data if n not in model.fitted_on]
    assert len(outside) >= 5 and model.fitted_on and model.command.startswith("benchmarks/pareto_fit.py fit")
    for name, d in data.items():
        predicted = sum(model.predict_op(r) for r in d["rows"])
        measured = sum(r["instructions"] for r in d["rows"])
        assert abs(predicted - measured) <= INSTRUCTION_ERROR * measured, (name, predicted, measured)


def test_fit_recovers_known_coefficients():
    """objective.fit on rows made from known coefficients gives them back (and drops a class's intercept
    that would stand above MAX_PER_CALL)."""
    rng = random.Random(1)
    rows = []
    for _ in range(40):
        macs, outs = rng.randint(1_000, 500_000), rng.randint(10, 20_000)
        rows.append({"class": "CONV_2D 1x1", "macs": macs, "outputs": outs, "fused": [], "instructions": 1.5 * macs + 20 * outs + 300})
        rows.append({"class": "ADD", "macs": 0, "outputs": outs, "fused": [], "instructions": 43 * outs})
    fitted = obj.fit(rows)
    c, a = fitted["CONV_2D 1x1"], fitted["ADD"]
    assert (c.per_mac, c.per_output, round(c.per_call)) == (1.5, 20.0, 300) and (a.per_output, a.per_call) == (43.0, 0.0)


# -- the CLI ------------------------------------------------------------------------------------------------


def _cli(*args: str) -> subprocess.CompletedProcess:
    env = {**os.environ, "COLUMNS": "80", "TERM": "xterm"}
    return subprocess.run([sys.executable, "-m", "edgemem.cli", *args], capture_output=True, text=True, cwd=ROOT,
                          env=env, timeout=600)  # fmt: skip


@pytest.mark.parametrize("value, words", [("-1", "finite percentage >= 0"), ("fast", "is not a percentage"),
                                          ("nan", "finite percentage >= 0")])  # fmt: skip
def test_cli_refuses_a_bad_slowdown(unet, tmp_path, value, words):
    p = _cli("build", str(unet), "-o", str(tmp_path / "p"), f"--max-slowdown={value}")
    assert p.returncode == 2 and words in " ".join(p.stderr.split()) and "Traceback" not in p.stderr
    assert not (tmp_path / "p").exists()


def test_cli_refuses_conflicting_objectives(unet, tmp_path):
    for extra, words in ((["--minimize"], "cannot be used together"), (["--passes", "remat"], "nothing to choose from"),
                         (["--opt-time", "0"], "nothing to choose from")):  # fmt: skip
        p = _cli("build", str(unet), "-o", str(tmp_path / "p"), "--max-slowdown", "5", *extra)
        assert p.returncode == 2 and words in " ".join(p.stderr.split()), p.stderr
        assert "Traceback" not in p.stderr


def test_cli_minimize_prints_the_points_in_80_columns(unet, tmp_path):
    p = _cli("build", str(unet), "-o", str(tmp_path / "p"), "--minimize", "--opt-time", "600")
    assert p.returncode == 0, p.stderr
    lines = p.stdout.splitlines()
    assert max(len(line) for line in lines) <= 80 and "…" not in p.stdout
    assert "Pareto points of" in p.stdout and "taken (>): the least arena" in " ".join(p.stdout.split())
    info = json.loads((tmp_path / "p" / "edgemem.json").read_text())
    taken = info["pareto"]["taken"]
    assert info["arena_bytes"] == taken["arena_bytes"] == min(q["arena_bytes"] for q in info["pareto"]["points"])
    assert "remat" in taken["sequence"]  # with the in-place passes too, the least arena recomputes the skip
    assert any(line.startswith("│ > │") for line in lines)
    # report.html draws the same points, the taken one marked
    page = (tmp_path / "p" / "report.html").read_text()
    dots = re.findall(r'<circle [^>]*data-taken="(true|false)" data-arena="(\d+)" data-instructions="(\d+)"', page)
    assert sorted((int(a), int(i)) for _, a, i in dots) == sorted((q["arena_bytes"], q["instructions"]) for q in info["pareto"]["points"])
    assert [(int(a), int(i)) for t, a, i in dots if t == "true"] == [(taken["arena_bytes"], taken["instructions"])]
    assert 'id="pareto-table"' in page and page.count('<tr class="peak"><td>taken</td>') == 1


def test_pareto_points_are_the_brute_force_front_of_a_real_search(unet, tmp_path):
    """On the build's own candidates (the U-Net's search): every point reported is non-dominated among the
    points reported, and the taken one among them."""
    info = _build(unet, tmp_path / "b", budget=PLAIN + 384)
    pts = [(p["arena_bytes"], p["macs"], p["instructions"]) for p in info.pareto["points"]]
    assert set(pts) == _brute_front(pts) and len(pts) == len(set(pts))
    assert sum(p["taken"] for p in info.pareto["points"]) == 1 and info.pareto["candidates"] >= len(pts)


# -- parameterized passes (a pass's variants, e.g. patch splits) as moves of the search ------------------------


def test_variants_are_moves_costed_and_chosen_by_the_objective():
    """A fake pass offering three splits (arena down, MACs up, as patch-based execution does) next to a free
    in-place pass: each variant is a move of its own, costed like any state; the objective takes the free pass
    when it fits, the cheapest split that fits otherwise, and the least arena within the slowdown bound."""
    from edgemem.passes.catalogue import GraphPass
    from edgemem.passes.effects import EffectTable
    from edgemem.passes.orchestrate import orchestrate

    splits = {"2x2": (700, 0.04), "3x3": (550, 0.09), "4x4": (500, 0.20)}  # label -> (arena, extra MACs)

    def split(label):
        return lambda mod: mod if any(m.startswith("split") for m in mod) else mod | {f"split{label}"}

    def measure(mod):
        arena, extra = 1000, 0.0
        for m in mod:
            if m.startswith("split"):
                arena, extra = splits[m[5:]][0], splits[m[5:]][1]
        arena -= 100 if "inplace" in mod else 0
        macs = int(10_000 * (1 + extra))
        return {"arena_bytes": arena, "peak_bytes": arena, "flash_bytes": 0, "macs": macs, "ops": 3, "tensors": 4,
                "inplace_tensors": int("inplace" in mod), "instructions": 2 * macs}  # fmt: skip

    passes = [GraphPass("inplace", "free", lambda mod: mod | {"inplace"}, "edgemem"),
              GraphPass("patches", "fake splits", split("2x2"), "edgemem",
                        variants=lambda mod: [(k, split(k)) for k in splits])]  # fmt: skip

    def run(budget, max_slowdown=None):
        return orchestrate(frozenset(), passes, table=EffectTable(), measure_fn=measure, key_fn=lambda m: m,
                           baselines=("none",), target_bytes=budget, margin=1.0, pareto=True,
                           max_slowdown=max_slowdown, time_budget=60)  # fmt: skip

    r = run(950)
    assert r.pareto["taken"]["sequence"] == ["inplace"] and r.fits
    names = {n for p in r.pareto["points"] for n in p["sequence"]}
    assert {"patches[2x2]", "patches[3x3]", "patches[4x4]"} <= names  # every variant tried, each a point
    assert [s.name for s in run(650).sequence] in (["patches[2x2]", "inplace"], ["inplace", "patches[2x2]"])
    assert run(480).pareto["taken"]["arena_bytes"] == 450  # 3x3 + inplace: fits, fewer instructions than 4x4
    assert run(420).pareto["taken"]["arena_bytes"] == 400 and run(420).fits  # 4x4 + inplace: the only fit
    assert run(2000, 10.0).pareto["taken"]["arena_bytes"] == 450  # 3x3 (+9 %) + inplace; 4x4 is +20 %
    assert not run(600, 0.0).fits  # 0 %: the free pass only (900 B), which does not fit 600 B
