"""Speed benchmark: edgemem's instructions per inference under QEMU (-icount shift=0) next to TFLite Micro with
CMSIS-NN and with its reference kernels, on the same machine and the same input (../shared/anchors/tflm).

    .venv/bin/python benchmarks/speed.py [--board stm32f746] [names...] > benchmarks/speed.md

For each model: build for the board, run the firmware on the anchor's input (`<model>.input.npy`), check the
outputs against TFLM (bit-exact), and print instructions, instructions per MAC (CONV_2D, DEPTHWISE_CONV_2D,
FULLY_CONNECTED MACs of the build), the ratio to TFLM+CMSIS-NN, arena and flash. The anchors ran on the
M7 (mps2-an500) and the M4 (mps2-an386); a board on another core shows no anchor figures.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from edgemem import pipeline  # noqa: E402
from edgemem.board import load_board  # noqa: E402
from edgemem.errors import EdgememError  # noqa: E402

DEFAULT = [
    "mlperf_kws_dscnn_int8", "mlperf_vww_96_int8", "mlperf_ic_resnet8_int8", "mlperf_ad_fc_autoencoder_int8",
    "mlperf_sww_int8", "tflm_person_detect_int8", "tflm_micro_speech_int8", "armzoo_kws_micronet_m_int8",
    "mltk_kws_on_off_v3", "tinyengine_mcunet_vww", "mlperf_ic_resnet_large_int8", "arm_cifar10_image_recognition_int8",
]  # fmt: skip
SHARED = ROOT.parent.parent / "shared" if (ROOT.parent.parent / "shared").is_dir() else ROOT.parent / "shared"
ANCHOR_CORES = {"cortex-m7": "m7", "cortex-m4": "m4"}
MAC_KINDS = ("CONV_2D", "DEPTHWISE_CONV_2D", "FULLY_CONNECTED")


def anchors(folder: Path) -> dict[tuple[str, str, str], dict]:
    out = {}
    path = folder / "results.jsonl"
    if path.is_file():
        for line in path.read_text().splitlines():
            if line.strip():
                r = json.loads(line)
                out[(r["model"], r["core"], r["kernels"])] = r
    return out


def measure(path: Path, board: str, anchor_dir: Path) -> dict:
    with tempfile.TemporaryDirectory() as tmp:
        t0 = time.perf_counter()
        result = pipeline.build(path, board, Path(tmp) / "p")
        seconds = time.perf_counter() - t0
        npy = anchor_dir / f"{path.stem}.input.npy"
        inputs = [np.load(npy)] if npy.is_file() else None
        res = pipeline.run(Path(tmp) / "p", inputs=inputs, seed=0)
    macs = {k: 0 for k in MAC_KINDS}
    for op in result.graph.ops:
        if op.kind in macs:
            macs[op.kind] += op.macs
    return {"info": result.info, "run": res, "seconds": seconds, "macs": macs, "anchor_input": inputs is not None}


def _m(v: int | None) -> str:
    return f"{v / 1e6:.2f} M" if v else "-"


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("names", nargs="*", default=DEFAULT)
    ap.add_argument("--board", default="stm32f746")
    ap.add_argument("--models", type=Path, default=SHARED / "models")
    ap.add_argument("--anchors", type=Path, default=SHARED / "anchors" / "tflm")
    args = ap.parse_args(argv)
    board = load_board(args.board)
    core = ANCHOR_CORES.get(board.core.cpu)
    ref = anchors(args.anchors)
    print(f"Board {args.board} ({board.core.cpu}); QEMU -icount shift=0; input: the "
          f"anchor's `<model>.input.npy`; TFLM figures from ../shared/anchors/tflm/results.jsonl ({core or 'no anchor'}).\n")
    print("| model | MACs | edgemem instr | instr/MAC | TFLM+CMSIS-NN instr | TFLM-ref instr | vs CMSIS-NN | vs ref "
          "| bit-exact | arena B | TFLM arena B | flash B | build s |")
    print("|---|---:|---:|---:|---:|---:|---:|---:|---|---:|---:|---:|---:|")
    for name in args.names:
        try:
            m = measure(args.models / f"{name}.tflite", args.board, args.anchors)
        except EdgememError as e:
            print(f"| {name} | failed: {str(e).splitlines()[0][:120]} ||||||||||||")
            continue
        i, r = m["info"], m["run"]
        cm = ref.get((name, core, "cmsis-nn"), {})
        rf = ref.get((name, core, "reference"), {})
        instr = r["instructions"]
        macs = sum(m["macs"].values())
        verdict = "yes" if r["bit_exact"] else (f"no (max diff {r['max_abs_diff']})" if r["bit_exact"] is not None else "-")
        if not m["anchor_input"]:
            verdict += " (seeded input)"
        ratio = lambda a: f"{instr / a['instructions']:.2f}x" if a.get("instructions") else "-"  # noqa: E731, B023 (called in this iteration)
        print(f"| {name} | {macs / 1e6:.2f} M | {instr:,} | {instr / macs:.2f} | {cm.get('instructions', 0):,} "
              f"| {rf.get('instructions', 0):,} | {ratio(cm)} | {ratio(rf)} | {verdict} | {i['arena_bytes']:,} "
              f"| {cm.get('arena_used_bytes', 0):,} | {i.get('flash_bytes', 0):,} | {m['seconds']:.0f} |")
        sys.stdout.flush()
    return 0


if __name__ == "__main__":
    sys.exit(main())
