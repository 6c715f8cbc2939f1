"""Memory-pass orchestration (OPASS) against its baselines, per shared model that lowers.

For each model: the planned arena with no optional pass, with TVM's default Relax pipeline (its graph
part, planned by edgemem, plus the largest fused kernel's internal scratch; n/a where TVM fails; TVM's
own storage plan beside it), with edgemem's fixed sequence, with greedy (the best single pass each
round) and with the orchestrator (minimizing: no RAM target), the sequence it chose, its trials and
seconds.

Run 1 uses an empty effect table; its observations are merged into a table (``learn``); run 2 uses that
table (in-sample) and run 3 a table learned from the *other* models only (leave-one-out: the model was
never seen). Fewer trials in runs 2/3 at the same arena is what the learned table buys.

    .venv/bin/python benchmarks/passes.py                  # writes benchmarks/passes.md
    .venv/bin/python benchmarks/passes.py --learn          # ... and edgemem/passes/effects.json
    .venv/bin/python benchmarks/passes.py --qemu           # ... and builds + runs each model under QEMU
    .venv/bin/python benchmarks/passes.py --qemu --unlimited-seconds 30   # as passes.md: the "unlimited" runs capped
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from edgemem.passes.effects import EffectTable, learn  # noqa: E402
from edgemem.passes.orchestrate import orchestrate  # noqa: E402
from edgemem.device_run import run as run_on_device
from pass_baselines import EXTRA  # noqa: E402  (benchmarks/pass_baselines.py: greedy)

MODELS = ROOT.parent / "shared" / "models"


def lowered_models(names: list[str] | None):
    from edgemem.frontend.tflite_import import import_tflite
    from edgemem.passes.lower import lower_to_kernels

    out, skipped = [], []
    for path in sorted(MODELS.glob("*.tflite")):
        if names and path.stem not in names:
            continue
        try:
            out.append((path, lower_to_kernels(import_tflite(path).relax_mod)))
        except Exception as exc:  # a model the pipeline does not lower yet
            skipped.append((path.stem, f"{type(exc).__name__}: {str(exc).splitlines()[0][:120]}"))
    return out, skipped


def run(mod, name, table, seconds, baselines=()):
    t0 = time.perf_counter()
    r = orchestrate(mod, table=table, time_budget=seconds, baselines=baselines, model_name=name, extra_baselines=EXTRA)
    return r, time.perf_counter() - t0


def qemu_check(path: Path, seconds: float) -> str:
    """Build with the orchestrator minimizing (no early stop at the board's RAM) and run one seeded
    input under QEMU against TFLite Micro."""
    import tempfile

    import numpy as np

    from edgemem import pipeline
    from edgemem.reference import seeded_inputs, tflm_outputs

    with tempfile.TemporaryDirectory() as tmp:
        try:
            result = pipeline.build(path, "stm32f746", Path(tmp) / "p", pipeline.BuildOptions(opt_seconds=seconds, opt_margin=1.0))
        except Exception as exc:
            return f"build: {type(exc).__name__}"
        x = seeded_inputs(path, 0)
        res = run_on_device(Path(tmp) / "p", x)
        same = all(np.array_equal(a, b) for a, b in zip(res["output_arrays"], tflm_outputs(path, x)))
        return f"{result.info.arena_bytes:,} {'bit-exact' if same else 'DIFFERS'}"


def _kb(figures: dict) -> str:
    return "n/a" if figures.get("arena_bytes") is None else f"{figures['arena_bytes']:,}"


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--time", type=float, default=5.0, help="orchestrator time budget per run (the build's default)")
    ap.add_argument("--learn", action="store_true", help="write the learned table to edgemem/passes/effects.json")
    ap.add_argument("--qemu", action="store_true", help="also build each model (orchestrated) and run it under QEMU")
    ap.add_argument("--models", nargs="*", help="only these model stems")
    ap.add_argument("--unlimited-seconds", type=float, default=float("inf"),
                    help="cap the 'without a time budget' runs (the catalogue grew: unbounded, the large models take hours)")
    ap.add_argument("--out", default=str(ROOT / "benchmarks" / "passes.md"))
    args = ap.parse_args()

    models, skipped = lowered_models(args.models)
    first = {}
    for path, mod in models:
        first[path.stem] = run(mod, path.stem, EffectTable(), args.time, ("none", "tvm_default", "fixed", "greedy"))
        print(f"run 1 {path.stem}: {first[path.stem][0].report()}", file=sys.stderr)
    # the same three runs without a time budget: deterministic trial counts, complete observations
    cap = args.unlimited_seconds
    unlimited = {path.stem: run(mod, path.stem, EffectTable(), cap) for path, mod in models}
    table = learn(r.observations for r, _ in unlimited.values())
    counts = {}
    for path, mod in models:
        others = learn(r.observations for n, (r, _) in unlimited.items() if n != path.stem)
        counts[path.stem] = (unlimited[path.stem], run(mod, path.stem, table, cap), run(mod, path.stem, others, cap))
        print(f"unlimited {path.stem}: " + " / ".join(str(r.trials) for r, _ in counts[path.stem]), file=sys.stderr)
    second, unseen, checks = {}, {}, {}
    for path, mod in models:
        second[path.stem] = run(mod, path.stem, table, args.time)
        others = learn(r.observations for n, (r, _) in first.items() if n != path.stem)
        unseen[path.stem] = run(mod, path.stem, others, args.time)
        if args.qemu:
            checks[path.stem] = qemu_check(path, args.time)
        print(f"runs 2/3 {path.stem}: {second[path.stem][0].trials} / {unseen[path.stem][0].trials} trials", file=sys.stderr)
    if args.learn:
        print(f"wrote {table.save()}", file=sys.stderr)
    text = render(models, skipped, first, second, unseen, checks, args) + render_counts(counts, cap)
    if args.out == "-":
        print(text)
    else:
        Path(args.out).write_text(text)


def render(models, skipped, first, second, unseen, checks, args) -> str:
    cmd = "benchmarks/passes.py" + (" --learn" if args.learn else "") + (" --qemu" if args.qemu else "")
    cmd += f" --unlimited-seconds {args.unlimited_seconds:g}" if args.unlimited_seconds != float("inf") else ""
    lines = [
        "# Memory-pass orchestration (OPASS) vs baselines",
        "",
        f"`.venv/bin/python {cmd}` (orchestrator time budget {args.time:g} s per run, seed 0, no RAM target:",
        "it minimizes until nothing is left to try or a budget ends). Arena = planned bytes of the lowered",
        "module after the best operator order (catalogue.evaluate, alignment 4). Baselines: no optional pass;",
        "TVM's default Relax pipeline; edgemem's fixed sequence (fold_pad, inplace_depthwise,",
        "inplace_elementwise); greedy (best single pass each round, while it improves). `search` is the",
        "orchestrator's own best before the baselines are compared (the result takes a baseline's only when",
        "it is strictly better: `from`). Trials = pass applications actually made (cache misses), run 1 with",
        "an empty effect table, run 2 with the table learned from run 1 on all models, run 3 (LOO) with a",
        "table learned from the other models only.",
        "",
        "| model | ops | none | TVM default | TVM's own plan | fixed | greedy | search | orchestrated | from | sequence | run 1 trials (to best) | run 1 s | stop | run 2 trials | run 2 arena | run 2 s | LOO trials | LOO arena |"
        + (" QEMU: build (minimizing) arena, bit-exact |" if checks else ""),
        "|---|---:|---:|---|---:|---:|---:|---:|---:|---|---|---:|---:|---|---:|---:|---:|---:|---:|" + ("---|" if checks else ""),
    ]  # fmt: skip
    totals = [0, 0, 0]
    wins = worse = 0
    for path, _ in models:
        name = path.stem
        r1, s1 = first[name]
        r2, s2 = second[name]
        r3, _ = unseen[name]
        b = r1.baselines
        tvm = b["tvm_default"]
        tvm_cell = (f"{_kb(tvm)} ({tvm['planned_arena_bytes']:,} + {tvm['fused_kernel_scratch_bytes']:,})"
                    if tvm.get("arena_bytes") is not None else "n/a")  # fmt: skip
        own = f"{tvm['tvm_storage_bytes']:,}" if tvm.get("tvm_storage_bytes") is not None else "n/a"
        seq = " → ".join(s.name for s in r1.sequence) or "—"
        best_baseline = min(v["arena_bytes"] for v in b.values() if v.get("arena_bytes") is not None)
        wins += r1.figures["arena_bytes"] <= best_baseline
        worse += r2.figures["arena_bytes"] > r1.figures["arena_bytes"] or r3.figures["arena_bytes"] > r1.figures["arena_bytes"]
        totals = [totals[0] + r1.trials, totals[1] + r2.trials, totals[2] + r3.trials]
        row = (f"| {name} | {r1.figures['ops']} | {_kb(b['none'])} | {tvm_cell} | {own} | {_kb(b['fixed'])} | {_kb(b['greedy'])} | "
               f"{r1.search_figures['arena_bytes']:,} | {r1.figures['arena_bytes']:,} | {r1.source} | {seq} | "
               f"{r1.trials} ({r1.trials_to_best}) | {s1:.2f} | {r1.stop} | {r2.trials} | {r2.figures['arena_bytes']:,} | {s2:.2f} | "
               f"{r3.trials} | {r3.figures['arena_bytes']:,} |")  # fmt: skip
        lines.append(row + (f" {checks[name]} |" if checks else ""))
    n = len(models)
    lines += [
        "",
        f"Orchestrated arena <= every baseline on {wins} of {n} models; runs 2/3 worse than run 1 on {worse}.",
        f"Trials in all: run 1 (empty table) {totals[0]}, run 2 (learned, in-sample) {totals[1]} "
        f"({100 * (1 - totals[1] / max(totals[0], 1)):.0f} % fewer), run 3 (leave-one-out) {totals[2]} "
        f"({100 * (1 - totals[2] / max(totals[0], 1)):.0f} % fewer).",
        "",
        "TVM default: the graph part of TVM's default Relax pipeline (LegalizeOps, AnnotateTIROpPattern, FoldConstant, "
        "FuseOps, FuseTIR, RewriteDataflowReshape) on the lowered module, planned by edgemem (first figure in "
        "brackets), plus the largest internal buffer a fused kernel keeps (TVM leaves the tensors between a fused "
        "kernel's parts as internal buffers; second figure). That is `relax.get_default_pipeline` for a CPU "
        "target; `tvm.compile` itself runs the generic pipeline on CPU targets, which does not fuse, and whose graph "
        "part leaves the lowered module as it is (= none). TVM's own plan: the sum of that generic pipeline's "
        "`alloc_storage` sizes (TVM's static storage plan; the model input is the caller's and outside it), for "
        "reference. n/a: "
        + ("; ".join(f"{name} ({r.baselines['tvm_default'].get('reason', '')})" for name, (r, _) in first.items()
                     if r.baselines["tvm_default"].get("arena_bytes") is None) or "none") + ".",
    ]  # fmt: skip
    if skipped:
        lines += ["", "Not lowered (skipped): " + "; ".join(f"{n} ({why})" for n, why in skipped)]
    return "\n".join(lines) + "\n"


def render_counts(counts, cap: float = float("inf")) -> str:
    if cap == float("inf"):
        head = ["## Trials without a time budget (deterministic)", "",
                "The same runs with no time limit (each ends when nothing is left to try), so trial counts do not",
                "depend on the machine's load. The table `--learn` writes is learned from run 1 here."]  # fmt: skip
    else:
        head = [f"## Trials with a {cap:g} s budget", "",
                f"The same runs with a {cap:g} s budget instead of none (`--unlimited-seconds`): those marked `(time)`",
                "stopped on it, so their counts depend on the machine's load; the others ended with nothing left to",
                "try. The table `--learn` writes is learned from run 1 here."]  # fmt: skip
    lines = [
        "",
        *head,
        "",
        "| model | run 1 trials (empty table) | arena | s | run 2 trials (learned) | arena | s | LOO trials | arena | s |",
        "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    totals = [0, 0, 0]
    for name, runs in counts.items():
        cells = " | ".join(f"{r.trials}{' (time)' if r.stop == 'time' else ''} | {r.figures['arena_bytes']:,} | {s:.2f}" for r, s in runs)
        lines.append(f"| {name} | {cells} |")
        totals = [t + r.trials for t, (r, _) in zip(totals, runs)]
    same = sum(len({r.figures["arena_bytes"] for r, _ in runs}) == 1 for runs in counts.values())
    lines += ["", f"Trials in all: run 1 {totals[0]}, run 2 {totals[1]} ({100 * (1 - totals[1] / max(totals[0], 1)):.0f} % "
              f"fewer), leave-one-out {totals[2]} ({100 * (1 - totals[2] / max(totals[0], 1)):.0f} % fewer); the same "
              f"arena in all three runs on {same} of {len(counts)} models."]  # fmt: skip
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    main()
