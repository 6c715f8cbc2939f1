"""Board images (edgemem/target/image.py) and the MPU arithmetic (edgemem/target/mpu.py).

The MPU cover is checked against a byte-level expansion written here (region -> enabled eighths -> byte
ranges), on random ranges; the images against the board files they come from; the --ram/--flash budgets the
MPU cannot express are refused where the option enters, with sizes that do work."""

from __future__ import annotations

import random
import re

import pytest

from edgemem import budget
from edgemem.board import DEVICE_TICKS, DEVICE_UARTS, QEMU_TIMERS, QEMU_UARTS, list_boards, load_board
from edgemem.errors import EdgememError
from edgemem.target import image, mpu
from edgemem.target.toolchain import DRIVERS_DIR, render_image


def _allowed_bytes(regions: list[tuple[int, int, int]]) -> list[tuple[int, int]]:
    """Byte ranges the (base, log2 size, subregion-disable) regions open, merged."""
    spans = []
    for base, log2, srd in regions:
        size = 1 << log2
        assert base % size == 0, "a region must be naturally aligned"
        assert log2 >= 5 and (srd == 0 or log2 >= 8), "subregions exist from 256 bytes up"
        for i in range(8):
            if not (srd >> i) & 1:
                spans.append((base + i * size // 8, base + (i + 1) * size // 8))
    spans.sort()
    merged: list[list[int]] = []
    for a, b in spans:
        assert not merged or merged[-1][1] <= a, "regions overlap"
        if merged and merged[-1][1] == a:
            merged[-1][1] = b
        else:
            merged.append([a, b])
    return [(a, b) for a, b in merged]


@pytest.mark.parametrize("seed", range(5))
def test_mpu_cover_opens_exactly_the_range(seed):
    rng = random.Random(seed)
    for _ in range(400):
        log2 = rng.randrange(5, 30)
        size = 32 * rng.randrange(1, (1 << log2) // 32 + 1)
        base = rng.choice([0x20000000, 0x00000000, 0x08000000, 32 * rng.randrange(0, 1 << 20)])
        assert _allowed_bytes(mpu.cover(base, size)) == [(base, base + size)], (hex(base), size)


def test_mpu_cover_takes_one_region_for_k_times_a_power_of_two():
    assert mpu.cover(0x20000000, 320 << 10) == [(0x20000000, 19, 0xE0)]  # 512K with three eighths off
    assert mpu.cover(0x20010000, 64 << 10) == [(0x20010000, 16, 0)]
    assert len(mpu.cover(0x20000000, 32736)) > 1
    with pytest.raises(EdgememError, match="32-byte aligned"):
        mpu.cover(0x20000010, 64)


def test_every_board_kind_has_exactly_one_driver_file():
    drivers = {p.name for p in DRIVERS_DIR.glob("*.c")}
    kinds = {f"timer_{k}.c" for k in (*QEMU_TIMERS, *DEVICE_TICKS)} | {f"uart_{k}.c" for k in (*QEMU_UARTS, *DEVICE_UARTS)}
    assert drivers == kinds | {"host_semihosting.c", "host_serial.c"}
    runtime = (DRIVERS_DIR.parent / "em_runtime.c").read_text()
    assert not re.search(r"EM_(UART|TIMER)_(CMSDK|STM32|NRF|DWT)", runtime), "a driver choice left in em_runtime.c"


@pytest.mark.parametrize("name", [b for b in list_boards() if load_board(b).qemu is not None or load_board(b).device])
def test_images_follow_the_board_file(name, tmp_path):
    board = load_board(name)
    images = ([image.qemu_image(board)] if board.qemu else []) + ([image.device_image(board)] if board.device else [])
    for img in images:
        written = {p.name for p in render_image(img, tmp_path)}
        directory = tmp_path / img.subdir
        assert set(img.drivers) <= written and {"em_runtime.c", "linker.ld", "Makefile"} <= written
        assert not {p.name for p in directory.glob("*.c")} & ({p.name for p in DRIVERS_DIR.glob("*.c")} - set(img.drivers))
        assert f"ORIGIN = 0x{img.flash_origin:08X}" in (directory / "linker.ld").read_text()
        if img.device:
            assert img.flash_origin == board.flash.base and img.mpu == () and "board_init.c" in written
            assert img.drivers == ("host_serial.c", f"timer_{board.device.ticks}.c", f"uart_{board.device.uart}.c")
            assert all(r.origin == r.members[0].base for r in img.regions)
        else:
            assert img.flash_origin == board.qemu.flash_base and "host_semihosting.c" in img.drivers
            assert f"timer_{board.qemu.timer.kind}.c" in img.drivers
            assert len(img.mpu) == (len(image.mpu_map(board)) if board.core.mpu else 0)
            assert img.defines["EM_MPU_NREGIONS"] == str(len(img.mpu))


def test_profile_image_needs_a_uart_and_reports_over_it():
    assert image.qemu_image(load_board("stm32f746"), profile=True).defines["EM_CONSOLE_UART"] == "1"
    assert "EM_CONSOLE_UART" not in image.qemu_image(load_board("stm32f746")).defines


@pytest.mark.parametrize("option", ["ram", "flash"])
def test_a_budget_the_mpu_cannot_guard_is_refused_where_it_enters(option):
    board = load_board("stm32f746")
    bad = 32736 if option == "ram" else 1048544  # many set bits: one MPU region per bit
    with pytest.raises(EdgememError, match=rf"--{option} 32,736|--{option} 1,048,544") as e:
        budget.board_with_budget(board, **{"ram": None, "flash": None, option: bad})
    proposed = [int(s.replace(",", "")) for s in str(e.value).split(f"try --{option} ")[1].rstrip(".").split(" or ")]
    assert proposed[0] < bad < proposed[1]
    for size in proposed:  # what the error proposes is accepted and guarded
        fixed = budget.board_with_budget(board, **{"ram": None, "flash": None, option: size})
        assert len(image.qemu_image(fixed).mpu) <= mpu.MAX_REGIONS
