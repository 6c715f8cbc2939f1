"""Below the whole-tensor bound (issue 20): per shared model, the arena of whole tensors next to the zero-MAC
arena with partial liveness (a convolution's output over its dying input's consumed rows, passes/overlap.py).

    .venv/bin/python benchmarks/below_bound.py [--run] [--board stm32f746] [names...] > benchmarks/below-bound.md

Both builds run edgemem's fixed memory passes (PAD folding, in-place depthwise, in-place element-wise); the
second adds ``inplace_overlap``. "whole-tensor bound" is that first build's lower bound (the most bytes of whole
tensors live at one step of its operator order) and its arena; "zero-MAC arena" the second's, whose bound
counts the bytes an output shares with its input once. With ``--run`` the second build runs under QEMU: outputs
compared with TFLite Micro, the device's arena high-water mark against the plan, instructions per inference next
to the first build's (same input, seed 0). Models larger than the board are planned with --ram/--flash of 64 MiB.
Patch-based arenas (input in / outside the arena) and their Pareto points: benchmarks/patches.py.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from edgemem import device_run, pipeline  # noqa: E402
from edgemem.errors import DoesNotFitError  # noqa: E402

SHARED = ROOT.parent.parent / "shared" if (ROOT.parent.parent / "shared").is_dir() else ROOT.parent / "shared"
BASE = ("fold_pad", "inplace_depthwise", "inplace_elementwise")
OVERLAP = ("fold_pad", "inplace_depthwise", "inplace_overlap", "inplace_elementwise")
BIG = 64 << 20
TARGETS = {  # issue 20's zero-MAC acceptance (stm32f746)
    "mlperf_vww_96_int8": 37_632, "tflm_person_detect_int8": 37_632, "mlperf_kws_dscnn_int8": 8_640,
    "mlperf_ic_resnet8_int8": 32_768, "mlperf_ic_resnet_large_int8": 81_920,
}  # fmt: skip


def build(path: Path, board: str, out: Path, passes, run: bool) -> dict:
    options = pipeline.BuildOptions(passes=passes, compile=run, overwrite=True)
    try:
        result = pipeline.build(path, board, out, options)
    except DoesNotFitError:
        options = pipeline.BuildOptions(passes=passes, compile=run, overwrite=True, ram=BIG, flash=BIG)
        result = pipeline.build(path, board, out, options)
    row = {"arena": result.info["arena_bytes"], "bound": result.info["lower_bound_bytes"], "big": options.ram is not None,
           "overlaps": sum(1 for t in result.graph.tensors.values() if t.alias_shift)}  # fmt: skip
    if run:
        res = device_run.run(out, seed=0)
        row.update(exact=res["bit_exact"] if res["oracle"] == "tflm" else res["matches_reference"],
                   high_water=res["arena_high_water_bytes"], instructions=res["instructions"])
    return row


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("names", nargs="*")
    ap.add_argument("--board", default="stm32f746")
    ap.add_argument("--run", action="store_true", help="run both builds under QEMU (bit-exactness, instructions)")
    args = ap.parse_args()
    models = sorted((SHARED / "models").glob("*.tflite"))
    if args.names:
        models = [m for m in models if m.stem in args.names]
    print("# Below the whole-tensor bound: partial liveness (zero extra MACs)\n")
    print(f"`python benchmarks/below_bound.py{' --run' if args.run else ''} --board {args.board}` "
          f"({time.strftime('%Y-%m-%d')}). Bytes of arena on {args.board}; * planned with --ram/--flash 64 MiB.\n")  # fmt: skip
    cols = ["model", "whole-tensor bound", "arena", "zero-MAC bound", "zero-MAC arena", "change", "overlaps"]
    if args.run:
        cols += ["QEMU high-water", "bit-exact", "instructions whole", "instructions zero-MAC"]
    cols += ["issue target"]
    print("| " + " | ".join(cols) + " |")
    print("|" + "---|" * len(cols))
    for path in models:
        with tempfile.TemporaryDirectory() as tmp:
            try:
                a = build(path, args.board, Path(tmp) / "a", BASE, args.run)
                b = build(path, args.board, Path(tmp) / "b", OVERLAP, args.run)
            except Exception as e:  # noqa: BLE001 - one model's failure is a row, not the end of the table
                print(f"| {path.stem} | error: {str(e).splitlines()[0][:120]} |" + " |" * (len(cols) - 2), flush=True)
                continue
        star = "*" if b["big"] else ""
        change = f"{(b['arena'] - a['arena']) / a['arena'] * 100:+.1f} %"
        cells = [path.stem, f"{a['bound']:,}{star}", f"{a['arena']:,}{star}", f"{b['bound']:,}{star}", f"{b['arena']:,}{star}",
                 change, str(b["overlaps"])]  # fmt: skip
        if args.run:
            cells += [f"{b['high_water']:,}", "yes" if b["exact"] else "NO",
                      f"{a['instructions']:,}" if a.get("instructions") else "-",
                      f"{b['instructions']:,}" if b.get("instructions") else "-"]  # fmt: skip
        target = TARGETS.get(path.stem)
        cells += [f"{target:,} ({'met' if b['arena'] <= target else 'not met'})" if target else ""]
        print("| " + " | ".join(cells) + " |", flush=True)


if __name__ == "__main__":
    main()
