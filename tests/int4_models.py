"""Hand-made models with INT4 weights (TFLite's packed 4-bit tensors: two values a byte, the first in the low nibble),
written with the example's flatbuffer writer for what the converter does not choose itself: every nibble value in
every weight tensor, odd weight counts whose last byte carries a nonzero high nibble (TFLM never reads it), a
depthwise depth multiplier, one INT4 tensor shared by two operators, and the cases TFLM refuses.
"""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "examples"))
import make_example_model as mm  # noqa: E402

OP, ACT, PAD = mm.OP, mm.ACT, mm.PAD
INT4 = 17
IN_SCALE = 0.05
SPARE_NIBBLE = 0xA  # the high nibble of an odd count's last byte: padding, which TFLM does not read


def pack_int4(values: np.ndarray) -> bytes:
    """TFLite's packing of int4 values (-8..7): element 2i in the low nibble of byte i, 2i+1 in the high one."""
    v = (np.asarray(values, np.int64).ravel() & 0xF).astype(np.uint8)
    if v.size % 2:
        v = np.append(v, SPARE_NIBBLE)
    return (v[0::2] | (v[1::2] << 4)).astype(np.uint8).tobytes()


def int4_const(mb, name: str, values: np.ndarray, quant, data: bytes | None = None) -> int:
    """An INT4 constant tensor of ``values`` (packed), or of the raw bytes ``data`` when given."""
    mb.buffers.append(pack_int4(values) if data is None else data)
    mb.tensors.append(mm._Tensor(name, tuple(int(d) for d in values.shape), INT4, len(mb.buffers) - 1, quant))  # noqa: SLF001
    return len(mb.tensors) - 1


def nibbles(rng, shape) -> np.ndarray:
    """Random int4 values with every one of -8..7 present (sign extension of each nibble is exercised)."""
    v = rng.integers(-8, 8, size=int(np.prod(shape)))
    v[: min(16, v.size)] = rng.permutation(np.arange(-8, 8))[: v.size]
    return rng.permutation(v).reshape(shape)


def _out_q(k: int, w_scale: float) -> dict:
    """An output scale that spreads the accumulator of ``k`` products over roughly +-60 steps."""
    spread = IN_SCALE * w_scale * 74 * 4.6 * np.sqrt(k) * 2.5
    return mm.qparams(spread / 127, 3)


def _bias(mb, rng, n: int, w_scales) -> int:
    q, scales = mm.quantize_bias(rng.normal(scale=0.5, size=n), IN_SCALE, w_scales)
    return mb.const("bias", q, mm.qparams(scales, 0))


def fc_model(seed: int, k: int, n: int, act=ACT.NONE, bias=True, shared=False, per_channel=False, data=None) -> bytes:
    """x int8[1,k] -> FULLY_CONNECTED (INT4 weights [n,k]) -> y; ``shared``: a second FULLY_CONNECTED (n == k)
    reads the same INT4 tensor."""
    rng = np.random.default_rng(seed)
    mb = mm.ModelBuilder()
    x = mb.tensor("x", (1, k), np.int8, mm.qparams(IN_SCALE, 0))
    w_scales = rng.uniform(0.05, 0.2, size=n if per_channel else 1)
    w = int4_const(mb, "w_int4", nibbles(rng, (n, k)), mm.qparams(w_scales, 0), data)
    b = _bias(mb, rng, n, w_scales) if bias else -1
    out_q = _out_q(k, float(w_scales.mean()))
    y = mb.tensor("y", (1, n), np.int8, out_q)
    mb.op(OP.FULLY_CONNECTED, [x, w, b], [y], *mm.fully_connected_options(act), version=4)
    if shared:
        z = mb.tensor("z", (1, n), np.int8, _out_q(k, float(w_scales.mean())))
        mb.op(OP.FULLY_CONNECTED, [y, w, -1], [z], *mm.fully_connected_options(ACT.RELU), version=4)
        return mb.serialize([x], [z])
    return mb.serialize([x], [y])


def conv_model(seed: int, hw, cin: int, cout: int, k, stride=1, padding=PAD.SAME, act=ACT.NONE, per_channel=True,
               bias=True, depthwise=False, mult=1, in_dtype=np.int8, int4=True) -> bytes:
    """x int8[1,h,w,cin] -> CONV_2D (INT4 filter [cout,kh,kw,cin]) or DEPTHWISE_CONV_2D (INT4 filter [1,kh,kw,cin*mult]);
    ``int4=False``: the same values in an int8 filter."""
    rng = np.random.default_rng(seed)
    mb = mm.ModelBuilder()
    x = mb.tensor("x", (1, *hw, cin), in_dtype, mm.qparams(IN_SCALE, 0))
    cout = cin * mult if depthwise else cout
    shape = (1, *k, cout) if depthwise else (cout, *k, cin)
    axis = 3 if depthwise and per_channel else 0  # per tensor: axis 0, as the converter writes it
    w_scales = rng.uniform(0.05, 0.2, size=cout if per_channel else 1)
    values, q = nibbles(rng, shape), mm.qparams(w_scales, 0, axis)
    w = int4_const(mb, "filter_int4", values, q) if int4 else mb.const("filter", values.astype(np.int8), q)
    b = _bias(mb, rng, cout, w_scales) if bias else -1
    oh, ow = ((d + stride - 1) // stride if padding == PAD.SAME else (d - kk) // stride + 1 for d, kk in zip(hw, k))
    taps = k[0] * k[1] * (1 if depthwise else cin)
    out_q = _out_q(taps, float(w_scales.mean()))
    if in_dtype != np.int8:
        out_q["zero_point"] = [0]  # int16 activations are symmetric
    y = mb.tensor("y", (1, oh, ow, cout), in_dtype, out_q)
    if depthwise:
        mb.op(OP.DEPTHWISE_CONV_2D, [x, w, b], [y], *mm.depthwise_options(stride, padding, act, mult), version=3)
    else:
        mb.op(OP.CONV_2D, [x, w, b], [y], *mm.conv2d_options(stride, padding, act), version=3)
    return mb.serialize([x], [y])


def int4_elsewhere(where: str) -> bytes:
    """An INT4 tensor where TFLM has no kernel for it: 'add' (ADD's second input), 'bias' (FULLY_CONNECTED's bias),
    'input' (a model input read as a CONV_2D's filter)."""
    rng = np.random.default_rng(0)
    mb = mm.ModelBuilder()
    q = mm.qparams(IN_SCALE, 0)
    x = mb.tensor("x", (1, 6), np.int8, q)
    y = mb.tensor("y", (1, 6), np.int8, q)
    if where == "add":
        c = int4_const(mb, "c_int4", nibbles(rng, (1, 6)), mm.qparams(0.1, 0))
        mb.op(OP.ADD, [x, c], [y], *mm.add_options())
    elif where == "bias":
        w = mb.const("w", rng.integers(-7, 8, size=(6, 6)).astype(np.int8), mm.qparams(0.1, 0))
        b = int4_const(mb, "b_int4", nibbles(rng, (6,)), mm.qparams(0.005, 0))
        mb.op(OP.FULLY_CONNECTED, [x, w, b], [y], *mm.fully_connected_options(), version=4)
    else:
        f = mb.tensor("f_int4", (6, 6), np.int8, mm.qparams(0.1, 0))
        mb.tensors[f].ttype = INT4
        mb.op(OP.FULLY_CONNECTED, [x, f, -1], [y], *mm.fully_connected_options(), version=4)
        return mb.serialize([x, f], [y])
    return mb.serialize([x], [y])
