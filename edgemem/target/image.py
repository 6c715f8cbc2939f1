"""What one firmware image is made of, derived from a board file: where flash is linked, the linker's RAM
regions, the -D macros of the runtime, the platform drivers compiled in, and the MPU map.

A board has up to two images, built by the same code path (toolchain.render_image):

- the QEMU stand-in's (``qemu_image``): linked at the QEMU machine's addresses, semihosting for files and exit,
  the QEMU timer, an MPU map that opens exactly flash, RAM and the peripherals used;
- the real board's (``device_image``, from the board file's ``[device]``): linked at the board's own flash and
  RAM, reports over its UART (inputs in flash), ticks from the core's cycle counter, no MPU guard.

``edgemem.board`` only reads and checks board files; everything an image derives from them lives here.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Callable
from dataclasses import dataclass, field

from edgemem.board import Board, MemoryRegion
from edgemem.codegen.escape import c_string, line_comment
from edgemem.errors import EdgememError, ToolchainError
from edgemem.target import mpu

QEMU, DEVICE = "qemu", "device"
DEVICE_DIR = "board"  # the real board's image is built in this subdirectory of the project

# A profiling build (and every board image): per-step reports over the UART, inputs in flash.
PROFILE_DEFINES = {"EDGEMEM_PROFILE": "1", "EM_CONSOLE_UART": "1", "EM_INPUTS_EMBEDDED": "1"}


@dataclass(frozen=True)
class LinkRegion:
    """One linker MEMORY region of an image (contiguous board regions merged)."""

    name: str  # linker region name, e.g. RAM_DTCM
    origin: int
    length: int
    members: tuple[MemoryRegion, ...]
    default: bool


@dataclass(frozen=True)
class Image:
    """One firmware image of a board: everything the linker script, the Makefile and the runtime need."""

    board: Board
    kind: str  # QEMU or DEVICE
    flash_origin: int  # where the vector table is linked
    regions: tuple[LinkRegion, ...]  # linker RAM regions
    defines: dict[str, str] = field(compare=False)  # -D macros of the runtime C
    drivers: tuple[str, ...] = ()  # firmware/drivers/*.c compiled in (host link, timer, UART)
    mpu: tuple[mpu.MpuRegion | mpu.MpuRegionV8, ...] = ()  # what startup.c programs (empty: no guard)
    subdir: str = ""  # where in the project it is built ("" = the project itself)

    @property
    def device(self) -> bool:
        return self.kind == DEVICE

    @property
    def default_region(self) -> LinkRegion:
        return next(r for r in self.regions if r.default)

    def pool_region(self, pool_name: str) -> LinkRegion:
        """The linker region a pool named `pool_name` lands in (a matching board region, else the default)."""
        for lr in self.regions:
            if any(m.name.lower() == pool_name.lower() for m in lr.members):
                return lr
        return self.default_region


# ---- the QEMU stand-in's image ---------------------------------------------------------------------


def qemu_image(board: Board, *, split_regions: bool = False, profile: bool = False) -> Image:
    """The image run under the board's QEMU stand-in. `split_regions`: one linker region per board region
    (each arena pool pinned to the addresses of the region it was planned for) instead of contiguous ones
    merged; `profile`: reports over the QEMU machine's UART."""
    q = board.require_qemu()
    if profile and q.uart is None:
        raise ToolchainError(
            f"board {board.name} has no [qemu.uart] in its board file, so a profiling build has no serial port to "
            "report over; add the UART of its serial port 0 (kind and base address) to the board file."
        )
    if not board.default_ram.qemu:
        raise EdgememError(f"board {board.name}: the default RAM region {board.default_ram.name} is not modelled by QEMU")
    modelled = [r for r in board.ram if r.qemu]
    at = functools.partial(qemu_address, board)
    regions = _link_regions(board, modelled, at, merge=not split_regions)
    guard = tuple(mpu_map(board)) if board.core.mpu else ()  # Cortex-M0: no MPU, nothing to program
    if board.core.armv8m:
        # the stack-limit register faults the push below the stack (UsageFault STKOF) before the MPU would
        d_guard = {**mpu.defines_v8(list(guard)), "EM_STACK_LIMIT": "1"}
    else:
        d_guard = mpu.defines(list(guard))
    ipt = q.instructions_per_tick
    t = q.timer
    d = {
        **_common_defines(board),
        "EM_TICK_NUM": f"{ipt.numerator}u",
        "EM_TICK_DEN": f"{ipt.denominator}u",
        "EM_TIMER_BASE": f"0x{t.base:08X}u",
    }
    if t.kind == "cmsdk":
        d["EM_TIMER_IRQ"] = str(t.irq)
    elif t.kind == "stm32_tim_pair":
        d["EM_TIMER_COARSE_BASE"] = f"0x{t.coarse_base:08X}u"
        d["EM_TIMER_COARSE_PSC"] = f"{t.coarse_prescaler - 1}u"
    drivers = ["host_semihosting.c", f"timer_{t.kind}.c"]
    if q.uart is not None:
        d["EM_UART_BASE"] = f"0x{q.uart.base:08X}u"
        drivers.append(f"uart_{q.uart.kind}.c")
    d.update(d_guard)
    if profile:
        d.update(PROFILE_DEFINES)
    return Image(board, QEMU, q.flash_base, tuple(regions), d, tuple(drivers), guard)


