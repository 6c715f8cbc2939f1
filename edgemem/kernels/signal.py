"""TFLite Micro's Signal library operators (the micro_speech audio front-end as a graph), with TFLM's integer
arithmetic (signal/src/*.cc) so that every output is bit-exact with it.

Each builder returns a TIR PrimFunc written with loops (TVMScript); the arrays are flat (the lowerings in
frontend/ops/signal.py view the TFLite tensors so). Where TFLM's C relies on unsigned wrap-around (uint32 and
uint64 products and shifts) the kernels compute in the same unsigned types; where it relies on the int16 store
of an int sum (the fixed-point FFT) they compute in the wider type and cast back, which gcc defines as wrapping.
Signed products that may reach 2^31 in TFLM (the energy of a full-scale bin) are computed unsigned here: the
same bits, without C's undefined behaviour.

RFFT is KISS FFT's real FFT (kiss_fftr with FIXED_POINT 16 or 32, or float; the version TFLM builds): a complex
FFT of half the length on the even/odd samples as real/imaginary parts, radix-4 decimation in time (a radix-2
stage innermost when the length is 2 * 4^k), each butterfly input divided by the radix first (C_FIXDIV), then
the split into the real spectrum. The recursion of kf_work is run here as its stages, innermost first, after
the digit-reversal permutation it amounts to (computed at build time); the complex FFT runs in the output
buffer itself, so the kernel needs no scratch array.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
from tvm import tirx

# signal/src/log.cc: log2(1 + k/128) - k/128 in 1/65536 (the table's integer values; 130 entries)
LOG_LUT = (
    0, 224, 442, 654, 861, 1063, 1259, 1450, 1636, 1817, 1992, 2163, 2329, 2490, 2646, 2797, 2944, 3087, 3224,
    3358, 3487, 3611, 3732, 3848, 3960, 4068, 4172, 4272, 4368, 4460, 4549, 4633, 4714, 4791, 4864, 4934, 5001,
    5063, 5123, 5178, 5231, 5280, 5326, 5368, 5408, 5444, 5477, 5507, 5533, 5557, 5578, 5595, 5610, 5622, 5631,
    5637, 5640, 5641, 5638, 5633, 5626, 5615, 5602, 5586, 5568, 5547, 5524, 5498, 5470, 5439, 5406, 5370, 5332,
    5291, 5249, 5203, 5156, 5106, 5054, 5000, 4944, 4885, 4825, 4762, 4697, 4630, 4561, 4490, 4416, 4341, 4264,
    4184, 4103, 4020, 3935, 3848, 3759, 3668, 3575, 3481, 3384, 3286, 3186, 3084, 2981, 2875, 2768, 2659, 2549,
    2437, 2323, 2207, 2090, 1971, 1851, 1729, 1605, 1480, 1353, 1224, 1094, 963, 830, 695, 559, 421, 282, 142, 0, 0,
)  # fmt: skip

PCAN_LUT_MIN = 4 * 32 - 6 + 3  # WideDynamicFunction reads lut[4 * msb - 6 + 2] for msb up to 32


def _bit_length(v, bits: int):
    """The number of significant bits of unsigned ``v`` (0 for 0), as int32, without a count-leading-zeros
    intrinsic: the count of shifts that leave something."""
    dtype = "uint32" if bits == 32 else "uint64"
    v = tirx.Cast(dtype, v)
    one = tirx.const(1, "int32")
    zero = tirx.const(0, "int32")
    total = zero
    for k in range(bits):
        total = total + tirx.Select((v >> tirx.const(k, dtype)) != tirx.const(0, dtype), one, zero)
    return total


def _msb32(v):
    """TFLM's MostSignificantBit32 as gcc builds it: 32 - clz(x), and 32 for 0 (its branch for gcc)."""
    v = tirx.Cast("uint32", v)
    return tirx.Select(v == tirx.const(0, "uint32"), tirx.const(32, "int32"), _bit_length(v, 32))


