"""int16 (16x8) pools, SUM, MEAN and RESIZE_NEAREST_NEIGHBOR against TFLite Micro: the converter's int16 models
of tests/models/gen_reduce.py (int16 and float edges) plus hand-made edge cases (zero points, multipliers above
one, saturation, fused activations)."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import numpy as np
import pytest

from op_check import check_model

sys.path.insert(0, str(Path(__file__).resolve().parent))
from test_ops_reduce import _options, mm, pool_model  # noqa: E402

OPS = Path(__file__).parent / "models" / "ops"
FAMILY = ("SUM", "MEAN", "AVERAGE_POOL_2D", "MAX_POOL_2D", "RESIZE_NEAREST_NEIGHBOR")
CONVERTED = sorted(p.name for p in OPS.glob("*-int16.tflite") if p.name.split("-")[0] in FAMILY)


@pytest.mark.parametrize("name", CONVERTED)
def test_converted(name, tmp_path):
    result = check_model(OPS / name, tmp_path)
    assert result.oracle == "tflm", f"{name}: TFLite Micro did not run the model (oracle {result.oracle})"
