"""Integer kernels with TFLite Micro's arithmetic, written as TVM tensor expressions.

Each builder returns a scheduled TIR PrimFunc whose parameters are (inputs..., constants...,
output). Padding is an index test inside the reduction (no padded copy of the input) and every
reduction is computed at its output element, so the int32 accumulator is a scalar: kernels need
no scratch RAM beyond a few registers.

The convolutions and FULLY_CONNECTED integerize builds are the fast ones at the end of this module
(conv2d_fast, depthwise_conv2d_fast, fully_connected_fast, and the folded in-place depthwise): the
input zero point is folded into the bias on the host, padding is handled per output pixel (no test
per MAC), a few outputs share each loaded input byte (2 x 2 register tiles, 4 rows, 4 channels), the
inner loops are marked for codegen/kernels_c.py's micro-kernels (SMLAD on DSP cores), and
requantization runs in 32-bit registers. The first builders (conv2d, depthwise_conv2d,
fully_connected) stay for specs without a folded bias and as the plain reference form.
"""

from __future__ import annotations

from tvm import te, tirx
import tvm.s_tir

from . import tvmscript_macros  # noqa: F401  (cheap macro expansion; see the module)
from .fixed_point import clamp_to_int8, multiply_by_quantized_multiplier, multiply_by_quantized_multiplier_wrapping
from .kernel_attrs import DOT, LANES
from .specs import Requant  # noqa: F401  (the int8 kernels' output side; defined with the specs that carry it)


def _scalar_accumulator(func: tirx.PrimFunc, reductions: list[str], epilogue: str = "out") -> tirx.PrimFunc:
    """Move each reduction block under the innermost loop of its consumer: a 1-element accumulator.

    The init is then split out ahead of the reduction loops, so the C has a plain ``acc = 0``
    instead of a first-iteration test (which gcc flags as maybe-uninitialized)."""
    sch = tvm.s_tir.Schedule(func)
    for name in reductions:
        block = sch.get_sblock(name)
        consumer_loops = sch.get_loops(sch.get_sblock(epilogue))
        sch.compute_at(block, consumer_loops[-1])
        own_loops = sch.get_loops(block)[len(consumer_loops):]
        if own_loops:
            sch.decompose_reduction(block, own_loops[0])
    return sch.mod["main"]


def _in_bounds(index, extent):
    return tirx.all(index >= 0, index < extent)


def conv2d(x_shape, w_shape, has_bias, in_zp, stride, dilation, pad, out_shape, rq: Requant):
    """CONV_2D, NHWC input, HWIO int8 weights, per-channel multipliers."""
    n, h, w, c = x_shape
    kh, kw, _, o = w_shape
    x = te.placeholder(x_shape, "int8", name="x")
    wt = te.placeholder(w_shape, "int8", name="w")
    bias = te.placeholder((o,), "int32", name="bias") if has_bias else None
    mult = te.placeholder((o,), "int32", name="mult")
    shift = te.placeholder((o,), "int32", name="shift")
    rh, rw, rc = te.reduce_axis((0, kh), "rh"), te.reduce_axis((0, kw), "rw"), te.reduce_axis((0, c), "rc")
    sh, sw = stride
    dh, dw = dilation
    pt, pl = pad[0], pad[1]

    def acc_fn(b, i, j, oc):
        ih = i * sh + rh * dh - pt
        iw = j * sw + rw * dw - pl
        term = (x[b, ih, iw, rc].astype("int32") - in_zp) * wt[rh, rw, rc, oc].astype("int32")
        return te.sum(tirx.if_then_else(tirx.all(_in_bounds(ih, h), _in_bounds(iw, w)), term, 0), axis=[rh, rw, rc])

    acc = te.compute(out_shape, acc_fn, name="acc")

    def out_fn(b, i, j, oc):
        v = acc[b, i, j, oc] + (bias[oc] if has_bias else 0)
        v = multiply_by_quantized_multiplier(v, mult[oc], shift[oc]) + rq.out_zp
        return clamp_to_int8(v, rq.act_min, rq.act_max)

    out = te.compute(out_shape, out_fn, name="out")
    params = [x, wt] + ([bias] if has_bias else []) + [mult, shift, out]
    return _scalar_accumulator(te.create_prim_func(params), ["acc"])


def depthwise_conv2d(x_shape, w_shape, has_bias, in_zp, stride, dilation, pad, out_shape, rq: Requant):
    """DEPTHWISE_CONV_2D, NHWC input, weights [KH, KW, C*M] (TFLite's layout without the leading 1)."""
    n, h, w, c = x_shape
    kh, kw, oc_total = w_shape
    multiplier = oc_total // c
    x = te.placeholder(x_shape, "int8", name="x")
    wt = te.placeholder(w_shape, "int8", name="w")
    bias = te.placeholder((oc_total,), "int32", name="bias") if has_bias else None
    mult = te.placeholder((oc_total,), "int32", name="mult")
    shift = te.placeholder((oc_total,), "int32", name="shift")
    rh, rw = te.reduce_axis((0, kh), "rh"), te.reduce_axis((0, kw), "rw")
    sh, sw = stride
    dh, dw = dilation
    pt, pl = pad[0], pad[1]

    def acc_fn(b, i, j, oc):
        ih = i * sh + rh * dh - pt
        iw = j * sw + rw * dw - pl
        ic = oc // multiplier if multiplier > 1 else oc
        term = (x[b, ih, iw, ic].astype("int32") - in_zp) * wt[rh, rw, oc].astype("int32")
        return te.sum(tirx.if_then_else(tirx.all(_in_bounds(ih, h), _in_bounds(iw, w)), term, 0), axis=[rh, rw])

    acc = te.compute(out_shape, acc_fn, name="acc")

    def out_fn(b, i, j, oc):
        v = acc[b, i, j, oc] + (bias[oc] if has_bias else 0)
        v = multiply_by_quantized_multiplier(v, mult[oc], shift[oc]) + rq.out_zp
        return clamp_to_int8(v, rq.act_min, rq.act_max)

    out = te.compute(out_shape, out_fn, name="out")
    params = [x, wt] + ([bias] if has_bias else []) + [mult, shift, out]
    return _scalar_accumulator(te.create_prim_func(params), ["acc"])


