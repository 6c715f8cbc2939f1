"""Firmware runtime tests: boards, linker/MPU layout, build, and runs under QEMU with a hand-written fake model
(tests/fake_model/, its input selects normal run / stack overflow / stray store / ... -- see model.c)."""

from __future__ import annotations

import shutil
import struct
import subprocess
from pathlib import Path

import pytest

from edgemem.board import Board, list_boards, load_board
from edgemem.errors import DeviceError, EdgememError, ToolchainError
from edgemem.target import image as image_mod
from edgemem.target import qemu as qemu_mod
from edgemem.target import toolchain as toolchain_mod
from edgemem.target.qemu import DeviceReport, parse_device_output, qemu_command, run_firmware
from edgemem.target.toolchain import FirmwareSizes, build_firmware, render_firmware_files

FAKE_MODEL = Path(__file__).parent / "fake_model"
# every shipped board with a QEMU stand-in builds and runs the fake model on it (rp2040-pico has none yet)
BOARDS = [name for name in list_boards() if load_board(name).qemu is not None]
OUT_BYTES = 640
SRAM_POOL = 4096

needs_gcc = pytest.mark.skipif(shutil.which("arm-none-eabi-gcc") is None, reason="arm-none-eabi-gcc not installed")
needs_qemu = pytest.mark.skipif(shutil.which("qemu-system-arm") is None, reason="qemu-system-arm not installed")


def fake_input(mode: int = 0, param: int = 0, target: int = 1000, seed: bytes = b"\x01\x02\x03\x04") -> bytes:
    return bytes([mode, 0, 0, 0]) + struct.pack("<II", param, target) + seed


def expected_output(seed: bytes) -> bytes:
    return bytes(seed[k % 4] ^ ((3 * k + 1) & 0xFF) for k in range(OUT_BYTES))


def ram_end_under_qemu(board: Board) -> int:
    return max(image_mod.qemu_address(board, r) + r.size for r in board.ram if r.qemu)


# ---- building (cached per board and flags) --------------------------------------------------------


@pytest.fixture(scope="module")
def firmware(tmp_path_factory):
    cache: dict[tuple[str, tuple[str, ...]], tuple[Board, Path, FirmwareSizes]] = {}

    def get(board_name: str, extra_cflags: tuple[str, ...] = ()) -> tuple[Board, Path, FirmwareSizes]:
        key = (board_name, extra_cflags)
        if key not in cache:
            board = load_board(board_name)
            project = tmp_path_factory.mktemp(f"fw-{board_name}")
            render_firmware_files(board, project)
            for f in ("model.c", "model.h"):
                shutil.copyfile(FAKE_MODEL / f, project / f)
            sizes = build_firmware(project, board, timeout=300, extra_cflags=list(extra_cflags))
            cache[key] = (board, project / "firmware.elf", sizes)
        return cache[key]

    return get


def run(firmware, board_name: str, inp: bytes, **kw) -> DeviceReport:
    board, elf, _ = firmware(board_name)
    return run_firmware(elf, board, [inp], timeout_s=60, **kw)


# ---- boards (no toolchain needed) -------------------------------------------------------------------


def test_boards_load():
    assert set(BOARDS) <= set(list_boards())
    f7 = load_board("stm32f746")
    assert f7.core.cpu == "cortex-m7" and f7.core.fpu == "fpv5-sp-d16" and f7.core.has_fpu
    assert "-mfloat-abi=hard" in f7.core.gcc_flags
    assert f7.flash.base == 0x08000000 and f7.flash.size == 1 << 20
    assert [(r.name, r.base, r.size) for r in f7.ram] == [
        ("dtcm", 0x20000000, 64 << 10),
        ("sram1", 0x20010000, 240 << 10),
        ("sram2", 0x2004C000, 16 << 10),
    ]
    assert f7.ram_bytes == 320 << 10
    assert f7.qemu.machine == "mps2-an500" and f7.qemu.instructions_per_tick == 40
    nd = load_board("netduinoplus2")
    assert nd.core.cpu == "cortex-m4" and nd.core.fpu == "fpv4-sp-d16"
    assert sum(r.size for r in nd.ram if r.base >= 0x20000000) == 128 << 10
    assert nd.ram_region("ccm").base == 0x10000000 and not nd.ram_region("ccm").qemu
    assert nd.qemu.machine == "netduinoplus2" and nd.qemu.instructions_per_tick == 1
    an385 = load_board("mps2-an385")
    assert not an385.core.has_fpu and "-mfloat-abi=soft" in an385.core.gcc_flags
    # by path too
    assert load_board(Path(__file__).parents[1] / "boards" / "stm32f746.toml") == f7