def qemu_address(board: Board, region: MemoryRegion) -> int:
    """Where a modelled RAM region sits under QEMU: the lowest one at [qemu] ram_base, offsets kept."""
    lowest = min(r.base for r in board.ram if r.qemu)
    return region.base - lowest + board.require_qemu().ram_base


def mpu_map(board: Board) -> list[mpu.MpuRegion] | list[mpu.MpuRegionV8]:
    """The QEMU image's MPU regions: exactly `mpu_spans` open (PMSAv8 base/limit regions on Armv8-M)."""
    if board.core.armv8m:
        return mpu.regions_v8(mpu_spans(board), f"board {board.name}")
    return mpu.regions(mpu_spans(board), f"board {board.name}")


def mpu_spans(board: Board) -> list[mpu.Span]:
    """What the QEMU image may touch: its flash (read-only, executable), its RAM (contiguous modelled regions
    merged, no execute) and the peripheral windows it uses (device, no execute). Everything else faults: the
    default background map (PRIVDEFENA) stays off."""
    q = board.require_qemu()
    ram = _link_regions(board, [r for r in board.ram if r.qemu], functools.partial(qemu_address, board), merge=True)
    spans = [mpu.Span("flash", q.flash_base, board.flash.size, mpu.FLASH)]
    spans += [mpu.Span(lr.name.lower(), lr.origin, lr.length, mpu.RAM) for lr in ram]
    spans += [mpu.Span(p.name, p.base, p.size, mpu.DEVICE) for p in q.peripherals]
    if q.uart is not None:
        spans.append(mpu.Span("uart", q.uart.base, q.uart.window, mpu.DEVICE))
    return spans


# ---- the real board's image ------------------------------------------------------------------------


def device_image(board: Board) -> Image:
    """The image for the real board (its [device] section): its own flash base and RAM regions (those usable
    right after reset), its UART and cycle counter, no semihosting, no MPU guard (the guard's map is the QEMU
    stand-in's). It always profiles: a board has no other way to report."""
    dev = board.device
    if dev is None:
        raise ToolchainError(f"board {board.name} has no [device] section: edgemem makes no image for the real board.")
    regions = _link_regions(board, [r for r in board.ram if r.device], lambda r: r.base, merge=True)
    d = {
        **_common_defines(board),
        "EM_DEVICE": "1",
        "EM_TICK_NUM": "1u",
        "EM_TICK_DEN": "1u",
        "EM_TICK_CYCLES": "1",  # ticks are core clock cycles (main.c says so in its report)
        "EM_UART_BASE": f"0x{dev.uart_base:08X}u",
        **mpu.defines([]),
        **PROFILE_DEFINES,
    }
    if dev.uart_brr is not None:
        d["EM_UART_BRR"] = f"0x{dev.uart_brr:X}u"
    drivers = ("host_serial.c", f"timer_{dev.ticks}.c", f"uart_{dev.uart}.c")
    return Image(board, DEVICE, board.flash.base, tuple(regions), d, drivers, (), DEVICE_DIR)


