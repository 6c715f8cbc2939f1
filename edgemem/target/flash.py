"""Flash a built image onto a real board with the first installed tool of the board's [flasher] order.

Every tool writes the raw image (firmware.bin, made by the project's Makefile) at the board's flasher address
(its [flash] base unless the board file says otherwise), so all three put the same bytes at the same place.
A board with a [device] section has its own image in the project's board/ directory (linked at its flash,
its UART, no semihosting): that one is flashed; otherwise the QEMU stand-in's, with a warning.
"""

from __future__ import annotations

import re
import shlex
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path

from edgemem.board import FLASH_TOOLS, Board, FlasherConfig
from edgemem.errors import DeviceError, EdgememError, ToolchainError, tail
from edgemem.target.image import DEVICE_DIR

IMAGE = "firmware.bin"
OBJCOPY = "arm-none-eabi-objcopy"

INSTALL_HINTS = {
    "openocd": "apt-get install -y openocd",
    "st-flash": "apt-get install -y stlink-tools",
    "pyocd": "pip install pyocd",
}

# What the tools print when no debug probe is attached (or it cannot be opened).
_NO_PROBE = re.compile(
    r"no (debug )?probe|couldn't find any st-?link|no st-?link|open failed|unable to open|no device found|"
    r"no connected debug probes|LIBUSB_ERROR|Error connecting DP|could not find",
    re.IGNORECASE,
)


@dataclass
class FlashResult:
    tool: str
    command: list[str]
    image: Path
    address: int
    output: str  # the tool's stdout and stderr
    note: str | None = None  # what the flashed image is (and is not) for this board

    @property
    def command_line(self) -> str:
        return shlex.join(self.command)


def flash_command(tool: str, tool_path: str, flasher: FlasherConfig, image: Path) -> list[str]:
    """The exact argv that writes `image` (a raw binary) at flasher.address, verifies it and resets the chip."""
    address = f"0x{flasher.address:08x}"
    if tool == "openocd":
        args = [tool_path, "-f", str(flasher.openocd_interface)]
        for command in flasher.openocd_commands:
            args += ["-c", command]
        # braces keep a path with spaces one word in openocd's Tcl
        return args + ["-f", str(flasher.openocd_target), "-c", f"program {{{image}}} {address} verify reset exit"]
    if tool == "st-flash":
        return [tool_path, "--reset", "write", str(image), address]
    if tool == "pyocd":
        return [tool_path, "flash", "--target", str(flasher.pyocd_target), "--base-address", address, str(image)]
    raise ValueError(f"unknown flash tool {tool!r}")


def choose_tool(board: Board, only: str | None = None) -> tuple[str, str]:
    """(tool name, its path): the first tool of the board's order found on PATH, or `only` if given."""
    flasher = _flasher(board)
    if only is not None and only not in flasher.order:
        raise EdgememError(
            f"--tool {only} is not one of board {board.name}'s flash tools ({', '.join(flasher.order)}); "
            "leave --tool out to use the first one installed."
        )
    candidates = [only] if only else list(flasher.order)
    for tool in candidates:
        path = shutil.which(tool)
        if path is not None:
            return tool, path
    hints = "; ".join(f"{t}: `{INSTALL_HINTS[t]}`" for t in candidates)
    raise ToolchainError(
        f"no flash tool for board {board.name} found on PATH (looked for {', '.join(candidates)}, in the board's "
        f"order of preference). Install one: {hints}."
    )


def flash(project: str | Path, board: Board, *, tool: str | None = None, timeout_s: float | None = None) -> FlashResult:
    """Write the project's firmware.bin to the board with the first installed tool of its [flasher] order."""
    flasher = _flasher(board)
    board_image = Path(project) / DEVICE_DIR
    on_board = board.device is not None and (board_image / "firmware.elf").is_file()
    image = raw_image(board_image if on_board else Path(project))
    name, path = choose_tool(board, tool)
    command = flash_command(name, path, flasher, image)
    timeout = flasher.timeout_s if timeout_s is None else timeout_s
    try:
        proc = subprocess.run(command, capture_output=True, text=True, timeout=timeout, stdin=subprocess.DEVNULL)
    except subprocess.TimeoutExpired as e:
        raise DeviceError(
            f"{name} did not finish flashing board {board.name} within {timeout:g} s and was stopped; is the probe "
            f"connected and the board powered? command: {shlex.join(command)}\n{_text(e.stderr) or _text(e.stdout)}"
        ) from e
    except OSError as e:
        raise ToolchainError(f"cannot start {name} ({path}): {e}. Reinstall it: `{INSTALL_HINTS[name]}`.") from e
    output = (proc.stdout or "") + (proc.stderr or "")
    if proc.returncode != 0:
        hint = (" No debug probe was found: connect the board's USB (ST-LINK/J-Link/CMSIS-DAP) port, check the "
                "cable and the udev permissions, then retry.") if _NO_PROBE.search(output) else ""  # fmt: skip
        raise DeviceError(
            f"flashing board {board.name} with {name} failed (exit code {proc.returncode}).{hint} "
            f"command: {shlex.join(command)}\n{tail(proc.stderr or proc.stdout, 3000)}"
        )
    return FlashResult(name, command, image, flasher.address, output, None if on_board else _stand_in_note(board, flasher.address))


def _stand_in_note(board: Board, address: int) -> str | None:
    """A board with a [device] section gets its own image (project/board); without one, the only image is the
    QEMU stand-in's: say so when it goes onto the real board."""
    q = board.qemu
    if q is None:
        return None
    return (f"the image is built for the QEMU stand-in {q.machine} (linked at 0x{q.flash_base:08X}, written at "
            f"0x{address:08X}) and reports through semihosting, which stops the core unless a debugger is attached.")


def raw_image(project: Path) -> Path:
    """The project's firmware.bin; made from firmware.elf with objcopy if the project predates it."""
    image = project / IMAGE
    elf = project / "firmware.elf"
    if image.is_file() and (not elf.is_file() or image.stat().st_mtime >= elf.stat().st_mtime):
        return image.resolve()
    if not elf.is_file():
        raise EdgememError(f"'{project}' has no firmware.elf or {IMAGE}: build it first with `edgemem build`.")
    objcopy = shutil.which(OBJCOPY)
    if objcopy is None:
        raise ToolchainError(f"{OBJCOPY} not found on PATH: install it with `apt-get install -y gcc-arm-none-eabi`.")
    proc = subprocess.run([objcopy, "-O", "binary", str(elf), str(image)], capture_output=True, text=True, timeout=60)
    if proc.returncode != 0:
        raise ToolchainError(f"{OBJCOPY} could not make {image} from {elf}: {proc.stderr.strip()}")
    return image.resolve()


def _flasher(board: Board) -> FlasherConfig:
    if board.flasher is None:
        where = f" ({board.source})" if board.source else ""
        raise EdgememError(
            f"board {board.name} has no [flasher] section in its board file{where}, so edgemem does not know how "
            f"to flash it (it may exist only as a QEMU stand-in). Add [flasher] with an order out of {FLASH_TOOLS}."
        )
    return board.flasher


def _text(data: str | bytes | None) -> str:
    if isinstance(data, bytes):
        return data.decode("utf-8", "replace")
    return data or ""

