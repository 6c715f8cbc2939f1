"""Coverage-guided fuzzing of edgemem's model front end with atheris (libFuzzer for Python).

    .venv/bin/python benchmarks/fuzz.py --runs 200000                    # the long run (benchmarks/fuzz.md)
    .venv/bin/python benchmarks/fuzz.py --runs 20000 --target build      # also TVM import .. C sources
    .venv/bin/python benchmarks/fuzz.py --runs 10000 --seeds small       # what tests/test_fuzz.py runs
    .venv/bin/python benchmarks/fuzz.py --target odd --runs 500 --seed 1  # differential: odd models vs TFLM
    .venv/bin/python benchmarks/fuzz.py --target odd --qemu stm32f746 --jobs 2 --runs 500  # ... built and run under QEMU

Target `odd` is differential, not coverage-guided: tests/odd_models.py makes valid but odd int8 models from
consecutive seeds (hostile and duplicate tensor names, one-pixel shapes, 1x1 pools, extreme quantization, fan-out,
intermediate outputs); each is run by TFLite Micro, built for the host (pipeline.build(compile=False), gcc) -- or with
--qemu BOARD as a user builds it for BOARD (its own budget) and run under QEMU -- in a scratch folder that is also the
working directory, and run on two seeded inputs. An outcome is `match`,
`refused` (an EdgememError: a clear refusal), `oracle refuses` (TFLM cannot run it: not judged), `MISMATCH`
(built, outputs differ), `CRASH` (any other exception), `ESCAPED` (a file outside the output folder, or the
marker file a hostile name's command would create).

Target `front` (default): every stage a `.tflite` file meets before TVM, in the order `edgemem build` runs them --
the RAM floor check (`budget.check_floor`: read + validate the flatbuffer, the operator floor, the file-order
plan when it does not fit), `inspect_tflite` (types, dynamic shapes, inputs/outputs) and the file-order live
ranges. Target `build` adds `pipeline.build(compile=False)` (TVM import, lowering, schedule, plan, C) on the
inputs the front end accepts (a few percent of the mutants, 0.1-1 s each): about 10x slower, so CI fuzzes `front`
and the long runs both. The one allowed failure is an `edgemem.errors.EdgememError`; any other exception is a
crash, and an input that takes more than --timeout seconds is a hang.

Seeds (written to a temporary corpus, never into the repository): the shared models (../shared/models), the
examples, and a slim copy of each -- the same operators, tensors, shapes and quantization with constant data
zeroed (but for small int32/int64 ones: paddings, axes, shapes) and no options but those setting a rank. (The data keeps its size: the reader refuses a constant of the wrong size.)
"""

from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
import tempfile
import time
import traceback
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
MODELS = ROOT.parent / "shared" / "models"
EXAMPLES = ROOT / "examples"
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(EXAMPLES))

BOARD = "stm32f746"  # 311,296 B for the arena: many mutants exceed it, which exercises the does-not-fit path
SMALL_SEED_BYTES = 64 * 1024  # --seeds small: the models (and slim copies) up to this size
STATS_EVERY = 250  # inputs between two saves of the outcome counts
ARTIFACTS = ("crash-", "timeout-", "oom-", "leak-", "slow-unit-")


# ---------------------------------------------------------------- the target (runs in the worker process)


def check_model_bytes(data: bytes, scratch: Path, board) -> str:
    """Run the front end on one input; returns the name of the EdgememError that ended it ('' if none).
    Anything else propagates: that is a crash."""
    from edgemem import pipeline
    from edgemem.budget import check_floor
    from edgemem.errors import EdgememError
    from edgemem.frontend.footprint import file_order_live_ranges
    from edgemem.passes.optimize import floor_passes
    from edgemem.frontend.tflite_import import inspect_tflite, parse_tflite

    path = scratch / "input.tflite"
    path.write_bytes(data)
    try:
        model = parse_tflite(data, path)
    except EdgememError as exc:
        return type(exc).__name__  # the stages below would stop at the same check (read_tflite parses the same way)
    outcome = ""
    for stage in (lambda: check_floor(path, board, floor_passes(pipeline.BuildOptions())), lambda: inspect_tflite(path),
                  lambda: file_order_live_ranges(model)):  # fmt: skip
        try:
            stage()
        except EdgememError as exc:
            outcome = outcome or type(exc).__name__
    return outcome


