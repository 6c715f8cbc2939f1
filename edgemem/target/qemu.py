"""Run an edgemem firmware image under qemu-system-arm; its `EDGEMEM ...` report is read by
target/device_protocol.py."""

from __future__ import annotations

import shutil
import subprocess
import tempfile
import time
from pathlib import Path

from edgemem.board import Board
from edgemem.errors import DeviceError, ToolchainError, tail
from edgemem.target.device_protocol import DeviceReport, parse_device_output

QEMU = "qemu-system-arm"
APT_HINT = "apt-get install -y qemu-system-arm"


def qemu_args(board: Board, semihosting: bool = True) -> list[str]:
    """qemu-system-arm options for `board` (without -kernel); ``semihosting=False`` for a board image, which
    has none (it runs under QEMU only where QEMU's machine is that very board, netduinoplus2)."""
    q = board.qemu
    return [
        "-M", q.machine,
        "-cpu", q.cpu,
        "-nographic",
        "-monitor", "none",
        "-icount", f"shift={q.icount_shift},align=off,sleep=off",
    ] + (["-semihosting-config", "enable=on,target=native"] if semihosting else [])  # fmt: skip


def qemu_command(board: Board, elf_path: str | Path) -> list[str]:
    return [QEMU, *qemu_args(board), "-kernel", str(elf_path)]


def _device_error(message: str, report: DeviceReport | None) -> DeviceError:
    err = DeviceError(message)
    err.report = report  # type: ignore[attr-defined]
    return err


def run_firmware(
    elf_path: str | Path,
    board: Board,
    inputs: list[bytes],
    timeout_s: float = 60,
    *,
    check: bool = True,
    sequence: list[list[bytes]] | None = None,
) -> DeviceReport:
    """Run firmware.elf under QEMU with inputs[i] as the host file input<i>.bin; return the parsed report.
    ``sequence``: the inputs of N invocations in a row after the report's own runs (firmware/main.c: the files
    invocations.bin and s<k>_<i>.bin), whose outputs are the report's ``invocations``.

    Raises DeviceError (with the device output) on timeout, fault, error line, missing report or non-zero
    exit; with check=False only a timeout raises and the report carries whatever the device printed."""
    qemu = shutil.which(QEMU)
    if qemu is None:
        raise ToolchainError(f"{QEMU} not found on PATH: install QEMU with `{APT_HINT}`")
    elf = Path(elf_path).resolve()
    if not elf.is_file():
        raise ToolchainError(f"firmware image {elf} does not exist (build it first)")
    with tempfile.TemporaryDirectory(prefix="edgemem-qemu-") as tmp:
        for i, data in enumerate(inputs):
            (Path(tmp) / f"input{i}.bin").write_bytes(bytes(data))
        if sequence is not None:
            if len(sequence) >= 1_000_000:
                raise ValueError("a sequence of a million invocations or more")
            (Path(tmp) / "invocations.bin").write_bytes(len(sequence).to_bytes(4, "little"))
            for k, datas in enumerate(sequence):
                for i, data in enumerate(datas):
                    (Path(tmp) / f"s{k}_{i}.bin").write_bytes(bytes(data))
        cmd = [qemu, *qemu_args(board), "-kernel", str(elf)]
        try:
            # stdout and stderr on separate pipes: QEMU makes its stdout non-blocking, and the semihosting console
            # writes to stderr; sharing one pipe, a busy reader made QEMU drop console bytes (a cut output line).
            proc = subprocess.run(
                cmd,
                cwd=tmp,
                stdin=subprocess.DEVNULL,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                timeout=timeout_s,
            )
        except subprocess.TimeoutExpired as e:
            out = _console_text(e.stdout, e.stderr)
            raise _device_error(
                f"QEMU ({board.qemu.machine}, board {board.name}) did not finish within {timeout_s:g} s "
                f"(hung or locked up); command: {' '.join(cmd)}\ndevice output:\n{tail(out)}",
                parse_device_output(out, -1, board.name),
            ) from e
    text = _console_text(proc.stdout, proc.stderr)
    report = parse_device_output(text, proc.returncode, board.name)
    if not check:
        return report
    problems = list(report.errors)
    if "Lockup" in text:
        problems.append("the CPU locked up (a fault inside the fault handler)")
    if proc.returncode != 0:
        problems.append(f"exit code {proc.returncode}")
    if not report.finished:
        problems.append("no 'EDGEMEM end' line")
    if sequence is not None and len(report.invocations) != len(sequence):
        problems.append(f"{len(report.invocations)} invocation(s) reported where {len(sequence)} were asked for")
    if problems:
        raise _device_error(
            f"firmware run on {board.name} (QEMU {board.qemu.machine}) failed: {'; '.join(problems)}\n"
            f"command: {' '.join(cmd)}\ndevice output:\n{tail(text)}",
            report,
        )
    return report


