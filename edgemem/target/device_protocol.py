"""The firmware's report protocol: the `EDGEMEM ...` lines a device or QEMU prints (firmware/main.c writes
them), parsed into a DeviceReport. The same lines arrive over semihosting (target/qemu.py) or a UART
(target/serial_link.py), so the parser knows nothing of the transport.

    EDGEMEM begin board=NAME
    EDGEMEM output I HEX                       one per model output, in order
    EDGEMEM stat KEY=INT                       arena/stack high-water, .data/.bss, instructions, ...
    EDGEMEM step S ticks=T stack=B hw=P0,P1    profiling builds: one per schedule step
    EDGEMEM invocation K output I HEX          a sequence of invocations (qemu.run_firmware's ``sequence``)
    EDGEMEM invocation K status=S
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
    invocations: list[list[bytes]] = field(default_factory=list)  # a sequence's outputs, per invocation
    invocation_status: list[int] = field(default_factory=list)

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
    sequence: dict[int, dict[int, bytes]] = {}
    statuses: dict[int, int] = {}
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
        elif kind == "invocation":
            if not _parse_invocation(parts, sequence, statuses):
                errors.append(f"malformed invocation line: {line[:200]}")
        elif kind in ("error", "fault"):
            errors.append(line)
        elif kind == "end":
            finished = True
    ordered = [outputs[i] for i in sorted(outputs)]
    if sorted(outputs) != list(range(len(outputs))):
        errors.append(f"output indices are not 0..n-1: {sorted(outputs)}")
    if sorted(steps) != list(range(len(steps))):
        errors.append(f"step indices are not 0..n-1: {sorted(steps)}")
    if sorted(sequence) != list(range(len(sequence))) or sorted(statuses) != sorted(sequence):
        errors.append(f"invocation indices are not 0..n-1 with a status each: {sorted(sequence)}, {sorted(statuses)}")
    invocations = [[outs[i] for i in sorted(outs)] for _, outs in sorted(sequence.items())]
    return DeviceReport(ordered, stats, exit_code, text, board, errors, finished, [steps[i] for i in sorted(steps)],
                        invocations, [statuses[k] for k in sorted(statuses)])  # fmt: skip


def _parse_invocation(parts: list[str], sequence: dict, statuses: dict) -> bool:
    """One "EDGEMEM invocation K output I HEX" or "EDGEMEM invocation K status=S" line into ``sequence`` /
    ``statuses``; False if malformed."""
    try:
        k = int(parts[2])
        if len(parts) == 4 and parts[3].startswith("status="):
            statuses[k] = int(parts[3][len("status="):])
            return True
        if len(parts) in (5, 6) and parts[3] == "output":
            sequence.setdefault(k, {})[int(parts[4])] = bytes.fromhex(parts[5] if len(parts) == 6 else "")
            return True
    except (IndexError, ValueError):
        pass
    return False


_STEP_LINE = re.compile(r"^EDGEMEM step (\d+) ticks=(\d+) stack=(\d+) hw=(\d+(?:,\d+)*)$")


def _parse_step(line: str) -> dict | None:
    m = _STEP_LINE.match(line)
    if m is None:
        return None
    return {"step": int(m.group(1)), "ticks": int(m.group(2)), "stack_bytes": int(m.group(3)),
            "high_water_bytes": [int(v) for v in m.group(4).split(",")]}  # fmt: skip


@dataclass
class Expected:
    """What a report of one build must hold: its outputs' byte sizes, its arena pools and the RAM around them."""

    output_bytes: list[int]
    pools: dict[str, int]  # pool name -> planned bytes (the arena)
    stack_bytes: int  # the build's reservation (0: unknown)
    ram_bytes: int  # the board's RAM


def check_report(report: DeviceReport, expected: Expected, where: str) -> None:
    """Refuse (DeviceError, exit 7) a report that cannot be this build's: an output missing or of the wrong size,
    a negative figure, a high-water mark beyond its pool, a stack peak beyond the stack, static data beyond the
    RAM. Without this, zip() over the outputs compared nothing and a silent device was "bit-exact"."""
    problems = _output_problems(report.outputs, expected.output_bytes) + _stat_problems(report, expected)
    problems += _step_problems(report.steps, expected)
    if problems:
        raise DeviceError(
            f"the report from {where} cannot be this build's: {'; '.join(problems)}. The device runs other firmware, "
            "was reset mid-report, or its output was corrupted: flash (or rebuild) this build and retry.\n"
            f"device output:\n{tail(report.raw, 2000)}"
        )


def _output_problems(outputs: list[bytes], sizes: list[int]) -> list[str]:
    problems = []
    if len(outputs) != len(sizes):
        problems.append(f"{len(outputs)} output line(s) where the model has {len(sizes)} output(s)")
    for i, (raw, size) in enumerate(zip(outputs, sizes)):
        if len(raw) != size:
            problems.append(f"output {i} has {len(raw):,} bytes where the model's has {size:,}")
    return problems


def _stat_problems(report: DeviceReport, expected: Expected) -> list[str]:
    problems = [f"{key}={value} is negative" for key, value in report.stats.items() if value < 0]
    arena = sum(expected.pools.values())
    hw = report.stats.get("arena_high_water_bytes")
    if hw is not None and hw > arena:
        problems.append(f"arena high-water {hw:,} B beyond the {arena:,} B arena")
    for pool, value in report.pool_high_water_bytes.items():
        if pool not in expected.pools:
            problems.append(f"a pool '{pool}' the build does not have")
        elif value > expected.pools[pool]:
            problems.append(f"pool {pool} high-water {value:,} B beyond its {expected.pools[pool]:,} B")
    stack = report.stats.get("stack_size_bytes") or expected.stack_bytes
    peak = report.stats.get("stack_peak_bytes")
    if peak is not None and stack and peak > stack:
        problems.append(f"stack peak {peak:,} B beyond the {stack:,} B stack")
    for key in ("stack_size_bytes", "data_bytes", "bss_bytes"):
        if expected.ram_bytes and report.stats.get(key, 0) > expected.ram_bytes:  # 0: an old report, RAM unknown
            problems.append(f"{key}={report.stats[key]:,} beyond the board's {expected.ram_bytes:,} B of RAM")
    return problems


def _step_problems(steps: list[dict], expected: Expected) -> list[str]:
    sizes = list(expected.pools.values())
    stack = expected.stack_bytes or expected.ram_bytes or float("inf")
    for s in steps:  # the first absurd step is enough to say so
        if len(s["high_water_bytes"]) != len(sizes):
            return [f"step {s['step']} reports {len(s['high_water_bytes'])} pool(s) where the build has {len(sizes)}"]
        if any(hw > size for hw, size in zip(s["high_water_bytes"], sizes)):
            return [f"step {s['step']} high-water {s['high_water_bytes']} beyond the pools {sizes}"]
        if s["stack_bytes"] > stack:
            return [f"step {s['step']} stack {s['stack_bytes']:,} B beyond the {stack:,} B stack"]
    return []
