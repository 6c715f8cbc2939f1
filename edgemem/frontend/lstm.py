"""Lower an integer UNIDIRECTIONAL_SEQUENCE_LSTM (TVM's TFLite frontend has only the float one): TFLite's
"8x8->16" (int8 activations, int32 biases) and "16x8->16" (int16 activations, int64 biases) LSTMs, both with
int8 weights and an int16 cell whose scale is a power of two.

The operator becomes one ``call_tir`` to edgemem's integer LSTM kernel (kernels/lstm.py): its arithmetic
(int16 gates, table sigmoid/tanh, fixed-point cell update) has no QDQ form for integerize to recognise.
Weights, biases and the per-gate multipliers are constants (flash); the hidden and cell state are state
tensors (PrimFunc attribute ``edgemem.state``: kept across invocations, outside the arena, initialised to
TFLM's reset values). Registered for int8 and int16 by frontend/ops/recurrent.py (next to the float LSTM).
"""

from __future__ import annotations

import numpy as np

from ..kernels import kernel_attrs
from ..kernels import lstm as lstm_kernel

# input positions in the TFLite operator (lstm_shared.h)
_X, _WX, _WH, _BIAS, _HIDDEN, _CELL = 0, (1, 2, 3, 4), (5, 6, 7, 8), (12, 13, 14, 15), 18, 19
_PEEPHOLE, _PROJECTION, _LAYER_NORM = (9, 10, 11), (16, 17), (20, 21, 22, 23)
_TANH = 4  # TFLite ActivationFunctionType.TANH
OP = "UNIDIRECTIONAL_SEQUENCE_LSTM"


def _check_variant(ctx, act: str, opts) -> None:
    """Refuse the LSTM variants the kernel does not compute, rather than compute something else."""
    what_lstm = f"{act} LSTM"
    if opts is None:
        ctx.refuse(f"{what_lstm} without UnidirectionalSequenceLSTMOptions.")
    for group, what in ((_PEEPHOLE, "peephole connections"), (_PROJECTION, "a projection layer"), (_LAYER_NORM, "layer normalisation")):
        if any(ctx.present(i) for i in group):
            ctx.refuse(f"{what_lstm} with {what} is not supported yet (TFLite Micro's LSTM computes the plain LSTM only).")
    if not all(ctx.present(i) for i in (_X, *_WX, *_WH, *_BIAS, _HIDDEN, _CELL)):
        ctx.refuse(f"{what_lstm} without an input gate (CIFG) or without biases is not supported yet.")
    if opts.FusedActivationFunction() != _TANH:
        ctx.refuse(f"{what_lstm} whose cell activation is not TANH (TFLite activation {opts.FusedActivationFunction()}) is not supported yet.")
    bias = lstm_kernel.BIAS_DTYPE[act]
    dtypes = [ctx.dtype(ctx.inputs[i]) for i in (_X, *_WX, *_WH, _HIDDEN, _CELL, *_BIAS)] + [ctx.dtype(ctx.outputs[0])]
    if dtypes != [act] + ["int8"] * 8 + [act, "int16"] + [bias] * 4 + [act]:
        ctx.refuse(f"{what_lstm} with tensor types {dtypes} is not supported (expected {act} activations, hidden state and "
                   f"output, int8 weights, an int16 cell, {bias} biases: TFLite Micro's integer LSTMs).")  # fmt: skip


def _scale_zp(ctx, t, what: str, act: str) -> tuple[float, int]:
    q = ctx.quant(t)
    if q is None or q[0].size != 1:
        ctx.refuse(f"{act} LSTM: the {what} needs one (per-tensor) quantization scale.")
    return float(q[0][0]), int(q[1][0])


