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
from typing import Annotated, Literal

from pydantic import AfterValidator, BaseModel, ConfigDict, Field, StringConstraints, ValidationError, model_validator

from edgemem.errors import EdgememError, ToolchainError
from edgemem.package_data import data_dir

BOARDS_DIR = data_dir("boards")

# Peripheral kinds a board file may name; each is one driver file, firmware/drivers/timer_<kind>.c or
# uart_<kind>.c (tests/test_image.py checks the two lists agree).
QEMU_TIMERS = ("cmsdk", "stm32_tim_pair", "nrf51", "sse_counter")  # [qemu.timer] kind
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
    mpu: bool = True  # an MPU (Cortex-M0 has none: no guard, nothing to program)

    @property
    def armv8m(self) -> bool:
        """Armv8-M Mainline (Cortex-M33) or Armv8.1-M (Cortex-M55): a PMSAv8 MPU (base/limit regions) and a
        stack-limit register."""
        return self.cpu in ARMV8M_CPUS

    @property
    def has_fpu(self) -> bool:
        return self.fpu != "none"

    @property
    def gcc_flags(self) -> list[str]:
        # gcc's cortex-m33 has the DSP extension unless told otherwise; M4/M7 always have it
        cpu = f"{self.cpu}+nodsp" if self.armv8m and not self.dsp else self.cpu
        flags = [f"-mcpu={cpu}", "-mthumb"]
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
    # the board file as validated, every default filled in (JSON): what a build records, to run on exactly it
    definition: dict | None = field(default=None, compare=False, repr=False)

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


# ---- the board-file schema -------------------------------------------------------------------------
# A board file is untrusted input: its strings reach gcc flags, Makefiles, linker scripts, C defines and QEMU's
# command line, and its numbers the MPU and the linker. So every string is a known value or a strict pattern,
# every number is typed with a range, and a key the schema does not know is refused (a misspelt key would
# otherwise silently take its default). The TOML layout is mirrored by the models below; `_cross_check` adds
# what relates several keys; `_to_board` turns the result into the dataclasses above.

U32 = 1 << 32
# ARMv6-M/v7-M, Armv8-M Mainline and Armv8.1-M (M55: MVE, with DSP always): what the firmware runs on
CPUS = ("cortex-m0", "cortex-m0plus", "cortex-m3", "cortex-m4", "cortex-m7", "cortex-m33", "cortex-m55")
ARMV8M_CPUS = ("cortex-m33", "cortex-m55")
FPUS = {"none": CPUS, "fpv4-sp-d16": ("cortex-m4",), "fpv5-sp-d16": ("cortex-m7", "cortex-m33"),
        "fpv5-d16": ("cortex-m7", "cortex-m55")}  # fmt: skip
DSP_CPUS = ("cortex-m4", "cortex-m7", "cortex-m33", "cortex-m55")
DWT_CPUS = ("cortex-m3", "cortex-m4", "cortex-m7", "cortex-m33", "cortex-m55")  # cores with a DWT cycle counter
# QEMU 7.2+'s Cortex-M cores and the machines built on them (`qemu-system-arm -cpu help`, `-M help`)
QEMU_CPUS = ("cortex-m0", "cortex-m3", "cortex-m4", "cortex-m7", "cortex-m33", "cortex-m55")
QEMU_MACHINES = ("microbit", "mps2-an385", "mps2-an386", "mps2-an500", "mps2-an505", "mps2-an511", "mps3-an547", "netduino2", "netduinoplus2",
                 "olimex-stm32-h405", "stm32vldiscovery", "lm3s6965evb", "lm3s811evb", "b-l475e-iot01a")  # fmt: skip
MAX_ICOUNT_SHIFT = 10  # QEMU refuses -icount shift above this
NUM_IRQS = 96  # external interrupts in the firmware's vector table (firmware/startup.c)
BAUD_RANGE = (300, 12_000_000)
MAX_FLASH_SECONDS = 3600
MAX_BOARD_FILE_BYTES = 1 << 20

