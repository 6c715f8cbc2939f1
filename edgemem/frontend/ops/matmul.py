"""matmul operators (see registry.py for how a lowering is written).

BATCH_MATMUL (int8, float32): both operands activations or one of them constant, adj_x / adj_y, batch
dimensions broadcast (ranks 2..5). TFLM's int8 form: per-tensor operands, the multiplier of
float32(lhs_scale * rhs_scale) / output_scale in double (GetQuantizedConvolutionMultipler), no fused activation.
TVM's converter has no broadcast and fails on a constant operand, so the float form is edgemem's kernel too.
"""

from __future__ import annotations

import numpy as np

from ...kernels import kernel_attrs
from ...kernels import matmul as kernels
from ...kernels.fixed_point import conv_multipliers, fully_connected_multiplier, quantize_multiplier
from .registry import OpContext, lowering


def _operand(ctx: OpContext, t):
    """A constant as its numpy value (a flash constant), an activation as its Relax expression."""
    value = ctx.value(t)
    return value if value is not None else ctx.expr(t)


@lowering("BATCH_MATMUL", types=("int8", "float32"))
def batch_matmul(ctx: OpContext):
    import tflite

    lhs, rhs = ctx.inputs[0], ctx.inputs[1]
    out = ctx.outputs[0]
    opts = ctx.options(tflite.BatchMatMulOptions)
    adj_x = bool(opts.AdjX()) if opts is not None else False
    adj_y = bool(opts.AdjY()) if opts is not None else False
    lhs_shape, rhs_shape = ctx.shape(lhs), ctx.shape(rhs)
    dtype = ctx.dtype(lhs)
    if ctx.dtype(rhs) != dtype or ctx.dtype(out) != dtype:
        ctx.refuse(f"its operands are {ctx.dtype(lhs)} and {ctx.dtype(rhs)} with a {ctx.dtype(out)} output; TFLite's BATCH_MATMUL takes one type.")
    if not (2 <= len(lhs_shape) <= 5 and 2 <= len(rhs_shape) <= 5):
        ctx.refuse(f"its operands have ranks {len(lhs_shape)} and {len(rhs_shape)}; TFLite's BATCH_MATMUL takes ranks 2 to 5.")
    try:
        out_shape, m, n, k = kernels.batch_matmul_shapes(lhs_shape, rhs_shape, adj_x, adj_y)
    except ValueError as exc:
        ctx.refuse(f"{exc} (shapes {list(lhs_shape)} and {list(rhs_shape)}, adj_x={adj_x}, adj_y={adj_y}).")
    if tuple(out_shape) != ctx.shape(out):
        ctx.refuse(f"its output shape {list(ctx.shape(out))} is not the product's {list(out_shape)}.")
    quant = None
    if dtype == "int8":
        lhs_scale, lhs_zp = ctx.scale_zp(lhs, "lhs")
        rhs_scale, rhs_zp = ctx.scale_zp(rhs, "rhs")
        out_scale, out_zp = ctx.scale_zp(out, "output")
        multiplier, shift = fully_connected_multiplier(lhs_scale, rhs_scale, out_scale)
        quant = (lhs_zp, rhs_zp, multiplier, shift, out_zp)
    prim = kernels.batch_matmul(lhs_shape, rhs_shape, adj_x, adj_y, dtype, quant)
    macs = 1
    for d in out_shape:
        macs *= d
    return ctx.emit("BATCH_MATMUL", prim, [_operand(ctx, lhs), _operand(ctx, rhs)], out_shape, dtype, macs * k)


_FLOAT_RANGES = {"NONE": None, "RELU": (0.0, 3.4028234663852886e38), "RELU6": (0.0, 6.0), "RELU_N1_TO_1": (-1.0, 1.0)}
_ACTS = {0: "NONE", 1: "RELU", 2: "RELU_N1_TO_1", 3: "RELU6"}


