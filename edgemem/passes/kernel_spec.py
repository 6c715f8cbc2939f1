"""How a kernel was built, kept on its PrimFunc (attribute ``edgemem.spec``) so that a later pass can build
it again with other shapes, padding or aliasing: the builder's name in kernels/int8_ops.py (or kernels/conv16.py)
and its arguments, as JSON. ``"folded": true`` (what integerize writes): the kernel's bias constant already holds
bias - in_zp * sum(w) (int8_ops.folded_bias) and conv weights are OHWI; the fast kernels are built."""

from __future__ import annotations

import functools
import json

from ..kernels import conv16, int8_ops
from ..kernels.int8_ops import Requant

_BUILDERS = {
    "conv2d": lambda s: int8_ops.conv2d_fast(s["x_shape"], s["w_shape"], s["in_zp"], s["stride"], s["dilation"], s["pad"],
                                             s["out_shape"], s["rq"]) if s.get("folded") else
    int8_ops.conv2d(s["x_shape"], s["w_shape"], s["has_bias"], s["in_zp"], s["stride"], s["dilation"], s["pad"],
                    s["out_shape"], s["rq"]),
    "depthwise_conv2d": lambda s: int8_ops.depthwise_conv2d_fast(s["x_shape"], s["w_shape"], s["in_zp"], s["stride"],
                                                                 s["dilation"], s["pad"], s["out_shape"], s["rq"])
    if s.get("folded") else
    int8_ops.depthwise_conv2d(s["x_shape"], s["w_shape"], s["has_bias"], s["in_zp"], s["stride"], s["dilation"],
                              s["pad"], s["out_shape"], s["rq"]),
    "depthwise_conv2d_inplace": lambda s: int8_ops.depthwise_conv2d_inplace(
        s["x_shape"], s["w_shape"], s["in_zp"], s["stride"], s["dilation"], s["pad"], s["out_shape"], s["rq"],
        s.get("delay", 0), folded=bool(s.get("folded"))),
    # 16x8 DEPTHWISE_CONV_2D (kernels/conv16.py), which passes/inplace.py may rebuild in place
    "depthwise_conv2d16": lambda s: conv16.depthwise_conv2d(s["x_shape"], s["w_shape"], s["out_shape"], s["stride"],
                                                            s["dilation"], s["pad"], s["has_bias"], tuple(s["act"])),
    "depthwise_conv2d16_inplace": lambda s: conv16.depthwise_conv2d_inplace(
        s["x_shape"], s["w_shape"], s["out_shape"], s["stride"], s["dilation"], s["pad"], tuple(s["act"]), s["delay"]),
    "pad": lambda s: int8_ops.pad(s["x_shape"], s["pad_before"], s["pad_after"], s["pad_value"]),
    "dequantize_float": lambda s: int8_ops.dequantize_float(tuple(s["shape"]), s["scale"], s["zero_point"]),
}  # fmt: skip


def build(spec: dict):
    """The PrimFunc the spec describes. Memoized by the spec's JSON: a kernel is a pure function of its spec
    (constants are arguments, not part of the body), and TVMScript parsing is most of a build's time -- layers
    of one shape, and the same model built again in one process (tests, the orchestrator), parse it once."""
    return _build_cached(dumps(spec))


@functools.lru_cache(maxsize=1024)
def _build_cached(key: str):
    spec = json.loads(key)
    for key in ("x_shape", "w_shape", "out_shape", "stride", "dilation", "pad", "pad_before", "pad_after"):
        if key in spec:
            spec[key] = tuple(int(v) for v in spec[key])
    if isinstance(spec.get("rq"), dict):
        spec["rq"] = Requant(**spec["rq"])
    return _BUILDERS[spec["builder"]](spec)


def dumps(spec: dict) -> str:
    rq = spec.get("rq")
    plain = {**spec, **({"rq": {"out_zp": rq.out_zp, "act_min": rq.act_min, "act_max": rq.act_max}} if isinstance(rq, Requant) else {})}
    return json.dumps(plain, sort_keys=True)


def of(prim) -> dict | None:
    """The spec of a kernel, or None if it was not built from one."""
    attrs = prim.attrs or {}
    return json.loads(str(attrs["edgemem.spec"])) if "edgemem.spec" in attrs else None