def build_model_bytes(data: bytes, scratch: Path, board) -> str:
    """--target build: the front end, then, for an input it accepts, the whole build up to the C sources
    (TVM import, lowering, scheduling, planning, codegen; no compiler). Same rule: only EdgememError."""
    from edgemem import pipeline
    from edgemem.errors import EdgememError

    outcome = check_model_bytes(data, scratch, board)
    if outcome:
        return outcome
    try:
        pipeline.build(scratch / "input.tflite", BOARD, scratch / "out",
                       pipeline.BuildOptions(compile=False, overwrite=True, schedule_seconds=0.2))  # fmt: skip
    except EdgememError as exc:
        return type(exc).__name__
    return ""


TARGETS = {"front": check_model_bytes, "build": build_model_bytes}


def worker(target: str, libfuzzer_args: list[str]) -> None:
    import atheris

    with atheris.instrument_imports(include=["edgemem", "tflite", "flatbuffers"]):
        from edgemem.board import load_board
        from edgemem.budget import board_with_budget
        from edgemem.frontend import footprint, tflite_import  # noqa: F401 - instrumented for coverage

    board = board_with_budget(load_board(BOARD), None, None)
    scratch = Path(os.environ.get("EDGEMEM_FUZZ_SCRATCH") or tempfile.mkdtemp(prefix="edgemem-fuzz-"))
    scratch.mkdir(parents=True, exist_ok=True)

    outcomes: dict[str, int] = {}
    stats = os.environ.get("EDGEMEM_FUZZ_STATS")  # libFuzzer exits from C: no atexit, so counts are saved as we go

    crash_log = os.environ.get("EDGEMEM_FUZZ_CRASH_LOG")  # the traceback, kept where the report can show it

    def one_input(data: bytes) -> None:
        try:
            outcome = TARGETS[target](data, scratch, board) or "accepted"
        except Exception:
            if crash_log:
                Path(crash_log).write_text(traceback.format_exc())
            raise
        outcomes[outcome] = outcomes.get(outcome, 0) + 1
        if stats and sum(outcomes.values()) % STATS_EVERY == 0:
            Path(stats).write_text(json.dumps(outcomes))

    atheris.Setup([sys.argv[0], *libfuzzer_args], one_input)
    atheris.Fuzz()


# ---------------------------------------------------------------- seeds


def slim_model(data: bytes) -> bytes | None:
    """The model's structure with every constant's data zeroed (None if it cannot be read)."""
    import tflite
    from make_example_model import ModelBuilder, _Tensor

    from edgemem.frontend.footprint import indices, is_constant, tensor_bytes
    from edgemem.frontend.tflite_import import tensor_name

    try:
        model = tflite.Model.GetRootAsModel(data, 0)
        sg = model.Subgraphs(0)
        mb = ModelBuilder(description="slim seed")
        for i in range(sg.TensorsLength()):
            t = sg.Tensors(i)
            buffer = 0
            if is_constant(model, t):  # zeros of the data's size (a constant of another size is refused); small
                data = model.Buffers(t.Buffer()).DataAsNumpy()  # ones (paddings, axes, shapes) kept: they set shapes
                mb.buffers.append(data.tobytes() if t.Type() in (2, 4) and data.size <= 64 else bytes(tensor_bytes(t)))
                buffer = len(mb.buffers) - 1
            q = t.Quantization()
            quant = None
            if q is not None and q.ScaleLength():
                quant = {"scale": list(q.ScaleAsNumpy()), "zero_point": list(q.ZeroPointAsNumpy()),
                         "quantized_dimension": q.QuantizedDimension()}  # fmt: skip
            mb.tensors.append(_Tensor(tensor_name(sg, i), tuple(indices(t.ShapeAsNumpy())), t.Type(), buffer, quant,
                                      variable=bool(t.IsVariable())))  # fmt: skip
        for i in range(sg.OperatorsLength()):
            op = sg.Operators(i)
            code = model.OperatorCodes(op.OpcodeIndex())
            builtin = max(code.BuiltinCode(), code.DeprecatedBuiltinCode())
            mb.op(builtin, indices(op.InputsAsNumpy()), indices(op.OutputsAsNumpy()), *_shape_options(op), version=code.Version())
        return mb.serialize(indices(sg.InputsAsNumpy()), indices(sg.OutputsAsNumpy()))
    except Exception:  # noqa: BLE001 - a seed we cannot slim is still used whole
        return None


