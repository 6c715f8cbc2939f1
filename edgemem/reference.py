"""Independent oracle: run a .tflite model with TensorFlow Lite Micro.

The TFLM Python interpreter (PyPI ``tflite-micro``, import name ``tflite_micro``)
executes a model with TFLM's *reference* kernels, i.e. the same integer
arithmetic that TFLM runs on a microcontroller.  edgemem's generated firmware
must reproduce its outputs bit for bit, so this module is the yardstick the
rest of the project is tested against.  Nothing here uses edgemem's own
frontend, IR or kernels: the model file is read with the ``tflite`` flatbuffer
bindings only to learn input/output shapes and dtypes.

TFLM calls used (tflite_micro 0.dev20261023182759):

* ``tflite_micro.runtime.Interpreter.from_bytes(model_bytes, arena_size=N)``
  (``from_file(path, arena_size=N)`` also exists).  Tensors are allocated in
  the constructor; a too-small arena raises ``RuntimeError("TFLM failed to
  allocate tensors")`` -- or, for very small arenas, crashes the process with
  SIGSEGV, which is why :func:`tflm_arena_bytes` probes sizes in subprocesses.
* ``interp.set_input(array, index)``, ``interp.invoke()``,
  ``interp.get_output(index)``, ``interp.get_input_details(index)`` /
  ``get_output_details(index)`` (dict with ``dtype``, ``shape``,
  ``quantization_parameters``).
* ``interp.print_allocations()``: TFLM's ``RecordingMicroAllocator`` prints
  ``Arena allocation total/head/tail N bytes`` to the C-level stderr; the
  package has no call that returns these numbers, so they are captured from
  file descriptor 2.

``tflite_micro`` is imported lazily so that the rest of edgemem works without
the optional ``reference`` extra installed.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Sequence

import numpy as np

__all__ = [
    "TFLMUnavailableError",
    "model_io_specs",
    "seeded_inputs",
    "tflm_interpreter",
    "tflm_outputs",
    "reference_outputs",
    "reference_outputs_many",
    "tflm_sequence_outputs",
    "reference_sequence_outputs",
    "tflm_arena_bytes",
    "tflm_min_arena_bytes",
    "tflm_invoke_seconds",
]


class TFLMUnavailableError(ImportError):
    """The optional ``tflite-micro`` package is not installed."""


def _import_tflm():
    try:
        import tflite_micro  # noqa: PLC0415 (lazy on purpose)
    except ImportError as exc:  # pragma: no cover - depends on environment
        raise TFLMUnavailableError(
            "edgemem.reference needs the TFLite Micro Python interpreter: "
            "pip install 'edgemem[reference]' (PyPI package 'tflite-micro')"
        ) from exc
    return tflite_micro


# ---------------------------------------------------------------------------
# Model I/O description (read with the `tflite` flatbuffer bindings)
# ---------------------------------------------------------------------------

# tflite.TensorType value -> numpy dtype
_TFLITE_DTYPES = {
    0: np.float32,  # FLOAT32
    1: np.float16,  # FLOAT16
    2: np.int32,  # INT32
    3: np.uint8,  # UINT8
    4: np.int64,  # INT64
    6: np.bool_,  # BOOL
    7: np.int16,  # INT16
    9: np.int8,  # INT8
    10: np.float64,  # FLOAT64
    12: np.uint64,  # UINT64
    15: np.uint32,  # UINT32
    16: np.uint16,  # UINT16
}


def _read_bytes(model: str | os.PathLike | bytes) -> bytes:
    if isinstance(model, (bytes, bytearray, memoryview)):
        return bytes(model)
    return Path(model).read_bytes()


def model_io_specs(model: str | os.PathLike | bytes):
    """Return ``(inputs, outputs)``, each a list of ``(name, shape, dtype)``
    for subgraph 0, in the model's declared order."""
    import tflite  # noqa: PLC0415

    buf = _read_bytes(model)
    m = tflite.Model.GetRootAsModel(buf, 0)
    sg = m.Subgraphs(0)

    def spec(tensor_index: int):
        t = sg.Tensors(tensor_index)
        ttype = t.Type()
        if ttype not in _TFLITE_DTYPES:
            raise NotImplementedError(f"tensor type {ttype} not supported")
        shape = tuple(int(d) for d in t.ShapeAsNumpy()) if t.ShapeLength() else ()
        name = t.Name()  # optional in the schema: TFLM's own benchmark models leave it out
        return (name.decode(errors="replace") if name else f"#{tensor_index}", shape, np.dtype(_TFLITE_DTYPES[ttype]))

    ins = [spec(int(i)) for i in sg.InputsAsNumpy()]
    outs = [spec(int(i)) for i in sg.OutputsAsNumpy()]
    return ins, outs


