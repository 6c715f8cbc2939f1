"""Bad input, one case per class, through the `edgemem` CLI: each ends with one paragraph on stderr that says what is
wrong, where and what to do, a distinct exit code (errors.py), no Python traceback, and no output directory.

The broken models are written here with the example's flatbuffer writer (examples/make_example_model.py), so each
case breaks exactly one thing. tests/test_build.py already covers zero bytes ("not a TFLite model") and the
pipeline-level budget checks; they are not repeated.
"""

from __future__ import annotations

import importlib.util
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import tflite

from edgemem.errors import ModelFileError
from edgemem.frontend.tflite_import import read_tflite

from shared_models import model_path as shared_model

ROOT = Path(__file__).resolve().parents[1]
EXAMPLE = ROOT / "examples" / "kws_tiny_int8.tflite"

# exit codes (edgemem/errors.py)
USAGE, FILE, UNSUPPORTED, DOES_NOT_FIT, TOOLCHAIN = 2, 3, 4, 5, 6


def _example_module():
    spec = importlib.util.spec_from_file_location("edgemem_make_example_model_bad", ROOT / "examples" / "make_example_model.py")
    mod = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = mod  # dataclasses look their module up there
    spec.loader.exec_module(mod)
    return mod


mem = _example_module()
OP, TT = mem.OP, mem.TT


def _cli(*args: str, cwd: Path, env: dict | None = None) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "edgemem.cli", *args], cwd=cwd, capture_output=True, text=True,
                          timeout=600, env=env)  # fmt: skip


def build_fails(model: Path, tmp_path: Path, code: int, *phrases: str, extra=(), env=None) -> str:
    """Run `edgemem build`; check the exit code, one paragraph with `phrases`, no traceback, nothing written."""
    out = tmp_path / "out"
    if code == DOES_NOT_FIT:  # the ways out are planned and checked in tests/test_refusal.py
        extra = (*extra, "--ways-time", "0")
    p = _cli("build", str(model), "-o", str(out), *extra, cwd=tmp_path, env=env)
    assert p.returncode == code, f"exit {p.returncode}, expected {code}; stderr:\n{p.stderr}"
    assert "Traceback" not in p.stderr and "Traceback" not in p.stdout
    errors = [line for line in p.stderr.splitlines() if line.startswith("error:")]
    assert len(errors) == 1, p.stderr  # one paragraph (rich does not wrap it: soft_wrap)
    for phrase in phrases:
        assert phrase in errors[0], f"{phrase!r} not in: {errors[0]}"
    if code == DOES_NOT_FIT and out.exists():  # a refusal's report (report/refusal.py), nothing of a project
        assert sorted(p.name for p in out.iterdir()) == [".edgemem-output", "refusal.json", "report.html"]
    else:
        assert not out.exists(), "a failed build left an output directory"
    assert not list(tmp_path.glob(".out.*")), "a failed build left its temporary directory"
    return errors[0]


def one_op_fc(dynamic_hidden=False, hidden_type=None, second_op=OP.SOFTMAX, bad_input_index=None, hidden_name="hidden"):
    """x int8[1,8] -> FULLY_CONNECTED -> h int8[1,4] -> second_op -> y int8[1,4], with one thing broken."""
    mb = mem.ModelBuilder()
    q = mem.qparams(0.05, 0)
    x = mb.tensor("x", (1, 8), np.int8, q)
    w = mb.const("w", np.ones((4, 8), np.int8), mem.qparams(0.01, 0))
    b = mb.const("b", np.zeros(4, np.int32), mem.qparams(0.0005, 0))
    h = mb.tensor(hidden_name, (-1, 4) if dynamic_hidden else (1, 4), np.int8, q)
    if hidden_type is not None:
        mb.tensors[h].ttype = hidden_type
    y = mb.tensor("y", (1, 4), np.int8, mem.qparams(1 / 256, -128))
    mb.op(OP.FULLY_CONNECTED, [x if bad_input_index is None else bad_input_index, w, b], [h],
          *mem.fully_connected_options(), version=4)  # fmt: skip
    mb.op(second_op, [h], [y], *(mem.softmax_options() if second_op == OP.SOFTMAX else ()))
    return mb.serialize([x], [y])


def write(tmp_path: Path, name: str, data: bytes) -> Path:
    path = tmp_path / name
    path.write_bytes(data)
    return path


