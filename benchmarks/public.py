"""Models people publish: try edgemem on third-party .tflite files as a new user would, and tabulate what happens.

The corpus is listed in benchmarks/public_sources.json (publisher, repository, path, commit, sha256, licence);
the files themselves are third-party and never enter git: they live in benchmarks/public_models/ (git-ignored).

    .venv/bin/python benchmarks/public.py --fetch [--mirrors /work/.mirror]
        re-create benchmarks/public_models/ from local bare mirrors of the repositories
        (<mirrors>/<owner>+<name>/repo, e.g. made with `git clone --mirror https://github.com/<owner>/<name>
        <mirrors>/<owner>+<name>/repo`): `git show <commit>:<path>` of each entry, checked against its sha256;
        entries whose mirror is absent are reported and skipped.
    .venv/bin/python benchmarks/public.py [--timeout 600] [--redo] [names...]
        for each model (smallest first; one at a time, each step a child process with a timeout): its operators,
        whether TFLite Micro runs it and its arena, the smallest shipped board `edgemem analyze` says it fits
        (else stm32f746 with --flash 64M), `edgemem build --run --json` there, and the outcome. Results are kept
        in benchmarks/public_results.json (a model already measured is skipped unless --redo) and the table is
        written to benchmarks/public.md after every model.
    .venv/bin/python benchmarks/public.py --table
        only re-write benchmarks/public.md from benchmarks/public_results.json.
    .venv/bin/python benchmarks/public.py --tflm-only [names...]
        measure again only whether TFLM runs the models (and its arena).
"""

from __future__ import annotations

import argparse
import collections
import hashlib
import json
import os
import re
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
HERE = ROOT / "benchmarks"
SOURCES = HERE / "public_sources.json"
MODELS = HERE / "public_models"
RESULTS = HERE / "public_results.json"
TABLE = HERE / "public.md"
PY = sys.executable
FALLBACK = ("stm32f746", "64M")
VALIDATE = 10  # seeded inputs per built model for `edgemem validate` (set by --validate)
MAX_TRIES = 3  # builds on boards analyze accepts before the fallback  # what a user tries when nothing fits: the default board, flash lifted

# Shipped boards a model can be built for and run under QEMU, smallest RAM (then flash) first
# (`edgemem boards`; rp2040-pico has no QEMU stand-in yet; the F746G-Disco's 8 MB SDRAM is not default RAM).
BOARDS = ["bbc-microbit", "nucleo-f401re", "netduinoplus2", "mps2-an385", "mps2-an386", "nrf52840dk",
          "stm32f746", "mps2-an500", "nucleo-h743zi"]  # fmt: skip


# ---- corpus ----------------------------------------------------------------------------------------


def sources() -> list[dict]:
    return json.loads(SOURCES.read_text())


def fetch(mirrors: Path) -> int:
    """Write each listed file from its repository's local mirror; verify the sha256. Returns the number missing."""
    MODELS.mkdir(exist_ok=True)
    missing = 0
    for s in sources():
        git = mirrors / s["mirror_repo"].replace("/", "+") / "repo"
        dest = MODELS / s["file"]
        if dest.is_file() and hashlib.sha256(dest.read_bytes()).hexdigest() == s["sha256"]:
            continue
        r = subprocess.run(["git", f"--git-dir={git}", "show", f"{s['commit']}:{s['path']}"], capture_output=True)
        if r.returncode != 0 or hashlib.sha256(r.stdout).hexdigest() != s["sha256"]:
            print(f"missing: {s['file']} ({s['mirror_repo']} @ {s['commit'][:8]}: {s['path']})", file=sys.stderr)
            missing += 1
            continue
        dest.write_bytes(r.stdout)
    print(f"{len(sources()) - missing} of {len(sources())} models in {MODELS}")
    return missing


# ---- measuring one model ---------------------------------------------------------------------------


def _env() -> dict:
    env = dict(os.environ)
    env["PYTHONPATH"] = str(ROOT) + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
    return env


