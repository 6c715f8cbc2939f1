"""edgemem's Python API: the CLI's commands as functions, each returning a typed result whose attributes are
the fields of the command's `--json` object (``.to_json()`` gives that object).

    import edgemem
    built = edgemem.build("model.tflite", board="stm32f746", output="out/model")
    print(built.arena_bytes, built.total_ram_bytes)
    ran = edgemem.run(built.project)            # under QEMU, compared with TFLite Micro
    assert ran.bit_exact

Failures raise edgemem.EdgememError subclasses (``exit_code`` is the CLI's exit code); a device run whose outputs
differ from the oracle is a result (``matches_reference`` False), not an exception. TVM is imported by the
functions, not by ``import edgemem``.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from .build_info import JSON_SCHEMA, BuildInfo
from .options import DEFAULT_SCHEDULE_SECONDS, user_options
from .sizes import parse_size


@dataclass
class _Report:
    """A command's JSON object as typed fields; keys not declared here (a newer edgemem's) stay in ``extra``."""

    extra: dict = field(default_factory=dict, repr=False)
    model: str = ""  # the .tflite the build was made from (absolute path)
    board: str = ""

    @classmethod
    def from_json(cls, d: dict):
        names = {f.name for f in dataclasses.fields(cls)} - {"extra", "output_arrays"}
        known = {k: v for k, v in d.items() if k in names}
        return cls(**known, extra={k: v for k, v in d.items() if k not in names and k not in ("schema", "output_arrays")})

    def to_json(self) -> dict:
        d = {f.name: getattr(self, f.name) for f in dataclasses.fields(self) if f.name not in ("extra", "output_arrays")}
        return {"schema": JSON_SCHEMA, **d, **self.extra}


@dataclass
class RunResult(_Report):
    """`edgemem run --json`: the device's figures under QEMU and the comparison with the oracle."""

    arena_bytes: int = 0
    arena_pools: dict = field(default_factory=dict)
    lower_bound_bytes: int = 0
    flash_bytes: int | None = None
    peak_stack_bytes: int = 0
    arena_high_water_bytes: int = 0
    pool_high_water_bytes: Any = None
    static_ram_bytes: int = 0
    total_ram_bytes: int = 0
    instructions: int | None = None
    oracle: str | None = None  # "tflm", "litert" (TFLite Micro cannot run the model), None (no oracle installed)
    bit_exact: bool | None = None
    max_abs_diff: float | None = None
    matches_reference: bool | None = None  # bit-exact or within the tolerated step
    output_arrays: list = field(default_factory=list, repr=False)  # the outputs as numpy arrays (not in the JSON)

    @classmethod
    def from_report(cls, d: dict) -> RunResult:
        res = cls.from_json(d)
        res.output_arrays = list(d.get("output_arrays", []))
        return res


@dataclass
class ValidationResult(_Report):
    """`edgemem validate --json`: N seeded runs on the device, each compared with the oracle."""

    device: str = ""
    count: int = 0
    bit_exact_count: int = 0
    matching_count: int = 0
    max_abs_diff: float = 0
    require_bit_exact: bool = False
    oracle: str = "tflm"
    all_match: bool = False
    runs: list = field(default_factory=list)


@dataclass
class DataValidationResult(_Report):
    """`edgemem validate --data --json`: the user's samples on the device, against TFLite Micro (and a float
    model): accuracy and confusion matrix where the data has labels, top-1 agreement, per-sample rows."""

    data: str = ""
    reference_model: str | None = None
    device: str = ""
    count: int = 0
    oracle: str = "tflm"
    bit_exact_count: int = 0
    matching_count: int = 0
    max_abs_diff: float = 0
    all_match: bool = False
    top1_agreement: float = 0.0
    accuracy: float | None = None  # None without labels
    confusion_matrix: list | None = None  # rows: the label, columns: the device's top-1
    classes: list | None = None
    float_top1_agreement: float | None = None  # with a reference float model
    float_max_abs_diff: float | None = None
    float_accuracy: float | None = None
    samples: list = field(default_factory=list)


@dataclass
class ProfileResult(_Report):
    """`edgemem profile --json`: RAM and time per operator step on the device, next to the plan."""

    source: str = ""
    seed: int = 0
    steps: list = field(default_factory=list)
    arena_bytes: int = 0
    arena_high_water_bytes: int = 0
    arena_matches_plan: bool = False
    peak_stack_bytes: int = 0
    total_ticks: int = 0
    tick_unit: str = ""
    oracle: str | None = None
    bit_exact: bool | None = None
    max_abs_diff: float | None = None
    matches_reference: bool | None = None
    saved_to: str = ""


@dataclass
class Build(BuildInfo):
    """`edgemem build --json`: the build report (edgemem.json) with the project directory and, when asked, the
    run under QEMU."""

    project: Path | None = None
    run: RunResult | None = None

    def to_json(self) -> dict:
        d = super().to_json()
        d["project"] = str(self.project)
        if self.run is None:
            d.pop("run", None)
        else:
            d["run"] = {k: v for k, v in self.run.to_json().items() if k != "schema"}
        return d


