"""Boards are data: a board is a TOML file in ``boards/`` (schema documented at the top of each file).

This module is the board-file schema (the dataclasses below) and its validation, nothing more: what a
firmware image derives from a board (linker regions, -D macros, platform drivers, the MPU map) is
``edgemem.target.image``; the MPU arithmetic is ``edgemem.target.mpu``. Nothing board-specific is written in
Python.
"""

from __future__ import annotations

import re
import tomllib
from dataclasses import dataclass, field
from fractions import Fraction
from pathlib import Path

from edgemem.errors import EdgememError, ToolchainError

BOARDS_DIR = Path(__file__).resolve().parent.parent / "boards"

# Peripheral kinds a board file may name; each is one driver file, firmware/drivers/timer_<kind>.c or
# uart_<kind>.c (tests/test_image.py checks the two lists agree).
QEMU_TIMERS = ("cmsdk", "stm32_tim_pair", "nrf51")  # [qemu.timer] kind
QEMU_UARTS = ("cmsdk", "stm32_usart", "nrf51")  # [qemu.uart] kind
DEVICE_UARTS = ("stm32_usart", "stm32_usart_v2", "nrf51")  # [device] uart
DEVICE_TICKS = ("dwt",)  # [device] ticks
_SPEEDS = ("fast", "normal")
FLASH_TOOLS = ("openocd", "st-flash", "pyocd")  # flashers edgemem knows how to drive


@dataclass(frozen=True)
class MemoryRegion:
    name: str
    base: int
    size: int
    speed: str = "normal"
    default: bool = False
    qemu: bool = True  # modelled by the board's QEMU machine
    device: bool = True  # usable by the board image right after reset (false: needs a memory controller set up)

    @property
    def end(self) -> int:
        return self.base + self.size


@dataclass(frozen=True)
class Core:
    cpu: str
    fpu: str = "none"
    float_abi: str = "soft"
    dsp: bool = False
    mpu: bool = True  # a PMSAv7 MPU (Cortex-M0 has none: no guard, nothing to program)

    @property
    def has_fpu(self) -> bool:
        return self.fpu != "none"

    @property
    def gcc_flags(self) -> list[str]:
        flags = [f"-mcpu={self.cpu}", "-mthumb"]
        if self.has_fpu:
            flags += [f"-mfpu={self.fpu}", f"-mfloat-abi={self.float_abi}"]
        else:
            flags += ["-mfloat-abi=soft"]
        return flags


@dataclass(frozen=True)
class Peripheral:
    name: str
    base: int
    size: int


@dataclass(frozen=True)
class QemuTimer:
    kind: str
    base: int
    hz: int
    irq: int | None = None
    coarse_base: int | None = None
    coarse_prescaler: int | None = None


@dataclass(frozen=True)
class QemuUart:
    """Serial port 0 of the QEMU machine; profiling builds write their report to it."""

    kind: str  # "cmsdk" (CMSDK APB UART) or "stm32_usart"
    base: int
    window: int = 0x1000  # bytes of address space the MPU opens for it


@dataclass(frozen=True)
class QemuConfig:
    machine: str
    cpu: str
    flash_base: int
    ram_base: int
    timer: QemuTimer
    icount_shift: int = 0
    console: str = "semihosting"
    peripherals: tuple[Peripheral, ...] = ()
    uart: QemuUart | None = None

    @property
    def instructions_per_tick(self) -> Fraction:
        """Instructions per timer tick: with -icount shift=N one instruction takes 2^N ns of virtual time."""
        return Fraction(10**9, self.timer.hz * (1 << self.icount_shift))


@dataclass(frozen=True)
class FlasherConfig:
    """How to put the image on a real board: the tools to try, in order, and each one's settings."""

    order: tuple[str, ...]  # tools to try, first installed one wins (names from FLASH_TOOLS)
    address: int  # where every tool writes the raw image (firmware.bin): [flasher] address, else [flash] base
    openocd_interface: str | None = None  # openocd -f cfg of the debug probe, e.g. interface/stlink.cfg
    openocd_target: str | None = None  # openocd -f cfg of the chip, e.g. target/stm32f7x.cfg
    openocd_commands: tuple[str, ...] = ()  # openocd -c commands between interface and target cfg
    pyocd_target: str | None = None  # pyocd --target name, e.g. stm32f746nghx
    timeout_s: float = 120.0  # the flasher is killed after this long


