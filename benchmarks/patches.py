"""Patch-based execution (issue 20, passes/patches.py): per model the whole-tensor bound, the zero-MAC arena
and the patch arenas with the model input in the arena (<= 5 % extra MACs) and outside it (<= 10 %).

    .venv/bin/python benchmarks/patches.py [--run] [--board stm32f746] [names...] > benchmarks/patches.md

Builds (each with ``--passes``; * where the model exceeds the board: --ram/--flash 64 MiB):
- whole: fold_pad, inplace_depthwise, inplace_elementwise (the whole-tensor bound is its lower bound);
- zero-MAC: fold_pad, inplace_depthwise, inplace_residual, inplace_overlap, inplace_elementwise, concat_inplace;
- patches: fold_pad, patches, then the zero-MAC in-place passes; input in the arena, and ``--input outside``
  (then the zero-MAC build outside too, the reference for the overhead). The pass's candidates are p x q grids
  and rolling rows x q column tiles (passes/rolling.py).
MACs: the sum of the kernels' ``edgemem.macs``; overhead against the zero-MAC build. With ``--run`` the patch
builds and the zero-MAC build outside run under QEMU (seed-0 input): bit-exact with TFLite Micro, the device's
arena high-water mark against the plan, instructions (``-icount shift=0``). The Pareto points are the pass's
own candidates (``patches.candidates``, scored on the patched graph before the in-place passes).
"""

from __future__ import annotations

import argparse
import re
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from edgemem import device_run, pipeline  # noqa: E402
from edgemem.errors import DoesNotFitError  # noqa: E402

SHARED = ROOT.parent.parent / "shared" if (ROOT.parent.parent / "shared").is_dir() else ROOT.parent / "shared"
WHOLE = ("fold_pad", "inplace_depthwise", "inplace_elementwise")
ZERO = ("fold_pad", "inplace_depthwise", "inplace_residual", "inplace_overlap", "inplace_elementwise", "concat_inplace")
PATCH = ("fold_pad", "patches") + ZERO[1:]
BIG = 64 << 20
TARGETS = {  # issue 20 (stm32f746): (input in the arena, <= 5 % MACs), (input outside, <= 10 %)
    "tflm_xtensa_mobilenet_v2_224_int8": (291_091, 175_616), "mlperf_vww_96_int8": (37_632, 20_000),
    "tinyengine_mcunet_vww": (None, 25_600),
}  # fmt: skip
DEFAULT = ["mlperf_vww_96_int8", "tflm_person_detect_int8", "tinyengine_mcunet_vww", "tflm_xtensa_mobilenet_v2_224_int8"]


def build(path: Path, board: str, out: Path, passes, outside: bool, run: bool) -> dict:
    kw = dict(passes=passes, compile=run, overwrite=True, input_outside=outside)
    try:
        result = pipeline.build(path, board, out, pipeline.BuildOptions(**kw))
        big = False
    except DoesNotFitError:
        result = pipeline.build(path, board, out, pipeline.BuildOptions(**kw, ram=BIG, flash=BIG))
        big = True
    ops = result.graph.ops
    grids = {(int(m.group(1)), f"{m.group(2)}x{m.group(3)}") for op in ops
             if (m := re.match(r"em_k_patch\d+_s(\d+)_(\d+)x(\d+)_", op.name))}  # fmt: skip
    grids |= {(int(m.group(1)), f"rolling x {m.group(2)}") for op in ops
              if (m := re.match(r"em_k_roll\d+_s(\d+)_q(\d+)$", op.name))}  # passes/rolling.py's one stage kernel
    row = {"arena": result.info["arena_bytes"], "bound": result.info["lower_bound_bytes"], "big": big,
           "macs": sum(op.macs for op in ops),
           "grid": ", ".join(f"after op {s}, {g}" for s, g in sorted(grids)) or "none"}  # fmt: skip
    if run:
        res = device_run.run(out, seed=0)
        row.update(exact=res["bit_exact"] if res["oracle"] == "tflm" else res["matches_reference"],
                   high_water=res["arena_high_water_bytes"], instructions=res["instructions"],
                   planned_high_water=sum(result.info.memory["steps"][-1]["high_water_bytes"]))  # fmt: skip
    return row


def pareto_points(path: Path, outside: bool, limit: float) -> list:
    from edgemem.frontend.tflite_import import import_tflite
    from edgemem.ir import outside as out
    from edgemem.passes import patches
    from edgemem.passes.lower import lower_to_kernels
    from edgemem.passes.optimize import run_passes

    m = import_tflite(path)
    mod = lower_to_kernels(m.relax_mod, m.op_labels)
    mod = run_passes(out.mark(mod) if outside else mod, ("fold_pad",))[0]
    return patches.pareto(patches.candidates(mod, limit))


