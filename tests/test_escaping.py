"""Untrusted text in generated files (edgemem/codegen/escape.py): every escaping function is fed every byte value
(alone, inside a string, in runs) and seeded random strings, and the real tool reads the result -- gcc (a comment
stays one comment, a string literal holds exactly the input's bytes at run time), GNU ld, make and sh (a variable
holds exactly the value, nothing else runs), cmake -P (a quoted argument is exactly the value). Then end to end: a
model whose tensor names and file name are hostile, and board files whose strings are, build, run bit-exact with
TFLite Micro, and no injected command runs.
"""

from __future__ import annotations

import importlib.util
import json
import os
import random
import re
import shutil
import subprocess
import sys
from html.parser import HTMLParser
from pathlib import Path

import numpy as np
import pytest

from edgemem import pipeline
from edgemem.codegen.escape import c_comment, c_string, cmake_quoted, cmake_unix_command, line_comment, make_word, md_code, md_text, utf8

ROOT = Path(__file__).resolve().parents[1]
CONTROL = {chr(i) for i in (*range(0x20), 0x7F)}


def _samples() -> list[str]:
    """Every byte value alone, inside text and in runs of three (trigraphs, '*/*'), known hostile strings, and
    seeded random strings over all byte values plus the characters that matter somewhere."""
    singles = [chr(i) for i in range(256)]
    inside = [f"a{chr(i)}b" for i in range(256)]
    runs = [chr(i) * 3 for i in range(256)]
    hostile = ["*/", "/*", "*/ #error x /*", "a\\", "\\", "??/", "x ??/\n", "??=", "?" * 7, "/**/", "*/*/", "a*", "/a",
               "$(shell touch PWNED)", "${X}", "$$", '"', "'", "#", "\\#", "\n\ttouch PWNED", "a\\\nb", "[/x]", "[[x]]",
               "é", "日本語", "\u2028", "\U0001f600", "", " ", "-n", "`id`", "; rm -rf x", "%s%n", "\r\n"]  # fmt: skip
    rng = random.Random(20261128)
    alphabet = singles + list("*/\\?$#\"'\n;[]`%{}()") * 8 + ["é", "\u2028", "日", "\U0001f600"]
    randoms = ["".join(rng.choice(alphabet) for _ in range(rng.randint(1, 40))) for _ in range(400)]
    return singles + inside + runs + hostile + randoms


SAMPLES = _samples()


def _run(cmd, cwd, **kw) -> subprocess.CompletedProcess:
    # without the flags of a make that runs this suite (`make test`): a sub-make prints "Entering directory"
    from edgemem.target.toolchain import env_without_outer_make

    return subprocess.run(cmd, cwd=cwd, capture_output=True, timeout=300, env=env_without_outer_make(), **kw)


def _nothing_else_written(directory: Path, expected: set[str]) -> None:
    found = {p.name for p in directory.rglob("*")}
    assert found <= expected, f"files no test wrote: {sorted(found - expected)}"


# ---------------------------------------------------------------------------------------------------- C and ld


def _c_bytes(data: bytes) -> str:
    return "{" + ", ".join(str(b) for b in (*data, 0)) + "}"


@pytest.mark.parametrize("std", ["c11", "gnu11"])  # -std=c11 turns trigraphs on (the Makefile's), gnu11 off
def test_c_comment_and_string_compile_and_hold_the_exact_bytes(std, tmp_path):
    lines = ["#include <stdio.h>", "#include <string.h>"]
    for i, t in enumerate(SAMPLES):
        lines.append(f"/* {c_comment(t)} */ static const char s{i}[] = {c_string(t)}; // {c_comment(t)}")
        lines.append(f"static const unsigned char e{i}[] = {_c_bytes(utf8(t))};")
    lines += ["int main(void)", "{", "    int bad = 0;"]
    for i in range(len(SAMPLES)):
        lines.append(f'    if (sizeof s{i} != sizeof e{i} || memcmp(s{i}, e{i}, sizeof e{i}) != 0) {{ printf("%d\\n", {i}); bad = 1; }}')
    lines += ["    return bad;", "}", ""]
    (tmp_path / "t.c").write_text("\n".join(lines), encoding="ascii")  # escaped text is ASCII
    cc = _run(["gcc", f"-std={std}", "-Wall", "-Wextra", "-Werror", "-Wno-unused-const-variable", "-Wtrigraphs", "t.c", "-o", "t"], tmp_path, text=True)
    assert cc.returncode == 0, cc.stderr[-3000:]
    run = _run(["./t"], tmp_path, text=True)
    bad = [SAMPLES[int(i)] for i in run.stdout.split()]
    assert run.returncode == 0 and not bad, f"string literals whose bytes differ: {bad[:5]!r}"


