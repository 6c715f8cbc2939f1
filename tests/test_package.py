"""Issue 32: `pip install .` (not editable) gives a tool that builds from any directory.

A copy of the package's sources is installed with `pip install` (not editable, pip's usual isolated build, which
runs setup.py's hook) into a fresh virtual environment; the copy is then deleted, and only after the install the
venv is pointed at the running environment's site-packages (a plain path in a .pth file: the heavy dependencies,
TVM and TFLite Micro, are not downloaded again, and the editable install's import hook there is not run). Its
`edgemem` command is run from an unrelated temporary directory, where neither the checkout nor its templates/,
firmware/ and boards/ can be reached: it lists the boards, builds the example for mps2-an385 and runs it bit-exact
(judged against TFLite Micro by the installed tool's own comparison), and builds a real board's image (the drivers
of firmware/drivers/ and the board_init template). The generated projects must not point back into the
installation: they are rebuilt with `make` after the venv is gone.

The sdist route (`python -m build`: MANIFEST.in, then the wheel from the unpacked sdist) must ship the same files.
"""

from __future__ import annotations

import json
import shutil
import site
import subprocess
import sys
import tarfile
import venv
import zipfile
from pathlib import Path

from edgemem.target.toolchain import env_without_outer_make

ROOT = Path(__file__).resolve().parents[1]
EXAMPLE = ROOT / "examples" / "kws_tiny_int8.tflite"
DATA_DIRS = ("templates", "firmware", "boards")
# What a source distribution needs (MANIFEST.in); tests, examples and benchmarks are not part of the package.
PACKAGE_SOURCES = ("pyproject.toml", "setup.py", "MANIFEST.in", "README.md", "edgemem", *DATA_DIRS)
# What a project holds as text (Makefile; sources; linker script, map, stack-usage and call-graph files; reports).
TEXT_SUFFIXES = ("", ".c", ".h", ".ld", ".map", ".su", ".ci", ".json", ".txt", ".md", ".html")
PIP = [sys.executable, "-m", "pip", "--disable-pip-version-check"]


def _copy_sources(dest: Path) -> Path:
    dest.mkdir()
    for name in PACKAGE_SOURCES:
        src = ROOT / name
        if src.is_dir():
            shutil.copytree(src, dest / name, ignore=shutil.ignore_patterns("__pycache__", "*.pyc", "_data"))
        elif src.is_file():  # a missing one (setup.py, MANIFEST.in) fails below, by what the package lacks
            shutil.copyfile(src, dest / name)
    return dest


def _run(cmd: list, **kwargs) -> subprocess.CompletedProcess:
    proc = subprocess.run([str(c) for c in cmd], capture_output=True, text=True, timeout=600, **kwargs)
    assert proc.returncode == 0, f"{cmd} exited {proc.returncode}:\n{proc.stdout[-2000:]}\n{proc.stderr[-3000:]}"
    return proc


def _fresh_venv(where: Path, source: Path) -> Path:
    """`pip install <source>` (not editable, no dependencies) into a new venv; then the running environment's
    site-packages as plain paths. Installing first: pip must not see (and offer to uninstall) the dev install."""
    venv.create(where, with_pip=False)
    python = where / "bin" / "python"
    _run(PIP + ["--python", python, "install", "--no-deps", source], env=_child_env())
    (own,) = json.loads(_run([python, "-c", "import site, json; print(json.dumps(site.getsitepackages()))"]).stdout)
    Path(own, "dev-deps.pth").write_text("".join(f"{p}\n" for p in site.getsitepackages()))
    return where


def _child_env() -> dict[str, str]:
    """This environment without what would put the checkout on the path (helpers run tests with PYTHONPATH=tree)."""
    return {k: v for k, v in env_without_outer_make().items() if k not in ("PYTHONPATH", "PYTHONHOME")}


def _checkout_data() -> dict[str, bytes]:
    """Every file of the top-level data folders but caches, objects and hidden files, by relative path."""
    files = {}
    for name in DATA_DIRS:
        for path in (ROOT / name).rglob("*"):
            rel = path.relative_to(ROOT)
            if path.is_file() and path.suffix not in (".pyc", ".o") and not any(p.startswith((".", "__")) for p in rel.parts):
                files[rel.as_posix()] = path.read_bytes()
    return files


def _mentions(project: Path, needles: list[str]) -> list[str]:
    """The project's text files that name one of `needles`."""
    hits = []
    for path in project.rglob("*"):
        if path.is_file() and path.suffix in TEXT_SUFFIXES:
            text = path.read_text(errors="replace")
            hits += [f"{path.relative_to(project)}: {n}" for n in needles if n in text]
    return hits