def _high_water(builds: dict) -> str:
    """yes, or which build's measured high-water differs from the plan's (the end of its highest buffer; the
    arena is that end rounded up to the alignment): planned / measured bytes."""
    off = [f"{k} {r['planned_high_water']:,} / {r['high_water']:,}" for k, r in builds.items()
           if r["high_water"] != r["planned_high_water"]]  # fmt: skip
    return "yes" if not off else "NO: " + "; ".join(off)


def _pct(new: int, old: int) -> str:
    return f"{(new - old) / old * 100:+.1f} %" if old else "-"


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("names", nargs="*")
    ap.add_argument("--board", default="stm32f746")
    ap.add_argument("--run", action="store_true", help="run the patch builds under QEMU")
    ap.add_argument("--pareto", action="store_true", help="list the pass's Pareto points per model")
    args = ap.parse_args()
    names = args.names or DEFAULT
    print("# Patch-based execution (issue 20)\n")
    print(f"`python benchmarks/patches.py{' --run' if args.run else ''}{' --pareto' if args.pareto else ''} "
          f"--board {args.board} {' '.join(names)}` ({time.strftime('%Y-%m-%d')}). Bytes of arena; "
          "* planned with --ram/--flash 64 MiB.\n")  # fmt: skip
    cols = ["model", "whole-tensor bound", "zero-MAC arena (in / outside)", "patch arena, input in (<= 5 %)",
            "MACs in", "patch arena, input outside (<= 10 %)", "MACs outside", "split, grid (outside)"]  # fmt: skip
    if args.run:
        cols += ["instructions zero-MAC in", "instructions patches in", "instructions zero-MAC outside",
                 "instructions patches outside", "bit-exact", "high-water = plan"]  # fmt: skip
    cols += ["issue target (in / outside)"]
    print("| " + " | ".join(cols) + " |")
    print("|" + "---|" * len(cols))
    pareto = {}
    for name in names:
        path = SHARED / "models" / f"{name}.tflite"
        with tempfile.TemporaryDirectory() as tmp:
            t = Path(tmp)
            try:
                whole = build(path, args.board, t / "w", WHOLE, False, False)
                zero = build(path, args.board, t / "z", ZERO, False, args.run)
                zero_out = build(path, args.board, t / "zo", ZERO, True, args.run)
                p_in = build(path, args.board, t / "pi", PATCH, False, args.run)
                p_out = build(path, args.board, t / "po", PATCH, True, args.run)
                if args.pareto:
                    pareto[name] = pareto_points(path, True, 0.10)
            except Exception as e:  # noqa: BLE001 - one model's failure is a row, not the end of the table
                print(f"| {name} | error: {str(e).splitlines()[0][:160]} |" + " |" * (len(cols) - 2), flush=True)
                continue
        star = "*" if p_out["big"] or whole["big"] else ""
        cells = [name, f"{whole['bound']:,}{star}", f"{zero['arena']:,} / {zero_out['arena']:,}",
                 f"{p_in['arena']:,} ({p_in['grid']})", _pct(p_in["macs"], zero["macs"]),
                 f"{p_out['arena']:,}", _pct(p_out["macs"], zero_out["macs"]), p_out["grid"]]  # fmt: skip
        if args.run:
            runs = (p_in, p_out, zero)
            cells += [f"{zero['instructions']:,}",
                      f"{p_in['instructions']:,} ({_pct(p_in['instructions'], zero['instructions'])})",
                      f"{zero_out['instructions']:,}",
                      f"{p_out['instructions']:,} ({_pct(p_out['instructions'], zero_out['instructions'])})",
                      "yes" if all(r["exact"] for r in (*runs, zero_out)) else "NO",
                      _high_water(dict(zip(("patches in", "patches outside", "zero-MAC in", "zero-MAC outside"), (*runs, zero_out))))]  # fmt: skip
        target = TARGETS.get(name)
        if target:
            marks = [("-" if tv is None else f"{tv:,} ({'met' if r['arena'] <= tv else 'not met'})")
                     for tv, r in zip(target, (p_in, p_out))]  # fmt: skip
            cells.append(" / ".join(marks))
        else:
            cells.append("")
        print("| " + " | ".join(cells) + " |", flush=True)
    for name, points in pareto.items():
        print(f"\n**{name}**, input outside, the pass's Pareto points (arena of the patched graph before the in-place "
              "passes, MACs): " + "; ".join(f"{c.label}: {c.arena:,} B, "
                                             f"{c.overhead * 100:+.1f} %" for c in points))  # fmt: skip


if __name__ == "__main__":
    main()
