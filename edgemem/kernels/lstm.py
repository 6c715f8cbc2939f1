"""UNIDIRECTIONAL_SEQUENCE_LSTM on integer activations with int8 weights and an int16 cell, TFLite's two integer
LSTMs: "8x8->16" (int8 activations, int32 biases) and "16x8->16" (int16 activations, int64 biases), with TFLite
Micro's arithmetic (lstm_eval.h, EvalLstm<int8_t|int16_t, int8_t, int16_t, int32_t|int64_t>) so that the
outputs are bit-exact with it.

Per time step, each gate g in (input, forget, cell, output) is

    gate_g = act_g( sat16( fc(x_t, Wx_g, b_g) + fc(h, Wh_g) ) )

where each fully connected layer requantizes its accumulator to int16 at scale 2^-12 (Q3.12), the
sigmoid/tanh take Q3.12 and give Q0.15, then

    c = sat16( rq(f * c) + rq(i * g) ), clipped to +-cell_clip if set,   h = sat( rq(o * tanh(c)) + h_zp ).

The two LSTMs differ only in the fully connected layers and the hidden state's type: int8 sums in int32 and
requantizes with the double-rounding MultiplyByQuantizedMultiplier; int16 sums in int64 (its bias type) and
requantizes with the int64 overload, which rounds the multiplier to 16 bits and rounds once
(``multiply_by_quantized_multiplier_int64``). The gate products, the cell and the nonlinearities are the same
code (int16 in both); the hidden state and the output are int8 or int16, saturated to their type.

The int16 sigmoid and tanh are TFLite's interpolated look-up table of sigmoid(k/24) in 0.16 fixed point
(tanh(x) = 2 sigmoid(2x) - 1); ``SIGMOID_TABLE`` holds it as *measured* from tflite_micro's int16 TANH
(tests/test_lstm.py's ``measure_sigmoid_table`` reads it again and compares).

State: the hidden and cell state are the kernel's two state arguments, which persist across invocations
(the generated model keeps them outside the arena; ``edgemem_reset()`` restores TFLM's reset values,
``initial_state``), so a sequence of invocations gives what TFLM gives when it
is invoked again without a reset.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
from tvm import tirx

from .fixed_point import clamp_to_int8, fully_connected_multiplier, mul_multiplier, multiply_by_quantized_multiplier

GATES = ("input", "forget", "cell", "output")  # row order of the stacked weights, biases and multipliers

# sigmoid(k/24) in 0.16 fixed point, k = 0..255, as tflite_micro computes with it (read off its int16 TANH by
# tests/test_lstm.py, measure_sigmoid_table).
SIGMOID_TABLE = (
    32768, 33451, 34133, 34813, 35493, 36169, 36843, 37513, 38180, 38841, 39498, 40149, 40794, 41432, 42064, 42688,
    43304, 43912, 44511, 45102, 45683, 46255, 46817, 47369, 47911, 48443, 48964, 49475, 49975, 50464, 50942, 51409,
    51865, 52311, 52745, 53169, 53581, 53983, 54374, 54755, 55125, 55485, 55834, 56174, 56503, 56823, 57133, 57433,
    57724, 58007, 58280, 58544, 58800, 59048, 59288, 59519, 59743, 59959, 60168, 60370, 60565, 60753, 60935, 61110,
    61279, 61441, 61599, 61750, 61896, 62036, 62172, 62302, 62428, 62549, 62666, 62778, 62886, 62990, 63090, 63186,
    63279, 63368, 63454, 63536, 63615, 63691, 63765, 63835, 63903, 63968, 64030, 64090, 64148, 64204, 64257, 64308,
    64357, 64405, 64450, 64494, 64536, 64576, 64614, 64652, 64687, 64721, 64754, 64786, 64816, 64845, 64873, 64900,
    64926, 64950, 64974, 64997, 65019, 65039, 65060, 65079, 65097, 65115, 65132, 65149, 65164, 65179, 65194, 65208,
    65221, 65234, 65246, 65258, 65269, 65280, 65291, 65301, 65310, 65319, 65328, 65337, 65345, 65352, 65360, 65367,
    65374, 65381, 65387, 65393, 65399, 65404, 65410, 65415, 65420, 65425, 65429, 65433, 65438, 65442, 65445, 65449,
    65453, 65456, 65459, 65462, 65465, 65468, 65471, 65474, 65476, 65479, 65481, 65483, 65485, 65488, 65489, 65491,
    65493, 65495, 65497, 65498, 65500, 65501, 65503, 65504, 65505, 65507, 65508, 65509, 65510, 65511, 65512, 65513,
    65514, 65515, 65516, 65517, 65517, 65518, 65519, 65520, 65520, 65521, 65522, 65522, 65523, 65523, 65524, 65524,
    65525, 65525, 65526, 65526, 65526, 65527, 65527, 65528, 65528, 65528, 65529, 65529, 65529, 65529, 65530, 65530,
    65530, 65530, 65531, 65531, 65531, 65531, 65531, 65532, 65532, 65532, 65532, 65532, 65532, 65533, 65533, 65533,
    65533, 65533, 65533, 65533, 65533, 65534, 65534, 65534, 65534, 65534, 65534, 65534, 65534, 65534, 65534, 65535,
)  # fmt: skip

GATE_INPUT_SCALE = 2.0**-12  # fc outputs, the nonlinearities' input (Q3.12)
GATE_OUTPUT_SCALE = 2.0**-15  # the nonlinearities' output (Q0.15)


@dataclass(frozen=True)
class LstmQuant:
    """Everything the integer LSTM needs besides the weights, computed as TFLM's Prepare does."""

    activation: str  # "int8" (8x8->16) or "int16" (16x8->16): the input, hidden state and output type
    steps: int
    n_input: int
    n_cell: int
    input_zp: int
    hidden_zp: int
    fc: tuple[int, ...]  # per gate: input fc (multiplier, shift), recurrent fc (multiplier, shift): 16 ints
    # (int16: each (multiplier, shift) pair as the int64 overload uses it, see reduced_multiplier)
    forget_cell: tuple[int, int]  # f * c -> c
    input_cell: tuple[int, int]  # i * g -> c
    hidden: tuple[int, int]  # o * tanh(c) -> h
    cell_scale_power: int  # cell scale = 2^power
    cell_clip: int  # quantized; 0: none


