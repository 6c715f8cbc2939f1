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


def data_mismatch_message(report: dict) -> str:
    """``mismatch_message`` for a ``validate_data`` report: how many samples, how far off."""
    return (
        f"{report['count'] - report['matching_count']} of {report['count']} samples of {report['data']} give outputs on "
        f"{report['board']} ({report['device']}) that differ from {report['oracle']} (max |diff| {report['max_abs_diff']}): "
        "rebuild the project from the model (`edgemem build --force`) and, if it persists, report it with the model "
        "and the sample."
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
        from .device_run import judge

        return judge(self.info, inputs, self.outputs(inputs))

    def outputs(self, inputs: list) -> list:
        """The device's outputs for one request, checked for their sizes."""
        import numpy as np

        from .device_run import device_arrays, expected_report
        from .target.device_protocol import check_report, parse_device_output
        from .target.serial_link import run_request

        data = b"".join(np.ascontiguousarray(x).tobytes() for x in inputs)
        reply = run_request(self.link, data, timeout_s=self.timeout_s, where=self.where)
        report = parse_device_output(reply.text, 0, self.info.board)
        if not reply.finished or report.errors or len(report.outputs) != len(self.info.outputs):
            raise DeviceError(f"the device on {self.where} did not answer the request with its outputs:\n{tail(reply.text, 2000)}")
        check_report(report, expected_report(self.info, 0), self.where)  # a reply has outputs only: their sizes
        return device_arrays(report.outputs, self.info.outputs)

    def close(self) -> None:
        from .target.serial_link import end_session

        try:
            end_session(self.link, self.where)
        except DeviceError:  # best effort: the link may already be gone (the error that ended the runs says why)
            pass
        finally:
            self.link.close()


# ---------------------------------------------------------------- the user's own data (--data)


def validate_data(project: str | Path, data: str | Path, *, port: str | None = None, reference: str | Path | None = None,
                  timeout_s: float = 120.0, progress: Callable[[int, int], None] | None = None) -> dict:  # fmt: skip
    """Run every sample of the user's data (dataset.py) on the device; returns the report: per sample the device's
    top-1 class, TFLite Micro's and (with ``reference``, a float .tflite of the same model) the float model's,
    with the comparison of the outputs; then accuracy and a confusion matrix where the data has labels, top-1
    agreement and the largest difference against TFLite Micro (and the float model). ``all_match``: every
    sample's outputs match TFLite Micro's as `validate` judges them."""
    from .dataset import load_dataset
    from .device_run import compare, dequantized_steps, run
    from .reference import reference_outputs_many

    project = Path(project)
    info = load_build_info(project)
    if len(info.inputs) != 1:
        raise EdgememError(f"--data feeds models with one input; {Path(info.model).name} has {len(info.inputs)}. "
                           "Use `edgemem run --input` per sample instead.")  # fmt: skip
    board = build_board(info, project)
    ds = load_dataset(data, info.inputs[0])
    device = SerialDevice(project, port, timeout_s) if port is not None else None
    if device is None:
        board.require_qemu()
    outputs = []
    try:
        for k, x in enumerate(ds.x):
            outputs.append(device.outputs([x]) if device else run(project, [x], timeout_s=timeout_s, judged=False)["output_arrays"])
            if progress is not None:
                progress(k + 1, len(ds.x))
    finally:
        if device is not None:
            device.close()
    try:
        wanted, oracle = reference_outputs_many(info.model, [[x] for x in ds.x])
    except RuntimeError as exc:
        raise ToolchainError(f"no reference interpreter runs {Path(info.model).name}, so there is nothing to validate "
                             f"the device's outputs against: {exc}") from None  # fmt: skip
    steps = dequantized_steps(info.model) if oracle != "tflm" else None
    rows = [compare(out, want, info.outputs, oracle, steps) for out, want in zip(outputs, wanted)]
    floats = _float_reference(reference, ds) if reference is not None else None
    device_top = [_top1(o[0]) for o in outputs]
    report = {
        "model": info.model, "board": info.board, "data": ds.source, "reference_model": str(reference) if reference else None,
        "device": f"serial {port}" if port is not None else "QEMU " + (board.qemu.machine if board.qemu else "?"),
        "count": len(ds.x), "oracle": oracle,
        "bit_exact_count": sum(bool(r["bit_exact"]) for r in rows),
        "matching_count": sum(bool(r["matches_reference"]) for r in rows),
        "max_abs_diff": max(r["max_abs_diff"] for r in rows),
        "all_match": all(r["matches_reference"] for r in rows),
        "top1_agreement": _agreement(device_top, [_top1(w[0]) for w in wanted]),
    }  # fmt: skip
    if floats is not None:
        float_top = [_top1(f[0]) for f in floats]
        report["float_top1_agreement"] = _agreement(device_top, float_top)
        report["float_max_abs_diff"] = max(_float_diff(o[0], f[0], info.outputs[0]) for o, f in zip(outputs, floats))
    report.update(_accuracy(device_top, ds.y, ds.classes, info.outputs[0]))
    if floats is not None and ds.y is not None:
        report["float_accuracy"] = _accuracy([_top1(f[0]) for f in floats], ds.y, ds.classes, info.outputs[0])["accuracy"]
    report["samples"] = [{"sample": k, "label": None if ds.y is None else int(ds.y[k]), "predicted": device_top[k],
                          "oracle_predicted": _top1(wanted[k][0]), "bit_exact": rows[k]["bit_exact"],
                          "matches_reference": rows[k]["matches_reference"], "max_abs_diff": rows[k]["max_abs_diff"]}
                         for k in range(len(ds.x))]  # fmt: skip
    return report


def _top1(output) -> int:
    import numpy as np

    return int(np.argmax(np.asarray(output).reshape(-1)))


def _agreement(a: list[int], b: list[int]) -> float:
    return sum(x == y for x, y in zip(a, b)) / len(a)


def _float_reference(model: str | Path, ds) -> list:
    """The float model's outputs on the samples as floats (TFLite Micro, else LiteRT)."""
    from .reference import model_io_specs, reference_outputs_many

    model = Path(model)
    if not model.is_file():
        raise EdgememError(f"--reference '{model}' is not a file: give the float .tflite of the same model.")
    try:
        (spec, *more), _ = model_io_specs(str(model))
    except Exception as exc:  # not a TFLite file: the reader's own reason
        raise EdgememError(f"--reference '{model}' could not be read as a TFLite model ({type(exc).__name__}).") from None
    import numpy as np

    if more or np.dtype(spec[2]) != np.float32 or ds.x_float is None:
        raise EdgememError(f"--reference '{model}' must be a float32 model with one input of the build's input shape, "
                           "and the data floats (or the build's input per-tensor quantized, to dequantize them).")  # fmt: skip
    if int(np.prod(spec[1], dtype=np.int64)) != ds.x_float[0].size:
        raise EdgememError(f"--reference '{model}' takes an input of shape {list(spec[1])}, not the build's "
                           f"{list(ds.x_float[0].shape)}: give the float version of the same model.")  # fmt: skip
    xs = [x.reshape(spec[1]) for x in ds.x_float]
    try:
        outs, _ = reference_outputs_many(str(model), [[x] for x in xs])
    except (RuntimeError, ValueError) as exc:
        raise EdgememError(f"--reference '{model}' does not run on the data: {exc}") from None
    return outs


def _float_diff(device_out, float_out, spec) -> float:
    """The largest difference between the device's output (dequantized with its scale) and the float model's."""
    import numpy as np

    d = np.asarray(device_out, np.float64)
    if spec.scale is not None and not isinstance(spec.scale, list) and not np.issubdtype(np.dtype(spec.dtype), np.floating):
        d = (d - float(spec.zero_point or 0)) * float(spec.scale)
    return float(np.max(np.abs(d.reshape(-1) - np.asarray(float_out, np.float64).reshape(-1))))


def _accuracy(predicted: list[int], labels, classes: list[str], out_spec) -> dict:
    """Accuracy and the confusion matrix (rows: the label, columns: the prediction); None without labels."""
    import numpy as np

    if labels is None:
        return {"accuracy": None, "confusion_matrix": None, "classes": None}
    n = max(int(np.prod(out_spec.shape, dtype=np.int64)), int(labels.max()) + 1, max(predicted) + 1)
    matrix = np.zeros((n, n), np.int64)
    for want, got in zip(labels, predicted):
        matrix[int(want), got] += 1
    names = classes + [str(k) for k in range(len(classes), n)] if classes else [str(k) for k in range(n)]
    return {"accuracy": float(np.trace(matrix)) / len(predicted), "confusion_matrix": matrix.tolist(), "classes": names}