def test_c_comment_stays_one_comment_for_the_preprocessor(tmp_path):
    """Between two tokens, each escaped comment must vanish whole: the preprocessed text is exactly the tokens."""
    (tmp_path / "p.c").write_text("\n".join(f"A{i} /* {c_comment(t)} */ B{i} // {c_comment(t)}" for i, t in enumerate(SAMPLES)) + "\n",
                                  encoding="ascii")  # fmt: skip
    pre = _run(["gcc", "-std=c11", "-E", "-P", "-Wall", "-Werror", "-Wcomment", "-Wtrigraphs", "p.c"], tmp_path, text=True)
    assert pre.returncode == 0, pre.stderr[-3000:]
    assert pre.stdout.split() == [f"{ab}{i}" for i in range(len(SAMPLES)) for ab in "AB"]


def test_c_comment_in_a_linker_script_hides_nothing(tmp_path):
    """GNU ld reads every escaped comment as a comment: each symbol assigned after one has its value."""
    (tmp_path / "e.c").write_text("int em_entry;\n")
    assert _run(["gcc", "-c", "e.c", "-o", "e.o"], tmp_path).returncode == 0
    script = ["SECTIONS { .data : { *(.data .bss) } }"]
    script += [f"/* {c_comment(t)} */ em_sym{i} = {i}; /* {c_comment(t)} */" for i, t in enumerate(SAMPLES)]
    (tmp_path / "s.ld").write_text("\n".join(script) + "\n", encoding="ascii")
    link = _run(["ld", "-T", "s.ld", "e.o", "-o", "out", "-e", "0"], tmp_path, text=True)
    assert link.returncode == 0, link.stderr[-3000:]
    nm = _run(["nm", "out"], tmp_path, text=True).stdout
    values = {m.group(2): int(m.group(1), 16) for m in re.finditer(r"^([0-9a-f]+) \w (em_sym\d+)$", nm, re.M)}
    assert values == {f"em_sym{i}": i for i in range(len(SAMPLES))}


# ---------------------------------------------------------------------------------------------------- make


def _make_value(t: str) -> str:
    """What make_word promises to carry: the text, its control characters (no make line holds them) as \\xNN."""
    return "".join(f"\\x{ord(c):02X}" if c in CONTROL and c != "\t" else c for c in t)


def test_make_word_is_exactly_one_shell_word_and_runs_nothing(tmp_path):
    lines = []
    for i, t in enumerate(SAMPLES):
        lines += [f"# {line_comment(t)}", f"V{i} = {make_word(t)}"]
    lines += ["all:", "\t@printf '%s\\0' " + " ".join(f"$(V{i})" for i in range(len(SAMPLES)))]
    (tmp_path / "Makefile").write_text("\n".join(lines) + "\n", encoding="utf-8")
    proc = _run(["make", "-s"], tmp_path)
    assert proc.returncode == 0, proc.stderr[-3000:]
    got = proc.stdout.split(b"\0")[:-1]
    want = [utf8(_make_value(t)) for t in SAMPLES]
    assert len(got) == len(want)
    assert [i for i, (g, w) in enumerate(zip(got, want)) if g != w] == []
    assert proc.stderr == b""
    _nothing_else_written(tmp_path, {"Makefile"})
    dry = _run(["make", "-n"], tmp_path)  # make -n prints the one recipe line, nothing else ran
    assert dry.returncode == 0 and dry.stdout.count(b"\n") == 1 and dry.stdout.startswith(b"printf ")


# ---------------------------------------------------------------------------------------------------- cmake


def _cmake_value(t: str) -> str:
    return "".join(f"\\x{ord(c):02X}" if c in CONTROL and c not in "\t\n\r" else c for c in t)


