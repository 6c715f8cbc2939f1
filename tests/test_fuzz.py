"""Fuzzing the model front end with atheris (benchmarks/fuzz.py): a bounded run of 10,000 inputs in CI.

Acceptance: no crash (an exception other than edgemem's errors), no hang (an input over the per-input timeout),
and the run really happened (libFuzzer reports every run done). The long run is in benchmarks/fuzz.md.
"""

from __future__ import annotations

import base64
import importlib.util
import random
import sys
from pathlib import Path

import pytest

from edgemem import budget
from edgemem.board import load_board
from edgemem.errors import EdgememError

pytest.importorskip("atheris")

ROOT = Path(__file__).resolve().parents[1]
CI_RUNS = 10_000


def _fuzz_module():
    spec = importlib.util.spec_from_file_location("edgemem_benchmarks_fuzz", ROOT / "benchmarks" / "fuzz.py")
    mod = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = mod
    spec.loader.exec_module(mod)
    return mod


fuzz = _fuzz_module()


def _small_artifacts(folder: Path, names: list[str]) -> str:
    """Inputs that crashed, as base64 when small: a CI machine's /tmp is gone by the time anyone reads its log."""
    shown = [f"{n} (base64): {base64.b64encode(data).decode()}\n" for n in names
             if len(data := (folder / n).read_bytes()) <= 16_384]  # fmt: skip
    return "".join(shown)


def test_atheris_ten_thousand_inputs_no_crash_no_hang(tmp_path):
    res = fuzz.run_fuzzer(CI_RUNS, seeds="small", timeout=10, seed=12345, work_dir=tmp_path, wall_limit=900)
    detail = (f"artifacts {res['artifacts']} in {tmp_path}; the target's traceback:\n{res['crash_traceback']}\n"
              f"{_small_artifacts(tmp_path / 'artifacts', res['artifacts'])}libFuzzer said:\n{res['output_tail']}")
    assert res["crashes"] == 0 and res["hangs"] == 0, detail
    assert res["runs_done"] is not None and res["runs_done"] >= CI_RUNS, detail
    assert res["seeds"] >= 3 and res["cov"] and res["cov"] > 50, detail  # it ran the real target on real seeds


def test_the_harness_reports_a_crash(tmp_path, monkeypatch):
    """The yardstick can fail: an exception that is not an EdgememError is reported as a crash."""
    target = tmp_path / "broken_fuzz.py"
    target.write_text((ROOT / "benchmarks" / "fuzz.py").read_text().replace(
        "    path = scratch / \"input.tflite\"\n", "    if len(data) % 7 == 3:\n        raise KeyError('planted')\n"
        "    path = scratch / \"input.tflite\"\n", 1))  # fmt: skip
    spec = importlib.util.spec_from_file_location("edgemem_broken_fuzz", target)
    broken = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = broken
    spec.loader.exec_module(broken)
    for name in ("ROOT", "MODELS", "EXAMPLES"):  # the copy lives in tmp_path; seeds come from the real places
        monkeypatch.setattr(broken, name, getattr(fuzz, name))
    res = broken.run_fuzzer(2000, seeds="small", timeout=10, work_dir=tmp_path / "w", wall_limit=600)
    assert res["seeds"] >= 3, res
    assert res["crashes"] >= 1 and any(a.startswith("crash-") for a in res["artifacts"]), res["output_tail"]
    assert "KeyError: 'planted'" in res["crash_traceback"], res["crash_traceback"]


def test_seed_corpus_is_read_cleanly_and_slim_seeds_keep_the_structure(tmp_path):
    """Every seed passes the checks the fuzzer mutates away from (or fails only with edgemem's errors), and a slim
    copy has the same operators and tensors as its model."""
    from edgemem.frontend.footprint import op_names
    from edgemem.frontend.tflite_import import parse_tflite

    files = fuzz.seed_files("all")
    assert files, "no seed models"
    for f in files:
        data = f.read_bytes()
        slim = fuzz.slim_model(data)
        assert slim is not None and len(slim) <= len(data), f.name
        full, cut = parse_tflite(data, f), parse_tflite(slim, f)
        assert op_names(full) == op_names(cut), f.name
        assert full.Subgraphs(0).TensorsLength() == cut.Subgraphs(0).TensorsLength(), f.name


def test_random_byte_corruption_only_raises_edgemem_errors(tmp_path):
    """An independent, unguided check next to libFuzzer: seeded random overwrites, insertions and cuts of each
    small seed model; the front end may only refuse them with EdgememError."""
    board = budget.board_with_budget(load_board(fuzz.BOARD), None, None)
    scratch = tmp_path
    rng = random.Random(2024)
    seeds = [f.read_bytes() for f in fuzz.seed_files("small")]
    outcomes: dict[str, int] = {}
    for _ in range(1500):
        data = bytearray(rng.choice(seeds))
        for _ in range(rng.randint(1, 8)):
            pos = rng.randrange(len(data))
            kind = rng.random()
            if kind < 0.6:
                data[pos] = rng.randrange(256)
            elif kind < 0.8:
                data[pos:pos] = rng.randbytes(rng.randint(1, 16))
            else:
                del data[pos:]
                if not data:
                    break
        try:
            outcome = fuzz.check_model_bytes(bytes(data), scratch, board) or "accepted"
        except EdgememError as exc:  # pragma: no cover - check_model_bytes catches these itself
            outcome = type(exc).__name__
        outcomes[outcome] = outcomes.get(outcome, 0) + 1
    assert outcomes.get("ModelFileError", 0) > 100, outcomes  # most corruptions are caught as a bad file
