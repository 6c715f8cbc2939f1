"""Speed benchmark: edgemem's instructions per inference under QEMU (-icount shift=0) next to TFLite Micro with
CMSIS-NN and with its reference kernels, on the same machine and the same input (../shared/anchors/tflm).

    .venv/bin/python benchmarks/speed.py [--board stm32f746] [names...] > benchmarks/speed.md
    .venv/bin/python benchmarks/speed.py --kinds [names...]   # instructions per kernel kind (profile builds)

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
from edgemem.device_run import run as device_run  # noqa: E402
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
        res = device_run(Path(tmp) / "p", inputs=inputs, seed=0)
    macs = {k: 0 for k in MAC_KINDS}
    for op in result.graph.ops:
        if op.kind in macs:
            macs[op.kind] += op.macs
    return {"info": result.info, "run": res, "seconds": seconds, "macs": macs, "anchor_input": inputs is not None}


KINDS = ("CONV_2D 1x1", "CONV_2D kxk", "DEPTHWISE_CONV_2D", "FULLY_CONNECTED", "other")


def _kind(op, graph) -> str:
    if op.kind == "CONV_2D":
        w = graph.tensors[op.inputs[1]].shape  # OHWI
        return "CONV_2D 1x1" if len(w) == 4 and w[1] == w[2] == 1 else "CONV_2D kxk"
    return op.kind if op.kind in KINDS else "other"


def breakdown(path: Path, board: str) -> dict[str, list[int]]:
    """Instructions and MACs per kernel kind: a profile build (`edgemem profile`, per-step instruction counts
    under QEMU) of the model; kind -> [instructions, MACs]."""
    from edgemem.profiling import profile

    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "p"
        result = pipeline.build(path, board, out, pipeline.BuildOptions(profile=True))
        steps = profile(out)["steps"]
    ops = {op.name: op for op in result.graph.ops}
    kinds = {k: [0, 0] for k in KINDS}
    for step in steps:
        op = ops[step["op"]]
        kinds[_kind(op, result.graph)][0] += step["instructions"]
        kinds[_kind(op, result.graph)][1] += op.macs if op.kind in MAC_KINDS else 0
    return kinds


def print_breakdown(names: list[str], board: str, models: Path) -> None:
    print("\nPer kernel kind (a profile build of each model: per-operator instructions under QEMU; "
          "share of the inference, instructions per MAC):\n")
    print("| model | " + " | ".join(KINDS) + " |")
    print("|---|" + "---:|" * len(KINDS))
    for name in names:
        try:
            kinds = breakdown(models / f"{name}.tflite", board)
        except EdgememError as e:
            print(f"| {name} | failed: {str(e).splitlines()[0][:120]} |")
            continue
        total = sum(i for i, _ in kinds.values())
        cells = []
        for i, macs in kinds.values():
            per_mac = f", {i / macs:.2f}/MAC" if macs else ""
            amount = f"{i / 1e6:.2f} M" if i >= 100_000 else f"{i / 1e3:.1f} K"
            cells.append(f"{amount} ({100 * i / total:.0f} %{per_mac})" if i else "-")
        print(f"| {name} | " + " | ".join(cells) + " |")
        sys.stdout.flush()


def _m(v: int | None) -> str:
    return f"{v / 1e6:.2f} M" if v else "-"


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("names", nargs="*", default=DEFAULT)
    ap.add_argument("--board", default="stm32f746")
    ap.add_argument("--models", type=Path, default=SHARED / "models")
    ap.add_argument("--anchors", type=Path, default=SHARED / "anchors" / "tflm")
    ap.add_argument("--kinds", action="store_true", help="only the per-kernel-kind breakdown (profile builds)")
    args = ap.parse_args(argv)
    if args.kinds:
        print_breakdown(args.names, args.board, args.models)
        return 0
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
