"""The tree passes `ruff check` with the project's configuration (pyproject.toml [tool.ruff]): no unused or
undefined names, no likely bugs (bugbear). Runs in the test suite, so in CI."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def _ruff(*args: str, cwd: Path = REPO) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "ruff", *args], cwd=cwd, capture_output=True, text=True, timeout=120)


def test_ruff_is_installed():
    """ruff comes with the test extras (`pip install -e '.[test]'`, what `make test` runs)."""
    p = _ruff("--version")
    assert p.returncode == 0, f"ruff is not installed: pip install -e '.[test]'\n{p.stderr}"


def test_the_tree_passes_ruff_check():
    p = _ruff("check", "--output-format", "concise", ".")
    assert p.returncode == 0, f"ruff check found problems (fix them, or explain a `# noqa: CODE`):\n{p.stdout}{p.stderr}"


def test_ruff_check_with_this_configuration_catches_an_undefined_name(tmp_path):
    """Control: the configuration really checks something (an undefined name fails it)."""
    bad = tmp_path / "bad.py"
    bad.write_text("def f():\n    return undefined_name\n")
    p = _ruff("check", "--config", str(REPO / "pyproject.toml"), "--output-format", "concise", str(bad), cwd=tmp_path)
    assert p.returncode == 1 and "F821" in p.stdout, p.stdout + p.stderr