def reduced_multiplier(multiplier: int, shift: int) -> tuple[int, int]:
    """What TFLite's int64 MultiplyByQuantizedMultiplier computes with: the Q0.31 multiplier rounded to 16 bits
    ((m + 2^15) >> 16, or 0x7FFF from 0x7FFF0000 on) and the total right shift 15 - shift."""
    reduced = (multiplier + (1 << 15)) >> 16 if multiplier < 0x7FFF0000 else 0x7FFF
    return reduced, 15 - shift


def multiply_by_quantized_multiplier_int64(x, reduced, total_shift):
    """TFLite's MultiplyByQuantizedMultiplier(int64_t x, ...) on the pair ``reduced_multiplier`` gives (Python
    ints or int32 expressions): (x * reduced + 2^(total_shift - 1)) >> total_shift, truncated to int32 as TFLite's
    ``int32_t result = ...`` does."""
    one = tirx.const(1, "int64")
    shift = tirx.Cast("int64", total_shift) if not isinstance(total_shift, int) else tirx.const(total_shift, "int64")
    red = tirx.Cast("int64", reduced) if not isinstance(reduced, int) else tirx.const(reduced, "int64")
    return tirx.Cast("int32", (x * red + (one << (shift - one))) >> shift)


def lstm_quant(steps, n_input, n_cell, input_scale, input_zp, weight_scales, recurrent_scales, hidden_scale, hidden_zp,
               cell_scale, cell_clip: float, activation: str = "int8") -> LstmQuant:  # fmt: skip
    """weight_scales / recurrent_scales: one float32 scale per gate, in GATES order; activation: "int8" or "int16"."""
    fc = []
    for ws, rs in zip(weight_scales, recurrent_scales):
        pairs = [fully_connected_multiplier(input_scale, ws, GATE_INPUT_SCALE), fully_connected_multiplier(hidden_scale, rs, GATE_INPUT_SCALE)]
        if activation == "int16":
            pairs = [reduced_multiplier(*p) for p in pairs]
        fc += [*pairs[0], *pairs[1]]
    power = round(math.log2(float(np.float32(cell_scale))))
    clip = 0
    if cell_clip > 0:
        clip = int(min(max(float(np.float32(cell_clip)) / float(np.float32(cell_scale)), -32768.0), 32767.0))
    return LstmQuant(
        activation, steps, n_input, n_cell, int(input_zp), int(hidden_zp), tuple(int(v) for v in fc),
        mul_multiplier(GATE_OUTPUT_SCALE, cell_scale, cell_scale), mul_multiplier(GATE_OUTPUT_SCALE, GATE_OUTPUT_SCALE, cell_scale),
        mul_multiplier(GATE_OUTPUT_SCALE, GATE_OUTPUT_SCALE, hidden_scale), power, clip,
    )  # fmt: skip


