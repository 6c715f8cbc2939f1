"""uint8 wherever TFLite Micro has a uint8 kernel (issue 31), bit-exact with it.

TFLM runs uint8 in QUANTIZE (uint8 <-> int8), DEQUANTIZE (uint8 -> float32), RESHAPE and SQUEEZE (byte copies of any
type), REVERSE_V2 (a uint8 case) and BROADCAST_TO (copies by element size); every other kernel refuses uint8. The
survey below asks TFLM itself, one-operator models at a time (tests/uint8_models.py), and edgemem must accept
exactly the operators TFLM runs and refuse the others with its one-paragraph message naming them; each operator's
int8 twin must run in TFLM, so that a refusal is about the type and not about a malformed test model. QUANTIZE
float32 -> uint8, which TFLM refuses, is a float32 operator: edgemem runs it against LiteRT, as other float operators
TFLM lacks.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import uint8_models as um
from op_check import build_for_host, check_model, missing_operators

from edgemem import device_run, pipeline
from edgemem.reference import reference_outputs, seeded_inputs
from edgemem.target.host import build_host, run_host

# The survey's answer (TFLM 0.dev20261023 in .venv): the uint8 operators it runs. The test below re-asks TFLM.
TFLM_RUNS_UINT8 = {"RESHAPE", "SQUEEZE", "REVERSE_V2", "BROADCAST_TO", "DEQUANTIZE", "QUANTIZE_U8_I8", "QUANTIZE_I8_U8", "SHAPE"}
# Operators TFLM has no kernel for in any type (its op resolver lacks TILE; NEG runs only float32 and int32):
NO_INT8_KERNEL = {"TILE", "NEG"}
# A float32 operator TFLM refuses, run as edgemem runs float operators TFLM lacks (README, Operators): LiteRT's
# reference kernels are the oracle. TFLM's QUANTIZE takes float32 to int8 and int16 only.
LITERT_ORACLE = {"QUANTIZE_F32_U8"}
SHAPES = [(1, 4, 6, 8), (2, 3, 5, 4), (3, 7)]

_SURVEY = r"""
import json, sys
from edgemem.reference import seeded_inputs, tflm_outputs
result = {}
for path in sys.argv[1:]:
    try:
        tflm_outputs(path, seeded_inputs(path, 0))
        result[path] = True
    except RuntimeError:  # TFLM's binding: "failed to allocate tensors" / "invocation failed"
        result[path] = False
print(json.dumps(result))
"""


def _tflm_runs(paths: list[Path]) -> dict[Path, bool]:
    """Whether TFLM runs each model, all asked in one child process (its binding aborts the process on some models)."""
    p = subprocess.run([sys.executable, "-c", _SURVEY, *map(str, paths)], capture_output=True, text=True, timeout=600)
    assert p.returncode == 0, p.stderr[-2000:]
    answer = json.loads(p.stdout.strip().splitlines()[-1])
    return {Path(k): v for k, v in answer.items()}


@pytest.fixture(scope="module")
def survey(tmp_path_factory) -> dict[str, tuple[bool, bool, Path]]:
    """{operator: (TFLM runs it on uint8, TFLM runs its int8 twin, the uint8 model)}."""
    tmp = tmp_path_factory.mktemp("uint8-survey")
    paths = {}
    for name in um.GENERATORS:
        for dtype in (np.uint8, np.int8):
            path = tmp / f"{name}-{np.dtype(dtype).name}.tflite"
            path.write_bytes(um.single_op_model(name, dtype=dtype))
            paths[name, np.dtype(dtype).name] = path
    runs = _tflm_runs(list(paths.values()))
    return {name: (runs[paths[name, "uint8"]], runs[paths[name, "int8"]], paths[name, "uint8"]) for name in um.GENERATORS}


def _tflite_name(op: str) -> str:
    return "QUANTIZE" if op.startswith("QUANTIZE_") else op


@pytest.mark.parametrize("op", [op for op in um.GENERATORS if op != "SHAPE"])
def test_edgemem_accepts_exactly_the_uint8_operators_tflm_runs(op, survey):
    """(SHAPE is evaluated at import wherever it feeds another operator, in any type, and refused in every type as a
    model output: it has no uint8 question; tests/test_ops_uint8.py's camera model reads a uint8 tensor's SHAPE.)"""
    tflm_u8, tflm_i8, path = survey[op]
    assert tflm_u8 == (op in TFLM_RUNS_UINT8), f"TFLM {'runs' if tflm_u8 else 'refuses'} uint8 {op}: update the survey"
    assert tflm_i8 or op in NO_INT8_KERNEL, f"the int8 twin of the {op} model does not run in TFLM: the test model is wrong"
    missing = missing_operators(path)
    if tflm_u8 or op in LITERT_ORACLE:
        assert missing == [], f"edgemem refuses {missing}"
    else:
        assert missing == [f"{_tflite_name(op)} (uint8)"]


@pytest.mark.parametrize("op", ["RESHAPE", "SQUEEZE", "REVERSE_V2", "BROADCAST_TO", "DEQUANTIZE", "QUANTIZE_I8_U8", "QUANTIZE_F32_U8"])
@pytest.mark.parametrize("k", range(len(SHAPES)), ids=lambda k: "x".join(map(str, SHAPES[k])))
def test_uint8_operator_bit_exact_with_tflm(op, k, tmp_path):
    """Model seed k (quantization, axes), shape k, three seeded inputs each; DEQUANTIZE's float32 too. (QUANTIZE int8 ->
    uint8 ran before, through TVM's QDQ import: one step off TFLM on model seed 2.)"""
    result = check_model(um.single_op_model(op, SHAPES[k], seed=k), tmp_path)
    assert result.oracle == ("litert" if op in LITERT_ORACLE else "tflm")
    if op == "DEQUANTIZE":
        assert result.max_abs_diff == [0.0, 0.0, 0.0]  # the same float32 bits, not within a tolerance