def seeded_inputs(model_path, seed: int) -> list[np.ndarray]:
    """One random array per model input, deterministic for ``seed``.

    Integer inputs (int8/uint8/int16/...) are uniform over the dtype's full
    range, float inputs are standard normal, bool inputs are fair coin flips.
    All arrays are drawn, in input order, from one ``np.random.default_rng(seed)``.
    """
    rng = np.random.default_rng(seed)
    ins, _ = model_io_specs(model_path)
    arrays = []
    for _name, shape, dtype in ins:
        if dtype == np.bool_:
            a = rng.integers(0, 2, size=shape, dtype=np.int8).astype(np.bool_)
        elif np.issubdtype(dtype, np.integer):
            info = np.iinfo(dtype)
            a = rng.integers(info.min, info.max, size=shape, dtype=dtype, endpoint=True)
        else:
            a = rng.standard_normal(size=shape).astype(dtype)
        arrays.append(np.ascontiguousarray(a).reshape(shape))  # ascontiguousarray makes a 0-d input 1-d
    return arrays


# ---------------------------------------------------------------------------
# Running TFLM
# ---------------------------------------------------------------------------


def _default_arena_size(buf: bytes) -> int:
    """Generous arena: room for every activation tensor twice plus slack.

    TFLM's own default (10x the file size) is too small for models whose
    activations dwarf their weights.
    """
    import tflite  # noqa: PLC0415

    m = tflite.Model.GetRootAsModel(buf, 0)
    act = 0
    for s in range(m.SubgraphsLength()):
        sg = m.Subgraphs(s)
        for i in range(sg.TensorsLength()):
            t = sg.Tensors(i)
            b = t.Buffer()
            if b > 0 and b < m.BuffersLength() and m.Buffers(b).DataLength() > 0:
                continue  # constant
            n = int(np.prod(t.ShapeAsNumpy())) if t.ShapeLength() else 1
            act += max(n, 1) * np.dtype(_TFLITE_DTYPES.get(t.Type(), np.float64)).itemsize
    size = max(len(buf) * 10, 2 * act + (1 << 20))
    # A multiple of 64 so the tail (allocated downwards from the arena end)
    # needs no alignment padding and the recorded tail is reproducible.
    return (size + 63) // 64 * 64


def tflm_interpreter(model_path, arena_size: int | None = None):
    """A ``tflite_micro.runtime.Interpreter`` for the model (tensors allocated).

    ``arena_size`` defaults to a generous size (see ``_default_arena_size``);
    give a multiple of 16 to keep the recorded tail free of alignment slop.
    """
    tflm = _import_tflm()
    buf = _read_bytes(model_path)
    if arena_size is None:
        arena_size = _default_arena_size(buf)
    return tflm.runtime.Interpreter.from_bytes(buf, arena_size=arena_size)


def _check_inputs(model_path, inputs: Sequence[np.ndarray]) -> list[np.ndarray]:
    ins, _ = model_io_specs(model_path)
    if len(inputs) != len(ins):
        raise ValueError(f"model has {len(ins)} inputs, got {len(inputs)} arrays")
    out = []
    for (name, shape, dtype), a in zip(ins, inputs):
        a = np.asarray(a)
        if a.dtype != dtype or tuple(a.shape) != shape:
            raise ValueError(
                f"input {name!r}: expected {dtype}{list(shape)}, got {a.dtype}{list(a.shape)}"
            )
        out.append(np.ascontiguousarray(a).reshape(shape))  # ascontiguousarray makes a 0-d array 1-d
    return out


def tflm_outputs(model_path, inputs: Sequence[np.ndarray], arena_size: int | None = None) -> list[np.ndarray]:
    """Run one inference with TFLM's reference kernels; return the outputs in order.

    ``inputs`` must match the model's input shapes and dtypes exactly (no
    implicit casting).  The returned arrays are copies.
    """
    inputs = _check_inputs(model_path, inputs)
    _, outs = model_io_specs(model_path)
    interp = tflm_interpreter(model_path, arena_size)
    for i, a in enumerate(inputs):
        interp.set_input(a, i)
    interp.invoke()
    return [np.array(interp.get_output(i), copy=True) for i in range(len(outs))]