def _sat16(v):
    return tirx.Min(tirx.Max(v, tirx.const(-32768, "int32")), tirx.const(32767, "int32"))


def _lut_blend(lut, a, frac_bits: int):
    """TFLM's table interpolation on |x| = a: (t[k] << frac) + (a mod 2^frac) * (t[k+1] - t[k]), k = a >> frac
    (the index is clamped so the unselected branch of the caller never reads past the table)."""
    k = tirx.Min(a >> frac_bits, tirx.const(254, "int32"))
    lo = lut[k]
    return (lo << frac_bits) + (a & ((1 << frac_bits) - 1)) * (lut[k + 1] - lo)


def _sigmoid16(lut, x):
    """Q3.12 -> Q0.15 (TFLM's int16 Logistic with the power-of-two input scale): x3 = 3x."""
    a = tirx.Max(x, -x)
    r = tirx.if_then_else((a >> 9) >= 255, tirx.const(0x7FFF << 10, "int32"), _lut_blend(lut, a, 9))
    r = tirx.if_then_else(x >= 0, r + 512, tirx.const((1 << 25) + 511, "int32") - r)
    return r >> 10


def _tanh16(lut, x):
    """TFLM's int16 Tanh on an already scaled input x (3 * 2^12 units per 1.0)."""
    a = tirx.Max(x, -x)
    r = tirx.if_then_else((a >> 8) >= 255, tirx.const(0xFFFF << 8, "int32"), _lut_blend(lut, a, 8))
    r = tirx.if_then_else(x >= 0, r - tirx.const((1 << 23) - 128, "int32"), tirx.const((1 << 23) + 127, "int32") - r)
    return r >> 8


def _tanh_input(v, power: int):
    """The cell (scale 2^power) in the tanh's input units: TFLM's left shift (15 + power) - 3, x3."""
    shift = 12 + power
    if shift >= 0:
        return v * tirx.const(3 << shift, "int32")
    return (v * 3 + tirx.const(1 << (-shift - 1), "int32")) >> (-shift)


STATE_PARAMS = (6, 7)  # positions of the hidden and cell state among the kernel's parameters


def initial_state(n_cell: int, hidden_zp: int, activation: str = "int8") -> tuple[np.ndarray, np.ndarray]:
    """TFLM's reset values (MicroInterpreterGraph::ResetTensorData: a memset to the zero point for an int8
    variable tensor, to 0 for any other): an int8 hidden state at its zero point, an int16 one at 0 whatever its
    zero point, the cell at 0."""
    return np.full(n_cell, hidden_zp if activation == "int8" else 0, np.dtype(activation)), np.zeros(n_cell, np.int16)


BIAS_DTYPE = {"int8": "int32", "int16": "int64"}  # the biases' type, which is also the fc accumulator's


