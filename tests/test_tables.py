"""The CLI's tables fit an 80-column terminal: `edgemem boards` one line per board, the analyze and build
reports within 80 columns with no figure cut (rich truncates with an ellipsis when a no-wrap cell overflows)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from edgemem.board import list_boards

ROOT = Path(__file__).resolve().parents[1]
EXAMPLE = ROOT / "examples" / "kws_tiny_int8.tflite"


def _cli(*args: str) -> str:
    env = {**os.environ, "COLUMNS": "80", "TERM": "xterm"}
    proc = subprocess.run([sys.executable, "-m", "edgemem.cli", *args], capture_output=True, text=True, cwd=ROOT,
                          env=env, timeout=600)  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    return proc.stdout


def _fits(text: str) -> None:
    lines = text.splitlines()
    assert max(len(line) for line in lines) <= 80, "\n".join(line for line in lines if len(line) > 80)
    assert "…" not in text, "a cell was cut"


def test_boards_one_line_per_board_in_80_columns():
    text = _cli("boards")
    _fits(text)
    first_table = text.split("RAM regions")[0]
    for name in list_boards():
        rows = [line for line in first_table.splitlines() if line.split() and line.split()[0] == name]
        assert len(rows) == 1, name
    assert "stm32f746 " in first_table and " 320K " in first_table and " M7F " in first_table


def test_analyze_and_build_reports_in_80_columns(tmp_path):
    _fits(_cli("analyze", str(EXAMPLE)))
    text = _cli("build", str(EXAMPLE), "-o", str(tmp_path / "p"), "--opt-time", "0", "--stack", "auto")
    _fits(text)
    assert "reserved (auto)" in text