def test_cmake_quoted_argument_is_exactly_the_value(tmp_path):
    lines = [f"# {line_comment(t)}\nfile(WRITE \"${{CMAKE_CURRENT_LIST_DIR}}/o{i}\" \"{cmake_quoted(t)}\")"
             for i, t in enumerate(SAMPLES)]  # fmt: skip
    lines.append(f'message(NOTICE "{cmake_quoted(SAMPLES[-1])}")')
    (tmp_path / "s.cmake").write_text("\n".join(lines) + "\n", encoding="utf-8")
    proc = _run(["cmake", "-P", "s.cmake"], tmp_path)
    assert proc.returncode == 0, proc.stderr[-3000:]
    bad = [i for i, t in enumerate(SAMPLES) if (tmp_path / f"o{i}").read_bytes() != utf8(_cmake_value(t))]
    assert bad == [], [SAMPLES[i] for i in bad[:5]]
    assert proc.stderr == utf8(_cmake_value(SAMPLES[-1])) + b"\n"  # message() prints the value, and nothing ran
    _nothing_else_written(tmp_path, {"s.cmake", *(f"o{i}" for i in range(len(SAMPLES)))})


def test_lib_cpu_flags_split_back_into_exactly_the_flags(tmp_path):
    """lib/CMakeLists.txt's EDGEMEM_CPU_FLAGS: set() from the quoted string library.py writes, then split by
    separate_arguments(UNIX_COMMAND) as the file does, gives back each flag exactly (';', '[', ']' and '\\' left
    out: they survive the split, but a CMake list of the flags joins or splits elements at them)."""
    rng = random.Random(7)
    printable = [chr(i) for i in range(0x20, 0x7F) if chr(i) not in ";[]\\"] + ["é", "日"]
    flag_sets = [[f"-mcpu={''.join(rng.choice(printable) for _ in range(rng.randint(1, 20)))}", "-mthumb"] for _ in range(200)]
    flag_sets += [["-mcpu=cortex-m7 $(shell touch PWNED)", "-mfpu=`touch PWNED`", '-x"', "'", "${CMAKE_COMMAND}", " a  b "]]
    lines = []
    for i, flags in enumerate(flag_sets):
        lines += [f'set(F "{cmake_quoted(cmake_unix_command(flags))}")', 'separate_arguments(L UNIX_COMMAND "${F}")',
                  f'foreach(x IN LISTS L)\n  file(APPEND "${{CMAKE_CURRENT_LIST_DIR}}/o{i}" "${{x}}\\n")\nendforeach()']  # fmt: skip
    (tmp_path / "s.cmake").write_text("\n".join(lines) + "\n", encoding="utf-8")
    proc = _run(["cmake", "-P", "s.cmake"], tmp_path)
    assert proc.returncode == 0, proc.stderr[-3000:]
    for i, flags in enumerate(flag_sets):
        assert (tmp_path / f"o{i}").read_text(encoding="utf-8").split("\n")[:-1] == flags
    _nothing_else_written(tmp_path, {"s.cmake", *(f"o{i}" for i in range(len(flag_sets)))})


# ---------------------------------------------------------------------------------------------------- Markdown


def test_markdown_text_and_code_are_one_inert_line():
    """No Markdown renderer is installed: the properties that make them inert, checked directly."""
    for t in SAMPLES:
        text, code = md_text(t), md_code(t)
        assert all(0x20 <= ord(c) < 0x7F for c in text + code)
        assert "<" not in text and not re.search(r"(?<!\\)[`*\[\]!|]", text.replace("\\\\", ""))
        fence = re.match(r"`+", code).group(0)
        assert code.endswith(fence) and fence not in code[len(fence) : -len(fence)]


# ---------------------------------------------------------------------------------------------------- templates

# fields of the render contexts that carry a model's, a board file's or a file name's strings (names, text)
_UNTRUSTED = re.compile(r"model_name|board\.(?!device\.init)|\.name\b|\.member|\.region|\.output|\.kind|\.comment|"
                        r"\.symbol|\.pool|\bguard|scheduler|algorithm|cpu_flags|qemu_args|\bv\b")  # fmt: skip


def test_every_untrusted_field_in_a_generated_file_template_goes_through_an_escaper():
    """templates/ other than report.html (autoescaped): each {{ }} naming such a field applies an escape.py filter."""
    from edgemem.codegen.escape import FILTERS

    unfiltered = []
    for path in sorted((ROOT / "templates").glob("*.j2")):
        if path.name == "report.html.j2":
            continue
        for expr in re.findall(r"{{(.*?)}}", path.read_text()):
            filters = {f.strip().split("(")[0] for f in expr.split("|")[1:]} | set(re.findall(r"map\('(\w+)'\)", expr))
            if _UNTRUSTED.search(expr) and not filters & set(FILTERS):
                unfiltered.append(f"{path.name}: {{{{{expr}}}}}")
    assert unfiltered == []