def lower(ctx):
    """The Relax expression of an int8 or int16 LSTM's output (ctx: registry.OpContext)."""
    import tflite
    from tvm import relax

    act = ctx.dtype(ctx.inputs[_X])
    opts = ctx.options(tflite.UnidirectionalSequenceLSTMOptions)
    _check_variant(ctx, act, opts)
    x_shape = list(ctx.shape(ctx.inputs[_X]))
    if len(x_shape) != 3:
        ctx.refuse(f"{act} LSTM input of shape {x_shape}; expected [batch, time, features].")
    batch, steps = (x_shape[1], x_shape[0]) if opts.TimeMajor() else (x_shape[0], x_shape[1])
    if batch != 1:
        ctx.refuse(f"{act} LSTM with batch {batch}: edgemem runs batch 1.")
    n_in = x_shape[2]
    values = {i: ctx.value(ctx.inputs[i]) for i in (*_WX, *_WH, *_BIAS)}
    if any(v is None for v in values.values()):
        ctx.refuse(f"{act} LSTM whose weights or biases are not constants.")
    wx = np.stack([values[i] for i in _WX]).astype(np.int8)
    wh = np.stack([values[i] for i in _WH]).astype(np.int8)
    bias = np.stack([values[i].reshape(-1) for i in _BIAS]).astype(lstm_kernel.BIAS_DTYPE[act])
    n_cell = wx.shape[1]
    if wx.shape != (4, n_cell, n_in) or wh.shape != (4, n_cell, n_cell) or bias.shape != (4, n_cell):
        ctx.refuse(f"{act} LSTM weight shapes {wx.shape}, {wh.shape}, {bias.shape} do not match input {x_shape}.")
    for i, what in ((_HIDDEN, "hidden state"), (_CELL, "cell state")):
        if ctx.value(ctx.inputs[i]) is not None:
            ctx.refuse(f"{act} LSTM whose {what} is a constant; TFLite's LSTM state is a variable tensor.")
        if int(np.prod(ctx.shape(ctx.inputs[i]))) != n_cell:
            ctx.refuse(f"{act} LSTM whose {what} has shape {list(ctx.shape(ctx.inputs[i]))}; expected {n_cell} elements.")
    in_scale, in_zp = _scale_zp(ctx, ctx.inputs[_X], "input", act)
    hidden_scale, hidden_zp = _scale_zp(ctx, ctx.inputs[_HIDDEN], "hidden state", act)
    cell_scale, _ = _scale_zp(ctx, ctx.inputs[_CELL], "cell state", act)
    if abs(np.log2(cell_scale) - round(np.log2(cell_scale))) > 1e-6:
        ctx.refuse(f"{act} LSTM cell state scale {cell_scale} is not a power of two (TFLite requires one).")
    w_scales = {i: _scale_zp(ctx, ctx.inputs[i], "weights", act) for i in (*_WX, *_WH)}
    if any(zp != 0 for _, zp in w_scales.values()):
        ctx.refuse(f"{act} LSTM weights with a non-zero zero point.")
    q = lstm_kernel.lstm_quant(
        steps, n_in, n_cell, in_scale, in_zp, [w_scales[i][0] for i in _WX], [w_scales[i][0] for i in _WH],
        hidden_scale, hidden_zp, cell_scale, float(opts.CellClip()), act,
    )  # fmt: skip
    prim = kernel_attrs.with_state(lstm_kernel.lstm_integer(q), lstm_kernel.STATE_PARAMS)
    x = ctx.expr(ctx.inputs[_X])
    if opts.TimeMajor():
        x = ctx.reshape(x, [1, steps, n_in])
    hidden, cell = lstm_kernel.initial_state(n_cell, hidden_zp, act)
    args = [x, wx, wh, relax.const(bias, str(bias.dtype)), np.array(q.fc, np.int32), np.array(lstm_kernel.SIGMOID_TABLE, np.int32),
            hidden, cell]  # fmt: skip
    out = ctx.emit(OP, prim, args, (1, steps, n_cell), act, macs=4 * steps * n_cell * (n_in + n_cell))
    out_shape = list(ctx.shape(ctx.outputs[0]))
    return out if out_shape == [1, steps, n_cell] else ctx.reshape(out, out_shape)
