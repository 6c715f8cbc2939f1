"""Firmware project generation and build: linker script + Makefile + runtime from an Image (target/image.py),
arm-none-eabi-gcc via make."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from dataclasses import dataclass, field
from pathlib import Path

from edgemem.board import Board
from edgemem.codegen.escape import c_identifier
from edgemem.codegen.templates import environment as _env
from edgemem.errors import ToolchainError, tail
from edgemem.package_data import data_dir
from edgemem.target.image import Image, qemu_image

FIRMWARE_DIR = data_dir("firmware")
DRIVERS_DIR = FIRMWARE_DIR / "drivers"  # one file per UART, timer and host link; an image names its own

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


def _linker_context(image: Image, stack_size: int) -> dict:
    board = image.board
    default_lr = image.default_region
    default_member = board.default_ram
    extra = []
    for m in board.ram:
        if m is default_member:
            continue
        lr = next((r for r in image.regions if m in r.members), None)
        extra.append({"member": c_identifier(m.name), "region": c_identifier((lr or default_lr).name), "limit": m.size,
                      "modelled": lr is not None})  # fmt: skip
    return {
        "board": board,
        "device": image.device,
        "flash_origin": image.flash_origin,
        "flash_length": board.flash.size,
        "regions": [
            {"name": r.name, "origin": r.origin, "length": r.length, "members": [m.name for m in r.members]}
            for r in image.regions
        ],
        # names the script uses as regions and section names: identifiers (board.py checks them where they enter)
        "default_region": {"name": c_identifier(default_lr.name), "member": c_identifier(default_member.name),
                           "length": default_lr.length},
        "extra_arenas": extra,
        "stack_size": stack_size,
    }


def render_image(image: Image, project_dir: str | Path, *, stack_size: int | None = None,
                 sources: dict[str, str] | None = None) -> list[Path]:
    """Write one image's firmware project into ``project_dir / image.subdir``: linker.ld, the Makefile, the
    runtime C with the image's platform drivers, board_init.c for a board image, and `sources` (the model's
    C; the caller writes it when None). Returns the paths written."""
    # a local import: qemu.py does not need this module
    from edgemem.target.qemu import qemu_args

    board = image.board
    directory = Path(project_dir) / image.subdir
    directory.mkdir(parents=True, exist_ok=True)
    stack = board.stack_size if stack_size is None else int(stack_size)
    if stack <= 0 or stack % 8:
        raise ToolchainError(f"stack size must be a positive multiple of 8 bytes, got {stack}")
    env = _env()
    files = {
        "linker.ld": env.get_template("linker.ld.j2").render(**_linker_context(image, stack)),
        "Makefile": env.get_template("Makefile.j2").render(
            board=board, cpu_flags=board.core.gcc_flags, defines=image.defines, device=image.device,
            link_at=image.flash_origin, qemu_args=[] if image.device else qemu_args(board)),
        **({"board_init.c": env.get_template("board_init.c.j2").render(board=board)} if image.device else {}),
        **(sources or {}),
    }  # fmt: skip
    written = []
    for name, text in files.items():
        (directory / name).write_text(text)
        written.append(directory / name)
    return written + _copy_runtime(directory, image)


def render_linker_script(image: Image, project_dir: str | Path, *, stack_size: int | None = None) -> Path:
    """linker.ld of one image again, with ``stack_size`` bytes of stack (default the board's): written by
    ``--stack auto`` once the call graph has bounded the stack (make then only relinks)."""
    board = image.board
    stack = board.stack_size if stack_size is None else int(stack_size)
    if stack <= 0 or stack % 8:
        raise ToolchainError(f"stack size must be a positive multiple of 8 bytes, got {stack}")
    path = Path(project_dir) / image.subdir / "linker.ld"
    path.write_text(_env().get_template("linker.ld.j2").render(**_linker_context(image, stack)))
    return path


def render_firmware_files(
    board: Board, project_dir: str | Path, *, stack_size: int | None = None, split_regions: bool = False,
    profile: bool = False,
) -> list[Path]:
    """The QEMU stand-in's project in project_dir: render_image of its qemu_image. The model (model.h /
    model.c) is written by the caller. Returns the paths written."""
    image = qemu_image(board, split_regions=split_regions, profile=profile)
    return render_image(image, project_dir, stack_size=stack_size)


def _copy_runtime(directory: Path, image: Image) -> list[Path]:
    """The hand-written runtime (firmware/*.c, *.h) and the image's platform drivers (firmware/drivers/: one
    host link, one timer, one UART; the Makefile compiles every .c of the directory) copied into a project."""
    sources = [p for p in sorted(FIRMWARE_DIR.iterdir()) if p.suffix in (".c", ".h")]
    sources += [DRIVERS_DIR / name for name in image.drivers]
    written = []
    for src in sources:
        if not src.is_file():
            raise ToolchainError(f"board {image.board.name}: no firmware driver {src.name} in {DRIVERS_DIR}")
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
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, stdin=subprocess.DEVNULL,
                              env=env_without_outer_make())  # fmt: skip
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


# What an enclosing make (edgemem run from the user's Makefile, or `make test`) passes down to its sub-makes: its
# flags (-n would make the firmware build a dry run, -k or -i would hide a failure) and its jobserver.
_OUTER_MAKE_VARIABLES = ("MAKEFLAGS", "MFLAGS", "GNUMAKEFLAGS", "MAKELEVEL", "MAKEOVERRIDES")


def env_without_outer_make() -> dict[str, str]:
    return {k: v for k, v in os.environ.items() if k not in _OUTER_MAKE_VARIABLES}


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
