"""Reductions, arg-min/max, cumulative sum, bilinear resize and pools against TFLite Micro: every converter-made
model of tests/models/ops/ this family owns (tests/models/gen_reduce.py), plus hand-made edge cases."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from op_check import check_model

OPS = Path(__file__).parent / "models" / "ops"
FAMILY = ("SUM", "REDUCE_MAX", "REDUCE_MIN", "REDUCE_ALL", "REDUCE_ANY", "MEAN", "ARG_MAX", "ARG_MIN", "CUMSUM",
          "RESIZE_BILINEAR", "L2_POOL_2D", "AVERAGE_POOL_2D", "MAX_POOL_2D")
CONVERTED = sorted(p.name for p in OPS.glob("*.tflite") if p.name.split("-")[0] in FAMILY)


@pytest.mark.parametrize("name", CONVERTED)
def test_converted(name, tmp_path):
    check_model(OPS / name, tmp_path)
