"""The output shape the common TFLite operators compute from their inputs' shapes and options, compared with the
declared one (validate_model.py). TFLite Micro and edgemem's planner trust the declared shapes: one that disagrees
would make a kernel write past its tensor or leave part of it unwritten.

An operator whose shape depends on something unknown here (a tensor computed at run time, an operator not listed)
is not checked; the operators listed are the ones most models are made of.
"""

from __future__ import annotations

import numpy as np

from .footprint import builtin_options, indices


class _Refused(Exception):
    """The operator's inputs cannot produce any output (e.g. shapes that do not broadcast)."""


class _Op:
    def __init__(self, m, i: int):
        self.m, self.i = m, i
        self.op = m.sg.Operators(i)
        self.name = m.op_names[i]
        self.ins = indices(self.op.InputsAsNumpy())

    def shape(self, k: int) -> tuple[int, ...] | None:
        t = self.ins[k] if k < len(self.ins) else -1
        return None if t < 0 else self.m.shape(t)

    def value(self, k: int) -> np.ndarray | None:
        """Input k's constant value, or None when it is computed at run time."""
        from .fold import _buffer_value

        t = self.ins[k] if k < len(self.ins) else -1
        return None if t < 0 or not self.m.is_constant(t) else _buffer_value(self.m.model, self.m.tensors[t])

    def options(self, name: str):
        import tflite

        return builtin_options(self.op, getattr(tflite, name))


