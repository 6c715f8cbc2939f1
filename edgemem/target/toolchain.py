"""Firmware project generation and build: linker script + Makefile from the board, arm-none-eabi-gcc via make."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from dataclasses import dataclass, field
from pathlib import Path

from edgemem.board import Board
from edgemem.codegen.templates import environment as _env
from edgemem.errors import ToolchainError, tail

ROOT = Path(__file__).resolve().parents[2]
FIRMWARE_DIR = ROOT / "firmware"

APT_HINT = "apt-get install -y gcc-arm-none-eabi libnewlib-arm-none-eabi"
_CFLAGS_STAMP = ".edgemem_build_flags"


@dataclass
class FirmwareSizes:
    """Section sizes of firmware.elf (from `arm-none-eabi-size -A`), in bytes."""

    flash_bytes: int  # everything stored in flash: code, read-only data, vectors, .data load image
    text_bytes: int  # .text (incl. vectors) + .rodata + .ARM.ex*
    data_bytes: int  # .data (RAM, initialised from flash)
    bss_bytes: int  # .bss, excluding the arena and the stack
    arena_bytes: int  # all .edgemem_arena* sections
    stack_bytes: int  # .stack
    arena_sections: dict[str, int] = field(default_factory=dict)
    sections: dict[str, int] = field(default_factory=dict)

    @property
    def static_ram_bytes(self) -> int:
        return self.data_bytes + self.bss_bytes

    @property
    def ram_bytes(self) -> int:
        """Everything the image reserves in RAM: stack + data + bss + arena."""
        return self.stack_bytes + self.data_bytes + self.bss_bytes + self.arena_bytes


def _linker_context(board: Board, stack_size: int, split_regions: bool, device: bool = False) -> dict:
    regions = board.device_link_regions() if device else board.link_regions(merge=not split_regions)
    default_lr = next(r for r in regions if r.default)
    default_member = board.default_ram
    extra = []
    for m in board.ram:
        if m is default_member:
            continue
        lr = next((r for r in regions if m in r.members), None)
        extra.append(
            {
                "member": m.name,
                "region": (lr or default_lr).name,
                "limit": m.size,
                "modelled": lr is not None,
            }
        )
    return {
        "board": board,
        "device": device,
        "flash_origin": board.flash.base if device else board.qemu.flash_base,
        "flash_length": board.flash.size,
        "regions": [
            {"name": r.name, "origin": r.origin, "length": r.length, "members": [m.name for m in r.members]}
            for r in regions
        ],
        "default_region": {"name": default_lr.name, "member": default_member.name, "length": default_lr.length},
        "extra_arenas": extra,
        "stack_size": stack_size,
    }


PROFILE_DEFINES = {"EDGEMEM_PROFILE": "1", "EM_CONSOLE_UART": "1", "EM_INPUTS_EMBEDDED": "1"}  # per-step reports over the UART, inputs in flash


def profile_defines(board: Board) -> dict[str, str]:
    """Extra -D macros of a profiling build: per-step reports over the board's UART, inputs in flash."""
    if board.qemu.uart is None:
        raise ToolchainError(
            f"board {board.name} has no [qemu.uart] in its board file, so a profiling build has no serial port to "
            "report over; add the UART of its serial port 0 (kind and base address) to the board file."
        )
    return dict(PROFILE_DEFINES)


def render_firmware_files(
    board: Board, project_dir: str | Path, *, stack_size: int | None = None, split_regions: bool = False,
    profile: bool = False,
) -> list[Path]:
    """Write linker.ld and Makefile for `board` into project_dir and copy the runtime C (firmware/*.c, *.h).

    The model (model.h / model.c) is written by the caller. Returns the paths written."""
    from edgemem.target.qemu import qemu_args  # local import: qemu.py does not need this module

    project = Path(project_dir)
    project.mkdir(parents=True, exist_ok=True)
    stack = board.stack_size if stack_size is None else int(stack_size)
    if stack <= 0 or stack % 8:
        raise ToolchainError(f"stack size must be a positive multiple of 8 bytes, got {stack}")
    env = _env()
    written = []
    linker = env.get_template("linker.ld.j2").render(**_linker_context(board, stack, split_regions))
    (project / "linker.ld").write_text(linker)
    written.append(project / "linker.ld")
    makefile = env.get_template("Makefile.j2").render(
        board=board,
        cpu_flags=board.core.gcc_flags,
        defines={**board.c_defines(), **(profile_defines(board) if profile else {})},
        qemu_args=qemu_args(board),
        device=False,
    )
    (project / "Makefile").write_text(makefile)
    written.append(project / "Makefile")
    return written + _copy_runtime(project)


DEVICE_DIR = "board"  # the real board's image is built in this subdirectory of the project


