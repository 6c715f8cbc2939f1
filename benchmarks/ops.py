"""Operator coverage: every TFLite Micro operator x type, with the status edgemem reaches on it.

For each TFLM built-in operator (the list of ../shared/research/tflm-ops.md, less the exclusions of the
issue: control flow, resource variables, NPU/signal custom ops) and each type, every test model that contains
it is built for the host and compared with TFLite Micro on seeds 0, 1, 2 (tests/op_check.py: int8 bit-exact,
float within 1e-5 relative; LiteRT where TFLM cannot run the model). The models: the converter-made ones of
`tests/models/ops/` and `tests/models/arch/`, and the hand-made flatbuffers of the operator tests (layout,
reduction, FULLY_CONNECTED, LSTM and uint8 cases, built by the tests' own functions). A model counts for every
operator it contains, with the operator's operand type (its first non-constant input's). Status per row:

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

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))

import op_check  # noqa: E402

from edgemem.errors import EdgememError, UnsupportedModelError  # noqa: E402
from edgemem.frontend.footprint import op_names  # noqa: E402
from edgemem.frontend.ops.registry import operand_type  # noqa: E402
from edgemem.frontend.tflite_import import read_tflite  # noqa: E402

OPS_MD = ROOT.parent / "shared" / "research" / "tflm-ops.md"
MODELS = ROOT / "tests" / "models" / "ops"
ARCH = ROOT / "tests" / "models" / "arch"
EXCLUDED = {"IF", "WHILE", "CALL_ONCE", "VAR_HANDLE", "READ_VARIABLE", "ASSIGN_VARIABLE"}
TYPES = ("int8", "int16", "float32", "int32", "bool")
# The operators TFLite Micro has an int16 kernel for: the kernels whose Prepare/Eval take kTfLiteInt16 activations
# (read from tflite-micro @ 90b983c, tensorflow/lite/micro/kernels/*.cc), plus the type-agnostic ones that move
# bytes (RESHAPE, SQUEEZE, EXPAND_DIMS, BROADCAST_TO). SVDF takes int16 only for its state, REDUCE_MAX/MIN,
# HARD_SWISH, GATHER and the space/depth rearrangements only int8, FILL no int16 value and RSQRT fails at
# invoke on int16 (both probed). GREATER names int16 but
# its Prepare never sets the int16 scaling, so every element compares 0 > 0 (false; probed): not counted, edgemem refuses it.
TFLM_INT16 = frozenset("""
    ABS ADD AVERAGE_POOL_2D BATCH_MATMUL BROADCAST_TO CAST CONCATENATION CONV_2D DEPTHWISE_CONV_2D DEQUANTIZE
    DYNAMIC_UPDATE_SLICE EXPAND_DIMS FULLY_CONNECTED LEAKY_RELU LOGISTIC MAXIMUM MAX_POOL_2D MEAN MINIMUM
    MUL PACK PAD PADV2 PRELU QUANTIZE RELU RELU6 RESHAPE RESIZE_NEAREST_NEIGHBOR REVERSE_V2 SELECT_V2 SLICE
    SOFTMAX SPLIT SPLIT_V SQUARED_DIFFERENCE SQUEEZE STRIDED_SLICE SUB SUM TANH TRANSPOSE TRANSPOSE_CONV
    UNIDIRECTIONAL_SEQUENCE_LSTM UNPACK
