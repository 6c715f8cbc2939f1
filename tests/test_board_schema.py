"""Board files are untrusted input (issue 30): the schema (edgemem/board.py) refuses what a value does not claim to
be, and a build records the exact board it used, which run/validate/flash then use.

The hostile files are the shipped stm32f746.toml with one thing broken; each must end `edgemem build` with one
`error:` paragraph naming the file and the key path, exit 2 (EdgememError, errors.py), no traceback and no output
directory -- and, for the shell-metacharacter ones, nothing run. The custom boards are built and run under QEMU
(the small example model) and compared with TFLite Micro by `edgemem run`.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from typer.testing import CliRunner

from edgemem.board import Board, list_boards, load_board
from edgemem.cli import app

ROOT = Path(__file__).resolve().parents[1]
EXAMPLE = ROOT / "examples" / "kws_tiny_int8.tflite"
F746 = (ROOT / "boards" / "stm32f746.toml").read_text()
USAGE = 2  # EdgememError.exit_code: bad input the user can fix

needs_qemu = pytest.mark.skipif(
    shutil.which("qemu-system-arm") is None or shutil.which("arm-none-eabi-gcc") is None,
    reason="needs qemu-system-arm and arm-none-eabi-gcc",
)


def variant(*edits: tuple[str, str]) -> str:
    """stm32f746.toml with each (old, new) replaced once; `old` must be there (so a case cannot go stale), first
    outside the comments (the schema comment at the top names every key)."""
    header, body = F746.split("\nname = ", 1)
    body = "\nname = " + body
    for old, new in edits:
        assert old in body, old
        body = body.replace(old, new, 1)
    return header + body


PWNED = "PWNED"  # a file the shell-metacharacter cases would create in the working directory if run

# (id, board file text, key path the refusal names, a phrase of what is allowed)
HOSTILE = [
    ("cpu-shell", variant(('cpu = "cortex-m7"', f'cpu = "cortex-m7; touch {PWNED}"')), "[core].cpu", "must be one of"),
    ("cpu-unknown", variant(('cpu = "cortex-m7"', 'cpu = "cortex-m99"')), "[core].cpu", "'cortex-m7'"),
    ("fpu-shell", variant(('fpu = "fpv5-sp-d16"', f'fpu = "fpv5-sp-d16 $(touch {PWNED})"')), "[core].fpu", "must be one of"),
    ("float-abi", variant(('float_abi = "hard"', 'float_abi = "hard`id`"')), "[core].float_abi", "must be one of"),
    ("fpu-on-m0", variant(('cpu = "cortex-m7"', 'cpu = "cortex-m0"'), ("dsp = true", "dsp = false\nmpu = false")),
     "[core].fpu", "has no such FPU"),
    ("machine-option", variant(('machine = "mps2-an500"', 'machine = "mps2-an500 -device loader,file=/etc/passwd"')),
     "[qemu].machine", "must be one of"),
    ("qemu-cpu", variant(('cpu = "cortex-m7"\nflash_base', 'cpu = "max"\nflash_base')), "[qemu].cpu", "must be one of"),
    ("board-name", variant(('name = "stm32f746"', f'name = "x\\"; touch {PWNED}; \\""')), "name", "a board id"),
    ("board-name-markup", variant(('name = "stm32f746"', 'name = "x[/]y"')), "name", "a board id"),
    ("region-name", variant(('name = "sram1"', f'name = "sram1$(touch {PWNED})"')), "[[ram]][1].name", "an identifier"),
    ("peripheral-name", variant(('name = "timer0"', 'name = "timer0 */ int x; /*"')), "[[qemu.peripheral]][0].name",
     "an identifier"),
    ("description-escape", variant(('description = "STM32F746', 'description = "\\u001b[2J\\nSTM32F746')), "description",
     "one line of printable text"),
    ("description-bidi", variant(('description = "STM32F746', 'description = "\u202eSTM32F746')), "description",
     "bidi-override"),
    ("description-long", variant(('description = "STM32F746', f'description = "{"x" * 300}')), "description",
     "at most 200 characters"),
    ("openocd-path", variant(('target = "target/stm32f7x.cfg"', 'target = "../../../etc/passwd.cfg"')),
     "[flasher.openocd].target", "openocd config path"),
    ("openocd-command", variant(('target = "target/stm32f7x.cfg"', 'target = "target/stm32f7x.cfg"\ncommands = ["exec touch PWNED"]')),
     "[flasher.openocd].commands[0]", "transport select"),
    ("pyocd-target", variant(('target = "stm32f746nghx"', 'target = "stm32f746nghx --script x"')), "[flasher.pyocd].target",
     "pyOCD target name"),
    ("size-negative", variant(("size = 0x3C000", "size = -4096")), "[[ram]][1].size", "greater than 0"),
    ("size-zero", variant(("size = 0x100000", "size = 0")), "[flash].size", "greater than 0"),
    ("size-huge", variant(("size = 0x100000", "size = 0x1000000000")), "[flash].size", "less than or equal to 4294967296"),
    ("past-4GiB", variant(("base = 0x2004C000", "base = 0xFFFFE000")), "[[ram]][2].size", "32-bit address space"),
    ("overlap", variant(("base = 0x20010000", "base = 0x2000F000")), "[[ram]][1].base", "must not overlap"),
    ("ram-in-flash", variant(("base = 0x20000000\nsize = 0x10000", "base = 0x08080000\nsize = 0x10000")), "[[ram]][0].base",
     "overlaps [flash]"),
    ("peripheral-over-ram", variant(("base = 0x40000000\nsize = 0x1000", "base = 0x20001000\nsize = 0x1000")),
     "[[qemu.peripheral]][0].base", "overlaps [qemu].ram_base"),
    ("same-region-name", variant(('name = "sram2"', 'name = "SRAM1"')), "[[ram]][2].name", "already the name"),
    ("two-defaults", variant(('speed = "normal"', 'speed = "normal"\ndefault = true')), "[[ram]][1].default", "only one"),
    ("align-not-pow2", variant(("stack_size = 0x4000", "stack_size = 0x4000\narena_align = 12")), "arena_align",
     "power of two"),
    ("align-zero", variant(("stack_size = 0x4000", "stack_size = 0x4000\narena_align = 0")), "arena_align",
     "greater than or equal to 1"),
    ("stack-odd", variant(("stack_size = 0x4000", "stack_size = 0x4004")), "stack_size", "multiple of 8"),
    ("stack-whole-region", variant(("stack_size = 0x4000", "stack_size = 0x10000")), "stack_size",
     "less than the default RAM region dtcm"),
    ("icount-shift", variant(("icount_shift = 0", "icount_shift = 11")), "[qemu].icount_shift", "less than or equal to 10"),
    ("icount-negative", variant(("icount_shift = 0", "icount_shift = -1")), "[qemu].icount_shift", "greater than or equal to 0"),
    ("hz-zero", variant(("hz = 25000000 ", "hz = 0 ")), "[qemu.timer].hz", "greater than 0"),
    ("irq-outside-vector-table", variant(("irq = 8", "irq = 200")), "[qemu.timer].irq", "less than 96"),
    ("baud-zero", variant(("baud = 115200", "baud = 0")), "[serial].baud", "greater than or equal to 300"),
    ("timeout-nan", variant(("address = 0x08000000", "address = 0x08000000\ntimeout_s = nan")), "[flasher].timeout_s",
     "finite number"),
    ("timeout-inf", variant(("address = 0x08000000", "address = 0x08000000\ntimeout_s = inf")), "[flasher].timeout_s",
     "finite number"),
    ("size-nan", variant(("size = 0x3C000", "size = nan")), "[[ram]][1].size", "must be an integer"),
    ("unknown-key", variant(("dsp = true", "dsp = true\nfpuu = 'fpv5-d16'")), "[core].fpuu", "is not a key of [core]"),
    ("misspelt-top-level", variant(("stack_size = 0x4000", "stak_size = 0x4000")), "stak_size", "is not a key of the top level"),
    ("unknown-table", variant(("\n[serial]\n", "\n[serail]\n")), "serail", "is not a key of the top level"),
    ("string-size", variant(("size = 0x3C000", 'size = "0x3C000"')), "[[ram]][1].size", "must be an integer"),
    ("float-hz", variant(("hz = 25000000 ", "hz = 2.5e7 ")), "[qemu.timer].hz", "must be an integer"),
    ("bool-as-string", variant(("dsp = true", 'dsp = "yes"')), "[core].dsp", "must be true or false"),
    ("table-not-array", variant(("\n[[qemu.peripheral]]\n", "\n[qemu.peripheral]\n")), "[[qemu.peripheral]]", "must be an array"),
    ("missing-key", variant(('machine = "mps2-an500"\n', "")), "[qemu].machine", "is missing"),
]


def _build(board_file: Path, out: Path):
    return CliRunner().invoke(app, ["build", str(EXAMPLE), "--board", str(board_file), "-o", str(out)], catch_exceptions=False)


@pytest.mark.parametrize("text,key,allowed", [c[1:] for c in HOSTILE], ids=[c[0] for c in HOSTILE])
def test_hostile_board_file_is_refused_naming_the_key(tmp_path, monkeypatch, text, key, allowed):
    monkeypatch.chdir(tmp_path)  # where a shell metacharacter that reached a shell would leave PWNED
    board_file = tmp_path / "mine.toml"
    board_file.write_text(text)
    res = _build(board_file, tmp_path / "out")
    assert res.exit_code == USAGE, f"exit {res.exit_code}:\n{res.stdout}\n{res.stderr}"
    assert "Traceback" not in res.stderr and "internal error" not in res.stderr
    errors = [line for line in res.stderr.splitlines() if line.startswith("error:")]
    assert len(errors) == 1 and len(res.stderr.strip().splitlines()) == 1, res.stderr  # one paragraph
    assert f"board file {board_file}: " in errors[0]
    # the key path, then its value ("key = value: what is allowed") or what is wrong with the key itself
    assert f"{key} = " in errors[0] or f"{key} is " in errors[0], f"{key!r} not named in: {errors[0]}"
    assert allowed in errors[0], f"{allowed!r} not in: {errors[0]}"
    assert not (tmp_path / "out").exists() and not list(tmp_path.glob(".out.*"))
    assert not (tmp_path / PWNED).exists()


def test_shell_metacharacters_through_the_real_command(tmp_path):
    """The whole `edgemem` process (no test runner in between): refused before anything is written or run."""
    board_file = tmp_path / "mine.toml"
    board_file.write_text(variant(('cpu = "cortex-m7"', f'cpu = "cortex-m7 -o /dev/null; touch {PWNED} #"')))
    p = subprocess.run([sys.executable, "-m", "edgemem.cli", "build", str(EXAMPLE), "--board", str(board_file), "-o",
                        str(tmp_path / "out")], cwd=tmp_path, capture_output=True, text=True, timeout=600)  # fmt: skip
    assert p.returncode == USAGE and "Traceback" not in p.stderr, p.stderr
    assert p.stderr.startswith(f"error: board file {board_file}: [core].cpu = 'cortex-m7 -o /dev/null; touch {PWNED} #'")
    assert not (tmp_path / "out").exists() and not (tmp_path / PWNED).exists()


@pytest.mark.parametrize("name", list_boards())
def test_every_shipped_board_loads_and_its_definition_round_trips(name):
    from edgemem.board import board_from_definition

    board = load_board(name)
    assert board.name == name and board.source == ROOT / "boards" / f"{name}.toml"
    again = board_from_definition(json.loads(json.dumps(board.definition)), "edgemem.json")
    assert again == board  # every field (source aside) is the file's, from the recorded definition alone
    assert again.definition == board.definition


def test_shipped_board_values_are_the_files():
    """A few values read straight from the TOML text, against the loaded board (defaults filled in)."""
    f7 = load_board("stm32f746")
    assert [(r.name, r.base, r.size, r.default) for r in f7.ram] == [
        ("dtcm", 0x20000000, 0x10000, True), ("sram1", 0x20010000, 0x3C000, False), ("sram2", 0x2004C000, 0x4000, False)]
    assert f7.definition["core"] == {"cpu": "cortex-m7", "fpu": "fpv5-sp-d16", "float_abi": "hard", "dsp": True, "mpu": True}
    assert f7.definition["flasher"]["timeout_s"] == 120 and f7.flasher.openocd_commands == ()
    pico = load_board("rp2040-pico")
    assert pico.qemu is None and pico.flasher.openocd_commands == ("adapter speed 5000",)
    assert pico.definition["description"].startswith("Raspberry Pi Pico")


# ---- a custom board, end to end -----------------------------------------------------------------------------

SMALL_SRAM1 = 0x20000  # the same-name file's SRAM1: 128 KiB instead of 240 KiB
OTHER_PROBE = "interface/cmsis-dap.cfg"  # and its openocd interface (the shipped file: interface/stlink.cfg)


def _cli(*args: str, cwd: Path) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "edgemem.cli", *args], cwd=cwd, capture_output=True, text=True, timeout=600)


@pytest.fixture(scope="module")
def custom_builds(tmp_path_factory):
    """Builds of the example: from a copy of stm32f746.toml named 'mine' (plain and --profile), and from a file
    named stm32f746.toml (and naming itself so) with a smaller SRAM1 and another debug probe. Each board given by
    a relative path, as a user would."""
    root = tmp_path_factory.mktemp("custom")
    (root / "mine.toml").write_text(variant(('name = "stm32f746"', 'name = "mine"')))
    (root / "stm32f746.toml").write_text(variant(("size = 0x3C000", f"size = 0x{SMALL_SRAM1:X}"),
                                                 ('interface = "interface/stlink.cfg"', f'interface = "{OTHER_PROBE}"')))
    for file, out, extra in (("mine.toml", "out-mine", ()), ("mine.toml", "out-mine-profile", ("--profile",)),
                             ("stm32f746.toml", "out-same", ())):
        p = _cli("build", str(EXAMPLE), "--board", f"./{file}", "-o", out, *extra, cwd=root)
        assert p.returncode == 0, p.stderr
    return root


@needs_qemu
def test_custom_board_file_builds_and_runs(custom_builds):
    for extra in ((), ("--board", "mine"), ("--board", "./mine.toml")):
        p = _cli("run", "out-mine", "--json", *extra, cwd=custom_builds)
        assert p.returncode == 0, p.stderr
        res = json.loads(p.stdout)
        assert res["board"] == "mine" and res["bit_exact"] is True
    p = _cli("validate", "out-mine", "--count", "1", "--json", cwd=custom_builds)
    assert p.returncode == 0, p.stderr
    assert json.loads(p.stdout)["bit_exact_count"] == 1
    info = json.loads((custom_builds / "out-mine" / "edgemem.json").read_text())
    assert info["board"] == "mine" and info["board_definition"] == load_board(custom_builds / "mine.toml").definition


@needs_qemu
def test_a_file_named_like_a_shipped_board_keeps_its_own_contents(custom_builds):
    out = custom_builds / "out-same"
    info = json.loads((out / "edgemem.json").read_text())
    ram = 0x10000 + SMALL_SRAM1 + 0x4000
    assert info["board"] == "stm32f746" and info["board_ram_bytes"] == ram != load_board("stm32f746").ram_bytes
    assert [r["size"] for r in info["board_definition"]["ram"]] == [0x10000, SMALL_SRAM1, 0x4000]
    # the linker script has the file's RAM: DTCM + the smaller SRAM1 are one contiguous region, SRAM2 after a gap
    lengths = [int(x, 0) for x in re.findall(r"LENGTH = (0x[0-9A-Fa-f]+)", (out / "linker.ld").read_text())]
    assert 0x10000 + SMALL_SRAM1 in lengths and 0x10000 + 0x3C000 + 0x4000 not in lengths
    p = _cli("run", "out-same", "--json", "--board", "./stm32f746.toml", cwd=custom_builds)
    assert p.returncode == 0, p.stderr
    assert json.loads(p.stdout)["bit_exact"] is True
    # the shipped file holds another definition of that board: not what this build was made for
    p = _cli("run", "out-same", "--board", str(ROOT / "boards" / "stm32f746.toml"), cwd=custom_builds)
    assert p.returncode == USAGE and "Traceback" not in p.stderr
    assert "was built for another definition of board stm32f746" in p.stderr


@needs_qemu
def test_custom_board_profiles(custom_builds):
    p = _cli("profile", "out-mine-profile", "--json", cwd=custom_builds)
    assert p.returncode == 0, p.stderr
    res = json.loads(p.stdout)
    assert res["board"] == "mine" and res["arena_matches_plan"] and res["bit_exact"] is True


@needs_qemu
def test_flash_uses_the_recorded_board_not_the_shipped_one(custom_builds, tmp_path):
    """`flash --board stm32f746` of the build made from the same-name file drives that file's probe."""
    bin_dir, log = tmp_path / "bin", tmp_path / "openocd.argv"
    bin_dir.mkdir()
    (bin_dir / "openocd").write_text(f'#!/bin/sh\nprintf \'%s\\n\' "$@" > \'{log}\'\n')
    (bin_dir / "openocd").chmod(0o755)
    env = {**os.environ, "PATH": f"{bin_dir}{os.pathsep}{os.environ['PATH']}"}
    p = subprocess.run([sys.executable, "-m", "edgemem.cli", "flash", "out-same", "--board", "stm32f746"],
                       cwd=custom_builds, env=env, capture_output=True, text=True, timeout=600)  # fmt: skip
    assert p.returncode == 0, p.stderr
    assert log.read_text().splitlines()[:4] == ["-f", OTHER_PROBE, "-f", "target/stm32f7x.cfg"]


