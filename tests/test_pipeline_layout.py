"""The pipeline split of issue 18: pipeline.py holds the build only, the build report is a typed BuildInfo
that round-trips through edgemem.json, each stage is timed (the CLI's status line), `build --dim` refuses the
options of the stages it skips, and every CLI failure goes through one error path."""

from __future__ import annotations

import ast
import json
import sys
from pathlib import Path

import pytest
from typer.testing import CliRunner

from edgemem import pipeline
from edgemem.build_info import BUILD_INFO, BuildInfo, load_build_info
from edgemem.errors import EdgememError

REPO = Path(__file__).resolve().parents[1]
EXAMPLE = REPO / "examples" / "kws_tiny_int8.tflite"
STAGES = ["check", "import", "lower", "memory passes", "graph", "schedule", "plan", "kernels", "C sources", "firmware",
          "report"]  # fmt: skip


def _module(name: str) -> ast.Module:
    return ast.parse((REPO / "edgemem" / name).read_text())


# ---- the layout ----------------------------------------------------------------------------------------------


def test_pipeline_py_defines_the_build_only():
    """Public functions of pipeline.py: build, and the same build stopped at its plan (plan_only: analyze and a
    refusal's ways out ask it what a build would plan); the run, the report, the symbolic entry point and the
    stages live in their own modules."""
    tree = _module("pipeline.py")
    public = [n.name for n in tree.body if isinstance(n, ast.FunctionDef) and not n.name.startswith("_")]
    assert public == ["build", "plan_only"]


# The modules of the split: what they offer others is public.
SPLIT = ("pipeline", "device_run", "build_info", "budget", "symbolic", "project_dir", "passes.optimize",
         "plan.graph_plan", "target.device_protocol", "target.qemu")  # fmt: skip


@pytest.mark.parametrize("name", ["profiling.py", "validation.py", "cli.py", "analysis.py", "report/render.py",
                                  "device_run.py", "symbolic.py"])  # fmt: skip
def test_modules_import_no_private_names_of_the_pipeline_stages(name):
    """The readers of a build use public names of the pipeline's stage modules only (issue 18: they imported
    pipeline._compare, _reference_outputs, _ram_budget, _file_order_plan); profiling.py and validation.py import
    no private name of edgemem at all."""
    private = []
    for node in ast.walk(_module(name)):
        if isinstance(node, ast.ImportFrom) and (node.level > 0 or (node.module or "").startswith("edgemem")):
            module = (node.module or "").removeprefix("edgemem.")
            if module in SPLIT or name in ("profiling.py", "validation.py"):
                private += [f"{module}.{a.name}" for a in node.names if a.name.startswith("_")]
            if module == "pipeline":
                assert {a.name for a in node.names} <= {"BuildOptions", "build", "plan_only", "Stages"}, name
    assert private == [], f"{name} imports private names: {private}"


# ---- BuildInfo -----------------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def example_build(tmp_path_factory):
    out = tmp_path_factory.mktemp("layout") / "kws"
    seen: list[tuple[str, float | None]] = []
    result = pipeline.build(EXAMPLE, "stm32f746", out, pipeline.BuildOptions(compile=False, opt_seconds=0),
                            observer=lambda stage, seconds: seen.append((stage, seconds)))  # fmt: skip
    return result, out, seen


def test_build_info_round_trips_through_edgemem_json(example_build):
    result, out, _ = example_build
    on_disk = json.loads((out / BUILD_INFO).read_text())
    assert isinstance(result.info, BuildInfo)
    assert result.info.to_json() == on_disk
    assert BuildInfo.from_json(on_disk) == result.info == load_build_info(out)
    assert result.info.arena_bytes == result.plan.total_bytes == on_disk["arena_bytes"]
    assert result.info.inputs[0].shape == list(result.graph.tensors[result.graph.inputs[0]].shape)
    # an unlinked build has no firmware figures: left out of the file, None in the record
    assert result.info.flash_bytes is None and "flash_bytes" not in on_disk and "profile" not in on_disk


