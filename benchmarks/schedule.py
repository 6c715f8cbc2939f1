"""Operator schedulers compared: peak bytes and seconds of file order, RPO, hierarchical, exact and
the plain Serenity DP (exact without edgemem's additions: the baseline of the HMCOS paper).

On the real models in ../shared/models (Dags read from the flatbuffer, arena alignment 4; with
--tvm, from the OpGraph of the TVM pipeline instead, for the models it reads) and on generated
irregular graphs (tests/random_graphs.py, every family, several sizes and seeds).

    .venv/bin/python benchmarks/schedule.py                 # writes benchmarks/schedule.md
    .venv/bin/python benchmarks/schedule.py --quick --out - # a smaller set, table to stdout
    .venv/bin/python benchmarks/schedule.py --time-limit 600 --only rwstage-64-s0 --out benchmarks/schedule-long.md
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "tests"))  # the generated graphs (tests/random_graphs.py)

from edgemem.schedule import exact, hierarchical, rpo  # noqa: E402
from edgemem.schedule.dag import Dag  # noqa: E402
from edgemem.schedule.exact import file_or_topo  # noqa: E402
from random_graphs import suite  # noqa: E402

MODELS = ROOT.parent / "shared" / "models"


def real_dags(use_tvm: bool):
    """(name, Dag) per model that reads; with ``use_tvm``, through import -> lower -> read_graph."""
    out = []
    for path in sorted(MODELS.glob("*.tflite")):
        try:
            out.append((path.stem, _tvm_dag(path) if use_tvm else Dag.from_tflite(path, align=4)))
        except Exception as exc:  # a model the pipeline does not read yet
            print(f"skip {path.stem}: {type(exc).__name__}: {str(exc)[:100]}", file=sys.stderr)
    return out


def _tvm_dag(path: Path) -> Dag:
    from edgemem.frontend.tflite_import import import_tflite
    from edgemem.ir.graph import read_graph
    from edgemem.passes.lower import lower_to_kernels

    return Dag.from_graph(read_graph(lower_to_kernels(import_tflite(path).relax_mod)), align=4)


def timed(fn, *args, **kw):
    start = time.perf_counter()
    result = fn(*args, **kw)
    return result, time.perf_counter() - start


def measure(name: str, kind: str, dag: Dag, time_limit: float) -> dict:
    """Every scheduler on one graph; each result checked to be a valid order with that peak."""
    row = {"name": name, "kind": kind, "ops": dag.n, "file": dag.peak(file_or_topo(dag)), "lb": dag.lower_bound()}
    runs = (("rpo", rpo.schedule, {}), ("hier", hierarchical.schedule, {}), ("exact", exact.schedule, {"time_limit": time_limit}),
            ("serenity", exact.schedule, {"time_limit": time_limit, "plain": True}))  # fmt: skip
    for label, fn, kw in runs:
        (order, peak, info), secs = timed(fn, dag, **kw)
        assert dag.is_order(order) and dag.peak(order) == peak, (name, label)
        row[label], row[label + "_s"] = peak, secs
        if label in ("exact", "serenity"):
            row[label + "_optimal"] = info["optimal"]
    # the optimum where either DP finished (both are exact: equal when both did)
    done = [row[k] for k in ("exact", "serenity") if row[k + "_optimal"]]
    assert len(set(done)) <= 1, (name, done)
    row["optimal"], row["best_dp"] = bool(done), done[0] if done else min(row["exact"], row["serenity"])
    return row


def _kb(n: int) -> str:
    return f"{n:,}"


def _secs(s: float) -> str:
    return f"{s:.3f}" if s < 10 else f"{s:.1f}"


def table(rows: list[dict]) -> list[str]:
    lines = [
        "| graph | ops | lower bound | file | rpo | hierarchical | exact | serenity | hier s | exact s | serenity s "
        "| exact/hier time | serenity/hier time | hier vs optimum |",
        "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|",
    ]
    for r in rows:
        cells = [_kb(r[k]) + ("" if r[k + "_optimal"] else " (limit)") for k in ("exact", "serenity")]
        if not r["optimal"]:
            verdict = "better" if r["hier"] < r["best_dp"] else "equal" if r["hier"] == r["best_dp"] else "worse"
            verdict += " (both DPs stopped)"
        else:
            verdict = "equal" if r["hier"] == r["best_dp"] else f"+{r['hier'] / r['best_dp'] - 1:.1%}"
        lines.append(
            f"| {r['name']} | {r['ops']} | {_kb(r['lb'])} | {_kb(r['file'])} | {_kb(r['rpo'])} | {_kb(r['hier'])} | {cells[0]} | {cells[1]} "
            f"| {_secs(r['hier_s'])} | {_secs(r['exact_s'])} | {_secs(r['serenity_s'])} | {_ratio(r, 'exact')} | {_ratio(r, 'serenity')} | {verdict} |"
        )
    return lines


def _ratio(r: dict, dp: str) -> str:
    """DP time / hierarchical time; ">=" where the DP stopped at its limit (its time is a lower bound)."""
    return ("" if r[dp + "_optimal"] else ">=") + f"{r[dp + '_s'] / max(r['hier_s'], 1e-6):.1f}x"


def summary(rows: list[dict], time_limit: float) -> list[str]:
    solved = [r for r in rows if r["optimal"]]
    equal = [r for r in solved if r["hier"] == r["best_dp"]]
    worse = [r for r in solved if r["hier"] != r["best_dp"]]
    above_rpo = [r["name"] for r in rows if r["hier"] > r["rpo"]]
    stopped = [r for r in rows if not r["optimal"]]
    worse_text = ", ".join(f"{r['name']} (+{r['hier'] / r['best_dp'] - 1:.1%})" for r in worse)
    lines = [
        f"- a DP (exact or serenity) finished within {time_limit:g} s on {len(solved)} of {len(rows)} graphs; hierarchical "
        f"equals the optimum on {len(equal)} of them" + (f"; above it on {worse_text}." if worse else "."),
        f"- hierarchical above RPO: {', '.join(above_rpo) if above_rpo else 'never'}; below RPO on "
        f"{sum(r['hier'] < r['rpo'] for r in rows)} graphs, by {_mean_gain(rows, 'rpo')} on average; below the file order by {_mean_gain(rows, 'file')}.",
    ]
    if stopped:
        lines.append(
            f"- both DPs hit the limit on {len(stopped)} graphs ({', '.join(r['name'] for r in stopped)}); there hierarchical is "
            f"below their best so far on {sum(r['hier'] < r['best_dp'] for r in stopped)}, equal on {sum(r['hier'] == r['best_dp'] for r in stopped)}, "
            f"above on {sum(r['hier'] > r['best_dp'] for r in stopped)}."
        )
    big = [r for r in rows if r["kind"] == "generated" and r["ops"] >= 60]
    if big:
        lines.append(f"- DP time / hierarchical time on the generated graphs with >= 60 ops, per family (min / median / max; "
                     f"a DP stopped at the limit counts its {time_limit:g} s, so its ratio is a lower bound):")  # fmt: skip
        lines.append("")
        lines.append("| family | graphs | vs exact | >= 100x | vs serenity | >= 100x |")
        lines.append("|---|---:|---|---:|---|---:|")
        families = list(dict.fromkeys(_family(r) for r in big))  # in the suite's order
        for fam in families + ["all"]:
            group = [r for r in big if fam in ("all", _family(r))]
            cells = []
            for dp in ("exact", "serenity"):
                ratios = sorted(r[dp + "_s"] / max(r["hier_s"], 1e-6) for r in group)
                cells.append(f"{ratios[0]:.1f} / {statistics.median(ratios):.1f} / {ratios[-1]:.1f}x | {sum(x >= 100 for x in ratios)}")
            lines.append(f"| {fam} | {len(group)} | {cells[0]} | {cells[1]} |")
    return lines


def _family(r: dict) -> str:
    """A generated graph's family, from its name family-ops-seed."""
    return r["name"].split("-")[0]