def lstm_integer(q: LstmQuant):
    """The kernel, A the activation type (q.activation) and B its bias type (BIAS_DTYPE): x [1, T, I] A,
    wx [4, N, I] int8, wh [4, N, N] int8, bias [4, N] B, qp [16] int32 (gate fc multipliers), lut [256] int32,
    hidden [N] A and cell [N] int16 (state, read and updated), out [1, T, N] A.

    Unit by unit: a unit's four gates need the whole previous hidden state, which is the previous output
    row (the state argument before the first step), and give that unit's cell and output; the last output
    row becomes the hidden state at the end. No scratch besides a few scalars."""
    from tvm.script import tirx as T

    steps, n_in, n, x_zp, h_zp, act = q.steps, q.n_input, q.n_cell, q.input_zp, q.hidden_zp, q.activation
    acc_t = BIAS_DTYPE[act]
    info = np.iinfo(act)
    wide = (lambda v: v) if acc_t == "int32" else (lambda v: tirx.Cast(acc_t, v))  # noqa: E731

    def fc_out(acc, m, s):  # the fully connected layer's requantization to Q3.12 (int16 saturated)
        if act == "int16":
            return _sat16(multiply_by_quantized_multiplier_int64(acc, m, s))
        return _sat16(multiply_by_quantized_multiplier(acc, m, s))

    m_fc, s_fc = q.forget_cell
    m_ic, s_ic = q.input_cell
    m_h, s_h = q.hidden
    power, clip = q.cell_scale_power, q.cell_clip

    @T.prim_func
    def lstm(
        x: T.Buffer((1, steps, n_in), act), wx: T.Buffer((4, n, n_in), "int8"), wh: T.Buffer((4, n, n), "int8"),
        bias: T.Buffer((4, n), acc_t), qp: T.Buffer((16,), "int32"), lut: T.Buffer((256,), "int32"),
        hidden: T.Buffer((n,), act), cell: T.Buffer((n,), "int16"), out: T.Buffer((1, steps, n), act),
    ):
        # One scalar per value, each stored once per iteration: TVM's simplifier reused a load of a scalar
        # across a later store to it (the old value reached the output) when one scalar held several values.
        acc = T.decl_buffer((1,), acc_t)
        g_in = T.decl_buffer((1,), "int32")
        g_sum = T.decl_buffer((1,), "int32")
        gate = T.decl_buffer((4,), "int32")
        c_kept = T.decl_buffer((1,), "int32")
        c_add = T.decl_buffer((1,), "int32")
        c_new = T.decl_buffer((1,), "int32")
        c_tanh = T.decl_buffer((1,), "int32")
        for t, u in T.grid(steps, n):
            for g in range(4):
                acc[0] = bias[g, u]
                for k in range(n_in):
                    acc[0] = acc[0] + wide((T.Cast("int32", x[0, t, k]) - x_zp) * T.Cast("int32", wx[g, u, k]))
                g_in[0] = fc_out(acc[0], qp[4 * g], qp[4 * g + 1])
                acc[0] = T.Cast(acc_t, 0)
                if t == 0:  # the previous hidden state: the state argument, then the previous output row
                    for k in range(n):
                        acc[0] = acc[0] + wide((T.Cast("int32", hidden[k]) - h_zp) * T.Cast("int32", wh[g, u, k]))
                else:
                    for k in range(n):
                        acc[0] = acc[0] + wide((T.Cast("int32", out[0, t - 1, k]) - h_zp) * T.Cast("int32", wh[g, u, k]))
                g_sum[0] = _sat16(g_in[0] + fc_out(acc[0], qp[4 * g + 2], qp[4 * g + 3]))
                if g == 2:
                    gate[g] = _tanh16(lut, g_sum[0] * 3)
                else:
                    gate[g] = _sigmoid16(lut, g_sum[0] * 3)
            c_kept[0] = _sat16(multiply_by_quantized_multiplier(gate[1] * T.Cast("int32", cell[u]), m_fc, s_fc))
            c_add[0] = _sat16(multiply_by_quantized_multiplier(gate[0] * gate[2], m_ic, s_ic))
            if clip > 0:
                c_new[0] = T.min(T.max(_sat16(c_kept[0] + c_add[0]), -clip), clip)
            else:
                c_new[0] = _sat16(c_kept[0] + c_add[0])
            cell[u] = T.Cast("int16", c_new[0])
            c_tanh[0] = _tanh16(lut, _tanh_input(c_new[0], power))
            out[0, t, u] = clamp_to_int8(multiply_by_quantized_multiplier(c_tanh[0] * gate[3], m_h, s_h) + h_zp, int(info.min), int(info.max), act)
        for u in range(n):
            hidden[u] = out[0, steps - 1, u]

    return lstm


# -- float32 ---------------------------------------------------------------------------------------------------------
# TFLM's float LSTM (lstm_eval.h, EvalLstm<float, float, float, float>): per gate an input fully connected layer
# (sum from 0.f in input order, plus the bias), a recurrent one (no bias), their sum, then the gate's nonlinearity
# (reference_ops::Logistic: 1 above 16.619047f, exp(x) below -9, else 1 / (1 + exp(-x)); std::tanh); the cell
# c = f * c + i * g, clipped to +-cell_clip when that is positive; the hidden state h = tanh(c) * o. Every
# fully connected output and product is clamped to [lowest, max] float (TFLM's "no activation" range).

FLOAT_STATE_PARAMS = (4, 5)  # positions of the hidden and cell state among the float kernel's parameters
_FLT_MAX = 3.4028234663852886e38
_SIGMOID_UPPER = 16.619047164916992  # float32 exactly (TFLM's cutoff_upper)


