"""The build report: what `edgemem build` decided and measured, as one typed record.

`BuildInfo` is written next to the sources as ``edgemem.json`` (``to_json``) and read back by every command
that works on a build directory (``load_build_info``: run, profile, validate, flash, report). The JSON keys are
the field names; fields that do not apply (``flash_bytes`` of a build that was not linked, ``profile`` of a
non-profiling build) are left out of the file rather than written as null, so the file reads as before.
"""

from __future__ import annotations

import dataclasses
import json
from dataclasses import dataclass, field
from pathlib import Path

from .errors import EdgememError

BUILD_INFO = "edgemem.json"  # the report's file name in a build directory
# The version of the JSON edgemem writes (edgemem.json, profile.json, every --json), its top-level "schema": raised
# when a field is removed or changes meaning (README "JSON output"), not when one is added (readers ignore unknown keys).
JSON_SCHEMA = 1


@dataclass
class TensorSpec:
    """A model input or output as the build saw it: what a caller must pass, or gets back."""

    name: str
    shape: list[int]
    dtype: str
    scale: float | list | None
    zero_point: int | list | None
    bytes: int
    producer: str  # kind of the operator that writes it ("INPUT" for a model input)

    @classmethod
    def from_json(cls, d: dict) -> TensorSpec:
        return cls(d["name"], list(d["shape"]), d["dtype"], d.get("scale"), d.get("zero_point"), d.get("bytes", 0),
                   d.get("producer", ""))  # fmt: skip


# Fields that only some builds have: omitted from the JSON when None.
_OPTIONAL = ("board_definition", "flash_bytes", "static_ram_bytes", "total_ram_bytes", "fits", "stack", "profile", "board_image",
             "input_outside", "pareto")


@dataclass
class BuildInfo:
    """The machine-readable build report (`edgemem build --json`, and edgemem.json in the build directory)."""

    # A report written by an older edgemem lacks the figures added since: everything but the model and the board
    # has a default, so such a build can still be flashed, run and reported on.
    model: str  # absolute path of the .tflite file
    board: str
    # the board file the build was made for, as validated (board.Board.definition): run, profile, validate and
    # flash use exactly it (``build_board``), never a board looked up by name
    board_definition: dict | None = None
    arena_bytes: int = 0
    arena_pools: dict[str, int] = field(default_factory=dict)
    lower_bound_bytes: int = 0
    ops: int = 0
    scheduler: str = ""  # the operator order chosen
    schedulers_tried: dict[str, int] = field(default_factory=dict)  # peak bytes of each operator order tried
    planner: str = ""  # the placement that won
    planners_tried: dict[str, int] = field(default_factory=dict)
    weights_bytes: int = 0
    state_bytes: int = 0  # kept across runs (.data), outside the arena: recurrent state and resource variables
    variables: list[dict] = field(default_factory=list)  # the resource variables (name, shape, dtype, bytes)
    stack_reserved_bytes: int = 0
    stack_estimate_bytes: int = 0
    board_ram_bytes: int = 0
    board_flash_bytes: int = 0
    inputs: list[TensorSpec] = field(default_factory=list)
    outputs: list[TensorSpec] = field(default_factory=list)
    build_seconds: float = 0.0
    stage_seconds: dict[str, float] = field(default_factory=dict)  # wall time of each pipeline stage
    # the linked firmware (absent when the build did not compile)
    flash_bytes: int | None = None
    static_ram_bytes: int | None = None
    total_ram_bytes: int | None = None
    fits: bool | None = None
    stack: dict | None = None  # the call graph's stack bound next to the reservation (pipeline._stack_info)
    input_outside: dict | None = None  # --input outside: the input's bytes, in the caller's buffer (ir/outside.py)
    # what the memory passes did (passes/optimize.py), and the orchestrator's baselines
    passes: dict = field(default_factory=dict)
    pass_baselines: dict = field(default_factory=dict)
    # the memory/latency objective (passes/objective.py): the non-dominated (arena, MACs, predicted instructions)
    # points the orchestrator tried, the one taken and why; absent without the orchestrator
    pareto: dict | None = None
    memory: dict = field(default_factory=dict)  # report.html's figures (report/data.py)
    profile: dict | None = None  # a profiling build's per-step prediction (plan/steps.py)
    board_image: dict | None = None  # the real board's image, when the board has one
    extra: dict = field(default_factory=dict)  # keys of a newer edgemem, kept as read

    @property
    def is_profiling(self) -> bool:
        return self.profile is not None

    @property
    def model_name(self) -> str:
        return Path(self.model).name

    def to_json(self) -> dict:
        d = {}
        for f in dataclasses.fields(self):
            if f.name == "extra":
                continue
            value = getattr(self, f.name)
            if value is None and f.name in _OPTIONAL:
                continue
            d[f.name] = [dataclasses.asdict(t) for t in value] if f.name in ("inputs", "outputs") else value
        return {"schema": JSON_SCHEMA, **d, **self.extra}

    @classmethod
    def from_json(cls, d: dict) -> BuildInfo:
        """The report as written by this or an older edgemem (no "schema": before it was recorded); a newer
        schema, whose fields may mean something else, is refused."""
        d = dict(d)
        schema = d.pop("schema", JSON_SCHEMA)
        if not isinstance(schema, int) or schema > JSON_SCHEMA:
            raise ValueError(f"JSON schema {schema!r}, newer than the {JSON_SCHEMA} this edgemem reads: written by a "
                             "newer edgemem; upgrade edgemem")  # fmt: skip
        names = {f.name for f in dataclasses.fields(cls)} - {"extra"}
        known = {k: v for k, v in d.items() if k in names}
        known["inputs"] = [TensorSpec.from_json(t) for t in d.get("inputs", [])]
        known["outputs"] = [TensorSpec.from_json(t) for t in d.get("outputs", [])]
        return cls(**known, extra={k: v for k, v in d.items() if k not in names})

    def write(self, project: Path) -> None:
        (Path(project) / BUILD_INFO).write_text(json.dumps(self.to_json(), indent=2) + "\n")

    # The JSON view by key, for scripts and tests written against the report as a dict (`info["arena_bytes"]`);
    # edgemem's own modules use the attributes.
    def __getitem__(self, key: str):
        return self.to_json()[key]

    def get(self, key: str, default=None):
        return self.to_json().get(key, default)

    def __contains__(self, key: str) -> bool:
        return key in self.to_json()

    def __setitem__(self, key: str, value) -> None:
        if key in {f.name for f in dataclasses.fields(self)} - {"extra"}:
            setattr(self, key, value)
        else:
            self.extra[key] = value


