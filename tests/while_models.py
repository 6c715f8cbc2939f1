"""Hand-made WHILE models (examples/make_example_model.py's flatbuffer writer, several subgraphs).

TensorFlow 2.21's converter crashes (SIGSEGV in its calibrator's FeedTensor, seen with faulthandler; the issue
tensorflow/tensorflow#75140 describes it: the WHILE kernel frees an output whose body passes its input through, the
calibrator then reads it) on the int8 GRU/LSTM models of gen_architectures.py, so the
int8 loops are written here the way the converter writes the float ones (tests/models/arch/gru-float32.tflite):
main -> WHILE(counter, state, sequence) -> FULLY_CONNECTED; cond: LESS(counter, steps); body: the counter's ADD,
a GATHER of step ``counter`` of the sequence, the cell, the sequence passed through. The initial state is a constant
zero tensor (``zero_state``: step 0's CONCATENATION then reads a constant) or computed from the input.
"""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "examples"))
import make_example_model as mm  # noqa: E402

FEATURES, UNITS, CLASSES = 8, 16, 4


def _q(scale, zp=0):
    return mm.qparams([scale], [zp])


def _scalar(mb, name: str, value, dtype=np.int32) -> int:
    """A rank-0 constant (ModelBuilder.const writes a 0-d array as shape [1], through np.ascontiguousarray)."""
    t = mb.const(name, np.array([value], dtype))
    mb.tensors[t].shape = ()
    return t


def _weights(rng, rows, cols, scale):
    return rng.integers(-127, 128, (rows, cols)).astype(np.int8), _q(scale)


def rnn_int8(steps: int = 100, seed: int = 7, runtime_steps: bool = False, cell=mm.OP.TANH, zero_state: bool = False) -> bytes:
    """An int8 Elman RNN (h = tanh(W [x_t; h] + b)) over ``steps`` steps as a WHILE loop, then a classifier.
    ``runtime_steps``: the trip count is a second model input (int32), so it is not known at build time;
    ``cell``: the body's activation (another unary operator in place of TANH); ``zero_state``: the state starts as
    a constant zero tensor (as Keras's does) rather than from the input's first two steps."""
    rng = np.random.default_rng(seed)
    mb = mm.ModelBuilder(description="edgemem test: int8 RNN as a WHILE loop")
    x = mb.tensor("x", (1, steps, FEATURES), np.int8, _q(1 / 128))
    seq = mb.tensor("seq", (steps, 1, FEATURES), np.int8, _q(1 / 128))
    mb.op(mm.OP.RESHAPE, [x, mb.const("seq_shape", np.array([steps, 1, FEATURES], np.int32))], [seq])
    zero = _scalar(mb, "zero", 0)
    if zero_state:
        h0 = mb.const("h0", np.zeros((1, UNITS), np.int8), _q(1 / 128))
    else:
        h0 = _state_from_input(mb, x)
    n = mb.tensor("n", (), np.int32) if runtime_steps else None
    carried = [zero, h0, seq] + ([n] if n is not None else [])
    outs = [mb.tensor("i_out", (), np.int32), mb.tensor("h_out", (1, UNITS), np.int8, _q(1 / 128)),
            mb.tensor("seq_out", (steps, 1, FEATURES), np.int8, _q(1 / 128))]  # fmt: skip
    outs += [mb.tensor("n_out", (), np.int32)] if n is not None else []
    mb.op(mm.OP.WHILE, carried, outs, *mm.while_options(1, 2))
    w, wq = _weights(rng, CLASSES, UNITS, 0.01)
    y = mb.tensor("y", (1, CLASSES), np.int8, _q(0.04, -2))
    bias = mb.const("y_bias", rng.integers(-300, 300, CLASSES).astype(np.int32), _q(0.01 / 128))
    mb.op(mm.OP.FULLY_CONNECTED, [outs[1], mb.const("y_w", w, wq), bias], [y], *mm.fully_connected_options())
    _cond(mb.subgraph("rnn/while_cond"), steps, runtime_steps)
    _body(mb.subgraph("rnn/while_body"), steps, rng, runtime_steps, cell)
    return mb.serialize([x] + ([n] if n is not None else []), [y])


def _state_from_input(mb, x) -> int:
    """The initial state from the input's first two steps (STRIDED_SLICE, RESHAPE)."""
    first = mb.tensor("first_steps", (1, 2, FEATURES), np.int8, _q(1 / 128))
    mb.op(mm.OP.STRIDED_SLICE, [x, mb.const("b0", np.array([0, 0, 0], np.int32)), mb.const("e0", np.array([1, 2, FEATURES], np.int32)),
                                mb.const("s0", np.array([1, 1, 1], np.int32))], [first], *_slice_options())  # fmt: skip
    h0 = mb.tensor("h0", (1, UNITS), np.int8, _q(1 / 128))
    mb.op(mm.OP.RESHAPE, [first, mb.const("h0_shape", np.array([1, UNITS], np.int32))], [h0])
    return h0


