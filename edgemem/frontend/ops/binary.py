"""Binary (and n-ary elementwise) operators on int8: SUB, SQUARED_DIFFERENCE, DIV, MAXIMUM, MINIMUM, ADD_N, the
comparisons (bool out), SELECT_V2; on int16 (16x8 models) those TFLM has int16 kernels for: ADD, SUB, MUL,
SQUARED_DIFFERENCE, MAXIMUM, MINIMUM, SELECT_V2; the int32 ADD / SUB / MUL / SQUARED_DIFFERENCE (two's-complement
wrapping, as TFLM); LOGICAL_AND / OR / NOT and float SELECT_V2 as kernels where the model is integerized.

A model with int8 tensors goes through passes/integerize.py, which keeps only edgemem's kernels (call_tir):
there, every operator of this family is an edgemem kernel, also on bool / float32 / int32 operands. In a
float model they are left to TVM's converter (Relax ops it legalizes), except the int32 wrapping ones,
written as Relax ops on int64.

Every kernel reads its operands through numpy broadcasting (TFLM's Broadcast*Slow give the same element
for every broadcast TFLite allows). The int8 arithmetic is TFLM's, multipliers computed as its Prepare does
them (float32 or double, which matters on ties):
- SUB: both inputs shifted left 20, rescaled to twice the larger input scale, subtracted, rescaled to the
  output (multipliers in double, as the tflite_micro package computes them).
- SQUARED_DIFFERENCE: the same with a left shift of 7, the difference squared, then QuantizeMultiplier of
  (2 max scale)^2 / (2^14 out_scale) in double.
- comparisons: each input shifted left 8 and multiplied by its own scale (QuantizeMultiplierSmallerThanOneExp
  of the scale), the two int32 values compared; the output is bool.
- ADD_N: every input (one scale and zero point for all) at left shift 20 times 0.5; TFLM's accumulator
  starts from the rescaled *input offset* (-zero point), not from 0, and so does ours.
- MAXIMUM / MINIMUM / SELECT_V2: the raw int8 values (TFLM ignores the quantization).
- int16 ADD / SUB: as int8 SUB with a left shift of 15 (TFLM's general path; TFLite's power-of-two "pot"
  path is not in TFLM: its int16 ADD passes pot_scale=false and its SUB has none). Any zero points.
- int16 MUL: the int32 product of the raw values times QuantizeMultiplier(s1 s2 / so) (double); the
  multiplier's left shift wraps in int32 as in TFLM (kernels/binary.py). Zero points 0, as TFLM requires.
- int16 SQUARED_DIFFERENCE: left shift 0, the difference squared, times QuantizeMultiplier(
  (2 max scale)^2 / so) (may exceed 1: wrapping as MUL). Zero points 0.
- int16 comparisons: TFLM has only GREATER on int16, and its Prepare leaves the int16 scaling unset
  (multipliers 0: every element compares 0 > 0, false); edgemem does not copy that and refuses int16
  comparisons (frontend/support.py names them). ADD_N has no int16 kernel in TFLM.
- DIV: TFLM's DivElementwise (a reciprocal of the divisor in Q31, the dividend normalised by its leading
  sign bits): the divisor's reciprocal and shift and the dividend's leading sign bits come from tables over
  the 256 int8 values (computed in Python with gemmlowp's Newton-Raphson, ~1.8 KB of flash), the rest in
  the kernel. It reproduces TFLM's x86 build (the oracle) also where TFLM's C++ is undefined (a divisor at
  its zero point; RoundingDivideByPOT by 32..63, see kernels/binary.py), checked on all 65536 pairs.
Float32 operators and the int32/bool ones without overflow go through TVM's converter (checked against TFLM).
"""

from __future__ import annotations

import numpy as np
import tflite
from tvm import tirx

from ...kernels import binary as K
from ...kernels.fixed_point import activation_range, add_rescale, clamp_to_int8, multiply_by_quantized_multiplier, quantize_multiplier
from .registry import OpContext, lowering

_ACT_NAMES = {0: "NONE", 1: "RELU", 2: "RELU_N1_TO_1", 3: "RELU6"}


# ---------------------------------------------------------------- helpers