def _shape_options(op) -> tuple:
    """(options type, writer) of the options that set an output's rank (FULLY_CONNECTED keep_num_dims, a reduction's
    keep_dims), else (): without them the slim copy's declared shapes would disagree with its operators."""
    import tflite

    from edgemem.frontend.footprint import builtin_options

    kind = op.BuiltinOptionsType()
    if kind == tflite.BuiltinOptions.FullyConnectedOptions:
        keep = builtin_options(op, tflite.FullyConnectedOptions).KeepNumDims()

        def fc(b):
            tflite.FullyConnectedOptionsStart(b)
            tflite.FullyConnectedOptionsAddKeepNumDims(b, keep)
            return tflite.FullyConnectedOptionsEnd(b)

        return kind, fc
    if kind == tflite.BuiltinOptions.ReducerOptions:
        keep = builtin_options(op, tflite.ReducerOptions).KeepDims()

        def reducer(b):
            tflite.ReducerOptionsStart(b)
            tflite.ReducerOptionsAddKeepDims(b, keep)
            return tflite.ReducerOptionsEnd(b)

        return kind, reducer
    return ()


def seed_files(which: str) -> list[Path]:
    files = sorted(EXAMPLES.glob("*.tflite")) + sorted(MODELS.glob("*.tflite"))
    if which == "small":
        files = [f for f in files if f.stat().st_size <= SMALL_SEED_BYTES]
    return files


def write_corpus(corpus: Path, which: str) -> int:
    """Seeds into `corpus`; returns how many."""
    corpus.mkdir(parents=True, exist_ok=True)
    n = 0
    for f in seed_files("all"):
        data = f.read_bytes()
        slim = slim_model(data)
        variants = [(f.stem, data)] + ([(f.stem + ".slim", slim)] if slim else [])
        for name, blob in variants:
            if which == "small" and len(blob) > SMALL_SEED_BYTES:
                continue
            (corpus / f"{name}.tflite").write_bytes(blob)
            n += 1
    return n


# ---------------------------------------------------------------- the driver