def _edited_build(custom_builds, tmp_path, **changes) -> Path:
    proj = tmp_path / "p"
    shutil.copytree(custom_builds / "out-mine", proj)
    info = json.loads((proj / "edgemem.json").read_text())
    for key, value in changes.items():
        if value is None:
            info.pop(key)
        else:
            info[key] = value
    (proj / "edgemem.json").write_text(json.dumps(info))
    return proj


@needs_qemu
def test_a_build_without_a_recorded_board_is_refused_not_looked_up(custom_builds, tmp_path):
    """An edgemem.json naming a shipped board but recording no definition: no guess by name."""
    proj = _edited_build(custom_builds, tmp_path, board="stm32f746", board_definition=None)
    p = _cli("run", str(proj), cwd=tmp_path)
    assert p.returncode == USAGE and "Traceback" not in p.stderr
    assert "does not record the definition of its board stm32f746" in p.stderr and "--force" in p.stderr


@needs_qemu
def test_a_tampered_recorded_board_is_checked_again(custom_builds, tmp_path):
    definition = json.loads((custom_builds / "out-mine" / "edgemem.json").read_text())["board_definition"]
    definition["qemu"]["machine"] = "mps2-an500 -kernel /etc/passwd"
    proj = _edited_build(custom_builds, tmp_path, board_definition=definition)
    for command in ("run", "validate"):
        p = _cli(command, str(proj), cwd=tmp_path)
        assert p.returncode == USAGE and "Traceback" not in p.stderr, p.stderr
        assert (f"board definition recorded in {proj / 'edgemem.json'}: [qemu].machine = 'mps2-an500 -kernel "
                "/etc/passwd': must be one of") in p.stderr and "--force" in p.stderr


def test_board_dataclass_interface_is_kept():
    """Other modules build and replace Boards as dataclasses (budget.py, pipeline.py)."""
    import dataclasses

    f7 = load_board("stm32f746")
    smaller = dataclasses.replace(f7, stack_size=4096)
    assert isinstance(smaller, Board) and smaller.stack_size == 4096 and smaller.definition == f7.definition