def test_unknown_board_is_a_clear_error():
    with pytest.raises(EdgememError, match="unknown board 'nope'.*stm32f746"):
        load_board("nope")


def test_bad_board_file(tmp_path):
    p = tmp_path / "bad.toml"
    p.write_text('name = "bad"\n[core]\ncpu = "cortex-m4"\n')
    with pytest.raises(EdgememError, match=r"board file .*bad.toml: \[flash\] is missing \(it is required\)"):
        load_board(p)


def _mpu_allowed(board: Board) -> set[tuple[int, int]]:
    """Byte ranges the MPU regions allow (subregions expanded), merged."""
    spans = []
    for r in image_mod.mpu_map(board):
        if board.core.armv8m:  # PMSAv8: decoded from the register values, base in RBAR, last granule in RLAR
            assert r.rlar & 1, "region enabled"
            spans.append((r.rbar & ~31, (r.rlar & ~31) + 32))
            continue
        sub = r.size // 8
        for i in range(8):
            if r.size < 256 or not (r.srd >> i) & 1:
                if r.size < 256:
                    spans.append((r.base, r.base + r.size))
                    break
                spans.append((r.base + i * sub, r.base + (i + 1) * sub))
    spans.sort()
    merged: list[list[int]] = []
    for a, b in spans:
        if merged and merged[-1][1] == a:
            merged[-1][1] = b
        else:
            merged.append([a, b])
    return {(a, b) for a, b in merged}


@pytest.mark.parametrize("name", BOARDS)
def test_mpu_allows_exactly_flash_ram_and_used_peripherals(name):
    board = load_board(name)
    image = image_mod.qemu_image(board)
    regions = image_mod.mpu_map(board)
    assert len(image.mpu) == (len(regions) if board.core.mpu else 0)
    assert 1 <= len(regions) <= 8
    for r in regions:
        # PMSAv7 regions are naturally aligned powers of two; PMSAv8 ones any run of 32-byte granules
        assert r.base % (32 if board.core.armv8m else r.size) == 0, "MPU regions must be aligned"
    expected = [(board.qemu.flash_base, board.qemu.flash_base + board.flash.size)]
    expected += [(lr.origin, lr.origin + lr.length) for lr in image.regions]
    expected += [(p.base, p.base + p.size) for p in board.qemu.peripherals]
    expected += [(board.qemu.uart.base, board.qemu.uart.base + board.qemu.uart.window)] if board.qemu.uart else []
    expected.sort()
    merged: list[list[int]] = []
    for a, b in expected:
        if merged and merged[-1][1] == a:
            merged[-1][1] = b
        else:
            merged.append([a, b])
    assert _mpu_allowed(board) == {(a, b) for a, b in merged}


def test_stm32f746_ram_is_one_512k_region_with_three_subregions_off():
    ram = [r for r in image_mod.qemu_image(load_board("stm32f746")).mpu if r.name.startswith("ram")]
    assert len(ram) == 1
    assert (ram[0].base, ram[0].size, ram[0].srd) == (0x20000000, 512 << 10, 0xE0)