def run_fuzzer(runs: int, *, seeds: str = "all", timeout: float = 10.0, max_len: int = 1 << 20, seed: int = 1,
               work_dir: Path | None = None, wall_limit: float | None = None, target: str = "front") -> dict:  # fmt: skip
    """Run the worker for `runs` inputs in a subprocess; returns what happened (runs done, crashes, hangs)."""
    work = Path(work_dir or tempfile.mkdtemp(prefix="edgemem-fuzz-run-"))
    corpus, artifacts = work / "corpus", work / "artifacts"
    artifacts.mkdir(parents=True, exist_ok=True)
    n_seeds = write_corpus(corpus, seeds)
    args = [str(corpus), f"-runs={runs}", f"-timeout={int(timeout)}", f"-max_len={max_len}", f"-seed={seed}",
            "-rss_limit_mb=4096", f"-artifact_prefix={artifacts}/", "-print_final_stats=1"]  # fmt: skip
    cmd = [sys.executable, str(Path(__file__).resolve()), "--worker", target, "--", *args]
    t0 = time.perf_counter()
    try:
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=wall_limit, stdin=subprocess.DEVNULL,
                              env={**os.environ, "PYTHONHASHSEED": "0", "EDGEMEM_FUZZ_STATS": str(work / "outcomes.json"),
                                   "EDGEMEM_FUZZ_SCRATCH": str(work / "scratch"),
                                   "EDGEMEM_FUZZ_CRASH_LOG": str(work / "crash_traceback.txt")})  # fmt: skip
        # stderr first: atheris prints an uncaught exception on stdout, which then ends the tail a report shows
        output, returncode = proc.stderr + proc.stdout, proc.returncode
    except subprocess.TimeoutExpired as e:
        output = (e.stderr or b"").decode(errors="replace") + (e.stdout or b"").decode(errors="replace")
        returncode = None
    seconds = time.perf_counter() - t0
    (work / "fuzz.log").write_text(output)  # libFuzzer's whole log, next to the corpus and the artifacts
    done = re.search(r"Done (\d+) runs in (\d+) second", output)
    found = sorted(p.name for p in artifacts.iterdir() if p.name.startswith(ARTIFACTS))
    crash_log = work / "crash_traceback.txt"
    crash_traceback = crash_log.read_text() if crash_log.is_file() else ""
    outcomes = json.loads((work / "outcomes.json").read_text()) if (work / "outcomes.json").is_file() else {}
    return {
        "runs_requested": runs, "runs_done": int(done.group(1)) if done else None, "seconds": round(seconds, 1),
        "seeds": n_seeds, "returncode": returncode, "artifacts": found,
        "crashes": sum(a.startswith(("crash-", "oom-", "leak-")) for a in found) + ("Uncaught Python exception" in output),
        "hangs": sum(a.startswith("timeout-") for a in found) + (returncode is None),
        "cov": _last_int(r"cov: (\d+)", output), "corpus_units": _last_int(r"corp: (\d+)", output),
        "work_dir": str(work), "output_tail": output[-4000:], "crash_traceback": crash_traceback, "command": cmd, "target": target, "outcomes": outcomes,
    }  # fmt: skip


def _last_int(pattern: str, text: str) -> int | None:
    found = re.findall(pattern, text)
    return int(found[-1]) if found else None


def report(res: dict, argv: list[str]) -> str:
    ok = res["runs_done"] is not None and res["runs_done"] >= res["runs_requested"] and not res["crashes"] and not res["hangs"]
    rate = res["runs_done"] / res["seconds"] if res["runs_done"] and res["seconds"] else 0
    lines = [
        "# Fuzzing the model front end (atheris)",
        "",
        f"Command: `.venv/bin/python benchmarks/fuzz.py {' '.join(argv)}`",
        "",
        f"Target `{res['target']}`: `budget.check_floor` (read + validate the flatbuffer, operator floor, "
        "file-order plan), `inspect_tflite` (types, dynamic shapes, inputs/outputs) and `file_order_live_ranges` "
        "on each input" + (", then `pipeline.build(compile=False)` (TVM import, lowering, schedule, plan, C) on the "
        "inputs those accept" if res["target"] == "build" else "") + "; an exception other than `EdgememError` is "
        "a crash, an input over the per-input timeout a hang. Seeds: the shared models, the examples and a slim "
        "copy of each (constants cut to 4 bytes).",
        "",
        "| runs requested | runs done | seconds | inputs/s | seeds | coverage (libFuzzer cov) | corpus at end | crashes | hangs | result |",
        "|---|---|---|---|---|---|---|---|---|---|",
        f"| {res['runs_requested']:,} | {res['runs_done'] or 0:,} | {res['seconds']} | {rate:,.0f} | {res['seeds']} | "
        f"{res['cov']} | {res['corpus_units']} | {res['crashes']} | {res['hangs']} | {'pass' if ok else 'FAIL'} |",
        "",
    ]
    if res["outcomes"]:
        counted = sum(res["outcomes"].values())
        lines += [f"How the first {counted:,} inputs ended (counts saved every {STATS_EVERY} inputs): "
                  + ", ".join(f"{k} {v:,}" for k, v in sorted(res["outcomes"].items(), key=lambda kv: -kv[1])) + ".", ""]
    if not ok:
        lines += [f"Exit code {res['returncode']}; log in `{res['work_dir']}/fuzz.log`. Artifacts:", "",
                  *[f"- `{a}`" for a in res["artifacts"]], "", "```", res["output_tail"], "```"]
    return "\n".join(lines) + "\n"


