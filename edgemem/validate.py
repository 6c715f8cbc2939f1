"""`edgemem validate`: run N seeded inputs through a built firmware and compare each with TFLite Micro.

Each run is `pipeline.run` (the device run plus its comparison with the reference, `pipeline._compare`), so
what counts as a match is defined in one place: bit-exact, or within 1 LSB on SOFTMAX/LOGISTIC/TANH outputs
(1e-5 relative on float outputs). Inputs are `reference.seeded_inputs(model, seed)` for seeds
first_seed .. first_seed + count - 1, the same inputs `edgemem run --seed S` uses.

The device is QEMU for now; `_device_runner` is where a runner for a real board on a serial port plugs in.
"""

from __future__ import annotations

from pathlib import Path
from typing import Callable

from .board import load_board
from .errors import DeviceError, EdgememError, ToolchainError

# A runner takes (project dir, inputs) and returns the `pipeline.run` report for one inference.
Runner = Callable[[Path, list], dict]


class MismatchError(DeviceError):
    """The device ran, but its outputs differ from the reference (exit code 8, distinct from faults' 7)."""

    exit_code = 8


def validate(project: str | Path, count: int = 10, *, first_seed: int = 0, port: str | None = None,
             require_bit_exact: bool = False, timeout_s: float = 120.0) -> dict:  # fmt: skip
    """Run `count` seeded inputs on the device and compare each with TFLite Micro; returns the report.

    The report's `all_match` is False when some run does not match (or, with require_bit_exact, is not
    bit-exact); the caller decides what to do with that (the CLI exits with MismatchError.exit_code)."""
    from . import pipeline
    from .reference import seeded_inputs

    project = Path(project)
    if count < 1:
        raise EdgememError(f"--count must be at least 1, got {count}.")
    info = pipeline.load_build_info(project)
    board = load_board(info["board"])
    run_one = _device_runner(port, board.name, timeout_s)
    runs = []
    for seed in range(first_seed, first_seed + count):
        res = run_one(project, seeded_inputs(info["model"], seed))
        if res["bit_exact"] is None:
            raise ToolchainError(
                "the reference interpreter (TFLite Micro) is not installed, so there is nothing to validate against: "
                "pip install 'edgemem[reference]' (PyPI package tflite-micro)."
            )
        runs.append({"seed": seed, "bit_exact": res["bit_exact"], "max_abs_diff": res["max_abs_diff"],
                     "matches_reference": res["matches_reference"], "instructions": res.get("instructions")})  # fmt: skip
    return summarize(info, runs, device="QEMU " + (board.qemu.machine if board.qemu else "?"),
                     require_bit_exact=require_bit_exact)  # fmt: skip


def summarize(info: dict, runs: list[dict], *, device: str, require_bit_exact: bool = False) -> dict:
    """The validation report from the per-run comparisons."""
    bit_exact = sum(1 for r in runs if r["bit_exact"])
    matching = sum(1 for r in runs if r["matches_reference"])
    needed = bit_exact if require_bit_exact else matching
    return {
        "model": info["model"],
        "board": info["board"],
        "device": device,
        "count": len(runs),
        "bit_exact_count": bit_exact,
        "matching_count": matching,  # bit-exact or within the tolerated LSB
        "max_abs_diff": max((r["max_abs_diff"] for r in runs), default=0),
        "require_bit_exact": require_bit_exact,
        "all_match": needed == len(runs),
        "runs": runs,
    }


def mismatch_message(report: dict) -> str:
    """One paragraph for a failed validation: how many runs, which seeds, how far off."""
    key = "bit_exact" if report["require_bit_exact"] else "matches_reference"
    bad = [r["seed"] for r in report["runs"] if not r[key]]
    what = "bit-exact" if report["require_bit_exact"] else "matching the reference"
    return (
        f"{len(bad)} of {report['count']} runs of {Path(report['model']).name} on {report['board']} ({report['device']}) "
        f"are not {what} (seeds {', '.join(map(str, bad))}; max |diff| {report['max_abs_diff']}). The firmware computes "
        "something different from TFLite Micro: rebuild the project from the model (`edgemem build --force`) and, if it "
        "persists, report it with the model and `edgemem run --seed S --json` of a failing seed."
    )


def _device_runner(port: str | None, board_name: str, timeout_s: float) -> Runner:
    """How one inference reaches the device: QEMU now; a serial-port runner plugs in here."""
    if port is not None:
        raise EdgememError(
            f"validating on a real board over a serial port ({port}) is not supported yet: the firmware cannot receive "
            f"inputs over its UART. Leave out --port to validate the {board_name} build under QEMU."
        )
    load_board(board_name).require_qemu()  # a board without a QEMU stand-in stops here, clearly

    def run_on_qemu(project: Path, inputs: list) -> dict:
        from . import pipeline

        return pipeline.run(project, inputs, timeout_s=timeout_s)

    return run_on_qemu