# ---------------------------------------------------------------------------------------------------- end to end


def _example_module():
    spec = importlib.util.spec_from_file_location("edgemem_make_example_model_escaping", ROOT / "examples" / "make_example_model.py")
    mod = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = mod  # dataclasses look their module up there
    spec.loader.exec_module(mod)
    return mod


INPUT_NAME = 'in */ #error x /*\n"q\\ ??/ $(shell touch PWNED_IN) [/x] <img src=x>\\'
OUTPUT_NAME = "out */\n#error y\n/* \\ `touch PWNED_OUT` </title><script>alert(1)</script> [bold]\\"
MODEL_FILE = "m [b] <b>$(shell touch PWNED_MAKE)\nfile(TOUCH PWNED_CMAKE)\n#\\.tflite"


def _hostile_model(input_name: str = INPUT_NAME, output_name: str = OUTPUT_NAME) -> bytes:
    """x int8[1,8] -> FULLY_CONNECTED -> int8[1,4] -> SOFTMAX -> y: its input and output carry hostile names (the
    hidden tensor's name never reaches C: edgemem names it)."""
    mem = _example_module()
    mb = mem.ModelBuilder()
    q = mem.qparams(0.05, 0)
    x = mb.tensor(input_name, (1, 8), np.int8, q)
    w = mb.const("w */ #error w /*", ((np.arange(32) % 7) - 3).astype(np.int8).reshape(4, 8), mem.qparams(0.01, 0))
    b = mb.const("b$(shell touch PWNED_B)", np.array([5, -3, 0, 7], np.int32), mem.qparams(0.0005, 0))
    h = mb.tensor("h */ [/x]\n#error h", (1, 4), np.int8, q)
    y = mb.tensor(output_name, (1, 4), np.int8, mem.qparams(1 / 256, -128))
    mb.op(mem.OP.FULLY_CONNECTED, [x, w, b], [h], *mem.fully_connected_options(), version=4)
    mb.op(mem.OP.SOFTMAX, [h], [y], *mem.softmax_options())
    return mb.serialize([x], [y])


def _cli(*args, cwd: Path) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "edgemem.cli", *map(str, args)], cwd=cwd, capture_output=True, text=True,
                          errors="replace", timeout=900)  # fmt: skip  (a file name's own bytes may be echoed)


def _no_pwned(*dirs: Path) -> None:
    found = [p for d in dirs for p in d.rglob("PWNED*")]  # what the injected commands would create
    assert not found, f"an injected command ran: {found}"


def test_hostile_tensor_and_file_names_build_run_bit_exact_and_run_nothing(tmp_path):
    model = tmp_path / MODEL_FILE
    model.write_bytes(_hostile_model())
    out = tmp_path / "out[" / "x]" / "proj"  # a '[/x]' in the path: rich markup must not read it
    p = _cli("build", model, "-o", out, cwd=tmp_path)
    assert p.returncode == 0, p.stderr[-4000:]
    assert "Traceback" not in p.stderr + p.stdout and str(out) in p.stdout.replace("\n", "")
    v = _cli("validate", out, "-n", "3", "--bit-exact", "--json", cwd=tmp_path)
    assert v.returncode == 0, v.stderr[-3000:]
    report = json.loads(v.stdout)
    assert report["bit_exact_count"] == report["count"] == 3  # the SOFTMAX still runs, against TFLite Micro
    assert _cli("validate", out, "-n", "1", cwd=tmp_path).returncode == 0  # the table, with the names, printed

    lib = out / "lib"
    for header in (out / "model.h", lib / "model.h"):  # the names are there, escaped, and gcc reads no #error
        text = header.read_text()
        assert c_comment(INPUT_NAME) in text and c_comment(OUTPUT_NAME) in text and "#error" not in text.replace(c_comment(INPUT_NAME), "").replace(c_comment(OUTPUT_NAME), "")
    build = tmp_path / "cmake-build"
    for cmd in (["cmake", "-S", lib, "-B", build, "-DCMAKE_C_FLAGS=-Wall -Wextra -Werror"], ["cmake", "--build", build]):
        proc = subprocess.run(list(map(str, cmd)), cwd=tmp_path, capture_output=True, text=True, timeout=300)
        assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    assert (build / "libedgemem_model.a").is_file()
    assert c_comment(MODEL_FILE) in (lib / "model.c").read_text()
    assert line_comment(MODEL_FILE) in (lib / "CMakeLists.txt").read_text()
    _no_pwned(tmp_path, Path.cwd())