@dataclass(frozen=True)
class DeviceConfig:
    """The real board's image (``[device]``): its serial port, tick source and the register writes that bring
    the port up from reset (clock enables, pin functions, baud), each (address, clear mask, set mask)."""

    uart: str  # register layout: "stm32_usart" (F1/F2/F4), "stm32_usart_v2" (F0/F3/F7/H7/L4), "nrf51" (nRF51/52 UART)
    uart_base: int
    ticks: str  # "dwt": the core's cycle counter (Cortex-M3/M4/M7)
    cpu_hz: int  # core clock after reset (the image does not change it)
    uart_brr: int | None = None  # STM32: BRR for the [serial] baud at the clock after reset
    init: tuple[tuple[int, int, int], ...] = ()  # clear mask 0xFFFFFFFF: a plain write of the set mask


@dataclass(frozen=True)
class Board:
    name: str
    description: str
    core: Core
    flash: MemoryRegion
    ram: tuple[MemoryRegion, ...]
    qemu: QemuConfig | None  # None: no QEMU stand-in (yet); building or running under QEMU raises
    stack_size: int = 8192
    arena_align: int = 4  # byte alignment of every tensor offset in the arena
    source: Path | None = field(default=None, compare=False)
    flasher: FlasherConfig | None = None  # None: not a board one flashes (an FPGA stand-in)
    serial_baud: int | None = None  # the board's serial console (USB virtual COM port of its probe)
    device: DeviceConfig | None = None  # None: no image for the real board (only the QEMU stand-in's)

    # ---- plain facts -------------------------------------------------------------------------
    @property
    def ram_bytes(self) -> int:
        return sum(r.size for r in self.ram)

    @property
    def flash_bytes(self) -> int:
        return self.flash.size

    @property
    def default_ram(self) -> MemoryRegion:
        for r in self.ram:
            if r.default:
                return r
        return self.ram[0]

    def require_qemu(self) -> QemuConfig:
        """The QEMU stand-in; a board without one cannot be built or run by edgemem yet."""
        if self.qemu is None:
            where = f" in {self.source}" if self.source else ""
            raise ToolchainError(
                f"board {self.name} has no QEMU stand-in yet (no [qemu] section{where}): edgemem links and runs "
                "its firmware on a QEMU stand-in, so it cannot build or run for this board. Pick a board that has "
                "one (`edgemem boards`, column 'QEMU stand-in') or add a [qemu] section to the board file."
            )
        return self.qemu

    def ram_region(self, name: str) -> MemoryRegion | None:
        for r in self.ram:
            if r.name.lower() == name.lower():
                return r
        return None


# ---- loading -------------------------------------------------------------------------------------


def list_boards() -> list[str]:
    """Names of the boards shipped in boards/."""
    return sorted(p.stem for p in BOARDS_DIR.glob("*.toml"))


def load_board(name_or_path: str | Path) -> Board:
    """Load a board by name (a file in boards/) or by the path of a .toml file."""
    p = Path(name_or_path)
    if p.suffix == ".toml" or "/" in str(name_or_path) or "\\" in str(name_or_path):
        path = p
    else:
        path = BOARDS_DIR / f"{name_or_path}.toml"
    if not path.is_file():
        known = ", ".join(list_boards()) or "(none)"
        raise EdgememError(f"unknown board '{name_or_path}': known boards are {known}; or pass the path of a board .toml file")
    try:
        data = tomllib.loads(path.read_text())
    except tomllib.TOMLDecodeError as e:
        raise EdgememError(f"board file {path} is not valid TOML: {e}") from e
    try:
        return _parse(data, path)
    except (KeyError, TypeError, ValueError) as e:
        raise EdgememError(f"board file {path}: {e}") from e


