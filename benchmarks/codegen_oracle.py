"""Every kernel's generated C against TVM's LLVM build of the same TIR (tests/codegen_oracle.py), over whole model sets.

    .venv/bin/python benchmarks/codegen_oracle.py > benchmarks/codegen-oracle.md
    .venv/bin/python benchmarks/codegen_oracle.py --without-minmax-fix [sets...]   # the C printer as it was

Sets: `ops` (tests/models/ops), `arch` (tests/models/arch), `shared` (../shared/models and its published/).
Each model is lowered as the build lowers it (no memory pass), its distinct kernels are printed to C and compiled by
host gcc, and each runs next to its LLVM build on the model's constants and seeded random activations; a kernel
whose buffers differ in any byte is listed. `--without-minmax-fix` prints min/max as TVM's C printer does (the
temporaries remembered across stores that gave issue 31's wrong answer), to count what that bug reached.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))

import codegen_oracle  # noqa: E402  (tests/codegen_oracle.py)

SHARED = ROOT.parent / "shared" / "models"
SETS = {
    "ops": lambda: sorted((ROOT / "tests" / "models" / "ops").glob("*.tflite")),
    "arch": lambda: sorted((ROOT / "tests" / "models" / "arch").glob("*.tflite")),
    "shared": lambda: sorted(SHARED.glob("*.tflite")) + sorted(SHARED.glob("published/*.tflite")),
}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("sets", nargs="*", default=list(SETS), choices=list(SETS))
    ap.add_argument("--without-minmax-fix", action="store_true")
    args = ap.parse_args(argv)
    if args.without_minmax_fix:
        import edgemem.codegen.kernels_c as kc

        kc._minmax_as_calls = lambda func: func
    print("# Generated C against TVM's LLVM build of the same TIR\n")
    print("Command (from the repo root):\n")
    flag = " --without-minmax-fix" if args.without_minmax_fix else ""
    print(f"    .venv/bin/python benchmarks/codegen_oracle.py{flag} {' '.join(args.sets)}\n")
    print("| set | models | lowered | kernels | kernels differing | models differing | not lowered | seconds |")
    print("|---|---:|---:|---:|---:|---:|---:|---:|")
    details = []
    for name in args.sets:
        models = SETS[name]()
        lowered = kernels = bad_kernels = 0
        bad_models, refused = [], []
        t0 = time.perf_counter()
        for path in models:
            try:
                calls = codegen_oracle.kernel_calls(path)
            except Exception as e:  # noqa: BLE001 - an operator edgemem refuses is counted, not fatal
                refused.append(f"{path.name}: {type(e).__name__}: {str(e).splitlines()[0][:120]}")
                continue
            lowered += 1
            kernels += len(calls)
            bad = codegen_oracle.compare(calls, seed=0)
            if bad:
                bad_kernels += len(bad)
                bad_models.append(path.name)
                details.extend(f"- `{path.name}`: {b}" for b in bad)
        seconds = time.perf_counter() - t0
        print(f"| {name} | {len(models)} | {lowered} | {kernels} | {bad_kernels} | {len(bad_models)} | {len(refused)} | {seconds:.0f} |")
        sys.stdout.flush()
    print("\n## Kernels that differ\n")
    print("\n".join(details) if details else "None.")
    return 0


if __name__ == "__main__":
    sys.exit(main())