def tflm_sequence_outputs(model_path, input_sets: Sequence[Sequence[np.ndarray]], arena_size: int | None = None) -> list[list[np.ndarray]]:
    """One TFLM interpreter invoked on each set of inputs in turn, never reset: a stateful model (resource
    variables, LSTM state) carries its state from one invocation to the next. The outputs of each invocation."""
    input_sets = [_check_inputs(model_path, inputs) for inputs in input_sets]
    _, outs = model_io_specs(model_path)
    interp = tflm_interpreter(model_path, arena_size)
    results = []
    for inputs in input_sets:
        for i, a in enumerate(inputs):
            interp.set_input(a, i)
        interp.invoke()
        results.append([np.array(interp.get_output(i), copy=True) for i in range(len(outs))])
    return results


def _litert_outputs(model_path, inputs: Sequence[np.ndarray], resolver: str = "ref") -> list[np.ndarray]:
    """One inference with LiteRT (``ai-edge-litert``), the fallback oracle for models TFLM cannot run: its
    reference kernels (``resolver="ref"``, what TFLM's are ported from) or its builtin kernels (``"builtin"``) --
    never the default XNNPACK delegate, whose int8 requantization differs from TFLite's (two steps apart at the
    output of a U-Net or a transformer encoder)."""
    from ai_edge_litert.interpreter import Interpreter, OpResolverType  # noqa: PLC0415

    kind = OpResolverType.BUILTIN_REF if resolver == "ref" else OpResolverType.BUILTIN_WITHOUT_DEFAULT_DELEGATES
    interp = Interpreter(model_content=_read_bytes(model_path), experimental_op_resolver_type=kind)
    interp.allocate_tensors()
    for detail, a in zip(interp.get_input_details(), inputs):
        interp.set_tensor(detail["index"], a)
    interp.invoke()
    return [np.array(interp.get_tensor(d["index"]), copy=True) for d in interp.get_output_details()]


def _litert_builtin_outputs(model_path, inputs: Sequence[np.ndarray]) -> list[np.ndarray]:
    return _litert_outputs(model_path, inputs, "builtin")


_ORACLES = {"tflm": tflm_outputs, "litert": _litert_outputs, "litert-builtin": _litert_builtin_outputs}


def _run_in_child(oracle: str, model_path, input_sets: Sequence[Sequence[np.ndarray]], timeout: float):
    """Outputs of ``oracle`` on each set of inputs (a fresh interpreter per set), run in one child process, or
    why it failed (an abort takes only the child down)."""
    with tempfile.TemporaryDirectory(prefix="edgemem-ref-") as tmp:
        model = Path(tmp) / "model.tflite"
        model.write_bytes(_read_bytes(model_path))
        for k, inputs in enumerate(input_sets):
            np.savez(Path(tmp) / f"in{k}.npz", *inputs)
        cmd = [sys.executable, "-m", "edgemem.reference", "--child", oracle, str(model), tmp, str(len(input_sets))]
        try:
            proc = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, stdin=subprocess.DEVNULL)
        except subprocess.TimeoutExpired:
            return f"{oracle} did not finish within {timeout:.0f} s"
        outs = [Path(tmp) / f"out{k}.npz" for k in range(len(input_sets))]
        if proc.returncode != 0 or not all(o.exists() for o in outs):
            why = (proc.stderr.strip().splitlines() or [f"exit code {proc.returncode}"])[-1]
            return f"{oracle} failed ({'killed by signal ' + str(-proc.returncode) if proc.returncode < 0 else why})"
        results = []
        for out in outs:
            with np.load(out) as z:
                results.append([z[f"arr_{i}"] for i in range(len(z.files))])
        return results