BOARD_ID = r"^[A-Za-z0-9][A-Za-z0-9_-]{0,63}$"
_IDENTIFIER = r"^[A-Za-z][A-Za-z0-9_]{0,31}$"
_OCD_CONFIG = r"^[A-Za-z0-9_-]+(/[A-Za-z0-9_-][A-Za-z0-9_.-]*)*\.cfg$"
_OCD_COMMAND = r"^(transport select (swd|jtag|hla_swd|dapdirect_swd)|adapter speed [0-9]{1,6})$"
_PYOCD_TARGET = r"^[a-z0-9_]{1,64}$"
_TEXT = r"^[^\x00-\x1f\x7f-\x9f\u202a-\u202e\u2066-\u2069]{1,200}$"  # no control or bidi-override characters
_PATTERNS = {  # pattern -> what it allows, for the refusal
    BOARD_ID: "a board id: a letter or digit, then letters, digits, '-' or '_' (64 at most)",
    _IDENTIFIER: "an identifier: a letter, then letters, digits or '_' (32 at most)",
    _OCD_CONFIG: "an openocd config path such as 'interface/stlink.cfg' (letters, digits, '_', '-', '.', '/'; no '..')",
    _OCD_COMMAND: "'transport select swd|jtag|hla_swd|dapdirect_swd' or 'adapter speed <kHz>'",
    _PYOCD_TARGET: "a pyOCD target name: lower-case letters, digits or '_'",
    _TEXT: "one line of printable text (no control or bidi-override characters), at most 200 characters",
}


def _power_of_two(v: int) -> int:
    if v & (v - 1):
        raise ValueError("must be a power of two (1, 2, 4, 8, ... 4096)")
    return v


BoardName = Annotated[str, StringConstraints(pattern=BOARD_ID)]
Identifier = Annotated[str, StringConstraints(pattern=_IDENTIFIER)]
OcdConfig = Annotated[str, StringConstraints(pattern=_OCD_CONFIG)]
OcdCommand = Annotated[str, StringConstraints(pattern=_OCD_COMMAND)]
PyocdTarget = Annotated[str, StringConstraints(pattern=_PYOCD_TARGET)]
Text = Annotated[str, StringConstraints(pattern=_TEXT)]
Address = Annotated[int, Field(ge=0, lt=U32)]  # a 32-bit address
Register = Annotated[int, Field(ge=0, lt=U32, multiple_of=4)]  # a 32-bit register (word access)
Word = Annotated[int, Field(ge=0, lt=U32)]
Size = Annotated[int, Field(gt=0, le=U32)]
Hertz = Annotated[int, Field(gt=0, lt=U32)]


class _Table(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True)


class CoreTable(_Table):
    cpu: Literal[CPUS]
    fpu: Literal[tuple(FPUS)] = "none"
    float_abi: Literal["hard", "softfp", "soft"] | None = None  # default: hard with an FPU, else soft
    dsp: bool = False
    mpu: bool = True


class FlashTable(_Table):
    base: Address
    size: Size


class RamTable(_Table):
    name: Identifier
    base: Address
    size: Size
    speed: Literal[_SPEEDS] = "normal"
    default: bool = False
    qemu: bool = True
    device: bool = True


class TimerTable(_Table):
    kind: Literal[QEMU_TIMERS]
    base: Register
    hz: Hertz
    irq: Annotated[int, Field(ge=0, lt=NUM_IRQS)] | None = None  # cmsdk only
    coarse_base: Register | None = None  # stm32_tim_pair only
    coarse_prescaler: Annotated[int, Field(ge=1, le=65536)] | None = None  # stm32_tim_pair only (16-bit PSC + 1)


class UartTable(_Table):
    kind: Literal[QEMU_UARTS]
    base: Register


class PeripheralTable(_Table):
    name: Identifier
    base: Register
    size: Size


class QemuTable(_Table):
    machine: Literal[QEMU_MACHINES]
    cpu: Literal[QEMU_CPUS] | None = None  # default: [core] cpu
    flash_base: Address
    ram_base: Address
    icount_shift: Annotated[int, Field(ge=0, le=MAX_ICOUNT_SHIFT)] = 0
    console: Literal["semihosting"] = "semihosting"
    timer: TimerTable
    uart: UartTable | None = None
    peripheral: Annotated[list[PeripheralTable], Field(max_length=16)] = []


class SerialTable(_Table):
    baud: Annotated[int, Field(ge=BAUD_RANGE[0], le=BAUD_RANGE[1])]


class OpenocdTable(_Table):
    interface: OcdConfig | None = None
    target: OcdConfig | None = None
    commands: Annotated[list[OcdCommand], Field(max_length=8)] = []


class PyocdTable(_Table):
    target: PyocdTarget | None = None


class FlasherTable(_Table):
    order: Annotated[list[Literal[FLASH_TOOLS]], Field(min_length=1, max_length=len(FLASH_TOOLS))]
    address: Address | None = None  # default: [flash] base
    timeout_s: Annotated[float, Field(gt=0, le=MAX_FLASH_SECONDS, allow_inf_nan=False)] = 120.0
    openocd: OpenocdTable | None = None
    pyocd: PyocdTable | None = None


