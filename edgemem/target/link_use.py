"""What a firmware image really takes in each memory region, measured by the linker itself.

The plan counts the arena and the stack; the firmware adds its own static RAM (.data/.bss of the runtime, the
kernels and the model's state) and its flash (code, weights, the .data load image). Those are only known once
linked, and when the real link overflows a region ld says "overflowed by N bytes" and writes no ELF to read.
So ``measure`` links the same objects once more with a probe linker script: the same sections in the same order,
each RAM region moved to a far-away address where it has room (same address modulo 1 MiB, so the alignment
padding is the same) and flash made large. From that ELF: the bytes each real region would need, what makes
them up, and the flash the image needs. The real linker.ld is written back afterwards.

    measure(project, image, stack_size) -> LinkUse
"""

from __future__ import annotations

import re
import subprocess
from dataclasses import dataclass, field
from pathlib import Path

from edgemem.budget import AUTO_STACK_PLANNED
from edgemem.errors import DoesNotFitError, ToolchainError
from edgemem.target.image import Image

_PROBE_RAM = 0x40000000  # the probe's first RAM region; the next ones follow every _PROBE_SPAN bytes
_PROBE_SPAN = 0x10000000
_PROBE_FLASH = 0x10000000  # ends below _PROBE_RAM for any flash origin up to 0x30000000
_KEEP_MODULO = 0x100000  # region origins keep their address modulo this: the same alignment padding


@dataclass
class RegionUse:
    """One linker RAM region: its real length and what the image puts in it (section -> bytes)."""

    name: str  # linker region, e.g. RAM_DTCM
    members: tuple[str, ...]  # board RAM regions it covers
    length: int
    used: int  # from the region's origin to the end of its last section (alignment padding included)
    sections: dict[str, int] = field(default_factory=dict)

    @property
    def over(self) -> int:
        return self.used - self.length

    @property
    def arena(self) -> int:
        return sum(v for k, v in self.sections.items() if k.startswith(".edgemem_arena"))

    @property
    def before_arena(self) -> int:
        """Bytes below the region's first arena section: stack, .data, .bss and their alignment padding."""
        return self.used - self.arena


@dataclass
class LinkUse:
    regions: list[RegionUse]
    flash_length: int
    flash_used: int
    sections: dict[str, int]  # every allocated section's size

    def ram_overflows(self) -> list[RegionUse]:
        return [r for r in self.regions if r.over > 0]

    @property
    def flash_over(self) -> int:
        return self.flash_used - self.flash_length


