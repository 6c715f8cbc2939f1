"""Cortex-M55 (Armv8.1-M Mainline with MVE/Helium, DSP and a double-precision FPU) on QEMU's mps3-an547: the
board's core and flags, the example and anchor models bit-exact with TFLite Micro, the stack guard (MSPLIM, and
the PMSAv8 MPU without it), the timer rate (the SSE-300 system counter), and the profile and validate paths over
the AN547's UART. The portable/DSP C kernels run here; no Helium kernels yet.

tests/test_firmware.py also takes this board (every shipped board with a QEMU stand-in)."""

from __future__ import annotations

import re
import shutil
import struct
import subprocess
from fractions import Fraction
from pathlib import Path

import pytest

from edgemem.board import load_board, validate_board
from edgemem.errors import DeviceError, EdgememError
from edgemem.target.qemu import run_firmware
from edgemem.target.toolchain import build_firmware, render_firmware_files

from core_checks import ANCHORS, example_runs_bit_exact, anchor_runs_bit_exact, converter_model_runs_like_the_reference, profile_and_validate_over_the_uart

ROOT = Path(__file__).resolve().parents[1]
ARCH = ROOT / "tests" / "models" / "arch"
EXAMPLE = ROOT / "examples" / "kws_tiny_int8.tflite"
FAKE_MODEL = ROOT / "tests" / "fake_model"
BOARD = "mps3-an547"

pytestmark = pytest.mark.skipif(
    shutil.which("arm-none-eabi-gcc") is None or shutil.which("qemu-system-arm") is None,
    reason="needs arm-none-eabi-gcc and qemu-system-arm",
)


def _predefined(flags: list[str]) -> dict[str, str]:
    """The macros gcc predefines for these target flags (the compiler is the oracle of what the core has)."""
    out = subprocess.run(["arm-none-eabi-gcc", *flags, "-dM", "-E", "-x", "c", "-"], input="", text=True,
                         capture_output=True, check=True).stdout  # fmt: skip
    return {p[1]: (p[2] if len(p) > 2 else "") for p in (line.split(None, 2) for line in out.splitlines()) if p[0] == "#define"}


def _disassembly(elf: Path) -> str:
    return subprocess.run(["arm-none-eabi-objdump", "-d", "--no-show-raw-insn", str(elf)], capture_output=True,
                          text=True, check=True).stdout  # fmt: skip


def test_board_is_an_armv8_1m_core_with_mve_dsp_and_fpu():
    board = load_board(BOARD)
    assert board.core.armv8m and board.core.dsp and board.core.has_fpu
    assert board.core.gcc_flags == ["-mcpu=cortex-m55", "-mthumb", "-mfpu=fpv5-d16", "-mfloat-abi=hard"]
    macros = _predefined(board.core.gcc_flags)
    assert macros["__ARM_FEATURE_MVE"] == "3"  # integer and floating-point Helium
    assert {"__ARM_ARCH_8M_MAIN__", "__ARM_FEATURE_DSP", "__ARM_FP"} <= macros.keys()  # gcc names 8.1-M so too
    # the reset vector table is the ITCM at 0 (INITSVTOR), reached at its Secure alias; 32 MHz counter
    assert board.qemu.machine == "mps3-an547" and board.qemu.cpu == "cortex-m55"
    assert board.qemu.flash_base == 0x10000000 and board.qemu.instructions_per_tick == Fraction(125, 4)
    # an M55 without DSP does not exist (MVE needs it): a board file saying so is refused
    data = dict(board.definition, core={**board.definition["core"], "dsp": False})
    with pytest.raises(EdgememError, match=r"\[core\]\.dsp = false: a Cortex-M55 always has the DSP extension"):
        validate_board(data, "test")


def test_example_runs_bit_exact(tmp_path):
    ops = example_runs_bit_exact(BOARD, "cortex-m55", tmp_path / "p")
    assert {"smlad", "sxtb16"} <= ops  # the kernels' __ARM_FEATURE_DSP path is compiled in
    assert {"dls", "le"} <= ops  # Armv8.1-M low-overhead loops, which no M33 has: the M55 code runs under QEMU


@pytest.mark.parametrize("name", ANCHORS)
def test_anchor_models_run_bit_exact(name, tmp_path):
    anchor_runs_bit_exact(name, BOARD, tmp_path / "p")


# converter-made: 16x8, int8 with float edges and float32 (the double-precision FPU, hard-float ABI)
@pytest.mark.parametrize("name", ["kws_dscnn-int16", "conv1d_dilated_floatio-int8", "conv_autoencoder-float32"])
def test_converter_made_models_run_like_the_reference(name, tmp_path):
    converter_model_runs_like_the_reference(name, BOARD, tmp_path / "p")