def odd_outcome(seed: int, scratch: Path, board: str | None = None) -> tuple[str, str]:
    """(outcome, detail) of the odd model of ``seed``, built in ``scratch`` (see the module docstring): for the host
    (gcc), or with ``board`` as a user builds it (the board's own budget, firmware by its cross compiler) and run
    under QEMU."""
    import shutil as _shutil

    sys.path.insert(0, str(ROOT / "tests"))
    from odd_models import odd_model

    from edgemem.errors import EdgememError
    from edgemem.reference import reference_outputs_many, seeded_inputs

    mark = scratch / "MARK"
    model = odd_model(seed, str(mark))
    path = scratch / "model.tflite"
    path.write_bytes(model.data)
    try:
        reference_outputs_many(path, [seeded_inputs(path, 0)], timeout=120)
    except Exception as e:  # noqa: BLE001 - whatever stops TFLM: not judged
        return "oracle refuses", f"{type(e).__name__}: {str(e).splitlines()[0][:100] if str(e) else ''}"
    cwd = os.getcwd()
    os.chdir(scratch)
    try:
        (_build_and_compare_on_qemu if board else _build_and_compare_on_host)(path, scratch, board)
        outcome, detail = "match", model.description
    except AssertionError as e:
        outcome, detail = "MISMATCH", f"{model.description}: {str(e).splitlines()[0][:200]}"
    except EdgememError as e:  # a refusal, if the build refused; a wrong program, if its run did
        built = (scratch / "project" / "edgemem.json").exists()
        outcome = "MISMATCH" if built else "refused"
        detail = f"{model.description}: {type(e).__name__}: {str(e)[:160]}"
    except Exception as e:  # noqa: BLE001 - anything else is a crash of edgemem
        outcome, detail = "CRASH", f"{model.description}: {type(e).__name__}: {str(e)[:200]}"
    finally:
        os.chdir(cwd)
    stray = sorted(p.name for p in scratch.iterdir() if p.name not in ("model.tflite", "project", "host", "MARK"))
    if mark.exists() or stray:
        outcome, detail = "ESCAPED", f"marker {'created' if mark.exists() else 'absent'}, stray files {stray}"
    for p in scratch.iterdir():
        _shutil.rmtree(p) if p.is_dir() else p.unlink()
    return outcome, detail


def _build_and_compare_on_host(path: Path, scratch: Path, board: str | None) -> None:
    from op_check import build_for_host, compare_built

    _, project = build_for_host(path, scratch)
    compare_built(path, project, scratch, seeds=(0, 1))


def _build_and_compare_on_qemu(path: Path, scratch: Path, board: str) -> None:
    """`edgemem build --board BOARD` with its defaults, then `run` under QEMU on two seeds; the oracle's outputs are
    computed here, apart from device_run's own comparison."""
    from op_check import assert_outputs_match, dequantized_steps

    from edgemem import device_run, pipeline
    from edgemem.reference import reference_outputs_many, seeded_inputs

    project = scratch / "project"
    pipeline.build(path, board, project, pipeline.BuildOptions())
    input_sets = [seeded_inputs(path, s) for s in (0, 1)]
    wanted, oracle = reference_outputs_many(path, input_sets, timeout=120)
    for s, inputs, want in zip((0, 1), input_sets, wanted):
        got = device_run.run(project, inputs, timeout_s=120)["output_arrays"]
        assert_outputs_match(got, want, oracle, f"seed {s}", dequantized_steps(path))


def _odd_chunk(seeds: list[int], board: str | None) -> list[tuple[int, str, str]]:
    """One worker's share: each seed in a scratch folder of its own process."""
    with tempfile.TemporaryDirectory(prefix="edgemem-odd-") as d:
        scratch = Path(d) / "work"
        scratch.mkdir()
        return [(s, *odd_outcome(s, scratch, board)) for s in seeds]


