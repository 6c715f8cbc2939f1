"""On-device profiling over serial (issue 6).

The firmware of a profiling build reports per step over its UART; the host reads it with pyserial. Under
QEMU the UART is a TCP socket, read through the same pyserial code as a board's USB serial port. The
oracles: the planner's per-step prediction (independent of the device's painting measurement) and TFLite
Micro for the outputs. The serial reader is also driven by fake devices (a TCP server playing a script)
that send garbage, cut lines, nothing at all, or hang up.
"""

from __future__ import annotations

import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

import numpy as np
import pytest

from edgemem import device_run, pipeline, profiling
from edgemem.errors import DeviceError
from edgemem.reference import seeded_inputs, tflm_outputs
from edgemem.target.serial_link import checked_line, open_port, read_report

ROOT = Path(__file__).resolve().parents[1]
MODELS = ROOT.parent / "shared" / "models"
EXAMPLE = ROOT / "examples" / "kws_tiny_int8.tflite"


def _kws_model() -> Path:
    path = MODELS / "mlperf_kws_dscnn_int8.tflite"
    if not path.is_file():
        pytest.skip(f"{path} is not here (the shared models live next to the repository)")
    return path


def test_profile_kws_under_qemu_matches_plan_per_step(tmp_path):
    model = _kws_model()
    result = pipeline.build(model, "stm32f746", tmp_path / "p", pipeline.BuildOptions(profile=True))
    res = profiling.profile(tmp_path / "p", timeout_s=120)
    assert res["source"].startswith("QEMU") and "socket://" in res["source"]  # read through pyserial
    steps = res["steps"]
    assert len(steps) == len(result.schedule.order) == result.info["ops"]
    # The planner's prediction, recomputed here from the plan (not from the report): the highest planned
    # byte of every tensor that exists by the end of each step.
    ends = {n: p.offset + result.graph.tensors[n].nbytes for n, p in result.plan.placements.items()}
    produced_at = {result.graph.ops[op].output: s for s, op in enumerate(result.schedule.order)}
    produced_at.update({result.graph.ops[op].workspace: s for s, op in enumerate(result.schedule.order)})
    for row in steps:
        expected = max(end for n, end in ends.items() if produced_at.get(n, -1) <= row["step"])
        assert row["measured_high_water_bytes"] == row["predicted_high_water_bytes"] == expected, row
        assert row["pools_match"] and row["ticks"] > 0
    assert res["arena_high_water_bytes"] == result.info["arena_bytes"] == steps[-1]["measured_high_water_bytes"]
    assert res["arena_matches_plan"]
    # Outputs: the embedded seed-0 input, compared with TFLM computed here.
    reference = tflm_outputs(model, seeded_inputs(model, 0))
    assert res["bit_exact"] and res["max_abs_diff"] == 0 and len(reference) == 1
    assert Path(res["saved_to"]).is_file()


@pytest.mark.parametrize("board", ["mps2-an385", "netduinoplus2", "bbc-microbit"])  # M3 CMSDK UART, M4 STM32 USART, M0 nRF51 UART
def test_profile_cli_and_plain_run_refused(tmp_path, board):
    out = tmp_path / "p"
    pipeline.build(EXAMPLE, board, out, pipeline.BuildOptions(profile=True))
    with pytest.raises(Exception, match="profiling build"):
        device_run.run(out)
    proc = subprocess.run([sys.executable, "-m", "edgemem.cli", "profile", str(out), "--json"],
                          capture_output=True, text=True, timeout=180)  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    assert '"arena_matches_plan": true' in proc.stdout and '"bit_exact": true' in proc.stdout


def test_profile_refuses_a_normal_build(tmp_path):
    pipeline.build(EXAMPLE, "stm32f746", tmp_path / "p", pipeline.BuildOptions(compile=False))
    with pytest.raises(Exception, match="not a profiling build"):
        profiling.profile(tmp_path / "p")


# ---------------------------------------------------------------- the serial reader against fake devices


def _line(text: str) -> bytes:
    x = 0
    for b in text.encode():
        x ^= b
    return f"{text} *{x:02x}\n".encode()