def _operand(ctx: OpContext, t):
    """(arg, shape, dtype) of an input: a constant's numpy value (flash) or the activation's expr."""
    shape = ctx.shape(t) or (1,)
    value = ctx.value(t)
    arg = ctx.expr(t) if value is None else np.ascontiguousarray(value).reshape(shape)
    return arg, shape, ctx.dtype(t)


def _fused_activation(ctx: OpContext, options_cls, add_fn: str = "FusedActivationFunction") -> str:
    opts = ctx.options(options_cls)
    code = int(getattr(opts, add_fn)()) if opts is not None else 0
    if code not in _ACT_NAMES:
        ctx.refuse(f"its fused activation {code} is not one TFLite Micro implements for {ctx.name}.")
    return _ACT_NAMES[code]


def _int32_range(act: str) -> tuple[int, int]:
    """TFLite's CalculateActivationRange for int32."""
    return {"NONE": (-(2**31), 2**31 - 1), "RELU": (0, 2**31 - 1), "RELU6": (0, 6), "RELU_N1_TO_1": (-1, 1)}[act]


def _emit(ctx: OpContext, kind: str, operands, out_dtype: str, fn):
    """One broadcast elementwise kernel over ``operands`` [(arg, shape, dtype)]."""
    out = ctx.outputs[0]
    out_shape = ctx.shape(out)
    prim = K.elementwise([(shape, dtype) for _, shape, dtype in operands], out_shape or (1,), out_dtype, fn)
    result = ctx.emit(kind, prim, [arg for arg, _, _ in operands], out_shape or (1,), out_dtype)
    return ctx.reshape(result, ()) if not out_shape else result


def _check_broadcast(ctx: OpContext, shapes):
    out_shape = ctx.shape(ctx.outputs[0])
    try:
        got = np.broadcast_shapes(*[tuple(s) for s in shapes])
    except ValueError:
        ctx.refuse(f"its input shapes {', '.join(str(list(s)) for s in shapes)} do not broadcast.")
    if tuple(got) != tuple(out_shape) and not (int(np.prod(got)) == 1 == int(np.prod(out_shape or (1,)))):
        ctx.refuse(f"its output shape {list(out_shape)} is not the broadcast of its inputs {list(got)}.")


def _same_types(ctx: OpContext, tensors, want: str):
    for t in tensors:
        if ctx.dtype(t) != want:
            ctx.refuse(f"its tensor '{ctx.tensor_name(t)}' is {ctx.dtype(t)}, the other operands {want}; TFLite Micro needs one type.")


def _i8(ctx: OpContext, t, what: str):
    scale, zp = ctx.scale_zp(t, what)
    if not -128 <= zp <= 127:
        ctx.refuse(f"its {what} zero point {zp} is outside int8.")
    return scale, zp


_RANGES = {"int8": (-128, 127), "int16": (-32768, 32767)}


def _q(ctx: OpContext, t, what: str, dtype: str, zero: bool = False):
    """(scale, zero point) of a per-tensor quantized ``dtype`` tensor; ``zero``: TFLM requires a zero point of 0."""
    scale, zp = ctx.scale_zp(t, what)
    lo, hi = _RANGES[dtype]
    if zero and zp != 0:
        ctx.refuse(f"its {what} zero point is {zp}; TFLite Micro's {dtype} {ctx.name} requires 0.")
    if not lo <= zp <= hi:
        ctx.refuse(f"its {what} zero point {zp} is outside {dtype}.")
    return scale, zp


def _quantized_activation_range(kind: str, scale: float, zp: int, dtype: str) -> tuple[int, int]:
    """TFLite's CalculateActivationRangeQuantized for an int8 or int16 output."""
    return activation_range(kind, scale, zp, *_RANGES[dtype])


def _smaller_than_one(ctx: OpContext, real: float, what: str) -> tuple[int, int]:
    """TFLite's QuantizeMultiplierSmallerThanOneExp (it aborts outside (0, 1))."""
    if not 0.0 < real < 1.0:
        ctx.refuse(f"its {what} multiplier {real!r} is not in (0, 1), which TFLite Micro's {ctx.name} requires.")
    return quantize_multiplier(real)


def _refuse_multiplier(ctx: OpContext):
    """add_rescale's `refuse`: the model is refused as _smaller_than_one does."""
    return lambda what, real: _smaller_than_one(ctx, real, what)


def _f32(x) -> np.float32:
    return np.float32(x)