@lowering("TRANSPOSE_CONV", types=("int8", "float32"))
def transpose_conv(ctx: OpContext):
    """TRANSPOSE_CONV (inputs: output shape, weights [O, KH, KW, I], input, optional bias): TFLM's reference
    kernel. int8: per-channel (or per-tensor) weights, multipliers as a conv's (double); float32: TVM's
    converter imports it, but nothing lowers conv2d_transpose to a kernel."""
    import tflite

    from ...kernels.fixed_point import activation_range

    w_t, x_t, out_t = ctx.inputs[1], ctx.inputs[2], ctx.outputs[0]
    has_bias = ctx.present(3)
    opts = ctx.options(tflite.TransposeConvOptions)
    same = opts is None or opts.Padding() == tflite.Padding.SAME
    stride = (opts.StrideH(), opts.StrideW()) if opts is not None else (1, 1)
    act = _ACTS.get(opts.FusedActivationFunction() if opts is not None else 0)
    if act is None:
        ctx.refuse(f"its fused activation {opts.FusedActivationFunction()} is not one TFLite's TRANSPOSE_CONV applies.")
    x_shape, w_shape, out_shape = ctx.shape(x_t), ctx.shape(w_t), ctx.shape(out_t)
    if len(x_shape) != 4 or len(w_shape) != 4 or len(out_shape) != 4:
        ctx.refuse(f"its input, weights and output have ranks {len(x_shape)}, {len(w_shape)}, {len(out_shape)}; TFLite's TRANSPOSE_CONV takes 4-D NHWC tensors.")
    if w_shape[3] != x_shape[3] or w_shape[0] != out_shape[3] or x_shape[0] != out_shape[0]:
        ctx.refuse(f"its shapes do not match: input {list(x_shape)}, weights {list(w_shape)}, output {list(out_shape)}.")
    w = ctx.value(w_t)
    if w is None:
        ctx.refuse("its weights are not a constant; edgemem's TRANSPOSE_CONV takes constant weights.")
    pad = tuple(kernels.transpose_conv_padding(out_shape[i + 1], x_shape[i + 1], w_shape[i + 1], stride[i], same) for i in range(2))
    dtype = ctx.dtype(x_t)
    args = [ctx.expr(x_t), w]
    if has_bias:
        b = ctx.value(ctx.inputs[3])
        if b is None:
            ctx.refuse("its bias is not a constant.")
        args.append(b.reshape(-1).astype(np.int32 if dtype == "int8" else np.float32))
    macs = int(np.prod(x_shape)) * w_shape[0] * w_shape[1] * w_shape[2]
    if dtype == "float32":
        prim = kernels.transpose_conv(x_shape, w_shape, out_shape, stride, pad, has_bias, dtype, float_range=_FLOAT_RANGES[act])
        return ctx.emit("TRANSPOSE_CONV", prim, args, out_shape, dtype, macs)
    in_scale, in_zp = ctx.scale_zp(x_t, "input")
    out_scale, out_zp = ctx.scale_zp(out_t, "output")
    wq = ctx.quant(w_t)
    if wq is None or ctx.dtype(w_t) != "int8" or wq[0].size not in (1, w_shape[0]):
        ctx.refuse(f"its weights are {ctx.dtype(w_t)} with {0 if wq is None else wq[0].size} scales; TFLite's int8 TRANSPOSE_CONV takes int8 weights with one scale or one per output channel.")
    mult, shift = conv_multipliers(in_scale, np.broadcast_to(wq[0], (w_shape[0],)), out_scale)
    act_min, act_max = activation_range(act, out_scale, out_zp)
    prim = kernels.transpose_conv(x_shape, w_shape, out_shape, stride, pad, has_bias, dtype, quant=(in_zp, out_zp, act_min, act_max))
    return ctx.emit("TRANSPOSE_CONV", prim, args + [mult, shift], out_shape, dtype, macs)


def _softmax_beta(ctx: OpContext) -> float:
    import tflite

    opts = ctx.options(tflite.SoftmaxOptions)
    return float(opts.Beta()) if opts is not None else 1.0