def _run(args: list[str], timeout: float) -> tuple[int | None, str, str, float]:
    """(exit code or None on timeout, stdout, stderr, seconds) of a child process."""
    t0 = time.perf_counter()
    try:
        r = subprocess.run(args, capture_output=True, text=True, timeout=timeout, env=_env(), cwd=ROOT)
        return r.returncode, r.stdout, r.stderr, time.perf_counter() - t0
    except subprocess.TimeoutExpired as e:
        out = e.stdout.decode() if isinstance(e.stdout, bytes) else (e.stdout or "")
        err = e.stderr.decode() if isinstance(e.stderr, bytes) else (e.stderr or "")
        return None, out, err, time.perf_counter() - t0


def _paragraph(stderr: str, limit: int = 1500) -> str:
    """edgemem's error paragraph (the last non-empty lines of stderr), on one line, at most ``limit`` chars."""
    lines = [ln.strip() for ln in stderr.strip().splitlines() if ln.strip()]
    text = " ".join(lines[-6:]) if lines else "(no message)"
    for prefix in ("error:", "Error:"):
        text = text.split(prefix, 1)[-1].strip() if text.startswith(prefix) else text
    return text if len(text) <= limit else text[: limit - 3] + "..."


def operators(path: Path) -> dict:
    """Operator counts of subgraph 0 (custom operators by their custom code), subgraph count, I/O types."""
    import tflite  # noqa: PLC0415

    m = tflite.Model.GetRootAsModel(path.read_bytes(), 0)
    names = {v: k for k, v in vars(tflite.BuiltinOperator).items() if not k.startswith("_")}
    types = {v: k for k, v in vars(tflite.TensorType).items() if not k.startswith("_")}
    codes = []
    for i in range(m.OperatorCodesLength()):
        c = m.OperatorCodes(i)
        code = max(c.BuiltinCode(), c.DeprecatedBuiltinCode())
        codes.append("CUSTOM:" + c.CustomCode().decode() if names.get(code) == "CUSTOM" else names.get(code, str(code)))
    sg = m.Subgraphs(0)
    count = collections.Counter(codes[sg.Operators(i).OpcodeIndex()] for i in range(sg.OperatorsLength()))

    def io(idx):
        t = sg.Tensors(int(idx))
        return f"{types.get(t.Type(), t.Type())}{[int(d) for d in t.ShapeAsNumpy()] if t.ShapeLength() else []}"

    return {"ops": dict(count.most_common()), "n_ops": sg.OperatorsLength(), "subgraphs": m.SubgraphsLength(),
            "inputs": [io(i) for i in sg.InputsAsNumpy()], "outputs": [io(i) for i in sg.OutputsAsNumpy()]}


_TFLM = "import json, sys; from edgemem.reference import tflm_arena_bytes; print(json.dumps(tflm_arena_bytes(sys.argv[1])))"


# TFLM alone (zeros in, one invoke), without edgemem.reference: tells a model TFLM cannot run from one that
# edgemem's reference module cannot read.
_TFLM_RAW = """import sys, numpy as np, tflite
from tflite_micro.python.tflite_micro import runtime
n = tflite.Model.GetRootAsModel(open(sys.argv[1], 'rb').read(), 0).Subgraphs(0).InputsLength()
it = runtime.Interpreter.from_file(sys.argv[1], arena_size=64 << 20)
for i in range(n):
    d = it.get_input_details(i)
    it.set_input(np.zeros(d['shape'], d['dtype']), i)
it.invoke()
"""


def _exception(rc: int | None, err: str) -> str:
    last = [ln.strip() for ln in err.strip().splitlines() if ln.strip()][-1:]  # the exception, not the traceback
    return "timeout" if rc is None else (last[0][:160] if last else f"exit {rc}")


def tflm(path: Path, timeout: float) -> dict:
    """Whether TFLite Micro's Python interpreter allocates and invokes the model, and its recorded arena."""
    rc, out, err, _ = _run([PY, "-c", _TFLM, str(path)], timeout)
    if rc == 0:
        return {"runs": True, **json.loads(out.strip().splitlines()[-1])}
    why = _exception(rc, err)
    rc2, out2, err2, _ = _run([PY, "-c", _TFLM_RAW, str(path)], timeout)
    if rc2 == 0:
        return {"runs": True, "reference_error": f"edgemem.reference failed: {why}"}
    return {"runs": False, "error": _exception(rc2, err2), "tflm_log": _tflm_log(out2 + err2)}