def test_pool_names_select_regions():
    f7 = image_mod.qemu_image(load_board("stm32f746"))
    assert f7.pool_region("sram2").name == f7.pool_region("sram").name == "RAM_DTCM"  # merged for QEMU
    nd = image_mod.qemu_image(load_board("netduinoplus2"))
    assert nd.pool_region("ccm").default  # CCM is not modelled by QEMU 7.2


def test_parse_device_output():
    text = (
        "junk\nEDGEMEM begin board=x\nEDGEMEM output 1 ff00\nEDGEMEM output 0 0102\n"
        "EDGEMEM stat stack_peak_bytes=12\nEDGEMEM stat data_bytes=4\nEDGEMEM stat bss_bytes=8\n"
        "EDGEMEM stat pool_sram_high_water_bytes=7\nEDGEMEM stat instructions=99\nEDGEMEM end\n"
    )
    r = parse_device_output(text, 0)
    assert r.board == "x" and r.finished and not r.errors
    assert r.outputs == [b"\x01\x02", b"\xff\x00"]
    assert r.peak_stack_bytes == 12 and r.static_ram_bytes == 12 and r.instructions == 99
    assert r.pool_high_water_bytes == {"sram": 7}


def test_missing_tools_give_apt_commands(tmp_path, monkeypatch):
    board = load_board("stm32f746")
    render_firmware_files(board, tmp_path)
    monkeypatch.setattr(toolchain_mod.shutil, "which", lambda name: None)
    with pytest.raises(ToolchainError, match="apt-get install -y gcc-arm-none-eabi"):
        build_firmware(tmp_path, board)
    monkeypatch.setattr(qemu_mod.shutil, "which", lambda name: None)
    with pytest.raises(ToolchainError, match="apt-get install -y qemu-system-arm"):
        run_firmware(tmp_path / "firmware.elf", board, [])


def test_render_writes_a_standalone_project(tmp_path):
    board = load_board("stm32f746")
    written = {p.name for p in render_firmware_files(board, tmp_path, stack_size=4096)}
    assert {"linker.ld", "Makefile", "startup.c", "main.c", "em_runtime.c", "em_runtime.h"} <= written
    mk = (tmp_path / "Makefile").read_text()
    for flag in ("-mcpu=cortex-m7", "-mfpu=fpv5-sp-d16", "-mfloat-abi=hard", "-std=c11", "-O2", "-Wall",
                 "-Wextra", "-Werror", "-fstack-usage", "--gc-sections", "-nostartfiles", "firmware.map"):
        assert flag in mk
    ld = (tmp_path / "linker.ld").read_text()
    assert "__em_stack_size = 4096;" in ld
    assert "LENGTH = 0x50000" in ld and "ORIGIN = 0x00000000, LENGTH = 0x100000" in ld
    assert "(NOLOAD)" in ld and ".edgemem_arena" in ld


# ---- build ----------------------------------------------------------------------------------------------


@needs_gcc
@pytest.mark.parametrize("name", BOARDS)
def test_build_sizes_and_layout(firmware, name):
    board, elf, sizes = firmware(name)
    assert sizes.stack_bytes == board.stack_size
    assert sizes.arena_bytes == SRAM_POOL + 256
    assert 0 < sizes.flash_bytes < board.flash.size
    assert sizes.flash_bytes == sizes.text_bytes + sizes.data_bytes
    # a pool named after a board RAM region gets that region's section
    if board.ram_region("sram2"):
        assert sizes.arena_sections[".edgemem_arena_sram2"] == 256
    assert (elf.parent / "firmware.map").is_file()
    assert list(elf.parent.glob("*.su")), "-fstack-usage output missing"
    nm = subprocess.run(["arm-none-eabi-nm", str(elf)], capture_output=True, text=True, check=True).stdout
    syms = {parts[2]: int(parts[0], 16) for parts in (l.split() for l in nm.splitlines()) if len(parts) == 3}
    default = image_mod.qemu_image(board).default_region
    assert syms["__em_stack_start"] == default.origin, "stack must sit at the bottom of RAM"
    assert syms["__em_stack_end"] == default.origin + board.stack_size
    assert syms["em_vectors"] == board.qemu.flash_base


