"""Resource variables (CALL_ONCE, VAR_HANDLE, READ_VARIABLE, ASSIGN_VARIABLE): a streaming model keeps its state
across invocations exactly as TFLite Micro does.

The models are converter-made (tests/models/gen_streaming.py: tf.Modules with tf.Variable state, a streaming
FULLY_CONNECTED with a running sum and a streaming 1-D convolution, float32 and int8) or written here with the example's flatbuffer writer. The oracle is one TFLM interpreter invoked N times on the
same inputs, never reset (reference.tflm_sequence_outputs); edgemem's build runs the same N invocations in a row,
on the host (gcc -Werror, op_check.run_in_sequence) and under QEMU (the firmware's sequence mode,
device_run.run_sequence). int8 outputs must be bit-exact, float ones within op_check.FLOAT_RTOL. On main these
models were refused (their VAR_HANDLE tensors have TFLite type RESOURCE)."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from edgemem import device_run, pipeline
from edgemem.errors import UnsupportedModelError
from edgemem.reference import seeded_inputs, tflm_outputs, tflm_sequence_outputs
from edgemem.target.device_protocol import parse_device_output

sys.path.insert(0, str(Path(__file__).resolve().parent))
from op_check import assert_outputs_match, build_for_host, run_in_sequence  # noqa: E402

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "examples"))
import make_example_model as mm  # noqa: E402

STREAMING = Path(__file__).resolve().parent / "models" / "streaming"
KINDS = ("float32", "int8")
MODELS = [f"{name}-{kind}" for name in ("stream-conv", "stream-conv1d") for kind in KINDS] + ["stream-conv-iofloat-int8"]
RUNS = 6
# stream-conv: the running sum [1, 4] and the ring buffer [1, 2, 4]; stream-conv1d: the ring buffer [1, 4, 8]
STATE_BYTES = {"stream-conv-float32": (16, 32), "stream-conv-int8": (4, 8), "stream-conv-iofloat-int8": (4, 8),
               "stream-conv1d-float32": (128,), "stream-conv1d-int8": (32,)}  # fmt: skip


def _model(name: str) -> Path:
    return STREAMING / f"{name}.tflite"


def _sets(path: Path, n: int = RUNS) -> list[list[np.ndarray]]:
    return [seeded_inputs(path, seed) for seed in range(n)]


def _assert_state_matters(path: Path, sets, sequence) -> None:
    """A fresh interpreter on invocation k's input alone differs from invocation k: the state is what is compared
    (a build that forgot it, or restarted from the initial value every run, would fail)."""
    for k in range(1, len(sets)):
        assert not np.array_equal(tflm_outputs(path, sets[k])[0], sequence[k][0]), f"invocation {k} does not depend on the state"


def test_the_converter_made_models_have_resource_variables():
    import tflite

    from edgemem.frontend.tflite_import import _op_name

    for name in MODELS:
        buf = _model(name).read_bytes()
        m = tflite.Model.GetRootAsModel(buf, 0)
        sg = m.Subgraphs(0)
        ops = {_op_name(m, sg.Operators(i)) for i in range(sg.OperatorsLength())}
        assert {"CALL_ONCE", "VAR_HANDLE", "READ_VARIABLE", "ASSIGN_VARIABLE"} <= ops, (name, ops)
        assert m.SubgraphsLength() == 2  # main and CALL_ONCE's init


@pytest.mark.parametrize("name", MODELS)
def test_state_carries_across_invocations_on_the_host(name, tmp_path):
    """RUNS invocations in a row of the host build = TFLM invoked RUNS times; after edgemem_reset() the first
    input gives the first output again (the variables are back at CALL_ONCE's initial values)."""
    path = _model(name)
    sets = _sets(path)
    want = tflm_sequence_outputs(path, sets)
    _assert_state_matters(path, sets, want)
    got, again = run_in_sequence(path, tmp_path, [xs[0] for xs in sets])
    for k, (g, w) in enumerate(zip(got, want)):
        assert_outputs_match([g], w, "tflm", f"{path.name} invocation {k}")
    assert_outputs_match([again], want[0], "tflm", f"{path.name} after edgemem_reset")


@pytest.mark.parametrize("name", MODELS)
def test_state_bytes_are_reported_and_kept_outside_the_arena(name, tmp_path):
    import json

    path, project = build_for_host(_model(name), tmp_path)
    info = json.loads((project / "edgemem.json").read_text())
    assert info["state_bytes"] == sum(STATE_BYTES[name])
    assert sorted(v["bytes"] for v in info["variables"]) == sorted(STATE_BYTES[name])
    assert len(info["inputs"]) == 1 and len(info["outputs"]) == 1  # the kept values are not user inputs or outputs
    model_c = (project / "model.c").read_text()
    for k in range(len(STATE_BYTES[name])):
        assert f"em_var_{k}_reset" in model_c


def test_state_carries_across_invocations_under_qemu(tmp_path):
    """The firmware (arm-none-eabi-gcc, Cortex-M7, QEMU) invoked RUNS times in one run = TFLM invoked RUNS
    times: bit-exact for int8, within 1e-5 for float32."""
    if shutil.which("arm-none-eabi-gcc") is None or shutil.which("qemu-system-arm") is None:
        pytest.skip("no arm-none-eabi-gcc or qemu-system-arm")
    for name in MODELS:
        path = _model(name)
        project = tmp_path / name
        pipeline.build(path, "stm32f746", project, pipeline.BuildOptions(opt_seconds=0, schedule_seconds=0.5))
        result = device_run.run_sequence(project, _sets(path))
        assert len(result["invocations"]) == RUNS
        assert result["matches_reference"], (name, [(i["max_abs_diff"], i["status"]) for i in result["invocations"]])
        if name.endswith("int8"):
            assert all(i["bit_exact"] for i in result["invocations"])


def test_sequence_report_lines_are_parsed_and_checked():
    text = ("EDGEMEM invocation 0 output 0 0a0b\nEDGEMEM invocation 0 status=0\n"
            "EDGEMEM invocation 1 output 0 ff00\nEDGEMEM invocation 1 status=-3\nEDGEMEM end\n")  # fmt: skip
    report = parse_device_output(text, 0)
    assert report.invocations == [[b"\x0a\x0b"], [b"\xff\x00"]] and report.invocation_status == [0, -3]
    assert not report.errors
    assert parse_device_output("EDGEMEM invocation 1 output 0 00\nEDGEMEM invocation 1 status=0\n", 0).errors
    assert parse_device_output("EDGEMEM invocation 0 output 0 0g\n", 0).errors


# ------------------------------------------------------------ hand-made models


def _resource(mb, name: str) -> int:
    t = mb.tensor(name, (), np.int32)
    mb.tensors[t].ttype = mm.TT.RESOURCE
    return t


def _var_handle(mb, shared_name: str) -> int:
    def fn(b):
        name = b.CreateString(shared_name)
        container = b.CreateString("")
        mm.tflite.VarHandleOptionsStart(b)
        mm.tflite.VarHandleOptionsAddContainer(b, container)
        mm.tflite.VarHandleOptionsAddSharedName(b, name)
        return mm.tflite.VarHandleOptionsEnd(b)

    handle = _resource(mb, f"{shared_name}_handle")
    mb.op(mm.OP.VAR_HANDLE, [], [handle], mm.OPTS.VarHandleOptions, fn)
    return handle


def _call_once(init: int):
    def fn(b):
        mm.tflite.CallOnceOptionsStart(b)
        mm.tflite.CallOnceOptionsAddInitSubgraphIndex(b, init)
        return mm.tflite.CallOnceOptionsEnd(b)

    return mm.OPTS.CallOnceOptions, fn


def accumulator(initial: float | None = 1.5, computed_initial: bool = False, wrong_size: bool = False,
                read_only: bool = False) -> bytes:
    """y = x + acc; acc = y (a running sum kept in a variable). ``initial``: CALL_ONCE assigns it (None: no
    CALL_ONCE, the variable is read before anything initializes it); ``computed_initial``: the init subgraph
    computes the initial value with an ADD instead of assigning a constant; ``wrong_size``: the main subgraph
    also assigns it a tensor of 2 elements (TFLM only DCHECKs the size and would copy 16 bytes out of 8);
    ``read_only``: a second variable, an offset CALL_ONCE sets to 0.25 and nothing assigns again, is added too."""
    mb = mm.ModelBuilder(description="edgemem test: a running sum in a resource variable")
    x = mb.tensor("x", (1, 4), np.float32)
    if initial is not None:
        init = mb.subgraph("init")
        handle = _var_handle(init, "acc")
        value = init.const("acc_initial", np.full((1, 4), initial, np.float32))
        if computed_initial:
            summed = init.tensor("acc_sum", (1, 4), np.float32)
            init.op(mm.OP.ADD, [value, value], [summed], *mm.add_options())
            value = summed
        init.op(mm.OP.ASSIGN_VARIABLE, [handle, value], [])
        if read_only:
            init.op(mm.OP.ASSIGN_VARIABLE, [_var_handle(init, "offset"), init.const("offset_initial", np.full((1, 4), 0.25, np.float32))], [])
        mb.op(mm.OP.CALL_ONCE, [], [], *_call_once(1))
    handle = _var_handle(mb, "acc")
    acc = mb.tensor("acc", (1, 4), np.float32)
    mb.op(mm.OP.READ_VARIABLE, [handle], [acc])
    if read_only:
        offset = mb.tensor("offset", (1, 4), np.float32)
        mb.op(mm.OP.READ_VARIABLE, [_var_handle(mb, "offset")], [offset])
        shifted = mb.tensor("x_shifted", (1, 4), np.float32)
        mb.op(mm.OP.ADD, [x, offset], [shifted], *mm.add_options())
        x_in, x = x, shifted
    y = mb.tensor("y", (1, 4), np.float32)
    mb.op(mm.OP.ADD, [x, acc], [y], *mm.add_options())
    mb.op(mm.OP.ASSIGN_VARIABLE, [handle, y], [])
    if wrong_size:
        mb.op(mm.OP.ASSIGN_VARIABLE, [handle, mb.const("short", np.zeros((1, 2), np.float32))], [])
    return mb.serialize([x_in if read_only else x], [y])


@pytest.mark.parametrize("read_only", [False, True])
def test_handmade_accumulator_matches_tflm_on_the_host(read_only, tmp_path):
    """A running sum: every invocation's output is the sum of all inputs so far plus the initial value. With a
    read-only variable (``read_only``): it becomes a constant in flash, not state."""
    import json

    path = tmp_path / "acc.tflite"
    path.write_bytes(accumulator(read_only=read_only))
    sets = _sets(path, 4)
    want = tflm_sequence_outputs(path, sets)
    offset = 0.25 * len(sets) if read_only else 0.0
    np.testing.assert_allclose(want[-1][0], 1.5 + offset + sum(xs[0] for xs in sets), rtol=1e-5)  # the oracle runs it as meant
    info = json.loads((build_for_host(path, tmp_path / "info")[1] / "edgemem.json").read_text())
    assert [v["name"] for v in info["variables"]] == ["acc"] and info["state_bytes"] == 16
    assert info["weights_bytes"] == (16 if read_only else 0)
    got, again = run_in_sequence(path, tmp_path / "build", [xs[0] for xs in sets])
    for k, (g, w) in enumerate(zip(got, want)):
        assert_outputs_match([g], w, "tflm", f"invocation {k}")
    assert_outputs_match([again], want[0], "tflm", "after edgemem_reset")


@pytest.mark.parametrize("variant,message", [
    ({"initial": None}, "which no CALL_ONCE initializes"),
    ({"computed_initial": True}, "initial value at run time"),
    ({"wrong_size": True}, "a tensor of another type or size than its initial value"),
])  # fmt: skip
def test_unsupported_variable_forms_are_refused(variant, message, tmp_path):
    path = tmp_path / "acc.tflite"
    path.write_bytes(accumulator(**variant))
    with pytest.raises(UnsupportedModelError, match=message):
        build_for_host(path, tmp_path)
    cmd = [sys.executable, "-m", "edgemem.cli", "build", "--board", "stm32f746", str(path), "-o", str(tmp_path / "cli")]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 4, proc.stderr
    assert message in " ".join(proc.stderr.split()) and "Traceback" not in proc.stderr
    assert not (tmp_path / "cli").exists()


def test_converter_made_uninitialized_variables_are_refused(tmp_path):
    """Keras layers inside a tf.Module: the converter makes their weights variables its CALL_ONCE never initializes
    (TFLM reads memory nothing wrote: NaN); edgemem refuses the model (exit 4), naming the operator and the variable."""
    path = _model("stream-keras-uninitialized-float32")
    assert np.isnan(tflm_outputs(path, seeded_inputs(path, 0))[0]).all()  # why it is refused, not a hypothesis
    cmd = [sys.executable, "-m", "edgemem.cli", "build", "--board", "stm32f746", str(path), "-o", str(tmp_path / "cli")]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=300)
    message = " ".join(proc.stderr.split())
    assert proc.returncode == 4, proc.stderr
    assert "READ_VARIABLE" in message and "'conv1d/kernel'" in message and "which no CALL_ONCE initializes" in message
    assert "Traceback" not in proc.stderr and not (tmp_path / "cli").exists()


def test_input_outside_is_refused_with_variables(tmp_path):
    with pytest.raises(UnsupportedModelError, match="--input outside"):
        build_for_host(_model("stream-conv-float32"), tmp_path, input_outside=True)


def test_cli_run_invocations_compares_every_invocation(tmp_path):
    """`edgemem run PROJECT --invocations 4 --json`: four invocations in a row under QEMU, each bit-exact with TFLM
    invoked four times (int8); exit 0."""
    import json

    if shutil.which("arm-none-eabi-gcc") is None or shutil.which("qemu-system-arm") is None:
        pytest.skip("no arm-none-eabi-gcc or qemu-system-arm")
    project = tmp_path / "p"
    pipeline.build(_model("stream-conv-int8"), "stm32f746", project, pipeline.BuildOptions(opt_seconds=0, schedule_seconds=0.5))
    cmd = [sys.executable, "-m", "edgemem.cli", "run", str(project), "--invocations", "4", "--json"]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr
    res = json.loads(proc.stdout)
    assert [inv["invocation"] for inv in res["invocations"]] == [0, 1, 2, 3]
    assert all(inv["bit_exact"] and inv["status"] == 0 for inv in res["invocations"]) and res["matches_reference"]