def _from_kernel(ctx: OpContext, t) -> bool:
    """Whether tensor ``t`` is the output of an edgemem kernel (a call_tir) already emitted."""
    if ctx.is_const(t):
        return False
    expr = ctx.expr(t)
    try:
        bound = ctx.conv.bb.lookup_binding(expr)
    except Exception:  # noqa: BLE001  (a model input or a constant: no binding)
        return False
    return bound is not None and getattr(getattr(bound, "op", None), "name", "") == "relax.call_tir"


def _integer_model(ctx: OpContext) -> bool:
    """Whether the model goes through integerize (it has int8 tensors): there only edgemem's kernels survive,
    so an operator that TVM would import as plain Relax ops must be an edgemem kernel too."""
    cached = getattr(ctx.conv, "_edgemem_has_int8", None)
    if cached is None:
        sg = ctx.conv.subgraph
        cached = any(sg.Tensors(i).Type() == tflite.TensorType.INT8 for i in range(sg.TensorsLength()))
        ctx.conv._edgemem_has_int8 = cached
    return cached


def _kernel_path(ctx: OpContext, tensors) -> bool:
    """An edgemem kernel rather than TVM's Relax ops: in a model with int8 tensors, or fed by a kernel."""
    return _integer_model(ctx) or any(_from_kernel(ctx, t) for t in tensors)


# ---------------------------------------------------------------- SUB

@lowering("SUB", types=("int8",))
def sub_int8(ctx: OpContext):
    return _add_sub(ctx, "int8")


@lowering("ADD", "SUB", types=("int16",))
def add_sub_int16(ctx: OpContext):
    """int16 ADD / SUB: TFLM's general path (AddElementwise / SubElementwise with left shift 15), the only one
    its kernels take for int16 -- TFLite's power-of-two-scale path (pot_scale_int16) is not in TFLM."""
    return _add_sub(ctx, "int16")


def _add_sub(ctx: OpContext, dtype: str):
    a, b, y = ctx.inputs[0], ctx.inputs[1], ctx.outputs[0]
    _same_types(ctx, [b, y], dtype)
    (s1, z1), (s2, z2), (so, zo) = (_q(ctx, t, what, dtype) for t, what in ((a, "first input"), (b, "second input"), (y, "output")))
    options = tflite.AddOptions if ctx.name == "ADD" else tflite.SubOptions
    act_min, act_max = _quantized_activation_range(_fused_activation(ctx, options), so, zo, dtype)
    left = 20 if dtype == "int8" else 15
    # In double, as add_common.cc: the TFLM source's sub_common.cc now divides in float32, but the TFLM build
    # edgemem is checked against (the tflite_micro package) rounds as double (int8: all 65536 pairs compared;
    # int16: all 65536 values against permuted partners, scales where float32 and double multipliers differ).
    m1, sh1, m2, sh2, mo, sho = add_rescale(s1, s2, so, left, refuse=_refuse_multiplier(ctx))
    ops = [_operand(ctx, a), _operand(ctx, b)]
    _check_broadcast(ctx, [ops[0][1], ops[1][1]])
    subtract = ctx.name == "SUB"

    def fn(va, vb):
        x1, x2 = K.rescaled(va, -z1, left, m1, sh1), K.rescaled(vb, -z2, left, m2, sh2)
        raw = x1 - x2 if subtract else x1 + x2
        return clamp_to_int8(multiply_by_quantized_multiplier(raw, mo, sho) + zo, act_min, act_max, dtype)

    return _emit(ctx, ctx.name, ops, dtype, fn)


# ---------------------------------------------------------------- MUL (int16)

@lowering("MUL", types=("int16",))
def mul_int16(ctx: OpContext):
    """TFLM's int16 MUL (reference_integer_ops::MulElementwise / BroadcastMul6DSlow): the int32 product times
    QuantizeMultiplier(s1 s2 / so) in double, through the int32 MultiplyByQuantizedMultiplier, whose
    ``x << shift`` wraps for a multiplier above 1; zero points must be 0 (TFLM's Prepare checks)."""
    a, b, y = ctx.inputs[0], ctx.inputs[1], ctx.outputs[0]
    _same_types(ctx, [b, y], "int16")
    (s1, _), (s2, _), (so, _) = (_q(ctx, t, what, "int16", zero=True) for t, what in ((a, "first input"), (b, "second input"), (y, "output")))
    act_min, act_max = _quantized_activation_range(_fused_activation(ctx, tflite.MulOptions), so, 0, "int16")
    mo, sho = quantize_multiplier(float(_f32(s1)) * float(_f32(s2)) / float(_f32(so)))
    ops = [_operand(ctx, a), _operand(ctx, b)]
    _check_broadcast(ctx, [ops[0][1], ops[1][1]])

    def fn(va, vb):
        product = va.astype("int32") * vb.astype("int32")  # at most 2^30: no overflow
        return clamp_to_int8(K.multiply_by_quantized_multiplier_wrapping(product, mo, sho), act_min, act_max, "int16")

    return _emit(ctx, "MUL", ops, "int16", fn)