@needs_gcc
def test_build_failure_shows_compiler_output(tmp_path):
    board = load_board("mps2-an385")
    render_firmware_files(board, tmp_path)
    shutil.copyfile(FAKE_MODEL / "model.h", tmp_path / "model.h")
    (tmp_path / "model.c").write_text('#include "model.h"\nint32_t edgemem_run(void) { int unused; return 0; }\n')
    with pytest.raises(ToolchainError, match="unused"):
        build_firmware(tmp_path, board)


@needs_gcc
def test_build_ignores_an_enclosing_makes_flags(tmp_path, monkeypatch):
    """edgemem run from a user's Makefile under `make -n -k` still builds (and reports its errors): the outer
    make's MAKEFLAGS would otherwise turn the firmware build into a dry run."""
    board = load_board("mps2-an385")
    render_firmware_files(board, tmp_path)
    for f in ("model.c", "model.h"):
        shutil.copyfile(FAKE_MODEL / f, tmp_path / f)
    monkeypatch.setenv("MAKEFLAGS", "nk")
    monkeypatch.setenv("MAKELEVEL", "1")
    sizes = build_firmware(tmp_path, board)
    assert (tmp_path / "firmware.elf").is_file() and sizes.text_bytes > 0


@needs_gcc
def test_image_too_big_for_ram_fails_at_link_time(tmp_path):
    board = load_board("mps2-an385")
    render_firmware_files(board, tmp_path)
    shutil.copyfile(FAKE_MODEL / "model.h", tmp_path / "model.h")
    model = (FAKE_MODEL / "model.c").read_text().replace("#define SRAM_BYTES 4096u", "#define SRAM_BYTES 300000u")
    (tmp_path / "model.c").write_text(model)
    with pytest.raises(ToolchainError, match="overflowed|exceed"):
        build_firmware(tmp_path, board)


# ---- runs under QEMU ------------------------------------------------------------------------------------


@needs_gcc
@needs_qemu
@pytest.mark.parametrize("name", BOARDS)
def test_roundtrip_and_stats(firmware, name):
    board, elf, sizes = firmware(name)
    seed = bytes([0x11, 0xA5, 0x5A, 0xFE])
    r = run(firmware, name, fake_input(target=1000, seed=seed))
    assert r.exit_code == 0 and r.finished and not r.errors
    assert r.board == name
    assert r.outputs == [expected_output(seed)]
    assert f"EDGEMEM output 0 {expected_output(seed).hex()}" in r.raw  # one logical line, 1280 hex chars
    assert r.stats["pool_sram_high_water_bytes"] == 1000
    assert r.stats["pool_sram2_high_water_bytes"] == 100
    assert r.arena_high_water_bytes == 1100
    assert r.stats["stack_size_bytes"] == board.stack_size
    assert 0 < r.stats["stack_at_run_bytes"] < r.peak_stack_bytes < board.stack_size
    assert r.stats["data_bytes"] == sizes.data_bytes and r.stats["bss_bytes"] == sizes.bss_bytes
    assert r.static_ram_bytes == sizes.static_ram_bytes
    assert r.run_status == 0
    assert r.instructions > 0 and r.ticks > 0


@needs_gcc
@needs_qemu
@pytest.mark.parametrize("name", BOARDS)
@pytest.mark.parametrize("target", [0, 673, 2049, SRAM_POOL])
def test_arena_high_water_is_exact(firmware, name, target):
    # the last byte written is 0xA5 == the first paint value: only the second pass (0x5A) sees it
    r = run(firmware, name, fake_input(target=target))
    assert r.stats["pool_sram_high_water_bytes"] == max(target, 32 + OUT_BYTES)