# -- Window, FftAutoScale, Energy --------------------------------------------------------------------------------


def window(n: int, width: int, shift: int):
    """x [n] int16 times the window [width] (repeated every ``width`` samples), >> shift, saturated to int16."""
    from tvm.script import tirx as T

    @T.prim_func
    def signal_window(x: T.Buffer((n,), "int16"), w: T.Buffer((width,), "int16"), out: T.Buffer((n,), "int16")):
        for i in range(n):
            out[i] = T.Cast("int16", T.max(T.min((T.Cast("int32", x[i]) * T.Cast("int32", w[i % width])) >> shift, 32767), -32768))

    return signal_window


def fft_auto_scale_bits(n: int):
    """The left shift FftAutoScale applies: 15 - msb(MaxAbs16(x)), at least 0 (out [1] int32). MaxAbs16 keeps an
    int16 running maximum, so a -32768 stores -32768 (TFLM's own wrap), reproduced here."""
    from tvm.script import tirx as T

    @T.prim_func
    def signal_fft_auto_scale_bits(x: T.Buffer((n,), "int16"), out: T.Buffer((1,), "int32")):
        top = T.decl_buffer((1,), "int32")
        top[0] = 0
        for i in range(n):
            if T.Cast("int32", x[i]) > top[0]:
                top[0] = T.Cast("int32", x[i])
            elif -T.Cast("int32", x[i]) > top[0]:
                top[0] = T.Cast("int32", T.Cast("int16", -T.Cast("int32", x[i])))
        out[0] = T.max(15 - _msb32(T.Cast("uint32", top[0])), 0)

    return signal_fft_auto_scale_bits


def fft_auto_scale_apply(n: int):
    """x [n] int16 times 2^bits (bits [1] int32), stored as int16."""
    from tvm.script import tirx as T

    @T.prim_func
    def signal_fft_auto_scale(x: T.Buffer((n,), "int16"), bits: T.Buffer((1,), "int32"), out: T.Buffer((n,), "int16")):
        for i in range(n):
            out[i] = T.Cast("int16", T.Cast("int32", x[i]) * (1 << T.min(bits[0], 15)))

    return signal_fft_auto_scale


def energy(bins: int, start: int, end: int):
    """re^2 + im^2 of the complex bins [start, end) of x [2 * bins] int16 (out [bins] uint32); TFLM leaves the
    other bins unwritten, they are 0 here."""
    from tvm.script import tirx as T

    @T.prim_func
    def signal_energy(x: T.Buffer((2 * bins,), "int16"), out: T.Buffer((bins,), "uint32")):
        for i in range(bins):
            if i >= start and i < end:
                out[i] = T.Cast("uint32", T.Cast("int32", x[2 * i]) * T.Cast("int32", x[2 * i])) + T.Cast(
                    "uint32", T.Cast("int32", x[2 * i + 1]) * T.Cast("int32", x[2 * i + 1]))
            else:
                out[i] = T.uint32(0)

    return signal_energy


# -- RFFT (KISS FFT, fixed point 16) -----------------------------------------------------------------------------


def _kiss_factors(n: int) -> list[tuple[int, int]]:
    """kf_factor: (radix, remaining length) pairs, powers of 4 first, then 2, then odd primes."""
    out, p, root = [], 4, math.floor(math.sqrt(n))
    while True:
        while n % p:
            p = {4: 2, 2: 3}.get(p, p + 2)
            if p > root:
                p = n
        n //= p
        out.append((p, n))
        if n <= 1:
            return out


def rfft_supported(fft_length: int) -> bool:
    """The lengths the kernel computes: 2 * n with n >= 2 factoring into radix-4 stages and at most one radix-2
    stage, which kf_factor places innermost (n a power of two)."""
    n = fft_length // 2
    return fft_length % 2 == 0 and n >= 2 and (n & (n - 1)) == 0


