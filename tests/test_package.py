"""Issue 32: `pip install .` (not editable) gives a tool that builds from any directory.

A wheel is built from a copy of the package's sources, installed into a fresh directory (--target, no
dependencies: the heavy ones come from the running environment), and its `edgemem build --run` is run from an
unrelated temporary directory, where neither the checkout nor its templates/, firmware/ and boards/ can be
reached. The firmware's outputs are judged against TFLite Micro by the installed tool's own comparison.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
EXAMPLE = ROOT / "examples" / "kws_tiny_int8.tflite"
# What a source distribution holds (MANIFEST.in); the tests, examples and benchmarks are not part of it.
PACKAGE_SOURCES = ("pyproject.toml", "setup.py", "MANIFEST.in", "README.md", "edgemem", "templates", "firmware", "boards")


def _copy_sources(dest: Path) -> None:
    dest.mkdir()
    for name in PACKAGE_SOURCES:
        src = ROOT / name
        if src.is_dir():
            shutil.copytree(src, dest / name, ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
        elif src.is_file():
            shutil.copyfile(src, dest / name)


def _install_wheel(tmp_path: Path) -> Path:
    """Build the wheel and install it into site/ with pip; returns site/."""
    _copy_sources(tmp_path / "src")
    pip = [sys.executable, "-m", "pip", "--disable-pip-version-check"]
    subprocess.run(pip + ["wheel", str(tmp_path / "src"), "--no-deps", "-w", str(tmp_path / "wheels")],
                   check=True, capture_output=True, timeout=300)  # fmt: skip
    (wheel,) = (tmp_path / "wheels").glob("edgemem-*.whl")
    site = tmp_path / "site"
    subprocess.run(pip + ["install", "--no-deps", "--target", str(site), str(wheel)], check=True, capture_output=True, timeout=300)
    return site


def test_installed_wheel_builds_and_runs_the_example_bit_exact(tmp_path):
    site = _install_wheel(tmp_path)
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    env = {**os.environ, "PYTHONPATH": str(site)}  # the installed copy only: not the checkout the tests run from

    probe = subprocess.run([sys.executable, "-c", "import edgemem, json, sys; print(json.dumps([edgemem.__file__, sys.path]))"],
                           cwd=elsewhere, env=env, capture_output=True, text=True, check=True, timeout=60)  # fmt: skip
    module_file, path = json.loads(probe.stdout)
    assert Path(module_file).is_relative_to(site), f"edgemem imported from {module_file}, not from the installed wheel"
    assert not any(p and Path(p).resolve() == ROOT for p in path), "the source checkout is on sys.path"

    # The wheel's console script (its shebang is this interpreter), as a user would run it.
    edgemem = site / "bin" / "edgemem"
    out = elsewhere / "kws"
    proc = subprocess.run([str(edgemem), "build", "--board", "stm32f746", str(EXAMPLE), "-o", str(out), "--run", "--json"],
                          cwd=elsewhere, env=env, capture_output=True, text=True, timeout=600)  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-3000:]
    report = json.loads(proc.stdout)
    assert report["run"]["bit_exact"] is True, report["run"]
    assert (out / "firmware.elf").is_file()