def load_build_info(out_dir: str | Path) -> BuildInfo:
    """The report of the build in ``out_dir``; a clear error when it is not a build directory."""
    path = Path(out_dir) / BUILD_INFO
    if not path.is_file():
        raise EdgememError(f"'{out_dir}' is not an edgemem build (no {BUILD_INFO}); run `edgemem build` first.")
    try:
        return BuildInfo.from_json(json.loads(path.read_text()))
    except (ValueError, KeyError, TypeError) as exc:
        raise EdgememError(
            f"'{path}' is not a build report this edgemem can read ({type(exc).__name__}: {exc}); rebuild the project "
            "with `edgemem build --force`."
        ) from exc


def build_board(info: BuildInfo, project: str | Path):
    """The board the build in ``project`` was made for: the definition its report recorded, checked again."""
    from .board import board_from_definition

    where = str(Path(project) / BUILD_INFO)
    if info.board_definition is None:
        raise EdgememError(
            f"'{where}' does not record the definition of its board {info.board} (it was written by an older "
            "edgemem), so edgemem cannot tell which board file it was built for; rebuild the project with "
            "`edgemem build --force --board <the board or its .toml>`."
        )
    board = board_from_definition(info.board_definition, where)
    if board.name != info.board:
        raise EdgememError(f"'{where}' names board {info.board} but records the definition of board {board.name}; "
                           "rebuild the project with `edgemem build --force`.")  # fmt: skip
    return board


def tensor_spec(info, graph, name: str) -> TensorSpec:
    """The spec of model input/output ``name``: the importer's ``info`` (name, quantization) and the graph's
    tensor (shape, dtype, bytes, producer)."""
    t = graph.tensors[name]
    kind = graph.ops[t.producer].kind if t.producer is not None else "INPUT"
    return TensorSpec(info.name, list(t.shape), t.dtype, info.scale, info.zero_point, t.nbytes, kind)


def collect_build_info(model, board, graph, schedule, plan, sizes, schedulers: dict, *, stack_estimate: int,
                       seconds: float) -> BuildInfo:  # fmt: skip
    """The report of a build from its stages' results: the imported model, the board (with the user's
    budget), the operator graph, schedule and arena plan, and the linked firmware's sizes (None if not linked)."""
    info = BuildInfo(
        model=str(model.path.resolve()), board=board.name, board_definition=board.definition, ops=len(graph.ops),
        scheduler=schedule.scheduler, schedulers_tried=schedulers,
        planner=plan.algorithm, planners_tried=dict(plan.tried),
        arena_bytes=plan.total_bytes, arena_pools=dict(plan.pool_sizes), lower_bound_bytes=plan.lower_bound,
        weights_bytes=sum(t.nbytes for t in graph.constants()),
        state_bytes=sum(t.nbytes for t in graph.states()) + sum(v.initial.nbytes for v in getattr(model, "variables", ())),
        variables=[{"name": v.name, "shape": list(v.initial.shape), "dtype": str(v.initial.dtype), "bytes": int(v.initial.nbytes)}
                   for v in getattr(model, "variables", ())],
        stack_reserved_bytes=sizes.stack_bytes if sizes is not None else board.stack_size,
        stack_estimate_bytes=stack_estimate,
        board_ram_bytes=board.ram_bytes, board_flash_bytes=board.flash_bytes,
        inputs=[tensor_spec(i, graph, n) for i, n in zip(model.inputs, graph.inputs)],
        outputs=[tensor_spec(i, graph, n) for i, n in zip(model.outputs, graph.outputs)],
        build_seconds=round(seconds, 3),
    )  # fmt: skip
    if sizes is not None:
        info.static_ram_bytes = sizes.data_bytes + sizes.bss_bytes
        info.total_ram_bytes = sizes.stack_bytes + info.static_ram_bytes + sizes.arena_bytes
        info.flash_bytes = sizes.flash_bytes
        info.fits = info.total_ram_bytes <= board.ram_bytes and sizes.flash_bytes <= board.flash_bytes
    return info