@pytest.fixture(scope="module")
def fake_firmware(tmp_path_factory):
    """The runtime with tests/fake_model (modes: 1 recurse deeply, 5 a counted loop), built per extra flags."""
    board = load_board(BOARD)
    built: dict[tuple[str, ...], Path] = {}

    def get(*flags: str) -> Path:
        if flags not in built:
            d = tmp_path_factory.mktemp("fake")
            render_firmware_files(board, d)
            for f in ("model.c", "model.h"):
                shutil.copyfile(FAKE_MODEL / f, d / f)
            build_firmware(d, board, timeout=300, extra_cflags=list(flags))
            built[flags] = d / "firmware.elf"
        return built[flags]

    return get


def _fake_input(mode: int, param: int) -> bytes:
    return bytes([mode, 0, 0, 0]) + struct.pack("<II", param, 1000) + b"\x01\x02\x03\x04"


def test_stack_guard_catches_an_overflow(fake_firmware):
    """A deep recursion: MSPLIM stops the first push below the stack (UsageFault STKOF); with MSPLIM left at 0,
    the PMSAv8 MPU map alone catches it (the stack's lower neighbour is in no region: MemManage)."""
    board = load_board(BOARD)
    with pytest.raises(DeviceError, match=r"EDGEMEM fault usagefault stack_overflow stack_limit") as ei:
        run_firmware(fake_firmware(), board, [_fake_input(1, 1_000_000)], timeout_s=60)
    assert ei.value.report.exit_code == 5
    with pytest.raises(DeviceError, match=r"EDGEMEM fault memmanage stack_overflow") as ei:
        run_firmware(fake_firmware("-UEM_STACK_LIMIT"), board, [_fake_input(1, 1_000_000)], timeout_s=60)
    assert "stack_limit" not in str(ei.value)


def test_pmsav8_register_values():
    """The AN547 image's MPU words, worked out by hand from the Armv8-M MPU_RBAR/RLAR/MAIR0 layouts (RBAR = base
    | AP | XN, RLAR = last 32-byte granule | AttrIndx | EN); the DTCM and the ISRAM are not contiguous, so two
    RAM regions."""
    from edgemem.target import image

    d = image.qemu_image(load_board(BOARD)).defines
    assert d["EM_MPU_MAIR0"] == "0x000004FFu" and d["EM_STACK_LIMIT"] == "1" and d["EM_MPU_NREGIONS"] == "5"
    words = {(d[f"EM_MPU_RBAR_{i}"], d[f"EM_MPU_RLAR_{i}"]) for i in range(5)}
    assert words == {
        ("0x10000006u", "0x1007FFE1u"),  # ITCM "flash": 512 KiB at 0x10000000, read-only, executable, normal
        ("0x30000003u", "0x3007FFE1u"),  # DTCM: 512 KiB at 0x30000000, read/write, no execute, normal
        ("0x31000003u", "0x313FFFE1u"),  # ISRAM0/1: 4 MiB at 0x31000000, read/write, no execute, normal
        ("0x58100003u", "0x58100FE3u"),  # system counter control frame: 4 KiB, device
        ("0x59303003u", "0x59303FE3u"),  # UART0: 4 KiB, device
    }


def test_timer_counts_one_instruction_per_instruction(fake_firmware):
    """The board file's 32 MHz (31.25 instructions a tick under -icount shift=0), checked against the code: the
    fake model's `acc += k` loop (mode 5) is a three-instruction low-overhead loop on the M55 (add, adds, le), so a
    million more iterations must measure three million more instructions (the 25 MHz peripheral clock would give
    3.84 million)."""
    elf = fake_firmware()
    dis = _disassembly(elf)
    run_fn = dis[dis.index("<edgemem_run>:") :].split("\n\n")[0]
    insns = [(int(a, 16), op, args) for a, op, args in re.findall(r"^\s*([0-9a-f]+):\s+(\S+)\s*(.*)$", run_fn, re.M)]
    loops = []
    for addr, op, args in insns:
        m = re.search(r"\b([0-9a-f]+) <", args)
        if (op.startswith("b") or op == "le") and m and int(m.group(1), 16) < addr:
            loops.append([o for a, o, _ in insns if int(m.group(1), 16) <= a <= addr])
    assert ["add", "adds", "le"] in loops, loops  # acc += k; k++; loop
    board = load_board(BOARD)
    counts = [run_firmware(elf, board, [_fake_input(5, n)], timeout_s=60).instructions for n in (100_000, 1_100_000)]
    assert abs((counts[1] - counts[0]) - 3 * 1_000_000) <= 2 * 32  # two ticks of quantisation


def test_profile_and_validate_over_the_uart(tmp_path):
    """`build --profile` then `profile` (the report over the AN547's UART0 socket: arena = plan at every step,
    instructions from the system counter) and `validate` (seeded inputs over that UART, and under semihosting)."""
    profile_and_validate_over_the_uart(BOARD, tmp_path)