def test_int8_to_uint8_quantize_rounds_twice_as_tflm(tmp_path):
    """TFLM's Requantize rounds twice (SaturatingRoundingDoublingHighMul, then RoundingDivideByPOT): int8 -33 at
    (0.02, -5) to uint8 at (0.04164016, 76) is 76 + round(round(-28 * 0.9606) / 2) = 76 - 14 = 62, where a float
    computation (TVM's QDQ import, what edgemem ran before) rounds -13.45 once: 63. Every int8 value is fed."""
    model = um.requantize_model((16, 16), np.int8, (0.02, -5), np.uint8, (0.04164016, 76))
    path = tmp_path / "m.tflite"
    path.write_bytes(model)
    x = np.arange(-128, 128, dtype=np.int8).reshape(16, 16)
    want, oracle = reference_outputs(path, [x])
    assert oracle == "tflm" and want[0].reshape(-1)[-33 + 128] == 62
    np.testing.assert_array_equal(_host_outputs(model, x, tmp_path), want[0])


def _host_outputs(model: bytes, x: np.ndarray, tmp_path: Path) -> np.ndarray:
    _, project = build_for_host(model, tmp_path / "b")
    exe = build_host(project, tmp_path / "host")
    return np.frombuffer(run_host(exe, [x.tobytes()], [x.size]).outputs[0], np.uint8).reshape(x.shape)


def test_float_to_uint8_quantize_rounds_ties_away_from_zero(tmp_path):
    """float32 -> uint8 at scale 2^-7: x = (k + 0.5) 2^-7 for every k in [-128, 128) is a tie, which TFLite's
    AffineQuantize (LiteRT's reference kernel: TFLM has none) rounds away from zero; TVM's QDQ import, what edgemem
    ran before, rounded 66 of these 256 to even."""
    model = um.requantize_model((4, 64), np.float32, None, np.uint8, (2.0 ** -7, 3))
    path = tmp_path / "m.tflite"
    path.write_bytes(model)
    x = ((np.arange(-128, 128, dtype=np.float32) + 0.5) * np.float32(2.0 ** -7)).reshape(4, 64)
    want, oracle = reference_outputs(path, [x])
    assert oracle == "litert" and want[0].reshape(-1)[128] == 4  # 0.5 + 3, not 0 + 3
    np.testing.assert_array_equal(_host_outputs(model, x, tmp_path), want[0])


CHAINS = {
    "camera": lambda: um.camera_model(),
    "camera-batch2": lambda: um.camera_model(shape=(2, 5, 7, 2), seed=1),
    "movement": lambda: um.movement_model(),
    "movement-wide": lambda: um.movement_model(width=5, channels=3, rows=4, seed=1),
    "movement-3": lambda: um.movement_model(width=9, channels=2, rows=2, seed=3),
    "constant-dequantize": lambda: um.constant_dequantize_model(seed=4),
}