# ---- shared ----------------------------------------------------------------------------------------


def _common_defines(board: Board) -> dict[str, str]:
    # a C string of one printable line: main.c reports it in the line-based device protocol
    return {"EM_BOARD_NAME": c_string(line_comment(board.name)), "EM_HAS_FPU": "1" if board.core.has_fpu else "0", "EM_NUM_IRQS": "96"}


def _link_regions(board: Board, ram: list[MemoryRegion], address: Callable[[MemoryRegion], int], merge: bool) -> list[LinkRegion]:
    """Linker RAM regions over `ram` at `address(region)`: contiguous regions merged unless `merge` is False."""
    default = board.default_ram
    return [LinkRegion("RAM_" + _ident(g[0].name).upper(), address(g[0]), sum(r.size for r in g), tuple(g), default in g)
            for g in _contiguous(ram, merge)]  # fmt: skip


def _contiguous(regions: list[MemoryRegion], merge: bool) -> list[list[MemoryRegion]]:
    """Regions by address, adjacent ones grouped (one linker region each group) when ``merge``."""
    groups: list[list[MemoryRegion]] = []
    for r in sorted(regions, key=lambda r: r.base):
        if merge and groups and groups[-1][-1].end == r.base:
            groups[-1].append(r)
        else:
            groups.append([r])
    return groups


def _ident(s: str) -> str:
    return re.sub(r"[^A-Za-z0-9_]", "_", s)


# ---- user budgets --------------------------------------------------------------------------------


def check_budget(board: Board, ram: int | None, flash: int | None) -> None:
    """Refuse a --ram / --flash budget the QEMU image's MPU map cannot express, where the option enters
    (not at the end of the pipeline, in MPU code that never names the option). `board` already has the
    budgets applied; the error proposes, per option, the nearest sizes that take one MPU region."""
    if board.qemu is None or not board.core.mpu:
        return
    if board.core.armv8m:  # PMSAv8: one region per span of any 32-byte multiple; refused here if not
        mpu_map(board)
        return
    spans = mpu_spans(board)
    needed = sum(len(mpu.cover(s.base, s.size)) for s in spans)
    if needed <= mpu.MAX_REGIONS:
        return
    what = [(opt, size) for opt, size in (("--ram", ram), ("--flash", flash)) if size is not None]
    hints = []
    for opt, size in what:
        base = board.qemu.flash_base if opt == "--flash" else qemu_address(board, board.default_ram)
        below, above = _one_region_sizes(base, size, board.stack_size if opt == "--ram" else 0)
        hints.append(f"{opt} {below:,} or {above:,}" if below else f"{opt} {above:,}")
    raise EdgememError(
        f"with {' and '.join(f'{o} {s:,}' for o, s in what)}, board {board.name}'s QEMU image needs {needed} memory "
        f"protection regions to guard exactly its flash, RAM and peripherals, and the core has {mpu.MAX_REGIONS}. "
        f"Sizes of the form k x 2^n with k <= 8 (e.g. 96K, 320K, 1M) take one region each: try {' / '.join(hints)}."
    )


def _one_region_sizes(base: int, size: int, floor: int) -> tuple[int | None, int]:
    """The largest size in (floor, size) and the smallest above `size` that cover [base, base+size) with one
    MPU region (a power-of-two block with some eighths disabled)."""
    candidates = sorted({k << n for k in range(1, 9) for n in range(5, 33)})
    ok = [s for s in candidates if len(mpu.cover(base, s)) == 1]
    below = next((s for s in reversed(ok) if floor < s < size), None)
    return below, next((s for s in ok if s > size), ok[-1])  # none above: the largest (never a StopIteration)