def _tflm_log(text: str) -> str:
    """TFLM's own messages before the Python exception (why it refused: a missing kernel, a hybrid model...)."""
    lines = [ln.strip() for ln in text.split("Traceback", 1)[0].splitlines() if ln.strip()]
    return "; ".join(dict.fromkeys(lines))[:300]


def analyses(path: Path, timeout: float) -> tuple[list[dict], dict | None]:
    """`edgemem analyze --json` on each shipped board, smallest RAM first: (the boards' verdicts and figures, the
    refusal that is not "does not fit" -- unsupported or unreadable, the same on every board -- or None)."""
    found = []
    for board in BOARDS:
        rc, out, err, _ = _run([PY, "-m", "edgemem.cli", "analyze", str(path), "--board", board, "--json"], timeout)
        if rc not in (0, 5):
            return found, {"rc": rc, "error": _paragraph(err)}
        try:
            a = json.loads(out)
        except ValueError:
            continue
        found.append({"board": board, **{k: a.get(k) for k in ("verdict", "arena_bytes", "ram_floor_bytes",
                      "ram_budget_bytes", "weights_bytes", "board_flash_bytes")}})  # fmt: skip
    return found, None


_NEEDS = re.compile(r"needs (?:an arena of|at least) ([\d,]+) (?:bytes|B of arena)")


def arena_needed(error: str | None) -> int:
    """The arena a refusal (exit 5) says the model needs, 0 when it names none: a user reads it and skips the
    boards with less RAM."""
    m = _NEEDS.search(error or "")
    return int(m.group(1).replace(",", "")) if m else 0


def candidate_boards(path: Path, timeout: float):
    """Yield, as a user would try them: first each board `edgemem analyze` says the model fits (or may fit),
    smallest RAM first, at most MAX_TRIES; then every other board, smallest RAM first, whose RAM left after its
    stack holds the model's RAM floor (analyze's lower bound; its arena may overestimate the build's), with
    ``--flash 64M`` (external flash) where the weights alone exceed the board's flash; last stm32f746 --flash 64M.
    Boards with less RAM than the arena a refusal named are skipped (send that refusal's text back). Stops at
    the first refusal that is not "does not fit"."""
    found, last = analyses(path, timeout)
    need, tried = 0, set()

    def room(a: dict) -> bool:
        return (a.get("ram_budget_bytes") or 0) >= max(need, a.get("ram_floor_bytes") or 0)

    if last is None:
        first = [a for a in found if a["verdict"] in ("fits", "may fit", "may not fit")][:MAX_TRIES]
        for a in first:
            if room(a):
                tried.add(a["board"])
                need = max(need, arena_needed((yield {"board": a["board"], "flash": None, "verdict": a["verdict"]})))
        for a in found:
            if a["board"] not in tried and room(a):
                tried.add(a["board"])
                flash = FALLBACK[1] if (a.get("weights_bytes") or 0) > (a.get("board_flash_bytes") or 0) else None
                need = max(need, arena_needed((yield {"board": a["board"], "flash": flash, "verdict": a["verdict"],
                                                       "then": True})))  # fmt: skip
    if FALLBACK[0] not in tried:
        yield {"board": FALLBACK[0], "flash": FALLBACK[1], "analyze": last}