def run_odd(runs: int, seed: int, board: str | None = None, jobs: int = 1) -> dict:
    from concurrent.futures import ProcessPoolExecutor

    counts: dict[str, int] = {}
    bad: list[str] = []
    reasons: dict[str, int] = {}
    t0 = time.perf_counter()
    seeds = list(range(seed, seed + runs))
    chunks = [seeds[i : i + 10] for i in range(0, len(seeds), 10)]
    with ProcessPoolExecutor(max_workers=max(1, jobs)) as pool:
        for results in pool.map(_odd_chunk, chunks, [board] * len(chunks)):
            for s, outcome, detail in results:
                counts[outcome] = counts.get(outcome, 0) + 1
                if outcome == "refused":
                    key = re.sub(r"'[^']*'|#\d+|\d+", "_", detail.split(": ", 1)[-1])[:110]
                    reasons[key] = reasons.get(key, 0) + 1
                if outcome in ("MISMATCH", "CRASH", "ESCAPED"):
                    bad.append(f"seed {s}: {outcome}: {detail}")
                    print(bad[-1], file=sys.stderr, flush=True)
    return {"runs": runs, "seed": seed, "seconds": round(time.perf_counter() - t0, 1), "counts": counts, "bad": bad,
            "reasons": reasons, "board": board, "jobs": jobs}


def odd_report(res: dict, argv: list[str]) -> str:
    lines = ["# Differential fuzzing with odd models (tests/odd_models.py) against TFLite Micro", "",
             f"Command: `.venv/bin/python benchmarks/fuzz.py {' '.join(argv)}`", "",
             f"{res['runs']:,} models (seeds {res['seed']}..{res['seed'] + res['runs'] - 1}), "
             + (f"built for {res['board']} and run under QEMU" if res.get("board") else "built for the host")
             + f", {res.get('jobs', 1)} worker(s), in {res['seconds']} s: "
             + ", ".join(f"{k} {v:,}" for k, v in sorted(res["counts"].items(), key=lambda kv: -kv[1])) + ".", ""]
    lines += ["Models that built wrong, crashed or escaped:", "", *(f"- {b}" for b in res["bad"])] if res["bad"] else ["None built wrong, crashed or escaped."]
    if res["reasons"]:
        lines += ["", "Refusals by reason (numbers and quoted names blanked):", "",
                  *(f"- {n:,} x {r}" for r, n in sorted(res["reasons"].items(), key=lambda kv: -kv[1]))]
    return "\n".join(lines) + "\n"


def main(argv: list[str]) -> int:
    if argv[:1] == ["--worker"]:  # --worker TARGET -- libFuzzer arguments
        worker(argv[1], argv[3:])
        return 0
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=200_000)
    ap.add_argument("--seeds", choices=("all", "small"), default="all")
    ap.add_argument("--timeout", type=float, default=10.0, help="seconds per input before it counts as a hang")
    ap.add_argument("--max-len", type=int, default=1 << 20)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--target", choices=sorted(TARGETS) + ["odd"], default="front",
                    help="front: the checks before TVM (fast); build: also the whole build up to the C sources; "
                         "odd: differential, odd models against TFLite Micro (--runs models from --seed)")
    ap.add_argument("--qemu", metavar="BOARD", help="odd: build for BOARD with its budget and run under QEMU "
                    "(default: build for the host)")
    ap.add_argument("--jobs", type=int, default=1, help="odd: models built in parallel")
    args = ap.parse_args(argv)
    if args.target == "odd":
        res = run_odd(args.runs, args.seed, args.qemu, args.jobs)
        sys.stdout.write(odd_report(res, argv))
        return 0 if not res["bad"] else 1
    res = run_fuzzer(args.runs, seeds=args.seeds, timeout=args.timeout, max_len=args.max_len, seed=args.seed,
                     target=args.target)  # fmt: skip
    sys.stdout.write(report(res, argv))
    return 0 if (not res["crashes"] and not res["hangs"]) else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
