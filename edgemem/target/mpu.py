"""MPU arithmetic. PMSAv7 (Cortex-M3/M4/M7): cover address ranges with naturally aligned power-of-two regions
(and their subregion-disable masks) and encode them as MPU_RBAR / MPU_RASR values. PMSAv8 (Armv8-M, Cortex-M33):
one base/limit region per range (32-byte granules), encoded as MPU_RBAR / MPU_RLAR values with memory
attributes from MPU_MAIR0.

Pure arithmetic: which ranges an image opens (flash, RAM, peripheral windows) is decided by
``edgemem.target.image``; startup.c programs the values this module computes.
"""

from __future__ import annotations

from dataclasses import dataclass

from edgemem.errors import EdgememError

MAX_REGIONS = 8  # PMSAv7 on Cortex-M3/M4/M7 has 8 regions

# Attributes (MPU_RASR bits 16-28). AP (24-26): 0b110 read-only, 0b011 read/write; XN (28): no execute;
# TEX (19-21), S (18), C (17), B (16): flash normal write-through, RAM normal write-back write-allocate,
# peripherals shared device.
FLASH = (0b110 << 24) | (0b000 << 19) | (1 << 17)
RAM = (1 << 28) | (0b011 << 24) | (0b001 << 19) | (1 << 17) | (1 << 16)
DEVICE = (1 << 28) | (0b011 << 24) | (1 << 18) | (1 << 16)


@dataclass(frozen=True)
class MpuRegion:
    name: str
    base: int
    size_log2: int  # region is 2**size_log2 bytes
    srd: int  # subregion-disable mask (8 bits)
    rasr: int  # value for MPU_RASR (attributes, SRD, SIZE, ENABLE)

    @property
    def size(self) -> int:
        return 1 << self.size_log2

    def rbar(self, number: int) -> int:
        return self.base | 0x10 | number  # VALID + REGION


@dataclass(frozen=True)
class Span:
    """One address range an image must reach, with the attributes it is opened with."""

    name: str
    base: int
    size: int
    attributes: int


def regions(spans: list[Span], owner: str) -> list[MpuRegion]:
    """MPU regions opening exactly `spans` (each covered exactly, see `cover`); `owner` names the image in
    the error when more than the core's 8 regions are needed."""
    out = [encode(s.name, base, log2, srd, s.attributes) for s in spans for base, log2, srd in cover(s.base, s.size)]
    if len(out) > MAX_REGIONS:
        raise EdgememError(
            f"{owner}: needs {len(out)} MPU regions, the core has {MAX_REGIONS} "
            f"({', '.join(r.name for r in out)}); align the memory map or drop peripherals"
        )
    return out


# ---- PMSAv8 --------------------------------------------------------------------------------------
# MPU_MAIR0 attribute 0: normal memory, write-back read/write-allocate (inner and outer); attribute 1: device
# nGnRE. RBAR bits: SH (4:3), AP (2:1: 0b11 read-only, 0b01 read/write, any privilege), XN (0).
V8_MAIR0 = 0x04FF
V8_FLASH = ("flash", 0b11 << 1, 0)
V8_RAM = ("ram", (0b01 << 1) | 1, 0)
V8_DEVICE = ("device", (0b01 << 1) | 1, 1)
_V8_OF = {FLASH: V8_FLASH, RAM: V8_RAM, DEVICE: V8_DEVICE}  # a span's PMSAv7 attributes -> PMSAv8's


@dataclass(frozen=True)
class MpuRegionV8:
    name: str
    base: int
    size: int
    rbar: int  # base | SH | AP | XN
    rlar: int  # limit (last 32-byte granule) | AttrIndx | ENABLE