REPORT = [_line(s) for s in (
    "EDGEMEM ready", "EDGEMEM begin board=fake", "EDGEMEM output 0 0102ff", "EDGEMEM step 0 ticks=5 stack=8 hw=16",
    "EDGEMEM stat arena_high_water_bytes=16", "EDGEMEM end",
)]  # fmt: skip


class FakeDevice:
    """A TCP server that waits for the host's start byte, then plays `script` (bytes, or a float: sleep)
    and finally hangs up or stays connected but silent."""

    def __init__(self, script: list, hang_up: bool = True):
        self.script, self.hang_up = script, hang_up
        self.server = socket.create_server(("127.0.0.1", 0))
        self.url = f"socket://127.0.0.1:{self.server.getsockname()[1]}"
        self.done = threading.Event()
        self.thread = threading.Thread(target=self._serve, daemon=True)
        self.thread.start()

    def _serve(self) -> None:
        conn, _ = self.server.accept()
        with conn:
            conn.settimeout(10)
            try:
                conn.recv(1)  # the start byte
                for item in self.script:
                    if isinstance(item, float):
                        time.sleep(item)
                    else:
                        conn.sendall(item)
                if not self.hang_up:
                    self.done.wait(30)
            except OSError:
                pass
        self.server.close()

    def close(self) -> None:
        self.done.set()


def _read(script: list, *, hang_up: bool = True, timeout_s: float = 3.0):
    dev = FakeDevice(script, hang_up)
    port = open_port(dev.url)
    t0 = time.monotonic()
    try:
        return read_report(port, timeout_s=timeout_s, where="fake"), time.monotonic() - t0
    finally:
        port.close()
        dev.close()


def test_checksum_accepts_only_intact_lines():
    assert checked_line(_line("EDGEMEM end").rstrip(b"\n")) == "EDGEMEM end"
    assert checked_line(b"EDGEMEM end *00") is None  # wrong digest
    assert checked_line(_line("EDGEMEM stat ticks=123456")[:-9] + b" *" + _line("x")[-3:-1]) is None
    assert checked_line(b"EDGEMEM end") is None  # no digest at all


def test_reader_resynchronises_after_garbage_and_cut_lines():
    cut = _line("EDGEMEM stat ticks=123456")[:14]  # a line cut short: the rest never arrives
    script = [b"\x00\xffboot noise\r\n", cut, b"\n", REPORT[0], b"#$%^garbage *zz\n", *REPORT[1:]]
    transcript, _ = _read(script)
    assert transcript.finished and transcript.dropped == 3
    assert transcript.lines == [r.decode().rsplit(" *", 1)[0] for r in REPORT]


def test_garbage_only_device_ends_with_a_clear_message_within_the_timeout():
    with pytest.raises(DeviceError, match="(?s)stopped before the end of its report.*0 valid lines, \\d+ dropped"):
        _read([b"noise\n" * 50, b"\x00" * 100], hang_up=False, timeout_s=2.0)


def test_truncated_report_then_silence_times_out_clearly():
    t0 = time.monotonic()
    with pytest.raises(DeviceError, match="(?s)stopped before the end.*EDGEMEM step 0"):
        _read([*REPORT[:4], b"EDGEMEM stat arena_hi"], hang_up=False, timeout_s=2.0)
    assert time.monotonic() - t0 < 10


def test_silent_device_is_reported_as_never_answering():
    t0 = time.monotonic()
    with pytest.raises(DeviceError, match="(?s)never answered.*sent nothing at all"):
        _read([], hang_up=False, timeout_s=1.5)
    assert time.monotonic() - t0 < 10


def test_closed_connection_is_reported():
    with pytest.raises(DeviceError, match="closed before the report ended"):
        _read([*REPORT[:3]], hang_up=True, timeout_s=5.0)


def test_loop_url_without_a_device_times_out():
    # pyserial's loop:// echoes the start byte back: bytes arrive, but never a valid line
    port = open_port("loop://")
    try:
        with pytest.raises(DeviceError, match="0 valid lines"):
            read_report(port, timeout_s=1.0, where="loop://")
    finally:
        port.close()


def test_unopenable_port_gives_the_port_name():
    with pytest.raises(DeviceError, match="cannot open serial port '/dev/edgemem-no-such-port'"):
        open_port("/dev/edgemem-no-such-port")