# ---------------------------------------------------------------- SQUARED_DIFFERENCE

@lowering("SQUARED_DIFFERENCE", types=("int8",))
def squared_difference_int8(ctx: OpContext):
    a, b, y = ctx.inputs[0], ctx.inputs[1], ctx.outputs[0]
    _same_types(ctx, [b, y], "int8")
    (s1, z1), (s2, z2), (so, zo) = _i8(ctx, a, "first input"), _i8(ctx, b, "second input"), _i8(ctx, y, "output")
    left = 7
    m1, sh1, m2, sh2, mo, sho = add_rescale(s1, s2, so, left, squared=True, refuse=_refuse_multiplier(ctx))
    ops = [_operand(ctx, a), _operand(ctx, b)]
    _check_broadcast(ctx, [ops[0][1], ops[1][1]])

    def fn(va, vb):
        diff = K.rescaled(va, -z1, left, m1, sh1) - K.rescaled(vb, -z2, left, m2, sh2)
        return clamp_to_int8(multiply_by_quantized_multiplier(diff * diff, mo, sho) + zo, -128, 127)

    return _emit(ctx, "SQUARED_DIFFERENCE", ops, "int8", fn)


@lowering("SQUARED_DIFFERENCE", types=("int16",))
def squared_difference_int16(ctx: OpContext):
    """TFLM's int16 SQUARED_DIFFERENCE: left shift 0, zero points 0 (its Prepare checks); the squared difference
    (at most 2^30) times an output multiplier that may exceed 1 (then wrapping as TFLM's int32 shift does)."""
    a, b, y = ctx.inputs[0], ctx.inputs[1], ctx.outputs[0]
    _same_types(ctx, [b, y], "int16")
    (s1, _), (s2, _), (so, _) = (_q(ctx, t, what, "int16", zero=True) for t, what in ((a, "first input"), (b, "second input"), (y, "output")))
    m1, sh1, m2, sh2, mo, sho = add_rescale(s1, s2, so, 0, squared=True, refuse=_refuse_multiplier(ctx))
    ops = [_operand(ctx, a), _operand(ctx, b)]
    _check_broadcast(ctx, [ops[0][1], ops[1][1]])

    def fn(va, vb):
        diff = K.rescaled(va, 0, 0, m1, sh1) - K.rescaled(vb, 0, 0, m2, sh2)
        return clamp_to_int8(K.multiply_by_quantized_multiplier_wrapping(diff * diff, mo, sho), -32768, 32767, "int16")

    return _emit(ctx, "SQUARED_DIFFERENCE", ops, "int16", fn)


# ---------------------------------------------------------------- DIV

@lowering("DIV", types=("int8",))
def div_int8(ctx: OpContext):
    a, b, y = ctx.inputs[0], ctx.inputs[1], ctx.outputs[0]
    _same_types(ctx, [b, y], "int8")
    (s1, z1), (s2, z2), (so, zo) = _i8(ctx, a, "first input"), _i8(ctx, b, "second input"), _i8(ctx, y, "output")
    act_min, act_max = activation_range(_fused_activation(ctx, tflite.DivOptions), so, zo)
    # double: the TFLM source divides float32 scales, its package build (the oracle) rounds as double
    multiplier, shift = quantize_multiplier(float(_f32(s1)) / (float(_f32(s2)) * float(_f32(so))))
    (a_arg, a_shape, _), (b_arg, b_shape, _) = _operand(ctx, a), _operand(ctx, b)
    _check_broadcast(ctx, [a_shape, b_shape])
    tables = K.div_operand_tables(z1, z2, shift)
    if tables is None:
        ctx.refuse(f"its quantization (output multiplier shift {shift}) takes TFLite Micro's int8 DIV outside the shifts it computes.")
    out_shape = ctx.shape(y) or (1,)
    prim = K.div_int8(a_shape, b_shape, out_shape, z1, multiplier, shift, zo, act_min, act_max)
    result = ctx.emit("DIV", prim, [a_arg, b_arg, *tables], out_shape, "int8")
    return result if ctx.shape(y) else ctx.reshape(result, ())