class DeviceTable(_Table):
    uart: Literal[DEVICE_UARTS]
    uart_base: Register
    ticks: Literal[DEVICE_TICKS]
    cpu_hz: Hertz
    uart_brr: Annotated[int, Field(ge=16, le=0xFFFF)] | None = None  # STM32 only: the 16-bit BRR
    init: Annotated[list[Annotated[list[Word], Field(min_length=3, max_length=3)]], Field(max_length=64)] = []


class BoardFile(_Table):
    """A board file as written (TOML layout and keys); `definition` of a loaded Board is its JSON dump."""

    name: BoardName
    description: Text | None = None  # default: the name
    stack_size: Annotated[int, Field(gt=0, multiple_of=8)] = 8192
    arena_align: Annotated[int, Field(ge=1, le=4096), AfterValidator(_power_of_two)] = 4
    core: CoreTable
    flash: FlashTable
    ram: Annotated[list[RamTable], Field(min_length=1, max_length=16)]
    qemu: QemuTable | None = None  # None: no QEMU stand-in (yet)
    serial: SerialTable | None = None
    flasher: FlasherTable | None = None
    device: DeviceTable | None = None

    @model_validator(mode="after")
    def _defaults(self) -> BoardFile:
        """Fill the defaults that depend on other keys, so the stored definition says everything."""
        self.description = self.description or self.name
        if self.core.float_abi is None:
            self.core.float_abi = "soft" if self.core.fpu == "none" else "hard"
        if self.qemu is not None and self.qemu.cpu is None and self.core.cpu in QEMU_CPUS:
            self.qemu.cpu = self.core.cpu
        if self.flasher is not None and self.flasher.address is None:
            self.flasher.address = self.flash.base
        return self


# Where each table sits in the file: key path -> its model (for naming keys in refusals).
_TABLES: dict[tuple[str, ...], type[_Table]] = {
    (): BoardFile, ("core",): CoreTable, ("flash",): FlashTable, ("qemu",): QemuTable, ("qemu", "timer"): TimerTable,
    ("qemu", "uart"): UartTable, ("serial",): SerialTable, ("flasher",): FlasherTable,
    ("flasher", "openocd"): OpenocdTable, ("flasher", "pyocd"): PyocdTable, ("device",): DeviceTable,
}  # fmt: skip
_ARRAYS: dict[tuple[str, ...], type[_Table]] = {("ram",): RamTable, ("qemu", "peripheral"): PeripheralTable}


class BoardValueError(Exception):
    """A board file value the schema refuses: where (key path), the value, what is allowed."""

    def __init__(self, path: str, value, allowed: str):
        super().__init__(f"{path} = {_show(value)}: {allowed}")
        self.path = path


def key_path(loc: tuple) -> str:
    """('ram', 1, 'size') -> '[[ram]][1].size'; ('qemu', 'timer', 'hz') -> '[qemu.timer].hz'."""
    table: tuple[str, ...] = ()
    header = ""
    rest = list(loc)
    while rest and isinstance(rest[0], str) and (table + (rest[0],) in _TABLES or table + (rest[0],) in _ARRAYS):
        table += (rest.pop(0),)
        if table in _ARRAYS:
            if not (rest and isinstance(rest[0], int)):
                return f"[[{'.'.join(table)}]]"
            header = f"[[{'.'.join(table)}]][{rest.pop(0)}]"
        else:
            header = f"[{'.'.join(table)}]"
    leaf = "".join(f"[{k}]" if isinstance(k, int) else f".{k}" for k in rest).lstrip(".")
    if not header:
        return leaf or "(the top level)"
    return f"{header}.{leaf}" if leaf else header


def _table_of(loc: tuple) -> tuple[str, type[_Table] | None]:
    """The table that holds key `loc[-1]`: its header and model."""
    table = tuple(k for k in loc[:-1] if isinstance(k, str))
    model = _TABLES.get(table) or _ARRAYS.get(table)
    return key_path(loc[:-1]) if loc[:-1] else "the top level", model


def _show(value) -> str:
    """A value as the refusal shows it: TOML-like, control characters escaped, long ones cut."""
    if value is None:
        return "(not given)"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        return f"{value} (0x{value:X})" if value >= 256 else str(value)
    if isinstance(value, dict):
        return "a table"
    text = repr(value)
    return text if len(text) <= 80 else text[:77] + "..."