@needs_gcc
@needs_qemu
@pytest.mark.parametrize("name", BOARDS)
def test_stack_overflow_faults_clearly(firmware, name):
    # with an MPU the stack's lower neighbour is forbidden (MemManage); ARMv6-M without MPU: the microbit has
    # nothing mapped below its RAM, so the push itself HardFaults and the handler sees SP below the stack
    # Armv8-M: MSPLIM stops the first push below the stack (UsageFault, STKOF)
    core = load_board(name).core
    fault = "usagefault stack_overflow stack_limit" if core.armv8m else "memmanage stack_overflow" if core.mpu else "hardfault stack_overflow"
    with pytest.raises(DeviceError, match=rf"EDGEMEM fault {fault}") as ei:
        run(firmware, name, fake_input(mode=1, param=1_000_000))
    assert ei.value.report.exit_code == 5


@needs_gcc
@needs_qemu
@pytest.mark.parametrize("name", [n for n in BOARDS if load_board(n).core.armv8m])
def test_pmsav8_mpu_guards_the_stack_without_the_stack_limit(firmware, name):
    """With MSPLIM left at 0 the PMSAv8 MPU map alone must catch the overflow: the stack's lower neighbour is
    outside every region (no background map), so the push below it is a MemManage fault."""
    board, elf, _ = firmware(name, ("-UEM_STACK_LIMIT",))
    with pytest.raises(DeviceError, match=r"EDGEMEM fault memmanage stack_overflow") as ei:
        run_firmware(elf, board, [fake_input(mode=1, param=1_000_000)], timeout_s=60)
    assert "stack_limit" not in str(ei.value)
    assert ei.value.report.exit_code == 5


@needs_gcc
@needs_qemu
@pytest.mark.parametrize("name", BOARDS)
def test_store_outside_ram_faults(firmware, name):
    board = load_board(name)
    end = ram_end_under_qemu(board)  # QEMU has memory there, the board does not: the MPU must refuse it
    if not board.core.mpu:  # no MPU (Cortex-M0): only a board whose QEMU model ends with its RAM is listed
        with pytest.raises(DeviceError, match=r"EDGEMEM fault hardfault pc=0x"):
            run(firmware, name, fake_input(mode=2, param=end))
        return
    with pytest.raises(DeviceError, match=rf"EDGEMEM fault memmanage data_access_violation addr=0x{end:08x} pc=0x"):
        run(firmware, name, fake_input(mode=2, param=end))
    with pytest.raises(DeviceError, match=r"data_access_violation addr="):  # flash is read-only
        run(firmware, name, fake_input(mode=2, param=board.qemu.flash_base + 0x100))


@needs_gcc
@needs_qemu
@pytest.mark.parametrize("name", BOARDS)
def test_instruction_counts_are_deterministic(firmware, name):
    a = run(firmware, name, fake_input(mode=5, param=100_000))
    b = run(firmware, name, fake_input(mode=5, param=100_000))
    assert a.instructions == b.instructions and a.raw == b.raw
    c = run(firmware, name, fake_input(mode=5, param=200_000))
    per_iter = (c.instructions - a.instructions) / 100_000
    assert 2 <= per_iter <= 8, per_iter  # a tight add/compare/branch loop


@needs_gcc
@needs_qemu
@pytest.mark.parametrize("name", BOARDS)
def test_timer_wrap_is_not_silent(firmware, name):
    """Start the counter ~1M instructions before it wraps: a 4M-instruction run crosses the wrap and must
    measure the same as without the preload (up to the tick quantisation)."""
    board = load_board(name)
    ipt = board.qemu.instructions_per_tick
    flags = (f"-DEM_TIMER_PRELOAD_TICKS={int(1_000_000 / ipt)}u",)
    if board.qemu.timer.kind == "stm32_tim_pair":
        # unsigned subtraction alone survives one 32-bit wrap; a 20-bit fine counter wraps ~4 times in this
        # run, so the coarse counter has to resolve them
        flags += ("-DEM_TIMER_FINE_BITS=20",)
    wrapped_board, wrapped_elf, _ = firmware(name, flags)
    inp = fake_input(mode=5, param=1_000_000)
    plain = run(firmware, name, inp)
    wrapped = run_firmware(wrapped_elf, wrapped_board, [inp], timeout_s=60)
    assert plain.instructions > 2_000_000
    # tick quantisation, plus a few instructions of timer-read code that differ between the two builds
    assert abs(wrapped.instructions - plain.instructions) <= 2 * ipt + 32


