"""float32 UNIDIRECTIONAL_SEQUENCE_LSTM (TVM's converter takes only the coupled input-forget form, which TFLM
does not run): one call to edgemem's float LSTM kernel (kernels/lstm.py, TFLM's float arithmetic in TFLM's
order), the hidden and cell state as state tensors (PrimFunc attribute ``edgemem.state``: kept across
invocations outside the arena, reset to zeros as TFLM resets float variable tensors). The integer forms (int8
and int16 activations, TFLite's 8x8->16 and 16x8->16 LSTMs) are frontend/lstm.py's, registered here."""

from __future__ import annotations

import numpy as np

from ...kernels import kernel_attrs
from ...kernels import lstm as lstm_kernel
from .. import lstm as integer_lstm
from .registry import OpContext, lowering

# input positions in the TFLite operator (lstm_shared.h)
_X, _WX, _WH, _BIAS, _HIDDEN, _CELL = 0, (1, 2, 3, 4), (5, 6, 7, 8), (12, 13, 14, 15), 18, 19
_PEEPHOLE, _PROJECTION, _LAYER_NORM = (9, 10, 11), (16, 17), (20, 21, 22, 23)
_TANH = 4  # TFLite ActivationFunctionType.TANH


@lowering("UNIDIRECTIONAL_SEQUENCE_LSTM", types=("float32",))
def lstm_float(ctx: OpContext):
    import tflite

    opts = ctx.options(tflite.UnidirectionalSequenceLSTMOptions)
    if opts is None:
        ctx.refuse("it has no UnidirectionalSequenceLSTMOptions.")
    for group, what in ((_PEEPHOLE, "peephole connections"), (_PROJECTION, "a projection layer"), (_LAYER_NORM, "layer normalisation")):
        if any(ctx.present(i) for i in group):
            ctx.refuse(f"it has {what}; edgemem's float LSTM (like TFLite Micro's) computes the plain LSTM only.")
    if not all(ctx.present(i) for i in _WX[:1] + _WH[:1]):
        ctx.refuse("it has no input gate (coupled input-forget gate, CIFG); edgemem's float LSTM (like TFLite Micro's) computes the plain LSTM only.")
    if not all(ctx.present(i) for i in (_X, *_WX, *_WH, *_BIAS, _HIDDEN, _CELL)):
        ctx.refuse("some of its weights, biases or state tensors are left out; edgemem's float LSTM needs all four gates' weights and biases and both states.")
    if opts.FusedActivationFunction() != _TANH:
        ctx.refuse(f"its cell activation is not TANH (TFLite activation {opts.FusedActivationFunction()}); TFLite Micro's LSTM computes only TANH (or sigmoid, which the schema cannot name).")
    x_t, y_t = ctx.inputs[_X], ctx.outputs[0]
    tensors = [ctx.inputs[i] for i in (_X, *_WX, *_WH, *_BIAS, _HIDDEN, _CELL)]
    dtypes = [ctx.dtype(t) for t in tensors] + [ctx.dtype(y_t)]
    if set(dtypes) != {"float32"}:
        ctx.refuse(f"its tensors are {dtypes}: edgemem's float LSTM takes float32 activations, weights, biases and state "
                   "(a hybrid LSTM with int8 weights and float activations is not supported).")  # fmt: skip
    x_shape, y_shape = ctx.shape(x_t), ctx.shape(y_t)
    if len(x_shape) != 3 or len(y_shape) != 3:
        ctx.refuse(f"its input {list(x_shape)} and output {list(y_shape)} are not 3-D ([batch, time, features] or time-major).")
    time_major = bool(opts.TimeMajor())
    steps, batch = (x_shape[0], x_shape[1]) if time_major else (x_shape[1], x_shape[0])
    n_in = x_shape[2]
    wx = [ctx.value(ctx.inputs[i]) for i in _WX]
    wh = [ctx.value(ctx.inputs[i]) for i in _WH]
    bias = [ctx.value(ctx.inputs[i]) for i in _BIAS]
    if any(v is None for v in wx + wh + bias):
        ctx.refuse("its weights or biases are not constants.")
    n = int(wx[0].shape[0])
    if any(w.shape != (n, n_in) for w in wx) or any(w.shape != (n, n) for w in wh) or any(v.size != n for v in bias):
        ctx.refuse(f"its weight shapes {[list(w.shape) for w in wx + wh]} and biases {[v.size for v in bias]} do not match input {list(x_shape)}.")
    for i, what in ((_HIDDEN, "hidden state"), (_CELL, "cell state")):
        if ctx.value(ctx.inputs[i]) is not None:
            ctx.refuse(f"its {what} is a constant; TFLite's LSTM state is a variable tensor.")
        if int(np.prod(ctx.shape(ctx.inputs[i]))) != batch * n:
            ctx.refuse(f"its {what} has shape {list(ctx.shape(ctx.inputs[i]))}; expected {batch * n} elements (batch {batch} x {n} units).")
    if y_shape != ((steps, batch, n) if time_major else (batch, steps, n)):
        ctx.refuse(f"its output shape {list(y_shape)} does not match input {list(x_shape)} and {n} units.")
    prim = lstm_kernel.lstm_float(steps, batch, n_in, n, time_major, float(opts.CellClip()))
    prim = kernel_attrs.with_state(prim, lstm_kernel.FLOAT_STATE_PARAMS)
    hidden, cell = lstm_kernel.float_initial_state(batch, n)
    args = [ctx.expr(x_t), np.stack(wx).astype(np.float32), np.stack(wh).astype(np.float32),
            np.stack([v.reshape(-1) for v in bias]).astype(np.float32), hidden, cell]  # fmt: skip
    macs = 4 * steps * batch * n * (n_in + n)
    return ctx.emit("UNIDIRECTIONAL_SEQUENCE_LSTM", prim, args, y_shape, "float32", macs)


@lowering("UNIDIRECTIONAL_SEQUENCE_LSTM", types=("int8", "int16"))
def lstm_integer(ctx: OpContext):
    return integer_lstm.lower(ctx)
