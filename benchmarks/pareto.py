"""The memory/latency objective on shared models: the Pareto points each build tried, the one it took, and that
point's predicted instructions next to the ones measured under QEMU.

    .venv/bin/python benchmarks/pareto.py [names...] > benchmarks/pareto.md

For each model four builds for the stm32f746 (the orchestrator with a 600 s budget, so its 200-trial budget ends
the search and the run is deterministic): the default objective with the board's RAM (the fewest predicted
instructions that fit), ``--minimize`` (the least arena, any slowdown), ``--max-slowdown 1`` (the least arena
predicted at most 1 % slower than the fastest sequence tried), and the default objective with
``--ram`` cut to the least arena (plus the stack and 1 KiB of static data, rounded up to the MPU's 32 bytes): the fastest candidate
that fits there. Each build is run under QEMU (-icount shift=0) on a seeded input: bit-exact with TFLite
Micro, measured arena high-water, and measured instructions per inference next to the prediction
(passes/instr_model.json, fitted by benchmarks/pareto_fit.py on other models).
"""

from __future__ import annotations

import argparse
import math
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from edgemem import pipeline  # noqa: E402
from edgemem.board import load_board  # noqa: E402
from edgemem.device_run import run as device_run  # noqa: E402
from edgemem.passes.objective import InstructionModel  # noqa: E402

DEFAULT = ["mlperf_vww_96_int8", "mlperf_kws_dscnn_int8", "mlperf_ic_resnet8_int8", "tinyengine_mcunet_vww",
           "unet:32:0", "unet:48:1", "unet:24:2"]  # unet:WIDTH:SEED: tests/test_remat.py's U-Net, where remat pays
SHARED = ROOT.parent.parent / "shared" if (ROOT.parent.parent / "shared").is_dir() else ROOT.parent / "shared"
BOARD = "stm32f746"


def model_path(name: str, tmp: Path) -> Path:
    """A shared model by name, or ``unet:WIDTH:SEED``: the U-Net-like graph of tests/test_remat.py."""
    if not name.startswith("unet:"):
        return SHARED / "models" / f"{name}.tflite"
    sys.path.insert(0, str(ROOT / "tests"))
    from test_remat import unet_model

    _, width, seed = name.split(":")
    path = tmp / f"unet_{width}_{seed}.tflite"
    path.write_bytes(unet_model(int(width), int(seed)))
    return path


def build_and_run(path: Path, out: Path, **kw) -> tuple:
    t0 = time.perf_counter()
    info = pipeline.build(path, BOARD, out, pipeline.BuildOptions(opt_seconds=600, **kw)).info
    res = device_run(out, seed=0)
    return info, res, time.perf_counter() - t0


def _seq(p: dict) -> str:
    return ", ".join(p["sequence"]) or "none"


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("names", nargs="*", default=DEFAULT)
    args = ap.parse_args(argv)
    model = InstructionModel.load()
    stack = load_board(BOARD).stack_size
    print("# The memory/latency objective: Pareto points (issue 20)\n")
    print("Command: `.venv/bin/python benchmarks/pareto.py " + " ".join(args.names) + " > benchmarks/pareto.md`\n")
    print(__doc__.split("\n\n", 2)[2].strip() + "\n")
    print(f"Instruction model: `{model.command}` (none of the models below is in its fit).\n")
    summary = []
    for name in args.names:
        print(f"## {name}\n")
        with tempfile.TemporaryDirectory() as tmp:
            path = model_path(name, Path(tmp))
            runs = {}
            runs["default (board RAM)"] = build_and_run(path, Path(tmp) / "d")
            runs["--minimize"] = build_and_run(path, Path(tmp) / "m", max_slowdown=math.inf)
            runs["--max-slowdown 1"] = build_and_run(path, Path(tmp) / "s", max_slowdown=1.0)
            least = runs["--minimize"][0].arena_bytes
            ram = math.ceil((least + stack + 1024) / 32) * 32  # 1 KiB for static .data/.bss
            runs[f"default, --ram {ram:,} (least arena + stack + 1 KiB)"] = build_and_run(path, Path(tmp) / "t", ram=ram)
        for label, (info, res, seconds) in runs.items():
            pareto = info.pareto
            print(f"**{label}**: {pareto['candidates']} sequences tried, {info.passes['trials']} trials "
                  f"(stopped: {info.passes['stop']}), {seconds:.0f} s with the QEMU run. Taken: {pareto['taken']['reason']}.\n")  # fmt: skip
            print("| | passes | arena B | MACs | instructions (predicted) | slower (predicted) |")
            print("|---|---|---:|---:|---:|---:|")
            for p in pareto["points"]:
                print(f"| {'**taken**' if p['taken'] else ''} | {_seq(p)} | {p['arena_bytes']:,} | {p['macs']:,} | "
                      f"{p['instructions']:,} | {p['slowdown_percent']:+.2f} % |")  # fmt: skip
            print()
            taken = pareto["taken"]
            err = 100 * (taken["instructions"] - res["instructions"]) / res["instructions"]
            summary.append((name, label, taken, res, err, info))
    print("## Taken points: predicted vs measured\n")
    print("| model | build | passes taken | arena B | measured high-water B | bit-exact | MACs | predicted instr. | "
          "measured instr. | error |")  # fmt: skip
    print("|---|---|---|---:|---:|---|---:|---:|---:|---:|")
    for name, label, taken, res, err, info in summary:
        print(f"| {name} | {label} | {_seq(taken)} | {info.arena_bytes:,} | {res['arena_high_water_bytes']:,} | "
              f"{'yes' if res['bit_exact'] else 'NO'} | {taken['macs']:,} | {taken['instructions']:,} | "
              f"{res['instructions']:,} | {err:+.1f} % |")  # fmt: skip
    return 0


if __name__ == "__main__":
    sys.exit(main())