# ---------------------------------------------------------------- MAXIMUM / MINIMUM

@lowering("MAXIMUM", "MINIMUM", types=("int8", "int16"))
def max_min_int8(ctx: OpContext):
    a, b, y = ctx.inputs[0], ctx.inputs[1], ctx.outputs[0]
    dtype = ctx.dtype(a)
    _same_types(ctx, [a, b, y], dtype)
    ops = [_operand(ctx, a), _operand(ctx, b)]
    _check_broadcast(ctx, [ops[0][1], ops[1][1]])
    pick = tirx.Max if ctx.name == "MAXIMUM" else tirx.Min
    return _emit(ctx, ctx.name, ops, dtype, lambda va, vb: pick(va, vb))


# ---------------------------------------------------------------- comparisons

_COMPARE = {
    "EQUAL": lambda x, y: x == y,
    "NOT_EQUAL": lambda x, y: x != y,
    "LESS": lambda x, y: x < y,
    "LESS_EQUAL": lambda x, y: x <= y,
    "GREATER": lambda x, y: x > y,
    "GREATER_EQUAL": lambda x, y: x >= y,
}


@lowering(*_COMPARE, types=("int8",))
def compare_int8(ctx: OpContext):
    a, b, y = ctx.inputs[0], ctx.inputs[1], ctx.outputs[0]
    _same_types(ctx, [b], "int8")
    _same_types(ctx, [y], "bool")
    (s1, z1), (s2, z2) = _i8(ctx, a, "first input"), _i8(ctx, b, "second input")
    m1, sh1 = _smaller_than_one(ctx, float(_f32(s1)), "first input scale as")
    m2, sh2 = _smaller_than_one(ctx, float(_f32(s2)), "second input scale as")
    ops = [_operand(ctx, a), _operand(ctx, b)]
    _check_broadcast(ctx, [ops[0][1], ops[1][1]])
    cmp = _COMPARE[ctx.name]
    return _emit(ctx, ctx.name, ops, "bool", lambda va, vb: cmp(K.rescaled(va, -z1, 8, m1, sh1), K.rescaled(vb, -z2, 8, m2, sh2)))


# ---------------------------------------------------------------- SELECT_V2

@lowering("SELECT_V2", types=("bool", "int8", "int16", "float32", "int32"))
def select_v2(ctx: OpContext):
    c, x, z, y = ctx.inputs[0], ctx.inputs[1], ctx.inputs[2], ctx.outputs[0]
    dtype = ctx.dtype(x)
    if dtype not in ("int8", "int16") and not _kernel_path(ctx, ctx.inputs):
        return ctx.conv.convert_select(ctx.op)  # TVM's where(), legalized in a float model
    _same_types(ctx, [c], "bool")
    _same_types(ctx, [z, y], dtype)
    if dtype not in ("int8", "int16", "float32", "int32"):
        ctx.refuse(f"its values are {dtype}; edgemem's SELECT_V2 takes int8, int16, float32 or int32.")
    ops = [_operand(ctx, c), _operand(ctx, x), _operand(ctx, z)]
    _check_broadcast(ctx, [o[1] for o in ops])
    return _emit(ctx, "SELECT_V2", ops, dtype, lambda vc, vx, vz: tirx.Select(vc, vx, vz))


# ---------------------------------------------------------------- LOGICAL_*

_LOGICAL = {
    "LOGICAL_AND": lambda x, y: tirx.And(x, y),
    "LOGICAL_OR": lambda x, y: tirx.Or(x, y),
    "LOGICAL_NOT": lambda x: tirx.Not(x),
}


