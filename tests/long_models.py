"""Long int8 models written with the flatbuffer builder (examples/make_example_model.py), for the time-limit
tests and benchmarks/time_limits.py (issue 30: a hostile model must not make the build run away):

    chain_model(n)    n cheap operators in one chain: depthwise 1x1 + RELU, ADD of a constant, RELU, RESHAPE
    fanout_model(n)   one input read by n depthwise 1x1 branches, summed by a chain of n - 1 ADDs

Every operator works on 128 bytes ([1,4,4,8] int8), so lowering is quick and the figures are small; what grows
is the number of operators the pass search and the schedulers see.
"""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "examples"))
import make_example_model as mm  # noqa: E402

_Q = {"scale": [0.05], "zero_point": [-3]}
_SHAPES = ((1, 4, 4, 8), (1, 2, 8, 8))  # a RESHAPE alternates between them


def _depthwise(mb, rng, name, x, shape):
    c = shape[3]
    ws = (np.full(c, 0.01) * rng.uniform(0.5, 1.5, c)).astype(np.float32)
    w = mb.const(f"{name}/w", rng.integers(-127, 128, (1, 1, 1, c)).astype(np.int8), mm.qparams(ws, 0, 3))
    b = mb.const(f"{name}/b", rng.integers(-200, 200, c).astype(np.int32), mm.qparams(ws * np.float32(_Q["scale"][0]), 0, 0))
    y = mb.tensor(name, shape, np.int8, _Q)
    mb.op(mm.OP.DEPTHWISE_CONV_2D, [x, w, b], [y], *mm.depthwise_options(1, mm.PAD.SAME, mm.ACT.RELU), version=3)
    return y


def _add(mb, name, a, b, shape):
    y = mb.tensor(name, shape, np.int8, _Q)
    mb.op(mm.OP.ADD, [a, b], [y], *mm.add_options(mm.ACT.NONE), version=2)
    return y


def chain_model(n: int, seed: int = 0) -> bytes:
    """x[1,4,4,8] -> n operators in one chain, cycling depthwise 1x1 (RELU), ADD of a constant, RELU, RESHAPE."""
    rng = np.random.default_rng(seed)
    mb = mm.ModelBuilder(description=f"edgemem chain of {n}")
    x = mb.tensor("x", _SHAPES[0], np.int8, _Q)
    cur, shape = x, _SHAPES[0]
    for i in range(n):
        kind = i % 4
        if kind == 0:
            cur = _depthwise(mb, rng, f"dw{i}", cur, shape)
        elif kind == 1:
            k = mb.const(f"k{i}", rng.integers(-128, 128, shape[3]).astype(np.int8), _Q)
            cur = _add(mb, f"add{i}", cur, k, shape)
        elif kind == 2:
            y = mb.tensor(f"relu{i}", shape, np.int8, _Q)
            mb.op(mm.OP.RELU, [cur], [y])
            cur = y
        else:
            shape = _SHAPES[1] if shape == _SHAPES[0] else _SHAPES[0]
            y = mb.tensor(f"reshape{i}", shape, np.int8, _Q)
            mb.op(mm.OP.RESHAPE, [cur], [y], *mm.reshape_options(shape))
            cur = y
    return mb.serialize([x], [cur])


def fanout_model(n: int, seed: int = 0) -> bytes:
    """x[1,4,4,8] read by n depthwise 1x1 branches (n >= 2), their outputs summed by a chain of n - 1 ADDs: n
    operators ready at once, in any order."""
    rng = np.random.default_rng(seed)
    mb = mm.ModelBuilder(description=f"edgemem fan-out of {n}")
    shape = _SHAPES[0]
    x = mb.tensor("x", shape, np.int8, _Q)
    branches = [_depthwise(mb, rng, f"dw{i}", x, shape) for i in range(n)]
    acc = branches[0]
    for i, b in enumerate(branches[1:], 1):
        acc = _add(mb, f"sum{i}", acc, b, shape)
    return mb.serialize([x], [acc])
