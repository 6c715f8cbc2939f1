"""GELU (exact and tanh-approximate; int8 as TFLite's 256-entry table, float32 through TVM) against the reference.
TFLite Micro has no GELU kernel: LiteRT is the oracle (int8 within one step, float within 1e-5 relative)."""

from __future__ import annotations

from pathlib import Path

import pytest

from op_check import check_model

OPS = Path(__file__).resolve().parent / "models" / "ops"


@pytest.mark.parametrize("name", sorted(p.stem for p in OPS.glob("GELU-*.tflite")))
def test_gelu_matches_the_reference(name, tmp_path):
    result = check_model(OPS / f"{name}.tflite", tmp_path)
    assert result.oracle == "litert"  # TFLM has no GELU: the day it has, this test should compare with it
