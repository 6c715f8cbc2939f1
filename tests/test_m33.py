"""Cortex-M33 (Armv8-M Mainline with the DSP extension and FPU) on QEMU's mps2-an505: the board's core and
flags, models bit-exact with TFLite Micro, and the profile and validate paths over the M33's UART.

The stack guard (MSPLIM, and the PMSAv8 MPU map without it) and the runtime's own checks run on this board
through tests/test_firmware.py, which takes every shipped board with a QEMU stand-in."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from edgemem import device_run, pipeline
from edgemem.board import _to_board, load_board, validate_board
from edgemem.reference import reference_outputs, seeded_inputs, tflm_outputs
from edgemem.target.qemu import QemuSerial
from edgemem.validation import validate

from op_check import assert_outputs_match, dequantized_steps
from shared_models import model_path

ROOT = Path(__file__).resolve().parents[1]
EXAMPLE = ROOT / "examples" / "kws_tiny_int8.tflite"
ARCH = ROOT / "tests" / "models" / "arch"
BOARD = "mps2-an505"

pytestmark = pytest.mark.skipif(
    shutil.which("arm-none-eabi-gcc") is None or shutil.which("qemu-system-arm") is None,
    reason="needs arm-none-eabi-gcc and qemu-system-arm",
)


def _predefined(flags: list[str]) -> set[str]:
    """The macros gcc predefines for these target flags (the compiler is the oracle of what the core has)."""
    out = subprocess.run(["arm-none-eabi-gcc", *flags, "-dM", "-E", "-x", "c", "-"], input="", text=True,
                         capture_output=True, check=True).stdout  # fmt: skip
    return {line.split()[1] for line in out.splitlines() if line.startswith("#define ")}


def test_board_is_an_armv8m_core_with_dsp_and_fpu():
    board = load_board(BOARD)
    assert board.core.armv8m and board.core.dsp and board.core.has_fpu
    assert board.core.gcc_flags == ["-mcpu=cortex-m33", "-mthumb", "-mfpu=fpv5-sp-d16", "-mfloat-abi=hard"]
    macros = _predefined(board.core.gcc_flags)
    assert {"__ARM_ARCH_8M_MAIN__", "__ARM_FEATURE_DSP", "__ARM_FP"} <= macros
    # the reset vector table sits where the AN505's IoT Kit starts the core in Secure state (INITSVTOR)
    assert board.qemu.flash_base == 0x10000000 and board.qemu.instructions_per_tick == 50
    # an M33 without the DSP extension (e.g. a board file saying so) must not get gcc's default +dsp
    data = dict(board.definition, core={**board.definition["core"], "dsp": False})
    nodsp = _to_board(validate_board(data, "test"), Path("test"))
    assert nodsp.core.gcc_flags[0] == "-mcpu=cortex-m33+nodsp"
    assert "__ARM_FEATURE_DSP" not in _predefined(nodsp.core.gcc_flags)


def test_example_runs_bit_exact_with_the_dsp_kernels(tmp_path):
    result = pipeline.build(EXAMPLE, BOARD, tmp_path / "p")
    assert "-mcpu=cortex-m33" in (tmp_path / "p" / "Makefile").read_text()
    dis = subprocess.run(["arm-none-eabi-objdump", "-d", str(tmp_path / "p" / "firmware.elf")], capture_output=True,
                         text=True, check=True).stdout  # fmt: skip
    assert "\tsmlad\t" in dis and "\tsxtb16\t" in dis  # the kernels' __ARM_FEATURE_DSP path is compiled in
    x = seeded_inputs(EXAMPLE, 4)
    res = device_run.run(tmp_path / "p", x)
    np.testing.assert_array_equal(res["output_arrays"][0], tflm_outputs(EXAMPLE, x)[0])
    assert res["arena_high_water_bytes"] == result.info["arena_bytes"]


@pytest.mark.parametrize("name", ["mlperf_kws_dscnn_int8", "tflm_micro_speech_int8", "mlperf_ic_resnet8_int8"])
def test_anchor_models_run_bit_exact(name, tmp_path):
    path = model_path(name)
    result = pipeline.build(path, BOARD, tmp_path / "p")
    x = seeded_inputs(path, 1)
    res = device_run.run(tmp_path / "p", x, timeout_s=300)
    for got, want in zip(res["output_arrays"], tflm_outputs(path, x), strict=True):
        np.testing.assert_array_equal(got, want)
    assert res["arena_high_water_bytes"] == result.info["arena_bytes"]


def test_stm32u585_runs_on_its_an505_stand_in(tmp_path):
    """A real M33 board (its RAM at 0x20000000, flash at 0x08000000) linked for the AN505: its SRAM1-3 at
    0x38000000, pools pinned per region (--pool-per-region), bit-exact."""
    path = model_path("mlperf_vww_96_int8")
    result = pipeline.build(path, "stm32u585", tmp_path / "p", pipeline.BuildOptions(pool_per_region=True))
    ld = (tmp_path / "p" / "linker.ld").read_text()
    assert "FLASH (rx) : ORIGIN = 0x10000000" in ld and "RAM_SRAM1 (rw) : ORIGIN = 0x38000000" in ld
    x = seeded_inputs(path, 2)
    res = device_run.run(tmp_path / "p", x, timeout_s=300)
    np.testing.assert_array_equal(res["output_arrays"][0], tflm_outputs(path, x)[0])
    assert res["pool_high_water_bytes"] == result.plan.pool_sizes


# converter-made: int8, 16x8, int8 with float edges (the FPU) and float32
@pytest.mark.parametrize("name", ["kws_dscnn-int8", "kws_dscnn-int16", "conv1d_dilated_floatio-int8",
                                  "transformer_encoder-int8", "conv_autoencoder-float32"])  # fmt: skip
def test_converter_made_models_run_like_the_reference(name, tmp_path):
    path = ARCH / f"{name}.tflite"
    extra = {"ram": 4 << 20, "flash": 4 << 20} if name.endswith("float32") else {}  # the AN505 has 4 MiB of each
    result = pipeline.build(path, BOARD, tmp_path / "p", pipeline.BuildOptions(opt_seconds=0, schedule_seconds=0.5, **extra))
    inputs = seeded_inputs(path, 0)
    res = device_run.run(tmp_path / "p", inputs, timeout_s=600)
    want, oracle = reference_outputs(path, inputs)
    assert_outputs_match(res["output_arrays"], want, oracle, name, dequantized_steps(path))
    assert res["arena_high_water_bytes"] <= result.info["arena_bytes"]


def _cli(*args: str) -> subprocess.CompletedProcess:
    env = {"PYTHONPATH": str(ROOT), "PATH": "/usr/bin:/bin", "HOME": str(Path.home())}
    return subprocess.run([sys.executable, "-m", "edgemem.cli", *args], capture_output=True, text=True, env=env,
                          timeout=600)  # fmt: skip


def test_profile_and_validate_over_the_uart(tmp_path):
    """`build --profile` then `profile` (the report over the AN505's UART0 socket: arena = plan at every step,
    instructions from the CMSDK timer) and `validate` (seeded inputs sent over that UART)."""
    out = tmp_path / "p"
    p = _cli("build", "--board", BOARD, str(EXAMPLE), "-o", str(out), "--profile")
    assert p.returncode == 0, p.stderr
    p = _cli("profile", str(out), "--json")
    assert p.returncode == 0, p.stderr
    prof = json.loads((out / "profile.json").read_text())
    steps = prof["steps"]
    assert steps and all(s["measured_high_water_bytes"] == s["predicted_high_water_bytes"] for s in steps)
    assert all(s["instructions"] > 0 for s in steps)
    assert prof["bit_exact"] is True and prof["arena_matches_plan"] is True
    # validate over the same UART: seeded inputs sent to the firmware's request loop, outputs back
    with QemuSerial(out / "firmware.elf", load_board(BOARD), 60) as q:
        q.connect().close()  # QEMU starts the guest once something connected; validate reconnects
        report = validate(out, 3, first_seed=5, port=q.url, timeout_s=60)
        code, _ = q.finish(20)
    assert report["device"].startswith("serial socket://")
    assert report["count"] == report["bit_exact_count"] == 3 and report["all_match"] and code == 0
    # and a plain build validated under QEMU with semihosting
    plain = tmp_path / "plain"
    assert _cli("build", "--board", BOARD, str(EXAMPLE), "-o", str(plain)).returncode == 0
    p = _cli("validate", str(plain), "--count", "3", "--json")
    assert p.returncode == 0, p.stderr
    report = json.JSONDecoder().raw_decode(p.stdout)[0]
    assert report["board"] == BOARD and report["count"] == report["bit_exact_count"] == 3


def test_pmsav8_register_values():
    """The AN505 image's MPU words, worked out by hand from the Armv8-M MPU_RBAR/RLAR/MAIR0 layouts: RBAR =
    base | AP (2:1; 0b11 read-only, 0b01 read/write) | XN (0), RLAR = last 32-byte granule | AttrIndx (3:1) | EN;
    MAIR0 attribute 0 normal write-back (0xFF), attribute 1 device nGnRE (0x04)."""
    from edgemem.target import image

    img = image.qemu_image(load_board(BOARD))
    d = img.defines
    assert d["EM_MPU_MAIR0"] == "0x000004FFu" and d["EM_STACK_LIMIT"] == "1" and d["EM_MPU_NREGIONS"] == "4"
    words = {(d[f"EM_MPU_RBAR_{i}"], d[f"EM_MPU_RLAR_{i}"]) for i in range(4)}
    assert words == {
        ("0x10000006u", "0x100FFFE1u"),  # flash: 1 MiB at 0x10000000, read-only, executable, normal memory
        ("0x38000003u", "0x3803FFE1u"),  # RAM: 256 KiB at 0x38000000, read/write, no execute, normal memory
        ("0x50000003u", "0x50000FE3u"),  # timer 0: 4 KiB, read/write, no execute, device
        ("0x50200003u", "0x50200FE3u"),  # UART0: 4 KiB, read/write, no execute, device
    }
    assert not any(k.startswith("EM_MPU_RASR") for k in d)  # no PMSAv7 words for this core


def test_timer_counts_one_instruction_per_instruction(tmp_path):
    """The board file's 20 MHz timer (50 instructions a tick under -icount shift=0), checked against the code
    itself: the fake model's `acc += k` loop (mode 5) is four instructions in the disassembly, so a million more
    iterations must measure four million more instructions (25 MHz would give 3.2 million, a wrong shift 8)."""
    import re
    import struct

    from edgemem.target.qemu import run_firmware
    from edgemem.target.toolchain import build_firmware, render_firmware_files

    board = load_board(BOARD)
    render_firmware_files(board, tmp_path)
    for f in ("model.c", "model.h"):
        shutil.copyfile(ROOT / "tests" / "fake_model" / f, tmp_path / f)
    build_firmware(tmp_path, board, timeout=300)
    dis = subprocess.run(["arm-none-eabi-objdump", "-d", "--no-show-raw-insn", str(tmp_path / "firmware.elf")],
                         capture_output=True, text=True, check=True).stdout  # fmt: skip
    run_fn = dis[dis.index("<edgemem_run>:") :].split("\n\n")[0]
    insns = re.findall(r"^\s*([0-9a-f]+):\s+(\S+)\s*(.*)$", run_fn, re.M)
    addr = [int(a, 16) for a, _, _ in insns]
    loops = []  # (body mnemonics) of every backward conditional branch
    for i, (_, op, args) in enumerate(insns):
        m = re.match(r"([0-9a-f]+)\s", args)
        if op.startswith("b") and op not in ("bl", "blx", "bx") and m and int(m.group(1), 16) < addr[i]:
            loops.append([o for a, o, _ in insns if int(m.group(1), 16) <= int(a, 16) <= addr[i]])
    assert ["add", "adds", "cmp", "bne.n"] in loops  # acc += k; k++; k < param
    counts = []
    for n in (100_000, 1_100_000):
        inp = bytes([5, 0, 0, 0]) + struct.pack("<II", n, 1000) + b"\x01\x02\x03\x04"
        counts.append(run_firmware(tmp_path / "firmware.elf", board, [inp], timeout_s=60).instructions)
    assert abs((counts[1] - counts[0]) - 4 * 1_000_000) <= 2 * 50  # two ticks of quantisation