""".split())
# operators no reference interpreter runs, checked another way (the test that does it)
NOT_RUNNABLE = {
    "BROADCAST_ARGS": "folded at build time (its result depends on shapes alone); neither TFLM's Python binding nor "
                      "LiteRT registers it, so tests/test_ops_layout.py checks the folded value against numpy",
}


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


def operators_in(path: Path) -> set[tuple[str, str]]:
    """(operator, operand type) of every operator of the model."""
    model = read_tflite(path)
    sg = model.Subgraphs(0)
    from edgemem.frontend.ops.registry import _TFL_TYPES

    def kind(i, name):
        op = sg.Operators(i)
        if name == "SELECT_V2":  # its first operand is the bool condition: a row per type of the values it selects
            return _TFL_TYPES.get(sg.Tensors(int(op.Outputs(0))).Type(), "unknown")
        return operand_type(sg, op, model, name)

    return {(name, kind(i, name)) for i, name in enumerate(op_names(model))}


def subgraph_count(path: Path) -> int:
    import tflite

    return tflite.Model.GetRootAsModel(path.read_bytes(), 0).SubgraphsLength()


def handmade_models(tmp: Path) -> list[Path]:
    """The hand-made flatbuffers of the operator tests, written to ``tmp``."""
    import test_lstm
    import test_lstm_float
    import test_lstm_int16
    import test_ops_int16_binary
    import test_ops_int16_conv
    import test_ops_int16_quantize
    import test_ops_int16_reduce
    import test_ops_int16_unary
    import test_ops_binary
    import test_ops_layout
    import test_ops_matmul
    import test_ops_reduce
    import test_ops_uint8
    import test_ops_unary
    import uint8_models

    def binary(case):
        op, sa, sb, so, qa, qb, qo, act = test_ops_binary.INT8_CASES[case]
        out = test_ops_binary.BOOL if op in test_ops_binary.CMP_OPS.values() else None
        return lambda: test_ops_binary.binary_model(op, sa, sb, so, np.int8, qa, qb, qo, act, out)

    def unary(op, in_q, out_q):
        return lambda: test_ops_unary.one_op(op, (1, 4, 6, 3), in_q, out_q)

    u16 = test_ops_int16_unary
    int16_unary = {
        **{f"{op}-{i}": (lambda op=op, sc=sc: u16.one_op(op, (1, 4, 64), (sc, 0), (2.0**-15, 0)))
           for op, scales in u16.SIGMOID_SCALES.items() for i, sc in enumerate(scales[:2])},
        "SOFTMAX": lambda: u16.one_op("SOFTMAX", (2, 64), (3e-4, 0), (2.0**-15, 0), u16.mm.softmax_options(0.5)),
        **{f"{op}-{i}": (lambda op=op, iq=iq, oq=oq, o=o: u16.one_op(op, (1, 4, 64), iq, oq, o)) for i, (op, iq, oq, o) in enumerate(u16.ELEMENTWISE_CASES)},
        "PRELU": lambda: u16.one_op("PRELU", (1, 4, 8), (1e-3, 0), (1e-3, 0), alpha=np.arange(-4, 4), alpha_q=(0.01, 3)),
    }
    # RSQRT is left out: seeded inputs below its zero point make TFLM fail the inference (edgemem's table answers)
    unary_cases = {op: qs[0] for op, qs in test_ops_unary.INT8_CASES.items() if op not in ("RSQRT", "LEAKY_RELU")}
    builders = {**{f"layout-{k}": f for k, f in test_ops_layout.MODELS.items()},
                **{f"binary-{k}": binary(k) for k in test_ops_binary.INT8_CASES},
                **{f"unary-{op}": unary(op, *q) for op, q in unary_cases.items()},
                **{f"unary-{op}-{i}": unary(op, in_q, out_q) for i, (op, in_q, out_q) in enumerate(test_ops_unary.RELU_CASES)},
                **{f"requantize-{i}": unary("QUANTIZE", *qs) for i, qs in enumerate(test_ops_unary.REQUANT_CASES)},
                **{f"add-n-{n}": (lambda n=n: test_ops_binary.add_n_model(n)) for n in (2, 3, 5)},
                **{f"reduce-{k}": f for k, f in test_ops_reduce.HANDMADE.items()},
                **{f"fc-{k}": (lambda k=k: test_ops_matmul.fc_model(**test_ops_matmul.FC_CASES[k])) for k in test_ops_matmul.FC_CASES},
                **{f"lstm-float-{k}": (lambda k=k: test_lstm_float._float_lstm(**test_lstm_float.HANDMADE[k])) for k in test_lstm_float.HANDMADE},
                **{f"int16-binary-{k}": f for k, f in test_ops_int16_binary.HANDMADE.items()},
                **{f"int16-conv-{k}": f for k, f in test_ops_int16_conv.HANDMADE.items()},
                **{f"int16-reduce-{k}": f for k, f in test_ops_int16_reduce.HANDMADE.items()},
                **{f"int16-mixed-{k}": f for k, f in test_ops_int16_quantize.MIXED.items()},
                **{f"int16-quantize-{k}": (lambda k=k: test_ops_int16_quantize.side_by_side([spec for _, spec, _ in test_ops_int16_quantize.GROUPS[k]]))
                   for k in test_ops_int16_quantize.GROUPS},
                **{f"int16-unary-{k}": f for k, f in int16_unary.items()},
                # the uint8 operators TFLM runs (the others are refused, in every model: tests/test_ops_uint8.py)
                **{f"uint8-{k}": (lambda k=k: uint8_models.single_op_model(k))
                   for k in sorted((test_ops_uint8.TFLM_RUNS_UINT8 | test_ops_uint8.LITERT_ORACLE) - {"SHAPE"})},
                "uint8-camera": uint8_models.camera_model, "uint8-movement": uint8_models.movement_model,
                "lstm-int16-random": lambda: test_lstm_int16._random_lstm(5, 7, 4, 1),
                "lstm-7x5x3": lambda: test_lstm._lstm_model(7, 5, 3, False, 0.0, 1),
                "lstm-16x12x6-time-major": lambda: test_lstm._lstm_model(16, 12, 6, True, 0.0, 2)}  # fmt: skip
    paths = []
    for name, build in sorted(builders.items()):
        path = tmp / f"{name}.tflite"
        path.write_bytes(build())
        paths.append(path)
    return paths


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


def row_status(kind: str, statuses: list[tuple[str, str]]) -> str:
    classes = {s for s, _ in statuses}
    if classes <= {"ok-tflm"}:
        return "bit-exact (TFLM)" if kind != "float32" else "within 1e-5 (TFLM)"
    if classes <= {"ok-tflm", "ok-litert"}:
        return "within tolerance (LiteRT)" if "ok-tflm" not in classes else "TFLM; LiteRT where TFLM cannot run one"
    bad = next((s, d) for s, d in statuses if not s.startswith("ok"))
    return f"{bad[0]}: {bad[1]}".replace("|", "/")


_SHORT = {"bit-exact (TFLM)": "exact", "within 1e-5 (TFLM)": "1e-5", "within tolerance (LiteRT)": "LiteRT",
          "TFLM; LiteRT where TFLM cannot run one": "exact+LiteRT"}


def short(status: str) -> str:
    return _SHORT.get(status, status.split(":")[0])


def print_matrix(operators, rows, statuses) -> None:
    """One line per operator, one column per type: the status of its models in that type; for int16, whether TFLM
    has a kernel (a TFLM int16 kernel with no edgemem model is a gap, shown as such)."""
    print("| operator | int8 | int16 | float32 | other types |")
    print("|---|---|---|---|---|")
    gaps = []
    for op in operators:
        cells = {k: short(statuses[(op, k)]) for (o, k) in rows if o == op}
        int16 = cells.pop("int16", None)
        if int16 is None:
            int16 = "no model (TFLM has a kernel)" if op in TFLM_INT16 else "- (no TFLM kernel)"
            if op in TFLM_INT16:
                gaps.append(op)
        other = ", ".join(f"{k} {v}" for k, v in sorted(cells.items()) if k not in ("int8", "float32"))
        print(f"| {op} | {cells.get('int8', '-')} | {int16} | {cells.get('float32', '-')} | {other} |")
    exact16 = sum(1 for op in TFLM_INT16 if statuses.get((op, "int16"), "").startswith("bit-exact"))
    print(f"\nint16: {exact16} of the {len(TFLM_INT16)} operators with a TFLM int16 kernel bit-exact with TFLM on every "
          f"model; without an int16 model: {', '.join(sorted(gaps)) or 'none'}.")


def main() -> int:
    t0 = time.time()
    operators = tflm_operators()
    with tempfile.TemporaryDirectory() as tmp:
        converted = sorted(MODELS.glob("*.tflite")) + sorted(ARCH.glob("*.tflite"))
        handmade = handmade_models(Path(tmp))
        # control flow (WHILE, IF: several subgraphs) is outside the scope: listed, not run
        control_flow = [p for p in converted + handmade if subgraph_count(p) > 1]
        models = [p for p in converted + handmade if p not in control_flow]
        rows: dict[tuple[str, str], list[Path]] = defaultdict(list)
        for path in models:
            for row in operators_in(path):
                rows[row].append(path)
        results = {path: run_model(path) for path in models}
        shapes = {path: input_shapes(path) for path in models}
    made_by = {path: "converter" for path in converted} | {path: "hand-made" for path in handmade}
    print("# Operator coverage: TFLite Micro's operators x types\n")
    print("Command: `.venv/bin/python benchmarks/ops.py > benchmarks/ops.md` "
          f"({len(converted)} converter-made models from `tests/models/ops/` and `tests/models/arch/`, {len(handmade)} "
          f"hand-made ones from the operator tests; {time.time() - t0:.0f} s). Each model built for the host (-Werror, "
          "ASan/UBSan) and compared with TFLite Micro on seeds 0, 1, 2: int8 bit-exact, float within 1e-5 relative "
          "(LiteRT where TFLM cannot run the model: no kernel for the type, or an abort). A row lists every model "
          "containing the operator with that operand type. The 16x8 UNIDIRECTIONAL_SEQUENCE_LSTM files of tests/models/ops "
          "are derived by tests/models/gen_lstm16.py from the converter's float32 LSTMs (TF 2.21's converter refuses a "
          "16x8 LSTM); counted with the converter-made ones.\n")
    statuses = {row: row_status(row[1], [results[p] for p in paths]) for row, paths in rows.items()}
    print("## Summary: operator x type\n")
    print_matrix(operators, rows, statuses)
    print("\n## Per operator and type\n")
    print("| operator | type | status | models (converter + hand-made) | input shapes (first 3) |")
    print("|---|---|---|---|---|")
    counts: dict[str, int] = defaultdict(int)
    for op in operators:
        kinds = sorted({k for (o, k) in rows if o == op}, key=lambda k: TYPES.index(k) if k in TYPES else 9)
        if not kinds:
            print(f"| {op} | - | no model{': ' + NOT_RUNNABLE[op] if op in NOT_RUNNABLE else ''} | 0 | |")
            counts["no model"] += 1
            continue
        for kind in kinds:
            paths = rows[(op, kind)]
            status = statuses[(op, kind)]
            counts[status.split(":")[0]] += 1
            n_conv = sum(made_by[p] == "converter" for p in paths)
            seen = "; ".join(sorted({shapes[p] for p in paths})[:3])
            print(f"| {op} | {kind} | {status} | {n_conv} + {len(paths) - n_conv} | {seen} |")
    print("\nRows by status: " + ", ".join(f"{k} {v}" for k, v in sorted(counts.items())) + ".")
    print("\nNot run (control flow, outside the scope): " + (", ".join(p.name for p in control_flow) or "none") + ".")
    failed = [p for p, (s, _) in results.items() if not s.startswith("ok")]
    print(f"\nModels that did not match or were refused: {len(failed)} of {len(results)}"
          + ("".join(f"\n- `{made_by[p]}` {p.name}: {results[p][0]} {results[p][1]}" for p in failed)))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