def regions_v8(spans: list[Span], owner: str) -> list[MpuRegionV8]:
    """PMSAv8 regions opening exactly `spans`, one each (no power-of-two rule: base and size in 32-byte
    granules); `owner` names the image in the error when more than MAX_REGIONS are needed."""
    out = []
    for s in spans:
        if s.base % 32 or s.size % 32 or s.size <= 0:
            raise EdgememError(f"memory range 0x{s.base:08X}+0x{s.size:X} is not 32-byte aligned, the MPU cannot cover it")
        _, rbar_bits, attr = _V8_OF[s.attributes]
        out.append(MpuRegionV8(s.name, s.base, s.size, s.base | rbar_bits, ((s.base + s.size - 32) & ~31) | (attr << 1) | 1))
    if len(out) > MAX_REGIONS:
        raise EdgememError(
            f"{owner}: needs {len(out)} MPU regions, the core has {MAX_REGIONS} "
            f"({', '.join(r.name for r in out)}); drop peripherals"
        )
    return out


def defines_v8(mpu: list[MpuRegionV8]) -> dict[str, str]:
    """-D macros startup.c programs a PMSAv8 MPU from: the count, MAIR0, then RBAR/RLAR of each region."""
    d = {"EM_MPU_NREGIONS": str(len(mpu)), "EM_MPU_MAIR0": f"0x{V8_MAIR0:08X}u"}
    for i, r in enumerate(mpu):
        d[f"EM_MPU_RBAR_{i}"] = f"0x{r.rbar:08X}u"
        d[f"EM_MPU_RLAR_{i}"] = f"0x{r.rlar:08X}u"
    return d


def defines(mpu: list[MpuRegion]) -> dict[str, str]:
    """-D macros startup.c programs the MPU from: the count, then RBAR/RASR of each region."""
    d = {"EM_MPU_NREGIONS": str(len(mpu))}
    for i, r in enumerate(mpu):
        d[f"EM_MPU_RBAR_{i}"] = f"0x{r.rbar(i):08X}u"
        d[f"EM_MPU_RASR_{i}"] = f"0x{r.rasr:08X}u"
    return d


def encode(name: str, base: int, size_log2: int, srd: int, attributes: int) -> MpuRegion:
    rasr = attributes | (srd << 8) | ((size_log2 - 1) << 1) | 1
    return MpuRegion(name, base, size_log2, srd, rasr)


def cover(base: int, size: int) -> list[tuple[int, int, int]]:
    """Cover [base, base+size) exactly with PMSAv7 regions: (region base, log2 size, subregion-disable mask).

    Prefers one region with disabled subregions (e.g. 320 KiB = 512 KiB with 3 of 8 subregions off), else
    splits greedily into naturally aligned power-of-two blocks."""
    if size <= 0:
        return []
    if base % 32 or size % 32:
        raise EdgememError(f"memory range 0x{base:08X}+0x{size:X} is not 32-byte aligned, the MPU cannot cover it")
    one = _one_region(base, size)
    if one is not None:
        return [one]
    out = []  # greedy split into aligned power-of-two blocks
    addr, end = base, base + size
    while addr < end:
        align = (addr & -addr).bit_length() - 1 if addr else 32
        log2 = min(align, (end - addr).bit_length() - 1)
        out.append((addr, log2, 0))
        addr += 1 << log2
    return out


def _one_region(base: int, size: int) -> tuple[int, int, int] | None:
    """The smallest naturally aligned block holding the range, if the range is that block exactly or a run
    of its eighths (subregions exist from 256 bytes up); None otherwise."""
    log2 = max(5, (size - 1).bit_length())
    while log2 <= 32:
        block = base & ~((1 << log2) - 1)
        if base + size <= block + (1 << log2):
            if block == base and size == 1 << log2:
                return (base, log2, 0)
            sub = (1 << log2) // 8
            if log2 >= 8 and (base - block) % sub == 0 and size % sub == 0:
                first, n = (base - block) // sub, size // sub
                return (block, log2, 0xFF & ~(((1 << n) - 1) << first))
            return None
        log2 += 1
    return None