_TYPES = {"int_type": "must be an integer", "string_type": "must be a string", "bool_type": "must be true or false",
          "float_type": "must be a number", "list_type": "must be an array", "model_type": "must be a table",
          "dict_type": "must be a table", "finite_number": "must be a finite number (not nan or inf)"}  # fmt: skip


def _refusal(e: dict) -> str:
    """One pydantic error as 'key path = value: what is allowed'."""
    loc, kind = tuple(e["loc"]), e["type"]
    path = key_path(loc)
    if kind == "extra_forbidden":
        where, model = _table_of(loc)
        keys = ", ".join(model.model_fields) if model else "none"
        return f"{path} is not a key of {where} (the keys there: {keys}); a misspelt key would otherwise be ignored"
    if kind == "missing":
        return f"{path} is missing (it is required)"
    if kind in ("model_type", "dict_type") and not loc:
        return "the file must be a TOML document of keys and tables"
    if kind in _TYPES:
        allowed = _TYPES[kind]
    elif kind == "string_pattern_mismatch":
        allowed = f"must be {_PATTERNS.get(e['ctx']['pattern'], 'of the documented form')}"
    elif kind == "literal_error":
        allowed = f"must be one of {e['ctx']['expected']}"
    else:
        allowed = e["msg"].removeprefix("Value error, ").replace("Input should be", "must be").replace("List should", "must")
    return f"{path} = {_show(e['input'])}: {allowed}"


def _cross_check(b: BoardFile) -> None:
    """What relates several keys (one key alone is checked by its type): raises BoardValueError."""
    _check_core(b.core)
    regions = [("[flash]", b.flash.base, b.flash.size)] + [(f"[[ram]][{i}]", r.base, r.size) for i, r in enumerate(b.ram)]
    for where, base, size in regions:
        if base + size > U32:
            raise BoardValueError(f"{where}.size", size, f"base 0x{base:X} + size runs past the 32-bit address space (4 GiB)")
    _no_overlap(regions)
    _unique([r.name for r in b.ram], "[[ram]]")
    defaults = [i for i, r in enumerate(b.ram) if r.default]
    if len(defaults) > 1:
        raise BoardValueError(f"[[ram]][{defaults[1]}].default", True, f"only one region may be the default ([[ram]][{defaults[0]}] is)")
    default = b.ram[defaults[0] if defaults else 0]
    if b.stack_size >= default.size:
        raise BoardValueError("stack_size", b.stack_size, f"must be less than the default RAM region {default.name}'s "
                              f"{default.size:,} bytes (the stack is placed there, next to data and the arena)")  # fmt: skip
    if b.qemu is not None:
        _check_qemu(b)
    if b.flasher is not None:
        _check_flasher(b.flasher, b.flash)
    if b.device is not None:
        _check_device(b.device, b.core)


def _check_core(c: CoreTable) -> None:
    if c.cpu not in FPUS[c.fpu]:
        raise BoardValueError("[core].fpu", c.fpu, f"{c.cpu} has no such FPU; the FPUs of a {c.cpu}: "
                              f"{', '.join(repr(f) for f, cpus in FPUS.items() if c.cpu in cpus)}")  # fmt: skip
    if c.fpu == "none" and c.float_abi != "soft":
        raise BoardValueError("[core].float_abi", c.float_abi, "must be 'soft' without an FPU ([core].fpu = 'none')")
    if c.dsp and c.cpu not in DSP_CPUS:
        raise BoardValueError("[core].dsp", True, f"{c.cpu} has no DSP extension (only {', '.join(DSP_CPUS)})")
    if not c.dsp and c.cpu == "cortex-m55":  # MVE needs it: no M55 is built without, and gcc has no +nodsp for it
        raise BoardValueError("[core].dsp", False, "a Cortex-M55 always has the DSP extension: set dsp = true")
    if c.mpu and c.cpu == "cortex-m0":
        raise BoardValueError("[core].mpu", True, "a Cortex-M0 has no MPU: set mpu = false")


def _no_overlap(regions: list[tuple[str, int, int]]) -> None:
    """(where, base, size): no two may share an address; `where` is a table or a base key."""
    ordered = sorted((r for r in regions if r[2]), key=lambda r: r[1])
    for (wa, ba, sa), (wb, bb, _) in zip(ordered, ordered[1:]):
        if ba + sa > bb:
            key = wb if "base" in wb else f"{wb}.base"
            raise BoardValueError(key, bb, f"overlaps {wa} (0x{ba:X}..0x{ba + sa:X}): regions must not overlap")