def _mean_gain(rows: list[dict], base: str) -> str:
    gains = [1 - r["hier"] / r[base] for r in rows if r[base]]
    return f"{statistics.mean(gains):.1%}" if gains else "-"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--time-limit", type=float, default=60.0, help="seconds for each DP (exact, serenity) per graph")
    ap.add_argument("--tvm", action="store_true", help="read real models through the TVM pipeline (slow for some)")
    ap.add_argument("--quick", action="store_true", help="fewer generated graphs (sizes 24, 64; seed 0)")
    ap.add_argument("--only", help="comma-separated graph names (e.g. rwstage-64-s0): just these, real or generated")
    ap.add_argument("--out", default=str(ROOT / "benchmarks" / "schedule.md"), help="markdown file, or - for stdout only")
    args = ap.parse_args()
    graphs = [(n, "real", d) for n, d in real_dags(args.tvm)]
    sizes, seeds = ((24, 64), (0,)) if args.quick else ((24, 40, 64, 96, 120), (0, 1, 2))
    graphs += [(n, "generated", d) for n, d in suite(sizes=sizes, seeds=seeds)]
    if args.only:
        wanted = set(args.only.split(","))
        unknown = wanted - {name for name, _, _ in graphs}
        if unknown:
            ap.error(f"--only: no graph named {', '.join(sorted(unknown))} (names as in benchmarks/schedule.md)")
        graphs = [g for g in graphs if g[0] in wanted]
    rows = []
    for name, kind, dag in graphs:
        rows.append(measure(name, kind, dag, args.time_limit))
        r = rows[-1]
        print(f"{name}: ops={r['ops']} file={r['file']} rpo={r['rpo']} hier={r['hier']} ({r['hier_s']:.3f}s) "
              f"exact={r['exact']}{'' if r['exact_optimal'] else '*'} ({r['exact_s']:.3f}s) "
              f"serenity={r['serenity']}{'' if r['serenity_optimal'] else '*'} ({r['serenity_s']:.3f}s)", file=sys.stderr, flush=True)  # fmt: skip
    command = "python benchmarks/schedule.py " + " ".join(sys.argv[1:])
    md = [
        "# Operator schedulers: peak bytes and seconds",
        "",
        f"`{command.strip()}`",
        "",
        "Peak = the largest sum of live tensors over the schedule (edgemem/schedule/liveness.py's model; real models read from",
        "the .tflite flatbuffer" + (" through the TVM pipeline" if args.tvm else "") + ", sizes rounded up to 4 bytes). Lower bound: the largest, over ops, of what",
        "must be live at that op's step in any order (Dag.bounds). file = the model's order; exact = edgemem's DP (Serenity's",
        "memoised states, soft budgets and cuts, plus a quick beam for the incumbent, a per-state lower bound and a dominance",
        "rule); serenity = the same DP without those three additions, as the issue and the HMCOS paper define the baseline;",
        f"both limited to {args.time_limit:g} s (\"(limit)\": stopped, best found so far).",
        "Seconds are wall time on a shared 2-core machine (other jobs ran too): read the ratios, not the digits.",
        "",
        "## Summary",
        "",
        *summary(rows, args.time_limit),
        "",
        "## Real models",
        "",
        *table([r for r in rows if r["kind"] == "real"]),
        "",
        "## Generated graphs (tests/random_graphs.py: family-target ops-seed)",
        "",
        *table([r for r in rows if r["kind"] == "generated"]),
        "",
    ]
    text = "\n".join(md)
    print(text)
    if args.out != "-":
        Path(args.out).write_text(text)


if __name__ == "__main__":
    main()
