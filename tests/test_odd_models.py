"""Differential fuzzing in CI: valid but odd models (tests/odd_models.py: hostile and duplicate names, one-pixel
shapes, 1x1 pools, extreme quantization, fan-out, intermediate outputs) built for the host and compared with TFLite
Micro. Each must match or be refused cleanly; none may build wrong, crash, or run a command its names hold.
`benchmarks/fuzz.py --target odd` runs the same on thousands of seeds (benchmarks/fuzz.md)."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "benchmarks"))

pytest.importorskip("tflite_micro")
import fuzz  # noqa: E402  (benchmarks/fuzz.py)

SEEDS = [*range(1, 17), 215]  # 4: an output named like another tensor; 13: a C comment closed by an input name;
# 215: an int8 MUL whose product times 2^17 leaves int32 (TFLM wraps it)


@pytest.mark.parametrize("seed", SEEDS)
def test_odd_model_matches_or_is_refused(seed, tmp_path):
    work = tmp_path / "work"
    work.mkdir()
    outcome, detail = fuzz.odd_outcome(seed, work)
    assert outcome in ("match", "refused", "oracle refuses"), f"seed {seed}: {outcome}: {detail}"


@pytest.mark.xfail(strict=True, reason="known wrong answer, found at stop 38's end (benchmarks/fuzz.md): an int8 MUL "
                   "differs from TFLM by 253 on host and under QEMU; not yet diagnosed")
def test_known_wrong_mul_seed_22626(tmp_path):
    outcome, detail = fuzz.odd_outcome(22626, tmp_path)
    assert outcome in ("match", "refused", "oracle refuses"), f"seed 22626: {outcome}: {detail}"


def test_the_generator_covers_what_it_claims():
    """The seeds above hold the odd forms the module promises (so a generator change cannot quietly drop them)."""
    from odd_models import odd_model

    descriptions = " ".join(odd_model(s, "/nonexistent/MARK").description for s in SEEDS)
    for form in ("MAX1x1", "AVG1x1", "FC", "ADD", "MUL", "DW", "CONV"):
        assert form in descriptions, form
