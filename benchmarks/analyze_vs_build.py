"""`edgemem analyze` next to `edgemem build` with the same (default) options, on the shared models and the
converter-made architectures, with the input in the arena and outside it: verdict, arena and RAM floor.

The build side is the pipeline's stages up to the plan (pipeline.plan_only: check, import, lowering, the
orchestrator's memory passes and fallbacks, schedule, plan; no C, no compiler), which is the arena `build`
links. A model whose weights exceed the board's flash is judged and built with --flash 64M (the arena does not
depend on it).

    .venv/bin/python benchmarks/analyze_vs_build.py --out results.jsonl [MODEL.tflite ...]   (one JSON line each)
    .venv/bin/python benchmarks/analyze_vs_build.py --table results.jsonl > benchmarks/analyze_vs_build.md
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from edgemem import pipeline  # noqa: E402
from edgemem.analysis import analyze  # noqa: E402
from edgemem.errors import DoesNotFitError, EdgememError  # noqa: E402
from edgemem.options import BuildOptions  # noqa: E402

BOARD = "stm32f746"
BIG_FLASH = 64 << 20


def default_models() -> list[Path]:
    shared = sorted((ROOT.parent / "shared" / "models").glob("*.tflite"))
    arch = sorted((ROOT / "tests" / "models" / "arch").glob("*.tflite"))
    return sorted(shared + arch, key=lambda p: p.stat().st_size)  # small ones first


def analyze_row(path: Path, outside: bool) -> dict:
    """analyze's verdict, arena and floor (with --flash 64M when the weights exceed the board's flash)."""
    row: dict = {}
    options = BuildOptions(input_outside=outside, compile=False)
    try:
        t0 = time.perf_counter()
        a = analyze(path, BOARD, options=options)
        flash = None
        if a.weights_bytes > a.board_flash_bytes:
            flash = BIG_FLASH
            a = analyze(path, BOARD, flash=flash, options=options)
        row.update(analyze_verdict=a.verdict, analyze_arena=a.arena_bytes, floor=a.ram_floor_bytes,
                   budget=a.ram_budget_bytes, exact=a.arena_exact, unsupported=bool(a.unsupported),
                   analyze_seconds=round(time.perf_counter() - t0, 2), flash=flash)  # fmt: skip
    except EdgememError as exc:
        row.update(analyze_verdict=f"error: {type(exc).__name__}", analyze_arena=None, flash=None)
    return row


def one(path: Path, outside: bool) -> dict:
    row: dict = {"model": path.stem, "input": "outside" if outside else "arena", **analyze_row(path, outside)}
    options = BuildOptions(input_outside=outside, compile=False, flash=row["flash"])
    t0 = time.perf_counter()
    try:
        info = pipeline.plan_only(path, BOARD, options).info
        row.update(build="fits", build_arena=info.arena_bytes)
    except DoesNotFitError as exc:
        row.update(build="does not fit", build_arena=getattr(exc, "arena_bytes", None))
    except EdgememError as exc:
        row.update(build=f"refused: {type(exc).__name__}", build_arena=None)
    row["build_seconds"] = round(time.perf_counter() - t0, 1)
    return row


def _same(r: dict) -> bool:
    """Same verdict (fits or not) and, where the build planned one, the same arena."""
    fits = r.get("build") == "fits"
    if (r.get("analyze_verdict") in ("fits", "may not fit")) != fits:
        return False
    return r.get("build_arena") is None or r.get("analyze_arena") == r.get("build_arena")


def table(lines: list[dict]) -> str:
    out = ["| model | input | analyze verdict | analyze arena | exact? | build | build arena | same | floor | floor <= build |",
           "|---|---|---|---:|---|---|---:|---|---:|---|"]  # fmt: skip
    counts = {"same": 0, "compared": 0, "differ, flagged estimate": 0, "differ, exact": 0, "unsound floor": 0}
    fmt = lambda v: "-" if v is None else f"{v:,}" if isinstance(v, int) else str(v)  # noqa: E731
    for r in lines:
        if r.get("build", "").startswith("refused") or str(r.get("analyze_verdict")).startswith("error"):
            same_text = "-"
        else:
            counts["compared"] += 1
            same = _same(r)
            counts["same"] += same
            if not same:
                counts["differ, exact" if r.get("exact") else "differ, flagged estimate"] += 1
            same_text = "yes" if same else "NO"
        floor_ok = "-"
        if r.get("build_arena") is not None and r.get("floor") is not None:
            floor_ok = "yes" if r["floor"] <= r["build_arena"] else "NO (unsound)"
            counts["unsound floor"] += r["floor"] > r["build_arena"]
        flash = " (--flash 64M)" if r.get("flash") else ""
        exact = "yes" if r.get("exact") else "estimate (float)" if r.get("exact") is False else "-"
        out.append(f"| {r['model']}{flash} | {r['input']} | {r.get('analyze_verdict')} | {fmt(r.get('analyze_arena'))} | "
                   f"{exact} | {r.get('build')} | {fmt(r.get('build_arena'))} | {same_text} | {fmt(r.get('floor'))} | "
                   f"{floor_ok} |")  # fmt: skip
    out.append(f"\nSame verdict and arena: {counts['same']} of {counts['compared']} compared; differ where analyze flags "
               f"its figure an estimate (float operators): {counts['differ, flagged estimate']}; differ, not flagged: "
               f"{counts['differ, exact']}; floor above an arena the build planned: {counts['unsound floor']}.")  # fmt: skip
    return "\n".join(out)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("models", nargs="*", type=Path)
    ap.add_argument("--out", type=Path, help="append one JSON line per model and input placement")
    ap.add_argument("--table", type=Path, help="print the Markdown table of a results file")
    ap.add_argument("--reanalyze", type=Path, help="a results file: analyze's columns again (this tree), builds kept")
    ap.add_argument("--input", choices=("both", "arena", "outside"), default="both")
    args = ap.parse_args()
    if args.table:
        print(table([json.loads(x) for x in args.table.read_text().splitlines() if x.strip()]))
        return
    if args.reanalyze:
        paths = {p.stem: p for p in args.models or default_models()}
        for line in args.reanalyze.read_text().splitlines():
            row = json.loads(line)
            if row["model"] in paths:
                row.update(analyze_row(paths[row["model"]], row["input"] == "outside"))
            print(json.dumps(row), flush=True)
        return
    places = {"both": (False, True), "arena": (False,), "outside": (True,)}[args.input]
    for path in args.models or default_models():
        for outside in places:
            row = one(path, outside)
            line = json.dumps(row)
            print(line, flush=True)
            if args.out:
                with args.out.open("a") as f:
                    f.write(line + "\n")


if __name__ == "__main__":
    main()
