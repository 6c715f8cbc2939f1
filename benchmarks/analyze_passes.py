"""analyze's arena next to the build's for a given ``--passes`` sequence (default: the fixed sequence plus
partial liveness, inplace_overlap) on every shared model, without the compiler (`--opt-time 0`).

    .venv/bin/python benchmarks/analyze_passes.py [models...]   (output quoted in benchmarks/analyze.md)
"""

from __future__ import annotations

import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from edgemem import pipeline  # noqa: E402
from edgemem.analysis import analyze  # noqa: E402
from edgemem.errors import DoesNotFitError  # noqa: E402

SEQUENCE = ("fold_pad", "inplace_depthwise", "inplace_residual", "inplace_elementwise", "inplace_overlap")


def main() -> None:
    models = ROOT.parent / "shared" / "models"
    paths = [models / f"{n}.tflite" for n in sys.argv[1:]] or sorted(models.glob("*.tflite"))
    print("| model | analyze arena | build arena | equal |\n|---|---:|---:|---|")
    for path in paths:
        options = {"passes": SEQUENCE, "opt_seconds": 0}
        a = analyze(path, "stm32f746", options=pipeline.BuildOptions(**options))
        try:
            with tempfile.TemporaryDirectory() as tmp:
                built = pipeline.build(path, "stm32f746", Path(tmp) / "p", pipeline.BuildOptions(compile=False, **options)).info
            b = f"{built['arena_bytes']:,}"
            same = "yes" if built["arena_bytes"] == a.arena_bytes else "NO"
        except DoesNotFitError:
            b, same = "does not fit", "yes (both: does not fit)" if a.verdict == "does not fit" else "NO"
        print(f"| {path.stem} | {a.arena_bytes:,} | {b} | {same} |", flush=True)


if __name__ == "__main__":
    main()
