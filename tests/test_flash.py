"""`edgemem flash`: fake openocd / st-flash / pyocd executables on PATH record their argv, so the tests check
which tool is chosen (the board's order), the exact command, and the errors (no tool, tool fails, tool hangs).
With the Arm toolchain installed, the images the build makes for flashing are checked against the ELF."""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

import pytest
from typer.testing import CliRunner

from edgemem.board import FLASH_TOOLS, load_board
from edgemem.cli import app
from edgemem.errors import DeviceError, EdgememError, ToolchainError
from edgemem.target.flash import flash

FAKE_MODEL = Path(__file__).parent / "fake_model"
IMAGE_BYTES = bytes(range(256)) * 4

# Records its argv (NUL-separated) in $FAKE_LOG/<tool>.argv; fails with $FAKE_FAIL on stderr, or hangs.
FAKE_TOOL = """#!/bin/sh
printf '%s\\0' "$@" > "$FAKE_LOG/{name}.argv"
echo "{name}: fake run"
if [ -n "$FAKE_HANG" ]; then exec /bin/sleep 30; fi
if [ -n "$FAKE_FAIL" ]; then echo "$FAKE_FAIL" >&2; exit 3; fi
exit 0
"""


@pytest.fixture
def fake_tools(tmp_path, monkeypatch):
    """install(*names): put fake tools (only those) on PATH; returns a reader of each one's recorded argv."""
    bin_dir, log_dir = tmp_path / "bin", tmp_path / "log"
    bin_dir.mkdir()
    log_dir.mkdir()
    monkeypatch.setenv("PATH", str(bin_dir))
    monkeypatch.setenv("FAKE_LOG", str(log_dir))
    monkeypatch.delenv("FAKE_FAIL", raising=False)
    monkeypatch.delenv("FAKE_HANG", raising=False)

    def install(*names: str) -> dict:
        for name in names:
            script = bin_dir / name
            script.write_text(FAKE_TOOL.format(name=name))
            script.chmod(0o755)
        return {"bin": bin_dir}

    def argv(name: str) -> list[str] | None:
        log = log_dir / f"{name}.argv"
        return log.read_bytes().decode().split("\0")[:-1] if log.is_file() else None

    install.argv = argv
    install.bin = bin_dir
    return install


def project_for(tmp_path: Path, board: str) -> Path:
    """A built project as far as flashing cares: edgemem.json naming the board and recording its definition, and
    firmware.bin."""
    proj = tmp_path / "my project"  # a space: the path must stay one argument / one Tcl word
    proj.mkdir()
    (proj / "edgemem.json").write_text(json.dumps({"board": board, "model": "m.tflite", "board_definition": load_board(board).definition}))
    (proj / "firmware.bin").write_bytes(IMAGE_BYTES)
    return proj


# ---- choice of tool and exact commands -----------------------------------------------------------------------


def test_openocd_first_for_an_stlink_board(tmp_path, fake_tools):
    proj = project_for(tmp_path, "nucleo-f401re")
    fake_tools("openocd", "st-flash", "pyocd")
    res = flash(proj, load_board("nucleo-f401re"))
    image = str((proj / "firmware.bin").resolve())
    assert res.tool == "openocd"
    assert fake_tools.argv("openocd") == [
        "-f", "interface/stlink.cfg", "-f", "target/stm32f4x.cfg",
        "-c", f"program {{{image}}} 0x08000000 verify reset exit",
    ]  # fmt: skip
    assert fake_tools.argv("st-flash") is None and fake_tools.argv("pyocd") is None
    assert res.command[0] == str(fake_tools.bin / "openocd") and res.command[1:] == fake_tools.argv("openocd")


def test_st_flash_when_openocd_is_missing(tmp_path, fake_tools):
    proj = project_for(tmp_path, "stm32f746g-disco")
    fake_tools("st-flash", "pyocd")
    res = flash(proj, load_board("stm32f746g-disco"))
    assert res.tool == "st-flash" and res.address == 0x08000000
    assert fake_tools.argv("st-flash") == ["--reset", "write", str((proj / "firmware.bin").resolve()), "0x08000000"]
    assert fake_tools.argv("pyocd") is None


def test_pyocd_when_it_is_the_only_tool(tmp_path, fake_tools):
    proj = project_for(tmp_path, "nucleo-h743zi")
    fake_tools("pyocd")
    flash(proj, load_board("nucleo-h743zi"))
    assert fake_tools.argv("pyocd") == [
        "flash", "--target", "stm32h743zitx", "--base-address", "0x08000000", str((proj / "firmware.bin").resolve()),
    ]  # fmt: skip


def test_nrf52840dk_prefers_pyocd_and_writes_at_0(tmp_path, fake_tools):
    proj = project_for(tmp_path, "nrf52840dk")
    fake_tools("openocd", "st-flash", "pyocd")
    res = flash(proj, load_board("nrf52840dk"))
    assert res.tool == "pyocd"
    assert fake_tools.argv("pyocd")[:5] == ["flash", "--target", "nrf52840", "--base-address", "0x00000000"]