def render_device_files(board: Board, project_dir: str | Path, sources: dict[str, str], *, stack_size: int | None = None) -> Path:
    """The project for the real board's image in ``project_dir/board``: the model's sources, the runtime C,
    board_init.c from the board file's [device] init table, a linker script at the board's own addresses
    and a Makefile. Returns that directory."""
    device_dir = Path(project_dir) / DEVICE_DIR
    device_dir.mkdir(parents=True, exist_ok=True)
    env = _env()
    stack = board.stack_size if stack_size is None else int(stack_size)
    (device_dir / "linker.ld").write_text(env.get_template("linker.ld.j2").render(**_linker_context(board, stack, False, device=True)))
    (device_dir / "Makefile").write_text(env.get_template("Makefile.j2").render(
        board=board, cpu_flags=board.core.gcc_flags, defines={**board.device_defines(), **PROFILE_DEFINES}, qemu_args=[],
        device=True))  # fmt: skip
    (device_dir / "board_init.c").write_text(env.get_template("board_init.c.j2").render(board=board))
    for name, text in sources.items():
        (device_dir / name).write_text(text)
    _copy_runtime(device_dir)
    return device_dir


def _copy_runtime(directory: Path) -> list[Path]:
    """The hand-written runtime (firmware/*.c, *.h) copied into a firmware project."""
    written = []
    for src in sorted(FIRMWARE_DIR.iterdir()):
        if src.suffix in (".c", ".h"):
            shutil.copyfile(src, directory / src.name)
            written.append(directory / src.name)
    return written


def _require(tool: str) -> str:
    path = shutil.which(tool)
    if path is None:
        raise ToolchainError(f"{tool} not found on PATH: install the Arm GNU toolchain with `{APT_HINT}`")
    return path



def build_firmware(
    project_dir: str | Path,
    board: Board | None = None,
    *,
    timeout: float = 600.0,
    extra_cflags: list[str] | tuple[str, ...] = (),
    jobs: int | None = None,
) -> FirmwareSizes:
    """Run `make` in project_dir (rendered by render_firmware_files) and return the sizes of firmware.elf.

    `extra_cflags` are passed as EXTRA_CFLAGS (e.g. ["-DEM_TIMER_PRELOAD_TICKS=1000"]); changing them forces a
    full rebuild. Raises ToolchainError with the compiler's output on failure or timeout."""
    project = Path(project_dir)
    if not (project / "Makefile").is_file():
        raise ToolchainError(f"{project} has no Makefile: call render_firmware_files(board, project_dir) first")
    _require("arm-none-eabi-gcc")
    _require("arm-none-eabi-size")
    make = shutil.which("make")
    if make is None:
        raise ToolchainError("make not found on PATH: install it with `apt-get install -y make`")
    flags = " ".join(extra_cflags)
    stamp = project / _CFLAGS_STAMP
    cmd = [make, "-C", str(project), f"-j{jobs or os.cpu_count() or 1}", f"EXTRA_CFLAGS={flags}"]
    if not stamp.is_file() or stamp.read_text() != flags:
        cmd.append("-B")
    try:
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, stdin=subprocess.DEVNULL)
    except subprocess.TimeoutExpired as e:
        raise ToolchainError(f"building the firmware in {project} took longer than {timeout:.0f} s (make timed out)") from e
    if proc.returncode != 0:
        stamp.unlink(missing_ok=True)
        raise ToolchainError(
            f"building the firmware in {project} failed (make exit {proc.returncode}"
            f"{', board ' + board.name if board else ''}):\n{tail(proc.stderr or proc.stdout, 6000)}"
        )
    stamp.write_text(flags)
    return firmware_sizes(project / "firmware.elf")


def firmware_sizes(elf_path: str | Path) -> FirmwareSizes:
    """Section sizes of an ELF built from the edgemem linker script."""
    size_tool = _require("arm-none-eabi-size")
    proc = subprocess.run([size_tool, "-A", str(elf_path)], capture_output=True, text=True, timeout=60)
    if proc.returncode != 0:
        raise ToolchainError(f"arm-none-eabi-size failed on {elf_path}: {proc.stderr.strip()}")
    sections: dict[str, int] = {}
    for line in proc.stdout.splitlines():
        m = re.match(r"^(\.\S+)\s+(\d+)\s+(\d+)\s*$", line)
        if m:
            sections[m.group(1)] = int(m.group(2))
    text = sum(v for k, v in sections.items() if k in (".text", ".rodata") or k.startswith(".ARM.ex"))
    data = sections.get(".data", 0)
    arena = {k: v for k, v in sections.items() if k.startswith(".edgemem_arena")}
    return FirmwareSizes(
        flash_bytes=text + data,
        text_bytes=text,
        data_bytes=data,
        bss_bytes=sections.get(".bss", 0),
        arena_bytes=sum(arena.values()),
        stack_bytes=sections.get(".stack", 0),
        arena_sections=arena,
        sections=sections,
    )
