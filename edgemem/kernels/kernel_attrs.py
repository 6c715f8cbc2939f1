"""The contract between edgemem's passes and its kernels: the PrimFunc attributes they exchange, each key
defined here once, read and written through typed accessors (``macs(prim) -> int``, ``with_macs(prim, n)``).
Nothing else in the tree names an ``edgemem.*`` attribute (tests/test_kernel_attrs.py greps for that).

On a PrimFunc (values stay TVM-native -- strings, integers, JSON text -- so they survive TVM's passes):

- ``op``: the TFLite operator kind the kernel computes ("CONV_2D", "CONV_2D+ADD" once fused); a PrimFunc
  without it is not one of edgemem's own kernels (TVM legalized it).
- ``macs``: its multiply-accumulates (reports, analyze).
- ``spec``: how it was built (kernels/specs.py), so a pass can build it again (passes/kernel_spec.py).
- ``inplace``: the output may be written over argument ``index`` (the planner aliases the two); with
  ``overlap``, partial liveness (passes/overlap.py): the output sits ``shift`` bytes from that input's start,
  safe for the kernel's pixel ``order`` and ``tile``.
- ``workspace``: the kernel returns (output, workspace of this many bytes).
- ``state``: parameters read and updated across invocations (outside the arena; an LSTM's hidden state).
- ``window``: a pooling's window geometry (partial liveness of pools).
- ``subkernels``: C name -> PrimFunc of the kernels this one calls (``T.call_extern``; a rolling patch
  stage, passes/rolling.py): compiled next to it into the same C unit.

On a loop (``T.serial(..., annotations=...)``, not a PrimFunc attribute): ``DOT`` and ``LANES`` mark the
inner loops codegen/kernels_c.py replaces by SMLAD micro-kernels.
"""

from __future__ import annotations

import functools
import json
from dataclasses import dataclass

from .specs import KernelSpec

OP = "edgemem.op"
MACS = "edgemem.macs"
SPEC = "edgemem.spec"
INPLACE = "edgemem.inplace"
OVERLAP = "edgemem.overlap"
WORKSPACE = "edgemem.workspace"
STATE = "edgemem.state"
WINDOW = "edgemem.window"
SUBKERNELS = "edgemem.subkernels"
KEYS = (OP, MACS, SPEC, INPLACE, OVERLAP, WORKSPACE, STATE, WINDOW, SUBKERNELS)

# loop annotations (kernels/int8_ops.py writes them, codegen/kernels_c.py reads them)
DOT = "edgemem.dot"
LANES = "edgemem.lanes"


def _get(prim, key: str):
    attrs = prim.attrs
    return attrs[key] if attrs is not None and key in attrs else None


def _without(prim, key: str):
    return prim.without_attr(key) if _get(prim, key) is not None else prim


# -- op, macs


def op(prim) -> str | None:
    """The operator kind, or None for a PrimFunc that is not one of edgemem's kernels."""
    value = _get(prim, OP)
    return None if value is None else str(value)


def is_kernel(prim) -> bool:
    """One of edgemem's own kernels (built with TFLM's arithmetic and scheduled), not one TVM legalized."""
    return _get(prim, OP) is not None


def with_op(prim, kind: str):
    return prim.with_attr(OP, kind)


def macs(prim) -> int:
    """Multiply-accumulates; 0 where none were counted."""
    value = _get(prim, MACS)
    return 0 if value is None else int(value)


def with_macs(prim, n: int):
    return prim.with_attr(MACS, int(n))


def with_kind(prim, kind: str, n: int, symbol: str | None = None):
    """``prim`` named (``global_symbol``) and marked with its kind and MACs: what every kernel call carries."""
    if symbol is not None:
        prim = prim.with_attr("global_symbol", symbol)
    return with_macs(with_op(prim, kind), n)


# -- spec


def spec(prim) -> KernelSpec | None:
    """How the kernel was built, or None (built otherwise, or rewritten since: fused, redirected)."""
    value = _get(prim, SPEC)
    return None if value is None else _spec_of_json(str(value))


@functools.lru_cache(maxsize=4096)
def _spec_of_json(text: str) -> KernelSpec:
    return KernelSpec.from_json(text)  # frozen: one object per text may be shared (passes read specs often)


def with_spec(prim, s: KernelSpec):
    return prim.with_attr(SPEC, s.to_json())


def without_spec(prim):
    """``prim`` whose body no longer is what its spec builds (an epilogue fused in, its output redirected):
    a pass rebuilding from the spec would undo that."""
    return _without(prim, SPEC)


