"""Whole architectures end to end: the Keras models of tests/models/gen_architectures.py (MobileNet v1/v2/v3,
an EfficientNet-like net, a transformer encoder, U-Nets, GRU/LSTM, a dilated 1-D conv net, a transposed-conv
autoencoder, a keyword-spotting DS-CNN, an LSTM denoiser), each as int8 with int8 io, int8 with the converter's
float io and float32 -- and the audio and small-vision ones also in 16x8 (int16 activations, int16 or float io) --
built for the
STM32F746 (RAM/flash raised where a model does not fit it: QEMU's mps2-an500 stand-in holds 4 MiB of each), run
under QEMU on a seeded input and compared with the reference: TFLite Micro in a child process, LiteRT where TFLM
cannot run the model at all (reference.reference_outputs). int8 outputs bit-exact with TFLM (one step where
LiteRT is the oracle, its rounding of some ties differs), float within 1e-5 relative (tests/op_check.py).

A model edgemem cannot build yet is an expected failure whose reason names what it needs, computed from
edgemem's own support check (frontend/support.py) plus the quantization forms the check cannot see from the
operator name (per-channel FULLY_CONNECTED weights; SHAPE, which only a constant fold can run); the xfail is
strict, so the day the operator lands the test runs for real. Files the converter could not make at all are
listed in tests/models/arch/FAILED.json, the operators of every file in tests/models/arch/MANIFEST.json.
"""

from __future__ import annotations

import functools
import importlib.util
import tempfile
from pathlib import Path

import numpy as np
import pytest

from edgemem import device_run, pipeline
from edgemem.errors import UnsupportedModelError
from edgemem.reference import reference_outputs, seeded_inputs

from op_check import assert_outputs_match, dequantized_steps

ARCH = Path(__file__).resolve().parent / "models" / "arch"
MIB = 1024 * 1024
SEED = 0
BIG = {"ram": 4 * MIB, "flash": 4 * MIB}  # QEMU's mps2-an500 stand-in holds 4 MiB of each

# Models that do not fit the STM32F746's 320 KiB of RAM / 1 MiB of flash as they are (all float32 models are
# planned for QEMU's 4 MiB: float activations take 4x the bytes).
NEEDS_MORE = {"mobilenet_v2-int8", "mobilenet_v2_floatio-int8", "mobilenet_v3_small-int8", "mobilenet_v3_small_floatio-int8",
              "mobilenet_v1-int8", "mobilenet_v1_floatio-int8"}  # fmt: skip


def _per_channel_fully_connected(model) -> bool:
    sg = model.Subgraphs(0)
    for i in range(sg.OperatorsLength()):
        op = sg.Operators(i)
        code = model.OperatorCodes(op.OpcodeIndex())
        if max(code.BuiltinCode(), code.DeprecatedBuiltinCode()) != 9 or op.InputsLength() < 2:  # FULLY_CONNECTED
            continue
        w = sg.Tensors(int(op.Inputs(1)))
        q = w.Quantization()
        if w.Type() == 9 and q is not None and q.ScaleLength() > 1:
            return True
    return False


@functools.lru_cache(maxsize=1)
def _per_channel_fully_connected_runs() -> bool:
    """Whether edgemem lowers an int8 FULLY_CONNECTED with per-channel weights: tried on a hand-made one."""
    import sys

    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "examples"))
    import make_example_model as mm

    from edgemem.frontend.tflite_import import import_tflite
    from edgemem.passes.lower import lower_to_kernels

    mb = mm.ModelBuilder(description="per-channel FULLY_CONNECTED probe")
    x = mb.tensor("x", (1, 8), np.int8, mm.qparams([0.05], [0]))
    w = mb.const("w", np.arange(32, dtype=np.int8).reshape(4, 8), mm.qparams([0.01, 0.02, 0.03, 0.04], [0, 0, 0, 0], 0))
    b = mb.const("b", np.zeros(4, np.int32), mm.qparams([0.0005, 0.001, 0.0015, 0.002], [0, 0, 0, 0], 0))
    y = mb.tensor("y", (1, 4), np.int8, mm.qparams([0.1], [0]))
    mb.op(mm.OP.FULLY_CONNECTED, [x, w, b], [y], *mm.fully_connected_options())
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "probe.tflite"
        path.write_bytes(mb.serialize([x], [y]))
        try:
            lower_to_kernels(import_tflite(path).relax_mod)
        except UnsupportedModelError:
            return False
    return True


def needs(path: Path) -> list[str]:
    """What edgemem lacks to build this model: its unsupported operators (the support check), and the forms that
    check cannot see by operator name alone."""
    from edgemem.frontend.ops import registry
    from edgemem.frontend.support import unsupported_operators
    from edgemem.frontend.tflite_import import inspect_tflite

    try:
        model, op_names, _, _ = inspect_tflite(path)
    except UnsupportedModelError as exc:  # the file as a whole (e.g. a WHILE whose trip count is not static)
        return [str(exc).split("; ", 1)[-1]]
    missing = sorted({f"{u.name} ({u.operand_type})" for u in unsupported_operators(model, op_names)})
    if _per_channel_fully_connected(model) and not _per_channel_fully_connected_runs():
        missing.append("per-channel FULLY_CONNECTED (int8)")
    if "SHAPE" in op_names and not any(m.startswith("SHAPE") for m in missing) and registry.find("SHAPE", "float32") is None \
            and importlib.util.find_spec("edgemem.frontend.fold") is None:  # fmt: skip
        missing.append("SHAPE (constant fold of SHAPE -> STRIDED_SLICE -> PACK -> RESHAPE)")
    sg = model.Subgraphs(0)
    for name, why in _FRONTEND_GAPS.items():
        types = {_output_type(sg, sg.Operators(i)) for i, n in enumerate(op_names) if n == name}
        missing += [f"{name} ({t}): {why}" for t in sorted(types) if t in why and registry.find(name, t) is None]
    return missing