def _uart(d: dict | None) -> QemuUart | None:
    if d is None:
        return None
    kind = str(_need(d, "kind", "[qemu.uart]"))
    if kind not in QEMU_UARTS:
        raise ValueError(f"[qemu.uart] kind must be one of {QEMU_UARTS}, got {kind!r}")
    return QemuUart(kind, _int(d, "base", "[qemu.uart]"))


def _need(d: dict, key: str, where: str):
    if key not in d:
        raise KeyError(f"missing '{key}' in {where}")
    return d[key]


def _int(d: dict, key: str, where: str) -> int:
    v = _need(d, key, where)
    if not isinstance(v, int) or isinstance(v, bool) or v < 0:
        raise ValueError(f"'{key}' in {where} must be a non-negative integer, got {v!r}")
    return v


def _parse(data: dict, path: Path) -> Board:
    name = str(_need(data, "name", "the top level"))
    core_d = _need(data, "core", "the top level")
    core = Core(
        cpu=str(_need(core_d, "cpu", "[core]")),
        fpu=str(core_d.get("fpu", "none")),
        float_abi=str(core_d.get("float_abi", "soft" if core_d.get("fpu", "none") == "none" else "hard")),
        dsp=bool(core_d.get("dsp", False)),
        mpu=bool(core_d.get("mpu", True)),
    )
    fl = _need(data, "flash", "the top level")
    flash = MemoryRegion("flash", _int(fl, "base", "[flash]"), _int(fl, "size", "[flash]"))
    ram = []
    for i, r in enumerate(_need(data, "ram", "the top level")):
        where = f"[[ram]] #{i + 1}"
        speed = str(r.get("speed", "normal"))
        if speed not in _SPEEDS:
            raise ValueError(f"speed in {where} must be one of {_SPEEDS}, got {speed!r}")
        rname = str(_need(r, "name", where))
        if not re.fullmatch(r"[A-Za-z][A-Za-z0-9_]*", rname):
            raise ValueError(f"name in {where} must be an identifier, got {rname!r}")
        ram.append(
            MemoryRegion(rname, _int(r, "base", where), _int(r, "size", where), speed,
                         bool(r.get("default", False)), bool(r.get("qemu", True)), bool(r.get("device", True)))
        )
    if not ram:
        raise ValueError("at least one [[ram]] region is needed")
    if sum(r.default for r in ram) > 1:
        raise ValueError("more than one [[ram]] region has default = true")
    q = data.get("qemu")
    qemu = _parse_qemu(q, core) if q is not None else None  # a board may have no stand-in yet
    stack_size = _int(data, "stack_size", "the top level") if "stack_size" in data else 8192
    if stack_size % 8:
        raise ValueError("stack_size must be a multiple of 8")
    arena_align = _int(data, "arena_align", "the top level") if "arena_align" in data else 4
    if arena_align < 1 or arena_align & (arena_align - 1):
        raise ValueError("arena_align must be a power of two")
    return Board(name, str(data.get("description", name)), core, flash, tuple(ram), qemu, stack_size, arena_align, path,
                 _parse_flasher(data.get("flasher"), flash), _parse_serial_baud(data.get("serial")),
                 _parse_device(data.get("device"), core))


def _parse_qemu(q: dict, core: Core) -> QemuConfig:
    td = _need(q, "timer", "[qemu]")
    kind = str(_need(td, "kind", "[qemu.timer]"))
    if kind not in QEMU_TIMERS:
        raise ValueError(f"[qemu.timer] kind must be one of {QEMU_TIMERS}, got {kind!r}")
    timer = QemuTimer(
        kind=kind,
        base=_int(td, "base", "[qemu.timer]"),
        hz=_int(td, "hz", "[qemu.timer]"),
        irq=_int(td, "irq", "[qemu.timer]") if kind == "cmsdk" else None,
        coarse_base=_int(td, "coarse_base", "[qemu.timer]") if kind == "stm32_tim_pair" else None,
        coarse_prescaler=_int(td, "coarse_prescaler", "[qemu.timer]") if kind == "stm32_tim_pair" else None,
    )
    if timer.hz == 0:
        raise ValueError("[qemu.timer] hz must be > 0")
    periph = tuple(
        Peripheral(str(_need(p, "name", "[[qemu.peripheral]]")), _int(p, "base", "[[qemu.peripheral]]"),
                   _int(p, "size", "[[qemu.peripheral]]"))
        for p in q.get("peripheral", [])
    )
    qemu = QemuConfig(
        machine=str(_need(q, "machine", "[qemu]")),
        cpu=str(q.get("cpu", core.cpu)),
        flash_base=_int(q, "flash_base", "[qemu]"),
        ram_base=_int(q, "ram_base", "[qemu]"),
        timer=timer,
        icount_shift=int(q.get("icount_shift", 0)),
        console=str(q.get("console", "semihosting")),
        peripherals=periph,
        uart=_uart(q.get("uart")),
    )
    if qemu.console != "semihosting":
        raise ValueError(f"[qemu] console {qemu.console!r} is not supported (only 'semihosting')")
    return qemu