def depthwise_conv2d_inplace(x_shape, w_shape, in_zp, stride, dilation, pad, out_shape, rq: Requant, delay: int = 0,
                             folded: bool = False):
    """DEPTHWISE_CONV_2D (multiplier 1) that writes its output over its input (after TinyEngine).

    Channel by channel: copy the input channel's plane into ``tmp`` (H*W bytes, the only extra RAM), then
    write the output channel. In NHWC an output element of channel c lands at a flat position that is
    also channel c of the input (same channel count), which was saved in ``tmp``: other channels are
    never touched, so any stride and padding work as long as the output is not larger than the input.
    Parameters: x, w [KH, KW, C], bias [C], mult [C], shift [C], out (may alias x), tmp [H*W]; the
    kernel is also correct when out and x are apart (the planner may not manage to overlap them).
    delay > 0 (see depthwise_inplace_delay): no tmp; the input is read where it lies and each output is held
    back on the stack until the last reader of the input pixel it overwrites has run (with a folded bias: four
    channels per pass where their 4 * delay bytes of ring fit MAX_INPLACE_DELAY).
    folded: the bias holds bias - in_zp * sum(w) (folded_bias): taps inside add x * w, taps in the padding
    in_zp * w."""
    from tvm.script import tirx as T

    n, h, w, c = x_shape
    kh, kw, oc_total = w_shape
    _, ho, wo, _ = out_shape
    if n != 1 or oc_total != c or ho * wo > h * w:
        raise ValueError("in-place depthwise needs batch 1, depth multiplier 1 and an output no larger than the input")
    sh, sw = stride
    dh, dw = dilation
    pt, pl = pad[0], pad[1]
    zp = int(in_zp)
    zsub = 0 if folded else zp  # subtracted from every input byte

    if folded:
        return _depthwise_inplace_folded(x_shape, w_shape, zp, stride, dilation, pad, out_shape, rq, delay)
    # each prim_func is parsed only when it is the one returned: TVMScript parsing is most of a build
    if not delay:
        @T.prim_func
        def depthwise_inplace(
            x: T.Buffer((1, h, w, c), "int8"), wt: T.Buffer((kh, kw, c), "int8"), bias: T.Buffer((c,), "int32"),
            mult: T.Buffer((c,), "int32"), shift: T.Buffer((c,), "int32"), out: T.Buffer((1, ho, wo, c), "int8"),
            tmp: T.Buffer((h * w,), "int8"),
        ):
            T.func_attr({"tir.noalias": False})  # out and x may be the same memory: no restrict
            acc = T.decl_buffer((1,), "int32")
            for ch in range(c):
                for y, z in T.grid(h, w):
                    tmp[y * w + z] = x[0, y, z, ch]
                for i, j in T.grid(ho, wo):
                    acc[0] = bias[ch]
                    for r, s in T.grid(kh, kw):
                        if 0 <= i * sh + r * dh - pt and i * sh + r * dh - pt < h and 0 <= j * sw + s * dw - pl and j * sw + s * dw - pl < w:
                            acc[0] = acc[0] + (T.Cast("int32", tmp[(i * sh + r * dh - pt) * w + j * sw + s * dw - pl]) - zsub) * T.Cast("int32", wt[r, s, ch])
                        elif folded:
                            acc[0] = acc[0] + zp * T.Cast("int32", wt[r, s, ch])
                    out[0, i, j, ch] = clamp_to_int8(
                        multiply_by_quantized_multiplier(acc[0], mult[ch], shift[ch]) + rq.out_zp, rq.act_min, rq.act_max)

        return depthwise_inplace

    k_out = ho * wo
    d = max(int(delay), 1)

    @T.prim_func
    def depthwise_inplace_delayed(
        x: T.Buffer((1, h, w, c), "int8"), wt: T.Buffer((kh, kw, c), "int8"), bias: T.Buffer((c,), "int32"),
        mult: T.Buffer((c,), "int32"), shift: T.Buffer((c,), "int32"), out: T.Buffer((1, ho, wo, c), "int8"),
    ):
        T.func_attr({"tir.noalias": False})
        acc = T.decl_buffer((1,), "int32")
        ring = T.decl_buffer((d,), "int8")  # the last d outputs of this channel, on the stack
        for ch in range(c):
            for k in range(k_out):
                acc[0] = bias[ch]
                for r, s in T.grid(kh, kw):
                    if 0 <= (k // wo) * sh + r * dh - pt and (k // wo) * sh + r * dh - pt < h and 0 <= (k % wo) * sw + s * dw - pl and (k % wo) * sw + s * dw - pl < w:
                        acc[0] = acc[0] + (T.Cast("int32", x[0, (k // wo) * sh + r * dh - pt, (k % wo) * sw + s * dw - pl, ch]) - zsub) * T.Cast("int32", wt[r, s, ch])
                    elif folded:
                        acc[0] = acc[0] + zp * T.Cast("int32", wt[r, s, ch])
                ring[k % d] = clamp_to_int8(
                    multiply_by_quantized_multiplier(acc[0], mult[ch], shift[ch]) + rq.out_zp, rq.act_min, rq.act_max)
                if k >= d - 1:  # every reader of input pixel k-d+1 has run: its byte may go
                    out[0, (k - d + 1) // wo, (k - d + 1) % wo, ch] = ring[(k - d + 1) % d]
            for t in range(d - 1):
                if k_out - d + 1 + t >= 0:
                    out[0, (k_out - d + 1 + t) // wo, (k_out - d + 1 + t) % wo, ch] = ring[(k_out - d + 1 + t) % d]

    return depthwise_inplace_delayed


def _depthwise_inplace_folded(x_shape, w_shape, zp, stride, dilation, pad, out_shape, rq: Requant, delay: int):
    """depthwise_conv2d_inplace with a folded bias and no per-tap tests: interior outputs run every tap,
    border outputs their valid taps plus in_zp * w for the others (as depthwise_conv2d_fast)."""
    from tvm.script import tirx as T

    _, h, w, c = x_shape
    kh, kw, _ = w_shape
    _, ho, wo, _ = out_shape
    sh, sw = stride
    dh, dw = dilation
    pt, pl = pad[0], pad[1]
    store = _requant_macro(rq, True)
    taps = T.unroll if kh * kw <= 16 else T.serial
    k_out = ho * wo
    d = max(int(delay), 1)

    def rows(i):
        return _tap_range(i * sh - pt, kh, dh, h)

    def cols(j):
        return _tap_range(j * sw - pl, kw, dw, w)

    def interior(i, j):
        r, q = rows(i), cols(j)
        return tirx.all(r[0] == 0, r[1] == kh, q[0] == 0, q[1] == kw)

    def at(i, j, r, q):  # flat pixel index (y * w + z) of tap (r, q) of output (i, j)
        return (i * sh - pt + r * dh) * w + j * sw - pl + q * dw

    @T.macro
    def wsum(wt, acc, ch, r0, r1, s0, s1):
        for r in range(r0, r1):
            for q in range(s0, s1):
                acc[1] = acc[1] + T.Cast("int32", wt[r, q, ch])

    @T.macro
    def output(src, wt, bias, acc, i, j, ch, stride_c, off):  # acc[0] = the accumulator of output (i, j, ch)
        acc[0] = bias[ch]
        if interior(i, j):
            for r in taps(kh):
                for q in taps(kw):
                    acc[0] = acc[0] + T.Cast("int32", src[at(i, j, r, q) * stride_c + off]) * T.Cast("int32", wt[r, q, ch])
        else:
            acc[1] = 0
            for r in range(rows(i)[0], rows(i)[1]):
                for q in range(cols(j)[0], cols(j)[1]):
                    acc[0] = acc[0] + T.Cast("int32", src[at(i, j, r, q) * stride_c + off]) * T.Cast("int32", wt[r, q, ch])
            wsum(wt, acc, ch, 0, rows(i)[0], 0, kw)
            wsum(wt, acc, ch, rows(i)[1], kh, 0, kw)
            wsum(wt, acc, ch, rows(i)[0], rows(i)[1], 0, cols(j)[0])
            wsum(wt, acc, ch, rows(i)[0], rows(i)[1], cols(j)[1], kw)
            acc[0] = acc[0] + acc[1] * zp

    if not delay:  # only the prim_func returned is parsed
        @T.prim_func
        def depthwise_inplace(
            x: T.Buffer((1, h, w, c), "int8"), wt: T.Buffer((kh, kw, c), "int8"), bias: T.Buffer((c,), "int32"),
            mult: T.Buffer((c,), "int32"), shift: T.Buffer((c,), "int32"), out: T.Buffer((1, ho, wo, c), "int8"),
            tmp: T.Buffer((h * w,), "int8"),
        ):
            T.func_attr({"tir.noalias": False})
            acc = T.decl_buffer((2,), "int32")
            for ch in range(c):
                for y, z in T.grid(h, w):
                    tmp[y * w + z] = x[0, y, z, ch]
                for i, j in T.grid(ho, wo):
                    output(tmp, wt, bias, acc, i, j, ch, 1, 0)
                    store(out, (0, i, j, ch), acc[0], mult[ch], shift[ch])

        return depthwise_inplace

    # Four channels at a time where their ring fits (4 * d bytes): one word of x and of w per tap (em_mac4_s8).
    # Output pixel q of channels ch..ch+3 overwrites input pixel q of the same four channels only, whose
    # readers are outputs of these channels, so the per-channel delay d still holds for the group.
    g4 = c // 4 if 4 * d <= MAX_INPLACE_DELAY else 0

    def tap_inside(i, j, r, q):
        y, z = i * sh - pt + r * dh, j * sw - pl + q * dw
        return tirx.all(0 <= y, y < h, 0 <= z, z < w)

    @T.macro
    def group_pixel(xf, wf, bias, mult, shift, acc, ring, i, j, cq):  # outputs (i, j, 4cq..4cq+3) -> ring
        for t in T.unroll(4):
            acc[t] = bias[cq * 4 + t]
        if interior(i, j):
            for r in taps(kh):
                for q in taps(kw):
                    for t in T.serial(4, annotations={LANES: 1}):
                        acc[t] = acc[t] + T.Cast("int32", xf[at(i, j, r, q) * c + cq * 4 + t]) * T.Cast("int32", wf[(r * kw + q) * c + cq * 4 + t])
        else:
            for r in taps(kh):
                for q in taps(kw):
                    if tap_inside(i, j, r, q):
                        for t in T.serial(4, annotations={LANES: 1}):
                            acc[t] = acc[t] + T.Cast("int32", xf[at(i, j, r, q) * c + cq * 4 + t]) * T.Cast("int32", wf[(r * kw + q) * c + cq * 4 + t])
                    else:  # a tap in the padding adds in_zp * w (the folded bias took it away)
                        for t in T.unroll(4):
                            acc[t] = acc[t] + T.Cast("int32", wf[(r * kw + q) * c + cq * 4 + t]) * zp
        for t in T.unroll(4):
            store(ring, ((i * wo + j) % d) * 4 + t, acc[t], mult[cq * 4 + t], shift[cq * 4 + t])

    @T.prim_func
    def depthwise_inplace_delayed(
        x: T.Buffer((1, h, w, c), "int8"), wt: T.Buffer((kh, kw, c), "int8"), bias: T.Buffer((c,), "int32"),
        mult: T.Buffer((c,), "int32"), shift: T.Buffer((c,), "int32"), out: T.Buffer((1, ho, wo, c), "int8"),
    ):
        T.func_attr({"tir.noalias": False})
        acc = T.decl_buffer((4,), "int32")
        xf = T.decl_buffer((h * w * c,), "int8", data=x.data)
        wf = T.decl_buffer((kh * kw * c,), "int8", data=wt.data)
        of = T.decl_buffer((k_out * c,), "int8", data=out.data)
        if g4 > 0:  # Python tests (parse time): no unused ring array in the C
            ring4 = T.decl_buffer((4 * d,), "int8")  # the last d outputs of the group, 4 bytes each
            for cq in range(g4):
                for i in range(ho):
                    for j in range(wo):
                        group_pixel(xf, wf, bias, mult, shift, acc, ring4, i, j, cq)
                        if i * wo + j >= d - 1:  # every reader of input pixel k-d+1 has run: its 4 bytes may go
                            for t in T.unroll(4):
                                of[(i * wo + j - d + 1) * c + cq * 4 + t] = ring4[((i * wo + j - d + 1) % d) * 4 + t]
                for u in range(d - 1):
                    if k_out - d + 1 + u >= 0:
                        for t in T.unroll(4):
                            of[(k_out - d + 1 + u) * c + cq * 4 + t] = ring4[((k_out - d + 1 + u) % d) * 4 + t]
        if g4 * 4 < c:
            ring = T.decl_buffer((d,), "int8")  # the last d outputs of one channel
            for ch in range(g4 * 4, c):
                for k in range(k_out):
                    output(xf, wt, bias, acc, k // wo, k % wo, ch, c, ch)
                    store(ring, k % d, acc[0], mult[ch], shift[ch])
                    if k >= d - 1:
                        out[0, (k - d + 1) // wo, (k - d + 1) % wo, ch] = ring[(k - d + 1) % d]
                for t in range(d - 1):
                    if k_out - d + 1 + t >= 0:
                        out[0, (k_out - d + 1 + t) // wo, (k_out - d + 1 + t) % wo, ch] = ring[(k_out - d + 1 + t) % d]

    return depthwise_inplace_delayed


MAX_INPLACE_DELAY = 512  # bytes of stack the delayed in-place depthwise may hold per call


def depthwise_inplace_delay(x_shape, w_shape, stride, dilation, pad, out_shape) -> int:
    """How many outputs the in-place depthwise must hold back so that writing output q (over input pixel q
    of the same channel) waits for every output that reads input pixel q: max over q of (last reader of
    pixel q) - q + 1, at least 1 (1: each output goes straight out). 0 if that exceeds MAX_INPLACE_DELAY."""
    _, h, w, _ = x_shape
    kh, kw = w_shape[0], w_shape[1]
    _, ho, wo, _ = out_shape
    sh, sw = stride
    dh, dw = dilation
    pt, pl = pad[0], pad[1]
    last = {}  # input pixel -> the last output (flat index) whose window reads it
    for i in range(ho):
        for j in range(wo):
            for r in range(kh):
                for q in range(kw):
                    y, z = i * sh + r * dh - pt, j * sw + q * dw - pl
                    if 0 <= y < h and 0 <= z < w:
                        last[y * w + z] = i * wo + j
    need = max([reader - pixel + 1 for pixel, reader in last.items() if pixel < ho * wo] + [1])
    return need if need <= MAX_INPLACE_DELAY else 0


def fully_connected(x_shape, w_shape, has_bias, in_zp, w_zp, multiplier, shift, rq: Requant):
    """FULLY_CONNECTED: x [B, K] int8, weights [O, K] int8 (TFLite's layout).

    ``multiplier``/``shift`` as Python ints: one per-tensor multiplier (TFLM's FullyConnected, with the
    weights' zero point). ``None``: per-channel (TFLM's FullyConnectedPerChannel, weights symmetric), the
    kernel then takes ``mult`` [O] and ``shift`` [O] int32 constants after the bias."""
    batch, k = x_shape
    o = w_shape[0]
    per_channel = multiplier is None
    x = te.placeholder(x_shape, "int8", name="x")
    wt = te.placeholder(w_shape, "int8", name="w")
    bias = te.placeholder((o,), "int32", name="bias") if has_bias else None
    mult = te.placeholder((o,), "int32", name="mult") if per_channel else None
    shifts = te.placeholder((o,), "int32", name="shift") if per_channel else None
    rk = te.reduce_axis((0, k), "rk")
    acc = te.compute(
        (batch, o),
        lambda b, oc: te.sum(
            (x[b, rk].astype("int32") - in_zp) * (wt[oc, rk].astype("int32") - w_zp), axis=rk
        ),
        name="acc",
    )

    def out_fn(b, oc):
        v = acc[b, oc] + (bias[oc] if has_bias else 0)
        if per_channel:
            v = multiply_by_quantized_multiplier(v, mult[oc], shifts[oc]) + rq.out_zp
        else:
            v = multiply_by_quantized_multiplier(v, multiplier, shift) + rq.out_zp
        return clamp_to_int8(v, rq.act_min, rq.act_max)

    out = te.compute((batch, o), out_fn, name="out")
    params = [x, wt] + ([bias] if has_bias else []) + ([mult, shifts] if per_channel else []) + [out]
    return _scalar_accumulator(te.create_prim_func(params), ["acc"])


def add(shape, in1_zp, in2_zp, left_shift, m1, s1, m2, s2, m_out, s_out, rq: Requant):
    """ADD of two int8 tensors of one shape (TFLM's AddElementwise)."""
    a = te.placeholder(shape, "int8", name="a")
    b = te.placeholder(shape, "int8", name="b")

    def out_fn(*idx):
        va = (a[idx].astype("int32") - in1_zp) * (1 << left_shift)
        vb = (b[idx].astype("int32") - in2_zp) * (1 << left_shift)
        sa = multiply_by_quantized_multiplier(va, m1, s1)
        sb = multiply_by_quantized_multiplier(vb, m2, s2)
        v = multiply_by_quantized_multiplier(sa + sb, m_out, s_out) + rq.out_zp
        return clamp_to_int8(v, rq.act_min, rq.act_max)

    out = te.compute(shape, out_fn, name="out")
    return te.create_prim_func([a, b, out])


def _pool_window(h, w, i, j, rh, rw, stride, pad):
    ih = i * stride[0] + rh - pad[0]
    iw = j * stride[1] + rw - pad[1]
    return ih, iw, tirx.all(_in_bounds(ih, h), _in_bounds(iw, w))


def average_pool2d(x_shape, pool, stride, pad, out_shape, rq: Requant):
    """AVERAGE_POOL_2D: mean over the in-bounds window elements, rounded half away from zero."""
    n, h, w, c = x_shape
    x = te.placeholder(x_shape, "int8", name="x")
    rh, rw = te.reduce_axis((0, pool[0]), "rh"), te.reduce_axis((0, pool[1]), "rw")

    def sum_fn(b, i, j, ch):
        ih, iw, ok = _pool_window(h, w, i, j, rh, rw, stride, pad)
        return te.sum(tirx.if_then_else(ok, x[b, ih, iw, ch].astype("int32"), 0), axis=[rh, rw])

    total = te.compute(out_shape, sum_fn, name="acc")

    def count(i, j):
        # In-bounds window size, in closed form (no second reduction).
        h0 = i * stride[0] - pad[0]
        w0 = j * stride[1] - pad[1]
        ch = tirx.Min(h0 + pool[0], h) - tirx.Max(h0, 0)
        cw = tirx.Min(w0 + pool[1], w) - tirx.Max(w0, 0)
        return (ch * cw).astype("int32")

    def out_fn(b, i, j, ch):
        s = total[b, i, j, ch]
        cnt = count(i, j)
        half = tirx.truncdiv(cnt, 2)
        avg = tirx.Select(s > 0, tirx.truncdiv(s + half, cnt), tirx.truncdiv(s - half, cnt))
        return clamp_to_int8(avg, rq.act_min, rq.act_max)

    out = te.compute(out_shape, out_fn, name="out")
    return _scalar_accumulator(te.create_prim_func([x, out]), ["acc"])


def max_pool2d(x_shape, pool, stride, pad, out_shape, rq: Requant):
    """MAX_POOL_2D over the in-bounds window elements."""
    n, h, w, c = x_shape
    x = te.placeholder(x_shape, "int8", name="x")
    rh, rw = te.reduce_axis((0, pool[0]), "rh"), te.reduce_axis((0, pool[1]), "rw")

    def max_fn(b, i, j, ch):
        ih, iw, ok = _pool_window(h, w, i, j, rh, rw, stride, pad)
        return te.max(tirx.if_then_else(ok, x[b, ih, iw, ch].astype("int32"), -128), axis=[rh, rw])

    peak = te.compute(out_shape, max_fn, name="acc")
    out = te.compute(out_shape, lambda *i: clamp_to_int8(peak[i], rq.act_min, rq.act_max), name="out")
    return _scalar_accumulator(te.create_prim_func([x, out]), ["acc"])


# ---------------------------------------------------------------- data movement (no arithmetic)

def pad(x_shape, pad_before, pad_after, pad_value: int):
    """PAD / PADV2 on int8: TFLM writes the pad value (the output zero point unless given)."""
    x = te.placeholder(x_shape, "int8", name="x")
    out_shape = tuple(int(d) + int(b) + int(a) for d, b, a in zip(x_shape, pad_before, pad_after))

    def out_fn(*idx):
        src = [i - int(b) for i, b in zip(idx, pad_before)]
        inside = tirx.all(*[_in_bounds(s, int(d)) for s, d in zip(src, x_shape)])
        # Clamped indices keep the (never taken) load in bounds for the C compiler's sake.
        safe = [tirx.Min(tirx.Max(s, 0), int(d) - 1) for s, d in zip(src, x_shape)]
        return tirx.if_then_else(inside, x[tuple(safe)], tirx.const(pad_value, "int8"))

    out = te.compute(out_shape, out_fn, name="out")
    return te.create_prim_func([x, out])


def strided_slice(x_shape, begin, strides, out_shape):
    """STRIDED_SLICE with the frontend's resolved begin/stride per axis: a copy."""
    x = te.placeholder(x_shape, "int8", name="x")
    out = te.compute(
        tuple(out_shape),
        lambda *idx: x[tuple(int(b) + i * int(s) for i, b, s in zip(idx, begin, strides))],
        name="out",
    )
    return te.create_prim_func([x, out])


def transpose(x_shape, axes):
    """TRANSPOSE: out[i_0..i_n] = x[...] with out axis k reading x axis axes[k]."""
    x = te.placeholder(x_shape, "int8", name="x")
    out_shape = tuple(int(x_shape[a]) for a in axes)

    def out_fn(*idx):
        src = [None] * len(axes)
        for k, a in enumerate(axes):
            src[a] = idx[k]
        return x[tuple(src)]

    out = te.compute(out_shape, out_fn, name="out")
    return te.create_prim_func([x, out])


def concatenation(shapes, axis: int):
    """CONCATENATION of int8 tensors with one quantization (TFLM requires it): a copy."""
    xs = [te.placeholder(s, "int8", name=f"x{i}") for i, s in enumerate(shapes)]
    out_shape = list(shapes[0])
    out_shape[axis] = sum(int(s[axis]) for s in shapes)
    starts = [0]
    for s in shapes[:-1]:
        starts.append(starts[-1] + int(s[axis]))

    def out_fn(*idx):
        value = None
        for x, start, s in zip(xs, starts, shapes):  # later inputs override from their start on
            local = list(idx)
            local[axis] = tirx.Max(idx[axis] - start, 0) if start else idx[axis]
            local[axis] = tirx.Min(local[axis], int(s[axis]) - 1)
            load = x[tuple(local)]
            value = load if value is None else tirx.if_then_else(idx[axis] >= start, load, value)
        return value

    out = te.compute(tuple(out_shape), out_fn, name="out")
    return te.create_prim_func(xs + [out])


def resize_nearest(x_shape, out_hw):
    """RESIZE_NEAREST_NEIGHBOR (NHWC) through source-row/column tables computed on the host with
    TFLM's float formula (int32 constants, out_h + out_w entries)."""
    n, h, w, c = x_shape
    oh, ow = out_hw
    x = te.placeholder(x_shape, "int8", name="x")
    rows = te.placeholder((oh,), "int32", name="rows")
    cols = te.placeholder((ow,), "int32", name="cols")
    out = te.compute((n, oh, ow, c), lambda b, i, j, ch: x[b, rows[i], cols[j], ch], name="out")
    return te.create_prim_func([x, rows, cols, out])


# ---------------------------------------------------------------- arithmetic on int8

def mean(x_shape, axes, keep_dims: bool, in_zp, multiplier, shift, out_zp):
    """MEAN over any axes, TFLM's QuantizedMeanOrSum: the int32 sum of (x - in_zp) times a
    multiplier that already folds in 1/count (see fixed_point.mean_multiplier)."""
    axes = sorted(int(a) for a in axes)
    x = te.placeholder(x_shape, "int8", name="x")
    reduce_axes = {a: te.reduce_axis((0, int(x_shape[a])), f"r{a}") for a in axes}
    out_shape = tuple(1 if a in reduce_axes else int(d) for a, d in enumerate(x_shape) if keep_dims or a not in reduce_axes)

    def source_index(idx):
        src, k = [], 0
        for a in range(len(x_shape)):
            if a in reduce_axes:
                src.append(reduce_axes[a])
                k += 1 if keep_dims else 0
            else:
                src.append(idx[k])
                k += 1
        return tuple(src)

    acc = te.compute(
        out_shape,
        lambda *idx: te.sum(x[source_index(idx)].astype("int32") - in_zp, axis=list(reduce_axes.values())),
        name="acc",
    )

    def out_fn(*idx):
        v = multiply_by_quantized_multiplier(acc[idx], multiplier, shift) + out_zp
        return clamp_to_int8(v, -128, 127)

    out = te.compute(out_shape, out_fn, name="out")
    return _scalar_accumulator(te.create_prim_func([x, out]), ["acc"])


def _broadcast_index(idx, shape, out_rank):
    """numpy broadcasting: right-align ``shape`` under the output, size-1 axes read index 0."""
    lead = out_rank - len(shape)
    return tuple(0 if int(d) == 1 else idx[lead + k] for k, d in enumerate(shape))


def mul(a_shape, b_shape, out_shape, a_zp, b_zp, multiplier, shift, rq: Requant):
    """MUL (TFLM's MulElementwise / BroadcastMul): (a - a_zp) * (b - b_zp), one requantization."""
    a = te.placeholder(a_shape, "int8", name="a")
    b = te.placeholder(b_shape, "int8", name="b")
    rank = len(out_shape)

    def out_fn(*idx):
        va = a[_broadcast_index(idx, a_shape, rank)].astype("int32") - a_zp
        vb = b[_broadcast_index(idx, b_shape, rank)].astype("int32") - b_zp
        v = multiply_by_quantized_multiplier_wrapping(va * vb, multiplier, shift) + rq.out_zp  # may leave int32
        return clamp_to_int8(v, rq.act_min, rq.act_max)

    out = te.compute(tuple(out_shape), out_fn, name="out")
    return te.create_prim_func([a, b, out])


def broadcast_add(a_shape, b_shape, out_shape, in1_zp, in2_zp, left_shift, m1, s1, m2, s2, m_out, s_out, rq: Requant):
    """ADD with numpy broadcasting (TFLM's BroadcastAdd6DSlow): the same arithmetic per element
    as ``add``, operands read through broadcast indices."""
    a = te.placeholder(a_shape, "int8", name="a")
    b = te.placeholder(b_shape, "int8", name="b")
    rank = len(out_shape)

    def out_fn(*idx):
        va = (a[_broadcast_index(idx, a_shape, rank)].astype("int32") - in1_zp) * (1 << left_shift)
        vb = (b[_broadcast_index(idx, b_shape, rank)].astype("int32") - in2_zp) * (1 << left_shift)
        sa = multiply_by_quantized_multiplier(va, m1, s1)
        sb = multiply_by_quantized_multiplier(vb, m2, s2)
        v = multiply_by_quantized_multiplier(sa + sb, m_out, s_out) + rq.out_zp
        return clamp_to_int8(v, rq.act_min, rq.act_max)

    out = te.compute(tuple(out_shape), out_fn, name="out")
    return te.create_prim_func([a, b, out])


def requantize(shape, in_zp, multiplier, shift, out_zp):
    """QUANTIZE int8 -> int8 (TFLM's Requantize): (x - in_zp) rescaled, plus out_zp."""
    x = te.placeholder(shape, "int8", name="x")

    def out_fn(*idx):
        v = multiply_by_quantized_multiplier(x[idx].astype("int32") - in_zp, multiplier, shift) + out_zp
        return clamp_to_int8(v, -128, 127)

    out = te.compute(tuple(shape), out_fn, name="out")
    return te.create_prim_func([x, out])


# ---------------------------------------------------------------- float <-> int8 at the model's edges

def quantize_float(shape, scale: float, zero_point: int):
    """QUANTIZE float32 -> int8, TFLM's AffineQuantize: round(x / scale) + zp, clamped.

    The quotient is a float32 division (as TFLM: ``val / static_cast<float>(scale)``) and the
    rounding is std::round (ties away from zero), done exactly without roundf: with t = trunc(q),
    q - t is exact in float32, so comparing it with +-0.5 decides the tie the same way."""
    x = te.placeholder(shape, "float32", name="x")
    limit = tirx.const(1024.0, "float32")  # far outside int8 after the zero point; keeps the cast defined

    def out_fn(*idx):
        q = x[idx] / tirx.const(float(scale), "float32")
        q = tirx.Min(tirx.Max(q, -limit), limit)
        t = q.astype("int32")  # truncation toward zero
        frac = q - t.astype("float32")
        rounded = t + tirx.Select(frac >= 0.5, 1, 0) - tirx.Select(frac <= -0.5, 1, 0)
        return clamp_to_int8(rounded + zero_point, -128, 127)

    out = te.compute(tuple(shape), out_fn, name="out")
    return te.create_prim_func([x, out])


def dequantize_float(shape, scale: float, zero_point: int):
    """DEQUANTIZE int8 -> float32, TFLM: float(scale * (x - zp)) with scale in double. (x - zp)
    has at most 9 bits, so the double product is exact and one float32 multiply rounds it the same."""
    x = te.placeholder(shape, "int8", name="x")
    out = te.compute(
        tuple(shape),
        lambda *idx: (x[idx].astype("int32") - zero_point).astype("float32") * tirx.const(float(scale), "float32"),
        name="out",
    )
    return te.create_prim_func([x, out])
# ---------------------------------------------------------------- fast int8 kernels (offset folded, no per-MAC tests)
#
# The input zero point is folded into the bias on the host (folded_bias below): the kernels sum raw
# int8 products. Padding is handled per output pixel: the range of kernel taps that fall inside the
# input is computed once, the reduction runs over that range only, and on border pixels the taps
# outside it add in_zp * w (what a zero-point-valued border would give, since the folded bias
# subtracted in_zp * w for every tap). Requantization runs in 32-bit registers (see requant32).


def folded_bias(bias, weights, in_zp: int, out_axis: int):
    """bias - in_zp * sum(w) per output channel, wrapped to int32 like the kernel's accumulator
    (TFLM's acc = sum((x - zp) * w) + bias is the same int32 modulo 2^32)."""
    import numpy as np

    w = np.asarray(weights).astype(np.int64)
    axes = tuple(a for a in range(w.ndim) if a != out_axis % w.ndim)
    total = w.sum(axis=axes)
    b = np.zeros(total.shape, np.int64) if bias is None else np.broadcast_to(np.asarray(bias).astype(np.int64).reshape(-1), total.shape)
    return ((b - int(in_zp) * total + 2**31) % 2**32 - 2**31).astype(np.int32)


def _requant_macro(rq: Requant, per_channel: bool, mult_c: int = 0, shift_c: int = 0):
    """A TVMScript macro: out[idx] = clamp(MultiplyByQuantizedMultiplier(acc) + out_zp), 32-bit."""
    from tvm.script import tirx as T

    if per_channel:
        @T.macro
        def store(out, idx, acc, m, s):
            hi: T.let[T.int32] = T.Cast("int32", (T.Cast("int64", acc * (T.int32(1) << T.max(s, 0))) * T.Cast("int64", m)
                                              + T.int64(1 << 30)) >> T.int64(31))
            # the rounding mask (1 << r) - 1 in uint32: r reaches 31, where an int32 shift is undefined in C
            mask: T.let[T.int32] = T.Cast("int32", (T.uint32(1) << T.Cast("uint32", T.max(0 - s, 0))) - T.uint32(1))
            out[idx] = T.Cast("int8", T.min(T.max(
                (hi >> T.max(0 - s, 0)) + T.Cast("int32", (hi & mask) > (mask >> 1) + T.Cast("int32", hi < 0))
                + rq.out_zp, rq.act_min), rq.act_max))
        return store
    left, right = max(shift_c, 0), max(-shift_c, 0)
    mask = (1 << right) - 1

    @T.macro
    def store_c(out, idx, acc, m, s):
        hi: T.let[T.int32] = T.Cast("int32", (T.Cast("int64", acc * (1 << left)) * T.int64(mult_c) + T.int64(1 << 30)) >> T.int64(31))
        out[idx] = T.Cast("int8", T.min(T.max(
            (hi >> right) + T.Cast("int32", (hi & mask) > (mask >> 1) + T.Cast("int32", hi < 0)) + rq.out_zp,
            rq.act_min), rq.act_max))
    return store_c


def _window_taps(origin, kh: int, kw: int, dh: int, dw: int, h: int, w: int):
    """(rows, cols, interior) of a convolution window: for an output pixel p (``origin(p)`` its top-left input
    (b, y, z)), the valid tap rows and columns, and whether the whole window lies inside the input."""

    def rows(p):
        return _tap_range(origin(p)[1], kh, dh, h)

    def cols(p):
        return _tap_range(origin(p)[2], kw, dw, w)

    def interior(p):
        r, s = rows(p), cols(p)
        return tirx.all(r[0] == 0, r[1] == kh, s[0] == 0, s[1] == kw)

    return rows, cols, interior


def _tap_range(origin, k: int, dil: int, size: int):
    """[lo, hi) of the taps t in [0, k) with 0 <= origin + t * dil < size, clamped to [0, k] and hi >= lo."""
    lo = tirx.Min(tirx.Max(tirx.floordiv(dil - 1 - origin, dil), 0), k)
    hi = tirx.Max(tirx.Min(tirx.floordiv(size - 1 - origin, dil) + 1, k), lo)
    return lo, hi


def _pixel_origin(p, n, h, w, ho, wo, sh, sw, pt, pl):
    """(batch, top input row, left input column) of output pixel p (flat over N*HO*WO)."""
    b = tirx.floordiv(p, ho * wo) if n > 1 else 0
    q = tirx.floormod(p, ho * wo) if n > 1 else p
    return b, tirx.floordiv(q, wo) * sh - pt, tirx.floormod(q, wo) * sw - pl


COLUMN_BYTES = 512  # stack bytes a convolution with short kernel rows may use for two gathered windows


def conv2d_fast(x_shape, w_shape, in_zp, stride, dilation, pad, out_shape, rq: Requant):
    """CONV_2D with the input zero point folded into ``bias`` (folded_bias) and weights in TFLite's OHWI
    layout [O, KH, KW, C]; ``w_shape`` is the HWIO shape of the spec. Parameters: x, w, bias, mult, shift, out.

    Two output channels per pass (each input byte loaded once for both); a 1x1 convolution without padding
    also takes two pixels per pass (2 x 2 accumulators). The interior of the image runs fixed-size loops with
    no tests; border pixels run over their valid taps and add in_zp * w for the others."""
    from tvm.script import tirx as T

    n, h, w, c = (int(v) for v in x_shape)
    kh, kw, _, o = (int(v) for v in w_shape)
    _, ho, wo, _ = (int(v) for v in out_shape)
    sh, sw = (int(v) for v in stride)
    dh, dw = (int(v) for v in dilation)
    pt, pl = int(pad[0]), int(pad[1])
    zp = int(in_zp)
    npix = n * ho * wo
    store = _requant_macro(rq, True)
    o2 = o // 2

    def opix(p, oc):  # out[b, i, j, oc] of flat output pixel p: the kernel stores to its output parameter itself
        if n == 1:
            return (0, tirx.floordiv(p, wo), tirx.floormod(p, wo), oc)
        return (tirx.floordiv(p, ho * wo), tirx.floormod(tirx.floordiv(p, wo), ho), tirx.floormod(p, wo), oc)
    kk = kh * kw * c

    if kh == 1 and kw == 1 and not any(int(v) for v in pad):
        identity = sh == 1 and sw == 1 and ho == h and wo == w

        def xoff(p):
            if identity:
                return p * c
            b, y, z = _pixel_origin(p, n, h, w, ho, wo, sh, sw, 0, 0)
            return ((b * h + y) * w + z) * c

        p2 = npix // 2

        @T.prim_func
        def pointwise(x: T.Buffer((n, h, w, c), "int8"), wt: T.Buffer((o, 1, 1, c), "int8"), bias: T.Buffer((o,), "int32"),
                      mult: T.Buffer((o,), "int32"), shift: T.Buffer((o,), "int32"), out: T.Buffer((n, ho, wo, o), "int8")):
            xf = T.decl_buffer((n * h * w * c,), "int8", data=x.data)
            wf = T.decl_buffer((o * c,), "int8", data=wt.data)
            acc = T.decl_buffer((4,), "int32")
            for pp in range(p2):
                for oo in range(o2):
                    acc[0] = bias[oo * 2]
                    acc[1] = bias[oo * 2 + 1]
                    acc[2] = bias[oo * 2]
                    acc[3] = bias[oo * 2 + 1]
                    for k in T.serial(c, annotations={DOT: 1}):
                        acc[0] = acc[0] + T.Cast("int32", xf[xoff(pp * 2) + k]) * T.Cast("int32", wf[oo * 2 * c + k])
                        acc[1] = acc[1] + T.Cast("int32", xf[xoff(pp * 2) + k]) * T.Cast("int32", wf[oo * 2 * c + c + k])
                        acc[2] = acc[2] + T.Cast("int32", xf[xoff(pp * 2 + 1) + k]) * T.Cast("int32", wf[oo * 2 * c + k])
                        acc[3] = acc[3] + T.Cast("int32", xf[xoff(pp * 2 + 1) + k]) * T.Cast("int32", wf[oo * 2 * c + c + k])
                    store(out, opix(pp * 2, oo * 2), acc[0], mult[oo * 2], shift[oo * 2])
                    store(out, opix(pp * 2, oo * 2 + 1), acc[1], mult[oo * 2 + 1], shift[oo * 2 + 1])
                    store(out, opix(pp * 2 + 1, oo * 2), acc[2], mult[oo * 2], shift[oo * 2])
                    store(out, opix(pp * 2 + 1, oo * 2 + 1), acc[3], mult[oo * 2 + 1], shift[oo * 2 + 1])
                for oc in range(o2 * 2, o):
                    acc[0] = bias[oc]
                    acc[1] = bias[oc]
                    for k in T.serial(c, annotations={DOT: 1}):
                        acc[0] = acc[0] + T.Cast("int32", xf[xoff(pp * 2) + k]) * T.Cast("int32", wf[oc * c + k])
                        acc[1] = acc[1] + T.Cast("int32", xf[xoff(pp * 2 + 1) + k]) * T.Cast("int32", wf[oc * c + k])
                    store(out, opix(pp * 2, oc), acc[0], mult[oc], shift[oc])
                    store(out, opix(pp * 2 + 1, oc), acc[1], mult[oc], shift[oc])
            for p in range(p2 * 2, npix):
                for oc in range(o):
                    acc[0] = bias[oc]
                    for k in T.serial(c, annotations={DOT: 1}):
                        acc[0] = acc[0] + T.Cast("int32", xf[xoff(p) + k]) * T.Cast("int32", wf[oc * c + k])
                    store(out, opix(p, oc), acc[0], mult[oc], shift[oc])

        return pointwise

    contiguous = dw == 1  # the taps of one kernel row and their channels are one run in x and in w

    def origin(p):
        return _pixel_origin(p, n, h, w, ho, wo, sh, sw, pt, pl)

    def xrow(p, r, s):  # index of x[b, y0 + r*dh, z0 + s*dw, 0]
        b, y, z = origin(p)
        return ((b * h + y + r * dh) * w + z + s * dw) * c

    rows, cols, interior = _window_taps(origin, kh, kw, dh, dw, h, w)

    @T.macro
    def mac(xf, wf, acc, p, oc, r, s0, s1, two):  # acc[0] (acc[1]) += x . w over taps (r, s0..s1) of channel oc (oc+1)
        if contiguous:
            for k in T.serial((s1 - s0) * c, annotations={DOT: 1}):
                acc[0] = acc[0] + T.Cast("int32", xf[xrow(p, r, s0) + k]) * T.Cast("int32", wf[oc * kk + (r * kw + s0) * c + k])
                if two:
                    acc[1] = acc[1] + T.Cast("int32", xf[xrow(p, r, s0) + k]) * T.Cast("int32", wf[oc * kk + kk + (r * kw + s0) * c + k])
        else:
            for s in range(s0, s1):
                for k in T.serial(c, annotations={DOT: 1}):
                    acc[0] = acc[0] + T.Cast("int32", xf[xrow(p, r, s) + k]) * T.Cast("int32", wf[oc * kk + (r * kw + s) * c + k])
                    if two:
                        acc[1] = acc[1] + T.Cast("int32", xf[xrow(p, r, s) + k]) * T.Cast("int32", wf[oc * kk + kk + (r * kw + s) * c + k])

    @T.macro
    def wsum(wf, acc, oc, r0, r1, s0, s1, two):  # acc[2] (acc[3]) += w over taps [r0, r1) x [s0, s1)
        for r in range(r0, r1):
            for k in range((s1 - s0) * c):
                acc[2] = acc[2] + T.Cast("int32", wf[oc * kk + (r * kw + s0) * c + k])
                if two:
                    acc[3] = acc[3] + T.Cast("int32", wf[oc * kk + kk + (r * kw + s0) * c + k])

    @T.macro
    def channels(xf, wf, out, bias, mult, shift, acc, p, oc, two):  # output pixel p, channel oc (and oc + 1)
        acc[0] = bias[oc]
        if two:
            acc[1] = bias[oc + 1]
        if interior(p):
            for r in range(kh):
                mac(xf, wf, acc, p, oc, r, 0, kw, two)
        else:
            acc[2] = 0
            acc[3] = 0
            for r in range(rows(p)[0], rows(p)[1]):
                mac(xf, wf, acc, p, oc, r, cols(p)[0], cols(p)[1], two)
            wsum(wf, acc, oc, 0, rows(p)[0], 0, kw, two)
            wsum(wf, acc, oc, rows(p)[1], kh, 0, kw, two)
            wsum(wf, acc, oc, rows(p)[0], rows(p)[1], 0, cols(p)[0], two)
            wsum(wf, acc, oc, rows(p)[0], rows(p)[1], cols(p)[1], kw, two)
            acc[0] = acc[0] + acc[2] * zp
            if two:
                acc[1] = acc[1] + acc[3] * zp
        store(out, opix(p, oc), acc[0], mult[oc], shift[oc])
        if two:
            store(out, opix(p, oc + 1), acc[1], mult[oc + 1], shift[oc + 1])

    def tap_inside(p, r, s):
        _, y, z = origin(p)
        return tirx.all(0 <= y + r * dh, y + r * dh < h, 0 <= z + s * dw, z + s * dw < w)

    @T.macro
    def gather(xf, col, p, q):  # col[q*kk ...]: the window of pixel p, in_zp where it lies in the padding
        if interior(p):
            for r in range(kh):
                for s in range(kw):
                    for k in range(c):
                        col[q * kk + (r * kw + s) * c + k] = xf[xrow(p, r, s) + k]
        else:
            for r in range(kh):
                for s in range(kw):
                    for k in range(c):
                        col[q * kk + (r * kw + s) * c + k] = T.if_then_else(tap_inside(p, r, s), xf[xrow(p, r, s) + k], T.int8(zp))

    @T.macro
    def tile2x2(xf, wf, out, bias, mult, shift, acc, p, oc):  # interior pixels p, p + 1 x channels oc, oc + 1
        acc[0] = bias[oc]
        acc[1] = bias[oc + 1]
        acc[2] = bias[oc]
        acc[3] = bias[oc + 1]
        for r in range(kh):
            if contiguous:
                for k in T.serial(kw * c, annotations={DOT: 1}):
                    acc[0] = acc[0] + T.Cast("int32", xf[xrow(p, r, 0) + k]) * T.Cast("int32", wf[oc * kk + r * kw * c + k])
                    acc[1] = acc[1] + T.Cast("int32", xf[xrow(p, r, 0) + k]) * T.Cast("int32", wf[oc * kk + kk + r * kw * c + k])
                    acc[2] = acc[2] + T.Cast("int32", xf[xrow(p + 1, r, 0) + k]) * T.Cast("int32", wf[oc * kk + r * kw * c + k])
                    acc[3] = acc[3] + T.Cast("int32", xf[xrow(p + 1, r, 0) + k]) * T.Cast("int32", wf[oc * kk + kk + r * kw * c + k])
            else:
                for s in range(kw):
                    for k in T.serial(c, annotations={DOT: 1}):
                        acc[0] = acc[0] + T.Cast("int32", xf[xrow(p, r, s) + k]) * T.Cast("int32", wf[oc * kk + (r * kw + s) * c + k])
                        acc[1] = acc[1] + T.Cast("int32", xf[xrow(p, r, s) + k]) * T.Cast("int32", wf[oc * kk + kk + (r * kw + s) * c + k])
                        acc[2] = acc[2] + T.Cast("int32", xf[xrow(p + 1, r, s) + k]) * T.Cast("int32", wf[oc * kk + (r * kw + s) * c + k])
                        acc[3] = acc[3] + T.Cast("int32", xf[xrow(p + 1, r, s) + k]) * T.Cast("int32", wf[oc * kk + kk + (r * kw + s) * c + k])
        store(out, opix(p, oc), acc[0], mult[oc], shift[oc])
        store(out, opix(p, oc + 1), acc[1], mult[oc + 1], shift[oc + 1])
        store(out, opix(p + 1, oc), acc[2], mult[oc], shift[oc])
        store(out, opix(p + 1, oc + 1), acc[3], mult[oc + 1], shift[oc + 1])

    if kw * c < 16 and 2 * kk <= COLUMN_BYTES:  # only the prim_func returned is parsed
        @T.prim_func
        def conv_columns(x: T.Buffer((n, h, w, c), "int8"), wt: T.Buffer((o, kh, kw, c), "int8"), bias: T.Buffer((o,), "int32"),
                         mult: T.Buffer((o,), "int32"), shift: T.Buffer((o,), "int32"), out: T.Buffer((n, ho, wo, o), "int8")):
            xf = T.decl_buffer((n * h * w * c,), "int8", data=x.data)
            wf = T.decl_buffer((o * kk,), "int8", data=wt.data)
            acc = T.decl_buffer((4,), "int32")
            col = T.decl_buffer((2 * kk,), "int8")
            for pp in range((npix + 1) // 2):
                gather(xf, col, pp * 2, 0)
                if pp * 2 + 1 < npix:
                    gather(xf, col, pp * 2 + 1, 1)
                    for oo in range(o2):
                        acc[0] = bias[oo * 2]
                        acc[1] = bias[oo * 2 + 1]
                        acc[2] = bias[oo * 2]
                        acc[3] = bias[oo * 2 + 1]
                        for k in T.serial(kk, annotations={DOT: 1}):
                            acc[0] = acc[0] + T.Cast("int32", col[k]) * T.Cast("int32", wf[oo * 2 * kk + k])
                            acc[1] = acc[1] + T.Cast("int32", col[k]) * T.Cast("int32", wf[oo * 2 * kk + kk + k])
                            acc[2] = acc[2] + T.Cast("int32", col[kk + k]) * T.Cast("int32", wf[oo * 2 * kk + k])
                            acc[3] = acc[3] + T.Cast("int32", col[kk + k]) * T.Cast("int32", wf[oo * 2 * kk + kk + k])
                        store(out, opix(pp * 2, oo * 2), acc[0], mult[oo * 2], shift[oo * 2])
                        store(out, opix(pp * 2, oo * 2 + 1), acc[1], mult[oo * 2 + 1], shift[oo * 2 + 1])
                        store(out, opix(pp * 2 + 1, oo * 2), acc[2], mult[oo * 2], shift[oo * 2])
                        store(out, opix(pp * 2 + 1, oo * 2 + 1), acc[3], mult[oo * 2 + 1], shift[oo * 2 + 1])
                    for oc in range(o2 * 2, o):
                        acc[0] = bias[oc]
                        acc[1] = bias[oc]
                        for k in T.serial(kk, annotations={DOT: 1}):
                            acc[0] = acc[0] + T.Cast("int32", col[k]) * T.Cast("int32", wf[oc * kk + k])
                            acc[1] = acc[1] + T.Cast("int32", col[kk + k]) * T.Cast("int32", wf[oc * kk + k])
                        store(out, opix(pp * 2, oc), acc[0], mult[oc], shift[oc])
                        store(out, opix(pp * 2 + 1, oc), acc[1], mult[oc], shift[oc])
                else:
                    for oc in range(o):
                        acc[0] = bias[oc]
                        for k in T.serial(kk, annotations={DOT: 1}):
                            acc[0] = acc[0] + T.Cast("int32", col[k]) * T.Cast("int32", wf[oc * kk + k])
                        store(out, opix(pp * 2, oc), acc[0], mult[oc], shift[oc])

        return conv_columns

    @T.prim_func
    def conv(x: T.Buffer((n, h, w, c), "int8"), wt: T.Buffer((o, kh, kw, c), "int8"), bias: T.Buffer((o,), "int32"),
             mult: T.Buffer((o,), "int32"), shift: T.Buffer((o,), "int32"), out: T.Buffer((n, ho, wo, o), "int8")):
        xf = T.decl_buffer((n * h * w * c,), "int8", data=x.data)
        wf = T.decl_buffer((o * kk,), "int8", data=wt.data)
        acc = T.decl_buffer((4,), "int32")
        for pp in range(npix // 2):  # two pixels per pass where both are inside
            if interior(pp * 2) and interior(pp * 2 + 1):
                for oo in range(o2):
                    tile2x2(xf, wf, out, bias, mult, shift, acc, pp * 2, oo * 2)
                for oc in range(o2 * 2, o):
                    channels(xf, wf, out, bias, mult, shift, acc, pp * 2, oc, False)
                    channels(xf, wf, out, bias, mult, shift, acc, pp * 2 + 1, oc, False)
            else:
                for q in range(2):
                    for oo in range(o2):
                        channels(xf, wf, out, bias, mult, shift, acc, pp * 2 + q, oo * 2, True)
                    for oc in range(o2 * 2, o):
                        channels(xf, wf, out, bias, mult, shift, acc, pp * 2 + q, oc, False)
        for t in range(npix % 2):  # the odd last pixel, in a loop from 0: written as a loop from npix - 1, the
            # lowering (loop canonicalization, it seems) left its padded taps' bounds on the unshifted loop
            # variable, reading one input row too far (tests/test_kernels_c.py's SAME cases with 25 and 35 pixels)
            for oo in range(o2):
                channels(xf, wf, out, bias, mult, shift, acc, npix - 1 + t, oo * 2, True)
            for oc in range(o2 * 2, o):
                channels(xf, wf, out, bias, mult, shift, acc, npix - 1 + t, oc, False)

    return conv


def depthwise_conv2d_fast(x_shape, w_shape, in_zp, stride, dilation, pad, out_shape, rq: Requant):
    """DEPTHWISE_CONV_2D with the input zero point folded into ``bias`` (folded_bias over the taps).
    Parameters: x, w [KH, KW, C*M], bias, mult, shift, out. Interior pixels run the taps unrolled with no
    tests; border pixels run over their valid taps and add in_zp * w for the others."""
    from tvm.script import tirx as T

    n, h, w, c = (int(v) for v in x_shape)
    kh, kw, cm = (int(v) for v in w_shape)
    _, ho, wo, _ = (int(v) for v in out_shape)
    sh, sw = (int(v) for v in stride)
    dh, dw = (int(v) for v in dilation)
    pt, pl = int(pad[0]), int(pad[1])
    zp = int(in_zp)
    mul = cm // c
    npix = n * ho * wo
    store = _requant_macro(rq, True)

    def opix(p, oc):  # out[b, i, j, oc] of flat output pixel p: the kernel stores to its output parameter itself
        if n == 1:
            return (0, tirx.floordiv(p, wo), tirx.floormod(p, wo), oc)
        return (tirx.floordiv(p, ho * wo), tirx.floormod(tirx.floordiv(p, wo), ho), tirx.floormod(p, wo), oc)
    unroll = kh * kw <= 16
    c4 = cm // 4 if mul == 1 else 0  # channels taken 4 at a time (one word of x and of w per tap)
    taps = T.unroll if unroll else T.serial

    def origin(p):
        return _pixel_origin(p, n, h, w, ho, wo, sh, sw, pt, pl)

    def xat(p, r, s, oc):  # index of x[b, y0 + r*dh, z0 + s*dw, oc // mul]
        b, y, z = origin(p)
        return ((b * h + y + r * dh) * w + z + s * dw) * c + (tirx.floordiv(oc, mul) if mul > 1 else oc)

    rows, cols, interior = _window_taps(origin, kh, kw, dh, dw, h, w)

    def tap_inside(p, r, s):
        _, y, z = origin(p)
        return tirx.all(0 <= y + r * dh, y + r * dh < h, 0 <= z + s * dw, z + s * dw < w)

    @T.macro
    def wsum(wf, acc, oc, r0, r1, s0, s1):  # acc[1] += w over taps [r0, r1) x [s0, s1)
        for r in range(r0, r1):
            for s in range(s0, s1):
                acc[1] = acc[1] + T.Cast("int32", wf[(r * kw + s) * cm + oc])

    @T.prim_func
    def depthwise(x: T.Buffer((n, h, w, c), "int8"), wt: T.Buffer((kh, kw, cm), "int8"), bias: T.Buffer((cm,), "int32"),
                  mult: T.Buffer((cm,), "int32"), shift: T.Buffer((cm,), "int32"), out: T.Buffer((n, ho, wo, cm), "int8")):
        xf = T.decl_buffer((n * h * w * c,), "int8", data=x.data)
        wf = T.decl_buffer((kh * kw * cm,), "int8", data=wt.data)
        acc = T.decl_buffer((4,), "int32")
        for p in range(npix):
            if interior(p):
                for oq in range(c4):
                    for i in T.unroll(4):
                        acc[i] = bias[oq * 4 + i]
                    for r in taps(kh):
                        for s in taps(kw):
                            for i in T.serial(4, annotations={LANES: 1}):
                                acc[i] = acc[i] + T.Cast("int32", xf[xat(p, r, s, oq * 4) + i]) * T.Cast("int32", wf[(r * kw + s) * cm + oq * 4 + i])
                    for i in T.unroll(4):
                        store(out, opix(p, oq * 4 + i), acc[i], mult[oq * 4 + i], shift[oq * 4 + i])
                for oc in range(c4 * 4, cm):
                    acc[0] = bias[oc]
                    if unroll:
                        for r in T.unroll(kh):
                            for s in T.unroll(kw):
                                acc[0] = acc[0] + T.Cast("int32", xf[xat(p, r, s, oc)]) * T.Cast("int32", wf[(r * kw + s) * cm + oc])
                    else:
                        for r in range(kh):
                            for s in range(kw):
                                acc[0] = acc[0] + T.Cast("int32", xf[xat(p, r, s, oc)]) * T.Cast("int32", wf[(r * kw + s) * cm + oc])
                    store(out, opix(p, oc), acc[0], mult[oc], shift[oc])
            else:
                for oq in range(c4):  # taps in the padding add in_zp * w
                    for i in T.unroll(4):
                        acc[i] = bias[oq * 4 + i]
                    for r in taps(kh):
                        for s in taps(kw):
                            if tap_inside(p, r, s):
                                for i in T.serial(4, annotations={LANES: 1}):
                                    acc[i] = acc[i] + T.Cast("int32", xf[xat(p, r, s, oq * 4) + i]) * T.Cast("int32", wf[(r * kw + s) * cm + oq * 4 + i])
                            else:
                                for i in T.unroll(4):
                                    acc[i] = acc[i] + T.Cast("int32", wf[(r * kw + s) * cm + oq * 4 + i]) * zp
                    for i in T.unroll(4):
                        store(out, opix(p, oq * 4 + i), acc[i], mult[oq * 4 + i], shift[oq * 4 + i])
                for oc in range(c4 * 4, cm):
                    acc[0] = bias[oc]
                    acc[1] = 0
                    for r in range(rows(p)[0], rows(p)[1]):
                        for s in range(cols(p)[0], cols(p)[1]):
                            acc[0] = acc[0] + T.Cast("int32", xf[xat(p, r, s, oc)]) * T.Cast("int32", wf[(r * kw + s) * cm + oc])
                    wsum(wf, acc, oc, 0, rows(p)[0], 0, kw)
                    wsum(wf, acc, oc, rows(p)[1], kh, 0, kw)
                    wsum(wf, acc, oc, rows(p)[0], rows(p)[1], 0, cols(p)[0])
                    wsum(wf, acc, oc, rows(p)[0], rows(p)[1], cols(p)[1], kw)
                    store(out, opix(p, oc), acc[0] + acc[1] * zp, mult[oc], shift[oc])

    return depthwise


def fully_connected_fast(x_shape, w_shape, multiplier, shift, rq: Requant):
    """FULLY_CONNECTED with symmetric weights and the input zero point folded into ``bias``
    (folded_bias over K): four rows per pass, each input byte loaded once for the four. ``multiplier`` /
    ``shift`` as in fully_connected (None: per-channel ``mult``/``shift`` parameters after the bias)."""
    from tvm.script import tirx as T

    batch, k = (int(v) for v in x_shape)
    o = int(w_shape[0])
    o4 = o // 4
    per_channel = multiplier is None
    store = _requant_macro(rq, per_channel, 0 if per_channel else int(multiplier), 0 if per_channel else int(shift))

    @T.macro
    def rows4(xf, wf, out, bias, mult, shift, acc, b, oc):
        for i in T.unroll(4):
            acc[i] = bias[oc + i]
        for kk in T.serial(k, annotations={DOT: 1}):
            acc[0] = acc[0] + T.Cast("int32", xf[b * k + kk]) * T.Cast("int32", wf[oc * k + kk])
            acc[1] = acc[1] + T.Cast("int32", xf[b * k + kk]) * T.Cast("int32", wf[(oc + 1) * k + kk])
            acc[2] = acc[2] + T.Cast("int32", xf[b * k + kk]) * T.Cast("int32", wf[(oc + 2) * k + kk])
            acc[3] = acc[3] + T.Cast("int32", xf[b * k + kk]) * T.Cast("int32", wf[(oc + 3) * k + kk])
        for i in T.unroll(4):
            if per_channel:
                store(out, (b, oc + i), acc[i], mult[oc + i], shift[oc + i])
            else:
                store(out, (b, oc + i), acc[i], 0, 0)

    @T.macro
    def row1(xf, wf, out, bias, mult, shift, acc, b, oc):
        acc[0] = bias[oc]
        for kk in T.serial(k, annotations={DOT: 1}):
            acc[0] = acc[0] + T.Cast("int32", xf[b * k + kk]) * T.Cast("int32", wf[oc * k + kk])
        if per_channel:
            store(out, (b, oc), acc[0], mult[oc], shift[oc])
        else:
            store(out, (b, oc), acc[0], 0, 0)

    if per_channel:
        @T.prim_func
        def fc(x: T.Buffer((batch, k), "int8"), wt: T.Buffer((o, k), "int8"), bias: T.Buffer((o,), "int32"),
               mult: T.Buffer((o,), "int32"), shift: T.Buffer((o,), "int32"), out: T.Buffer((batch, o), "int8")):
            xf = T.decl_buffer((batch * k,), "int8", data=x.data)
            wf = T.decl_buffer((o * k,), "int8", data=wt.data)
            acc = T.decl_buffer((4,), "int32")
            for b in range(batch):
                for oo in range(o4):
                    rows4(xf, wf, out, bias, mult, shift, acc, b, oo * 4)
                for oc in range(o4 * 4, o):
                    row1(xf, wf, out, bias, mult, shift, acc, b, oc)
        return fc

    @T.prim_func
    def fc_tensor(x: T.Buffer((batch, k), "int8"), wt: T.Buffer((o, k), "int8"), bias: T.Buffer((o,), "int32"),
                  out: T.Buffer((batch, o), "int8")):
        xf = T.decl_buffer((batch * k,), "int8", data=x.data)
        wf = T.decl_buffer((o * k,), "int8", data=wt.data)
        acc = T.decl_buffer((4,), "int32")
        for b in range(batch):
            for oo in range(o4):
                rows4(xf, wf, out, bias, bias, bias, acc, b, oo * 4)
            for oc in range(o4 * 4, o):
                row1(xf, wf, out, bias, bias, bias, acc, b, oc)
    return fc_tensor