@lowering("SOFTMAX", types=("int8", "float32"))
def softmax(ctx: OpContext):
    """SOFTMAX over the last axis, any beta. int8: TFLM's fixed-point reference (kernels/matmul.softmax_int8;
    integerize's float form was within one step of it only), with an int8 or an int16 output. float32: TVM's softmax of beta * x."""
    from tvm import relax

    x, y = ctx.inputs[0], ctx.outputs[0]
    beta = _softmax_beta(ctx)
    shape = ctx.shape(x)
    if not shape:
        ctx.refuse("its input is a scalar; SOFTMAX needs at least one axis.")
    if ctx.dtype(x) == "float32":
        data = ctx.expr(x)
        if beta != 1.0:
            data = ctx.conv.bb.emit(relax.op.multiply(data, relax.const(np.float32(beta))))
        return ctx.conv.bb.emit(relax.op.nn.softmax(data, axis=-1))
    in_scale, _ = ctx.scale_zp(x, "input")
    out_scale, out_zp = ctx.scale_zp(y, "output")
    out_dtype = ctx.dtype(y)
    # TFLM's int8 SOFTMAX writes int8 (1/256, -128) or int16 (1/65536 within 0.1%, -32768: the mixed form)
    int8_out = out_dtype == "int8" and out_zp == -128 and np.float32(out_scale) == np.float32(1.0 / 256)
    int16_out = out_dtype == "int16" and out_zp == -32768 and \
        abs(np.float32(out_scale) - np.float32(1.0 / 65536)) <= np.float32(0.001) * np.float32(1.0 / 65536)
    if not (int8_out or int16_out):
        ctx.refuse(f"its output is {out_dtype} with scale {out_scale} and zero point {out_zp}; TFLite's int8 SOFTMAX writes int8 with "
                   "1/256 and -128, or int16 with 1/65536 and -32768.")
    depth = shape[-1]
    rows = int(np.prod(shape[:-1])) if len(shape) > 1 else 1
    table, _ = kernels.softmax_exp_table(in_scale, beta)
    flat = ctx.reshape(ctx.expr(x), (rows, depth))
    out = ctx.emit("SOFTMAX", kernels.softmax_int8(rows, depth, out_dtype), [flat, table], (rows, depth), out_dtype)
    return ctx.reshape(out, shape)


@lowering("SOFTMAX", types=("int16",))
def softmax_int16(ctx: OpContext):
    """int16 SOFTMAX over the last axis, any beta: TFLM's SoftmaxInt16 (zero points 0, output scale 2^-15),
    the input multiplier QuantizeMultiplier(double(s_in) * beta / (10 / 65535)) and the two 513-entry tables of
    its Prepare (kernels/unary16.py), 2 KB of flash."""
    from ...kernels import unary16 as K16

    x, y = ctx.inputs[0], ctx.outputs[0]
    shape = ctx.shape(x)
    if not shape:
        ctx.refuse("its input is a scalar; SOFTMAX needs at least one axis.")
    in_scale, in_zp = ctx.scale_zp(x, "input")
    out_scale, out_zp = ctx.scale_zp(y, "output")
    if ctx.dtype(y) != "int16" or in_zp != 0 or out_zp != 0 or abs(np.float32(out_scale) - np.float32(1 / 32768)) > np.float32(0.001 / 32768):
        ctx.refuse(f"its output is {ctx.dtype(y)} with scale {out_scale:g} and zero points {in_zp} (input), {out_zp} (output); "
                   "TFLite Micro's int16 SOFTMAX takes zero points 0 and writes int16 with scale 1/32768.")
    beta = float(np.float32(_softmax_beta(ctx)))
    multiplier, shift = quantize_multiplier(float(np.float32(in_scale)) * beta / (10.0 / 65535.0))
    depth = shape[-1]
    rows = int(np.prod(shape[:-1])) if len(shape) > 1 else 1
    exp_lut = K16.shared_table(ctx.conv, "softmax_exp_i16", lambda: K16.softmax_int16_luts()[0])
    recip_lut = K16.shared_table(ctx.conv, "softmax_recip_i16", lambda: K16.softmax_int16_luts()[1])
    flat = ctx.reshape(ctx.expr(x), (rows, depth))
    out = ctx.emit("SOFTMAX", K16.softmax_int16(rows, depth, multiplier, shift), [flat, exp_lut, recip_lut], (rows, depth), "int16")
    return ctx.reshape(out, shape)


