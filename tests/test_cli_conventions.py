"""CLI conventions (issue 35): `--version`, `boards --json`, a "schema" in every JSON, a JSON error on stdout for
a failure under --json, help text without typer's doubled "%%", validate's progress on stderr, and the output
directory refused before TVM is even imported.

The oracles are independent of the CLI: the board files read with tomllib, pyproject.toml's version, the exit
code the process returns, the paragraph on stderr, `sys.modules` of a fresh interpreter."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import tomllib
from importlib import metadata
from pathlib import Path

import numpy as np
import pytest
import typer
from typer.testing import CliRunner

from edgemem.board import list_boards
from edgemem.cli import app

ROOT = Path(__file__).resolve().parents[1]
EXAMPLE = ROOT / "examples" / "kws_tiny_int8.tflite"
BATCH = ROOT / "examples" / "kws_tiny_batch_int8.tflite"
ENV = {**os.environ, "PYTHONPATH": str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", "")}
KINDS = {130: "interrupted", 143: "interrupted", 1: "internal", 2: "usage", 3: "model_file", 4: "unsupported", 5: "does_not_fit", 8: "outputs_differ"}
needs_qemu = pytest.mark.skipif(shutil.which("arm-none-eabi-gcc") is None or shutil.which("qemu-system-arm") is None,
                                reason="needs arm-none-eabi-gcc and qemu-system-arm")  # fmt: skip


def _invoke(*args) -> typer.testing.Result:
    return CliRunner().invoke(app, [str(a) for a in args])


def _one_object(stdout: str) -> dict:
    """stdout of a --json run: exactly one JSON object (json.loads refuses anything before or after it)."""
    obj = json.loads(stdout)
    assert isinstance(obj, dict) and obj["schema"] == 1, stdout[:300]
    return obj


def _words(text: str) -> str:
    return " ".join(text.replace("│", " ").split())


def _json_error(res, exit_code: int) -> dict:
    """A failing --json run: its exit code, one JSON object on stdout whose error is the paragraph on stderr."""
    assert res.exit_code == exit_code, (res.exit_code, res.stdout, res.stderr)
    obj = _one_object(res.stdout)
    error = obj["error"]
    assert error["exit_code"] == exit_code and error["kind"] == KINDS[exit_code]
    assert _words(error["message"])[:60] in _words(res.stderr), (error["message"], res.stderr)
    return obj


# ---- --version ------------------------------------------------------------------------------------------------


def _pyproject_version() -> str:
    return tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["version"]


def test_version_is_the_installed_package_version():
    res = _invoke("--version")
    assert res.exit_code == 0 and res.stdout == f"edgemem {metadata.version('edgemem')}\n"


def test_version_falls_back_to_pyproject_when_not_installed(monkeypatch):
    def not_installed(name):
        raise metadata.PackageNotFoundError(name)

    monkeypatch.setattr("edgemem.version.metadata.version", not_installed)
    res = _invoke("--version")
    assert res.exit_code == 0 and res.stdout == f"edgemem {_pyproject_version()}\n"


# ---- boards --json --------------------------------------------------------------------------------------------


def test_boards_json_is_what_the_board_files_say():
    res = _invoke("boards", "--json")
    assert res.exit_code == 0, res.stderr
    listed = {b["name"]: b for b in _one_object(res.stdout)["boards"]}
    assert sorted(listed) == sorted(list_boards()) and len(listed) >= 10
    for name, b in listed.items():
        toml = tomllib.loads((ROOT / "boards" / f"{name}.toml").read_text())
        core = toml["core"]
        assert (b["core"]["cpu"], b["core"]["fpu"], b["core"]["dsp"]) == \
            (core["cpu"], core.get("fpu", "none"), core.get("dsp", False)), name  # the schema's defaults
        assert [(r["name"], r["base"], r["size"], r["speed"]) for r in b["ram"]] == \
            [(r["name"], r["base"], r["size"], r.get("speed", "normal")) for r in toml["ram"]], name  # fmt: skip
        assert b["ram_bytes"] == sum(r["size"] for r in toml["ram"])
        assert b["flash"] == {"base": toml["flash"]["base"], "size": toml["flash"]["size"]}, name
        assert (b["qemu"] or {}).get("machine") == toml.get("qemu", {}).get("machine"), name
        assert b["stack_bytes"] == toml["stack_size"]
    assert listed["stm32f746"]["default_ram"] == "dtcm" and listed["rp2040-pico"]["qemu"] is None


# ---- help text ------------------------------------------------------------------------------------------------


def test_no_help_text_shows_a_doubled_percent():
    commands = typer.main.get_command(app).commands
    assert {"build", "analyze", "validate", "boards"} <= set(commands)
    for name in ["", *commands]:
        res = CliRunner().invoke(app, [name, "--help"] if name else ["--help"], env={"COLUMNS": "200"})
        assert res.exit_code == 0 and "%%" not in res.stdout, (name, res.stdout)
    build_help = _words(CliRunner().invoke(app, ["build", "--help"], env={"COLUMNS": "200"}).stdout)
    assert "with 10% to spare" in build_help and "at most PCT% slower" in build_help


# ---- the output directory, refused at once ----------------------------------------------------------------------

_REFUSE_FRESH = """
import sys, time
t0 = time.perf_counter()
from typer.testing import CliRunner
from edgemem.cli import app
res = CliRunner().invoke(app, sys.argv[1:])
print(res.exit_code, "tvm" in sys.modules, round(time.perf_counter() - t0, 2))
print(res.stdout)
print(res.stderr, file=sys.stderr)
"""


def test_an_existing_output_directory_is_refused_before_tvm_is_imported(tmp_path):
    """The check ran in pipeline.build, after importing TVM (seconds): now before any import of the pipeline."""
    (tmp_path / "out").mkdir()
    (tmp_path / "out" / "mine.txt").write_text("the user's\n")
    proc = subprocess.run([sys.executable, "-c", _REFUSE_FRESH, "build", str(EXAMPLE), "-o", str(tmp_path / "out"), "--json"],
                          capture_output=True, text=True, cwd=tmp_path, env=ENV, timeout=300)  # fmt: skip
    first, _, stdout = proc.stdout.partition("\n")
    code, tvm_imported, seconds = first.split()
    assert (code, tvm_imported) == ("2", "False"), proc.stdout + proc.stderr
    error = _one_object(stdout)["error"]
    assert error["kind"] == "usage" and "already exists" in error["message"] and "--force" in error["message"]
    assert "already exists" in proc.stderr
    assert (tmp_path / "out" / "mine.txt").read_text() == "the user's\n"
    print(f"refused in {seconds} s")


# ---- errors under --json --------------------------------------------------------------------------------------


def test_failures_under_json_print_one_json_error(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "exists").mkdir()
    _json_error(_invoke("build", EXAMPLE, "-o", tmp_path / "exists", "--json"), 2)
    # typer's own usage errors, raised before the command runs
    bad_size = _json_error(_invoke("build", EXAMPLE, "--ram", "12Q", "--json"), 2)
    assert "--ram" in bad_size["error"]["message"] and "12Q" in bad_size["error"]["message"]
    assert "--bogus" in _json_error(_invoke("analyze", EXAMPLE, "--bogus", "--json"), 2)["error"]["message"]
    # a model that is not a flatbuffer, a directory that is no build
    (tmp_path / "junk.tflite").write_bytes(b"not a model at all")
    _json_error(_invoke("analyze", tmp_path / "junk.tflite", "--json"), 3)
    for command in ("run", "validate", "profile"):
        obj = _json_error(_invoke(command, tmp_path, "--json"), 2)
        assert "is not an edgemem build" in obj["error"]["message"]
    # without --json, stdout stays empty (the paragraph is on stderr only)
    plain = _invoke("run", tmp_path)
    assert plain.exit_code == 2 and plain.stdout == "" and "is not an edgemem build" in plain.stderr


@pytest.mark.parametrize("signum", [signal.SIGINT, signal.SIGTERM])
def test_a_build_interrupted_under_json(tmp_path, monkeypatch, signum):
    """A signal during the build (project_dir raises Interrupted from its handler; here the pipeline raises it):
    exit 128 + N and the JSON error of kind "interrupted"."""
    from edgemem import pipeline
    from edgemem.project_dir import Interrupted

    def interrupted(*args, **kwargs):
        raise Interrupted(signum)

    monkeypatch.setattr(pipeline, "build", interrupted)
    res = _invoke("build", EXAMPLE, "-o", tmp_path / "p", "--json")
    obj = _json_error(res, 128 + signum)
    assert signal.Signals(signum).name in obj["error"]["message"] and not (tmp_path / "p").exists()


def test_an_internal_error_under_json(monkeypatch):
    def broken():
        raise RuntimeError("boards folder unreadable")

    monkeypatch.setattr("edgemem.board.list_boards", broken)
    obj = _json_error(_invoke("boards", "--json"), 1)
    assert "RuntimeError: boards folder unreadable" in obj["error"]["message"]


def test_analyze_verdicts_carry_the_error_beside_the_analysis(tmp_path):
    does_not_fit = _json_error(_invoke("analyze", EXAMPLE, "--ram", "16416", "--json"), 5)
    assert does_not_fit["verdict"] == "does not fit" and does_not_fit["ram_budget_bytes"] == 32
    assert f"{does_not_fit['ram_floor_bytes']:,} B" in does_not_fit["error"]["message"]
    no_flash = _json_error(_invoke("analyze", EXAMPLE, "--flash", "4K", "--json"), 5)
    assert no_flash["flash_range_bytes"][0] > 4096 == no_flash["board_flash_bytes"]
    assert f"at least {no_flash['flash_range_bytes'][0]:,} B of flash" in no_flash["error"]["message"]
    sys.path.insert(0, str(ROOT / "examples"))
    import make_example_model as mm

    mb = mm.ModelBuilder()
    q = mm.qparams([0.05], [0])
    x, y = mb.tensor("x", (1, 4, 4, 3), np.int16, q), mb.tensor("y", (1, 4, 4, 3), np.int16, q)
    mb.op(mm.OP.HARD_SWISH, [x], [y])
    (tmp_path / "hs.tflite").write_bytes(mb.serialize([x], [y]))
    unsupported = _json_error(_invoke("analyze", tmp_path / "hs.tflite", "--json"), 4)
    assert unsupported["unsupported"] == ["operator #0 HARD_SWISH (output 'y') on int16"]
    assert "HARD_SWISH" in unsupported["error"]["message"]
    fits = _invoke("analyze", EXAMPLE, "--json")
    assert fits.exit_code == 0 and "error" not in _one_object(fits.stdout)


# ---- "schema" in every JSON, validate's progress ----------------------------------------------------------------


@pytest.fixture(scope="module")
def builds(tmp_path_factory) -> dict:
    """The example built by the CLI (--json), once plainly and once for profiling."""
    root = tmp_path_factory.mktemp("conventions")
    made = {}
    for name, extra in (("plain", ()), ("profiling", ("--profile",))):
        res = _invoke("build", EXAMPLE, "-o", root / name, "--opt-time", "0", "--json", *extra)
        assert res.exit_code == 0, res.stderr
        made[name] = (root / name, _one_object(res.stdout))
    return made


@needs_qemu
def test_every_json_output_and_file_has_the_schema(builds, tmp_path):
    plain, printed = builds["plain"]
    on_disk = json.loads((plain / "edgemem.json").read_text())
    assert on_disk["schema"] == printed["schema"] == 1 and printed["arena_bytes"] == on_disk["arena_bytes"] > 0
    assert _one_object(_invoke("analyze", EXAMPLE, "--json").stdout)["arena_bytes"] > 0
    run = _invoke("run", plain, "--json")
    assert run.exit_code == 0 and _one_object(run.stdout)["bit_exact"] is True
    profiling, _ = builds["profiling"]
    profiled = _invoke("profile", profiling, "--json")
    assert profiled.exit_code == 0 and _one_object(profiled.stdout)["arena_matches_plan"] is True
    assert json.loads((profiling / "profile.json").read_text())["schema"] == 1
    symbolic = _invoke("build", BATCH, "--dim", "n=1..4", "-o", tmp_path / "sym", "--json")
    assert symbolic.exit_code == 0 and _one_object(symbolic.stdout)["dims"] == {"n": [1, 4]}
    assert json.loads((tmp_path / "sym" / "edgemem_symbolic.json").read_text())["schema"] == 1


@needs_qemu
def test_a_build_with_a_newer_schema_is_refused_and_one_without_is_read(builds, tmp_path):
    plain, _ = builds["plain"]
    info = json.loads((plain / "edgemem.json").read_text())
    newer, older = tmp_path / "newer", tmp_path / "older"
    shutil.copytree(plain, newer)
    shutil.copytree(plain, older)
    (newer / "edgemem.json").write_text(json.dumps({**info, "schema": 2}))
    assert "newer than the 1 this edgemem reads" in _json_error(_invoke("run", newer, "--json"), 2)["error"]["message"]
    (older / "edgemem.json").write_text(json.dumps({k: v for k, v in info.items() if k != "schema"}))
    assert _invoke("run", older).exit_code == 0


@needs_qemu
def test_validate_reports_each_seed_on_stderr_and_one_object_on_stdout(builds):
    plain, _ = builds["plain"]
    res = _invoke("validate", plain, "--count", "3", "--seed", "4", "--json")
    assert res.exit_code == 0, res.stderr
    report = _one_object(res.stdout)
    lines = [line.strip() for line in res.stderr.splitlines() if line.strip().startswith("seed ")]
    assert len(lines) == 3 and [r["seed"] for r in report["runs"]] == [4, 5, 6]
    for i, (line, r) in enumerate(zip(lines, report["runs"])):
        assert line == f"seed {r['seed']}: bit-exact, {r['instructions']:,} instructions  ({i + 1}/3)"


@needs_qemu
def test_a_failing_validation_under_json_has_its_error_beside_the_report(builds, tmp_path, monkeypatch):
    """Outputs that differ (one run's comparison made to fail): exit 8, the report and its error in one object."""
    import edgemem.device_run as device_run

    plain, _ = builds["plain"]
    real = device_run.run

    def off_by_three(*args, **kwargs):
        res = real(*args, **kwargs)
        return {**res, "bit_exact": False, "max_abs_diff": 3, "matches_reference": False}

    monkeypatch.setattr(device_run, "run", off_by_three)
    res = _invoke("validate", plain, "--count", "2", "--json")
    obj = _json_error(res, 8)
    assert obj["all_match"] is False and obj["count"] == 2 and "seeds 0, 1" in obj["error"]["message"]
    assert "seed 0: DIFFERS (max |diff| 3)" in res.stderr


@needs_qemu
def test_profile_reports_each_step_as_it_arrives(builds):
    from edgemem import profiling

    project, _ = builds["profiling"]
    seen: list[tuple[int, int]] = []
    res = profiling.profile(project, progress=lambda done, total: seen.append((done, total)))
    n = len(json.loads((project / "edgemem.json").read_text())["profile"]["steps"])
    assert n == len(res["steps"]) > 1 and seen == [(i, n) for i in range(1, n + 1)]


@needs_qemu
def test_on_a_terminal_validate_and_profile_draw_a_bar_on_stderr(builds, monkeypatch):
    """stderr a terminal (forced): a rich bar counting validate's runs and profile's steps, stdout untouched."""
    import io
    import re

    from rich.console import Console

    import edgemem.cli as cli

    def drawn(*args) -> tuple[str, str]:
        screen = io.StringIO()
        monkeypatch.setattr(cli, "err", Console(file=screen, force_terminal=True, width=100))
        res = _invoke(*args)
        assert res.exit_code == 0, res.stderr
        return re.sub(r"\x1b\[[0-9;?]*[A-Za-z]", "", screen.getvalue()), res.stdout

    bar, stdout = drawn("validate", builds["plain"][0], "--count", "2", "--json")
    assert "validating" in bar and "2/2" in bar and "seed 1: bit-exact" in bar
    assert _one_object(stdout)["count"] == 2
    profiling, _ = builds["profiling"]
    n = len(json.loads((profiling / "edgemem.json").read_text())["profile"]["steps"])
    bar, stdout = drawn("profile", profiling, "--json")
    assert "profiling" in bar and f"{n}/{n}" in bar and len(_one_object(stdout)["steps"]) == n
