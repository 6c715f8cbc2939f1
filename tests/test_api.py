"""The Python API (edgemem/api.py): the CLI's commands as functions with typed results.

Oracles: the build's own edgemem.json and the CLI's `--json` object for the same build (the API must report the
same figures), TFLite Micro for the outputs, and a fresh interpreter for what `import edgemem` costs.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from typer.testing import CliRunner

import edgemem
from edgemem.cli import app
from edgemem.reference import seeded_inputs, tflm_outputs

ROOT = Path(__file__).resolve().parents[1]
EXAMPLE = ROOT / "examples" / "kws_tiny_int8.tflite"
BOARD = "mps2-an385"
# differ between two builds of the same model: times, and the orchestrator's record of what it tried in its time
TIMINGS = ("build_seconds", "stage_seconds", "project", "run", "passes", "pareto")


@pytest.fixture(scope="module")
def built(tmp_path_factory):
    return edgemem.build(EXAMPLE, board=BOARD, output=tmp_path_factory.mktemp("api") / "kws", run=True)


def test_import_is_cheap_and_names_the_api():
    code = "import sys, edgemem; print(sorted(edgemem.__all__)); print('tvm' in sys.modules, 'numpy' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout.splitlines()
    assert {"build", "analyze", "run", "validate", "profile", "EdgememError"} <= set(eval(out[0]))
    assert out[1] == "False False", "import edgemem must not import TVM or numpy"


def test_build_reports_what_the_project_and_the_cli_report(built, tmp_path):
    written = json.loads((built.project / "edgemem.json").read_text())
    assert built.arena_bytes == written["arena_bytes"] > 0 and built.total_ram_bytes == written["total_ram_bytes"]
    res = CliRunner().invoke(app, ["build", str(EXAMPLE), "--board", BOARD, "-o", str(tmp_path / "cli"), "--json"])
    assert res.exit_code == 0, res.output
    cli = json.loads(res.stdout)
    mine = built.to_json()
    assert set(cli) | {"run"} == set(mine)
    assert {k: v for k, v in mine.items() if k not in TIMINGS} == {k: v for k, v in cli.items() if k not in TIMINGS}
    assert mine["passes"]["arena_bytes"] == cli["passes"]["arena_bytes"]


def test_build_with_run_is_bit_exact_with_tflite_micro(built):
    assert built.run.bit_exact is True and built.run.oracle == "tflm"
    want = tflm_outputs(str(EXAMPLE), seeded_inputs(str(EXAMPLE), 0))
    assert len(built.run.output_arrays) == len(want)
    for got, ref in zip(built.run.output_arrays, want):
        np.testing.assert_array_equal(got, ref)
    assert built.run.arena_high_water_bytes == built.arena_bytes  # measured = planned, as `edgemem run` checks


def test_run_takes_the_users_inputs_and_validate_counts_seeds(built):
    x = np.full(built.inputs[0].shape, 7, dtype=built.inputs[0].dtype)
    ran = edgemem.run(built.project, [x])
    np.testing.assert_array_equal(ran.output_arrays[0], tflm_outputs(str(EXAMPLE), [x])[0])
    assert ran.matches_reference is True and ran.to_json()["schema"] >= 1 and "output_arrays" not in ran.to_json()
    checked = edgemem.validate(built.project, 2, seed=5)
    assert checked.all_match and checked.count == 2 and [r["seed"] for r in checked.runs] == [5, 6]


def test_analyze_and_errors_carry_the_clis_exit_codes(tmp_path):
    a = edgemem.analyze(EXAMPLE, board=BOARD, ram="64K")
    assert a.verdict == "fits" and a.board_ram_bytes == 64 * 1024
    with pytest.raises(edgemem.DoesNotFitError) as refused:
        edgemem.build(EXAMPLE, board=BOARD, output=tmp_path / "small", ram="9K")
    assert refused.value.exit_code == 5
    with pytest.raises(edgemem.EdgememError) as bad:
        edgemem.build(EXAMPLE, board=BOARD, output=tmp_path / "x", minimize=True, max_slowdown=5)
    assert "cannot be used together" in str(bad.value)
    with pytest.raises(edgemem.ModelFileError):
        edgemem.analyze(tmp_path / "missing.tflite")


def test_the_readme_one_liner(tmp_path):
    """The issue's own check: `edgemem.build(...).arena_bytes` printed from a script in another directory."""
    code = (f"import edgemem; print(edgemem.build({str(EXAMPLE)!r}, board={BOARD!r}, output='o', opt_time=0)"
            ".arena_bytes)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=tmp_path, timeout=600)
    assert out.returncode == 0, out.stderr
    assert int(out.stdout.strip()) == json.loads((tmp_path / "o" / "edgemem.json").read_text())["arena_bytes"]