def test_hostile_model_file_name_alone_runs_nothing_in_cmake(tmp_path):
    """The file name (a newline, then a CMake command) with plain tensor names: lib/ configures and builds, and
    the command in the name did not run."""
    model = tmp_path / MODEL_FILE
    model.write_bytes(_hostile_model("x", "y"))
    pipeline.build(model, "stm32f746", tmp_path / "p", pipeline.BuildOptions(compile=False, opt_seconds=0))
    build = tmp_path / "cmake-build"
    for cmd in (["cmake", "-S", tmp_path / "p" / "lib", "-B", build], ["cmake", "--build", build]):
        proc = subprocess.run(list(map(str, cmd)), cwd=tmp_path, capture_output=True, text=True, timeout=300)
        assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    _no_pwned(tmp_path)


def test_rich_markup_in_paths_is_printed_as_text(tmp_path):
    """A '[/x]' in a path and a '[red]' in a model's name are text on the console, not rich markup (a closing tag
    that matches nothing was a MarkupError traceback); control characters in a name are spelled \\xNN."""
    missing = _cli("build", tmp_path / "d[" / "x]" / "m.tflite", "-o", tmp_path / "o", cwd=tmp_path)
    assert missing.returncode == 3 and "Traceback" not in missing.stderr, missing.stderr[-3000:]
    assert f"'{tmp_path}/d[/x]/m.tflite'" in missing.stderr.replace("\n", "")
    model = tmp_path / "a[" / "x]" / "[red]m.tflite"
    model.parent.mkdir(parents=True)
    model.write_bytes(_hostile_model("x", "y"))
    a = _cli("analyze", model, cwd=tmp_path)
    assert a.returncode == 0 and "Traceback" not in a.stderr, a.stderr[-3000:]
    assert "[red]m.tflite: operators" in a.stdout
    ansi = tmp_path / "\x1b[31mred\x07.tflite"  # an escape sequence and a bell: shown, not sent to the terminal
    ansi.write_bytes(model.read_bytes())
    a = _cli("analyze", ansi, cwd=tmp_path)
    assert a.returncode == 0 and "\x1b" not in a.stdout + a.stderr and "\x07" not in a.stdout
    assert "\\x1B[31mred\\x07.tflite: operators" in a.stdout


def test_undecodable_file_name_builds(tmp_path):
    """A file name that is not UTF-8 (byte 0xFF): its byte is spelled \\xFF in C comments, the report is written."""
    model = tmp_path / os.fsdecode(b"bad\xff.tflite")
    model.write_bytes(_hostile_model("x", "y"))
    p = _cli("build", model, "-o", tmp_path / "p", cwd=tmp_path)
    assert p.returncode == 0 and "Traceback" not in p.stderr, p.stderr[-3000:]
    assert "bad\\xFF.tflite" in (tmp_path / "p" / "model.h").read_text()
    assert "bad\\udcff.tflite" in (tmp_path / "p" / "report.html").read_text()


class _Page(HTMLParser):
    def __init__(self):
        super().__init__()
        self.tags, self.tensors, self.title, self._in_title = [], [], "", False

    def handle_starttag(self, tag, attrs):
        self.tags.append(tag)
        self._in_title = tag == "title" and not self.title
        self.tensors += [v for k, v in attrs if k == "data-tensor"]

    def handle_data(self, data):
        if self._in_title:
            self.title += data

    def handle_endtag(self, tag):
        self._in_title = False


def _report_page(tmp_path: Path, file_name: str, input_name: str, output_name: str) -> _Page:
    tmp_path.mkdir()
    model = tmp_path / file_name
    model.write_bytes(_hostile_model(input_name, output_name))
    pipeline.build(model, "stm32f746", tmp_path / "p", pipeline.BuildOptions(compile=False, opt_seconds=0))
    page = _Page()
    page.feed((tmp_path / "p" / "report.html").read_text())
    return page