def _loop_inputs(sg, steps: int, runtime_steps: bool) -> list[int]:
    ins = [sg.tensor("i", (), np.int32), sg.tensor("h", (1, UNITS), np.int8, _q(1 / 128)),
           sg.tensor("seq", (steps, 1, FEATURES), np.int8, _q(1 / 128))]  # fmt: skip
    return ins + ([sg.tensor("n", (), np.int32)] if runtime_steps else [])


def _cond(sg, steps: int, runtime_steps: bool) -> None:
    sg.inputs = _loop_inputs(sg, steps, runtime_steps)
    limit = sg.inputs[3] if runtime_steps else _scalar(sg, "steps", steps)
    more = sg.tensor("more", (), np.bool_)
    sg.op(mm.OP.LESS, [sg.inputs[0], limit], [more])
    sg.outputs = [more]


def _body(sg, steps: int, rng, runtime_steps: bool, cell) -> None:
    sg.inputs = _loop_inputs(sg, steps, runtime_steps)
    i, h, seq = sg.inputs[:3]
    i1 = sg.tensor("i_next", (), np.int32)
    sg.op(mm.OP.ADD, [i, _scalar(sg, "one", 1)], [i1], *mm.add_options())
    xt = sg.tensor("x_t", (1, FEATURES), np.int8, _q(1 / 128))
    sg.op(mm.OP.GATHER, [seq, i], [xt], *_gather_options())
    xh = sg.tensor("xh", (1, FEATURES + UNITS), np.int8, _q(1 / 128))
    sg.op(mm.OP.CONCATENATION, [xt, h], [xh], *_concat_options())  # step 0: h is the constant zero state
    w, wq = _weights(rng, UNITS, FEATURES + UNITS, 0.004)
    bias = sg.const("b", rng.integers(-4000, 4000, UNITS).astype(np.int32), _q(0.004 / 128))
    s = sg.tensor("pre", (1, UNITS), np.int8, _q(0.03, 1))
    sg.op(mm.OP.FULLY_CONNECTED, [xh, sg.const("W", w, wq), bias], [s], *mm.fully_connected_options())
    h1 = sg.tensor("h_next", (1, UNITS), np.int8, _q(1 / 128))
    sg.op(cell, [s], [h1])
    sg.outputs = [i1, h1, seq] + sg.inputs[3:]


def if_float(condition: bool) -> bytes:
    """x float[1,8] -> IF(constant ``condition``, x): then RELU, else TANH -> y."""
    import tflite

    mb = mm.ModelBuilder(description="edgemem test: IF on a constant")
    x = mb.tensor("x", (1, 8), np.float32)
    y = mb.tensor("y", (1, 8), np.float32)
    cond = _scalar(mb, "cond", condition, np.bool_)

    def options(b):
        tflite.IfOptionsStart(b)
        tflite.IfOptionsAddThenSubgraphIndex(b, 1)
        tflite.IfOptionsAddElseSubgraphIndex(b, 2)
        return tflite.IfOptionsEnd(b)

    mb.op(mm.OP.IF, [cond, x], [y], mm.OPTS.IfOptions, options)
    for name, op in (("then", mm.OP.RELU), ("else", mm.OP.TANH)):
        sg = mb.subgraph(name)
        a, b = sg.tensor(f"{name}_in", (1, 8), np.float32), sg.tensor(f"{name}_out", (1, 8), np.float32)
        sg.op(op, [a], [b])
        sg.inputs, sg.outputs = [a], [b]
    return mb.serialize([x], [y])


def _slice_options():
    import tflite

    def fn(b):
        tflite.StridedSliceOptionsStart(b)
        return tflite.StridedSliceOptionsEnd(b)

    return mm.OPTS.StridedSliceOptions, fn


def _concat_options():
    import tflite

    def fn(b):
        tflite.ConcatenationOptionsStart(b)
        tflite.ConcatenationOptionsAddAxis(b, 1)
        return tflite.ConcatenationOptionsEnd(b)

    return mm.OPTS.ConcatenationOptions, fn


def _gather_options():
    import tflite

    def fn(b):
        tflite.GatherOptionsStart(b)
        tflite.GatherOptionsAddAxis(b, 0)
        return tflite.GatherOptionsEnd(b)

    return mm.OPTS.GatherOptions, fn


def write(tmp: Path, name: str, data: bytes) -> Path:
    path = Path(tmp) / name
    path.write_bytes(data)
    return path
