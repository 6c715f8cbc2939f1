"""`edgemem validate`: run N seeded inputs through a built firmware and compare each with TFLite Micro.

Each run is `device_run.run` (the device run plus its comparison with the reference, `device_run.compare`), so
what counts as a match is defined in one place: bit-exact, or within 1 LSB on SOFTMAX/LOGISTIC/TANH outputs
(1e-5 relative on float outputs). Inputs are `reference.seeded_inputs(model, seed)` for seeds
first_seed .. first_seed + count - 1, the same inputs `edgemem run --seed S` uses.

Without --port each run is a QEMU run of the build's firmware; with --port the device on that serial port (a
board image, or any UART build, e.g. QEMU's UART socket) first sends its own report, then answers one request
per input (firmware/main.c, em_serve) over the same pyserial code as `edgemem profile`.
"""

from __future__ import annotations

from pathlib import Path
from typing import Callable

from .board import Board
from .build_info import BuildInfo, build_board, load_build_info
from .errors import DeviceError, EdgememError, ToolchainError, tail

# A runner takes (project dir, inputs) and returns the `device_run.run` report for one inference.
Runner = Callable[[Path, list], dict]


class MismatchError(DeviceError):
    """The device ran, but its outputs differ from the reference (exit code 8, distinct from faults' 7)."""

    exit_code = 8


def validate(project: str | Path, count: int = 10, *, first_seed: int = 0, port: str | None = None,
             require_bit_exact: bool = False, timeout_s: float = 120.0,
             progress: Callable[[dict], None] | None = None) -> dict:  # fmt: skip
    """Run `count` seeded inputs on the device and compare each with TFLite Micro; returns the report.

    The report's `all_match` is False when some run does not match (or, with require_bit_exact, is not
    bit-exact); the caller decides what to do with that (the CLI exits with MismatchError.exit_code).
    ``progress``, if given, is called with each run's row (the report's "runs" entry) as soon as it is known."""
    project = Path(project)
    if count < 1:
        raise EdgememError(f"--count must be at least 1, got {count}.")
    info = load_build_info(project)
    board = build_board(info, project)
    run_one = _device_runner(port, board, timeout_s, project)
    runs = []
    try:
        for seed in range(first_seed, first_seed + count):
            runs.append(_one_run(run_one, project, info, seed))
            if progress is not None:
                progress(runs[-1])
    finally:
        if hasattr(run_one, "close"):
            run_one.close()
    device = f"serial {port}" if port is not None else "QEMU " + (board.qemu.machine if board.qemu else "?")
    return summarize(info.model, info.board, runs, device=device, require_bit_exact=require_bit_exact)


def _one_run(run_one: Runner, project: Path, info: BuildInfo, seed: int) -> dict:
    from .reference import seeded_inputs

    res = run_one(project, seeded_inputs(info.model, seed))
    if res["bit_exact"] is None:
        raise ToolchainError(
            "the reference interpreter (TFLite Micro) is not installed, so there is nothing to validate against: "
            "pip install 'edgemem[reference]' (PyPI package tflite-micro)."
        )
    return {"seed": seed, "bit_exact": res["bit_exact"], "max_abs_diff": res["max_abs_diff"],
            "matches_reference": res["matches_reference"], "instructions": res.get("instructions"),
            "oracle": res.get("oracle") or "tflm"}  # fmt: skip


def summarize(model: str, board: str, runs: list[dict], *, device: str, require_bit_exact: bool = False) -> dict:
    """The validation report of ``model`` on ``board`` from the per-run comparisons."""
    bit_exact = sum(1 for r in runs if r["bit_exact"])
    matching = sum(1 for r in runs if r["matches_reference"])
    needed = bit_exact if require_bit_exact else matching
    return {
        "model": model,
        "board": board,
        "device": device,
        "count": len(runs),
        "bit_exact_count": bit_exact,
        "matching_count": matching,  # bit-exact or within the tolerated LSB
        "max_abs_diff": max((r["max_abs_diff"] for r in runs), default=0),
        "require_bit_exact": require_bit_exact,
        "oracle": "litert" if any(r.get("oracle", "tflm") != "tflm" for r in runs) else "tflm",  # LiteRT: TFLM cannot run it
        "all_match": needed == len(runs),
        "runs": runs,
    }


def mismatch_message(report: dict) -> str:
    """One paragraph for a failed validation: how many runs, which seeds, how far off."""
    key = "bit_exact" if report["require_bit_exact"] else "matches_reference"
    bad = [r["seed"] for r in report["runs"] if not r[key]]
    what = "bit-exact" if report["require_bit_exact"] else "matching the reference"
    oracle = "LiteRT (TFLite Micro cannot run the model)" if report.get("oracle") == "litert" else "TFLite Micro"
    return (
        f"{len(bad)} of {report['count']} runs of {Path(report['model']).name} on {report['board']} ({report['device']}) "
        f"are not {what} (seeds {', '.join(map(str, bad))}; max |diff| {report['max_abs_diff']}). The firmware computes "
        f"something different from {oracle}: rebuild the project from the model (`edgemem build --force`) and, if it "
        "persists, report it with the model and `edgemem run --seed S --json` of a failing seed."
    )


def _device_runner(port: str | None, board: Board, timeout_s: float, project: Path) -> Runner:
    """How one inference reaches the device: QEMU (a fresh run each), or the device on a serial port."""
    if port is not None:
        return SerialDevice(project, port, timeout_s)
    board.require_qemu()  # a board without a QEMU stand-in stops here, clearly

    def run_on_qemu(project: Path, inputs: list) -> dict:
        from .device_run import run

        return run(project, inputs, timeout_s=timeout_s)

    return run_on_qemu


class SerialDevice:
    """A board (or QEMU's UART socket) running a UART build: after its own report it serves requests, one
    inference each (firmware/main.c, em_serve). The link stays open across runs; ``close`` ends the session."""

    def __init__(self, project: Path, port: str, timeout_s: float):
        from .target.serial_link import DEFAULT_BAUD, open_port, read_report

        self.info = load_build_info(project)
        self.where = port
        self.timeout_s = timeout_s
        baud = build_board(self.info, project).serial_baud or DEFAULT_BAUD
        self.link = open_port(port, baud)
        try:
            report = read_report(self.link, timeout_s=timeout_s, where=port)  # the build's own report comes first
        except Exception:
            self.link.close()
            raise
        if not report.finished:
            self.link.close()
            raise DeviceError(f"the device on {port} failed before serving requests:\n{tail(report.text, 2000)}")

    def __call__(self, project: Path, inputs: list) -> dict:
        import numpy as np

        from .device_run import device_arrays, expected_report, judge
        from .target.device_protocol import check_report, parse_device_output
        from .target.serial_link import run_request

        data = b"".join(np.ascontiguousarray(x).tobytes() for x in inputs)
        reply = run_request(self.link, data, timeout_s=self.timeout_s, where=self.where)
        report = parse_device_output(reply.text, 0, self.info.board)
        if not reply.finished or report.errors or len(report.outputs) != len(self.info.outputs):
            raise DeviceError(f"the device on {self.where} did not answer the request with its outputs:\n{tail(reply.text, 2000)}")
        check_report(report, expected_report(self.info, 0), self.where)  # a reply has outputs only: their sizes
        return judge(self.info, inputs, device_arrays(report.outputs, self.info.outputs))

    def close(self) -> None:
        from .target.serial_link import end_session

        try:
            end_session(self.link, self.where)
        except DeviceError:  # best effort: the link may already be gone (the error that ended the runs says why)
            pass
        finally:
            self.link.close()
