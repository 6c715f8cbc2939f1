"""int16 activations and unary operators ("16x8" models), with TFLite Micro's int16 arithmetic.

An int16 input has 65536 values, too many for the int8 operators' build-time tables (kernels/unary.py), so each
operator here is a small kernel that computes TFLM's per-element arithmetic on the device:

- LOGISTIC / TANH (reference_integer_ops::Logistic / Tanh on int16): the input times Prepare's multiplier
  (3 << shift for a power-of-two input scale, else the scale's 3 * 4096 multiple doubled up to <= 32767), rounded
  and shifted right, then TFLM's 256-entry table of sigmoid(k / 24) in 0.16 fixed point with linear interpolation
  (tanh(x) = 2 sigmoid(2x) - 1). The table and its interpolation are kernels/lstm.py's (SIGMOID_TABLE, read off
  tflite_micro), kept in flash as int16 (value - 32768, 512 bytes).
- SOFTMAX (reference_ops::SoftmaxInt16): two 513-entry int16 tables TFLM fills in Prepare with float32 arithmetic
  (LUTPopulate<int16_t>: exp on [-10, 0], 1 / (1 + x) on [0, 1]), reproduced here in numpy float32 with the C
  library's expf; per row the max, exp(x - max) by interpolated lookup, the sum, its reciprocal by lookup, and
  each output rescaled by it.
- RELU, RELU6, LEAKY_RELU, ABS, PRELU: TFLM's MultiplyByQuantizedMultiplier (32-bit, double rounding) and clamps.
"""

from __future__ import annotations

import ctypes
import functools

import numpy as np
from tvm import te, tirx

from .fixed_point import multiply_by_quantized_multiplier
from .lstm import SIGMOID_TABLE, _sigmoid16, _tanh16
from .unary import _LIBM, _expf, _round_half_away_f32

I16_MIN, I16_MAX = -(2**15), 2**15 - 1
_F = np.float32

_LIBM.logf.restype = ctypes.c_float
_LIBM.logf.argtypes = [ctypes.c_float]


def _clamp16(v, lo: int = I16_MIN, hi: int = I16_MAX):
    return tirx.Cast("int16", tirx.Min(tirx.Max(v, tirx.const(lo, "int32")), tirx.const(hi, "int32")))


def _i32(v):
    return tirx.Cast("int32", v)


def _mbqm(x, multiplier: int, shift: int):
    """TFLite's MultiplyByQuantizedMultiplier (32-bit, double rounding) of an int32 ``x``. Its x * (1 << shift)
    overflows int32 for an int16 difference when shift >= 16 (scale ratios >= 2^15, SOFTMAX input scales * beta
    >= 5): TFLM's product wraps, so this one does too, computed in int64 and cast to int32 (modulo 2^32 in GCC,
    and no signed overflow for the sanitizers)."""
    if shift > 0:
        x = tirx.Cast("int32", tirx.Cast("int64", x) * tirx.const(1 << shift, "int64"))
        shift = 0
    return multiply_by_quantized_multiplier(x, multiplier, shift)


# ------------------------------------------------------------------ LOGISTIC / TANH

def checked_log2(x: float) -> tuple[bool, int]:
    """TFLite's CheckedLog2 in float32: (|log2(x) - round| < 1e-3, round(log2 x)), with logf as TFLM's std::log."""
    x_log2 = _F(_F(_LIBM.logf(float(_F(x)))) * _F(_F(1.0) / _F(_LIBM.logf(2.0))))
    rounded = _round_half_away_f32(x_log2)
    return bool(abs(_F(x_log2 - rounded)) < _F(1e-3)), int(rounded)


def sigmoid_tanh_params(in_scale: float, tanh: bool) -> tuple[int, int]:
    """(input multiplier, input left shift) as TFLM's int16 LOGISTIC / TANH Prepare computes them: 0 and the shift
    for a power-of-two scale (2^-12 for LOGISTIC, 2^-12 or 2^-11 for TANH), else an int <= 32767 and the count of
    doublings of the double s_in * 4096 * 3 that keep it at most 32767 / 2 (at most 31)."""
    pot, log2_rounded = checked_log2(in_scale)
    left_shift = 12 + log2_rounded
    pot = pot and (left_shift in ((0, 1) if tanh else (0,)))
    if pot:
        return 0, left_shift
    multiplier = float(_F(in_scale)) * 4096.0 * 3.0
    left_shift = 0
    while multiplier <= 32767.0 / 2.0 and left_shift <= 30:
        left_shift += 1
        multiplier *= 2.0
    return int(multiplier), left_shift


def sigmoid_table_i16() -> np.ndarray:
    """TFLM's sigmoid table (uint16) stored as int16 (value - 32768): half the flash of an int32 table."""
    return (np.asarray(SIGMOID_TABLE, np.int32) - 32768).astype(np.int16)


