"""Running a build on the device and judging its outputs against the oracle (`edgemem run`).

    run(out_dir, inputs)      the firmware under QEMU, its measured figures and the comparison
    run_sequence(out_dir, sets)  N invocations in a row (a stateful model's state carries) vs TFLM invoked N times
    reference_outputs(...)    the oracle's outputs for the same inputs (TFLite Micro, else LiteRT)
    compare(...)              what counts as a match, in one place (run, profile and validate use it)
"""

from __future__ import annotations

from pathlib import Path

from .build_info import BuildInfo, TensorSpec, build_board, load_build_info
from .errors import EdgememError
from .target.device_protocol import Expected, check_report

# Only these operators' int8 outputs may differ from TFLM by one LSB (float exp/log inside).
LSB_TOLERANT = {"SOFTMAX", "LOGISTIC", "TANH"}


def reference_outputs(model_path: str, inputs: list) -> tuple[list | None, str | None]:
    """(outputs, oracle) of the reference for the same inputs: TFLite Micro run in a child process (its Python
    binding aborts the whole process on some converter outputs, and cannot allocate some models at all: then
    LiteRT's, see reference.reference_outputs); (None, None) where TFLM is not installed or neither runs it."""
    from .reference import reference_outputs as run_reference

    try:
        import tflite_micro  # noqa: F401  (the oracle is optional)
    except ImportError:
        return None, None
    try:
        return run_reference(model_path, inputs)
    except RuntimeError:
        return None, None


def expected_report(info: BuildInfo, stack_bytes: int | None = None) -> Expected:
    """What a device report of this build must hold (device_protocol.check_report)."""
    import numpy as np

    sizes = [int(np.prod(s.shape, dtype=np.int64)) * np.dtype(s.dtype).itemsize for s in info.outputs]
    pools = dict(info.arena_pools) or {"arena": info.arena_bytes}
    return Expected(sizes, pools, info.stack_reserved_bytes if stack_bytes is None else stack_bytes, info.board_ram_bytes)


def device_arrays(raw_outputs: list[bytes], specs: list[TensorSpec]) -> list:
    """The device's output bytes as arrays of the build's output dtypes and shapes."""
    import numpy as np

    return [np.frombuffer(raw, dtype=spec.dtype).reshape(spec.shape) for raw, spec in zip(raw_outputs, specs)]


def dequantized_steps(model_path) -> list[float | None]:
    """Per model output: the scale of the int8 tensor a DEQUANTIZE operator made it from, else None."""
    from .frontend.footprint import indices
    from .frontend.tflite_import import inspect_tflite

    model, op_names, _, _ = inspect_tflite(model_path)
    sg = model.Subgraphs(0)
    producer = {t: i for i in range(sg.OperatorsLength()) for t in indices(sg.Operators(i).OutputsAsNumpy())}
    steps = []
    for t in indices(sg.OutputsAsNumpy()):
        i = producer.get(t)
        q = sg.Tensors(int(sg.Operators(i).Inputs(0))).Quantization() if i is not None and op_names[i] == "DEQUANTIZE" else None
        steps.append(float(q.ScaleAsNumpy()[0]) if q is not None and q.ScaleLength() == 1 else None)
    return steps


def compare(outputs: list, reference: list | None, specs: list[TensorSpec], oracle: str | None = "tflm",
            steps: list[float | None] | None = None) -> dict:
    """bit_exact, max_abs_diff and matches_reference (within the tolerated steps) of the device's outputs;
    all three None when there is no reference. ``steps``: per output, the scale of the int8 tensor a DEQUANTIZE
    made it from (dequantized_steps), for LiteRT's two steps on such float outputs."""
    import numpy as np

    if reference is None:
        return {"bit_exact": None, "max_abs_diff": None, "matches_reference": None}
    diffs, tolerated = [], True
    for out, ref, spec, step in zip(outputs, reference, specs, steps or [None] * len(outputs)):
        d = int(np.max(np.abs(out.astype(np.int64) - np.asarray(ref).astype(np.int64)))) if out.size else 0
        if np.issubdtype(out.dtype, np.floating):
            d = float(np.max(np.abs(out.astype(np.float64) - np.asarray(ref, np.float64)))) if out.size else 0.0
        diffs.append(d)
        if np.issubdtype(out.dtype, np.floating) and oracle != "tflm" and step is not None:
            allowed = (2 + 1e-3) * step  # LiteRT's int8 steps (below), made floats: its DEQUANTIZE's scale each
        elif np.issubdtype(out.dtype, np.floating):  # float sums may round differently: 1e-5 relative
            allowed = 1e-5 * max(1.0, float(np.max(np.abs(np.asarray(ref, np.float64)), initial=0.0)))
        else:
            # LiteRT (where TFLM cannot run the model) rounds some operators a step away from TFLM, e.g. per-channel
            # FULLY_CONNECTED, and steps compound through layers: two steps, as tests/op_check.py allows
            allowed = 2 if oracle != "tflm" else 1 if spec.producer in LSB_TOLERANT else 0
        tolerated &= d <= allowed
    return {"bit_exact": all(d == 0 for d in diffs), "max_abs_diff": max(diffs, default=0),
            "matches_reference": bool(tolerated)}  # fmt: skip


