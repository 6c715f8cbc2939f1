"""Images for the real boards (a board file's [device] section): linked at the board's own flash and RAM,
bringing its serial port up from reset, cycles from the DWT counter, no semihosting.

Checked here without hardware: each image's vector table, initial stack pointer and reset handler sit where
the board boots (read back from the raw image, not from edgemem's own linker script); no semihosting call is
left in the code (disassembly); and the netduinoplus2 image -- QEMU models that very board, STM32F405 with
its USART1 -- is run under QEMU and profiled through its UART socket with the same pyserial code a real
board's USB serial port would use: measured arena = plan at every step, outputs bit-exact with TFLite Micro.
Nothing here ran on hardware.
"""

from __future__ import annotations

import shutil
import struct
import subprocess
from pathlib import Path

import pytest

from edgemem import pipeline
from edgemem.board import list_boards, load_board, validate_board
from edgemem.errors import EdgememError
from edgemem.target.qemu import QemuSerial

ROOT = Path(__file__).resolve().parents[1]
EXAMPLE = ROOT / "examples" / "kws_tiny_int8.tflite"
DEVICE_BOARDS = [b for b in list_boards() if load_board(b).device is not None]

needs_gcc = pytest.mark.skipif(shutil.which("arm-none-eabi-gcc") is None, reason="arm-none-eabi-gcc not installed")


def test_every_real_board_with_a_serial_console_has_a_board_image():
    assert set(DEVICE_BOARDS) >= {"stm32f746g-disco", "nucleo-f401re", "nucleo-h743zi", "nrf52840dk", "netduinoplus2"}


@needs_gcc
@pytest.mark.parametrize("name", DEVICE_BOARDS)
def test_board_image_boots_from_the_boards_flash(name, tmp_path):
    board = load_board(name)
    result = pipeline.build(EXAMPLE, name, tmp_path / "p", pipeline.BuildOptions(opt_seconds=0))
    image_dir = tmp_path / "p" / "board"
    raw = (image_dir / "firmware.bin").read_bytes()
    sp, reset = struct.unpack_from("<II", raw, 0)
    ram = [r for r in board.ram if r.device]
    assert any(r.base < sp <= r.end for r in ram), f"initial SP 0x{sp:08X} outside the board's RAM"
    assert reset & 1 and board.flash.base <= reset < board.flash.base + len(raw), f"reset 0x{reset:08X}"
    assert _lowest_hex_address(image_dir / "firmware.hex") == board.flash.base
    disassembly = subprocess.run(["arm-none-eabi-objdump", "-d", str(image_dir / "firmware.elf")],
                                 capture_output=True, text=True, check=True).stdout  # fmt: skip
    assert "bkpt\t0x00ab" not in disassembly and "em_semihost" not in disassembly
    assert "<em_board_init>:" in disassembly
    assert result.info["board_image"]["bin"] == "board/firmware.bin" and result.info["board_image"]["ticks"] == "dwt"
    # the QEMU stand-in's image is still there, linked for the stand-in
    sp_q, _ = struct.unpack_from("<II", (tmp_path / "p" / "firmware.bin").read_bytes(), 0)
    assert sp_q != 0


def _lowest_hex_address(path: Path) -> int:
    """The lowest address an Intel hex file writes (data records, with extended linear address records)."""
    upper, lowest = 0, None
    for line in path.read_text().splitlines():
        kind, offset = line[7:9], int(line[3:7], 16)
        if kind == "04":
            upper = int(line[9:13], 16) << 16
        elif kind == "00":
            lowest = min(upper + offset, lowest if lowest is not None else upper + offset)
    return lowest


@needs_gcc
@pytest.mark.skipif(shutil.which("qemu-system-arm") is None, reason="qemu-system-arm not installed")
def test_netduinoplus2_board_image_profiled_over_its_usart(tmp_path):
    from edgemem import profiling

    pipeline.build(EXAMPLE, "netduinoplus2", tmp_path / "p", pipeline.BuildOptions(opt_seconds=0))
    board = load_board("netduinoplus2")
    with QemuSerial(tmp_path / "p" / "board" / "firmware.elf", board, 60, semihosting=False) as q:
        q.connect().close()  # the guest starts once something connected; profile reconnects
        res = profiling.profile(tmp_path / "p", port=q.url, timeout_s=60)
    assert res["arena_matches_plan"] and all(r["pools_match"] for r in res["steps"])
    assert res["bit_exact"] is True
    assert res["tick_unit"] == "cycles" and "DWT" in res.get("tick_note", "")  # QEMU has no cycle counter


def test_board_file_errors_in_device_sections():
    def with_device(cpu: str, device: dict) -> dict:
        return {"name": "b", "core": {"cpu": cpu, "mpu": cpu != "cortex-m0"}, "flash": {"base": 0, "size": 1 << 20},
                "ram": [{"name": "sram", "base": 0x20000000, "size": 0x10000}], "device": device}  # fmt: skip

    with pytest.raises(EdgememError, match=r"\[device\]\.ticks = 'dwt'.*cycle counter"):
        validate_board(with_device("cortex-m0", {"uart": "nrf51", "uart_base": 0x40002000, "ticks": "dwt", "cpu_hz": 16_000_000}), "b")
    with pytest.raises(EdgememError, match=r"\[device\]\.uart_brr .*required"):
        validate_board(with_device("cortex-m4", {"uart": "stm32_usart", "uart_base": 0x40011000, "ticks": "dwt", "cpu_hz": 16_000_000}), "b")
    with pytest.raises(EdgememError, match=r"\[device\]\.init\[0\] = \[1, 2\]: must have at least 3 items"):
        validate_board(with_device("cortex-m4", {"uart": "nrf51", "uart_base": 0, "ticks": "dwt", "cpu_hz": 1, "init": [[1, 2]]}), "b")
