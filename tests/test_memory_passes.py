"""edgemem's memory passes (PAD folding, in-place depthwise) change bytes, never results.

Each pass runs on the lowered module of a model; the module before and after is compiled by TVM for the
host and run by the Relax VM on seeded inputs: the outputs must be identical (and TFLite Micro's, the
independent oracle). The byte change is measured on the graph the planner sees (liveness, file order).
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from edgemem.frontend.tflite_import import import_tflite
from edgemem.ir.graph import read_graph
from edgemem.passes.fold_pad import fold_pad
from edgemem.passes.inplace import inplace_depthwise, inplace_elementwise
from edgemem.passes.lower import lower_to_kernels
from edgemem.reference import seeded_inputs, tflm_outputs
from edgemem.schedule.liveness import peak_bytes
from relax_vm import run as run_vm  # tests/relax_vm.py (pytest puts tests/ on the path)

ROOT = Path(__file__).resolve().parents[1]
MODELS = ROOT.parent / "shared" / "models"
EXAMPLE = ROOT / "examples" / "kws_tiny_int8.tflite"


def _path(name: str) -> Path:
    path = EXAMPLE if name == "kws_tiny_int8" else MODELS / f"{name}.tflite"
    if not path.is_file():
        pytest.skip(f"{path} is not here (the shared models live next to the repository)")
    return path


def _file_order_peak(mod) -> int:
    g = read_graph(mod)
    return peak_bytes(g, list(range(len(g.ops))), 4)


@pytest.mark.parametrize("name, passes, before, after", [
    ("kws_tiny_int8", [inplace_depthwise], 6_000, 6_000),  # the peak sits at a 1x1 conv: no change, no harm
    ("mlperf_kws_dscnn_int8", [inplace_depthwise], 16_000, 16_000),
    ("mltk_kws_mobilenetv2_int8", [fold_pad], 76_176, 45_360),
    ("mltk_kws_mobilenetv2_int8", [fold_pad, inplace_depthwise], 76_176, 42_000),
    ("armzoo_kws_micronet_m_int8", [inplace_depthwise], 86_100, 69_092),
    # the float input quantized over itself: 96,000 at step 0 -> the 1x1 conv's 89,600 is the peak
    ("tinyengine_mcunet_vww", [fold_pad, inplace_depthwise, inplace_elementwise], 161_472, 89_600),
    ("arm_cifar10_image_recognition_int8", [inplace_elementwise], 73_728, 57_344),  # residual ADDs
])  # fmt: skip
def test_pass_changes_bytes_not_outputs(name, passes, before, after):
    path = _path(name)
    plain = lower_to_kernels(import_tflite(path).relax_mod)
    mod = plain
    for p in passes:
        mod = p(mod)
    assert not mod.same_as(plain)
    assert _file_order_peak(plain) == before and _file_order_peak(mod) == after
    kinds = [op.kind for op in read_graph(mod).ops]
    if fold_pad in passes:
        assert "PAD" not in kinds
    if inplace_depthwise in passes or inplace_elementwise in passes:
        aliased = [read_graph(mod).ops[t.producer].kind for t in read_graph(mod).tensors.values() if t.alias_of]
        assert ("DEPTHWISE_CONV_2D" in aliased) == (inplace_depthwise in passes and name != "arm_cifar10_image_recognition_int8")
        assert inplace_elementwise not in passes or set(aliased) & {"QUANTIZE", "ADD", "MUL"}
    for seed in (0, 1):
        x = seeded_inputs(path, seed)
        got, base = run_vm(mod, x), run_vm(plain, x)
        for g, b, t in zip(got, base, tflm_outputs(path, x)):
            np.testing.assert_array_equal(g, b)
            np.testing.assert_array_equal(g, t)


def test_passes_are_idempotent_and_skip_what_they_cannot_do():
    path = _path("mltk_kws_mobilenetv2_int8")
    mod = inplace_elementwise(inplace_depthwise(fold_pad(lower_to_kernels(import_tflite(path).relax_mod))))
    assert fold_pad(mod).same_as(mod) and inplace_depthwise(mod).same_as(mod) and inplace_elementwise(mod).same_as(mod)
    float_model = lower_to_kernels(import_tflite(ROOT / "examples" / "kws_tiny_float.tflite").relax_mod)
    assert fold_pad(float_model).same_as(float_model) and inplace_depthwise(float_model).same_as(float_model)