def _size(value: int | str | None) -> int | None:
    return None if value is None else parse_size(value)


def _stack(value: int | str | None) -> int | str | None:
    return "auto" if isinstance(value, str) and value.strip().lower() == "auto" else _size(value)


def build(model: str | Path, board: str = "stm32f746", output: str | Path | None = None, *,
          ram: int | str | None = None, flash: int | str | None = None, stack: int | str | None = None,
          force: bool = False, pool_per_region: bool = False, input_outside: bool = False,
          passes: list[str] | tuple[str, ...] | None = None, opt_time: float | None = None,
          schedule_time: float = DEFAULT_SCHEDULE_SECONDS, minimize: bool = False, max_slowdown: float | None = None,
          profile: bool = False, run: bool = False) -> Build:  # fmt: skip
    """`edgemem build`: the model compiled for ``board`` into ``output`` (default out/<model>-<board>), the
    firmware linked; ``run=True`` also runs it under QEMU (``.run``). Sizes take bytes or "320K"."""
    from . import pipeline
    from .device_run import run as run_on_device

    out_dir = Path(output) if output is not None else Path("out") / f"{Path(model).stem}-{Path(board).stem}"
    options = user_options(ram=_size(ram), flash=_size(flash), force=force, pool_per_region=pool_per_region,
                           schedule_seconds=schedule_time, opt_seconds=opt_time, minimize=minimize,
                           max_slowdown=max_slowdown, passes=None if passes is None else tuple(passes),
                           profile=profile, stack=_stack(stack),
                           input_where="outside" if input_outside else "arena")  # fmt: skip
    result = pipeline.build(model, board, out_dir, options)
    ran = None
    if run:
        from . import profiling

        ran = (ProfileResult.from_json(profiling.profile(out_dir)) if profile
               else RunResult.from_report(run_on_device(out_dir)))  # fmt: skip
    fields = {f.name: getattr(result.info, f.name) for f in dataclasses.fields(BuildInfo)}
    return Build(**fields, project=out_dir, run=ran)


def analyze(model: str | Path, board: str = "stm32f746", *, ram: int | str | None = None,
            flash: int | str | None = None, stack: int | str | None = None, pool_per_region: bool = False,
            passes: list[str] | tuple[str, ...] | None = None, opt_time: float | None = None,
            schedule_time: float = DEFAULT_SCHEDULE_SECONDS, input_outside: bool = False):  # fmt: skip
    """`edgemem analyze`: what the model needs and whether it fits, from the file alone (an
    ``edgemem.analysis.Analysis``: ``verdict``, ``arena_bytes``, ``ram_floor_bytes``, ``operators``, ...)."""
    from .analysis import analyze as run_analysis

    options = user_options(pool_per_region=pool_per_region, schedule_seconds=schedule_time, opt_seconds=opt_time,
                           passes=None if passes is None else tuple(passes), stack=_stack(stack),
                           input_where="outside" if input_outside else "arena")  # fmt: skip
    return run_analysis(model, board, _size(ram), _size(flash), options)


def run(project: str | Path, inputs: list | None = None, *, seed: int = 0, timeout: float = 120.0) -> RunResult:
    """`edgemem run`: the built firmware under QEMU on ``inputs`` (numpy arrays, one per model input; default a
    seeded random input), compared with TFLite Micro. The outputs are in ``.output_arrays``."""
    from .device_run import run as run_on_device

    return RunResult.from_report(run_on_device(project, inputs, seed=seed, timeout_s=timeout))


def validate(project: str | Path, count: int = 10, *, seed: int = 0, port: str | None = None,
             bit_exact: bool = False, timeout: float = 120.0, data: str | Path | None = None,
             reference: str | Path | None = None) -> ValidationResult | DataValidationResult:  # fmt: skip
    """`edgemem validate`: ``count`` seeded inputs on QEMU (or the board at ``port``), each compared with
    TFLite Micro; ``.all_match`` is the verdict. With ``data`` (a .npz or a folder of .npy samples, see
    edgemem/dataset.py) the user's samples instead, with accuracy and a confusion matrix where they have labels
    (a ``DataValidationResult``), and with ``reference`` (a float .tflite) the float model's top-1 beside them."""
    from .validation import validate as run_validation, validate_data

    if data is not None:
        return DataValidationResult.from_json(validate_data(project, data, port=port, reference=reference,
                                                            timeout_s=timeout))  # fmt: skip

    return ValidationResult.from_json(run_validation(project, count, first_seed=seed, port=port,
                                                     require_bit_exact=bit_exact, timeout_s=timeout))  # fmt: skip


def profile(project: str | Path, *, port: str | None = None, baud: int | None = None, timeout: float = 120.0,
            save: str | Path | None = None) -> ProfileResult:  # fmt: skip
    """`edgemem profile`: a `--profile` build run on QEMU (or the board at ``port``), RAM and time per step."""
    from .profiling import profile as run_profile

    return ProfileResult.from_json(run_profile(project, port=port, baud=baud, timeout_s=timeout, save=save))
