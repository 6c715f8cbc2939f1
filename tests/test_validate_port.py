"""`edgemem validate --port`: inputs go to the device over its serial port, outputs come back, each run is
compared with TFLite Micro (the oracle computed in the host process).

No hardware here: the devices are QEMU running a UART build with its serial port on a TCP socket (pyserial's
socket://, the code path of a board's /dev/ttyACM0), the netduinoplus2 board image (its real USART1, QEMU
models that board), and fake devices for the failures.
"""

from __future__ import annotations

import shutil
import sys
import time
from pathlib import Path

import numpy as np
import pytest

from edgemem import build_info, pipeline
from edgemem.board import load_board
from edgemem.errors import DeviceError
from edgemem.target.qemu import QemuSerial
from edgemem.target.serial_link import read_report, run_request
from edgemem.validation import validate

pytest.importorskip("tflite_micro")
ROOT = Path(__file__).resolve().parents[1]
EXAMPLE = ROOT / "examples" / "kws_tiny_int8.tflite"
sys.path.insert(0, str(Path(__file__).resolve().parent))
from test_profile import FakeDevice, _line  # noqa: E402

needs_tools = pytest.mark.skipif(shutil.which("arm-none-eabi-gcc") is None or shutil.which("qemu-system-arm") is None,
                                 reason="arm-none-eabi-gcc or qemu-system-arm not installed")  # fmt: skip


@pytest.fixture(scope="module")
def uart_build(tmp_path_factory):
    """A profiling build for the Cortex-M4 stand-in: its firmware reports over the CMSDK UART, then serves."""
    out = tmp_path_factory.mktemp("val") / "p"
    pipeline.build(EXAMPLE, "mps2-an386", out, pipeline.BuildOptions(opt_seconds=0, profile=True))
    return out


@needs_tools
def test_validate_over_the_uart_socket_is_bit_exact(uart_build):
    with QemuSerial(uart_build / "firmware.elf", load_board("mps2-an386"), 60) as q:
        q.connect().close()  # QEMU starts the guest once something connected; validate reconnects below
        report = validate(uart_build, 4, first_seed=3, port=q.url, timeout_s=60)
        code, _ = q.finish(20)
    assert report["device"].startswith("serial socket://") and report["count"] == 4
    assert report["bit_exact_count"] == 4 and report["all_match"]
    assert [r["seed"] for r in report["runs"]] == [3, 4, 5, 6]
    assert code == 0  # the firmware left its request loop on 'Q' and exited


@needs_tools
def test_malformed_requests_are_refused_and_the_next_one_runs(uart_build):
    info = build_info.load_build_info(uart_build)
    n = sum(int(np.prod(spec["shape"])) * np.dtype(spec["dtype"]).itemsize for spec in info["inputs"])
    with QemuSerial(uart_build / "firmware.elf", load_board("mps2-an386"), 60) as q:
        link = q.connect()
        try:
            assert read_report(link, timeout_s=60).finished
            for payload, why in [(b"R" + b"00" * n + b" 01\n", "checksum"), (b"R" + b"00" * (n - 1) + b"\n", "short"),
                                 (b"R" + b"0g" + b"00" * (n - 1) + b" 00\n", "digit")]:  # fmt: skip
                link.write(payload)
                reply = _reply(link)
                assert reply == f"EDGEMEM error request {why}", reply
            done = run_request(link, bytes(n), timeout_s=30)
            assert done.finished and done.lines[-1] == "EDGEMEM done status=0"
            link.write(b"Q")
        finally:
            link.close()
        assert q.finish(20)[0] == 0


def _reply(link) -> str:
    from edgemem.target.serial_link import checked_line

    buf, deadline = b"", time.monotonic() + 30
    while time.monotonic() < deadline:
        buf += link.read(256)
        *lines, buf = buf.split(b"\n")
        for raw in lines:  # the first intact line (the end of the report may leave an empty one)
            if checked_line(raw):
                return checked_line(raw)
    return "timeout"


@needs_tools
def test_netduinoplus2_board_image_validates_over_its_usart(tmp_path):
    pipeline.build(EXAMPLE, "netduinoplus2", tmp_path / "p", pipeline.BuildOptions(opt_seconds=0))
    with QemuSerial(tmp_path / "p" / "board" / "firmware.elf", load_board("netduinoplus2"), 60, semihosting=False) as q:
        q.connect().close()
        report = validate(tmp_path / "p", 3, port=q.url, timeout_s=60)
    assert report["bit_exact_count"] == 3 and report["all_match"]


# -- fake devices ------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def plain_build(tmp_path_factory):
    out = tmp_path_factory.mktemp("val") / "q"
    pipeline.build(EXAMPLE, "mps2-an386", out, pipeline.BuildOptions(opt_seconds=0, compile=False))
    return out


REPORT = [_line(s) for s in ("EDGEMEM ready", "EDGEMEM begin board=mps2-an386", "EDGEMEM end")]


def test_a_device_that_never_answers_a_request_times_out_clearly(plain_build):
    dev = FakeDevice(REPORT, hang_up=False)
    t0 = time.monotonic()
    try:
        with pytest.raises(DeviceError, match="never answered within 2 s"):
            validate(plain_build, 1, port=dev.url, timeout_s=2)
    finally:
        dev.close()
    assert time.monotonic() - t0 < 10


def test_wrong_outputs_from_the_device_are_a_mismatch(plain_build):
    info = build_info.load_build_info(plain_build)
    spec = info["outputs"][0]
    wrong = "7f" * (int(np.prod(spec["shape"])) * np.dtype(spec["dtype"]).itemsize)
    dev = FakeDevice(REPORT + [0.3, _line(f"EDGEMEM output 0 {wrong}"), _line("EDGEMEM done status=0")], hang_up=False)
    try:
        report = validate(plain_build, 1, port=dev.url, timeout_s=5)
    finally:
        dev.close()
    assert not report["all_match"] and report["runs"][0]["max_abs_diff"] > 0


def test_a_device_that_hangs_up_mid_run_is_reported(plain_build):
    dev = FakeDevice(REPORT + [0.2], hang_up=True)
    with pytest.raises(DeviceError, match="closed|never answered"):
        validate(plain_build, 2, port=dev.url, timeout_s=3)