def reference_outputs_many(model_path, input_sets: Sequence[Sequence[np.ndarray]], timeout: float = 300.0):
    """``(outputs per input set, oracle)``: TFLM's outputs run in a child process (its Python binding aborts the
    whole process on some converter outputs), or -- only when TFLM cannot run the model at all -- LiteRT's, with
    ``oracle`` saying which ("tflm" or "litert"); LiteRT's reference rounds some ties differently, so its
    outputs are compared with a tolerance. Each set runs on a fresh interpreter (no state carried between
    sets); all sets share one child process. Raises RuntimeError when neither runs the model."""
    input_sets = [_check_inputs(model_path, inputs) for inputs in input_sets]
    tflm = _run_in_child("tflm", model_path, input_sets, timeout)
    if not isinstance(tflm, str):
        return tflm, "tflm"
    # LiteRT's reference kernels lack some operators (TILE version 3) or abort on some models (the MobileNets):
    # then its builtin kernels, each in a child of its own
    why = [tflm]
    for oracle in ("litert", "litert-builtin"):
        outs = _run_in_child(oracle, model_path, input_sets, timeout)
        if not isinstance(outs, str):
            return outs, "litert"
        why.append(outs)
    raise RuntimeError(f"no reference interpreter runs this model: {'; '.join(why)}")


def reference_sequence_outputs(model_path, input_sets: Sequence[Sequence[np.ndarray]], timeout: float = 300.0) -> list[list[np.ndarray]]:
    """``tflm_sequence_outputs`` run in a child process (an abort of TFLM's binding takes only the child down);
    RuntimeError when TFLM cannot run the model."""
    input_sets = [_check_inputs(model_path, inputs) for inputs in input_sets]
    outs = _run_in_child("tflm-sequence", model_path, input_sets, timeout)
    if isinstance(outs, str):
        raise RuntimeError(f"TFLM does not run this model: {outs}")
    return outs


def reference_outputs(model_path, inputs: Sequence[np.ndarray], timeout: float = 300.0) -> tuple[list[np.ndarray], str]:
    """``(outputs, oracle)`` for one set of inputs: see ``reference_outputs_many``."""
    outputs, oracle = reference_outputs_many(model_path, [inputs], timeout)
    return outputs[0], oracle


def _child(oracle: str, model: str, tmp: str, count: str = "1") -> int:
    """The child side of _run_in_child: read each set of inputs, run the oracle, write its outputs
    ("tflm-sequence": one interpreter through every set in turn)."""
    input_sets = []
    for k in range(int(count)):
        with np.load(Path(tmp) / f"in{k}.npz") as z:
            input_sets.append([z[f"arr_{i}"] for i in range(len(z.files))])
    if oracle == "tflm-sequence":
        results = tflm_sequence_outputs(model, input_sets)
    else:
        results = [_ORACLES[oracle](model, inputs) for inputs in input_sets]
    for k, outs in enumerate(results):
        np.savez(Path(tmp) / f"out{k}.npz", *outs)
    return 0


def tflm_invoke_seconds(model_path, seed: int = 0, repeats: int = 3) -> float:
    """Best wall-clock time of one ``invoke()`` (seconds) over ``repeats`` runs."""
    inputs = _check_inputs(model_path, seeded_inputs(model_path, seed))
    interp = tflm_interpreter(model_path)
    best = float("inf")
    for _ in range(max(1, repeats)):
        for i, a in enumerate(inputs):
            interp.set_input(a, i)
        t0 = time.perf_counter()
        interp.invoke()
        best = min(best, time.perf_counter() - t0)
    return best


# ---------------------------------------------------------------------------
# Arena usage
# ---------------------------------------------------------------------------

_ALLOC_RE = re.compile(r"Arena allocation (total|head|tail) (\d+) bytes")


def _capture_fd_output(fn):
    """Run ``fn()`` while C-level stdout and stderr go to a temporary file."""
    import ctypes  # noqa: PLC0415

    libc = ctypes.CDLL(None)
    sys.stdout.flush()
    sys.stderr.flush()
    libc.fflush(None)
    saved = {fd: os.dup(fd) for fd in (1, 2)}
    with tempfile.TemporaryFile() as tmp:
        try:
            for fd in (1, 2):
                os.dup2(tmp.fileno(), fd)
            fn()
            libc.fflush(None)
        finally:
            for fd, old in saved.items():
                os.dup2(old, fd)
                os.close(old)
        tmp.seek(0)
        return tmp.read().decode("utf-8", "replace")


