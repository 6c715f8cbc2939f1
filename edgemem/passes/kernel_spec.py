"""How a kernel was built, kept on its PrimFunc (kernels/kernel_attrs.py's ``spec``) so that a later pass can
build it again with other shapes, padding or aliasing: a frozen dataclass per builder family
(kernels/specs.py; ``dataclasses.replace`` gives a rebuilt variant), and here the builders in
kernels/int8_ops.py and kernels/conv16.py each family calls."""

from __future__ import annotations

import functools

from ..kernels import conv16, int8_ops, kernel_attrs
from ..kernels.specs import (
    Conv2D,
    Depthwise,
    Depthwise16,
    Depthwise16Inplace,
    DepthwiseInplace,
    DequantizeFloat,
    KernelSpec,
    MaxPool,
    Pad,
    Requant,
)

_BUILDERS = {
    Conv2D: lambda s: int8_ops.conv2d_fast(s.x_shape, s.w_shape, s.in_zp, s.stride, s.dilation, s.pad, s.out_shape, s.rq)
    if s.folded else
    int8_ops.conv2d(s.x_shape, s.w_shape, s.has_bias, s.in_zp, s.stride, s.dilation, s.pad, s.out_shape, s.rq),
    Depthwise: lambda s: int8_ops.depthwise_conv2d_fast(s.x_shape, s.w_shape, s.in_zp, s.stride, s.dilation, s.pad,
                                                        s.out_shape, s.rq)
    if s.folded else
    int8_ops.depthwise_conv2d(s.x_shape, s.w_shape, s.has_bias, s.in_zp, s.stride, s.dilation, s.pad, s.out_shape, s.rq),
    DepthwiseInplace: lambda s: int8_ops.depthwise_conv2d_inplace(
        s.x_shape, s.w_shape, s.in_zp, s.stride, s.dilation, s.pad, s.out_shape, s.rq, s.delay, folded=s.folded),
    Depthwise16: lambda s: conv16.depthwise_conv2d(s.x_shape, s.w_shape, s.out_shape, s.stride, s.dilation, s.pad,
                                                   s.has_bias, s.act),
    Depthwise16Inplace: lambda s: conv16.depthwise_conv2d_inplace(
        s.x_shape, s.w_shape, s.out_shape, s.stride, s.dilation, s.pad, s.act, s.delay),
    MaxPool: lambda s: int8_ops.max_pool2d(s.x_shape, s.pool, s.stride, s.pad[:2], s.out_shape,
                                           Requant(0, s.act_min, s.act_max)),
    Pad: lambda s: int8_ops.pad(s.x_shape, s.pad_before, s.pad_after, s.pad_value),
    DequantizeFloat: lambda s: int8_ops.dequantize_float(s.shape, s.scale, s.zero_point),
}  # fmt: skip


def build(spec: KernelSpec | dict):
    """The PrimFunc the spec describes, carrying it (``kernel_attrs.spec``). Memoized by the spec's JSON: a
    kernel is a pure function of its spec (constants are arguments, not part of the body), and TVMScript
    parsing is most of a build's time -- layers of one shape, and the same model built again in one process
    (tests, the orchestrator), parse it once. A dict is read as ``KernelSpec.from_dict`` reads it."""
    if isinstance(spec, dict):
        spec = KernelSpec.from_dict(spec)
    return _build_cached(spec.to_json())


@functools.lru_cache(maxsize=1024)
def _build_cached(key: str):
    spec = KernelSpec.from_json(key)
    return kernel_attrs.with_spec(_BUILDERS[type(spec)](spec), spec)


def dumps(spec: KernelSpec) -> str:
    """The spec's JSON (what the PrimFunc attribute holds)."""
    return spec.to_json()


def of(prim) -> KernelSpec | None:
    """The spec of a kernel, or None if it was not built from one."""
    return kernel_attrs.spec(prim)
