"""Build and run a generated model on the host (gcc or clang), e.g. under AddressSanitizer + UBSan.

The host build compiles the project's model sources (model.c, weights.c, kernels.c) with a small `main`
(templates/host_main.c.j2) that reads input<i>.bin and writes output<i>.bin. The firmware runtime (startup,
semihosting, linker script) is left out. Pools are linker-placed sections on the device; here the section
attribute is dropped from a copy of model.c so the pools are ordinary globals on every host object format, and
a sanitizer puts its redzones around each of them.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path

from edgemem.codegen.library import MODEL_HEADERS, MODEL_SOURCES, without_sections
from edgemem.codegen.templates import render
from edgemem.errors import DeviceError, ToolchainError, tail

HOST_COMPILERS = ("gcc", "clang")
APT_HINT = "apt-get install -y gcc clang"

WARNING_FLAGS = ("-std=c11", "-Wall", "-Wextra", "-Werror")
SANITIZE_FLAGS = ("-fsanitize=address,undefined", "-fno-sanitize-recover=all", "-fno-omit-frame-pointer")
# Every sanitizer finding ends the process with a non-zero exit code; leaks cannot happen (no heap).
SANITIZER_ENV = {
    "ASAN_OPTIONS": "halt_on_error=1:detect_leaks=0:abort_on_error=0:exitcode=86",
    "UBSAN_OPTIONS": "halt_on_error=1:print_stacktrace=1:exitcode=87",
}
SANITIZER_MARKERS = ("ERROR: AddressSanitizer", "runtime error:", "ERROR: UndefinedBehaviorSanitizer")

# `__attribute__((section(".edgemem_arena.x"), aligned(16)))` -> `__attribute__((aligned(16)))`


@dataclass
class HostRun:
    outputs: list[bytes]
    stderr: str


def host_compiler(name: str | None = None) -> str:
    """Path of the C compiler to use: `name` if given, else $CC, else the first of gcc, clang on PATH."""
    candidates = [name] if name else ([os.environ["CC"]] if os.environ.get("CC") else list(HOST_COMPILERS))
    for cand in candidates:
        path = shutil.which(cand)
        if path:
            return path
    raise ToolchainError(
        f"no host C compiler found (looked for {', '.join(candidates)} on PATH); the host build of a generated model "
        f"needs one. Install it with `{APT_HINT}` (or set CC)."
    )


def write_host_sources(project: str | Path, dest: str | Path) -> list[Path]:
    """Copy the model sources of a generated project into `dest`, with the host main; returns the .c files."""
    project, dest = Path(project), Path(dest)
    missing = [f for f in (*MODEL_SOURCES, *MODEL_HEADERS) if not (project / f).is_file()]
    if missing:
        raise ToolchainError(f"'{project}' is not a generated edgemem project (missing {', '.join(missing)}); run `edgemem build` first.")
    dest.mkdir(parents=True, exist_ok=True)
    for name in (*MODEL_SOURCES, *MODEL_HEADERS):
        text = (project / name).read_text()
        if name == "model.c":
            text = without_sections(text)
        (dest / name).write_text(text)
    (dest / "host_main.c").write_text(render("host_main.c.j2", model_name=project.name))
    return [dest / f for f in (*MODEL_SOURCES, "host_main.c")]



def build_host(
    project: str | Path,
    dest: str | Path,
    *,
    cc: str | None = None,
    sanitize: bool = True,
    opt: str = "-O1",
    extra_flags: tuple[str, ...] = (),
    timeout: float = 600.0,
) -> Path:
    """Compile the project's model for the host into dest/host_model (warnings are errors); returns its path."""
    compiler = host_compiler(cc)
    sources = write_host_sources(project, dest)
    exe = Path(dest) / "host_model"
    flags = [*WARNING_FLAGS, opt, "-g", *(SANITIZE_FLAGS if sanitize else ()), *extra_flags]
    cmd = [compiler, *flags, *map(str, sources), "-lm", "-o", str(exe)]
    try:
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, stdin=subprocess.DEVNULL)
    except subprocess.TimeoutExpired as e:
        raise ToolchainError(f"compiling {project} for the host with {compiler} took longer than {timeout:.0f} s.") from e
    if proc.returncode != 0:
        raise ToolchainError(
            f"compiling {project} for the host failed ({Path(compiler).name} exit {proc.returncode}, flags "
            f"{' '.join(flags)}):\n{tail(proc.stderr or proc.stdout, 6000)}"
        )
    return exe


def run_host(exe: str | Path, inputs: list[bytes], output_bytes: list[int], *, timeout: float = 300.0) -> HostRun:
    """Run a host build on `inputs` (raw bytes per input) in its own directory; returns the raw outputs.
    Raises DeviceError with the program's stderr on a non-zero exit, a sanitizer report or a timeout."""
    exe = Path(exe).resolve()
    workdir = exe.parent
    for i, data in enumerate(inputs):
        (workdir / f"input{i}.bin").write_bytes(data)
    for stale in workdir.glob("output*.bin"):
        stale.unlink()
    env = {**os.environ, **SANITIZER_ENV}
    try:
        proc = subprocess.run([str(exe), str(workdir)], capture_output=True, text=True, timeout=timeout, env=env,
                              stdin=subprocess.DEVNULL)  # fmt: skip
    except subprocess.TimeoutExpired as e:
        raise DeviceError(f"the host build {exe} did not finish within {timeout:.0f} s.") from e
    report = next((m for m in SANITIZER_MARKERS if m in proc.stderr), None)
    if proc.returncode != 0 or report:
        what = f"a sanitizer reported '{report}'" if report else f"it exited with code {proc.returncode}"
        raise DeviceError(f"the host build {exe} failed: {what}. Its stderr:\n{tail(proc.stderr, 6000)}")
    outputs = [(workdir / f"output{i}.bin").read_bytes() for i in range(len(output_bytes))]
    for i, (raw, n) in enumerate(zip(outputs, output_bytes)):
        if len(raw) != n:
            raise DeviceError(f"the host build {exe} wrote {len(raw)} bytes for output {i}, expected {n}.")
    return HostRun(outputs, proc.stderr)