def test_reports_parse_into_steps():
    from edgemem.target.qemu import parse_device_output

    transcript, _ = _read(REPORT)
    report = parse_device_output(transcript.text, 0)
    assert report.finished and report.outputs == [bytes([1, 2, 255])]
    assert report.steps == [{"step": 0, "ticks": 5, "stack_bytes": 8, "high_water_bytes": [16]}]
    assert np.frombuffer(report.outputs[0], np.int8).tolist() == [1, 2, -1]


# ---------------------------------------------------------------- reports that cannot be the build's: exit 7


@pytest.fixture(scope="module")
def profiling_build(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("fakeprof") / "p"
    pipeline.build(EXAMPLE, "mps2-an386", out, pipeline.BuildOptions(profile=True, compile=False, opt_seconds=0))
    return out


def _honest_report(project: Path, **change) -> list[bytes]:
    """The report the firmware of ``project`` would send (its plan's per-step figures, TFLM's outputs for the
    build's seeded input); ``change``: output hex, extra stats or a step's stack replaced."""
    from edgemem.build_info import load_build_info

    info = load_build_info(project)
    pred = info.profile
    outputs = change.get("outputs")
    if outputs is None:
        ref = tflm_outputs(EXAMPLE, seeded_inputs(EXAMPLE, pred["seed"]))
        outputs = [np.asarray(r).tobytes().hex() for r in ref]
    lines = ["EDGEMEM ready", "EDGEMEM begin board=mps2-an386"]
    lines += [f"EDGEMEM output {i} {h}" for i, h in enumerate(outputs)]
    for s in pred["steps"]:
        stack = change.get("step_stack", 200) if s["step"] == 0 else 200
        lines.append(f"EDGEMEM step {s['step']} ticks=10 stack={stack} hw={','.join(map(str, s['high_water_bytes']))}")
    stats = {"arena_high_water_bytes": info.arena_bytes, "stack_peak_bytes": 300, "stack_size_bytes": 16384,
             **change.get("stats", {})}  # fmt: skip
    lines += [f"EDGEMEM stat {k}={v}" for k, v in stats.items()] + ["EDGEMEM end"]
    return [_line(x) for x in lines]


def _profile_cli(project: Path, script: list[bytes]) -> subprocess.CompletedProcess:
    dev = FakeDevice(script, hang_up=False)
    try:
        return subprocess.run([sys.executable, "-m", "edgemem.cli", "profile", str(project), "--port", dev.url,
                               "--timeout", "20", "--save", str(project.parent / "profile.json")],
                              capture_output=True, text=True, timeout=120, cwd=ROOT)  # fmt: skip
    finally:
        dev.close()


def test_fake_device_with_an_honest_report_profiles_bit_exact(profiling_build):
    """The control for the three below: the fake device's honest report passes, bit-exact, exit 0."""
    p = _profile_cli(profiling_build, _honest_report(profiling_build))
    assert p.returncode == 0, p.stderr
    assert "bit-exact" in p.stdout


@pytest.mark.parametrize("change, phrase", [
    ({"outputs": []}, "0 output line(s) where the model has 1"),  # before: zip() compared nothing, "bit-exact"
    ({"outputs": ["0102"]}, "output 0 has 2 bytes where the model's has 4"),  # before: a reshape traceback
    ({"stats": {"stack_peak_bytes": -4}}, "stack_peak_bytes=-4 is negative"),  # before: accepted
    ({"step_stack": 10**9}, "step 0 stack 1,000,000,000 B beyond"),  # before: accepted
    ({"stats": {"bss_bytes": 10**12}}, "bss_bytes=1,000,000,000,000 beyond the board's"),  # before: accepted
])  # fmt: skip
def test_a_report_that_cannot_be_the_builds_exits_7(profiling_build, change, phrase):
    p = _profile_cli(profiling_build, _honest_report(profiling_build, **change))
    assert p.returncode == DeviceError.exit_code == 7, p.stdout + p.stderr
    assert "Traceback" not in p.stderr and phrase in " ".join(p.stderr.split()), p.stderr
    assert "bit-exact" not in p.stdout