def _console_text(stdout: bytes | str | None, stderr: bytes | str | None) -> str:
    """QEMU's two streams as one text: the serial port's (stdout) then the semihosting console and QEMU's own
    messages (stderr); the report's lines are parsed line by line, so their order across streams does not matter."""
    parts = [b if isinstance(b, str) else (b or b"").decode("utf-8", "replace") for b in (stdout, stderr)]
    return "".join(p if p.endswith("\n") or not p else p + "\n" for p in parts)


def _free_tcp_port() -> int:
    import socket

    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class QemuSerial:
    """QEMU running a profiling image with its serial port 0 on a local TCP socket.

    QEMU waits for the connection before the guest starts (server=on,wait=on), so the host never misses the
    first line. `url` is what pyserial opens (socket://127.0.0.1:PORT); use as a context manager."""

    def __init__(self, elf_path: str | Path, board: Board, timeout_s: float = 120.0, semihosting: bool = True):
        qemu = shutil.which(QEMU)
        if qemu is None:
            raise ToolchainError(f"{QEMU} not found on PATH: install QEMU with `{APT_HINT}`")
        self.elf = Path(elf_path).resolve()
        if not self.elf.is_file():
            raise ToolchainError(f"firmware image {self.elf} does not exist (build it first)")
        self.board = board
        self.timeout_s = timeout_s
        self.port = _free_tcp_port()
        self.url = f"socket://127.0.0.1:{self.port}"
        self.cmd = [qemu, *qemu_args(board, semihosting), "-serial", f"tcp:127.0.0.1:{self.port},server=on,wait=on",
                    "-kernel", str(self.elf)]  # fmt: skip
        self.proc: subprocess.Popen | None = None
        self._tmp: tempfile.TemporaryDirectory | None = None

    def __enter__(self) -> "QemuSerial":
        self._tmp = tempfile.TemporaryDirectory(prefix="edgemem-qemu-")
        # separate pipes, as in run_firmware: a shared pipe, non-blocking after QEMU's start, drops console bytes
        self.proc = subprocess.Popen(self.cmd, cwd=self._tmp.name, stdin=subprocess.DEVNULL,
                                     stdout=subprocess.PIPE, stderr=subprocess.PIPE)  # fmt: skip
        return self

    def connect(self, baud: int = 115200, wait_s: float = 10.0):
        """Open the UART socket with pyserial once QEMU listens on it."""
        import serial

        deadline = time.monotonic() + wait_s
        while True:
            try:
                return serial.serial_for_url(self.url, baudrate=baud, timeout=0.1, write_timeout=2)
            except serial.SerialException as e:
                if self.proc is not None and self.proc.poll() is not None:
                    out = _console_text(*self.proc.communicate())
                    raise DeviceError(f"QEMU exited ({self.proc.returncode}) before its serial port opened; "
                                      f"command: {' '.join(self.cmd)}\n{tail(out)}") from e  # fmt: skip
                if time.monotonic() > deadline:
                    raise DeviceError(f"QEMU's serial socket {self.url} did not open within {wait_s:g} s; "
                                      f"command: {' '.join(self.cmd)}") from e  # fmt: skip
                time.sleep(0.05)

    def finish(self, timeout_s: float = 10.0) -> tuple[int, str]:
        """Wait for QEMU to exit (the firmware exits after its report); its exit code and console output."""
        assert self.proc is not None
        try:
            out = _console_text(*self.proc.communicate(timeout=timeout_s))
        except subprocess.TimeoutExpired:
            self.proc.kill()
            return -1, _console_text(*self.proc.communicate())
        return self.proc.returncode, out

    def __exit__(self, *exc) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.kill()
            self.proc.communicate()
        if self._tmp is not None:
            self._tmp.cleanup()