def test_the_fixture_model_itself_builds(tmp_path):
    """The unbroken fixture imports (so each failure below comes from the one thing broken)."""
    from edgemem import pipeline

    pipeline.build(write(tmp_path, "ok.tflite", one_op_fc()), "stm32f746", tmp_path / "p", pipeline.BuildOptions(compile=False))


# ---- the file ------------------------------------------------------------------------------------------


def test_missing_file(tmp_path):
    build_fails(tmp_path / "nope.tflite", tmp_path, FILE, "does not exist", "nope.tflite")


def test_device_instead_of_a_file_is_not_read(tmp_path):
    """/dev/zero never ends: it must be refused before any read (a hang otherwise)."""
    build_fails(Path("/dev/zero"), tmp_path, FILE, "is not a regular file")


def test_empty_file(tmp_path):
    build_fails(write(tmp_path, "empty.tflite", b""), tmp_path, FILE, "is empty (0 bytes)")


def test_wrong_magic_png_renamed(tmp_path):
    png = b"\x89PNG\r\n\x1a\n" + bytes(100)
    build_fails(write(tmp_path, "image.tflite", png), tmp_path, FILE, "not a TensorFlow Lite model", "TFL3", "Convert the model")


def test_truncated_model(tmp_path):
    data = EXAMPLE.read_bytes()
    build_fails(write(tmp_path, "cut.tflite", data[: len(data) * 3 // 4]), tmp_path, FILE, "cut.tflite", "truncated", "Re-export")


def test_every_prefix_of_a_model_is_refused_as_a_file_error(tmp_path):
    """The weights sit at the end of the file; cutting anywhere must be caught by the reader, not later."""
    data = EXAMPLE.read_bytes()
    for cut in range(0, len(data) - 1, 37):
        path = write(tmp_path, "cut.tflite", data[:cut])
        with pytest.raises(ModelFileError):
            read_tflite(path)


def test_corrupted_tensor_index_names_the_operator(tmp_path):
    model = write(tmp_path, "corrupt.tflite", one_op_fc(bad_input_index=999))
    build_fails(model, tmp_path, FILE, "corrupted", "operator #0 (FULLY_CONNECTED)", "tensor 999", "Re-export")


def test_huge_file_is_refused_before_reading(tmp_path):
    """A sparse 65 MiB file: refused from its size (stat), never read into memory; takes no disk space."""
    huge = tmp_path / "huge.tflite"
    with open(huge, "wb") as f:
        f.write(EXAMPLE.read_bytes()[:8])
        f.truncate(65 * 1024 * 1024)
    build_fails(huge, tmp_path, FILE, "68,157,440 bytes", "more than the 67,108,864 bytes")


# ---- the model's structure ---------------------------------------------------------------------------------


def test_while_with_a_run_time_trip_count(tmp_path):
    """WHILE loops are unrolled at import when their trip count is known at build time (tests/test_while.py); one
    whose condition compares the counter with a model input is refused, naming the operator and the input."""
    from while_models import rnn_int8

    build_fails(write(tmp_path, "rnn_n.tflite", rnn_int8(10, runtime_steps=True)), tmp_path, UNSUPPORTED,
                "trip count is not known at build time", "operator #0 LESS", "'n', computed at run time")  # fmt: skip


def test_while_whose_body_is_the_main_graph(tmp_path):
    """A hostile loop: its body is subgraph 0, which holds the loop itself; refused, not expanded forever."""
    mb = mem.ModelBuilder()
    x, y = mb.tensor("x", (), np.int32), mb.tensor("y", (), np.int32)
    mb.op(OP.WHILE, [mb.const("zero", np.array([0], np.int32))], [y], *mem.while_options(1, 0))
    cond = mb.subgraph("cond")
    i, more = cond.tensor("i", (), np.int32), cond.tensor("more", (), np.bool_)
    cond.op(OP.LESS, [i, cond.const("ten", np.array([10], np.int32))], [more])
    cond.inputs, cond.outputs = [i], [more]
    build_fails(write(tmp_path, "loop.tflite", mb.serialize([x], [y])), tmp_path, UNSUPPORTED, "calls itself")


def test_while_body_with_an_unsupported_operator(tmp_path):
    """An unrolled loop's operators go through the support check: one it has no kernel for is named, with its
    output in the loop (the body tensor's name and the iteration)."""
    from while_models import rnn_int8

    build_fails(write(tmp_path, "rnn_log.tflite", rnn_int8(3, cell=OP.LOG)), tmp_path, UNSUPPORTED,
                "no kernel for 3 operator(s)", "LOG (output 'h_next/while3_step0') on int8", "Missing: LOG (int8)")  # fmt: skip


def test_dynamic_tensor_names_tensor_and_operator(tmp_path):
    model = write(tmp_path, "dyn.tflite", one_op_fc(dynamic_hidden=True))
    build_fails(model, tmp_path, UNSUPPORTED, "tensor 'hidden'", "operator #0 (FULLY_CONNECTED)", "dynamic shape [-1, 4]", "fixed")


CONTROL_NAME = "hid\nden\r\t\x1b[2J\u2028x"  # a newline, CR, tab, an ANSI clear-screen, a Unicode line separator
CONTROL_SHOWN = "hid\\nden\\r\\t\\x1B[2J\\u2028x"


def test_control_characters_in_a_tensor_name_keep_one_paragraph(tmp_path):
    """The refusal names the tensor with its control characters spelled (errors.shown): the whole message, the
    operator after the name included, on the one error line (a newline in a name split it)."""
    model = write(tmp_path, "ctl.tflite", one_op_fc(dynamic_hidden=True, hidden_name=CONTROL_NAME))
    build_fails(model, tmp_path, UNSUPPORTED, f"tensor '{CONTROL_SHOWN}'", "operator #0 (FULLY_CONNECTED)", "fixed")


def test_control_characters_in_a_custom_operator_name_keep_one_paragraph(tmp_path):
    mb = mem.ModelBuilder()
    q = mem.qparams(0.05, 0)
    x, y = mb.tensor("x", (1, 4), np.int8, q), mb.tensor("y", (1, 4), np.int8, q)
    mb.op(32, [x], [y], custom_code=CONTROL_NAME)
    build_fails(write(tmp_path, "custom.tflite", mb.serialize([x], [y])), tmp_path, UNSUPPORTED,
                f"CUSTOM({CONTROL_SHOWN})", "operator #0", "(output 'y')")  # fmt: skip


def test_unsupported_type_names_tensor_and_operator(tmp_path):
    model = write(tmp_path, "f64.tflite", one_op_fc(hidden_type=TT.FLOAT64))
    build_fails(model, tmp_path, UNSUPPORTED, "tensor 'hidden'", "operator #0 (FULLY_CONNECTED)", "FLOAT64")


def test_unsupported_operator_names_its_index(tmp_path):
    model = write(tmp_path, "skipgram.tflite", one_op_fc(second_op=OP.SKIP_GRAM))
    build_fails(model, tmp_path, UNSUPPORTED, "SKIP_GRAM (int8)", "operator #1 SKIP_GRAM (output 'y')", "file an issue")


def _chain(ops, in_q, out_qs, dtype=np.int8, shape=(1, 4, 4, 3), options=None):
    """x -> ops[0] -> t1 -> ops[1] -> ... -> y, every tensor of ``shape``; ``out_qs`` the quantization of each output."""
    mb = mem.ModelBuilder()
    x = mb.tensor("x", shape, dtype, in_q)
    cur = x
    for i, (op, q) in enumerate(zip(ops, out_qs)):
        out = mb.tensor(f"t{i + 1}" if i < len(ops) - 1 else "y", shape, dtype, q)
        mb.op(op, [cur], [out], *((options or {}).get(i, ())))
        cur = out
    return mb.serialize([x], [cur])


def _no_tvm_log(tmp_path, model):
    """The refusal's stderr carries edgemem's paragraph only: no TVM log line (its BlockBuilder warns when left open)."""
    p = _cli("build", str(model), "-o", str(tmp_path / "again"), cwd=tmp_path)
    assert "Warning" not in p.stderr and "block_builder" not in p.stderr and "[" not in p.stderr.split("error:")[0], p.stderr


def test_unsupported_operators_are_all_listed_with_index_name_output_and_type(tmp_path):
    """Class 'operator': two operators edgemem has no kernel for are named together, each with its index."""
    q = mem.qparams(0.05, 0)
    model = write(tmp_path, "two.tflite", _chain([OP.SKIP_GRAM, OP.RELU, OP.LSH_PROJECTION], q, [q, q, q]))
    build_fails(model, tmp_path, UNSUPPORTED, "operator #0 SKIP_GRAM (output 't1') on int8",
                "operator #2 LSH_PROJECTION (output 'y') on int8", "2 operator(s)")  # fmt: skip
    _no_tvm_log(tmp_path, model)


def test_unsupported_type_names_the_operator_index_and_type(tmp_path):
    """Class 'type': an int16 HARD_SWISH (TFLM has no int16 kernel for it, nor has edgemem) after an int16 RELU is
    refused naming index, name and type -- only the operator that lacks a kernel."""
    q = mem.qparams(0.05, 0)
    model = write(tmp_path, "int16.tflite", _chain([OP.RELU, OP.HARD_SWISH], q, [q, q], dtype=np.int16))
    msg = build_fails(model, tmp_path, UNSUPPORTED, "operator #1 HARD_SWISH (output 'y') on int16")
    assert "RELU" not in msg
    _no_tvm_log(tmp_path, model)


def test_unsupported_quantization_form_names_the_operator(tmp_path):
    """Class 'quantization form': a per-channel quantized RELU output (TFLite's RELU takes one scale)."""
    q = mem.qparams(0.05, 0)
    per_channel = mem.qparams([0.03, 0.02, 0.01], [0, 0, 0], dim=3)
    model = write(tmp_path, "perchannel.tflite", _chain([OP.RELU, OP.RELU], q, [per_channel, q]))
    build_fails(model, tmp_path, UNSUPPORTED, "operator #0 RELU (output 't1')", "3 scales (per-channel)")
    _no_tvm_log(tmp_path, model)


def test_refusal_inside_integer_lowering_names_the_operator_not_a_relax_variable(tmp_path):
    """Class 'form the integer lowering refuses': an int8 CONCATENATION of two quantizations (TFLM needs one) is
    refused with the TFLite operator's index, name and output, and no Relax variable name."""
    mb = mem.ModelBuilder()
    a = mb.tensor("a", (1, 4, 4, 3), np.int8, mem.qparams(0.05, -3))
    b = mb.tensor("b", (1, 4, 4, 3), np.int8, mem.qparams(0.07, 1))
    y = mb.tensor("y", (1, 4, 4, 6), np.int8, mem.qparams(0.05, -3))

    def axis3(fb):
        tflite.ConcatenationOptionsStart(fb)
        tflite.ConcatenationOptionsAddAxis(fb, 3)
        return tflite.ConcatenationOptionsEnd(fb)

    mb.op(OP.CONCATENATION, [a, b], [y], mem.OPTS.ConcatenationOptions, axis3)
    model = write(tmp_path, "concat.tflite", mb.serialize([a, b], [y]))
    msg = build_fails(model, tmp_path, UNSUPPORTED, "operator #0 CONCATENATION (output 'y')", "mixes quantizations")
    assert " lv" not in msg and " gv" not in msg and "Relax" not in msg, msg
    _no_tvm_log(tmp_path, model)


# ---- the budget ----------------------------------------------------------------------------------------------


def test_does_not_fit_reports_needed_budget_best_plan_and_what_was_tried(tmp_path):
    """A budget between the operator floor and the arena the build needs (mltk_kws_on_off_v3: its schedulers beat
    the file order): the floor check passes, no plan fits, and the message gives both figures and every order and
    placement tried. The figures come from a build without the budget, so the test follows the optimisers."""
    from edgemem import pipeline
    from edgemem.board import load_board
    from edgemem.frontend.footprint import operator_floor_bytes
    from edgemem.passes.optimize import inplace_kinds

    model = shared_model("mltk_kws_on_off_v3")
    # minimizing (opt_margin 1.0), as the budgeted build that cannot fit does: the same passes, the same orders
    fits = pipeline.build(model, "stm32f746", tmp_path / "unbounded", pipeline.BuildOptions(compile=False, opt_margin=1.0))
    need = fits.plan.total_bytes
    floor = operator_floor_bytes(read_tflite(model), inplace_kinds())[0]
    budget = -(-floor // 32) * 32  # the MPU covers 32-byte multiples
    if budget >= need:
        pytest.skip(f"the arena ({need:,} B) is at the floor ({floor:,} B): no budget fails only in planning")
    stack = load_board("stm32f746").stack_size
    msg = build_fails(model, tmp_path, DOES_NOT_FIT, "needs an arena of", f"{budget:,} bytes of RAM left",
                      "Best plan found: the", "Placements tried", "--ram",
                      extra=("--ram", str(stack + budget)))  # fmt: skip
    # Under a budget it does not meet, the build also tries the passes that add work (patches, remat: issue 33), so
    # its best arena may be below the unbounded build's, never above it, and never within the budget.
    got = int(msg.split("needs an arena of ")[1].split(" bytes")[0].replace(",", ""))
    assert budget < got <= need, (budget, got, need)
    tried = msg.split("Operator orders tried (peak bytes): ")[1].split(". ")[0]
    assert {entry.split(" ")[0] for entry in tried.split(", ")} == set(fits.info["schedulers_tried"]), msg


def test_does_not_fit_below_what_any_pass_reaches(tmp_path):
    # 1 KiB is below every arena the passes reach, patches included; the early floor no longer refuses what a
    # patch stage might split (issue 33), so the plan stage refuses with the best plan it found and every order
    # tried (the floor's own refusal, naming the operator, is tests/test_memory_model.py's mcunetv2_large case)
    msg = build_fails(EXAMPLE, tmp_path, DOES_NOT_FIT, "needs an arena of 2,692 bytes", "1,024 bytes of RAM left",
                      "Best plan found", "Operator orders tried", extra=("--ram", str(16384 + 1024)))  # fmt: skip
    assert "--ram" in msg


def test_flash_override_too_small(tmp_path):
    # 1,056 B of layer weights + the SOFTMAX kernel's 1,024-byte exp table (TFLM's fixed-point softmax, matmul family)
    build_fails(EXAMPLE, tmp_path, DOES_NOT_FIT, "2,080 bytes of weights", "992 bytes of flash", "--flash",
                extra=("--flash", "992"))  # fmt: skip


def test_ram_override_not_a_budget(tmp_path):
    build_fails(EXAMPLE, tmp_path, USAGE, "--ram 0", "more than the stack", extra=("--ram", "0"))


def test_ram_override_with_a_unit(tmp_path):
    """17K is 17 x 1024 bytes: the same budget as the floor test above, so the same refusal."""
    build_fails(EXAMPLE, tmp_path, DOES_NOT_FIT, "needs an arena of 2,692 bytes", "1,024 bytes of RAM left",
                "17,408 B in all", extra=("--ram", "17K"))  # fmt: skip


@pytest.mark.parametrize("value, phrase", [("12X", "not a size"), ("1.3K", "not a whole number"), ("17473", "17,472 or 17,504")])
def test_ram_override_that_is_no_size(tmp_path, value, phrase):
    p = _cli("build", str(EXAMPLE), "-o", str(tmp_path / "out"), "--ram", value, cwd=tmp_path)
    assert p.returncode == USAGE and phrase in " ".join(p.stderr.split()) and "Traceback" not in p.stderr, p.stderr
    assert not (tmp_path / "out").exists()


def test_sizes_with_units():
    from edgemem.sizes import parse_size

    assert [parse_size(t) for t in ("327680", "0x50000", "320K", "320KiB", "320kb", "1M", "1MiB", "1.5M", "64 KiB")] == [
        327680, 327680, 327680, 327680, 327680, 1048576, 1048576, 1572864, 65536]
    for bad in ("", "K", "-1K", "1G", "3.3"):
        with pytest.raises(ValueError):
            parse_size(bad)


# ---- the output directory and the toolchain ------------------------------------------------------------------


def test_model_inside_the_output_directory_is_not_deleted(tmp_path):
    (tmp_path / "out").mkdir()
    model = tmp_path / "out" / "m.tflite"
    shutil.copy(EXAMPLE, model)
    p = _cli("build", str(model), "-o", str(tmp_path / "out"), "--force", cwd=tmp_path)
    assert p.returncode == USAGE and "inside the output directory" in " ".join(p.stderr.split()) and "Traceback" not in p.stderr
    assert model.read_bytes() == EXAMPLE.read_bytes()


def test_existing_output_directory_exit_code(tmp_path):
    (tmp_path / "out").mkdir()
    (tmp_path / "out" / "mine.txt").write_text("keep")
    p = _cli("build", str(EXAMPLE), "-o", str(tmp_path / "out"), cwd=tmp_path)
    assert p.returncode == USAGE and "--force" in p.stderr and "Traceback" not in p.stderr
    assert (tmp_path / "out" / "mine.txt").read_text() == "keep"


def test_missing_cross_compiler_gives_the_install_command(tmp_path):
    """PATH without arm-none-eabi-gcc (make and the host tools stay): exit 6 with the apt-get line."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    for tool in ("make", "sh"):
        found = shutil.which(tool)
        if found:
            os.symlink(found, bin_dir / tool)
    env = {**os.environ, "PATH": str(bin_dir)}
    build_fails(EXAMPLE, tmp_path, TOOLCHAIN, "arm-none-eabi-gcc not found", "apt-get install", env=env)


def test_debug_shows_the_traceback(tmp_path):
    """The contrast: --debug is the one way to get a traceback."""
    p = _cli("--debug", "build", str(tmp_path / "nope.tflite"), "-o", str(tmp_path / "o"), cwd=tmp_path)
    assert p.returncode != 0 and "Traceback" in p.stderr and "ModelFileError" in p.stderr


# ---- option values that cannot be meant ---------------------------------------------------------------------


def test_ram_beyond_the_address_space_is_a_usage_error(tmp_path):
    """--ram 100000M was an internal error (StopIteration deep in the MPU code)."""
    build_fails(EXAMPLE, tmp_path, USAGE, "--ram 104,857,600,000", "4 GiB address space", extra=("--ram", "100000M"))
    build_fails(EXAMPLE, tmp_path, USAGE, "--flash 104,857,600,000", extra=("--flash", "100000M"))


@pytest.mark.parametrize("option", ["--schedule-time", "--opt-time"])
def test_time_budgets_must_be_finite(tmp_path, option):
    p = _cli("build", str(EXAMPLE), "-o", str(tmp_path / "out"), option, "nan", cwd=tmp_path)
    assert p.returncode == USAGE and "not a usable time" in " ".join(p.stderr.split()), p.stderr
    assert not (tmp_path / "out").exists()


def test_timeout_nan_is_refused_not_a_hang(tmp_path):
    """`profile --timeout nan` waited forever (every comparison with NaN is false): now a usage error at once."""
    from edgemem import pipeline

    out = tmp_path / "p"
    pipeline.build(EXAMPLE, "mps2-an386", out, pipeline.BuildOptions(profile=True, compile=False, opt_seconds=0))
    for value in ("nan", "inf", "-1", "0"):
        p = subprocess.run([sys.executable, "-m", "edgemem.cli", "profile", str(out), "--port", "loop://", "--timeout", value],
                           capture_output=True, text=True, timeout=60, cwd=tmp_path)  # fmt: skip
        assert p.returncode == USAGE and "not a usable time" in " ".join(p.stderr.split()), (value, p.stderr)


def tiled_float_model() -> bytes:
    """x float[1,8] -> TILE -> 1 GiB -> RELU -> 1 GiB -> MEAN -> y float[1,1]: the early floor counts on a fusion
    removing the 1 GiB tensors, which the build does not do (its arena is 2 GiB)."""
    mb = mem.ModelBuilder()
    n = 1 << 28
    x = mb.tensor("x", (1, 8), np.float32)
    h = mb.tensor("tiled", (1, n), np.float32)
    mb.op(OP.TILE, [x, mb.const("multiples", np.array([1, n // 8], np.int32))], [h])
    r = mb.tensor("relu", (1, n), np.float32)
    mb.op(OP.RELU, [h], [r])
    y = mb.tensor("y", (1, 1), np.float32)
    mb.op(OP.MEAN, [r, mb.const("axis", np.array([1], np.int32))], [y], *_keep_dims())  # y [1, 1], as declared
    return mb.serialize([x], [y])


def _keep_dims():
    def fn(b):
        tflite.ReducerOptionsStart(b)
        tflite.ReducerOptionsAddKeepDims(b, True)
        return tflite.ReducerOptionsEnd(b)

    return mem.OPTS.ReducerOptions, fn


def test_analyze_a_model_with_a_1_gib_tensor_does_not_fit(tmp_path):
    """analyze said "may fit" (exit 0) for a model whose declared tensors alone exceed the board."""
    model = write(tmp_path, "tiled.tflite", tiled_float_model())
    p = _cli("analyze", str(model), "--json", cwd=tmp_path)
    assert p.returncode == DOES_NOT_FIT, p.stdout + p.stderr
    a = json.loads(p.stdout)
    assert a["verdict"] == "does not fit" and "1,073,741,824 B" in a["plan_note"]
