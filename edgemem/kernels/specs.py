"""Kernel specs: how a kernel was built, as a frozen dataclass per builder family, so that a later pass can
build it again with other shapes, padding or aliasing (``dataclasses.replace``; passes/kernel_spec.py's
``build``). A spec travels on its PrimFunc as JSON (kernels/kernel_attrs.py, attribute ``spec``), which
survives TVM's passes; ``to_json`` / ``KernelSpec.from_json`` are the two directions, and the JSON is the
memo key of ``build``.

Pure data: nothing here imports TVM. ``Requant`` (the output side of an integer kernel) lives here too, since
the int8 specs carry one; kernels/int8_ops.py re-exports it.
"""

from __future__ import annotations

import dataclasses
import json
from dataclasses import dataclass
from typing import ClassVar

import numpy as np


@dataclass(frozen=True)
class Requant:
    """Output side of an integer op: zero point and the clamp of its fused activation."""

    out_zp: int
    act_min: int
    act_max: int


def _plain(value):
    """A field value as the spec keeps it: sequences as tuples, numpy scalars as Python ones (so two specs
    of one kernel compare, hash and serialize alike however their builder was called)."""
    if isinstance(value, (list, tuple, np.ndarray)):
        return tuple(_plain(v) for v in value)
    if isinstance(value, np.bool_):
        return bool(value)
    if isinstance(value, np.integer):
        return int(value)
    if isinstance(value, np.floating):
        return float(value)
    return value


@dataclass(frozen=True, kw_only=True)
class KernelSpec:
    """Base of the spec families; ``builder`` is the family's name in the JSON (and in reports)."""

    builder: ClassVar[str]
    _families: ClassVar[dict[str, type[KernelSpec]]] = {}

    def __init_subclass__(cls, **kw):
        super().__init_subclass__(**kw)
        if "builder" in cls.__dict__:
            KernelSpec._families[cls.builder] = cls

    def __post_init__(self):
        for f in dataclasses.fields(self):
            value = getattr(self, f.name)
            if f.name == "rq" and isinstance(value, dict):
                value = Requant(**value)
            object.__setattr__(self, f.name, _plain(value))

    def to_dict(self) -> dict:
        out = {"builder": self.builder}
        for f in dataclasses.fields(self):
            value = getattr(self, f.name)
            out[f.name] = dataclasses.asdict(value) if isinstance(value, Requant) else value
        return out

    def to_json(self) -> str:
        """The attribute's text: sorted keys, so equal specs give equal strings (``build``'s memo key)."""
        return json.dumps(self.to_dict(), sort_keys=True)

    @staticmethod
    def from_dict(d: dict) -> KernelSpec:
        cls = KernelSpec._families.get(d.get("builder"))
        if cls is None:
            raise ValueError(f"kernel spec of unknown builder {d.get('builder')!r}")
        return cls(**{k: v for k, v in d.items() if k != "builder"})

    @staticmethod
    def from_json(text: str) -> KernelSpec:
        return KernelSpec.from_dict(json.loads(text))


@dataclass(frozen=True, kw_only=True)
class Convolution(KernelSpec):
    """A convolution's geometry (NHWC): what memory/overlap.py's pixel rows take. ``w_shape``: HWIO for
    conv2d, [KH, KW, C*M] for a depthwise; ``pad``: top, left, bottom, right (int8) or top, left (16x8)."""

    x_shape: tuple[int, ...]
    w_shape: tuple[int, ...]
    out_shape: tuple[int, ...]
    stride: tuple[int, ...]
    dilation: tuple[int, ...]
    pad: tuple[int, ...]
    has_bias: bool = True

    def out_of_place(self) -> Convolution:
        """The convolution writing an output of its own (itself, unless it is an in-place family)."""
        return self

    def geometry(self) -> dict:
        """The window geometry as memory/overlap.py's ``rows`` takes it."""
        return {"x_shape": self.x_shape, "out_shape": self.out_shape, "kernel": (self.w_shape[0], self.w_shape[1]),
                "stride": self.stride, "dilation": self.dilation, "pad": self.pad}  # fmt: skip


@dataclass(frozen=True, kw_only=True)
class Int8Convolution(Convolution):
    """An int8 convolution: input zero point and requantization; ``folded``: the bias constant holds
    bias - in_zp * sum(w) (int8_ops.folded_bias), conv weights are OHWI, and the fast kernels are built."""

    in_zp: int
    rq: Requant
    folded: bool = False


@dataclass(frozen=True, kw_only=True)
class Conv2D(Int8Convolution):
    builder: ClassVar[str] = "conv2d"


@dataclass(frozen=True, kw_only=True)
class Depthwise(Int8Convolution):
    builder: ClassVar[str] = "depthwise_conv2d"

    def in_place(self, delay: int) -> DepthwiseInplace:
        """The same convolution written over its input, each output held ``delay`` rows (0: one channel of
        workspace instead)."""
        return DepthwiseInplace(**_fields_of(self), delay=delay)


@dataclass(frozen=True, kw_only=True)
class DepthwiseInplace(Int8Convolution):
    builder: ClassVar[str] = "depthwise_conv2d_inplace"
    delay: int = 0

    def out_of_place(self) -> Depthwise:
        return Depthwise(**{k: v for k, v in _fields_of(self).items() if k != "delay"})


@dataclass(frozen=True, kw_only=True)
class Depthwise16(Convolution):
    """16x8 DEPTHWISE_CONV_2D (kernels/conv16.py); ``act``: the int16 activation clamp."""

    builder: ClassVar[str] = "depthwise_conv2d16"
    act: tuple[int, int]

    def in_place(self, delay: int) -> Depthwise16Inplace:
        return Depthwise16Inplace(**_fields_of(self), delay=delay)


@dataclass(frozen=True, kw_only=True)
class Depthwise16Inplace(Convolution):
    builder: ClassVar[str] = "depthwise_conv2d16_inplace"
    act: tuple[int, int]
    delay: int

    def out_of_place(self) -> Depthwise16:
        return Depthwise16(**{k: v for k, v in _fields_of(self).items() if k != "delay"})


@dataclass(frozen=True, kw_only=True)
class Pad(KernelSpec):
    """int8 PAD / PADV2 (constant mode): per-axis padding and the value written into it."""

    builder: ClassVar[str] = "pad"
    x_shape: tuple[int, ...]
    pad_before: tuple[int, ...]
    pad_after: tuple[int, ...]
    pad_value: int


@dataclass(frozen=True, kw_only=True)
class MaxPool(KernelSpec):
    """int8 MAX_POOL_2D (NHWC): the largest in-bounds element of each window (padding is never read), clamped to
    the fused activation's range. ``pad``: top, left (a patch's bottom and right padding, when given, is its
    input's end: the window is clipped there)."""

    builder: ClassVar[str] = "max_pool2d"
    x_shape: tuple[int, ...]
    out_shape: tuple[int, ...]
    pool: tuple[int, ...]
    stride: tuple[int, ...]
    pad: tuple[int, ...]
    act_min: int
    act_max: int

    def out_of_place(self) -> MaxPool:
        return self


@dataclass(frozen=True, kw_only=True)
class DequantizeFloat(KernelSpec):
    """int8 -> float32 DEQUANTIZE (per tensor)."""

    builder: ClassVar[str] = "dequantize_float"
    shape: tuple[int, ...]
    scale: float
    zero_point: int


def _fields_of(spec: KernelSpec) -> dict:
    return {f.name: getattr(spec, f.name) for f in dataclasses.fields(spec)}