def tflm_arena_bytes(model_path, arena_size: int | None = None) -> dict:
    """Arena use recorded by TFLM's ``RecordingMicroAllocator``.

    The model is allocated with a generous arena, invoked once on seeded
    inputs, and ``print_allocations()`` is parsed.  Returns
    ``dict(head=..., tail=..., total=...)`` in bytes, where

    * ``head`` is the non-persistent section: the memory planner's buffer
      holding all activation (and scratch) tensors at their planned offsets
      -- the number edgemem's static arena competes with;
    * ``tail`` is the persistent section: TfLiteEvalTensor / TfLiteTensor
      structs, quantization params, per-op persistent buffers (e.g. per-channel
      multipliers), node/registration structs, the allocator's own objects;
    * ``total`` = head + tail as TFLM reports it.

    This is the arena the TFLM *reference* (host) build uses; it is not
    necessarily the smallest ``arena_size`` that works (alignment slop of the
    arena start, see :func:`tflm_min_arena_bytes`), and CMSIS-NN builds may
    need different scratch buffers.
    """
    inputs = seeded_inputs(model_path, 0)
    holder = {}

    def run():
        interp = tflm_interpreter(model_path, arena_size)
        for i, a in enumerate(inputs):
            interp.set_input(a, i)
        interp.invoke()
        interp.print_allocations()
        holder["i"] = interp

    text = _capture_fd_output(run)
    found = {k: int(v) for k, v in _ALLOC_RE.findall(text)}
    if set(found) != {"total", "head", "tail"}:
        raise RuntimeError(f"could not parse TFLM allocation report:\n{text}")
    return {"head": found["head"], "tail": found["tail"], "total": found["total"]}


_PROBE = r"""
import sys, numpy as np
from edgemem.reference import tflm_interpreter, seeded_inputs
path, size = sys.argv[1], int(sys.argv[2])
inputs = seeded_inputs(path, 0)
try:
    it = tflm_interpreter(path, size)
    for i, a in enumerate(inputs):
        it.set_input(a, i)
    it.invoke()
except RuntimeError:
    sys.exit(3)
sys.exit(0)
"""


def _probe_ok(model_path, size: int) -> bool:
    env = dict(os.environ)
    root = str(Path(__file__).resolve().parents[1])
    env["PYTHONPATH"] = root + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
    r = subprocess.run(
        [sys.executable, "-c", _PROBE, str(model_path), str(size)],
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        timeout=600,
    )
    return r.returncode == 0


def tflm_min_arena_bytes(model_path, granularity: int = 8) -> int:
    """Smallest ``arena_size`` (a multiple of ``granularity``) with which the TFLM
    Python interpreter allocates and invokes the model.

    Found by bisection; every probe runs in a subprocess because TFLM can
    crash (SIGSEGV) instead of failing cleanly when the arena is tiny.
    Takes roughly 15 probes of ~0.3 s each.
    """
    g = max(1, int(granularity))
    hi = -(-tflm_arena_bytes(model_path)["total"] // g) * g
    while not _probe_ok(model_path, hi):
        hi *= 2
    lo = 0  # treated as failing
    while hi - lo > g:
        mid = (lo + hi) // 2 // g * g
        if _probe_ok(model_path, mid):
            hi = mid
        else:
            lo = mid
    return hi


def _main(argv: list[str]) -> int:  # pragma: no cover - convenience CLI
    import argparse  # noqa: PLC0415

    if argv[:1] == ["--child"]:
        return _child(*argv[1:5])

    ap = argparse.ArgumentParser(description="Run .tflite models under TFLM (reference kernels)")
    ap.add_argument("models", nargs="+")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--arena", action="store_true", help="also report recorded arena bytes")
    args = ap.parse_args(argv)
    for p in args.models:
        try:
            outs = tflm_outputs(p, seeded_inputs(p, args.seed))
            t = tflm_invoke_seconds(p, args.seed, repeats=10)
            line = f"{Path(p).name}: ok, invoke {t * 1e6:.0f} us, outputs " + ", ".join(
                f"{o.dtype}{list(o.shape)}" for o in outs
            )
            if args.arena:
                line += f", arena {tflm_arena_bytes(p)}"
        except Exception as exc:  # noqa: BLE001
            line = f"{Path(p).name}: FAILED {type(exc).__name__}: {exc}"
        print(line, flush=True)
    return 0


if __name__ == "__main__":  # pragma: no cover
    raise SystemExit(_main(sys.argv[1:]))
