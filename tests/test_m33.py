"""Cortex-M33 (Armv8-M Mainline with the DSP extension and FPU) on QEMU's mps2-an505: the board's core and
flags, models bit-exact with TFLite Micro, and the profile and validate paths over the M33's UART.

The stack guard (MSPLIM, and the PMSAv8 MPU map without it) and the runtime's own checks run on this board
through tests/test_firmware.py, which takes every shipped board with a QEMU stand-in."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import numpy as np
import pytest

from edgemem import device_run, pipeline
from edgemem.board import _to_board, load_board, validate_board
from edgemem.reference import seeded_inputs, tflm_outputs

from shared_models import model_path
from core_checks import ANCHORS, example_runs_bit_exact, anchor_runs_bit_exact, converter_model_runs_like_the_reference, profile_and_validate_over_the_uart

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
    ops = example_runs_bit_exact(BOARD, "cortex-m33", tmp_path / "p")
    assert {"smlad", "sxtb16"} <= ops  # the kernels' __ARM_FEATURE_DSP path is compiled in


@pytest.mark.parametrize("name", ANCHORS)
def test_anchor_models_run_bit_exact(name, tmp_path):
    anchor_runs_bit_exact(name, BOARD, tmp_path / "p")


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
    extra = {"ram": 4 << 20, "flash": 4 << 20} if name.endswith("float32") else {}  # the AN505 has 4 MiB of each
    converter_model_runs_like_the_reference(name, BOARD, tmp_path / "p", **extra)


def test_profile_and_validate_over_the_uart(tmp_path):
    """`build --profile` then `profile` (the report over the AN505's UART0 socket: arena = plan at every step,
    instructions from the CMSDK timer) and `validate` (seeded inputs sent over that UART)."""
    profile_and_validate_over_the_uart(BOARD, tmp_path)


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