def _unique(names: list[str], where: str) -> None:
    seen: dict[str, int] = {}
    for i, n in enumerate(names):
        if n.lower() in seen:
            raise BoardValueError(f"{where}[{i}].name", n, f"is already the name of {where}[{seen[n.lower()]}] (names are case-insensitive)")
        seen[n.lower()] = i


def _check_qemu(b: BoardFile) -> None:
    q, t = b.qemu, b.qemu.timer
    if q.cpu is None:
        raise BoardValueError("[qemu].cpu", None, f"QEMU has no {b.core.cpu}: name a stand-in core, one of {', '.join(QEMU_CPUS)}")
    if q.flash_base + b.flash.size > U32:
        raise BoardValueError("[qemu].flash_base", q.flash_base, "+ the [flash] size runs past the 32-bit address space")
    modelled = [r for r in b.ram if r.qemu]
    if modelled and q.ram_base + max(r.base + r.size for r in modelled) - min(r.base for r in modelled) > U32:
        raise BoardValueError("[qemu].ram_base", q.ram_base, "+ the span of the QEMU-modelled RAM runs past the 32-bit address space")
    needs = {"cmsdk": ("irq",), "stm32_tim_pair": ("coarse_base", "coarse_prescaler"), "nrf51": (), "sse_counter": ()}[t.kind]
    for key in ("irq", "coarse_base", "coarse_prescaler"):
        given = getattr(t, key) is not None
        if given != (key in needs):
            raise BoardValueError(f"[qemu.timer].{key}", getattr(t, key),
                                  f"is {'required' if key in needs else 'not a setting'} for a timer of kind {t.kind!r}")  # fmt: skip
    for i, p in enumerate(q.peripheral):
        if p.base + p.size > U32:
            raise BoardValueError(f"[[qemu.peripheral]][{i}].size", p.size, "base + size runs past the 32-bit address space")
    _unique([p.name for p in q.peripheral], "[[qemu.peripheral]]")
    # the QEMU machine's address space: the image's flash, the modelled RAM and the device windows the MPU opens
    span = max(r.base + r.size for r in modelled) - min(r.base for r in modelled) if modelled else 0
    _no_overlap([("[qemu].flash_base", q.flash_base, b.flash.size), ("[qemu].ram_base", q.ram_base, span)]
                + [(f"[[qemu.peripheral]][{i}]", p.base, p.size) for i, p in enumerate(q.peripheral)])


def _check_flasher(f: FlasherTable, flash: FlashTable) -> None:
    if len(set(f.order)) != len(f.order):
        raise BoardValueError("[flasher].order", f.order, "names a tool twice")
    need = {"openocd": (f.openocd, ("interface", "target")), "pyocd": (f.pyocd, ("target",))}
    for tool, (table, keys) in need.items():
        for key in keys:
            if tool in f.order and (table is None or getattr(table, key) is None):
                raise BoardValueError(f"[flasher.{tool}].{key}", None, f"is required when [flasher].order lists {tool!r}")
    if not flash.base <= f.address < flash.base + flash.size:
        raise BoardValueError("[flasher].address", f.address, f"must lie in [flash] (0x{flash.base:X}..0x{flash.base + flash.size:X})")


def _check_device(d: DeviceTable, core: CoreTable) -> None:
    if d.ticks == "dwt" and core.cpu not in DWT_CPUS:
        raise BoardValueError("[device].ticks", d.ticks, f"'dwt' needs a Cortex-M3/M4/M7/M33/M55 cycle counter; {core.cpu} has none")
    stm32 = d.uart.startswith("stm32")
    if stm32 != (d.uart_brr is not None):
        raise BoardValueError("[device].uart_brr", d.uart_brr, "is required for an STM32 USART (kernel clock after reset / baud)"
                              if stm32 else f"is not a setting of a {d.uart!r} UART")  # fmt: skip
    for i, (address, _, _) in enumerate(d.init):
        if address % 4:
            raise BoardValueError(f"[device].init[{i}][0]", address, "a register address must be a multiple of 4")


_SCHEMA_HINT = f"The keys and values a board file may have are documented at the top of {BOARDS_DIR / 'stm32f746.toml'}."


