"""The firmware's report protocol: the `EDGEMEM ...` lines a device or QEMU prints (firmware/main.c writes
them), parsed into a DeviceReport. The same lines arrive over semihosting (target/qemu.py) or a UART
(target/serial_link.py), so the parser knows nothing of the transport.

    EDGEMEM begin board=NAME
    EDGEMEM output I HEX                       one per model output, in order
    EDGEMEM stat KEY=INT                       arena/stack high-water, .data/.bss, instructions, ...
    EDGEMEM step S ticks=T stack=B hw=P0,P1    profiling builds: one per schedule step
    EDGEMEM error ... / EDGEMEM fault ...
    EDGEMEM end
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from edgemem.errors import DeviceError, tail


@dataclass
class DeviceReport:
    """What the profiling firmware printed (see firmware/main.c for the protocol)."""

    outputs: list[bytes]
    stats: dict[str, int]
    exit_code: int
    raw: str
    board: str = ""
    errors: list[str] = field(default_factory=list)  # "EDGEMEM error ..." and "EDGEMEM fault ..." lines
    finished: bool = False  # saw "EDGEMEM end"
    steps: list[dict] = field(default_factory=list)  # "EDGEMEM step" lines of profiling builds, in step order

    def _stat(self, key: str) -> int:
        if key not in self.stats:
            raise DeviceError(f"the device did not report '{key}'; its output was:\n{tail(self.raw)}")
        return self.stats[key]

    @property
    def peak_stack_bytes(self) -> int:
        return self._stat("stack_peak_bytes")

    @property
    def stack_size_bytes(self) -> int:
        return self._stat("stack_size_bytes")

    @property
    def arena_high_water_bytes(self) -> int:
        return self._stat("arena_high_water_bytes")

    @property
    def pool_high_water_bytes(self) -> dict[str, int]:
        return {
            k[len("pool_") : -len("_high_water_bytes")]: v
            for k, v in self.stats.items()
            if k.startswith("pool_") and k.endswith("_high_water_bytes")
        }

    @property
    def static_ram_bytes(self) -> int:
        return self._stat("data_bytes") + self._stat("bss_bytes")

    @property
    def instructions(self) -> int:
        return self._stat("instructions")

    @property
    def ticks(self) -> int:
        return self._stat("ticks")

    @property
    def run_status(self) -> int:
        return self._stat("run_status")


def parse_device_output(text: str, exit_code: int, board: str = "") -> DeviceReport:
    """Parse the EDGEMEM lines of a device/QEMU transcript (lines may be mixed with other output)."""
    outputs: dict[int, bytes] = {}
    stats: dict[str, int] = {}
    errors: list[str] = []
    finished = False
    steps: dict[int, dict] = {}
    for raw_line in text.splitlines():
        idx = raw_line.find("EDGEMEM ")
        if idx < 0:
            continue
        line = raw_line[idx:].strip()
        parts = line.split(" ")
        kind = parts[1] if len(parts) > 1 else ""
        if kind == "begin":
            for p in parts[2:]:
                if p.startswith("board="):
                    board = board or p[len("board=") :]
        elif kind == "output" and len(parts) >= 3:
            hexdata = parts[3] if len(parts) > 3 else ""
            try:
                outputs[int(parts[2])] = bytes.fromhex(hexdata)
            except ValueError:
                errors.append(f"malformed output line: {line[:200]}")
        elif kind == "stat" and len(parts) >= 3 and "=" in parts[2]:
            key, _, value = parts[2].partition("=")
            try:
                stats[key] = int(value)
            except ValueError:
                errors.append(f"malformed stat line: {line[:200]}")
        elif kind == "step":
            step = _parse_step(line)
            if step is None:
                errors.append(f"malformed step line: {line[:200]}")
            else:
                steps[step["step"]] = step
        elif kind in ("error", "fault"):
            errors.append(line)
        elif kind == "end":
            finished = True
    ordered = [outputs[i] for i in sorted(outputs)]
    if sorted(outputs) != list(range(len(outputs))):
        errors.append(f"output indices are not 0..n-1: {sorted(outputs)}")
    if sorted(steps) != list(range(len(steps))):
        errors.append(f"step indices are not 0..n-1: {sorted(steps)}")
    return DeviceReport(ordered, stats, exit_code, text, board, errors, finished, [steps[i] for i in sorted(steps)])


_STEP_LINE = re.compile(r"^EDGEMEM step (\d+) ticks=(\d+) stack=(\d+) hw=(\d+(?:,\d+)*)$")


def _parse_step(line: str) -> dict | None:
    m = _STEP_LINE.match(line)
    if m is None:
        return None
    return {"step": int(m.group(1)), "ticks": int(m.group(2)), "stack_bytes": int(m.group(3)),
            "high_water_bytes": [int(v) for v in m.group(4).split(",")]}  # fmt: skip