def build(path: Path, board: dict, timeout: float, out_dir: Path) -> dict:
    args = [PY, "-m", "edgemem.cli", "build", "--board", board["board"], str(path), "-o", str(out_dir), "--force",
            "--run", "--json"]  # fmt: skip
    if board.get("flash"):
        args += ["--flash", board["flash"]]
    rc, out, err, seconds = _run(args, timeout)
    shown = [f"out/{path.stem}" if a == str(out_dir) else a.replace(str(ROOT) + "/", "") for a in args[3:]]
    res = {"rc": rc, "seconds": round(seconds, 1), "command": "edgemem " + " ".join(shown)}
    if rc is None:
        res["error"] = f"no result within {timeout:.0f} s (timeout)"
        return res
    try:
        data = json.loads(out)
    except ValueError:
        data = None
    if data:
        run = data.get("run") or {}
        res.update(arena_bytes=data.get("arena_bytes"), lower_bound_bytes=data.get("lower_bound_bytes"),
                   flash_bytes=data.get("flash_bytes"), total_ram_bytes=run.get("total_ram_bytes"),
                   instructions=run.get("instructions"), oracle=run.get("oracle"), bit_exact=run.get("bit_exact"),
                   max_abs_diff=run.get("max_abs_diff"), matches_reference=run.get("matches_reference"),
                   arena_high_water_bytes=run.get("arena_high_water_bytes"),
                   stack_reserved_bytes=data.get("stack_reserved_bytes"), peak_stack_bytes=run.get("peak_stack_bytes"),
                   stack_fallback=((data.get("stack") or {}).get("default_overflowed") or {}).get("default_stack_bytes"))  # fmt: skip
    if rc != 0:
        res["error"] = _paragraph(err)
    elif VALIDATE:
        res["validate"] = validate(out_dir, timeout)
    return res


def validate(project: Path, timeout: float) -> dict:
    """`edgemem validate --count VALIDATE`: more seeded inputs than the build's one, against the same oracle."""
    rc, out, err, seconds = _run([PY, "-m", "edgemem.cli", "validate", str(project), "--count", str(VALIDATE),
                                  "--json"], timeout)  # fmt: skip
    res = {"rc": rc, "seconds": round(seconds, 1)}
    try:
        v = json.loads(out)
        res.update({k: v.get(k) for k in ("count", "bit_exact_count", "matching_count", "max_abs_diff", "all_match")})
    except ValueError:
        res["error"] = "timeout" if rc is None else _paragraph(err)
    return res


def measure(path: Path, timeout: float) -> dict:
    import shutil  # noqa: PLC0415
    import tempfile  # noqa: PLC0415

    head = subprocess.run(["git", "-C", str(ROOT), "rev-parse", "--short", "HEAD"], capture_output=True, text=True)
    r = {"sha256": hashlib.sha256(path.read_bytes()).hexdigest(), "bytes": path.stat().st_size,
         "edgemem_commit": head.stdout.strip() or "?"}
    try:
        r.update(operators(path))
    except Exception as e:  # noqa: BLE001 (a model the flatbuffer bindings cannot read is a result too)
        r["ops_error"] = f"{type(e).__name__}: {e}"
    r["tflm"] = tflm(path, min(timeout, 300))
    # As a user would: the smallest board analyze accepts; if the build then says it does not fit (exit 5),
    # the next one analyze accepts, at most MAX_TRIES builds, then the fallback.
    r["attempts"] = []
    tmp = Path(tempfile.mkdtemp(prefix="edgemem-public-"))
    try:
        boards = candidate_boards(path, 120)
        target = next(boards)
        while True:
            r["target"], r["build"] = target, build(path, target, timeout, tmp / "p")
            r["attempts"].append({"board": target["board"], "fallback": bool(target.get("flash")),
                                  "analyze": target.get("verdict"),
                                  "rc": r["build"]["rc"], "error": r["build"].get("error")})
            if r["build"]["rc"] != 5:
                break
            try:
                target = boards.send(r["build"].get("error"))
            except StopIteration:
                break
    finally:
        shutil.rmtree(tmp, ignore_errors=True)  # our own temporary directory, nothing of the user's
    return r


def also(r: dict, path: Path, board: str, timeout: float) -> None:
    """One more build of a measured model, on ``board`` with its own flash, kept under r["also"][board]."""
    import shutil  # noqa: PLC0415
    import tempfile  # noqa: PLC0415

    head = subprocess.run(["git", "-C", str(ROOT), "rev-parse", "--short", "HEAD"], capture_output=True, text=True)
    tmp = Path(tempfile.mkdtemp(prefix="edgemem-public-"))
    try:
        b = build(path, {"board": board, "flash": None}, timeout, tmp / "p")
    finally:
        shutil.rmtree(tmp, ignore_errors=True)  # our own temporary directory, nothing of the user's
    r.setdefault("also", {})[board] = {**b, "edgemem_commit": head.stdout.strip() or "?"}


