"""Import an int8 UNIDIRECTIONAL_SEQUENCE_LSTM (TVM's TFLite frontend has only the float one).

The operator becomes one ``call_tir`` to edgemem's integer LSTM kernel (kernels/lstm.py) straight from the
frontend: its arithmetic (int16 gates, table sigmoid/tanh, fixed-point cell update) has no QDQ form for
integerize to recognise. Weights, biases and the per-gate multipliers are constants (flash); the hidden and
cell state are state tensors (PrimFunc attribute ``edgemem.state``: kept across invocations, outside the
arena, initialised to TFLM's reset values).
"""

from __future__ import annotations

import numpy as np

from ..errors import UnsupportedModelError
from .footprint import builtin_options
from ..kernels import lstm as lstm_kernel

# input positions in the TFLite operator (the layout of TFLite's LSTM kernels)
_X, _WX, _WH, _BIAS, _HIDDEN, _CELL = 0, (1, 2, 3, 4), (5, 6, 7, 8), (12, 13, 14, 15), 18, 19
_PEEPHOLE, _PROJECTION, _LAYER_NORM = (9, 10, 11), (16, 17), (20, 21, 22, 23)
_TANH = 4  # TFLite ActivationFunctionType.TANH


def _options(op):
    from tflite.UnidirectionalSequenceLSTMOptions import UnidirectionalSequenceLSTMOptions

    return builtin_options(op, UnidirectionalSequenceLSTMOptions)


def _scale_zp(wrapper, what: str) -> tuple[float, int]:
    q = wrapper.tensor.Quantization()
    if q is None or q.ScaleLength() != 1:
        raise UnsupportedModelError(f"int8 LSTM: the {what} needs one (per-tensor) quantization scale.")
    return float(q.Scale(0)), int(q.ZeroPoint(0)) if q.ZeroPointLength() else 0


def _check_variant(conv, tensors, opts) -> None:
    """Refuse the LSTM variants the kernel does not compute, rather than compute something else."""
    present = lambda i: i < len(tensors) and tensors[i].tensor_idx >= 0  # noqa: E731
    for group, what in ((_PEEPHOLE, "peephole connections"), (_PROJECTION, "a projection layer"), (_LAYER_NORM, "layer normalisation")):
        if any(present(i) for i in group):
            raise UnsupportedModelError(f"int8 LSTM with {what} is not supported yet.")
    if not all(present(i) for i in (_X, *_WX, *_WH, *_BIAS, _HIDDEN, _CELL)):
        raise UnsupportedModelError("int8 LSTM without an input gate (CIFG) or without biases is not supported yet.")
    if opts.FusedActivationFunction() != _TANH:
        raise UnsupportedModelError(f"int8 LSTM whose cell activation is not TANH (TFLite activation {opts.FusedActivationFunction()}) is not supported yet.")
    dtypes = [conv.get_tensor_type_str(tensors[i].tensor.Type()) for i in (_X, *_WX, *_WH, _HIDDEN, _CELL, *_BIAS)]
    if dtypes != ["int8"] * 10 + ["int16"] + ["int32"] * 4:
        raise UnsupportedModelError(f"int8 LSTM with tensor types {dtypes} is not supported (expected int8 activations and weights, an int16 cell, int32 biases).")


def convert_lstm(conv, op):
    """The Relax expression for the operator's int8 output (conv: the frontend's OperatorConverter)."""
    from tvm import relax

    tensors = conv.get_input_tensors(op)
    opts = _options(op)
    _check_variant(conv, tensors, opts)
    x_shape = [int(d) for d in conv.get_tensor_shape(tensors[_X])]
    if len(x_shape) != 3:
        raise UnsupportedModelError(f"int8 LSTM input of shape {x_shape}; expected [batch, time, features].")
    batch, steps = (x_shape[1], x_shape[0]) if opts.TimeMajor() else (x_shape[0], x_shape[1])
    if batch != 1:
        raise UnsupportedModelError(f"int8 LSTM with batch {batch}: edgemem runs batch 1.")
    n_in = x_shape[2]
    wx = np.stack([conv.get_tensor_value(tensors[i]) for i in _WX]).astype(np.int8)
    wh = np.stack([conv.get_tensor_value(tensors[i]) for i in _WH]).astype(np.int8)
    bias = np.stack([conv.get_tensor_value(tensors[i]) for i in _BIAS]).astype(np.int32)
    n_cell = wx.shape[1]
    if wx.shape != (4, n_cell, n_in) or wh.shape != (4, n_cell, n_cell) or bias.shape != (4, n_cell):
        raise UnsupportedModelError(f"int8 LSTM weight shapes {wx.shape}, {wh.shape}, {bias.shape} do not match input {x_shape}.")
    in_scale, in_zp = _scale_zp(tensors[_X], "input")
    hidden_scale, hidden_zp = _scale_zp(tensors[_HIDDEN], "hidden state")
    cell_scale, _ = _scale_zp(tensors[_CELL], "cell state")
    if abs(np.log2(cell_scale) - round(np.log2(cell_scale))) > 1e-6:
        raise UnsupportedModelError(f"int8 LSTM cell state scale {cell_scale} is not a power of two (TFLite requires one).")
    for i in (*_WX, *_WH):
        if _scale_zp(tensors[i], "weights")[1] != 0:
            raise UnsupportedModelError("int8 LSTM weights with a non-zero zero point.")
    q = lstm_kernel.lstm_quant(
        steps, n_in, n_cell, in_scale, in_zp, [_scale_zp(tensors[i], "weights")[0] for i in _WX],
        [_scale_zp(tensors[i], "weights")[0] for i in _WH], hidden_scale, hidden_zp, cell_scale, float(opts.CellClip()),
    )  # fmt: skip
    state_params = ",".join(str(i) for i in lstm_kernel.STATE_PARAMS)
    prim = (lstm_kernel.lstm_int8(q).with_attr("global_symbol", "lstm").with_attr("edgemem.op", "UNIDIRECTIONAL_SEQUENCE_LSTM")
            .with_attr("edgemem.macs", 4 * steps * n_cell * (n_in + n_cell)).with_attr("edgemem.state", state_params))  # fmt: skip
    gv = conv.bb.add_func(prim, "lstm")
    x = conv.get_tensor_expr(tensors[_X])
    if opts.TimeMajor():
        x = conv.bb.emit(relax.op.reshape(x, [1, steps, n_in]))
    hidden, cell = lstm_kernel.initial_state(n_cell, hidden_zp)
    args = [x, relax.const(wx), relax.const(wh), relax.const(bias), relax.const(np.array(q.fc, np.int32)),
            relax.const(np.array(lstm_kernel.SIGMOID_TABLE, np.int32)), relax.const(hidden), relax.const(cell)]  # fmt: skip
    out = conv.bb.emit(relax.call_tir(gv, args, relax.TensorType((1, steps, n_cell), "int8")))
    out_shape = [int(d) for d in conv.get_tensor_shape(conv.get_output_tensors(op)[0])]
    return out if out_shape == [1, steps, n_cell] else relax.op.reshape(out, out_shape)
