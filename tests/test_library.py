"""lib/: the model as a static library in the user's own firmware. tests/cmake_app is such a project -- its own
main, startup code and linker script, CMake with arm-none-eabi-gcc -- that adds a build's lib/ with
add_subdirectory, gives the model an arena of its own (EDGEMEM_EXTERNAL_ARENA, edgemem_set_arena) and prints the
output over semihosting; run under QEMU (mps2-an500, the STM32F746's stand-in), it must equal TFLite Micro's."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import numpy as np
import pytest

from edgemem import pipeline
from edgemem.reference import reference_outputs, seeded_inputs

ROOT = Path(__file__).resolve().parents[1]
APP = Path(__file__).resolve().parent / "cmake_app"
MODEL = ROOT / "examples" / "kws_tiny_int8.tflite"

pytestmark = pytest.mark.skipif(shutil.which("cmake") is None or shutil.which("arm-none-eabi-gcc") is None,
                                reason="needs cmake and arm-none-eabi-gcc (make setup installs them)")


def _input_header(x: np.ndarray) -> str:
    body = ", ".join(f"0x{b:02x}u" for b in x.tobytes())
    return f"#include <stdint.h>\nstatic const uint8_t app_input[{x.nbytes}u] = {{{body}}};\n"


def test_library_runs_in_the_users_own_cmake_firmware_like_the_reference(tmp_path):
    project = tmp_path / "build"
    pipeline.build(MODEL, "stm32f746", project, pipeline.BuildOptions(compile=False, opt_seconds=0, schedule_seconds=0.5))
    lib = project / "lib"
    assert sorted(p.name for p in lib.iterdir()) == sorted(["CMakeLists.txt", "README.md", "kernels.c", "kernels.h", "model.c",
                                                            "model.h", "weights.c", "weights.h"])
    assert "main(" not in (lib / "model.c").read_text() and "section(" not in (lib / "model.c").read_text()

    app = tmp_path / "app"
    shutil.copytree(APP, app)
    (x,) = seeded_inputs(MODEL, 3)
    (app / "input.h").write_text(_input_header(x))
    out = tmp_path / "cmake-build"
    for cmd in (["cmake", "-S", str(app), "-B", str(out), f"-DEDGEMEM_LIB={lib}", "-DEDGEMEM_EXTERNAL_ARENA=ON"],
                ["cmake", "--build", str(out)]):
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=300)
        assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    qemu = ["qemu-system-arm", "-M", "mps2-an500", "-cpu", "cortex-m7", "-nographic", "-monitor", "none",
            "-semihosting-config", "enable=on,target=native", "-kernel", str(out / "app.elf")]  # fmt: skip
    run = subprocess.run(qemu, capture_output=True, text=True, timeout=120)
    text = run.stdout + run.stderr  # QEMU writes the semihosting console to either, by version
    lines = dict(line.split(" ", 1) for line in text.splitlines() if " " in line)
    assert run.returncode == 0, text
    assert [int(lines[k]) for k in ("run_before_arena", "misaligned", "too_small", "set_arena", "run")] == [-103, -101, -102, 0, 0]
    (want,), oracle = reference_outputs(MODEL, [x])
    got = np.frombuffer(bytes.fromhex(lines["output"].strip()), dtype=want.dtype).reshape(want.shape)
    assert oracle == "tflm"
    np.testing.assert_array_equal(got, want)