# ---- table -----------------------------------------------------------------------------------------


def _ops_text(ops: dict, limit: int = 6) -> str:
    items = [f"{k} {v}" for k, v in ops.items()]
    return ", ".join(items[:limit]) + (f", +{len(items) - limit} more" if len(items) > limit else "")


def _outcome(b: dict) -> str:
    v = b.get("validate") or {}
    if b.get("rc") == 0 and v.get("count") and not v.get("all_match"):
        return (f"**WRONG** on {v['count'] - v['matching_count']} of {v['count']} seeds "
                f"(max diff {v.get('max_abs_diff')})")  # fmt: skip
    if b.get("rc") == 0 and b.get("matches_reference"):
        seeds = f", {v['bit_exact_count']}/{v['count']} seeds bit-exact" if v.get("count") else ""
        seeds += ", validate: " + v["error"][:60] if v.get("error") else ""
        return ("bit-exact" if b.get("bit_exact") else f"matches (max diff {b.get('max_abs_diff')})") + seeds
    if b.get("rc") == 0:
        return f"**WRONG** (max diff {b.get('max_abs_diff')})"
    if b.get("rc") == 8:
        return f"**differs** (exit 8, max diff {b.get('max_abs_diff')})"
    return "-" if b.get("rc") is None else f"exit {b['rc']}"


def _short(text: str, limit: int = 300) -> str:
    """A message for a table cell: long quoted tensor names and paths cut, the whole cut to ``limit``."""
    text = re.sub(r"'([^']{28})[^']{8,}'", r"'\1...'", text)
    text = re.sub(r"/tmp/edgemem-public-[^ ]*", "<project>", text)
    text = text if len(text) <= limit else text[: limit - 3] + "..."
    return text.replace("|", "\\|")


def _num(v) -> str:
    return f"{v:,}" if isinstance(v, int) else "-"


