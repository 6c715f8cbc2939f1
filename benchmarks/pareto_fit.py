"""The instruction model of the memory/latency objective (passes/objective.py): measure, fit, check.

    .venv/bin/python benchmarks/pareto_fit.py measure [--minimize] NAME_OR_PATH...   # profile builds under QEMU
    .venv/bin/python benchmarks/pareto_fit.py fit NAME...               # fit on these models' rows -> instr_model.json
    .venv/bin/python benchmarks/pareto_fit.py check NAME...             # predicted vs measured on other models

``measure``: a profile build of each model (`edgemem build --profile`, default passes) run under QEMU
(-icount shift=0: per-operator instruction counts, deterministic); each operator's kernel class, MACs and
output elements (objective.features) next to its measured instructions go to benchmarks/pareto_fit_data.json
(one entry per model, replaced when measured again); with ``--minimize`` the least-arena build instead (its
in-place and overlapping kernels, passes/overlap.py), kept as NAME+min. ``fit``: objective.fit on the named models' rows (NAME and NAME+min), written
to edgemem/passes/instr_model.json with this command. ``check``: for models measured but not fitted on, the
model's predicted instructions per inference (the sum over the build's operators) next to the measured sum.
Names are ../shared/models/<name>.tflite or tests/models/arch/<name>.tflite, or paths.
"""

from __future__ import annotations

import argparse
import json
import math
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from edgemem import pipeline  # noqa: E402
from edgemem.passes import objective  # noqa: E402

DATA = ROOT / "benchmarks" / "pareto_fit_data.json"
SHARED = ROOT.parent.parent / "shared" if (ROOT.parent.parent / "shared").is_dir() else ROOT.parent / "shared"


def model_path(name: str) -> Path:
    for p in (Path(name), SHARED / "models" / f"{name}.tflite", ROOT / "tests" / "models" / "arch" / f"{name}.tflite"):
        if p.is_file():
            return p
    raise SystemExit(f"error: no model {name!r} (a path, ../shared/models/NAME.tflite or tests/models/arch/NAME.tflite)")


def measure(path: Path, board: str, options: pipeline.BuildOptions | None = None) -> dict:
    """Per-operator rows of a profile build of ``path`` under QEMU, and the totals."""
    from edgemem.profiling import profile

    options = options or pipeline.BuildOptions()
    options.profile = True
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "p"
        result = pipeline.build(path, board, out, options)
        prof = profile(out)
    ops = {op.name: op for op in result.graph.ops}
    rows = []
    for step in prof["steps"]:
        op = ops[step["op"]]
        rows.append({"op": op.name, "kind": op.kind, **objective.features(op, result.graph), "instructions": step["instructions"]})
    return {"board": board, "rows": rows, "total_instructions": prof["total_instructions"], "bit_exact": prof.get("bit_exact"),
            "arena_bytes": result.info.arena_bytes, "passes": [s["pass"] for s in result.info.passes.get("sequence", [])]}  # fmt: skip


def _save(data: dict) -> None:
    """One operator a line (the file stays readable in a diff)."""
    parts = []
    for key, d in data.items():
        rows = ",\n".join("   " + json.dumps(r) for r in d["rows"])
        rest = json.dumps({k: v for k, v in d.items() if k != "rows"})[1:-1]
        parts.append(f" {json.dumps(key)}: {{{rest}, \"rows\": [\n{rows}\n ]}}")
    DATA.write_text("{\n" + ",\n".join(parts) + "\n}\n")


def _load() -> dict:
    return json.loads(DATA.read_text()) if DATA.is_file() else {}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("what", choices=("measure", "fit", "check"))
    ap.add_argument("names", nargs="+")
    ap.add_argument("--board", default="stm32f746")
    ap.add_argument("--minimize", action="store_true",
                    help="measure: the least-arena build (in-place and overlapping kernels), kept as NAME+min")
    args = ap.parse_args(argv)
    data = _load()
    if args.what == "measure":
        for name in args.names:
            key = Path(name).stem + ("+min" if args.minimize else "")
            options = pipeline.BuildOptions(opt_seconds=60, max_slowdown=math.inf) if args.minimize else None
            data[key] = measure(model_path(name), args.board, options)
            _save(_load() | {key: data[key]})  # others may have been added meanwhile
            print(f"{key}: {len(data[key]['rows'])} ops, {data[key]['total_instructions']:,} instructions", flush=True)
        return 0
    args.names = [k for n in args.names for k in (n, f"{n}+min") if k in data or k == n]  # with its least-arena build
    missing = [n for n in args.names if n not in data]
    if missing:
        raise SystemExit(f"error: not measured yet: {', '.join(missing)} (run `pareto_fit.py measure` first)")
    if args.what == "fit":
        rows = [r for n in args.names for r in data[n]["rows"]]
        model = objective.InstructionModel(objective.fit(rows), args.board,
                                           "benchmarks/pareto_fit.py fit " + " ".join(args.names), tuple(args.names))  # fmt: skip
        objective.MODEL_JSON.write_text(json.dumps(model.to_json(), indent=1) + "\n")
        for k, c in model.classes.items():
            print(f"{k:28s} {c.per_mac:8.3f}/MAC {c.per_output:8.2f}/out {c.per_call:9.1f}/call  ({c.ops} ops)")
        return 0
    model = objective.InstructionModel.load()
    print("| model | in the fit | operators | measured (sum of operators) | predicted | error |")
    print("|---|---|---:|---:|---:|---:|")
    for name in args.names:
        d = data[name]
        pred = sum(model.predict_op(r) for r in d["rows"])
        meas = sum(r["instructions"] for r in d["rows"])
        print(f"| {name} | {'yes' if name in model.fitted_on else 'no'} | {len(d['rows'])} | {meas:,} | {pred:,.0f} | "
              f"{100 * (pred - meas) / meas:+.1f} % |")  # fmt: skip
    return 0


if __name__ == "__main__":
    sys.exit(main())
