"""matmul operators (see registry.py for how a lowering is written).

BATCH_MATMUL (int8, float32): both operands activations or one of them constant, adj_x / adj_y, batch
dimensions broadcast (ranks 2..5). TFLM's int8 form: per-tensor operands, the multiplier of
float32(lhs_scale * rhs_scale) / output_scale in double (GetQuantizedConvolutionMultipler), no fused activation.
TVM's converter has no broadcast and fails on a constant operand, so the float form is edgemem's kernel too.
"""

from __future__ import annotations

from ...kernels import matmul as kernels
from ...kernels.fixed_point import fully_connected_multiplier
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