@lowering("L2_NORMALIZATION", types=("int8",))
def l2_normalization(ctx: OpContext):
    """int8 L2_NORMALIZATION over the last axis: TFLM's integer reference (kernels/matmul.l2_normalization_int8).
    float32 stays with TVM's converter (within tolerance of TFLM)."""
    import tflite

    x, y = ctx.inputs[0], ctx.outputs[0]
    opts = ctx.options(tflite.L2NormOptions)
    if opts is not None and opts.FusedActivationFunction() != 0:
        ctx.refuse("it has a fused activation; TFLite's L2_NORMALIZATION takes none.")
    shape = ctx.shape(x)
    if not shape or len(shape) > 4:
        ctx.refuse(f"its input has rank {len(shape)}; TFLite's L2_NORMALIZATION takes ranks 1 to 4.")
    _, in_zp = ctx.scale_zp(x, "input")
    if ctx.dtype(y) != "int8":
        ctx.refuse(f"its output is {ctx.dtype(y)}; the int8 L2_NORMALIZATION writes int8.")
    depth = shape[-1]
    rows = int(np.prod(shape[:-1])) if len(shape) > 1 else 1
    flat = ctx.reshape(ctx.expr(x), (rows, depth))
    out = ctx.emit("L2_NORMALIZATION", kernels.l2_normalization_int8(rows, depth, in_zp), [flat], (rows, depth), "int8")
    return ctx.reshape(out, shape)


@lowering("LOG_SOFTMAX", types=("int8",))
def log_softmax(ctx: OpContext):
    """int8 LOG_SOFTMAX over the last axis: TFLM's fixed-point reference (kernels/matmul.log_softmax_int8).
    float32 stays with TVM's converter (within tolerance of TFLM)."""
    x, y = ctx.inputs[0], ctx.outputs[0]
    shape = ctx.shape(x)
    if not shape:
        ctx.refuse("its input is a scalar; LOG_SOFTMAX needs at least one axis.")
    in_scale, _ = ctx.scale_zp(x, "input")
    out_scale, out_zp = ctx.scale_zp(y, "output")
    if ctx.dtype(y) != "int8" or out_zp != 127 or np.float32(out_scale) != np.float32(16.0 / 256):
        ctx.refuse(f"its output is {ctx.dtype(y)} with scale {out_scale} and zero point {out_zp}; TFLite's int8 LOG_SOFTMAX writes int8 with 16/256 and 127.")
    depth = shape[-1]
    rows = int(np.prod(shape[:-1])) if len(shape) > 1 else 1
    t = kernels.log_softmax_tables(in_scale)
    prim = kernels.log_softmax_int8(rows, depth, t["diff_min"], t["reverse"], t["reverse_shift"])
    flat = ctx.reshape(ctx.expr(x), (rows, depth))
    out = ctx.emit("LOG_SOFTMAX", prim, [flat, t["q5"], t["exp"]], (rows, depth), "int8")
    return ctx.reshape(out, shape)


