"""The residual ADD fused in place (passes/residual.py, issue 20) on the shared models that have ADDs: the
arena of edgemem's fixed pass sequence without and with ``inplace_residual``, the default build's
(orchestrated) arena, and where a QEMU run is asked for, the measured arena high-water, bit-exactness with
TFLite Micro and the instructions per inference of the default build.

    .venv/bin/python benchmarks/residual.py [--run NAME ...] [names...] > benchmarks/residual.md
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from edgemem import pipeline  # noqa: E402
from edgemem.device_run import run as run_on_device  # noqa: E402
from edgemem.passes.orchestrate import DEFAULT_SEQUENCE  # noqa: E402

WITH_ADDS = [
    "mlperf_ic_resnet8_int8", "mlperf_ic_resnet_large_int8", "arm_cifar10_image_recognition_int8",
    "mltk_kws_mobilenetv2_int8", "mltk_kws_on_off_v3", "tinyengine_mcunet_vww", "tinyengine_mcunet_person_det",
    "armzoo_yolo_fastest_192_face_v4_int8", "tflm_xtensa_mobilenet_v2_224_int8", "tinyengine_mcunetv2_large",
]  # fmt: skip
RUN = ["mlperf_ic_resnet8_int8", "mlperf_ic_resnet_large_int8", "arm_cifar10_image_recognition_int8",
       "mltk_kws_mobilenetv2_int8", "mltk_kws_on_off_v3", "tinyengine_mcunet_vww"]  # fit the stm32f746: run under QEMU
RAM = 8 << 20  # RAM and flash budget for the models above the board's (arena figures only, no run)


def _arena(path: Path, options: pipeline.BuildOptions, run: bool) -> tuple[int, dict | None, list[str]]:
    with tempfile.TemporaryDirectory() as tmp:
        result = pipeline.build(path, "stm32f746", Path(tmp) / "p", options)
        res = run_on_device(Path(tmp) / "p", seed=0, timeout_s=600) if run else None
        kinds = [op.kind for op in result.graph.ops]
    return result.plan.total_bytes, res, kinds


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("names", nargs="*", default=WITH_ADDS)
    ap.add_argument("--run", nargs="*", default=RUN, help="models to run under QEMU (default build)")
    ap.add_argument("--models", type=Path, default=ROOT.parent / "shared" / "models")
    args = ap.parse_args(argv)
    without = tuple(n for n in DEFAULT_SEQUENCE if n != "inplace_residual")
    print("Board stm32f746 (models above its RAM planned with --ram 8M --flash 8M, not run); QEMU -icount shift=0, seeded input 0.\n")
    print("| model | fixed sequence without | with inplace_residual | fused conv+ADD | default build | "
          "measured high-water | vs TFLM | instructions | s |")
    print("|---|---:|---:|---:|---:|---:|---|---:|---:|")
    for name in args.names:
        path = args.models / f"{name}.tflite"
        t0 = time.perf_counter()
        ram = None if name in args.run else RAM
        base, _, _ = _arena(path, pipeline.BuildOptions(passes=without, ram=ram, flash=ram), False)
        fixed, _, kinds = _arena(path, pipeline.BuildOptions(passes=DEFAULT_SEQUENCE, ram=ram, flash=ram), False)
        default, res, _ = _arena(path, pipeline.BuildOptions(ram=ram, flash=ram), name in args.run)
        fused = sum(1 for k in kinds if k.endswith("+ADD"))
        hw = f"{res['arena_high_water_bytes']:,}" if res else "-"
        exact = ("bit-exact" if res["bit_exact"] else "DIFFERS") if res else "-"
        instr = f"{res['instructions']:,}" if res and res.get("instructions") else "-"
        print(f"| {name} | {base:,} | {fixed:,} | {fused} | {default:,} | {hw} | {exact} | {instr} | "
              f"{time.perf_counter() - t0:.0f} |", flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
