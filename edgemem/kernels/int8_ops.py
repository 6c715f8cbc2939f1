"""Integer kernels with TFLite Micro's arithmetic, written as TVM tensor expressions.

Each builder returns a scheduled TIR PrimFunc whose parameters are (inputs..., constants...,
output). Padding is an index test inside the reduction (no padded copy of the input) and every
reduction is computed at its output element, so the int32 accumulator is a scalar: kernels need
no scratch RAM beyond a few registers.
"""

from __future__ import annotations

from dataclasses import dataclass

from tvm import te, tirx
import tvm.s_tir

from .fixed_point import clamp_to_int8, multiply_by_quantized_multiplier


@dataclass(frozen=True)
class Requant:
    """Output side of an integer op: zero point and the clamp of its fused activation."""

    out_zp: int
    act_min: int
    act_max: int


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


def fully_connected(x_shape, w_shape, has_bias, in_zp, w_zp, multiplier, shift, rq: Requant):
    """FULLY_CONNECTED: x [B, K] int8, weights [O, K] int8 (TFLite's layout), per-tensor multiplier."""
    batch, k = x_shape
    o = w_shape[0]
    x = te.placeholder(x_shape, "int8", name="x")
    wt = te.placeholder(w_shape, "int8", name="w")
    bias = te.placeholder((o,), "int32", name="bias") if has_bias else None
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
        v = multiply_by_quantized_multiplier(v, multiplier, shift) + rq.out_zp
        return clamp_to_int8(v, rq.act_min, rq.act_max)

    out = te.compute((batch, o), out_fn, name="out")
    params = [x, wt] + ([bias] if has_bias else []) + [out]
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


def softmax(shape, in_scale, in_zp, beta, out_scale, out_zp):
    """SOFTMAX over the last axis of an int8 tensor of any rank, computed in float32.

    TFLM uses gemmlowp fixed-point exp here; this float form stays within 1 LSB of it, which is
    what the acceptance allows for SOFTMAX.
    """
    shape = tuple(int(d) for d in shape)
    lead, depth = shape[:-1], shape[-1]
    x = te.placeholder(shape, "int8", name="x")
    rk = te.reduce_axis((0, depth), "rk")
    mx = te.compute(lead, lambda *r: te.max(x[r + (rk,)], axis=rk), name="mx")
    rk2 = te.reduce_axis((0, depth), "rk2")
    scale = float(in_scale) * float(beta)

    def e(r, k):
        d = (x[r + (k,)].astype("int32") - mx[r].astype("int32")).astype("float32")
        return tirx.exp(d * tirx.const(scale, "float32"))

    denom = te.compute(lead, lambda *r: te.sum(e(r, rk2), axis=rk2), name="denom")

    def out_fn(*idx):
        r, k = idx[:-1], idx[-1]
        p = e(r, k) / denom[r]
        q = tirx.round(p * tirx.const(1.0 / float(out_scale), "float32")).astype("int32") + out_zp
        return clamp_to_int8(q, -128, 127)

    out = te.compute(shape, out_fn, name="out")
    sch = tvm.s_tir.Schedule(te.create_prim_func([x, out]))
    if lead:
        # Row statistics are scalars computed at their row.
        row_loop = sch.get_loops(sch.get_sblock("out"))[-2]
        sch.compute_at(sch.get_sblock("denom"), row_loop)
        sch.compute_at(sch.get_sblock("mx"), sch.get_loops(sch.get_sblock("denom"))[len(lead) - 1])
    return sch.mod["main"]