def validate_board(data: dict, where: str, what: str = "board file", hint: str = _SCHEMA_HINT) -> BoardFile:
    """The board file's data checked against the schema; one EdgememError paragraph naming `what` `where`, the
    key, the value and what is allowed, then `hint`."""
    try:
        board = BoardFile.model_validate(data)
        _cross_check(board)
    except ValidationError as e:
        problems = [_refusal(x) for x in e.errors(include_url=False)]
        more = f" (and {len(problems) - 3} more)" if len(problems) > 3 else ""
        raise EdgememError(f"{what} {where}: {'; '.join(problems[:3])}{more}. {hint}") from None
    except BoardValueError as e:
        raise EdgememError(f"{what} {where}: {e}. {hint}") from None
    return board


# ---- loading -------------------------------------------------------------------------------------


def list_boards() -> list[str]:
    """Names of the boards shipped in boards/."""
    return sorted(p.stem for p in BOARDS_DIR.glob("*.toml"))


def is_board_file(name_or_path: str | Path) -> bool:
    """Whether `--board` names a file (a .toml or a path) rather than a shipped board."""
    text = str(name_or_path)
    return Path(text).suffix == ".toml" or "/" in text or "\\" in text


def load_board(name_or_path: str | Path) -> Board:
    """Load a board by name (a file in boards/) or by the path of a .toml file."""
    text = str(name_or_path)
    if is_board_file(text):
        path = Path(text)
    elif re.fullmatch(BOARD_ID, text):
        path = BOARDS_DIR / f"{text}.toml"
    else:
        path = None
    if path is None or not path.is_file():
        known = ", ".join(list_boards()) or "(none)"
        raise EdgememError(f"unknown board {name_or_path!r}: known boards are {known}; or pass the path of a board .toml file")
    if path.stat().st_size > MAX_BOARD_FILE_BYTES:
        raise EdgememError(f"board file {path} is {path.stat().st_size:,} bytes: a board file is at most {MAX_BOARD_FILE_BYTES:,}")
    try:
        data = tomllib.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError) as e:
        raise EdgememError(f"cannot read board file {path}: {e}") from e
    except tomllib.TOMLDecodeError as e:
        raise EdgememError(f"board file {path} is not valid TOML: {e}") from e
    return _to_board(validate_board(data, str(path)), path)


def board_from_definition(definition, where: str) -> Board:
    """The Board a build recorded (`Board.definition`, kept in its edgemem.json), checked again: that file is
    input too."""
    if not isinstance(definition, dict):
        raise EdgememError(f"{where}: the recorded board definition is not a table; rebuild the project with "
                           "`edgemem build --force`.")  # fmt: skip
    hint = "Rebuild the project from its board file with `edgemem build --force`."
    return _to_board(validate_board(definition, where, "board definition recorded in", hint), Path(where))


def _to_board(b: BoardFile, source: Path) -> Board:
    core = Core(b.core.cpu, b.core.fpu, b.core.float_abi, b.core.dsp, b.core.mpu)
    flash = MemoryRegion("flash", b.flash.base, b.flash.size)
    ram = tuple(MemoryRegion(r.name, r.base, r.size, r.speed, r.default, r.qemu, r.device) for r in b.ram)
    return Board(b.name, b.description, core, flash, ram, _qemu(b.qemu), b.stack_size, b.arena_align, source,
                 _flasher(b.flasher), b.serial.baud if b.serial else None, _device(b.device),
                 b.model_dump(mode="json"))  # fmt: skip


def _qemu(q: QemuTable | None) -> QemuConfig | None:
    if q is None:
        return None
    t = q.timer
    timer = QemuTimer(t.kind, t.base, t.hz, t.irq, t.coarse_base, t.coarse_prescaler)
    periph = tuple(Peripheral(p.name, p.base, p.size) for p in q.peripheral)
    uart = QemuUart(q.uart.kind, q.uart.base) if q.uart else None
    return QemuConfig(q.machine, q.cpu, q.flash_base, q.ram_base, timer, q.icount_shift, q.console, periph, uart)


def _flasher(f: FlasherTable | None) -> FlasherConfig | None:
    if f is None:
        return None
    ocd, pyo = f.openocd or OpenocdTable(), f.pyocd or PyocdTable()
    return FlasherConfig(tuple(f.order), f.address, ocd.interface, ocd.target, tuple(ocd.commands), pyo.target,
                         float(f.timeout_s))  # fmt: skip


def _device(d: DeviceTable | None) -> DeviceConfig | None:
    if d is None:
        return None
    return DeviceConfig(d.uart, d.uart_base, d.ticks, d.cpu_hz, d.uart_brr, tuple(tuple(e) for e in d.init))