def _window(size: int, kernel: int, stride: int, dilation: int, padding: int) -> int:
    if stride <= 0 or dilation <= 0 or kernel <= 0:
        raise _Refused(f"stride {stride}, dilation {dilation} and kernel size {kernel} must be positive")
    if padding == 0:  # SAME
        return -(-size // stride)
    return -(-(size - (kernel - 1) * dilation) // stride)  # VALID


def _conv(o: _Op):
    x, w, opts = o.shape(0), o.shape(1), o.options("Conv2DOptions")
    if opts is None or len(x) != 4 or len(w) != 4:
        return None
    return (x[0], _window(x[1], w[1], opts.StrideH(), opts.DilationHFactor(), opts.Padding()),
            _window(x[2], w[2], opts.StrideW(), opts.DilationWFactor(), opts.Padding()), w[0])  # fmt: skip


def _depthwise(o: _Op):
    x, w, opts = o.shape(0), o.shape(1), o.options("DepthwiseConv2DOptions")
    if opts is None or len(x) != 4 or len(w) != 4:
        return None
    return (x[0], _window(x[1], w[1], opts.StrideH(), opts.DilationHFactor(), opts.Padding()),
            _window(x[2], w[2], opts.StrideW(), opts.DilationWFactor(), opts.Padding()), w[3])  # fmt: skip


def _pool(o: _Op):
    x, opts = o.shape(0), o.options("Pool2DOptions")
    if opts is None or len(x) != 4:
        return None
    return (x[0], _window(x[1], opts.FilterHeight(), opts.StrideH(), 1, opts.Padding()),
            _window(x[2], opts.FilterWidth(), opts.StrideW(), 1, opts.Padding()), x[3])  # fmt: skip


def _fully_connected(o: _Op):
    x, w = o.shape(0), o.shape(1)
    if x is None or w is None or len(w) != 2:
        return None
    opts = o.options("FullyConnectedOptions")
    units, depth = w
    elements = int(np.prod(x, dtype=object))  # Python ints: a corrupt shape cannot wrap around
    if depth <= 0 or elements % depth:
        raise _Refused(f"its input of shape {list(x)} has {elements} elements, not a multiple of the weights' depth {depth}")
    if opts is not None and opts.KeepNumDims():
        return (*x[:-1], units) if x and x[-1] == depth else None
    return (elements // depth, units)


def _same(o: _Op):
    return o.shape(0)


def _broadcast(o: _Op):
    a, b = o.shape(0), o.shape(1)
    if a is None or b is None:
        return None
    try:
        return tuple(int(d) for d in np.broadcast_shapes(a, b))
    except ValueError:
        raise _Refused(f"its operands of shapes {list(a)} and {list(b)} do not broadcast") from None


def _reshape(o: _Op):
    """Only the element count: the output shape itself may come from a tensor computed at run time."""
    x = o.shape(0)
    out = o.m.shape(indices(o.op.OutputsAsNumpy())[0])
    if x is None or any(d < 0 for d in (*x, *out)):
        return None
    if int(np.prod(x, dtype=object)) != int(np.prod(out, dtype=object)):
        raise _Refused(f"its input of shape {list(x)} has {int(np.prod(x, dtype=object))} elements, its output of shape "
                       f"{list(out)} {int(np.prod(out, dtype=object))}")  # fmt: skip
    return out


def _concatenation(o: _Op):
    opts = o.options("ConcatenationOptions")
    shapes = [o.shape(k) for k in range(len(o.ins))]
    if opts is None or not shapes or any(s is None or len(s) != len(shapes[0]) for s in shapes) or not shapes[0]:
        return None
    axis = opts.Axis() + (len(shapes[0]) if opts.Axis() < 0 else 0)
    if not 0 <= axis < len(shapes[0]):
        raise _Refused(f"its axis {opts.Axis()} is outside its inputs' rank {len(shapes[0])}")
    for s in shapes[1:]:
        if any(a != b for d, (a, b) in enumerate(zip(s, shapes[0])) if d != axis):
            raise _Refused(f"its inputs of shapes {[list(s) for s in shapes]} differ outside axis {axis}")
    return (*shapes[0][:axis], sum(s[axis] for s in shapes), *shapes[0][axis + 1:])


def _pad(o: _Op):
    x, pads = o.shape(0), o.value(1)
    if x is None or pads is None or pads.size != 2 * len(x):
        return None
    return tuple(int(d) + int(p[0]) + int(p[1]) for d, p in zip(x, pads.reshape(-1, 2)))


def _reduce(o: _Op):
    x, axes = o.shape(0), o.value(1)
    if x is None or axes is None:
        return None
    rank = len(x)
    axes = {int(a) + (rank if a < 0 else 0) for a in axes.reshape(-1)}
    if any(not 0 <= a < rank for a in axes):
        raise _Refused(f"its axes {sorted(axes)} are outside its input's rank {rank}")
    opts = o.options("ReducerOptions")
    if opts is not None and opts.KeepDims():
        return tuple(1 if d in axes else n for d, n in enumerate(x))
    return tuple(n for d, n in enumerate(x) if d not in axes)


_UNARY = ("SOFTMAX", "LOG_SOFTMAX", "LOGISTIC", "TANH", "RELU", "RELU6", "RELU_N1_TO_1", "RELU_0_TO_1", "HARD_SWISH",
          "LEAKY_RELU", "ELU", "GELU", "QUANTIZE", "DEQUANTIZE", "ABS", "NEG", "EXP", "LOG", "SQRT", "RSQRT", "SQUARE",
          "FLOOR", "CEIL", "ROUND", "SIN", "COS", "CAST", "LOGICAL_NOT", "L2_NORMALIZATION")  # fmt: skip
_BINARY = ("ADD", "SUB", "MUL", "DIV", "MAXIMUM", "MINIMUM", "SQUARED_DIFFERENCE", "POW", "FLOOR_DIV", "FLOOR_MOD",
           "LESS", "LESS_EQUAL", "GREATER", "GREATER_EQUAL", "EQUAL", "NOT_EQUAL", "LOGICAL_AND", "LOGICAL_OR", "PRELU")  # fmt: skip
INFER = {
    "CONV_2D": _conv, "DEPTHWISE_CONV_2D": _depthwise, "FULLY_CONNECTED": _fully_connected,
    "AVERAGE_POOL_2D": _pool, "MAX_POOL_2D": _pool, "L2_POOL_2D": _pool,
    "RESHAPE": _reshape, "SQUEEZE": _reshape, "EXPAND_DIMS": _reshape, "CONCATENATION": _concatenation,
    "PAD": _pad, "PADV2": _pad, "MIRROR_PAD": _pad,
    "MEAN": _reduce, "SUM": _reduce, "REDUCE_MAX": _reduce, "REDUCE_MIN": _reduce, "REDUCE_PROD": _reduce,
    **{name: _same for name in _UNARY}, **{name: _broadcast for name in _BINARY},
}  # fmt: skip


def check_shapes(m) -> None:
    """Refuse (ModelFileError) an operator of ``m`` (validate_model._Model) whose declared output shape is not the
    one it computes."""
    for i in range(m.sg.OperatorsLength()):
        o = _Op(m, i)
        infer = INFER.get(o.name)
        outs = indices(o.op.OutputsAsNumpy())
        if infer is None or not outs or any(t < 0 for t in o.ins[:1]):
            continue
        declared = m.shape(outs[0])
        if any(d < 0 for d in declared) or any(d < 0 for k in range(len(o.ins)) for d in (o.shape(k) or ())):
            continue  # a dynamic shape: refused with its own message (tflite_import.check_supported)
        try:
            inferred = infer(o)
        except _Refused as exc:
            raise m.malformed(f"{m.op(i)} cannot compute its output {m.tensor(outs[0])}: {exc}") from None
        if inferred is not None and tuple(inferred) != tuple(declared):
            inputs = ", ".join(f"{list(o.shape(k))}" for k in range(len(o.ins)) if o.ins[k] >= 0)
            raise m.malformed(f"{m.op(i)} computes an output of shape {list(inferred)} from its inputs ({inputs}), but its "
                              f"output {m.tensor(outs[0])} is declared {list(declared)}")  # fmt: skip