@lowering("SVDF", types=("int8", "float32"))
def svdf(ctx: OpContext):
    """SVDF with its activation state as an edgemem state tensor (kept across invocations outside the arena,
    reset to TFLM's values: the zero point for an int8 state, else 0). int8: TFLM's integer reference (int16 or
    int8 state and time weights; multipliers from float32 scale products, as TFLM's Prepare; no fused
    activation, TFLM's integer kernel applies none); float32: TFLM's float reference with its activation."""
    import tflite

    x_t, wf_t, wt_t, st_t, y_t = ctx.inputs[0], ctx.inputs[1], ctx.inputs[2], ctx.inputs[4] if ctx.present(4) else None, ctx.outputs[0]
    if st_t is None or not ctx.present(2):
        ctx.refuse("it has no activation state or time weights.")
    opts = ctx.options(tflite.SVDFOptions)
    rank = int(opts.Rank()) if opts is not None else 1
    act = _ACTS.get(opts.FusedActivationFunction() if opts is not None else 0)
    x_shape, wf_shape, wt_shape = ctx.shape(x_t), ctx.shape(wf_t), ctx.shape(wt_t)
    if len(x_shape) != 2 or len(wf_shape) != 2 or len(wt_shape) != 2:
        ctx.refuse(f"its input and weights have ranks {len(x_shape)}, {len(wf_shape)}, {len(wt_shape)}; TFLite's SVDF takes 2-D ones.")
    batch, n_input = x_shape
    n_filter, n_memory = wt_shape
    if rank < 1 or n_filter % rank or wf_shape != (n_filter, n_input) or ctx.shape(st_t) != (batch, n_filter * n_memory) \
            or ctx.shape(y_t) != (batch, n_filter // rank):
        ctx.refuse(f"its shapes do not match: input {list(x_shape)}, weights {list(wf_shape)} and {list(wt_shape)}, state {list(ctx.shape(st_t))}, output {list(ctx.shape(y_t))}, rank {rank}.")
    wf, wt = ctx.value(wf_t), ctx.value(wt_t)
    if wf is None or wt is None:
        ctx.refuse("its weights are not constants.")
    if ctx.value(st_t) is not None:
        ctx.refuse("its activation state is a constant; TFLite's SVDF state is a variable tensor.")
    n_unit = n_filter // rank
    dtype = ctx.dtype(x_t)
    bias = ctx.value(ctx.inputs[3]) if ctx.present(3) else None
    if ctx.present(3) and bias is None:
        ctx.refuse("its bias is not a constant.")
    state_dtype = ctx.dtype(st_t)
    if dtype == "float32":
        if act is None:
            ctx.refuse(f"its fused activation {opts.FusedActivationFunction()} is not one edgemem knows.")
        prim = kernels.svdf(batch, n_input, n_filter, n_memory, rank, "float32", float_range=_FLOAT_RANGES[act])
        b = np.zeros(n_unit, np.float32) if bias is None else bias.reshape(-1).astype(np.float32)
        state0 = kernels.svdf_initial_state(batch, n_filter * n_memory, "float32", 0)
        args = [ctx.expr(x_t), wf.astype(np.float32), wt.astype(np.float32), b, state0]
    else:
        if bias is None:
            ctx.refuse("it has no bias; TFLM's int8 SVDF requires one.")
        if state_dtype not in ("int8", "int16") or ctx.dtype(wt_t) not in ("int8", "int16") or ctx.dtype(wf_t) != "int8":
            ctx.refuse(f"its feature weights, time weights and state are {ctx.dtype(wf_t)}, {ctx.dtype(wt_t)}, {state_dtype}; TFLite's int8 SVDF takes int8 feature weights and int8 or int16 time weights and state.")
        in_s, in_zp = ctx.scale_zp(x_t, "input")
        wf_s, _ = ctx.scale_zp(wf_t, "feature weights")
        wt_s, _ = ctx.scale_zp(wt_t, "time weights")
        st_s, st_zp = ctx.scale_zp(st_t, "activation state")
        out_s, out_zp = ctx.scale_zp(y_t, "output")
        f32 = np.float32
        m1, s1 = quantize_multiplier(float(f32(f32(in_s) * f32(wf_s)) / f32(st_s)))
        m2, s2 = quantize_multiplier(float(f32(f32(st_s) * f32(wt_s)) / f32(out_s)))
        prim = kernels.svdf(batch, n_input, n_filter, n_memory, rank, "int8", state_dtype, ctx.dtype(wt_t),
                            quant=(in_zp, m1, s1, st_zp, m2, s2, out_zp))
        state0 = kernels.svdf_initial_state(batch, n_filter * n_memory, state_dtype, st_zp)
        args = [ctx.expr(x_t), wf.astype(np.int8), wt, bias.reshape(-1).astype(np.int32), state0]
    prim = kernel_attrs.with_state(prim, (kernels.SVDF_STATE_PARAM,))
    macs = batch * n_filter * (n_input + n_memory)
    return ctx.emit("SVDF", prim, args, (batch, n_unit), dtype, macs)