@lowering(*_LOGICAL, types=("bool",))
def logical(ctx: OpContext):
    """bool -> bool; TVM's Relax ops in a float model, an edgemem kernel where the model is integerized
    (a comparison of int8 tensors feeding it)."""
    _same_types(ctx, [*ctx.inputs, ctx.outputs[0]], "bool")
    if not _kernel_path(ctx, ctx.inputs):
        from tvm import relax

        if ctx.name == "LOGICAL_NOT":
            return ctx.conv.convert_logical_not(ctx.op)
        relax_op = relax.op.logical_and if ctx.name == "LOGICAL_AND" else relax.op.logical_or
        return ctx.conv._convert_logical_binary(relax_op, ctx.op)
    ops = [_operand(ctx, t) for t in ctx.inputs]
    _check_broadcast(ctx, [o[1] for o in ops])
    return _emit(ctx, ctx.name, ops, "bool", _LOGICAL[ctx.name])


# ---------------------------------------------------------------- ADD_N

@lowering("ADD_N", types=("int8",))
def add_n_int8(ctx: OpContext):
    y = ctx.outputs[0]
    _same_types(ctx, [*ctx.inputs, y], "int8")
    s, z = _i8(ctx, ctx.inputs[0], "first input")
    for t in ctx.inputs[1:]:
        if _i8(ctx, t, "input") != (s, z) or ctx.shape(t) != ctx.shape(ctx.inputs[0]):
            ctx.refuse("its inputs differ in shape, scale or zero point; TFLite Micro's ADD_N needs them all equal.")
    so, zo = _i8(ctx, y, "output")
    left = 20
    mi, shi, _, _, mo, sho = add_rescale(s, s, so, left, refuse=_refuse_multiplier(ctx))
    ops = [_operand(ctx, t) for t in ctx.inputs]

    def fn(*values):
        acc = K.rescaled(tirx.const(0, "int32"), -z, left, mi, shi)  # TFLM starts from the rescaled offset
        for v in values:
            acc = acc + K.rescaled(v, -z, left, mi, shi)
        return clamp_to_int8(multiply_by_quantized_multiplier(acc, mo, sho) + zo, -128, 127)

    return _emit(ctx, "ADD_N", ops, "int8", fn)


# ---------------------------------------------------------------- int32 with wrapping

@lowering("ADD", "SUB", "MUL", "SQUARED_DIFFERENCE", types=("int32",))
def int32_wrapping(ctx: OpContext):
    a, b, y = ctx.inputs[0], ctx.inputs[1], ctx.outputs[0]
    _same_types(ctx, [b, y], "int32")
    if any(ctx.quant(t) is not None for t in (a, b, y)):
        ctx.refuse(f"its int32 tensors are quantized; TFLite Micro's int32 {ctx.name} takes plain integers.")
    options = {"ADD": tflite.AddOptions, "SUB": tflite.SubOptions, "MUL": tflite.MulOptions}.get(ctx.name)
    act = _fused_activation(ctx, options) if options is not None else "NONE"
    lo, hi = _int32_range("NONE" if ctx.name == "ADD" else act)  # TFLM's int32 ADD ignores the activation
    ops = [_operand(ctx, a), _operand(ctx, b)]
    _check_broadcast(ctx, [ops[0][1], ops[1][1]])

    if ctx.name == "SQUARED_DIFFERENCE":
        def raw(va, vb, narrow=lambda d: d.astype("int32").astype("int64")):
            d = narrow(va - vb)  # TFLM's int32 difference wraps first, then the square
            return d * d
    else:
        raw = {"ADD": lambda va, vb: va + vb, "SUB": lambda va, vb: va - vb, "MUL": lambda va, vb: va * vb}[ctx.name]
    wrapped = K.wrap_int32(raw)
    full = (lo, hi) == _int32_range("NONE")

    if not _kernel_path(ctx, [a, b]):  # a float/int32 model: Relax ops on int64, legalized by TVM
        from tvm import relax

        ea, eb = (ctx.expr(t) for t in (a, b))
        wide = [relax.op.astype(e, "int64") for e in (ea, eb)]
        if ctx.name == "SQUARED_DIFFERENCE":
            d = relax.op.astype(relax.op.astype(wide[0] - wide[1], "int32"), "int64")
            v = relax.op.astype(d * d, "int32")
        else:
            v = relax.op.astype(raw(*wide), "int32")
        return v if full else relax.op.clip(v, lo, hi)

    def fn(va, vb):
        v = wrapped(va, vb)
        return v if full else K.clamp(v, lo, hi, "int32")

    return _emit(ctx, ctx.name, ops, "int32", fn)
