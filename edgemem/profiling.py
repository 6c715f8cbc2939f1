"""`edgemem profile`: run a profiling build on the device (or QEMU) and compare it with the plan, step by step.

A profiling build (`edgemem build --profile`) reports after every step of the schedule the arena high-water
mark of each pool, the stack high-water mark and the step's timer ticks, over the board's UART. The same
pyserial code reads a real board's serial port or QEMU's UART socket. The planner predicted each step's
high-water mark exactly (`edgemem.json`, "profile"), so any difference is a bug: the table shows both.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

from .board import Board
from .build_info import JSON_SCHEMA, build_board, load_build_info
from .device_run import device_arrays, expected_report, judge
from .errors import DeviceError, EdgememError, tail
from .target.device_protocol import check_report, parse_device_output
from .target.qemu import QemuSerial
from .target.serial_link import DEFAULT_BAUD, SerialTranscript, end_session, open_port, read_report

PROFILE_JSON = "profile.json"


def _step_counter(progress: Callable[[int, int], None], total: int) -> Callable[[str], None]:
    """A serial-line watcher calling ``progress(done, total)`` at each "EDGEMEM step" line (one per schedule step)."""
    done = 0

    def on_line(line: str) -> None:
        nonlocal done
        if line.startswith("EDGEMEM step "):
            done += 1
            progress(done, total)

    return on_line


def _read_from_qemu(elf: Path, board: Board, timeout_s: float, on_line=None) -> tuple[SerialTranscript, str]:
    with QemuSerial(elf, board, timeout_s) as q:
        link = q.connect()
        try:
            transcript = read_report(link, timeout_s=timeout_s, where=f"QEMU {board.qemu.machine} UART ({q.url})",
                                     on_line=on_line)  # fmt: skip
            end_session(link)  # the firmware would wait for requests (edgemem validate --port); it exits now
        finally:
            link.close()
        q.finish()
    return transcript, f"QEMU {board.qemu.machine} (serial over {q.url})"


def _read_from_port(port: str, baud: int, timeout_s: float, on_line=None) -> tuple[SerialTranscript, str]:
    link = open_port(port, baud)
    try:
        transcript = read_report(link, timeout_s=timeout_s, where=port, on_line=on_line)
        if transcript.finished:
            end_session(link)
        return transcript, f"serial {port} at {baud} baud"
    finally:
        link.close()


def _step_rows(predicted: dict, measured: list[dict], board: Board, on_qemu: bool) -> list[dict]:
    if len(measured) != len(predicted["steps"]):
        raise DeviceError(
            f"the device reported {len(measured)} steps but the build has {len(predicted['steps'])}: the firmware "
            "does not belong to this build directory. Rebuild and flash it again."
        )
    ipt = board.qemu.instructions_per_tick
    rows = []
    for pred, meas in zip(predicted["steps"], measured):
        row = {
            "step": pred["step"], "op": pred["op"], "kind": pred["kind"],
            "predicted_live_bytes": pred["live_bytes"],
            "predicted_high_water_bytes": sum(pred["high_water_bytes"]),
            "measured_high_water_bytes": sum(meas["high_water_bytes"]),
            "pools_match": pred["high_water_bytes"] == meas["high_water_bytes"],
            "stack_high_water_bytes": meas["stack_bytes"],
            "ticks": meas["ticks"],
        }  # fmt: skip
        if on_qemu:
            row["instructions"] = int(meas["ticks"] * ipt)
        rows.append(row)
    return rows


def profile(out_dir: str | Path, *, port: str | None = None, baud: int | None = None, timeout_s: float = 120.0,
            save: str | Path | None = None, progress: Callable[[int, int], None] | None = None) -> dict:
    """Profile the build in out_dir on the device at `port` (pyserial URL or device), or under QEMU without one.

    Returns the report (also written as JSON to `save`, by default out_dir/profile.json). ``progress``, if
    given, is called with (steps reported so far, steps of the build) as each step's line arrives."""
    out_dir = Path(out_dir)
    info = load_build_info(out_dir)
    predicted = info.profile
    if predicted is None and port is not None and info.board_image:  # on a real board: its board image
        predicted = info.board_image.get("profile")  # (what `edgemem flash` wrote)
    if predicted is None:
        raise EdgememError(
            f"'{out_dir}' is not a profiling build, so its firmware reports no per-step figures. Rebuild it with "
            "`edgemem build --profile ...` and profile that directory."
        )
    board = build_board(info, out_dir)
    on_line = None if progress is None else _step_counter(progress, len(predicted["steps"]))
    if port is None:
        transcript, source = _read_from_qemu(out_dir / "firmware.elf", board, timeout_s, on_line)
    else:
        transcript, source = _read_from_port(port, baud or board.serial_baud or DEFAULT_BAUD, timeout_s, on_line)
    report = parse_device_output(transcript.text, 0, board.name)
    if report.errors or not report.finished:
        problems = "; ".join(report.errors) or "no 'EDGEMEM end' line"
        raise DeviceError(f"the profiling run on {source} failed: {problems}\ndevice output:\n{tail(transcript.text, 3000)}")
    board_image = port is not None and info.profile is None  # its stack is sized for its own runtime
    check_report(report, expected_report(info, 0 if board_image else None), source)
    cycles = bool(report.stats.get("tick_cycles"))  # a board image: ticks are core cycles (DWT)
    rows = _step_rows(predicted, report.steps, board, on_qemu=port is None and not cycles)
    outputs = device_arrays(report.outputs, info.outputs)
    from .reference import seeded_inputs

    inputs = seeded_inputs(info.model, predicted["seed"])
    result = {
        "schema": JSON_SCHEMA, "model": info.model, "board": info.board, "source": source, "seed": predicted["seed"],
        "steps": rows,
        "arena_bytes": info.arena_bytes,
        "arena_high_water_bytes": report.arena_high_water_bytes,
        "arena_matches_plan": all(r["pools_match"] for r in rows)
        and report.arena_high_water_bytes == info.arena_bytes,
        "peak_stack_bytes": report.peak_stack_bytes,
        "total_ticks": sum(r["ticks"] for r in rows),
        "tick_unit": "cycles" if cycles else ("instructions" if port is None else "timer ticks"),
        "lines_dropped": transcript.dropped,
    }  # fmt: skip
    if cycles and result["total_ticks"] == 0:
        result["tick_note"] = "the cycle counter did not count: no DWT (QEMU does not model it)"
    if port is None and not cycles:
        result["total_instructions"] = sum(r["instructions"] for r in rows)
    result.update(judge(info, inputs, outputs))
    path = Path(save) if save is not None else out_dir / PROFILE_JSON
    path.write_text(json.dumps(result, indent=2) + "\n")
    result["saved_to"] = str(path)
    return result