@pytest.mark.parametrize("name", list(CHAINS))
def test_uint8_models_on_the_host(name, tmp_path):
    """uint8 operators between the int8 network's edges: mirror, QUANTIZE, CONV_2D, QUANTIZE to uint8, a Flatten
    computed from SHAPE, DEQUANTIZE to float32; chains of uint8 data movement only; a uint8 constant dequantized for a
    float ADD."""
    assert check_model(CHAINS[name](), tmp_path).oracle == "tflm"


@pytest.mark.parametrize("name", ["camera", "movement-wide"])
def test_uint8_models_under_qemu(name, tmp_path):
    path = tmp_path / f"{name}.tflite"
    path.write_bytes(CHAINS[name]())
    info = pipeline.build(path, "stm32f746", tmp_path / "proj", pipeline.BuildOptions()).info
    for seed in (0, 1):
        inputs = seeded_inputs(path, seed)
        got = device_run.run(tmp_path / "proj", inputs, timeout_s=600)["output_arrays"]
        want, oracle = reference_outputs(path, inputs)
        assert oracle == "tflm" and len(got) == len(want)
        for g, w in zip(got, want):
            assert g.dtype == w.dtype and g.shape == w.shape
            np.testing.assert_array_equal(g, w, err_msg=f"{name} seed {seed}")
    assert info["inputs"][0]["dtype"] == "uint8"


@pytest.mark.parametrize("name", ["camera", "movement"])
def test_analyze_plans_uint8_models_as_the_build(name, tmp_path):
    """`edgemem analyze` (the flatbuffer alone) finds the arena the build plans: the uint8 views (RESHAPE, SQUEEZE)
    and copies are the storages the lowered graph has."""
    from edgemem.analysis import analyze

    path = tmp_path / f"{name}.tflite"
    path.write_bytes(CHAINS[name]())
    a = analyze(path, "stm32f746", options=pipeline.BuildOptions(opt_seconds=0))
    info = pipeline.build(path, "stm32f746", tmp_path / "p", pipeline.BuildOptions(compile=False, opt_seconds=0)).info
    assert not a.unsupported and (a.arena_bytes, a.lower_bound_bytes) == (info["arena_bytes"], info["lower_bound_bytes"])


def _cli_build(model: bytes, tmp_path: Path) -> subprocess.CompletedProcess:
    path = tmp_path / "m.tflite"
    path.write_bytes(model)
    return subprocess.run([sys.executable, "-m", "edgemem.cli", "build", str(path), "-o", str(tmp_path / "out")],
                          cwd=tmp_path, capture_output=True, text=True, timeout=600)  # fmt: skip


def test_uint8_operator_tflm_refuses_exits_4_naming_it(tmp_path):
    p = _cli_build(um.single_op_model("TRANSPOSE"), tmp_path)
    assert p.returncode == 4, p.stderr
    assert "Traceback" not in p.stderr and "TRANSPOSE (output 'y') on uint8" in p.stderr
    assert not (tmp_path / "out").exists()


@pytest.mark.parametrize("axes", [[0, 2], [1, 1]], ids=["apart", "repeated"])
@pytest.mark.parametrize("dtype", [np.uint8, np.int8])
def test_reverse_of_axes_tflm_refuses_exits_4(axes, dtype, tmp_path):
    """TFLM's REVERSE_V2 reverses only neighbouring distinct axes (in every type); edgemem refused nothing here."""
    mb = um.mm.ModelBuilder(description="edgemem reverse apart")
    q = um.mm.qparams([0.02], [3])
    x = mb.tensor("x", (2, 3, 4), dtype, q)
    y = mb.tensor("y", (2, 3, 4), dtype, q)
    mb.op(um.mm.OP.REVERSE_V2, [x, mb.const("axes", np.array(axes, np.int32))], [y])
    model = mb.serialize([x], [y])
    (tmp_path / "probe.tflite").write_bytes(model)
    assert _tflm_runs([tmp_path / "probe.tflite"]) == {tmp_path / "probe.tflite": False}
    p = _cli_build(model, tmp_path)
    assert p.returncode == 4, p.stderr
    assert "Traceback" not in p.stderr and "not distinct neighbours" in p.stderr
    assert not (tmp_path / "out").exists()