def checked_input(x, spec: TensorSpec, index: int):
    """``x`` if it has the input's shape and dtype; a clear error otherwise."""
    import numpy as np

    if tuple(x.shape) != tuple(spec.shape) or x.dtype != np.dtype(spec.dtype):
        raise EdgememError(
            f"input {index} ('{spec.name}') must be {spec.dtype}{spec.shape}, got {x.dtype}{list(x.shape)}. "
            "Quantize and reshape it to the model's input first."
        )
    return x


def run(out_dir: str | Path, inputs: list | None = None, *, seed: int = 0, timeout_s: float = 120.0,
        judged: bool = True) -> dict:  # fmt: skip
    """Run a built firmware under QEMU; returns the `edgemem run --json` report (device figures and the
    comparison with TFLite Micro). Without `inputs`, a seeded random input of the model's shape is used.
    ``judged=False``: no oracle run (a caller comparing many runs at once asks the oracle once)."""
    import numpy as np

    from .target.qemu import run_firmware

    info = load_build_info(out_dir)
    if info.is_profiling:
        raise EdgememError(
            f"'{out_dir}' is a profiling build: its firmware reports over the UART with an input built into it. "
            f"Use `edgemem profile {out_dir}`, or rebuild without --profile to run it with your own inputs."
        )
    board = build_board(info, out_dir)
    if inputs is None:
        from .reference import seeded_inputs

        inputs = seeded_inputs(info.model, seed)
    inputs = [checked_input(np.asarray(x), spec, i) for i, (x, spec) in enumerate(zip(inputs, info.inputs))]
    report = run_firmware(Path(out_dir) / "firmware.elf", board, [x.tobytes() for x in inputs], timeout_s)
    check_report(report, expected_report(info), f"QEMU ({board.name})")
    outputs = device_arrays(report.outputs, info.outputs)
    result = {
        "model": info.model, "board": info.board, "arena_bytes": info.arena_bytes,
        "arena_pools": info.arena_pools, "lower_bound_bytes": info.lower_bound_bytes,
        "flash_bytes": info.flash_bytes,
        "peak_stack_bytes": report.peak_stack_bytes,
        "arena_high_water_bytes": report.arena_high_water_bytes,
        "pool_high_water_bytes": report.pool_high_water_bytes,
        "static_ram_bytes": report.static_ram_bytes,
        "total_ram_bytes": report.static_ram_bytes + report.peak_stack_bytes + report.arena_high_water_bytes,
        "instructions": report.instructions,
    }  # fmt: skip
    if judged:
        result.update(judge(info, inputs, outputs))
    result["output_arrays"] = outputs  # numpy arrays: not part of the JSON report
    return result


def judge(info: BuildInfo, inputs: list, outputs: list) -> dict:
    """The oracle's verdict on the device's outputs for these inputs: ``oracle`` and ``compare``'s figures."""
    reference, oracle = reference_outputs(info.model, inputs)
    steps = dequantized_steps(info.model) if reference is not None and oracle != "tflm" else None
    return {"oracle": oracle, **compare(outputs, reference, info.outputs, oracle, steps)}


def run_sequence(out_dir: str | Path, input_sets: list, *, timeout_s: float = 120.0) -> dict:
    """The build's firmware under QEMU invoked once per set of inputs, in a row from the initial state (no reset in
    between), against one TFLite Micro interpreter invoked on the same sets in the same order: a stateful model
    (resource variables, LSTM state) must match at every invocation. The firmware is rebuilt with -DEM_SEQUENCE
    (firmware/main.c's sequence mode, kept out of other builds so that it costs them no stack) in a temporary
    copy of the project; the project itself is not touched. Returns ``invocations`` (each one's ``compare``
    figures and ``output_arrays``) and ``matches_reference`` (all of them)."""
    import shutil
    import tempfile

    import numpy as np

    from .reference import reference_sequence_outputs
    from .target.qemu import run_firmware
    from .target.toolchain import build_firmware

    info = load_build_info(out_dir)
    if info.is_profiling:
        raise EdgememError(f"'{out_dir}' is a profiling build: its inputs are built into it. Rebuild without --profile.")
    board = build_board(info, out_dir)
    sets = [[checked_input(np.asarray(x), spec, i) for i, (x, spec) in enumerate(zip(xs, info.inputs))] for xs in input_sets]
    with tempfile.TemporaryDirectory(prefix="edgemem-sequence-") as tmp:
        project = Path(tmp) / "project"
        shutil.copytree(out_dir, project, symlinks=True)
        build_firmware(project, board, extra_cflags=["-DEM_SEQUENCE"])
        report = run_firmware(project / "firmware.elf", board, [x.tobytes() for x in sets[0]], timeout_s,
                              sequence=[[x.tobytes() for x in xs] for xs in sets])  # fmt: skip
    check_report(report, expected_report(info), f"QEMU ({board.name})")
    wanted = reference_sequence_outputs(info.model, sets)
    invocations = []
    for k, (raw, want) in enumerate(zip(report.invocations, wanted)):
        outputs = device_arrays(raw, info.outputs)
        invocations.append({"invocation": k, "status": report.invocation_status[k],
                            **compare(outputs, want, info.outputs, "tflm"), "output_arrays": outputs})  # fmt: skip
    ok = all(inv["matches_reference"] and inv["status"] == 0 for inv in invocations) and len(invocations) == len(sets)
    return {"model": info.model, "board": info.board, "invocations": invocations, "matches_reference": ok}
