"""What every new core's tests check the same way (tests/test_m33.py, tests/test_m55.py): a model built for the
board runs under its QEMU stand-in with the outputs of the reference and the measured arena of the plan."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import numpy as np

from edgemem import device_run, pipeline
from edgemem.board import load_board
from edgemem.reference import reference_outputs, seeded_inputs, tflm_outputs
from edgemem.target.qemu import QemuSerial
from edgemem.validation import validate
from op_check import assert_outputs_match, dequantized_steps
from shared_models import model_path

ROOT = Path(__file__).resolve().parents[1]
ARCH = ROOT / "tests" / "models" / "arch"
EXAMPLE = ROOT / "examples" / "kws_tiny_int8.tflite"
ANCHORS = ["mlperf_kws_dscnn_int8", "tflm_micro_speech_int8", "mlperf_ic_resnet8_int8"]


def anchor_runs_bit_exact(name: str, board: str, project: Path) -> None:
    """A shared anchor model: bit-exact with TFLite Micro, the painted arena equal to the plan."""
    path = model_path(name)
    result = pipeline.build(path, board, project)
    x = seeded_inputs(path, 1)
    res = device_run.run(project, x, timeout_s=300)
    for got, want in zip(res["output_arrays"], tflm_outputs(path, x), strict=True):
        np.testing.assert_array_equal(got, want)
    assert res["arena_high_water_bytes"] == result.info["arena_bytes"]


def converter_model_runs_like_the_reference(name: str, board: str, project: Path, **options) -> None:
    """A converter-made architecture (tests/models/arch): the reference's outputs (float within op_check's
    tolerance), the painted arena within the plan."""
    path = ARCH / f"{name}.tflite"
    result = pipeline.build(path, board, project, pipeline.BuildOptions(opt_seconds=0, schedule_seconds=0.5, **options))
    inputs = seeded_inputs(path, 0)
    res = device_run.run(project, inputs, timeout_s=600)
    want, oracle = reference_outputs(path, inputs)
    assert_outputs_match(res["output_arrays"], want, oracle, name, dequantized_steps(path))
    assert res["arena_high_water_bytes"] <= result.info["arena_bytes"]


def _cli(*args: str) -> subprocess.CompletedProcess:
    env = {"PYTHONPATH": str(ROOT), "PATH": "/usr/bin:/bin", "HOME": str(Path.home())}
    return subprocess.run([sys.executable, "-m", "edgemem.cli", *args], capture_output=True, text=True, env=env,
                          timeout=600)  # fmt: skip


def profile_and_validate_over_the_uart(board: str, tmp_path: Path) -> None:
    """`build --profile` then `profile` over the board's UART socket (arena = plan at every step, instructions
    from its timer), `validate` with seeded inputs sent over that UART, and a plain build validated under
    semihosting."""
    out = tmp_path / "p"
    p = _cli("build", "--board", board, str(EXAMPLE), "-o", str(out), "--profile")
    assert p.returncode == 0, p.stderr
    p = _cli("profile", str(out), "--json")
    assert p.returncode == 0, p.stderr
    prof = json.loads((out / "profile.json").read_text())
    steps = prof["steps"]
    assert steps and all(s["measured_high_water_bytes"] == s["predicted_high_water_bytes"] for s in steps)
    assert all(s["instructions"] > 0 for s in steps)
    assert prof["bit_exact"] is True and prof["arena_matches_plan"] is True
    with QemuSerial(out / "firmware.elf", load_board(board), 60) as q:
        q.connect().close()  # QEMU starts the guest once something connected; validate reconnects
        report = validate(out, 3, first_seed=5, port=q.url, timeout_s=60)
        code, _ = q.finish(20)
    assert report["device"].startswith("serial socket://")
    assert report["count"] == report["bit_exact_count"] == 3 and report["all_match"] and code == 0
    plain = tmp_path / "plain"
    assert _cli("build", "--board", board, str(EXAMPLE), "-o", str(plain)).returncode == 0
    p = _cli("validate", str(plain), "--count", "3", "--json")
    assert p.returncode == 0, p.stderr
    report = json.JSONDecoder().raw_decode(p.stdout)[0]
    assert report["board"] == board and report["count"] == report["bit_exact_count"] == 3


def example_runs_bit_exact(board: str, cpu: str, project: Path) -> set[str]:
    """The example built for ``board`` (compiled for ``cpu``), bit-exact with TFLite Micro, the painted arena equal
    to the plan; returns the instruction mnemonics of its firmware, for the core's own checks."""
    result = pipeline.build(EXAMPLE, board, project)
    assert f"-mcpu={cpu}" in (project / "Makefile").read_text()
    x = seeded_inputs(EXAMPLE, 4)
    res = device_run.run(project, x)
    np.testing.assert_array_equal(res["output_arrays"][0], tflm_outputs(EXAMPLE, x)[0])
    assert res["arena_high_water_bytes"] == result.info["arena_bytes"]
    dis = subprocess.run(["arm-none-eabi-objdump", "-d", "--no-show-raw-insn", str(project / "firmware.elf")],
                         capture_output=True, text=True, check=True).stdout  # fmt: skip
    return {m.group(1) for m in re.finditer(r"^\s*[0-9a-f]+:\s+(\S+)", dis, re.M)}