def _output_type(sg, op) -> str:
    """The type of an operator's first output (TRANSPOSE_CONV's first input is its int32 output shape, which the
    support check takes for its operand type: it passes an int8 TRANSPOSE_CONV as int32)."""
    from edgemem.frontend.ops.registry import _TFL_TYPES

    return _TFL_TYPES.get(sg.Tensors(int(op.Outputs(0))).Type(), "unknown")


# Operators the support check passes (TVM's converter takes them) but edgemem cannot build from its output yet:
# without a lowering of edgemem's own (for the output types named) they fail after the import.
_FRONTEND_GAPS = {
    "TRANSPOSE_CONV": "float32: TVM legalizes no relax.nn.conv2d_transpose; int8: integerize has no form of it",
}


# The 100-step WHILE models are checked on the host (tests/test_while.py): their unrolled build takes minutes, and
# the 10-step GRU and LSTM run the same unrolling under QEMU here.
HOST_ONLY = {"gru_seq100-float32", "lstm_seq100-float32"}


def _params():
    params = []
    for path in sorted(ARCH.glob("*.tflite")):
        if path.stem in HOST_ONLY:
            continue
        missing = needs(path)
        marks = [pytest.mark.xfail(strict=True, raises=UnsupportedModelError, reason=f"needs {', '.join(missing)}")] if missing else []
        params.append(pytest.param(path.stem, marks=marks, id=path.stem))
    return params


def budget(name: str) -> dict:
    return BIG if name.endswith("-float32") or name in NEEDS_MORE else {}


@pytest.mark.parametrize("name", _params())
def test_architecture_runs_under_qemu_like_the_reference(name, tmp_path):
    path = ARCH / f"{name}.tflite"
    options = pipeline.BuildOptions(opt_seconds=0, schedule_seconds=0.5, **budget(name))
    result = pipeline.build(path, "stm32f746", tmp_path / "proj", options)
    assert result.info["fits"]
    inputs = seeded_inputs(path, SEED)
    run = device_run.run(tmp_path / "proj", inputs, timeout_s=600)
    want, oracle = reference_outputs(path, inputs)  # computed here, independently of device_run.run
    got = run["output_arrays"]
    assert [(g.dtype, g.shape) for g in got] == [(np.asarray(w).dtype, np.asarray(w).shape) for w in want]
    assert_outputs_match(got, want, oracle, f"{name} seed {SEED}", dequantized_steps(path))
    assert run["arena_high_water_bytes"] <= result.info["arena_bytes"]


def test_every_architecture_has_its_three_forms():
    """int8 io, float io and float32 of each architecture (and the two 16x8 forms of the INT16 ones), unless the
    converter itself failed (FAILED.json)."""
    import json
    import sys

    sys.path.insert(0, str(ARCH.parent))
    from gen_architectures import INT16

    failed = json.loads((ARCH / "FAILED.json").read_text()) if (ARCH / "FAILED.json").exists() else {}
    manifest = json.loads((ARCH / "MANIFEST.json").read_text())
    stems = {p.stem for p in ARCH.glob("*.tflite")}
    assert stems == set(manifest)
    archs = {s.split("-")[0].removesuffix("_floatio") for s in stems | set(failed)}
    for arch in archs:
        forms = [f"{arch}-int8", f"{arch}_floatio-int8", f"{arch}-float32"]
        forms += [f"{arch}-int16", f"{arch}_floatio-int16"] if arch in INT16 else []
        for form in forms:
            assert form in stems or form in failed, form
    assert all(any(s.startswith(f"{a}-int16") or s.startswith(f"{a}_floatio-int16") for s in stems | set(failed)) for a in INT16)


def test_16x8_denoiser_runs_under_qemu_like_the_reference(tmp_path):
    """The LSTM denoiser in 16x8: the converter refuses a 16x8 LSTM, so tests/models/gen_lstm16.py derives it (float
    edges, QUANTIZE -> LSTM -> FULLY_CONNECTED -> LOGISTIC -> DEQUANTIZE); built for the STM32F746, run under QEMU."""
    import sys

    sys.path.insert(0, str(ARCH.parent))
    from gen_lstm16 import denoiser16_model

    path = tmp_path / "denoiser16.tflite"
    path.write_bytes(denoiser16_model())
    result = pipeline.build(path, "stm32f746", tmp_path / "proj", pipeline.BuildOptions(opt_seconds=0, schedule_seconds=0.5))
    inputs = seeded_inputs(path, SEED)
    run = device_run.run(tmp_path / "proj", inputs, timeout_s=600)
    want, oracle = reference_outputs(path, inputs)
    assert oracle == "tflm"
    assert_outputs_match(run["output_arrays"], want, oracle, "denoiser16", dequantized_steps(path))
    assert run["arena_high_water_bytes"] <= result.info["arena_bytes"]