def test_openocd_commands_sit_between_interface_and_target(tmp_path, fake_tools):
    proj = project_for(tmp_path, "rp2040-pico")
    fake_tools("openocd", "st-flash")  # st-flash is no RP2040 tool: it must not be used
    flash(proj, load_board("rp2040-pico"), tool="openocd")
    image = str((proj / "firmware.bin").resolve())
    assert fake_tools.argv("openocd") == [
        "-f", "interface/cmsis-dap.cfg", "-c", "adapter speed 5000", "-f", "target/rp2040.cfg",
        "-c", f"program {{{image}}} 0x10000000 verify reset exit",
    ]  # fmt: skip


def test_tool_option_overrides_the_order(tmp_path, fake_tools):
    proj = project_for(tmp_path, "stm32f746")
    fake_tools("openocd", "pyocd")
    assert flash(proj, load_board("stm32f746"), tool="pyocd").tool == "pyocd"
    assert fake_tools.argv("openocd") is None
    with pytest.raises(EdgememError, match="--tool st-link is not one of"):
        flash(proj, load_board("stm32f746"), tool="st-link")


# ---- errors --------------------------------------------------------------------------------------------------


def test_no_tool_installed_is_a_toolchain_error_with_install_hints(tmp_path, fake_tools):
    proj = project_for(tmp_path, "nucleo-f401re")
    fake_tools()  # PATH holds nothing
    with pytest.raises(ToolchainError) as e:
        flash(proj, load_board("nucleo-f401re"))
    msg = str(e.value)
    assert "openocd, st-flash, pyocd" in msg
    for hint in ("apt-get install -y openocd", "apt-get install -y stlink-tools", "pip install pyocd"):
        assert hint in msg


def test_failing_tool_is_a_device_error_with_its_stderr(tmp_path, fake_tools, monkeypatch):
    proj = project_for(tmp_path, "nucleo-f401re")
    fake_tools("st-flash")
    monkeypatch.setenv("FAKE_FAIL", "Couldn't find any ST-Link devices")
    with pytest.raises(DeviceError) as e:
        flash(proj, load_board("nucleo-f401re"))
    msg = str(e.value)
    assert "exit code 3" in msg and "Couldn't find any ST-Link devices" in msg
    assert "No debug probe was found" in msg
    assert "st-flash --reset write" in msg  # the command that failed


def test_hanging_tool_is_stopped(tmp_path, fake_tools, monkeypatch):
    proj = project_for(tmp_path, "nucleo-f401re")
    fake_tools("openocd")
    monkeypatch.setenv("FAKE_HANG", "1")
    with pytest.raises(DeviceError, match=r"did not finish flashing board nucleo-f401re within 0.5 s"):
        flash(proj, load_board("nucleo-f401re"), timeout_s=0.5)


def test_board_without_flasher_is_refused(tmp_path, fake_tools):
    proj = project_for(tmp_path, "mps2-an385")
    fake_tools(*FLASH_TOOLS)
    with pytest.raises(EdgememError, match=r"board mps2-an385 has no \[flasher\] section"):
        flash(proj, load_board("mps2-an385"))
    assert all(fake_tools.argv(t) is None for t in FLASH_TOOLS)


def test_missing_image_is_a_clear_error(tmp_path, fake_tools):
    fake_tools("openocd")
    proj = project_for(tmp_path, "nucleo-f401re")
    (proj / "firmware.bin").unlink()
    with pytest.raises(EdgememError, match="no firmware.elf or firmware.bin"):
        flash(proj, load_board("nucleo-f401re"))


def test_flasher_settings_are_checked(tmp_path):
    base = (Path(__file__).parents[1] / "boards" / "nucleo-f401re.toml").read_text()
    bad_tool = tmp_path / "bad_tool.toml"
    bad_tool.write_text(base.replace('order = ["openocd", "st-flash", "pyocd"]', 'order = ["jlinkexe"]'))
    with pytest.raises(EdgememError, match=r"\[flasher\]\.order\[0\] = 'jlinkexe': must be one of 'openocd', 'st-flash' or 'pyocd'"):
        load_board(bad_tool)
    no_target = tmp_path / "no_target.toml"
    no_target.write_text(base.replace('target = "stm32f401retx"', ""))
    with pytest.raises(EdgememError, match=r"\[flasher\.pyocd\]\.target = \(not given\): is required when \[flasher\]\.order lists 'pyocd'"):
        load_board(no_target)


# ---- the CLI -------------------------------------------------------------------------------------------------


def test_cli_shows_the_exact_command(tmp_path, fake_tools):
    proj = project_for(tmp_path, "nucleo-f401re")
    fake_tools("st-flash")
    res = CliRunner().invoke(app, ["flash", "--board", "nucleo-f401re", str(proj)])
    assert res.exit_code == 0, res.output
    image = str((proj / "firmware.bin").resolve())
    assert f"$ {fake_tools.bin / 'st-flash'} --reset write '{image}' 0x08000000" in res.output
    assert "flashed" in res.output and "st-flash: fake run" in res.output


