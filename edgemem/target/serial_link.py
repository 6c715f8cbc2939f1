"""The device's report over a serial port, read with pyserial.

One code path for a real board (`/dev/ttyACM0`, or any pyserial URL) and for QEMU, whose UART is a TCP
socket (`socket://127.0.0.1:PORT`). The firmware prints "EDGEMEM ready" and waits for one byte; the host
sends it (again every second until the device begins, so a board that was already waiting starts too),
then collects lines until "EDGEMEM end". Every line ends in " *hh", the XOR of its bytes: a line garbled or
cut short in transit fails the check and is dropped, and reading resynchronises at the next newline.
"""

from __future__ import annotations

import re
import time
from collections.abc import Callable
from dataclasses import dataclass, field

import serial

from edgemem.errors import DeviceError

DEFAULT_BAUD = 115200
_MAX_LINE = 1 << 20  # bytes without a newline before the buffer is dropped as garbage
_CHECKED = re.compile(rb"^(.*) \*([0-9a-f]{2})$")


@dataclass
class SerialTranscript:
    """The checked EDGEMEM lines of one report, and what was dropped on the way."""

    lines: list[str] = field(default_factory=list)
    dropped: int = 0  # lines that failed the checksum (garbage, partial or corrupted)
    finished: bool = False  # saw "EDGEMEM end"

    @property
    def text(self) -> str:
        return "\n".join(self.lines) + ("\n" if self.lines else "")


def checked_line(raw: bytes) -> str | None:
    """The payload of a line whose checksum holds, else None."""
    m = _CHECKED.match(raw.rstrip(b"\r"))
    if m is None:
        return None
    payload, digest = m.group(1), int(m.group(2), 16)
    x = 0
    for b in payload:
        x ^= b
    if x != digest:
        return None
    try:
        return payload.decode("ascii")
    except UnicodeDecodeError:
        return None


def open_port(url: str, baud: int = DEFAULT_BAUD) -> serial.SerialBase:
    """Open a serial port or pyserial URL; a clear DeviceError when it cannot be opened."""
    try:
        return serial.serial_for_url(url, baudrate=baud, timeout=0.1, write_timeout=2)
    except (serial.SerialException, ValueError, OSError) as e:
        raise DeviceError(
            f"cannot open serial port '{url}': {e}. Check that the board is connected and the port name is right "
            "(ls /dev/ttyACM* /dev/ttyUSB*), that no other program holds it, and that you may use it (group dialout)."
        ) from e


def _summary(t: SerialTranscript, received: int) -> str:
    if received == 0:
        return "the device sent nothing at all"
    tail = "\n".join(t.lines[-5:]) or "(no valid line)"
    return f"received {received} bytes, {len(t.lines)} valid lines, {t.dropped} dropped; last lines:\n{tail}"


def read_report(port: serial.SerialBase, *, timeout_s: float = 60.0, idle_s: float | None = None,
                where: str = "", on_line: Callable[[str], None] | None = None) -> SerialTranscript:
    """Send the start byte and read the device's report until "EDGEMEM end" (or a fault/error line); ``on_line``
    (if given) sees each checked line as it arrives (the CLI's progress).

    Raises DeviceError when the whole report takes longer than timeout_s, when nothing arrives for idle_s
    seconds (default: timeout_s), or when the connection closes first."""
    hint = ("Check that the firmware is a profiling build (`edgemem build --profile`) or a board image, that it is "
            "flashed and running, and the baud rate; reset the board and retry.")  # fmt: skip
    return _collect(port, "EDGEMEM end", timeout_s, idle_s, where, start=True, hint=hint, on_line=on_line)


def run_request(port: serial.SerialBase, inputs: bytes, *, timeout_s: float = 60.0, where: str = "") -> SerialTranscript:
    """After the report: send one inference request (every input's bytes, in order) and read the reply until
    "EDGEMEM done" (finished) or an error/fault line (see firmware/main.c, em_serve)."""
    x = 0
    for b in inputs:
        x ^= b
    _write(port, b"R" + inputs.hex().encode("ascii") + b" %02x\n" % x, _where(port, where))
    hint = "Check that the firmware on the board belongs to this build directory; reset the board and retry."
    return _collect(port, "EDGEMEM done", timeout_s, None, where, start=False, hint=hint)


def end_session(port: serial.SerialBase, where: str = "") -> None:
    """Tell the device that the host is done: it leaves its request loop (QEMU exits, a board idles)."""
    _write(port, b"Q", _where(port, where))


def _where(port, where: str) -> str:
    return where or getattr(port, "name", None) or getattr(port, "port", "") or "the serial port"


def _collect(port: serial.SerialBase, until: str, timeout_s: float, idle_s: float | None, where: str, *,
             start: bool, hint: str, on_line: Callable[[str], None] | None = None) -> SerialTranscript:
    """Checked lines until one starts with ``until`` (finished) or is an error/fault line; with ``start``, the
    start byte is sent every second until the device begins."""
    where = _where(port, where)
    idle_s = timeout_s if idle_s is None else idle_s
    t = SerialTranscript()
    buf = b""
    received = 0
    started = not start
    begin = last_data = time.monotonic()
    last_go = -1e9
    while True:
        now = time.monotonic()
        if now - begin > timeout_s or now - last_data > idle_s:
            what = "never answered" if received == 0 else "stopped before the end of its report"
            raise DeviceError(
                f"the device on {where} {what} within {timeout_s if now - begin > timeout_s else idle_s:g} s "
                f"({_summary(t, received)}). {hint}"
            )
        if not started and now - last_go >= 1.0:
            _write(port, b"g", where)
            last_go = now
        chunk = _read(port, where, t, received)
        if chunk:
            received += len(chunk)
            last_data = time.monotonic()
            buf += chunk
        *complete, buf = buf.split(b"\n")
        if len(buf) > _MAX_LINE:
            buf, t.dropped = b"", t.dropped + 1
        for raw in complete:
            line = checked_line(raw)
            if line is None:
                t.dropped += 1 if raw.strip() else 0
                continue
            t.lines.append(line)
            if on_line is not None:
                on_line(line)
            started = started or line.startswith("EDGEMEM begin")
            if line.startswith(until):
                t.finished = True
                return t
            if line.startswith(("EDGEMEM fault", "EDGEMEM error")):
                return t


def _write(port: serial.SerialBase, data: bytes, where: str) -> None:
    try:
        port.write(data)
        port.flush()
    except (serial.SerialException, OSError) as e:
        raise DeviceError(f"the serial connection to {where} failed while sending: {e}") from e


def _read(port: serial.SerialBase, where: str, t: SerialTranscript, received: int) -> bytes:
    try:
        return port.read(max(1, port.in_waiting))
    except (serial.SerialException, OSError) as e:
        raise DeviceError(
            f"the serial connection to {where} closed before the report ended ({e}; {_summary(t, received)}). "
            "The device reset, was unplugged or crashed; reconnect and retry."
        ) from e