def shared_table(conv, key: str, make):
    """One Relax constant per model for a table every operator of a kind reads (``make()`` gives its numpy value):
    the graph reader writes a Constant node used by several kernels once, so N LOGISTIC/TANH/SOFTMAX operators
    keep one copy of their tables in flash."""
    from tvm import relax

    cache = conv.__dict__.setdefault("_edgemem_shared_tables", {})
    if key not in cache:
        cache[key] = relax.const(make())
    return cache[key]


class _Widened:
    """``lut[k]`` of the int16-stored sigmoid table as TFLM's uint16 value, in int32 (for lstm._lut_blend)."""

    def __init__(self, buf):
        self.buf = buf

    def __getitem__(self, k):
        return _i32(self.buf[k]) + tirx.const(32768, "int32")


def sigmoid_tanh_int16(shape, multiplier: int, left_shift: int, tanh: bool):
    """TFLM's int16 LOGISTIC (``tanh`` False) or TANH: x int16 of ``shape``, the table [256] int16
    (sigmoid_table_i16), out int16."""
    if multiplier == 0:  # power-of-two scale
        multiplier, left_shift = 3 << left_shift, 0
    rnd = (1 << (left_shift - 1)) if left_shift > 0 else 0
    x = te.placeholder(shape, "int16", name="x")
    lut = te.placeholder((256,), "int16", name="table")
    table = _Widened(lut)

    def out_fn(*i):
        v = (_i32(x[i]) * multiplier + rnd) >> left_shift
        return tirx.Cast("int16", _tanh16(table, v) if tanh else _sigmoid16(table, v))

    return te.create_prim_func([x, lut, te.compute(shape, out_fn, name="out")])


# ------------------------------------------------------------------ SOFTMAX

def lut_populate_int16(input_scale, input_zp: int, output_scale, output_zp: int, fn) -> np.ndarray:
    """TFLite's LUTPopulateInt16<float>: 512 samples of ``fn`` (float32 -> float32) over the int16 input range,
    each corrected by half the interpolation error at its interval's midpoint, plus the last value; float32
    arithmetic throughout, in the C's order."""
    s_in, s_out = _F(input_scale), _F(output_scale)
    input_min = _F(s_in * _F(I16_MIN - input_zp))
    input_max = _F(s_in * _F(I16_MAX - input_zp))
    output_min = _F(s_out * _F(I16_MIN - output_zp))
    output_max = _F(s_out * _F(I16_MAX - output_zp))
    nb_steps = 512
    step = _F(_F(input_max - input_min) / _F(nb_steps))
    half_step = _F(step / _F(2))
    inv = _F(_F(65536.0) / _F(output_max - output_min))
    rnd = _round_half_away_f32
    lut = np.empty(nb_steps + 1, np.int16)
    for i in range(nb_steps):
        at = _F(input_min + _F(_F(i) * step))
        val = _F(fn(at))
        val_mid = _F(fn(_F(at + half_step)))
        val_next = _F(fn(_F(input_min + _F(_F(i + 1) * step))))
        sample = rnd(_F(val * inv))
        mid_interp = rnd(_F(_F(_F(val_next * inv) + rnd(_F(val * inv))) / _F(2)))
        mid_val = rnd(_F(val_mid * inv))
        bias = rnd(_F(_F(mid_interp - mid_val) / _F(2)))
        lut[i] = int(min(max(float(_F(sample - bias)), -32768.0), 32767.0))
    lut[nb_steps] = int(min(max(float(rnd(_F(_F(fn(input_max)) * inv))), -32768.0), 32767.0))
    return lut


@functools.lru_cache(maxsize=1)
def softmax_int16_luts() -> tuple[np.ndarray, np.ndarray]:
    """TFLM's SOFTMAX Prepare tables for int16: exp on [-10, 0] and 1 / (1 + x) on [0, 1], both Q0.15 out."""
    rng = 65535
    exp_lut = lut_populate_int16(_F(_F(10.0) / _F(rng)), I16_MAX, _F(_F(2.0) / _F(rng)), 0, _expf)
    recip_lut = lut_populate_int16(_F(_F(1.0) / _F(rng)), I16_MIN, _F(_F(2.0) / _F(rng)), 0,
                                   lambda v: _F(_F(1.0) / _F(_F(1.0) + v)))
    return exp_lut, recip_lut


def _lut_lookup(lut, v):
    """TFLite's LUTLookup (513-entry int16 table, 7 bits of interpolation) of an int32 ``v`` in the int16 range."""
    index = (v >> 7) + tirx.const(256, "int32")
    base = _i32(lut[index])
    slope = _i32(tirx.Cast("int16", _i32(lut[index + 1]) - base))
    return _i32(tirx.Cast("int16", base + ((slope * (v & tirx.const(0x7F, "int32")) + tirx.const(64, "int32")) >> 7)))