def test_cli_exit_codes(tmp_path, fake_tools, monkeypatch):
    proj = project_for(tmp_path, "nucleo-f401re")
    fake_tools()
    res = CliRunner().invoke(app, ["flash", "--board", "nucleo-f401re", str(proj)])
    assert res.exit_code == ToolchainError.exit_code == 6
    assert "pip install pyocd" in res.output and "Traceback" not in res.output
    fake_tools("pyocd")
    monkeypatch.setenv("FAKE_FAIL", "No connected debug probes")
    res = CliRunner().invoke(app, ["flash", "--board", "nucleo-f401re", str(proj)])
    assert res.exit_code == DeviceError.exit_code == 7
    assert "No connected debug probes" in res.output
    res = CliRunner().invoke(app, ["flash", "--board", "stm32f746", str(proj)])
    assert res.exit_code == 2 and "was built for board nucleo-f401re" in res.output


# ---- the images the build makes for flashing (needs the Arm toolchain) ------------------------------------------

needs_gcc = pytest.mark.skipif(shutil.which("arm-none-eabi-gcc") is None, reason="arm-none-eabi-gcc not installed")


def _ihex_bytes(text: str) -> dict[int, int]:
    """address -> byte of an Intel hex file (data, extended segment and extended linear address records)."""
    memory, upper = {}, 0
    for line in text.split():
        raw = bytes.fromhex(line[1:])
        assert sum(raw) % 256 == 0, f"bad checksum: {line}"
        count, offset, kind, data = raw[0], int.from_bytes(raw[1:3], "big"), raw[3], raw[4 : 4 + raw[0]]
        assert len(data) == count
        if kind == 0:
            for i, b in enumerate(data):
                memory[upper + offset + i] = b
        elif kind == 2:
            upper = int.from_bytes(data, "big") << 4
        elif kind == 4:
            upper = int.from_bytes(data, "big") << 16
    return memory


@needs_gcc
# nucleo-f401re: linked at 0x0 for its QEMU stand-in, flashed at 0x08000000; stm32u585: linked at 0x10000000 (the
# AN505's Secure code memory), flashed at 0x08000000 below it (the hex moves the image down)
@pytest.mark.parametrize("name", ["nucleo-f401re", "stm32u585"])
def test_build_makes_bin_and_hex_at_the_flash_address(tmp_path, name):
    from edgemem.target.toolchain import build_firmware, render_firmware_files

    board = load_board(name)
    render_firmware_files(board, tmp_path)
    for f in ("model.c", "model.h"):
        shutil.copyfile(FAKE_MODEL / f, tmp_path / f)
    sizes = build_firmware(tmp_path, board)
    image = (tmp_path / "firmware.bin").read_bytes()
    assert len(image) == sizes.flash_bytes  # code + read-only data + the .data load image, nothing else
    nm = subprocess.run(["arm-none-eabi-nm", str(tmp_path / "firmware.elf")], capture_output=True, text=True, check=True)
    syms = {p[2]: int(p[0], 16) for p in (line.split() for line in nm.stdout.splitlines()) if len(p) == 3}
    # the vector table opens the image: initial stack pointer, then the reset handler (Thumb bit set)
    assert int.from_bytes(image[0:4], "little") == syms["__em_stack_end"]
    assert int.from_bytes(image[4:8], "little") == syms["Reset_Handler"] | 1
    memory = _ihex_bytes((tmp_path / "firmware.hex").read_text())
    flash_at = board.flasher.address if board.flasher else board.flash.base
    assert min(memory) == flash_at == 0x08000000
    assert bytes(memory[flash_at + i] for i in range(len(image))) == image
    assert len(memory) == len(image)


# ---- a board without a QEMU stand-in (yet) -----------------------------------------------------------------------


def test_rp2040_pico_is_listed_but_cannot_be_built_yet(tmp_path):
    pico = load_board("rp2040-pico")
    assert pico.core.cpu == "cortex-m0plus" and not pico.core.has_fpu and not pico.core.dsp
    assert pico.core.gcc_flags == ["-mcpu=cortex-m0plus", "-mthumb", "-mfloat-abi=soft"]
    assert [(r.name, r.base, r.size) for r in pico.ram] == [
        ("sram", 0x20000000, 256 << 10), ("sram4", 0x20040000, 4 << 10), ("sram5", 0x20041000, 4 << 10),
    ]  # fmt: skip
    assert (pico.flash.base, pico.flash.size) == (0x10000000, 2 << 20)
    assert pico.qemu is None and pico.serial_baud == 115200
    listing = CliRunner().invoke(app, ["boards"])
    assert listing.exit_code == 0 and "rp2040-pico" in listing.output and "none yet" in listing.output
    example = FAKE_MODEL.parents[1] / "examples" / "kws_tiny_int8.tflite"
    res = CliRunner().invoke(app, ["build", "--board", "rp2040-pico", str(example), "-o", str(tmp_path / "p")])
    assert res.exit_code == ToolchainError.exit_code
    assert "rp2040-pico has no QEMU stand-in yet" in res.stderr and "Traceback" not in res.output
