"""A refused build (exit 5, issue 33): report.html of the best plan marked "does not fit", naming the operator and
the tensors at the peak, and the ways out, each planned by the build's stages (edgemem/ways_out.py) -- checked here
by taking each way: the build with its flags is the oracle of the arena it predicted (within 2 %)."""

from __future__ import annotations

import html
import json
import re
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

EXAMPLE = Path(__file__).resolve().parent.parent / "examples" / "kws_tiny_int8.tflite"
# 18 KiB less stm32f746's 16 KiB stack leaves 2,048 B: kws_tiny's plan (about 2.7 KB) is refused at the plan
TIGHT = ("--board", "stm32f746", "--ram", "18K")


def _cli(*args: str, cwd: Path) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "edgemem.cli", *args], cwd=cwd, capture_output=True, text=True,
                          timeout=900)  # fmt: skip


@pytest.fixture(scope="module")
def refused(tmp_path_factory) -> tuple[dict, Path]:
    """The refused build (its JSON error and output directory), once for the tests below."""
    tmp = tmp_path_factory.mktemp("refusal")
    out = tmp / "refused"
    p = _cli("build", str(EXAMPLE), *TIGHT, "-o", str(out), "--json", cwd=tmp)
    assert p.returncode == 5, p.stderr
    assert "Traceback" not in p.stderr
    return json.loads(p.stdout)["error"], out


def test_refusal_writes_the_best_plan_and_its_peak(refused):
    error, out = refused
    # only the refusal in the directory: no half-built project
    assert sorted(p.name for p in out.iterdir()) == [".edgemem-output", "refusal.json", "report.html"]
    assert json.loads((out / "refusal.json").read_text())["error"]["ways_out"] == error["ways_out"]
    page = (out / "report.html").read_text()
    assert 'id="verdict-refused"' in page and "does not fit" in page
    # the page is the build's report of the refused plan: its arena card is the arena the message names
    arena = int(re.search(r"needs an arena of ([\d,]+) bytes", error["message"]).group(1).replace(",", ""))
    assert error["arena_bytes"] == arena
    assert f'id="arena-bytes" data-value="{arena}"' in page
    # the peak names the operator and its live tensors, whose bytes add up to the peak the plan's curve gives
    peak = re.search(r'<table id="peak">(.*?)</table>', page, re.S).group(1)
    rows = re.findall(r"<tr><td>(.*?)</td><td>(.*?)</td><td>(.*?)</td><td>([\d,]+)</td></tr>", peak)
    *tensors, (total_label, _, _, total) = rows
    assert total_label == "in all" and tensors
    assert sum(-(-int(b.replace(",", "")) // 4) * 4 for *_, b in tensors) == int(total.replace(",", ""))  # stm32f746: 4 B
    assert int(total.replace(",", "")) <= arena  # the live bytes at the peak fit the arena that holds them
    assert re.search(r"At the peak: step \d+, operator \S+ \(\w+", html.unescape(page))


def test_each_way_out_gives_its_predicted_arena(refused, tmp_path):
    error, _ = refused
    ways = error["ways_out"]["ways"]
    names = " ".join(w["command"] for w in ways)
    # the ways this case offers: input outside, stack auto, patches (no pools: --ram makes one region), a board
    assert "--input outside" in names and "--stack auto" in names and "--patch-macs" in names and "--board bbc-microbit" in names
    assert any(w["fits"] for w in ways)
    for k, way in enumerate(ways):
        assert way["arena_bytes"], way
        args = shlex.split(way["command"])
        assert args[:2] == ["edgemem", "build"]
        p = _cli(*args[1:], "-o", str(tmp_path / f"way{k}"), "--json", "--ways-time", "0", cwd=Path.cwd())
        got = json.loads(p.stdout)
        if way["fits"]:
            assert p.returncode == 0, (way, p.stderr)
            arena = got["arena_bytes"]
        else:
            assert p.returncode == 5, (way, p.stderr)
            arena = got["error"]["arena_bytes"]
        assert abs(arena - way["arena_bytes"]) <= 0.02 * way["arena_bytes"], (way["command"], arena, way["arena_bytes"])
        if way["fits"] and way["slowdown_percent"] is not None:
            assert got["pareto"]["taken"]["instructions"] == way["instructions"]


def test_ways_out_are_bounded_in_time(tmp_path):
    """With no time to plan them, the ways out are listed as not planned, never given a figure."""
    out = tmp_path / "r"
    p = _cli("build", str(EXAMPLE), *TIGHT, "-o", str(out), "--json", "--ways-time", "0.001", cwd=tmp_path)
    assert p.returncode == 5
    ways = json.loads(p.stdout)["error"]["ways_out"]
    assert len(ways["ways"]) <= 1 and ways["not_tried"]
    assert "Not planned (the time budget ran out)" in (out / "report.html").read_text()


def test_a_refusal_before_any_plan_names_the_operator_at_the_floor(tmp_path):
    """256 B next to the 16 KiB stack is below the model input alone (490 B), the floor no pass goes under: refused
    before lowering, the page names the operator at the floor, and the ways out are still planned."""
    out = tmp_path / "r"
    p = _cli("build", str(EXAMPLE), "--board", "stm32f746", "--ram", str(16384 + 256), "-o", str(out), "--json",
             cwd=tmp_path)  # fmt: skip
    assert p.returncode == 5, p.stderr
    error = json.loads(p.stdout)["error"]
    assert "needs at least" in error["message"] and error["arena_bytes"] is None
    page = html.unescape((out / "report.html").read_text())
    assert re.search(r"At the peak: operator #\d+ \w+, at the floor of [\d,]+ B", page)
    stack_auto = next(w for w in error["ways_out"]["ways"] if w["flags"] == ["--stack", "auto"])
    assert stack_auto["fits"] and stack_auto["arena_bytes"] and f"{stack_auto['arena_bytes']:,}" in page