def _parse_flasher(d: dict | None, flash: MemoryRegion) -> FlasherConfig | None:
    if d is None:
        return None
    order = tuple(str(t) for t in _need(d, "order", "[flasher]"))
    unknown = [t for t in order if t not in FLASH_TOOLS]
    if not order or unknown:
        raise ValueError(f"[flasher] order must list tools out of {FLASH_TOOLS}, got {list(order)!r}")
    ocd, pyo = d.get("openocd", {}), d.get("pyocd", {})
    if "openocd" in order:
        _need(ocd, "interface", "[flasher.openocd]")
        _need(ocd, "target", "[flasher.openocd]")
    if "pyocd" in order:
        _need(pyo, "target", "[flasher.pyocd]")
    timeout = d.get("timeout_s", 120)
    if not isinstance(timeout, (int, float)) or isinstance(timeout, bool) or timeout <= 0:
        raise ValueError(f"[flasher] timeout_s must be a positive number of seconds, got {timeout!r}")
    return FlasherConfig(
        order=order,
        address=_int(d, "address", "[flasher]") if "address" in d else flash.base,
        openocd_interface=ocd.get("interface"),
        openocd_target=ocd.get("target"),
        openocd_commands=tuple(str(c) for c in ocd.get("commands", [])),
        pyocd_target=pyo.get("target"),
        timeout_s=float(timeout),
    )


def _parse_device(d: dict | None, core: Core) -> DeviceConfig | None:
    if d is None:
        return None
    uart, ticks = str(_need(d, "uart", "[device]")), str(_need(d, "ticks", "[device]"))
    if uart not in DEVICE_UARTS:
        raise ValueError(f"[device] uart must be one of {DEVICE_UARTS}, got {uart!r}")
    if ticks not in DEVICE_TICKS:
        raise ValueError(f"[device] ticks must be one of {DEVICE_TICKS}, got {ticks!r}")
    if ticks == "dwt" and core.cpu in ("cortex-m0", "cortex-m0plus", "cortex-m23"):
        raise ValueError(f"[device] ticks = 'dwt' needs a Cortex-M3/M4/M7 cycle counter; {core.cpu} has none")
    if uart.startswith("stm32") and "uart_brr" not in d:
        raise ValueError("[device] uart_brr is needed for an STM32 USART (kernel clock after reset / baud)")
    init = []
    for i, entry in enumerate(d.get("init", [])):
        if not (isinstance(entry, list) and len(entry) == 3 and all(isinstance(v, int) and 0 <= v < 1 << 32 for v in entry)):
            raise ValueError(f"[device] init entry #{i + 1} must be [address, clear mask, set mask] (32-bit integers), got {entry!r}")
        init.append((entry[0], entry[1], entry[2]))
    return DeviceConfig(uart, _int(d, "uart_base", "[device]"), ticks, _int(d, "cpu_hz", "[device]"),
                        _int(d, "uart_brr", "[device]") if "uart_brr" in d else None, tuple(init))  # fmt: skip


def _parse_serial_baud(d: dict | None) -> int | None:
    if d is None:
        return None
    baud = _int(d, "baud", "[serial]")
    if baud == 0:
        raise ValueError("[serial] baud must be > 0")
    return baud
