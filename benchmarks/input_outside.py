"""The model input inside vs outside the arena (`edgemem build --input outside`, issue 20): each model built both
ways for stm32f746 (with --ram/--flash where it exceeds the board), run under QEMU (-icount shift=0) on a seeded
input, compared with TFLite Micro; a markdown table of the arenas, where the input is live, the measured
high-water marks and the instructions.

    .venv/bin/python benchmarks/input_outside.py [names...] > benchmarks/input_outside.md
"""

from __future__ import annotations

import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from edgemem import pipeline  # noqa: E402
from edgemem.device_run import run as run_on_device

MODELS = ROOT.parent / "shared" / "models"
DEFAULT = {  # name -> (ram, flash) overrides
    "mlperf_vww_96_int8": (None, None),
    "tflm_person_detect_int8": (None, None),
    "tinyengine_mcunet_vww": (None, None),
    # the QEMU harness keeps the (float) input in its own .bss buffer next to the arena: 245,760 + 245,760 B
    "tinyengine_mcunet_person_det": (640 << 10, None),
    "tflm_xtensa_mobilenet_v2_224_int8": (2 << 20, 8 << 20),
}


def measure(name: str, outside: bool) -> dict:
    ram, flash = DEFAULT.get(name, (None, None))
    with tempfile.TemporaryDirectory() as tmp:
        t0 = time.perf_counter()
        result = pipeline.build(MODELS / f"{name}.tflite", "stm32f746", Path(tmp) / "p",
                                pipeline.BuildOptions(ram=ram, flash=flash, input_outside=outside))  # fmt: skip
        seconds = time.perf_counter() - t0
        run = run_on_device(Path(tmp) / "p", seed=0, timeout_s=1200)
    info = result.info
    peak_step = info.memory["peak"]["step"]
    inputs = [t for t in info.memory["tensors"] if t["role"] == "input"]
    live_at_peak = any(t["first"] <= peak_step <= t["last"] for t in inputs)
    dies = max((t["last"] for t in inputs), default=None)
    return {"arena": info.arena_bytes, "bound": info.lower_bound_bytes, "hw": run["arena_high_water_bytes"],
            "bit_exact": run["bit_exact"], "instructions": run["instructions"], "seconds": seconds,
            "input": sum(i.bytes for i in info.inputs), "peak": peak_step, "live_at_peak": live_at_peak,
            "dies": dies, "steps": len(info.memory["steps"]), "ram": ram}  # fmt: skip


def main(names: list[str]) -> None:
    print("# The model input outside the arena\n")
    print("Command: `.venv/bin/python benchmarks/input_outside.py > benchmarks/input_outside.md` (stm32f746; "
          "mobilenet_v2_224 with `--ram 2M --flash 8M`, mcunet_person_det with `--ram 640K`: with the input outside, "
          "the QEMU harness holds the float input in its own buffer next to the arena). *in*: the default build (the input is an arena tensor); "
          "*out*: `--input outside` (the caller's buffer, `edgemem_run_from`; the arena excludes it, MCUNetV2's "
          "accounting). Both run under QEMU on seed 0: high-water = measured arena bytes, bit-exact vs TFLite Micro.\n")
    print("| model | input B | input live (in) | peak step in / out | arena in | arena out | saved | high-water in / out "
          "| bit-exact in / out | instructions in / out |")
    print("|---|---:|---|---:|---:|---:|---:|---:|---|---:|")
    for name in names:
        r_in, r_out = measure(name, False), measure(name, True)
        live = f"steps 0-{r_in['dies']} of {r_in['steps']}" if r_in["dies"] is not None else "-"
        print(f"| {name} | {r_in['input']:,} | {live} | {r_in['peak']}{' (input live)' if r_in['live_at_peak'] else ''} / {r_out['peak']} | {r_in['arena']:,} | {r_out['arena']:,} | {r_in['arena'] - r_out['arena']:,} "
              f"| {r_in['hw']:,} / {r_out['hw']:,} | {r_in['bit_exact']} / {r_out['bit_exact']} "
              f"| {r_in['instructions']:,} / {r_out['instructions']:,} |", flush=True)  # fmt: skip
    print("\nOn these models the input is read by the first operator only and dies there, and the peak comes later: "
          "leaving it out of the arena saves nothing by itself (the peak step does not move, except where an equal peak "
          "elsewhere takes over). It is the accounting the patch-based first stage needs (MCUNetV2 counts 172 kB for "
          "MobileNetV2-224 with the input outside; ../shared/research/below-the-bound.md), and it lets `remat` "
          "recompute a cheap tensor of the input from the caller's buffer (benchmarks/remat.md, *input skip*).")


if __name__ == "__main__":
    main(sys.argv[1:] or list(DEFAULT))
