"""Build time (issue 33): `edgemem build` with the default options (no --passes) on every shared model, each in a
fresh process as a user runs it, wall seconds (median of --repeat runs) and the build's own stage times
(edgemem.json's "stage_seconds", from the median run).

    .venv/bin/python benchmarks/build_time.py [--repeat 3] [--label after] [names...]

Raw figures go to benchmarks/build_time_<label>.json; benchmarks/build_time.md is written from every such file
there (one table per label, and a before/after table of the medians when "baseline" and another label exist).
Boards: stm32f746 for all; the two models larger than it are planned as the tests plan them:
tflm_xtensa_mobilenet_v2_224_int8 with --flash 64M (its arena fits the board only with the patch stage the
orchestrator's fallback picks: "the MobileNetV2-224 patch build", tests/test_autobuild.py) and
tinyengine_mcunetv2_large with --ram 4M --flash 4M (tests/test_more_models.py).
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
HERE = Path(__file__).resolve().parent
SHARED = ROOT.parent / "shared" / "models"  # next to the repository (a worktree: /work/shared; else --models)
BOARD = "stm32f746"
EXTRA = {  # model -> extra build options (the models larger than the board, planned as the tests plan them)
    "tflm_xtensa_mobilenet_v2_224_int8": ["--flash", "64M"],
    "tinyengine_mcunetv2_large": ["--ram", "4M", "--flash", "4M"],
}
PATCH_MODEL = "tflm_xtensa_mobilenet_v2_224_int8"
TARGET_S, PATCH_TARGET_S = 5.0, 15.0
STAGES = ("check", "import", "lower", "memory passes", "graph", "schedule", "plan", "kernels", "C sources", "firmware",
          "board image", "report")  # fmt: skip


def shown(model: str) -> str:
    """The command as a user types it."""
    return " ".join(["edgemem", "build", "--board", BOARD, *EXTRA.get(model, []), f"{model}.tflite"])


def command(path: Path, out: Path) -> list[str]:
    return ["edgemem", "build", "--board", BOARD, *EXTRA.get(path.stem, []), str(path), "-o", str(out), "--force"]


def one_build(path: Path, out: Path) -> dict:
    """One `edgemem build` in its own process: wall and CPU seconds (the process and its compilers), its stages."""
    cmd = [sys.executable, "-m", "edgemem.cli", *command(path, out)[1:]]
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.perf_counter()
    proc = subprocess.run(cmd, capture_output=True, text=True, cwd=ROOT, env={**os.environ, "PYTHONPATH": str(ROOT)})
    wall = time.perf_counter() - t0
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    row = {"wall": round(wall, 3), "cpu": round(after.ru_utime - before.ru_utime + after.ru_stime - before.ru_stime, 3),
           "exit": proc.returncode}  # fmt: skip
    report = out / "edgemem.json"
    if proc.returncode == 0 and report.is_file():
        info = json.loads(report.read_text())
        row.update(stages=info.get("stage_seconds", {}), build_seconds=info.get("build_seconds"),
                   arena=info.get("arena_bytes"))  # fmt: skip
    else:
        row["error"] = (proc.stderr or proc.stdout).strip()[-300:]
    return row


def measure(path: Path, repeat: int, keep: Path | None) -> dict:
    """``repeat`` builds; with ``keep`` each run's project stays in keep/<model>/<run> (to diff the outputs)."""
    with tempfile.TemporaryDirectory(prefix="edgemem-bt-") as tmp:
        base = keep / path.stem if keep else Path(tmp)
        runs = [one_build(path, base / str(i)) for i in range(repeat)]
    walls = sorted(r["wall"] for r in runs)
    median = statistics.median(walls)
    middle = min(runs, key=lambda r: abs(r["wall"] - median))
    return {"model": path.stem, "command": shown(path.stem), "runs": runs,
            "wall_median": round(median, 3), "cpu_median": round(statistics.median(r["cpu"] for r in runs), 3),
            "stages": middle.get("stages", {}), "arena": middle.get("arena"), "exit": middle["exit"],
            "error": middle.get("error")}  # fmt: skip


def _stage_cells(stages: dict) -> list[str]:
    return [f"{stages[s]:.2f}" if s in stages else "" for s in STAGES]


def _table(label: str, data: dict) -> list[str]:
    lines = [f"### {label}", "", f"{data['date']}, commit {data['commit']}, load average {data['load']:.1f} at the start, "
             f"{data['repeat']} runs per model.", "",
             "| model | wall s (median) | CPU s | runs (wall s) | " + " | ".join(STAGES) + " |",
             "|---|---:|---:|---|" + "---:|" * len(STAGES)]  # fmt: skip
    for r in data["models"]:
        runs = ", ".join(f"{x['wall']:.1f}" for x in r["runs"])
        wall = f"{r['wall_median']:.2f}" if r["exit"] == 0 else f"exit {r['exit']}"
        lines.append(f"| {r['model']} | {wall} | {r['cpu_median']:.2f} | {runs} | " + " | ".join(_stage_cells(r["stages"])) + " |")
    return lines + [""]