def test_pip_install_into_a_fresh_venv_builds_and_runs_the_example_bit_exact_from_another_directory(tmp_path):
    source = _copy_sources(tmp_path / "src")
    env_dir = _fresh_venv(tmp_path / "venv", source)
    shutil.rmtree(source)  # nothing may read the tree the package was installed from
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    shutil.copyfile(EXAMPLE, elsewhere / EXAMPLE.name)  # the user's model, in the user's directory
    env = _child_env()

    edgemem = env_dir / "bin" / "edgemem"  # the console script pip wrote, as a user runs it
    boards = json.loads(_run([edgemem, "boards", "--json"], cwd=elsewhere, env=env).stdout)["boards"]
    assert sorted(b["name"] for b in boards) == sorted(p.stem for p in (ROOT / "boards").glob("*.toml"))

    built = _run([edgemem, "build", "--board", "mps2-an385", EXAMPLE.name, "-o", "kws", "--run", "--json"], cwd=elsewhere, env=env)
    report = json.loads(built.stdout)
    assert report["run"]["bit_exact"] is True, report["run"]
    assert report["run"]["oracle"] == "tflm"

    # What it ran: the installed package and the data shipped inside it, not the checkout's.
    probe = _run([env_dir / "bin" / "python", "-c", "import edgemem, json, sys\nfrom edgemem.package_data import data_dir\n"
                  "print(json.dumps([edgemem.__file__, [str(data_dir(n)) for n in sys.argv[1:]], sys.path]))", *DATA_DIRS],
                 cwd=elsewhere, env=env)  # fmt: skip
    module_file, data_dirs, path = json.loads(probe.stdout)
    assert Path(module_file).is_relative_to(env_dir), f"edgemem imported from {module_file}, not from the installed package"
    for d in data_dirs:
        assert Path(d).is_relative_to(Path(module_file).parent / "_data") and Path(d).is_dir(), data_dirs
    assert not any(p and Path(p).resolve() == ROOT for p in path), "the source checkout is on sys.path"

    # A board with a [device] section also gets its own image: its UART/timer drivers and board_init.c.
    device = json.loads(_run([edgemem, "build", "--board", "nucleo-f401re", EXAMPLE.name, "-o", "f401", "--json"],
                             cwd=elsewhere, env=env).stdout)  # fmt: skip
    assert (elsewhere / "f401" / device["board_image"]["elf"]).is_file()
    assert {"board_init.c", "uart_stm32_usart.c", "timer_dwt.c", "main.c", "startup.c"} <= {p.name for p in (elsewhere / "f401" / "board").iterdir()}

    # The projects stand alone: no path into the installation or the checkout, and `make` rebuilds them without it.
    projects = [elsewhere / "kws", elsewhere / "f401", elsewhere / "f401" / "board"]
    assert _mentions(elsewhere, [str(env_dir), str(ROOT)]) == []
    shutil.rmtree(env_dir)
    for project in projects:
        _run(["make", "-C", project, "clean"], env=env)
        assert not (project / "firmware.elf").exists()
        _run(["make", "-C", project], env=env)
        assert (project / "firmware.elf").is_file()


def test_the_sdist_and_its_wheel_ship_the_top_level_folders_byte_for_byte(tmp_path):
    source = _copy_sources(tmp_path / "src")
    # `python -m build`'s route: the PEP 517 sdist hook, then a wheel built from the sdist alone.
    hook = "import sys\nfrom setuptools import build_meta\nprint(build_meta.build_sdist(sys.argv[1]))"
    name = _run([sys.executable, "-c", hook, tmp_path / "sdist"], cwd=source, env=_child_env()).stdout.split()[-1]
    sdist = tmp_path / "sdist" / name
    shutil.rmtree(source)
    _run(PIP + ["wheel", "--no-deps", "-w", tmp_path / "wheels", sdist], env=_child_env())
    (wheel,) = (tmp_path / "wheels").glob("edgemem-*.whl")

    expected = _checkout_data()
    with tarfile.open(sdist) as tar:
        in_sdist = {m.name.split("/", 1)[1] for m in tar.getmembers() if m.isfile()}
    assert set(expected) <= in_sdist, sorted(set(expected) - in_sdist)
    with zipfile.ZipFile(wheel) as z:
        shipped = {n.removeprefix("edgemem/_data/"): z.read(n) for n in z.namelist() if n.startswith("edgemem/_data/")}
    assert shipped.keys() == expected.keys(), sorted(shipped.keys() ^ expected.keys())
    assert [rel for rel in expected if shipped[rel] != expected[rel]] == []