def _probe_context(ctx: dict) -> dict:
    """The linker template's context with every RAM region far away and roomy, flash large, no size ASSERT hit."""
    regions = [dict(r, origin=_PROBE_RAM + i * _PROBE_SPAN + r["origin"] % _KEEP_MODULO, length=_PROBE_SPAN // 2)
               for i, r in enumerate(ctx["regions"])]  # fmt: skip
    extra = [dict(a, limit=_PROBE_SPAN // 2) for a in ctx["extra_arenas"]]
    default = dict(ctx["default_region"], length=_PROBE_SPAN // 2)
    return dict(ctx, regions=regions, extra_arenas=extra, default_region=default, flash_length=_PROBE_FLASH)


def measure(project: str | Path, image: Image, stack_size: int) -> LinkUse:
    """Link ``image``'s project (``project / image.subdir``, already compiled or compilable) with the probe
    script and read what each region and the flash would need; the real linker.ld is restored."""
    from edgemem.codegen.templates import environment
    from edgemem.target.toolchain import _linker_context, build_firmware, render_linker_script

    directory = Path(project) / image.subdir
    real = _linker_context(image, stack_size)
    probe = _probe_context(real)
    (directory / "linker.ld").write_text(environment().get_template("linker.ld.j2").render(**probe))
    try:
        build_firmware(directory, image.board)
        return _read(directory / "firmware.elf", real, probe)
    finally:
        render_linker_script(image, project, stack_size=stack_size)
        (directory / "firmware.elf").unlink(missing_ok=True)  # the probe's image must never be run or flashed


def _read(elf: Path, real: dict, probe: dict) -> LinkUse:
    sections = _section_table(elf)
    regions = []
    for r, p in zip(real["regions"], probe["regions"]):
        inside = {name: (addr, size) for name, (addr, size) in sections.items()
                  if size and p["origin"] <= addr < p["origin"] + p["length"]}  # fmt: skip
        end = max((addr + size for addr, size in inside.values()), default=p["origin"])
        regions.append(RegionUse(r["name"], tuple(r["members"]), r["length"], end - p["origin"],
                                 {name: size for name, (_, size) in inside.items()}))  # fmt: skip
    flash_used = _symbol(elf, "__em_flash_used")
    return LinkUse(regions, real["flash_length"], flash_used, {k: s for k, (_, s) in sections.items()})


def _section_table(elf: Path) -> dict[str, tuple[int, int]]:
    """section -> (address, size) of the allocated sections (`arm-none-eabi-size -A`)."""
    out = _run(["arm-none-eabi-size", "-A", str(elf)])
    table = {}
    for line in out.splitlines():
        m = re.match(r"^(\.\S+)\s+(\d+)\s+(\d+)\s*$", line)
        if m and not m.group(1).startswith((".debug", ".comment", ".ARM.attributes")):
            table[m.group(1)] = (int(m.group(3)), int(m.group(2)))
    return table


def _symbol(elf: Path, name: str) -> int:
    for line in _run(["arm-none-eabi-nm", str(elf)]).splitlines():
        parts = line.split()
        if len(parts) == 3 and parts[2] == name:
            return int(parts[0], 16)
    raise ToolchainError(f"{elf} has no symbol {name}: it was not linked with edgemem's linker script")


def _run(cmd: list[str]) -> str:
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=60)
    if proc.returncode != 0:
        raise ToolchainError(f"{cmd[0]} failed on {cmd[-1]}: {proc.stderr.strip()}")
    return proc.stdout


class LinkDoesNotFitError(DoesNotFitError):
    """The linked image overflows a RAM region or the flash: one paragraph with the linker's figures."""

    def __init__(self, message: str, use: LinkUse, image: Image):
        super().__init__(message)
        self.use, self.image = use, image

    def default_static_bytes(self) -> int | None:
        """What the default RAM region holds besides the stack and the arena (.data, .bss, alignment), when only
        RAM overflowed (a plan with this figure can fix it); None when the flash overflowed."""
        if self.use.flash_over > 0:
            return None
        default = next(r for r, lr in zip(self.use.regions, self.image.regions) if lr.default)
        return default.before_arena - self.image.board.stack_size

    @classmethod
    def from_use(cls, use: LinkUse, board, model_name: str, image: Image) -> LinkDoesNotFitError | None:
        parts = [_flash_sentence(use, board, model_name)] if use.flash_over > 0 else []
        parts += [_region_sentence(r, board, model_name) for r in use.ram_overflows()]
        if not parts:
            return None
        return cls(" ".join(parts) + " " + _ways_out(use, board), use, image)


def _region_sentence(r: RegionUse, board, model_name: str) -> str:
    s = r.sections
    stack, data, bss = s.get(".stack", 0), s.get(".data", 0), s.get(".bss", 0)
    pad = r.used - sum(s.values())
    members = " + ".join(r.members)
    return (
        f"{model_name} does not fit board {board.name}'s RAM region {members} ({r.length:,} B): the linked firmware "
        f"needs {r.used:,} B there, {r.over:,} B too many: the arena's pools {r.arena:,} B, the stack {stack:,} B and "
        f"the firmware's own static data {data + bss:,} B (.data {data:,} B + .bss {bss:,} B: the runtime's, the "
        f"kernels' and the model's variables){f', plus {pad:,} B of alignment' if pad else ''}."
    )


def _flash_sentence(use: LinkUse, board, model_name: str) -> str:
    s = use.sections
    code = sum(v for k, v in s.items() if k == ".text" or k.startswith(".ARM.ex"))
    return (
        f"{model_name}'s firmware needs {use.flash_used:,} B of flash but board {board.name} has {use.flash_length:,} B "
        f"({use.flash_over:,} B too many): code {code:,} B, weights and other constants {s.get('.rodata', 0):,} B, "
        f"initial values of .data {s.get('.data', 0):,} B."
    )


def _ways_out(use: LinkUse, board) -> str:
    ways = []
    if use.flash_over > 0:
        ways.append(f"--flash {_size_text(_one_mpu_region_size(use.flash_used))} (or more) to build for a larger flash")
    if use.ram_overflows() and board.stack_size > AUTO_STACK_PLANNED:  # a board's default reservation, not a measured one
        ways.append("--stack auto (the stack sized from the firmware's call graph, usually under 1 KiB, instead of "
                    f"{board.stack_size:,} B)")  # fmt: skip
    if use.ram_overflows():
        ways.append(f"--ram {_size_text(_one_mpu_region_size(sum(r.used for r in use.regions)))} (or more) to "
                    "build for more RAM")  # fmt: skip
    return f"Use a board with more {'flash' if use.flash_over > 0 and not use.ram_overflows() else 'memory'}, a " \
           f"smaller model, or {' or '.join(ways)}."  # fmt: skip


def _one_mpu_region_size(at_least: int) -> int:
    """The smallest k x 2^n (k <= 8) of at least ``at_least`` bytes: one MPU region at a board's aligned base, a
    size --ram/--flash accept (budget.board_with_budget)."""
    return min(k << n for k in range(1, 9) for n in range(5, 33) if k << n >= at_least)


def _size_text(size: int) -> str:
    for unit, scale in (("M", 1 << 20), ("K", 1 << 10)):
        if size % scale == 0:
            return f"{size // scale}{unit}"
    return str(size)