def test_build_info_keeps_keys_it_does_not_know(example_build):
    """A report written by a newer edgemem (or with a key added by a pass) survives a read and a write."""
    _, out, _ = example_build
    data = {**json.loads((out / BUILD_INFO).read_text()), "some_future_figure": {"bytes": 7}}
    info = BuildInfo.from_json(data)
    assert info.extra == {"some_future_figure": {"bytes": 7}} and info["some_future_figure"] == {"bytes": 7}
    assert info.to_json() == data


def test_load_build_info_refuses_what_is_not_a_build(tmp_path):
    with pytest.raises(EdgememError, match="is not an edgemem build"):
        load_build_info(tmp_path)
    (tmp_path / BUILD_INFO).write_text(json.dumps({"model": "m.tflite"}))
    with pytest.raises(EdgememError, match="not a build report this edgemem can read"):
        load_build_info(tmp_path)


def test_every_stage_is_timed_and_reported_in_order(example_build):
    result, _, seen = example_build
    assert list(result.info.stage_seconds) == STAGES
    # the observer hears each stage start (None) and then end (its seconds), in pipeline order
    assert seen == [event for stage in STAGES for event in ((stage, None), (stage, result.info.stage_seconds[stage]))]
    assert sum(result.info.stage_seconds.values()) <= result.info.build_seconds + 0.01


# ---- the CLI -------------------------------------------------------------------------------------------------


def _cli(*args: str):
    from edgemem.cli import app

    return CliRunner().invoke(app, list(args))


@pytest.mark.parametrize("extra, named", [(["--run"], "--run"), (["--profile"], "--profile"),
                                          (["--passes", "fold_pad"], "--passes"), (["--opt-time", "0"], "--opt-time"),
                                          (["--pool-per-region", "--run"], "--run and --pool-per-region")])  # fmt: skip
def test_build_dim_refuses_the_options_of_skipped_stages(tmp_path, extra, named):
    res = _cli("build", str(EXAMPLE), "-o", str(tmp_path / "out"), "--dim", "n=1..4", *extra)
    assert res.exit_code == 2, res.output
    errors = [line for line in res.stderr.splitlines() if line.startswith("error:")]
    assert len(errors) == 1 and f"{named} cannot be used with --dim" in errors[0], res.stderr
    assert not (tmp_path / "out").exists()


def test_a_failure_inside_a_command_is_one_internal_error_line(tmp_path, monkeypatch):
    """Not an EdgememError: `internal error:`, exit 1, no traceback -- and the traceback with --debug."""

    def broken(*args, **kwargs):
        raise ValueError("deliberately broken")

    monkeypatch.setattr(pipeline, "build", broken)
    res = _cli("build", str(EXAMPLE), "-o", str(tmp_path / "out"))
    assert res.exit_code == 1
    assert res.stderr.startswith("internal error: ValueError: deliberately broken") and "Traceback" not in res.output
    res = _cli("--debug", "build", str(EXAMPLE), "-o", str(tmp_path / "out"))
    assert isinstance(res.exception, ValueError)


def test_status_lines_per_stage_and_quiet_with_json(tmp_path):
    """A build prints one line per finished stage with its time on stderr; --json prints nothing there and
    one JSON object on stdout (whose stage_seconds name the same stages)."""
    res = _cli("build", str(EXAMPLE), "-o", str(tmp_path / "a"), "--opt-time", "0", "--schedule-time", "0.2")
    assert res.exit_code == 0, res.output
    lines = [line.split() for line in res.stderr.splitlines() if line.strip().startswith("done")]
    assert [" ".join(words[1:-2]) for words in lines] == STAGES and all(words[-1] == "s" for words in lines)
    res = _cli("build", str(EXAMPLE), "-o", str(tmp_path / "b"), "--opt-time", "0", "--schedule-time", "0.2", "--json")
    assert res.exit_code == 0, res.output
    assert res.stderr == ""
    assert list(json.loads(res.stdout)["stage_seconds"]) == STAGES


if __name__ == "__main__":  # pragma: no cover
    sys.exit(pytest.main([__file__, "-q"]))