def _comparison(before: dict, after: dict, label: str) -> list[str]:
    old = {r["model"]: r for r in before["models"]}
    lines = [f"### baseline -> {label}: medians", "",
             f"| model | command | wall s baseline | wall s {label} | CPU s baseline | CPU s {label} | CPU change | "
             "target (wall s) | met |", "|---|---|---:|---:|---:|---:|---:|---:|---|"]  # fmt: skip
    for r in after["models"]:
        target = PATCH_TARGET_S if r["model"] == PATCH_MODEL else TARGET_S
        b = old.get(r["model"])
        base = f"{b['wall_median']:.2f} | " if b else " | "
        base_cpu = f"{b['cpu_median']:.2f}" if b else ""
        change = f"{(r['cpu_median'] / b['cpu_median'] - 1) * 100:+.0f} %" if b and b["cpu_median"] else ""
        met = "yes" if r["exit"] == 0 and r["wall_median"] <= target else "no"
        lines.append(f"| {r['model']} | `{shown(r['model'])}` | {base}{r['wall_median']:.2f} | {base_cpu} | "
                     f"{r['cpu_median']:.2f} | {change} | {target:.0f} | {met} |")  # fmt: skip
    return lines + [""]


def write_markdown() -> None:
    runs = {p.stem.removeprefix("build_time_"): json.loads(p.read_text()) for p in sorted(HERE.glob("build_time_*.json"))}
    lines = ["# Build time (issue 33)", "",
             "Command: `.venv/bin/python benchmarks/build_time.py --repeat 3 --label LABEL` (this file is rewritten "
             "from every benchmarks/build_time_LABEL.json). Each build is `edgemem build --board stm32f746 MODEL` "
             "(the default options: no --passes, the orchestrator) in a fresh process, as a user runs it: "
             "wall seconds include Python's start and TVM's import. Targets: <= 5 s per shared model, <= 15 s for "
             f"the MobileNetV2-224 patch build ({PATCH_MODEL} with --flash 64M, which fits the board's RAM only with "
             "the patch stage the orchestrator's fallback chooses). tinyengine_mcunetv2_large is planned with "
             "--ram 4M --flash 4M as in tests/test_more_models.py. The machine has 2 cores shared with other "
             "sessions: CPU seconds (the process and its compilers) are the steadier figure. Stage columns: the "
             "build's own edgemem.json stage_seconds of the median run.", ""]  # fmt: skip
    later = [k for k in runs if k != "baseline"]
    if "baseline" in runs:
        for label in later:
            lines += _comparison(runs["baseline"], runs[label], label)
    for label, data in runs.items():
        lines += _table(label, data)
    notes = HERE / "build_time_notes.md"
    if notes.is_file():
        lines += [notes.read_text()]
    (HERE / "build_time.md").write_text("\n".join(lines))


def cpu_stages(path: Path) -> None:
    """One build in this process (the first in it pays the imports) with every stage timed in CPU seconds of this process (its threads; not the
    compilers): the figures that load on the shared machine leaves alone, to compare two versions back to back."""
    import types

    t0 = time.process_time()
    sys.path.insert(0, str(ROOT))
    from edgemem import pipeline

    imported = time.process_time() - t0
    pipeline.time = types.SimpleNamespace(perf_counter=time.process_time)  # Stages times with it
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    with tempfile.TemporaryDirectory(prefix="edgemem-bt-") as tmp:
        options = pipeline.BuildOptions(flash=64 << 20) if path.stem == PATCH_MODEL else None
        result = pipeline.build(path, BOARD, Path(tmp) / "p", options)
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    stages = {k: round(v, 2) for k, v in result.info.stage_seconds.items()}
    print(json.dumps({"model": path.stem, "import_cpu": round(imported, 2), "stages_cpu": stages,
                      "compilers_cpu": round(after.ru_utime - before.ru_utime + after.ru_stime - before.ru_stime, 2)}))  # fmt: skip


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--label", default="after")
    ap.add_argument("--models", type=Path, default=SHARED)
    ap.add_argument("--keep", type=Path, help="keep every run's project in KEEP/<model>/<run>")
    ap.add_argument("--cpu-stages", action="store_true", help="per-stage CPU seconds of one in-process build each")
    ap.add_argument("--markdown-only", action="store_true", help="rewrite build_time.md from the JSON files only")
    ap.add_argument("names", nargs="*")
    args = ap.parse_args()
    if args.cpu_stages:
        for name in args.names:
            cpu_stages(args.models / f"{name}.tflite")
        return
    if not args.markdown_only:
        paths = [args.models / f"{n}.tflite" for n in args.names] or sorted(args.models.glob("*.tflite"))
        commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True, cwd=ROOT).stdout.strip()
        data = {"date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()), "commit": commit, "load": os.getloadavg()[0],
                "repeat": args.repeat, "models": []}  # fmt: skip
        for path in paths:
            row = measure(path, args.repeat, args.keep)
            data["models"].append(row)
            print(f"{row['model']}: {row['wall_median']:.2f} s wall, {row['cpu_median']:.2f} s CPU, exit {row['exit']}",
                  flush=True)  # fmt: skip
            (HERE / f"build_time_{args.label}.json").write_text(json.dumps(data, indent=1))
    write_markdown()


if __name__ == "__main__":
    main()
