"""Float islands inside int8 models: TFLite DEQUANTIZE of an int8 activation -> float operators -> QUANTIZE,
which TensorFlow's full-integer converter leaves around operators it does not quantize (FLOOR, SIN, COS, NEG in
a LayerNormalization, ...). TFLM runs them in float; edgemem runs the float operators as float kernels (TVM's
legalization) between TFLM's DEQUANTIZE and QUANTIZE kernels. Outputs compared with TFLM: int8 bit-exact, float
within 1e-5 relative, on the host (seeds 0-2) and under QEMU.

Models: hand-made (tests/island_models.py: a chain with a float ADD back onto the dequantized tensor, a float
LayerNormalization with a float model output, a one-operator island) and converter-made
(tests/models/gen_islands.py: FLOOR then MUL, SIN then FLOOR, SIN and COS of one DEQUANTIZE; int8 and float io).
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

import island_models
from edgemem import device_run, pipeline
from edgemem.frontend.tflite_import import import_tflite
from edgemem.ir.graph import read_graph
from edgemem.passes.lower import lower_to_kernels
from edgemem.reference import reference_outputs, seeded_inputs
from op_check import assert_outputs_match, check_model

ISLANDS = Path(__file__).resolve().parent / "models" / "islands"
HAND_MADE = ["chain_model", "layernorm_model", "single_op_model"]


def _hand_made(name: str, tmp: Path) -> Path:
    path = tmp / f"{name}.tflite"
    path.write_bytes(getattr(island_models, name)())
    return path


@pytest.mark.parametrize("name", HAND_MADE)
def test_hand_made_island_matches_tflm(name, tmp_path):
    assert check_model(_hand_made(name, tmp_path), tmp_path).oracle == "tflm"


@pytest.mark.parametrize("name", sorted(p.stem for p in ISLANDS.glob("*.tflite")))
def test_converter_island_matches_tflm(name, tmp_path):
    assert check_model(ISLANDS / f"{name}.tflite", tmp_path).oracle == "tflm"


def test_island_operators_become_float_kernels_between_dequantize_and_quantize(tmp_path):
    """The one-operator island is not taken for an int8 MUL: a DEQUANTIZE kernel, a float multiply, a QUANTIZE."""
    graph = read_graph(lower_to_kernels(import_tflite(_hand_made("single_op_model", tmp_path)).relax_mod))
    kinds = [op.kind for op in graph.ops]
    assert kinds[0] == "DEQUANTIZE" and kinds[-1] == "QUANTIZE" and "MUL" not in kinds, kinds
    assert len(kinds) == 3 and graph.tensors[graph.ops[1].inputs[0]].dtype == "float32"


@pytest.mark.parametrize("name", ["layernorm_model", "sin_floor-int8", "sin_cos_floatio-int8"])
def test_island_runs_under_qemu_like_tflm(name, tmp_path):
    path = ISLANDS / f"{name}.tflite" if "-" in name else _hand_made(name, tmp_path)
    pipeline.build(path, "stm32f746", tmp_path / "proj", pipeline.BuildOptions(opt_seconds=0, schedule_seconds=0.5))
    for seed in (0, 1):
        inputs = seeded_inputs(path, seed)
        got = device_run.run(tmp_path / "proj", inputs, timeout_s=300)["output_arrays"]
        want, oracle = reference_outputs(path, inputs)
        assert oracle == "tflm"
        assert [g.dtype for g in got] == [np.asarray(w).dtype for w in want]
        assert_outputs_match(got, want, oracle, f"{name} seed {seed}")