def table(results: dict, timeout: float) -> str:
    src = {s["file"]: s for s in sources()}
    rows = sorted(results.items(), key=lambda kv: (src.get(kv[0], {}).get("publisher", ""), kv[0]))
    built = [r for _, r in rows if r.get("build", {}).get("rc") == 0]
    exact = [r for r in built if r["build"].get("matches_reference")]
    pubs = {src[f]["publisher"] for f in results if f in src}
    lines = [
        "# Models people publish: edgemem on third-party .tflite files",
        "",
        f"Produced by `.venv/bin/python benchmarks/public.py --timeout {timeout:.0f}` (models in "
        "benchmarks/public_models/, re-created by `benchmarks/public.py --fetch`; sources and licences in "
        "benchmarks/public_sources.json; raw results in benchmarks/public_results.json).",
        "",
        f"{len(results)} of {len(src)} listed models measured, from {len(pubs)} publishers: TFLite Micro runs "
        f"{sum(1 for _, r in rows if r.get('tflm', {}).get('runs'))}; edgemem builds and runs {len(built)}, of which "
        f"{len(exact)} match the oracle. edgemem commit(s) measured: "
        + ", ".join(f"{c} ({n} models)" for c, n in collections.Counter(
            r.get("edgemem_commit", "?") for _, r in rows).most_common()) + ".",
        "",
        "Each model, as a user would try: `edgemem analyze` on each shipped board, smallest RAM first; `edgemem "
        f"build` on the boards it says the model fits or may fit (at most {MAX_TRIES}); if none builds, on the other "
        "boards, smallest RAM first, whose RAM left after the stack holds the model's RAM floor, with `--flash "
        f"{FALLBACK[1]}` (external flash) where the weights alone exceed the board's flash; boards with less RAM "
        "than the arena a refusal named are skipped; last "
        f"{FALLBACK[0]} with `--flash {FALLBACK[1]}`. Each build is `edgemem build --board B MODEL "
        "--run --json` (QEMU, seeded input, compared with TFLite Micro or LiteRT where TFLM cannot run the model), "
        f"one at a time with a {timeout:.0f} s timeout. *TFLM arena* = TFLM's recorded non-persistent (head) / total "
        "arena in its Python interpreter (`edgemem.reference.tflm_arena_bytes`), the figure edgemem's arena competes "
        "with. *instr.* = instructions of one edgemem inference under QEMU (-icount); TFLM's instruction count "
        "on the device is not in this table (it needs a TFLM firmware build per model, not cheap here).",
        "",
        "| publisher | file | KB | ops (subgraph 0) | TFLM runs | board | edgemem builds | vs oracle | edgemem arena "
        "| TFLM arena head / total | instr. | failure (edgemem's message, shortened) |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for f, r in rows:
        s, t, b, tg = src.get(f, {}), r.get("tflm", {}), r.get("build", {}), r.get("target", {})
        ops = _ops_text(r.get("ops", {})) + (f" ({r['subgraphs']} subgraphs)" if r.get("subgraphs", 1) > 1 else "")
        tf = "yes" if t.get("runs") else f"no: {_short(t.get('tflm_log') or t.get('error', '?'), 160)}"
        tf += f" ({_short(t['reference_error'], 90)})" if t.get("reference_error") else ""
        tarena = f"{_num(t.get('head'))} / {_num(t.get('total'))}" if t.get("head") else "-"
        board = tg.get("board", "?") + (f" --flash {tg['flash']}" if tg.get("flash") else "")
        refused = [f"{a['board']}" + (f" --flash {FALLBACK[1]} (analyze at its own flash: " if a.get("fallback")
                   else " (analyze: ") + f"{a.get('analyze') or '?'})" for a in r.get("attempts", [])[:-1]]  # fmt: skip
        board += f"; build exit 5 first on {', '.join(refused)}" if refused else ""
        if b.get("stack_fallback"):
            board += (f"; stack {b['stack_reserved_bytes']:,} B from the call graph (edgemem's own fallback: the "
                      f"default {b['stack_fallback']:,} B did not link)")  # fmt: skip
        builds = "yes" if b.get("rc") in (0, 8) else ("timeout" if b.get("rc") is None and b else "no")
        why = _short(b.get("error", "")) if b.get("rc") != 0 else ""
        lines.append(f"| {s.get('publisher', '?')} | {f} | {r.get('bytes', 0) / 1024:,.0f} | {ops} | {tf} | {board} "
                     f"| {builds} | {_outcome(b)} | {_num(b.get('arena_bytes'))} | {tarena} "
                     f"| {_num(b.get('instructions'))} | {why} |")  # fmt: skip
    misfit = [(f, a) for f, r in rows for a in r.get("attempts", []) if a["rc"] == 5 and a.get("analyze") == "fits"]
    if misfit:
        lines += ["", "## `edgemem analyze` said \"fits\", `edgemem build` said it does not (exit 5)", ""]
        lines += [f"- {f} on {a['board']}: {_short(a['error'] or '', 400)}" for f, a in misfit]
    wrong = [(f, r) for f, r in rows if r.get("build", {}).get("rc") in (0, 8)
             and (not r["build"].get("matches_reference") or not (r["build"].get("validate") or {}).get("all_match", True))]
    if wrong:
        lines += ["", "## Builds whose outputs differ from the oracle (reproduce)", ""]
        for f, r in wrong:
            b, v = r["build"], r["build"].get("validate") or {}
            command = re.sub(r"-o /tmp/\S+", f"-o out/{Path(f).stem}", b["command"])
            lines.append(f"- {f}: `{command}` (exit {b['rc']}, max diff {b.get('max_abs_diff')}, "
                         f"edgemem {r.get('edgemem_commit', '?')})")
            if v.get("count"):
                lines.append(f"  then `edgemem validate out/{Path(f).stem} --count {v['count']}`: "
                             f"{v['matching_count']} of {v['count']} match, max diff {v.get('max_abs_diff')}")
    more = [(f, b) for f, r in rows for b in r.get("also", {}).values()]
    if more:
        lines += ["", "## The same models on another board (`benchmarks/public.py --also BOARD NAME`)", ""]
        for f, b in more:
            stack = f"stack {_num(b.get('stack_reserved_bytes'))} B reserved, painted peak {_num(b.get('peak_stack_bytes'))} B"
            if b.get("stack_fallback"):
                stack += (f" (edgemem's own fallback: the default {b['stack_fallback']:,} B stack did not link, the "
                          "reservation is the call graph's bound + margin)")  # fmt: skip
            lines.append(f"- {f}: `{b['command']}` at edgemem {b.get('edgemem_commit', '?')}: exit {b['rc']}, "
                         f"{_outcome(b)}, arena {_num(b.get('arena_bytes'))} B, {stack}, total RAM "
                         f"{_num(b.get('total_ram_bytes'))} B, {_num(b.get('instructions'))} instructions"
                         + (f"; {_short(b['error'])}" if b.get("rc") != 0 and b.get("error") else ""))  # fmt: skip
    earlier = [(f, e) for f, r in rows for e in r.get("earlier", [])]
    if earlier:
        lines += ["", "## Wrong answers measured with an earlier edgemem commit (fixed since)", ""]
        lines += [f"- {f} at edgemem {e['edgemem_commit']}: `{e['command']}` exit {e['rc']}, max diff "
                  f"{e['max_abs_diff']} ({e['note']})" for f, e in earlier]  # fmt: skip
    return "\n".join(lines) + "\n"


# ---- main ------------------------------------------------------------------------------------------


def main(argv=None) -> int:
    global VALIDATE  # noqa: PLW0603 (one option read by build(); the script runs once per process)
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("names", nargs="*", help="model files (names in public_sources.json) to measure; default all")
    ap.add_argument("--fetch", action="store_true", help="re-create public_models/ from local mirrors, then stop")
    ap.add_argument("--mirrors", type=Path, default=Path("/work/.mirror"), help="folder of <owner>+<name>/repo mirrors")
    ap.add_argument("--timeout", type=float, default=600, help="seconds per build (default 600)")
    ap.add_argument("--redo", action="store_true", help="measure again models already in public_results.json")
    ap.add_argument("--validate", type=int, default=VALIDATE, help="seeded inputs per built model (0: none)")
    ap.add_argument("--tflm-only", action="store_true", help="measure again only the TFLM column of the models")
    ap.add_argument("--table", action="store_true", help="only re-write public.md from public_results.json")
    ap.add_argument("--also", metavar="BOARD", help="build the named models on BOARD too (its own flash), kept beside "
                    "their row: e.g. what the default board does with a model the procedure built elsewhere")  # fmt: skip
    a = ap.parse_args(argv)
    VALIDATE = a.validate
    if a.fetch:
        return 1 if fetch(a.mirrors) else 0
    results = json.loads(RESULTS.read_text()) if RESULTS.is_file() else {}
    if a.tflm_only:
        for f in a.names or list(results):
            results[f]["tflm"] = tflm(MODELS / f, 300)
        RESULTS.write_text(json.dumps(results, indent=1, sort_keys=True) + "\n")
    elif a.also:
        for f in a.names:
            also(results[f], MODELS / f, a.also, a.timeout)
            RESULTS.write_text(json.dumps(results, indent=1, sort_keys=True) + "\n")
    elif not a.table:
        todo = [s for s in sources() if (not a.names or s["file"] in a.names) and (MODELS / s["file"]).is_file()]
        for s in sorted(todo, key=lambda s: s["bytes"]):
            if s["file"] in results and results[s["file"]].get("sha256") == s["sha256"] and not a.redo:
                continue
            print(f"{time.strftime('%H:%M:%S')} {s['file']} ({s['bytes']:,} B)", flush=True)
            kept = {k: v for k, v in results.get(s["file"], {}).items() if k in ("earlier", "also")}  # history stays
            results[s["file"]] = {**measure(MODELS / s["file"], a.timeout), **kept}
            b = results[s["file"]]["build"]
            print(f"    -> {results[s['file']]['target']['board']}: {_outcome(b)} {b.get('error', '')[:160]}", flush=True)
            RESULTS.write_text(json.dumps(results, indent=1, sort_keys=True) + "\n")
            TABLE.write_text(table(results, a.timeout))
    TABLE.write_text(table(results, a.timeout))
    return 0


if __name__ == "__main__":
    sys.exit(main())