def float_initial_state(batch: int, n_cell: int) -> tuple[np.ndarray, np.ndarray]:
    """TFLM's reset values of float variable tensors: zeros."""
    return np.zeros((batch, n_cell), np.float32), np.zeros((batch, n_cell), np.float32)


def _no_act(v):
    return tirx.Min(tirx.Max(v, tirx.const(-_FLT_MAX, "float32")), tirx.const(_FLT_MAX, "float32"))


def _sigmoid_f32(v):
    one = tirx.const(1.0, "float32")
    return tirx.if_then_else(
        v > tirx.const(_SIGMOID_UPPER, "float32"), one,
        tirx.if_then_else(v < tirx.const(-9.0, "float32"), tirx.exp(v), one / (one + tirx.exp(-v))),
    )  # fmt: skip


def lstm_float(steps: int, batch: int, n_in: int, n: int, time_major: bool, cell_clip: float, cell_tanh: bool = True):
    """The float kernel: x [T, B, I] (time-major) or [B, T, I], wx [4, N, I], wh [4, N, N], bias [4, N] (rows in
    GATES order), hidden [B, N] and cell [B, N] (state, read and updated), out shaped like x with N features.

    Unit by unit as the int8 kernel: a unit's four gates need the whole previous hidden state (the previous
    output row, the state argument before the first step) and give that unit's cell and output; the last
    output row of each batch becomes its hidden state at the end. ``cell_tanh``: the cell gate's nonlinearity
    is tanh (the fused activation TANH), else the sigmoid."""
    from tvm.script import tirx as T

    x_shape = (steps, batch, n_in) if time_major else (batch, steps, n_in)
    o_shape = (steps, batch, n) if time_major else (batch, steps, n)
    clip = float(np.float32(cell_clip))

    def at(buf, b, t, k):
        return buf[t, b, k] if time_major else buf[b, t, k]

    def cell_act(v):
        return tirx.tanh(v) if cell_tanh else _sigmoid_f32(v)

    @T.prim_func
    def lstm_f32(
        x: T.Buffer(x_shape, "float32"), wx: T.Buffer((4, n, n_in), "float32"), wh: T.Buffer((4, n, n), "float32"),
        bias: T.Buffer((4, n), "float32"), hidden: T.Buffer((batch, n), "float32"), cell: T.Buffer((batch, n), "float32"),
        out: T.Buffer(o_shape, "float32"),
    ):
        # one scalar per value, each stored once per iteration (see lstm_integer)
        acc_in = T.decl_buffer((1,), "float32")
        acc_rec = T.decl_buffer((1,), "float32")
        g_sum = T.decl_buffer((1,), "float32")
        gate = T.decl_buffer((4,), "float32")
        c_kept = T.decl_buffer((1,), "float32")
        c_add = T.decl_buffer((1,), "float32")
        c_new = T.decl_buffer((1,), "float32")
        for b, t, u in T.grid(batch, steps, n):
            for g in range(4):
                acc_in[0] = T.float32(0)
                for k in range(n_in):
                    acc_in[0] = acc_in[0] + at(x, b, t, k) * wx[g, u, k]
                acc_rec[0] = T.float32(0)
                if t == 0:
                    for k in range(n):
                        acc_rec[0] = acc_rec[0] + hidden[b, k] * wh[g, u, k]
                else:
                    for k in range(n):
                        acc_rec[0] = acc_rec[0] + at(out, b, t - 1, k) * wh[g, u, k]
                g_sum[0] = _no_act(acc_in[0] + bias[g, u]) + _no_act(acc_rec[0])
                if g == 2:
                    gate[g] = cell_act(g_sum[0])
                else:
                    gate[g] = _sigmoid_f32(g_sum[0])
            c_kept[0] = _no_act(gate[1] * cell[b, u])
            c_add[0] = _no_act(gate[0] * gate[2])
            if clip > 0:
                c_new[0] = T.max(T.min(T.float32(clip), c_kept[0] + c_add[0]), T.float32(-clip))
            else:
                c_new[0] = c_kept[0] + c_add[0]
            cell[b, u] = c_new[0]
            if time_major:
                out[t, b, u] = _no_act(T.tanh(c_new[0]) * gate[3])
            else:
                out[b, t, u] = _no_act(T.tanh(c_new[0]) * gate[3])
        for b, u in T.grid(batch, n):
            hidden[b, u] = at(out, b, steps - 1, u)

    return lstm_f32