@needs_gcc
@needs_qemu
def test_nondeterminism_is_reported(firmware):
    with pytest.raises(DeviceError, match="EDGEMEM error nondeterministic") as ei:
        run(firmware, "stm32f746", fake_input(mode=4))
    assert ei.value.report.exit_code == 3


@needs_gcc
@needs_qemu
def test_run_status_is_passed_through(firmware):
    board, elf, _ = firmware("stm32f746")
    with pytest.raises(DeviceError, match="exit code 7"):
        run_firmware(elf, board, [fake_input(mode=3)])
    r = run_firmware(elf, board, [fake_input(mode=3)], check=False)
    assert r.exit_code == 7 and r.run_status == 7 and r.finished


@needs_gcc
@needs_qemu
def test_missing_or_short_input_is_a_clear_error(firmware):
    board, elf, _ = firmware("netduinoplus2")
    with pytest.raises(DeviceError, match="EDGEMEM error input 0 cannot open input0.bin"):
        run_firmware(elf, board, [])
    with pytest.raises(DeviceError, match="EDGEMEM error input 0 wrong size input0.bin expected_bytes=16"):
        run_firmware(elf, board, [b"\x00" * 15])


def test_qemu_command_line():
    cmd = qemu_command(load_board("stm32f746"), "fw.elf")
    assert cmd[:5] == ["qemu-system-arm", "-M", "mps2-an500", "-cpu", "cortex-m7"]
    assert "-icount" in cmd and cmd[cmd.index("-icount") + 1].startswith("shift=0")
    assert cmd[cmd.index("-semihosting-config") + 1] == "enable=on,target=native"
    assert cmd[-2:] == ["-kernel", "fw.elf"]


# Datasheet figures (RAM usable for data, flash), typed from the vendors' datasheets, not from the TOML files.
DATASHEET = {
    "stm32u585": (784 * 1024, 2048 * 1024),  # STM32U585 (RM0456): SRAM1 192 KB + SRAM2 64 KB + SRAM3 512 KB + SRAM4 16 KB, 2 MB flash
    "stm32f746": (320 * 1024, 1024 * 1024),  # STM32F746xx DS10916: 320 KB SRAM incl. 64 KB DTCM, 1 MB flash
    "stm32f746g-disco": (320 * 1024 + 8 * 1024 * 1024, 1024 * 1024),  # + 64 Mbit (8 MB) SDRAM on the Discovery kit
    "nucleo-f401re": (96 * 1024, 512 * 1024),  # STM32F401RE DS10086
    "nucleo-h743zi": (992 * 1024, 2048 * 1024),  # STM32H743 DS12110: 128 KB DTCM + 864 KB user SRAM (ITCM and backup SRAM not counted)
    "nrf52840dk": (256 * 1024, 1024 * 1024),  # nRF52840 PS v1.7
    "netduinoplus2": (192 * 1024, 1024 * 1024),  # STM32F405RG DS8626: 192 KB SRAM incl. 64 KB CCM
    "rp2040-pico": (264 * 1024, 2 * 1024 * 1024),  # RP2040 datasheet: 264 kB SRAM in 6 banks; Pico: 2 MB QSPI flash
    "bbc-microbit": (16 * 1024, 256 * 1024),  # nRF51822 QFAA (micro:bit v1): 16 kB RAM, 256 kB flash
}


@pytest.mark.parametrize("name", sorted(DATASHEET))
def test_board_files_agree_with_datasheets(name):
    board = load_board(name)
    assert (board.ram_bytes, board.flash_bytes) == DATASHEET[name]
