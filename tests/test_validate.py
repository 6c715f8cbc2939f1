"""`edgemem validate`: N seeded inputs through the firmware under QEMU, each compared with TFLite Micro.

A correct build validates N/N bit-exact; a build whose weights were corrupted after generation (the firmware
rebuilt from the edited weights.c) must be caught with the mismatch exit code. The comparison itself is
pipeline's, against the `tflite_micro` oracle, which shares no code with edgemem."""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path

import numpy as np
import pytest
from typer.testing import CliRunner

from edgemem import device_run, pipeline
from edgemem.board import load_board
from edgemem.cli import app
from edgemem.errors import ToolchainError
from edgemem.reference import seeded_inputs, tflm_outputs
from edgemem.target.toolchain import build_firmware
from edgemem.validation import MismatchError, summarize, validate

ROOT = Path(__file__).resolve().parents[1]
MODELS = ROOT.parent / "shared" / "models"
EXAMPLE = ROOT / "examples" / "kws_tiny_int8.tflite"

pytestmark = pytest.mark.skipif(
    shutil.which("arm-none-eabi-gcc") is None or shutil.which("qemu-system-arm") is None,
    reason="needs arm-none-eabi-gcc and qemu-system-arm",
)


@pytest.fixture(scope="module")
def example_build(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("validate") / "kws_tiny"
    pipeline.build(EXAMPLE, "stm32f746", out)
    return out


@pytest.fixture(scope="module")
def broken_build(example_build, tmp_path_factory) -> Path:
    """The example build with the first convolution's weights negated in weights.c, firmware rebuilt."""
    out = tmp_path_factory.mktemp("broken") / "kws_tiny"
    shutil.copytree(example_build, out)
    weights = out / "weights.c"
    text = weights.read_text()
    m = re.search(r"const int8_t \w+\[\d+\][^=]*= \{([^}]*)\}", text)
    negated = ", ".join(str(-max(-127, int(v))) for v in m.group(1).replace("\n", " ").split(","))
    weights.write_text(text[: m.start(1)] + "\n    " + negated + "\n" + text[m.end(1) :])
    build_firmware(out, load_board("stm32f746"))
    return out


def test_example_validates_bit_exact(example_build):
    report = validate(example_build, count=5)
    assert report["count"] == 5 and [r["seed"] for r in report["runs"]] == [0, 1, 2, 3, 4]
    assert report["bit_exact_count"] == 5 and report["matching_count"] == 5
    assert report["max_abs_diff"] == 0 and report["all_match"]
    assert all(r["instructions"] > 0 for r in report["runs"])


def test_validate_runs_the_seeded_inputs_of_run(example_build):
    """Seed s of validate is the input `edgemem run --seed s` uses: check one against TFLM directly."""
    report = validate(example_build, count=1, first_seed=7)
    res = device_run.run(example_build, seeded_inputs(EXAMPLE, 7))
    np.testing.assert_array_equal(res["output_arrays"][0], tflm_outputs(EXAMPLE, seeded_inputs(EXAMPLE, 7))[0])
    assert report["runs"][0]["seed"] == 7 and report["runs"][0]["bit_exact"]


def test_shared_model_validates_bit_exact(tmp_path):
    path = MODELS / "mlperf_kws_dscnn_int8.tflite"
    if not path.is_file():
        pytest.skip(f"{path} is not here (the shared models live next to the repository)")
    pipeline.build(path, "stm32f746", tmp_path / "kws")
    report = validate(tmp_path / "kws", count=3)
    assert (report["bit_exact_count"], report["count"], report["max_abs_diff"]) == (3, 3, 0)


def test_corrupted_weights_are_caught(broken_build):
    report = validate(broken_build, count=4)
    assert not report["all_match"]
    assert report["bit_exact_count"] < 4 and report["max_abs_diff"] > 1


def test_cli_json_and_exit_codes(example_build, broken_build):
    ok = CliRunner().invoke(app, ["validate", "--board", "stm32f746", str(example_build), "--count", "3", "--json"])
    assert ok.exit_code == 0, ok.output
    report = json.loads(ok.stdout)
    assert (report["bit_exact_count"], report["matching_count"], report["count"]) == (3, 3, 3)
    bad = CliRunner().invoke(app, ["validate", str(broken_build), "--count", "3"])
    assert bad.exit_code == MismatchError.exit_code == 8
    assert "bit-exact" in bad.stdout and "not matching the reference" in bad.stderr
    wrong_board = CliRunner().invoke(app, ["validate", "--board", "nucleo-f401re", str(example_build)])
    assert wrong_board.exit_code == 2 and "was built for board stm32f746" in wrong_board.stderr


def test_a_port_that_cannot_be_opened_is_named(example_build):
    from edgemem.errors import DeviceError

    with pytest.raises(DeviceError, match="cannot open serial port '/dev/ttyEDGEMEM0'"):
        validate(example_build, count=1, port="/dev/ttyEDGEMEM0")


def test_board_without_a_qemu_stand_in_is_a_clear_error(example_build, tmp_path):
    proj = tmp_path / "p"
    shutil.copytree(example_build, proj)
    info = json.loads((proj / "edgemem.json").read_text())
    pico = load_board("rp2040-pico").definition
    (proj / "edgemem.json").write_text(json.dumps({**info, "board": "rp2040-pico", "board_definition": pico}))
    with pytest.raises(ToolchainError, match="rp2040-pico has no QEMU stand-in"):
        validate(proj, count=1)


# ---- the verdict, from hand-made comparisons (no device needed) ---------------------------------------------


def _runs(*diffs: tuple[int, bool]) -> list[dict]:
    return [{"seed": i, "bit_exact": d == 0, "max_abs_diff": d, "matches_reference": ok, "instructions": 1}
            for i, (d, ok) in enumerate(diffs)]  # fmt: skip


def test_one_lsb_on_softmax_matches_unless_bit_exact_is_required():
    runs = _runs((0, True), (1, True))  # 1 LSB on a SOFTMAX output: tolerated by device_run's comparison
    loose = summarize("m.tflite", "b", runs, device="QEMU")
    assert loose["all_match"] and loose["bit_exact_count"] == 1 and loose["matching_count"] == 2
    strict = summarize("m.tflite", "b", runs, device="QEMU", require_bit_exact=True)
    assert not strict["all_match"]
    assert not summarize("m.tflite", "b", _runs((0, True), (3, False)), device="QEMU")["all_match"]


def test_run_exits_8_when_the_outputs_differ_and_still_prints_the_table(broken_build, example_build):
    """`edgemem run` printed a difference from TFLite Micro and exited 0; now it exits 8, as validate does."""
    bad = CliRunner().invoke(app, ["run", str(broken_build)])
    assert bad.exit_code == MismatchError.exit_code, bad.output
    assert "max |diff|" in bad.output and "differ from the oracle" in " ".join(bad.output.split())  # table, then why
    good = CliRunner().invoke(app, ["run", str(example_build)])
    assert good.exit_code == 0 and "bit-exact" in good.output, good.output


def test_build_run_exits_8_when_the_outputs_differ(tmp_path, monkeypatch):
    """build --run with an oracle that disagrees (its outputs shifted by 3): the run's verdict sets the exit code."""
    real = device_run.reference_outputs

    def shifted(model_path, inputs):
        outputs, oracle = real(model_path, inputs)
        return [(np.asarray(o).astype(np.int16) + 3).clip(-128, 127).astype(np.int8) for o in outputs], oracle

    monkeypatch.setattr(device_run, "reference_outputs", shifted)
    res = CliRunner().invoke(app, ["build", str(EXAMPLE), "-b", "mps2-an386", "-o", str(tmp_path / "p"), "--opt-time", "0", "--run"])
    assert res.exit_code == MismatchError.exit_code, res.output
    assert "max |diff| 3" in res.output and (tmp_path / "p" / "firmware.elf").is_file()


def _tile_model() -> bytes:
    """int8 x[1,2,4] -> TILE [1,3,1] -> DEQUANTIZE -> float y[1,6,4]: TFLM has no TILE kernel, LiteRT is the oracle."""
    import sys

    sys.path.insert(0, str(ROOT / "examples"))
    import make_example_model as mm

    mb = mm.ModelBuilder(description="edgemem tile validate test")
    q = mm.qparams([0.02], [-3])
    x = mb.tensor("x", (1, 2, 4), np.int8, q)
    t = mb.tensor("t", (1, 6, 4), np.int8, q)
    mb.op(mm.OP.TILE, [x, mb.const("multiples", np.array([1, 3, 1], np.int32))], [t])
    y = mb.tensor("y", (1, 6, 4), np.float32)
    mb.op(mm.OP.DEQUANTIZE, [t], [y], version=2)
    return mb.serialize([x], [y])


def test_validate_names_litert_where_it_is_the_oracle(tmp_path):
    """The table and the report said 'vs TFLite Micro' also where TFLM cannot run the model (ST's SSD detector)."""
    path = tmp_path / "tile.tflite"
    path.write_bytes(_tile_model())
    pipeline.build(path, "stm32f746", tmp_path / "proj")
    table = CliRunner().invoke(app, ["validate", str(tmp_path / "proj"), "--count", "2"])
    assert table.exit_code == 0, table.output
    text = " ".join(table.stdout.split())  # the title wraps
    assert "vs LiteRT (TFLM cannot run it)" in text and "TFLite Micro" not in text
    report = json.loads(CliRunner().invoke(app, ["validate", str(tmp_path / "proj"), "--count", "1", "--json"]).stdout)
    assert report["oracle"] == "litert" and report["all_match"]