def softmax_int16(rows: int, depth: int, multiplier: int, shift: int):
    """TFLM's int16 SOFTMAX (reference_ops::SoftmaxInt16) over rows of ``depth``. Parameters: x [rows, depth]
    int16, the exp and reciprocal tables [513] int16 (softmax_int16_luts), out [rows, depth] int16 (holding the
    row's exps between the two passes, as TFLM does)."""
    from tvm.script import tirx as T

    @T.prim_func
    def softmax(x: T.Buffer((rows, depth), "int16"), exp_lut: T.Buffer((513,), "int16"), recip_lut: T.Buffer((513,), "int16"),
                out: T.Buffer((rows, depth), "int16")):
        # s: 0 row max, 1 sum of exps, 2 headroom_plus_one (leading zeros of the sum), 3 reciprocal (Q0.15)
        s = T.decl_buffer((4,), "int32")
        for r in range(rows):
            s[0] = -32768
            for c in range(depth):
                s[0] = T.max(s[0], T.Cast("int32", x[r, c]))
            s[1] = 0
            for c in range(depth):
                out[r, c] = T.Cast("int16", _exp_lookup(exp_lut, T.Cast("int32", x[r, c]) - s[0], multiplier, shift))
                s[1] = s[1] + T.Cast("int32", out[r, c])
            s[2] = 1
            for k in range(31):
                if T.Cast("int64", s[1]) < (T.int64(1) << T.Cast("int64", k)):
                    s[2] = s[2] + 1
            s[3] = _lut_lookup(recip_lut, T.min(T.max(
                T.Cast("int32", ((T.Cast("int64", s[1]) << T.Cast("int64", s[2] - 1)) + T.int64(1 << 13)) >> T.int64(14))
                - ((1 << 15) + (1 << 16)), -32768), 32767))
            for c in range(depth):
                out[r, c] = T.Cast("int16", T.min(T.max(T.Cast("int32", (
                    T.Cast("int64", out[r, c]) * T.Cast("int64", s[3]) + (T.int64(1) << T.Cast("int64", 30 - s[2])))
                    >> T.Cast("int64", 31 - s[2])), 0), 32767))

    return softmax


def _exp_lookup(exp_lut, diff, multiplier: int, shift: int):
    """SoftMaxCalculateExp: the row difference (<= 0) rescaled so that [-65535, 0] spans [-10, 0], moved to
    [-32768, 32767], looked up in the exp table."""
    d = _mbqm(diff, multiplier, shift) + 32767
    return _lut_lookup(exp_lut, tirx.Min(tirx.Max(d, tirx.const(-32768, "int32")), tirx.const(32767, "int32")))


# ------------------------------------------------------------------ RELU, RELU6, LEAKY_RELU, ABS

def relu_int16(shape, multiplier: int, shift: int, act_min: int):
    """TFLM's int16 RELU (ReluQuantized, zero points 0): MultiplyByQuantizedMultiplier(x), clamped to [act_min,
    32767]."""
    x = te.placeholder(shape, "int16", name="x")
    out = te.compute(shape, lambda *i: _clamp16(_mbqm(_i32(x[i]), multiplier, shift), act_min), name="out")
    return te.create_prim_func([x, out])


def clamp_int16(shape, lo: int, hi: int):
    """TFLM's Relu6Quantized on int16: a clamp to [lo, hi] (the input's quantized 0 and 6)."""
    x = te.placeholder(shape, "int16", name="x")
    out = te.compute(shape, lambda *i: tirx.Cast("int16", tirx.Min(tirx.Max(_i32(x[i]), tirx.const(lo, "int32")), tirx.const(hi, "int32"))), name="out")
    return te.create_prim_func([x, out])


def leaky_relu_int16(shape, in_zp: int, out_zp: int, m_id: int, s_id: int, m_alpha: int, s_alpha: int):
    """TFLM's QuantizeLeakyRelu<int16_t>: x - zp_in >= 0 rescaled by the identity multiplier, else by |alpha's|
    and negated for a negative alpha; + zp_out, clamped to int16."""
    x = te.placeholder(shape, "int16", name="x")

    def out_fn(*i):
        v = _i32(x[i]) - in_zp
        neg = _mbqm(v, abs(m_alpha), s_alpha)
        if m_alpha < 0:
            neg = tirx.const(0, "int32") - neg
        return _clamp16(tirx.Select(v >= 0, _mbqm(v, m_id, s_id), neg) + out_zp)

    return te.create_prim_func([x, te.compute(shape, out_fn, name="out")])


def abs_int16(shape, rescale: tuple[int, int] | None, quantized: bool = True):
    """TFLM's int16 ABS. Quantized (zero points 0): |x| (32768 for -32768), rescaled by MultiplyByQuantizedMultiplier
    when the scales differ, clamped to int16. Not quantized: std::abs cast back to int16 (-32768 stays)."""
    x = te.placeholder(shape, "int16", name="x")

    def out_fn(*i):
        v = _i32(x[i])
        a = tirx.Max(v, tirx.const(0, "int32") - v)
        if not quantized:
            return tirx.Cast("int16", a)
        if rescale is not None:
            a = _mbqm(a, rescale[0], rescale[1])
        return _clamp16(a)

    return te.create_prim_func([x, te.compute(shape, out_fn, name="out")])
