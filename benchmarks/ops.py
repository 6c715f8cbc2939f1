"""Operator coverage: every TFLite Micro operator x type, with the status edgemem reaches on it.

For each TFLM built-in operator (the list of ../shared/research/tflm-ops.md, less the exclusions of the
issue: control flow, resource variables, NPU/signal custom ops) and each type, the converter-made test
models `tests/models/ops/<OP>-<variant>-<type>.tflite` that contain it are built for the host and compared
with TFLite Micro on seeds 0, 1, 2 (tests/op_check.py: int8 bit-exact, float within 1e-5 relative; LiteRT
where TFLM cannot run the model). Status per row:

- `bit-exact (TFLM)` / `within 1e-5 (TFLM)`: every model of the row matched;
- `within tolerance (LiteRT)`: TFLM cannot run the models, LiteRT is the oracle;
- `refused: ...`: edgemem stops with exit 4 and this message (first model);
- `FAILED: ...`: built but differs, or crashed (a bug: the message says where);
- `no model`: the generators make no model of this operator and type (TFLM may have no kernel for it).

Usage: .venv/bin/python benchmarks/ops.py > benchmarks/ops.md
"""

from __future__ import annotations

import re
import sys
import tempfile
import time
from collections import defaultdict
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))

import op_check  # noqa: E402

from edgemem.errors import EdgememError, UnsupportedModelError  # noqa: E402

OPS_MD = ROOT.parent / "shared" / "research" / "tflm-ops.md"
MODELS = ROOT / "tests" / "models" / "ops"
EXCLUDED = {"IF", "WHILE", "CALL_ONCE", "VAR_HANDLE", "READ_VARIABLE", "ASSIGN_VARIABLE"}
TYPES = ("int8", "float32", "int32", "bool")


def tflm_operators() -> list[str]:
    """The built-ins listed in tflm-ops.md's first section, less the exclusions."""
    text = OPS_MD.read_text()
    section = text.split("Built-ins (the ones a converted model uses):", 1)[1].split("Not in scope", 1)[0]
    names = re.findall(r"\b[A-Z][A-Z0-9_]+\b", section)
    return sorted(set(names) - EXCLUDED)


def input_shapes(path: Path) -> str:
    from edgemem.reference import model_io_specs

    ins, _ = model_io_specs(path)
    return " ".join("x".join(map(str, shape)) or "scalar" for _, shape, _ in ins)


def run_model(path: Path) -> tuple[str, str]:
    """(status class, detail) of one model."""
    with tempfile.TemporaryDirectory() as tmp:
        try:
            result = op_check.check_model(path, Path(tmp))
        except UnsupportedModelError as e:
            return "refused", str(e).split(": ", 1)[-1][:160]
        except EdgememError as e:
            return "FAILED", f"{type(e).__name__}: {str(e)[:160]}"
        except AssertionError as e:
            return "FAILED", " ".join(str(e).split())[:160]
        except Exception as e:  # noqa: BLE001  (a benchmark row, not a crash of the benchmark)
            return "FAILED", f"{type(e).__name__}: {' '.join(str(e).split())[:160]}"
    return ("ok-" + result.oracle), ""


def main() -> int:
    t0 = time.time()
    operators = tflm_operators()
    by_row: dict[tuple[str, str], list[Path]] = defaultdict(list)
    for path in sorted(MODELS.glob("*.tflite")):
        op, kind = path.stem.split("-")[0], path.stem.rsplit("-", 1)[-1]  # <OP>-<variant>-<type>.tflite
        by_row[(op, kind)].append(path)
    results: dict[Path, tuple[str, str]] = {}
    for paths in by_row.values():
        for path in paths:
            results[path] = run_model(path)
    print("# Operator coverage: TFLite Micro's operators x types\n")
    print("Command: `.venv/bin/python benchmarks/ops.py > benchmarks/ops.md` "
          f"({len(results)} converter-made models from `tests/models/ops/`, {time.time() - t0:.0f} s). "
          "Each model built for the host (-Werror, ASan/UBSan) and compared with TFLite Micro on seeds 0, 1, 2: "
          "int8 bit-exact, float within 1e-5 relative (LiteRT where TFLM cannot run the model). Hand-made "
          "flatbuffer variants of the same operators are in the tests (`tests/test_ops_*.py`), not in this table.\n")
    print("| operator | type | status | models | input shapes |")
    print("|---|---|---|---:|---|")
    counts: dict[str, int] = defaultdict(int)
    for op in operators:
        kinds = sorted({k for (o, k) in by_row if o == op}, key=lambda k: TYPES.index(k) if k in TYPES else 9)
        if not kinds:
            print(f"| {op} | - | no model | 0 | |")
            counts["no model"] += 1
            continue
        for kind in kinds:
            paths = by_row[(op, kind)]
            statuses = [results[p] for p in paths]
            classes = {s for s, _ in statuses}
            if classes <= {"ok-tflm"}:
                status = "bit-exact (TFLM)" if kind != "float32" else "within 1e-5 (TFLM)"
            elif classes <= {"ok-tflm", "ok-litert"}:
                status = "within tolerance (LiteRT)"
            else:
                bad = next((s, d) for s, d in statuses if not s.startswith("ok"))
                status = f"{bad[0]}: {bad[1]}".replace("|", "/")
            counts[status.split(":")[0]] += 1
            shapes = "; ".join(sorted({input_shapes(p) for p in paths}))[:80]
            print(f"| {op} | {kind} | {status} | {len(paths)} | {shapes} |")
    print("\nRows by status: " + ", ".join(f"{k} {v}" for k, v in sorted(counts.items())) + ".")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