def _kiss_permutation(n: int) -> list[int]:
    """Where kf_work's leaf copies put each input: out[i] = f[perm[i]]."""
    facs = _kiss_factors(n)
    perm = [0] * n

    def work(out: int, src: int, stride: int, level: int) -> None:
        p, m = facs[level]
        for j in range(p):
            if m == 1:
                perm[out + j] = src + j * stride
            else:
                work(out + j * m, src + j * stride, stride * p, level + 1)

    work(0, 0, 1, 0)
    return perm


@dataclass(frozen=True)
class _Fixed:
    """KISS FFT's FIXED_POINT 16 or 32: the scalar type, the product type, Q15 or Q31, SAMP_MAX."""

    scalar: str
    wide: str
    frac_bits: int
    samp_max: int


FIXED = {"int16": _Fixed("int16", "int32", 15, 32767), "int32": _Fixed("int32", "int64", 31, 2147483647)}


def _cexp(phase: float, samp_max: int) -> tuple[int, int]:
    """kf_cexp in fixed point: floor(0.5 + SAMP_MAX * cos/sin(phase)), computed in double as KISS FFT does."""
    return int(math.floor(0.5 + samp_max * math.cos(phase))), int(math.floor(0.5 + samp_max * math.sin(phase)))


def rfft_tables(fft_length: int, dtype: str = "int16") -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(permutation [n] int16, twiddles [2n], super twiddles [n] (n/2 complex), both ``dtype``), n = fft_length
    / 2, as kiss_fft_alloc and kiss_fftr_alloc compute them (forward transform; float32: cos and sin in double,
    rounded to float)."""
    n = fft_length // 2
    if dtype == "float32":
        cexp = lambda phase: (math.cos(phase), math.sin(phase))  # noqa: E731
    else:
        cexp = lambda phase: _cexp(phase, FIXED[dtype].samp_max)  # noqa: E731
    tw = [v for i in range(n) for v in cexp(-2 * math.pi * i / n)]
    sup = [v for i in range(n // 2) for v in cexp(-math.pi * ((i + 1) / n + 0.5))]
    return np.array(_kiss_permutation(n), np.int16), np.array(tw, dtype), np.array(sup, dtype)


class _FixedOps:
    """KISS FFT's fixed-point macros as TIR expressions. C adds two int16 in int and stores the sum as int16 (a
    wrap); two int32 wrap in the addition itself: either way the sum is taken in the product type here and
    wrapped to the scalar type, which is the same value."""

    def __init__(self, fx: _Fixed):
        self.fx = fx

    def wide(self, v):
        return tirx.Cast(self.fx.wide, v)

    def wrap(self, v):
        return tirx.Cast(self.fx.scalar, v)

    def add(self, a, b):
        return self.wrap(self.wide(a) + self.wide(b))

    def sub(self, a, b):
        return self.wrap(self.wide(a) - self.wide(b))

    def neg(self, a):
        return self.wrap(-self.wide(a))

    def sround(self, x):
        """(x + 2^(FRACBITS-1)) >> FRACBITS on a product, stored as the scalar type."""
        one = tirx.const(1 << (self.fx.frac_bits - 1), self.fx.wide)
        return self.wrap((x + one) >> tirx.const(self.fx.frac_bits, self.fx.wide))

    def fixdiv(self, v, radix: int):
        """C_FIXDIV: v * (SAMP_MAX / radix), rounded back."""
        return self.sround(self.wide(v) * tirx.const(self.fx.samp_max // radix, self.fx.wide))

    def mul_re(self, ar, ai, br, bi):
        return self.sround(self.wide(ar) * self.wide(br) - self.wide(ai) * self.wide(bi))

    def mul_im(self, ar, ai, br, bi):
        return self.sround(self.wide(ar) * self.wide(bi) + self.wide(ai) * self.wide(br))

    def half_sum(self, a, b, sign: int = 1):
        """HALF_OF(a + b) (or a - b): int16 operands sum in int and the halved sum is stored (wrapped) as int16;
        int32 operands wrap in the sum, which is then halved."""
        total = self.wide(a) + self.wide(b) if sign > 0 else self.wide(a) - self.wide(b)
        if self.fx.scalar == "int16":
            return self.wrap(total >> tirx.const(1, self.fx.wide))
        return self.wrap(total) >> tirx.const(1, self.fx.scalar)


class _FloatOps:
    """The same macros without FIXED_POINT: float arithmetic, C_FIXDIV does nothing, HALF_OF is * 0.5f."""

    def add(self, a, b):
        return a + b

    def sub(self, a, b):
        return a - b

    def neg(self, a):
        return -a

    def fixdiv(self, v, radix: int):
        return v

    def mul_re(self, ar, ai, br, bi):
        return ar * br - ai * bi

    def mul_im(self, ar, ai, br, bi):
        return ar * bi + ai * br

    def half_sum(self, a, b, sign: int = 1):
        return ((a + b) if sign > 0 else (a - b)) * tirx.const(0.5, "float32")


RFFT_TYPES = ("int16", "int32", "float32")


def rfft(batches: int, in_len: int, fft_length: int, dtype: str = "int16"):
    """x [batches * in_len] (zero-padded to fft_length), permutation/twiddle tables from rfft_tables, out
    [batches * (fft_length + 2)]: the fft_length / 2 + 1 complex bins (re, im) of each batch; ``dtype`` int16
    or int32 (KISS FFT's FIXED_POINT 16 or 32) or float32."""
    from tvm.script import tirx as T

    f = _FloatOps() if dtype == "float32" else _FixedOps(FIXED[dtype])
    n = fft_length // 2
    facs = _kiss_factors(n)
    has2 = facs[-1][0] == 2
    fours = len(facs) - int(has2)
    m0_bits = 1 if has2 else 0  # log2 of the innermost radix-4 stage's m
    n_bits = n.bit_length() - 1
    olen = fft_length + 2
    zero = tirx.const(0, dtype)

    @T.prim_func
    def signal_rfft(
        x: T.Buffer((batches * in_len,), dtype), perm: T.Buffer((n,), "int16"), tw: T.Buffer((2 * n,), dtype),
        sup: T.Buffer((n,), dtype), out: T.Buffer((batches * olen,), dtype),
    ):
        a = T.decl_buffer((8,), dtype)  # a butterfly's four inputs after C_FIXDIV (re, im)
        s = T.decl_buffer((12,), dtype)  # its scratch[0..5] (re, im)
        ix = T.decl_buffer((3,), "int32")  # a radix-4 stage's m, first index and twiddle step
        for b in range(batches):
            # kf_work's leaf copies: the complex input f[k] = (x[2k], x[2k + 1]), zero past the frame
            for i in range(n):
                out[b * olen + 2 * i] = T.if_then_else(2 * T.Cast("int32", perm[i]) < in_len, x[b * in_len + T.min(2 * T.Cast("int32", perm[i]), in_len - 1)], zero)
                out[b * olen + 2 * i + 1] = T.if_then_else(2 * T.Cast("int32", perm[i]) + 1 < in_len, x[b * in_len + T.min(2 * T.Cast("int32", perm[i]) + 1, in_len - 1)], zero)
            if has2:  # the innermost radix-2 stage (m = 1, fstride = n / 2): twiddle 1
                for k in range(n // 2):
                    a[0] = f.fixdiv(out[b * olen + 4 * k], 2)
                    a[1] = f.fixdiv(out[b * olen + 4 * k + 1], 2)
                    a[2] = f.fixdiv(out[b * olen + 4 * k + 2], 2)
                    a[3] = f.fixdiv(out[b * olen + 4 * k + 3], 2)
                    s[0] = f.mul_re(a[2], a[3], tw[0], tw[1])
                    s[1] = f.mul_im(a[2], a[3], tw[0], tw[1])
                    out[b * olen + 4 * k + 2] = f.sub(a[0], s[0])
                    out[b * olen + 4 * k + 3] = f.sub(a[1], s[1])
                    out[b * olen + 4 * k] = f.add(a[0], s[0])
                    out[b * olen + 4 * k + 1] = f.add(a[1], s[1])
            for j in range(fours):  # radix-4 stages, innermost first: m = 2^m0_bits * 4^j, fstride = n / (4 m)
                for q in range(n // 4):
                    ix[0] = 1 << (2 * j + m0_bits)  # m, a power of two: shifts and masks, no division
                    ix[1] = ((q >> (2 * j + m0_bits)) << (2 * j + m0_bits + 2)) + (q & (ix[0] - 1))
                    ix[2] = (q & (ix[0] - 1)) << (n_bits - 2 - 2 * j - m0_bits)
                    for r in range(4):
                        a[2 * r] = f.fixdiv(out[b * olen + 2 * (ix[1] + r * ix[0])], 4)
                        a[2 * r + 1] = f.fixdiv(out[b * olen + 2 * (ix[1] + r * ix[0]) + 1], 4)
                    s[0] = f.mul_re(a[2], a[3], tw[2 * ix[2]], tw[2 * ix[2] + 1])  # scratch[0..2]: the twiddled inputs
                    s[1] = f.mul_im(a[2], a[3], tw[2 * ix[2]], tw[2 * ix[2] + 1])
                    s[2] = f.mul_re(a[4], a[5], tw[4 * ix[2]], tw[4 * ix[2] + 1])
                    s[3] = f.mul_im(a[4], a[5], tw[4 * ix[2]], tw[4 * ix[2] + 1])
                    s[4] = f.mul_re(a[6], a[7], tw[6 * ix[2]], tw[6 * ix[2] + 1])
                    s[5] = f.mul_im(a[6], a[7], tw[6 * ix[2]], tw[6 * ix[2] + 1])
                    s[10] = f.sub(a[0], s[2])  # scratch[5]
                    s[11] = f.sub(a[1], s[3])
                    a[0] = f.add(a[0], s[2])  # *Fout += scratch[1]
                    a[1] = f.add(a[1], s[3])
                    s[6] = f.add(s[0], s[4])  # scratch[3]
                    s[7] = f.add(s[1], s[5])
                    s[8] = f.sub(s[0], s[4])  # scratch[4]
                    s[9] = f.sub(s[1], s[5])
                    out[b * olen + 2 * (ix[1] + 2 * ix[0])] = f.sub(a[0], s[6])
                    out[b * olen + 2 * (ix[1] + 2 * ix[0]) + 1] = f.sub(a[1], s[7])
                    out[b * olen + 2 * ix[1]] = f.add(a[0], s[6])
                    out[b * olen + 2 * ix[1] + 1] = f.add(a[1], s[7])
                    out[b * olen + 2 * (ix[1] + ix[0])] = f.add(s[10], s[9])
                    out[b * olen + 2 * (ix[1] + ix[0]) + 1] = f.sub(s[11], s[8])
                    out[b * olen + 2 * (ix[1] + 3 * ix[0])] = f.sub(s[10], s[9])
                    out[b * olen + 2 * (ix[1] + 3 * ix[0]) + 1] = f.add(s[11], s[8])
            # kiss_fftr's split of the half-length complex FFT into the real spectrum, in place: bin k and bin
            # n - k are read (a[0..3]) before either is written
            a[0] = f.fixdiv(out[b * olen], 2)
            a[1] = f.fixdiv(out[b * olen + 1], 2)
            out[b * olen] = f.add(a[0], a[1])
            out[b * olen + 1] = zero
            out[b * olen + 2 * n] = f.sub(a[0], a[1])
            out[b * olen + 2 * n + 1] = zero
            for k in range(1, n // 2 + 1):
                a[0] = f.fixdiv(out[b * olen + 2 * k], 2)  # fpk
                a[1] = f.fixdiv(out[b * olen + 2 * k + 1], 2)
                a[2] = f.fixdiv(out[b * olen + 2 * (n - k)], 2)  # fpnk = conj(tmp[n - k])
                a[3] = f.fixdiv(f.neg(out[b * olen + 2 * (n - k) + 1]), 2)
                s[0] = f.add(a[0], a[2])  # f1k
                s[1] = f.add(a[1], a[3])
                s[2] = f.sub(a[0], a[2])  # f2k
                s[3] = f.sub(a[1], a[3])
                s[4] = f.mul_re(s[2], s[3], sup[2 * (k - 1)], sup[2 * (k - 1) + 1])  # tw
                s[5] = f.mul_im(s[2], s[3], sup[2 * (k - 1)], sup[2 * (k - 1) + 1])
                out[b * olen + 2 * k] = f.half_sum(s[0], s[4])
                out[b * olen + 2 * k + 1] = f.half_sum(s[1], s[5])
                out[b * olen + 2 * (n - k)] = f.half_sum(s[0], s[4], -1)
                out[b * olen + 2 * (n - k) + 1] = f.half_sum(s[5], s[1], -1)

    return signal_rfft


# -- filter bank and what follows it ----------------------------------------------------------------------------


def filter_bank(n_in: int, channels: int, n_weights: int):
    """FilterbankAccumulateChannels: x [n_in] uint32, weights and unweights [n_weights] int16, per channel
    (channels + 1 of them) its first frequency, first weight and width [channels + 1] int16 (checked in range
    at build time); out [channels] uint64, the accumulators of channels 1..channels (channel 0 only carries its
    unweighted sum into channel 1). The int16 weights multiply as uint64, wrapping, as in TFLM."""
    from tvm.script import tirx as T

    @T.prim_func
    def signal_filter_bank(
        x: T.Buffer((n_in,), "uint32"), w: T.Buffer((n_weights,), "int16"), uw: T.Buffer((n_weights,), "int16"),
        fstart: T.Buffer((channels + 1,), "int16"), wstart: T.Buffer((channels + 1,), "int16"),
        width: T.Buffer((channels + 1,), "int16"), out: T.Buffer((channels,), "uint64"),
    ):
        acc = T.decl_buffer((1,), "uint64")
        uacc = T.decl_buffer((1,), "uint64")
        acc[0] = T.uint64(0)
        uacc[0] = T.uint64(0)
        for c in range(channels + 1):
            for j in range(T.Cast("int32", width[c])):
                acc[0] = acc[0] + T.Cast("uint64", T.Cast("int64", w[T.Cast("int32", wstart[c]) + j])) * T.Cast("uint64", x[T.Cast("int32", fstart[c]) + j])
                uacc[0] = uacc[0] + T.Cast("uint64", T.Cast("int64", uw[T.Cast("int32", wstart[c]) + j])) * T.Cast("uint64", x[T.Cast("int32", fstart[c]) + j])
            if c > 0:
                out[c - 1] = acc[0]
            acc[0] = uacc[0]
            uacc[0] = T.uint64(0)

    return signal_filter_bank


def filter_bank_square_root(channels: int):
    """Sqrt64 (bit by bit, rounded up when the remainder exceeds the root) of x [channels] uint64, >> bits [1]
    int32 (out [channels] uint32). Values below 2^32 take Sqrt32's path (16 steps, root capped at 0xFFFF)."""
    from tvm.script import tirx as T

    @T.prim_func
    def signal_filter_bank_square_root(x: T.Buffer((channels,), "uint64"), bits: T.Buffer((1,), "int32"),
                                       out: T.Buffer((channels,), "uint32")):  # fmt: skip
        num = T.decl_buffer((1,), "uint64")
        res = T.decl_buffer((1,), "uint64")
        bit = T.decl_buffer((1,), "uint64")
        sc = T.decl_buffer((2,), "int32")  # the top bit of the path taken, the start bit
        for c in range(channels):
            num[0] = x[c]
            res[0] = T.uint64(0)
            if num[0] != T.uint64(0):
                sc[0] = T.Select((num[0] >> T.uint64(32)) == T.uint64(0), 31, 63)
                sc[1] = (sc[0] + 1 - _bit_length(num[0], 64)) | 1
                bit[0] = T.uint64(1) << T.Cast("uint64", sc[0] - sc[1])
                for it in range(32):
                    if it < (sc[0] - sc[1]) // 2 + 1:
                        if num[0] >= res[0] + bit[0]:
                            num[0] = num[0] - (res[0] + bit[0])
                            res[0] = (res[0] >> T.uint64(1)) + bit[0]
                        else:
                            res[0] = res[0] >> T.uint64(1)
                        bit[0] = bit[0] >> T.uint64(2)
                if num[0] > res[0] and res[0] != T.Select(sc[0] == 31, T.uint64(0xFFFF), T.uint64(0xFFFFFFFF)):
                    res[0] = res[0] + T.uint64(1)
            out[c] = T.if_then_else(bits[0] >= 0 and bits[0] < 32, T.Cast("uint32", res[0]) >> T.Cast("uint32", T.max(T.min(bits[0], 31), 0)), T.uint32(0))

    return signal_filter_bank_square_root


SPECTRAL_STATE_PARAM = 1  # the noise estimate among the spectral subtraction kernel's parameters


def spectral_subtraction(channels: int, smoothing: tuple[int, int], one_minus: tuple[int, int], min_remaining: int,
                         smoothing_bits: int, subtraction_bits: int, clamping: bool):  # fmt: skip
    """FilterbankSpectralSubtraction: x [channels] uint32, the noise estimate [channels] uint32 (state, updated),
    out [2, channels] uint32: the output, then the noise estimate as TFLM copies it to its second output.
    ``smoothing`` and ``one_minus``: (even channels, odd channels)."""
    from tvm.script import tirx as T

    @T.prim_func
    def signal_spectral_subtraction(x: T.Buffer((channels,), "uint32"), noise: T.Buffer((channels,), "uint32"),
                                    out: T.Buffer((2, channels), "uint32")):  # fmt: skip
        up = T.decl_buffer((1,), "uint32")
        est = T.decl_buffer((1,), "uint32")
        for c in range(channels):
            up[0] = x[c] << T.uint32(smoothing_bits)
            noise[c] = T.Cast("uint32", (T.Cast("uint64", up[0]) * T.Select(c % 2 == 0, T.uint64(smoothing[0]), T.uint64(smoothing[1]))
                                         + T.Cast("uint64", noise[c]) * T.Select(c % 2 == 0, T.uint64(one_minus[0]), T.uint64(one_minus[1])))
                                        >> T.uint64(subtraction_bits))  # fmt: skip
            est[0] = noise[c]
            if est[0] > up[0]:
                est[0] = up[0]
                if clamping:
                    noise[c] = up[0]
            out[0, c] = T.max((up[0] - est[0]) >> T.uint32(smoothing_bits),
                              T.Cast("uint32", (T.Cast("uint64", x[c]) * T.uint64(min_remaining)) >> T.uint64(subtraction_bits)))  # fmt: skip
            out[1, c] = noise[c]

    return signal_spectral_subtraction


def pcan(channels: int, lut_len: int, snr_shift: int):
    """ApplyPcanAutoGainControlFixed: x [channels] uint32, noise estimate [channels] uint32, gain table
    [lut_len] int16 (lut_len >= PCAN_LUT_MIN), out [channels] uint32: the gain of the noise estimate
    (WideDynamicFunction, the table interpolated per octave), the signal-to-noise ratio x * gain >> snr_shift,
    then PcanShrink (quadratic below 2 in Q12, linear above)."""
    from tvm.script import tirx as T

    @T.prim_func
    def signal_pcan(x: T.Buffer((channels,), "uint32"), noise: T.Buffer((channels,), "uint32"),
                    lut: T.Buffer((lut_len,), "int16"), out: T.Buffer((channels,), "uint32")):  # fmt: skip
        gain = T.decl_buffer((1,), "int32")
        acc = T.decl_buffer((1,), "int32")
        snr = T.decl_buffer((1,), "uint32")
        sc = T.decl_buffer((2,), "int32")  # octave, fraction
        for c in range(channels):
            if noise[c] <= T.uint32(2):
                gain[0] = T.Cast("int32", lut[T.Cast("int32", noise[c])])
            else:
                sc[0] = _msb32(noise[c])
                sc[1] = T.Cast("int32", T.if_then_else(sc[0] < 11, noise[c] << T.Cast("uint32", T.max(11 - sc[0], 0)), noise[c] >> T.Cast("uint32", T.max(sc[0] - 11, 0))) & T.uint32(0x3FF))
                acc[0] = (T.Cast("int32", lut[4 * sc[0] - 4]) * sc[1]) >> 5
                acc[0] = acc[0] + T.Cast("int32", lut[4 * sc[0] - 5]) * 32
                acc[0] = acc[0] * sc[1]
                acc[0] = (acc[0] + 16384) >> 15
                gain[0] = T.Cast("int32", T.Cast("int16", acc[0] + T.Cast("int32", lut[4 * sc[0] - 6])))
            snr[0] = T.Cast("uint32", (T.Cast("uint64", x[c]) * T.Cast("uint64", T.Cast("uint32", gain[0]))) >> T.uint64(snr_shift))
            if snr[0] < T.uint32(2 << 12):
                out[c] = (snr[0] * snr[0]) >> T.uint32(2 + 2 * 12 - 6)
            else:
                out[c] = (snr[0] >> T.uint32(12 - 6)) - T.uint32(1 << 6)

    return signal_pcan


def filter_bank_log(channels: int, correction_bits: int, output_scale: int):
    """FilterbankLog: Log32 of (x << correction_bits) [channels] uint32 (log2 from the bit length and the
    table-corrected fraction, times ln 2 in Q16, times output_scale in Q16), capped at 32767; 0 for inputs
    below 2. The table LOG_LUT is the kernel's second argument. out [channels] int16."""
    from tvm.script import tirx as T

    log_n = len(LOG_LUT)
    scale = int(output_scale) & 0xFFFFFFFF  # TFLM passes the int32 option as uint32_t out_scale

    @T.prim_func
    def signal_filter_bank_log(x: T.Buffer((channels,), "uint32"), lut: T.Buffer((log_n,), "int32"),
                               out: T.Buffer((channels,), "int16")):  # fmt: skip
        frac = T.decl_buffer((1,), "int32")
        lg2 = T.decl_buffer((1,), "uint32")
        loge = T.decl_buffer((1,), "uint32")
        vv = T.decl_buffer((1,), "uint32")
        sc = T.decl_buffer((3,), "int32")  # log2 integer part, segment, interpolation
        for c in range(channels):
            vv[0] = x[c] << T.uint32(correction_bits)
            if vv[0] > T.uint32(1):
                sc[0] = _bit_length(vv[0], 32) - 1
                frac[0] = T.Cast("int32", vv[0] - (T.uint32(1) << T.Cast("uint32", sc[0])))
                if sc[0] < 16:
                    frac[0] = frac[0] << (16 - sc[0])
                else:
                    frac[0] = frac[0] >> (sc[0] - 16)
                sc[1] = frac[0] >> 9
                sc[2] = ((lut[sc[1] + 1] - lut[sc[1]]) * (frac[0] - 512 * sc[1])) >> 16
                lg2[0] = (T.Cast("uint32", sc[0]) << T.uint32(16)) + T.Cast("uint32", frac[0] + lut[sc[1]] + sc[2])
                loge[0] = T.Cast("uint32", (T.Cast("uint64", lg2[0]) * T.uint64(45426) + T.uint64(32768)) >> T.uint64(16))
                out[c] = T.Cast("int16", T.min((T.uint32(scale) * loge[0] + T.uint32(32768)) >> T.uint32(16), T.uint32(32767)))
            else:
                out[c] = T.int16(0)

    return signal_filter_bank_log