def test_report_html_shows_hostile_names_as_text(tmp_path):
    """report.html (jinja2 autoescape): each name is an attribute value or text, exactly, and the page has the
    very elements of the same model with plain names (none comes from a name)."""
    page = _report_page(tmp_path / "hostile", MODEL_FILE, INPUT_NAME, OUTPUT_NAME)
    plain = _report_page(tmp_path / "plain", "m.tflite", "x", "y")
    assert INPUT_NAME in page.tensors and "x" in plain.tensors
    assert page.title.startswith(MODEL_FILE + " on stm32f746")
    assert page.tags == plain.tags


# ---------------------------------------------------------------------------------------------------- board files


def _toml_str(s: str) -> str:
    return json.dumps(s)  # a JSON string of ASCII escapes is a TOML basic string


def _board_file(tmp_path: Path, **fields: str) -> Path:
    """boards/stm32f746.toml with some string fields replaced (key = "..." lines, first match each)."""
    text = (ROOT / "boards" / "stm32f746.toml").read_text()
    for key, value in fields.items():
        text, n = re.subn(rf'^{key} = "[^"\n]*"', lambda _m, k=key, v=value: f"{k} = {_toml_str(v)}", text, count=1, flags=re.M)
        assert n == 1, key
    path = tmp_path / "mine.toml"
    path.write_text(text)
    return path


@pytest.mark.parametrize("lines", ["one", "several"])
def test_hostile_board_description_runs_nothing_and_the_build_runs_bit_exact(lines, tmp_path):
    """description is free text: '*/' and a linker INCLUDE, a make function, a quote and a trailing backslash on
    one line (a schema allowing printable text takes it: the build must run bit-exact); then with newlines and a
    make assignment that runs a shell (refused by a stricter schema, or built): either way nothing runs."""
    at = f"{tmp_path}/PWNED"
    description = {"one": f"x */ INCLUDE pwned.ld /* $(shell touch {at}_DESC) `id` # \"q\\",  # < 200 characters
                   "several": f"x */ INCLUDE pwned.ld /*\nX := $(shell touch {at}_DESC)\n# \"q\\"}[lines]  # fmt: skip
    board = _board_file(tmp_path, description=description)
    model = tmp_path / "m.tflite"
    model.write_bytes(_hostile_model("x", "y"))  # plain names: only the board is hostile here
    p = _cli("build", model, "--board", board, "-o", tmp_path / "proj", "--run", "--json", cwd=tmp_path)
    _no_pwned(tmp_path, Path.cwd())
    assert "Traceback" not in p.stderr
    if lines == "one" or p.returncode == 0:
        assert p.returncode == 0, p.stderr[-4000:]
        assert json.loads(p.stdout)["run"]["bit_exact"] is True
    else:
        assert [line for line in p.stderr.splitlines() if line.startswith("error:")], p.stderr[-3000:]


@pytest.mark.parametrize("field", ["cpu", "machine", "name"])
def test_hostile_core_cpu_qemu_machine_or_name_runs_nothing(field, tmp_path):
    """A shell command in [core] cpu (CPUFLAGS), [qemu] machine (`make run`) or the board's name (a C string in
    BOARDDEFS): the build either refuses the board file (one error paragraph) or writes the value as one quoted
    word; either way, neither make nor `make run` runs it."""
    at = f"{tmp_path}/PWNED"  # absolute: a failed build deletes its directory, and what ran there with it
    hostile = {"cpu": f"cortex-m7 $(shell touch {at}_CPU) ; touch {at}_CPU2",
               "machine": f"mps2-an500 ; touch {at}_QEMU # $(shell touch {at}_QEMU2)",
               "name": f'x" $(shell touch {at}_NAME) ; touch {at}_NAME2 # \\'}[field]  # fmt: skip
    board = _board_file(tmp_path, **{field: hostile})
    model = tmp_path / "m.tflite"
    model.write_bytes(_hostile_model("x", "y"))
    proj = tmp_path / "proj"
    p = _cli("build", model, "--board", board, "-o", proj, cwd=tmp_path)
    assert "Traceback" not in p.stderr
    if p.returncode == 0 and shutil.which("qemu-system-arm"):
        subprocess.run(["make", "-C", str(proj), "run"], capture_output=True, timeout=120, stdin=subprocess.DEVNULL)
    else:
        assert [line for line in p.stderr.splitlines() if line.startswith("error:")], p.stderr[-3000:]
    _no_pwned(tmp_path, Path.cwd())