# -- in place, overlap


@dataclass(frozen=True)
class Overlap:
    """Partial liveness: the output at ``shift`` bytes from its input's start, the kernel walking its output
    pixels in ``order`` (memory/overlap.py's FORWARD or REVERSE) ``tile`` pixels per pass."""

    order: str
    shift: int
    tile: int

    def to_json(self) -> str:
        return json.dumps({"order": self.order, "shift": int(self.shift), "tile": int(self.tile)})

    @staticmethod
    def from_json(text: str) -> Overlap:
        d = json.loads(text)
        return Overlap(str(d["order"]), int(d["shift"]), int(d["tile"]))


@dataclass(frozen=True)
class Inplace:
    """The output may be written over argument ``index`` (at its offset, or ``overlap.shift`` bytes on)."""

    index: int
    overlap: Overlap | None = None

    @property
    def shift(self) -> int:
        return self.overlap.shift if self.overlap is not None else 0


def inplace(prim) -> Inplace | None:
    value = _get(prim, INPLACE)
    if value is None:
        return None
    mark = _get(prim, OVERLAP)
    return Inplace(int(value), None if mark is None else Overlap.from_json(str(mark)))


def with_inplace(prim, index: int, overlap: Overlap | None = None):
    """``prim`` marked to write over argument ``index``; its pointers lose ``restrict`` (TVM's ``tirx.noalias``,
    which codegen/kernels_c.py reads), since the output and that argument may be the same memory."""
    prim = prim.with_attr(INPLACE, int(index)).with_attr("tirx.noalias", False)
    return prim.with_attr(OVERLAP, overlap.to_json()) if overlap is not None else _without(prim, OVERLAP)


def without_inplace(prim):
    """``prim`` no longer marked in place (nor overlapping): a copy run on memory of its own."""
    return _without(_without(prim, INPLACE), OVERLAP)


# -- workspace, state


def workspace(prim) -> int | None:
    """Bytes of the workspace the kernel returns after its output, or None (it returns its output alone)."""
    value = _get(prim, WORKSPACE)
    return None if value is None else int(value)


def with_workspace(prim, nbytes: int):
    return prim.with_attr(WORKSPACE, int(nbytes))


def state(prim) -> tuple[int, ...]:
    """Positions of the parameters kept across invocations (empty for a kernel without state)."""
    value = _get(prim, STATE)
    return tuple(int(i) for i in str(value).split(",")) if value is not None and str(value) else ()


def with_state(prim, params):
    return prim.with_attr(STATE, ",".join(str(int(i)) for i in params))


def subkernels(prim) -> dict:
    """C name -> PrimFunc of the kernels ``prim`` calls by name (empty for a kernel calling none)."""
    value = _get(prim, SUBKERNELS)
    return {} if value is None else {str(k): v for k, v in value.items()}


def with_subkernels(prim, funcs: dict):
    return prim.with_attr(SUBKERNELS, dict(funcs))


def plain_output(prim) -> bool:
    """The kernel's output follows the plain rules (its own storage, no workspace, no state): a pass that
    moves or folds outputs may take it."""
    return inplace(prim) is None and workspace(prim) is None and not state(prim)


# -- window


@dataclass(frozen=True)
class Window:
    """A pooling's window (NHWC): input and output shapes, kernel, stride, padding (top, left)."""

    x_shape: tuple[int, ...]
    out_shape: tuple[int, ...]
    kernel: tuple[int, ...]
    stride: tuple[int, ...]
    pad: tuple[int, ...]

    def to_json(self) -> str:
        return json.dumps({"x_shape": list(self.x_shape), "out_shape": list(self.out_shape), "kernel": list(self.kernel),
                           "stride": list(self.stride), "pad": list(self.pad)})  # fmt: skip

    @staticmethod
    def from_json(text: str) -> Window:
        d = json.loads(text)
        return Window(*(tuple(int(v) for v in d[k]) for k in ("x_shape", "out_shape", "kernel", "stride", "pad")))

    def geometry(self) -> dict:
        """As memory/overlap.py's ``rows`` takes it (no dilation in a pooling)."""
        return {"x_shape": self.x_shape, "out_shape": self.out_shape, "kernel": self.kernel, "stride": self.stride,
                "dilation": (1, 1), "pad": self.pad}  # fmt: skip


def window(prim) -> Window | None:
    value = _get(prim, WINDOW)
    return None if value is None else Window.from_json(str(value))


def with_window(prim, w: Window):
    return prim.with_attr(WINDOW, w.to_json())
