"""Converter-made models of the binary family (dev-only: run with the TensorFlow venv,
`/work/tfvenv/bin/python tests/models/gen_binary.py [FILTER]`): SUB, SQUARED_DIFFERENCE, DIV, MAXIMUM, MINIMUM,
ADD_N, FLOOR_DIV, FLOOR_MOD, the comparisons, LOGICAL_*, SELECT_V2, and float ADD/MUL with broadcasting and
fused activations; int8 (int8 and float edges) and float32; 16x8 (int16 activations, int16 or float edges) for
the operators TFLite Micro runs on int16 (SUB, SQUARED_DIFFERENCE, MAXIMUM, MINIMUM, ADD, MUL, CONCATENATION,
PAD). Writes tests/models/ops/<OPNAME>-<variant>-<int8|iofloat-int8|float32|int16|iofloat-int16>.tflite
and prints each model's operators (a model whose operator the converter rewrote away is reported and not written)."""

from __future__ import annotations

import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

import numpy as np  # noqa: E402
import tensorflow as tf  # noqa: E402

from convert import write_models  # noqa: E402

OUT = HERE / "ops"
keras = tf.keras
L = keras.layers


def two(shape_a, shape_b, fn, dtype="float32"):
    """A model of two inputs (batch 1 prepended) and fn(a, b)."""
    a = keras.Input(shape_a, dtype=dtype, name="a")
    b = keras.Input(shape_b, dtype=dtype, name="b")
    return keras.Model([a, b], L.Lambda(lambda t: fn(t[0], t[1]))([a, b]))


def one(shape, fn, dtype="float32"):
    x = keras.Input(shape, dtype=dtype, name="x")
    return keras.Model(x, L.Lambda(fn)(x))



C8 = np.linspace(-1.5, 1.2, 8).astype(np.float32)  # a per-channel constant
ROWS = np.linspace(-1.0, 1.0, 4).astype(np.float32).reshape(1, 4, 1)  # broadcasts against (4, 1, 8)
POS8 = np.linspace(0.5, 2.0, 8).astype(np.float32)  # positive divisors

ALL = ("int8", "int8f", "float32")
F = ("float32",)
I16 = ("int16", "int16f")  # 16x8: int16 activations (int16 edges, float edges)
ALL16 = ALL + I16
F16 = F + I16
S = (1, 4, 4, 8)[1:]

MODELS = [
    # SUB
    ("SUB", "same", lambda: two(S, S, lambda a, b: a - b), ALL16),
    ("SUB", "bcast-chan", lambda: two(S, (8,), lambda a, b: a - b), ALL16),
    ("SUB", "bcast-row-col", lambda: two((4, 1, 8), (1, 4, 1), lambda a, b: a - b), F),
    ("SUB", "bcast-both-const", lambda: one((4, 1, 8), lambda x: x - ROWS), ALL16),
    ("SUB", "const-chan-relu", lambda: one(S, lambda x: tf.nn.relu(x - C8)), ALL16),
    ("SUB", "scalar-minus-x-relu6", lambda: one(S, lambda x: tf.nn.relu6(0.5 - x)), ALL16),
    # SQUARED_DIFFERENCE
    ("SQUARED_DIFFERENCE", "same", lambda: two(S, S, tf.math.squared_difference), ALL16),
    ("SQUARED_DIFFERENCE", "bcast-chan", lambda: two(S, (8,), tf.math.squared_difference), ALL16),
    ("SQUARED_DIFFERENCE", "const", lambda: one(S, lambda x: tf.math.squared_difference(x, C8)), ALL16),
    # DIV
    ("DIV", "same", lambda: two(S, S, lambda a, b: a / (b * b + 0.5)), ALL),
    ("DIV", "two-inputs", lambda: two(S, (8,), lambda a, b: tf.divide(a, b)), F),
    ("DIV", "relu", lambda: two(S, S, lambda a, b: tf.nn.relu(tf.divide(a, b))), F),
    # MAXIMUM / MINIMUM
    ("MAXIMUM", "same", lambda: two(S, S, tf.maximum), ALL16),
    ("MAXIMUM", "bcast-chan", lambda: two(S, (8,), tf.maximum), ALL16),
    ("MAXIMUM", "const-scalar", lambda: one(S, lambda x: tf.maximum(x, -0.25)), ALL16),
    ("MINIMUM", "same", lambda: two(S, S, tf.minimum), ALL16),
    ("MINIMUM", "bcast-row-col", lambda: two((4, 1, 8), (1, 4, 1), tf.minimum), F),
    ("MINIMUM", "bcast-both-const", lambda: one((4, 1, 8), lambda x: tf.minimum(x, ROWS)), ALL16),
    ("MINIMUM", "const-chan", lambda: one(S, lambda x: tf.minimum(x, C8)), ALL16),
    # ADD_N
    ("ADD_N", "add-n4", lambda: one(S, lambda x: tf.add_n([x, x * 0.5, tf.nn.relu(x), x * x])), ALL),
    # FLOOR_DIV / FLOOR_MOD
    ("FLOOR_DIV", "same", lambda: two(S, S, lambda a, b: tf.math.floordiv(a * 4.0, b * b + 0.5)), ALL),
    ("FLOOR_DIV", "const", lambda: one(S, lambda x: tf.math.floordiv(x * 4.0, POS8)), F),
    ("FLOOR_MOD", "same", lambda: two(S, S, lambda a, b: tf.math.floormod(a * 4.0, b)), ALL),
    ("FLOOR_MOD", "const", lambda: one(S, lambda x: tf.math.floormod(x * 4.0, -POS8)), F),
    # comparisons (bool outputs)
    ("EQUAL", "same", lambda: two(S, S, tf.equal), ALL),
    ("EQUAL", "rounded", lambda: two(S, S, lambda a, b: tf.equal(tf.round(a), tf.round(b))), F),
    ("NOT_EQUAL", "bcast-chan", lambda: two(S, (8,), tf.not_equal), ALL),
    ("LESS", "same", lambda: two(S, S, tf.less), ALL),
    ("LESS", "const-chan", lambda: one(S, lambda x: tf.less(x, C8)), ALL),
    ("LESS_EQUAL", "bcast-row-col", lambda: two((4, 1, 8), (1, 4, 1), tf.less_equal), F),
    ("LESS_EQUAL", "bcast-both-const", lambda: one((4, 1, 8), lambda x: tf.less_equal(x, ROWS)), ALL),
    ("GREATER", "same", lambda: two(S, S, tf.greater), ALL),
    ("GREATER", "const-scalar", lambda: one(S, lambda x: tf.greater(x, 0.3)), ALL),
    ("GREATER_EQUAL", "bcast-chan", lambda: two(S, (8,), tf.greater_equal), ALL),
    # logical (bool in, bool out)
    ("LOGICAL_AND", "cmp", lambda: two(S, S, lambda a, b: tf.logical_and(a > 0.0, b < 0.5)), ALL),
    ("LOGICAL_OR", "cmp-bcast", lambda: two(S, (8,), lambda a, b: tf.logical_or(a > 0.0, b > 0.0)), ALL),
    ("LOGICAL_NOT", "and", lambda: two(S, S, lambda a, b: tf.logical_not(tf.logical_and(a > 0.0, b > 0.0))), ALL),
    # SELECT_V2
    ("SELECT_V2", "same", lambda: two(S, S, lambda a, b: tf.where(a > b, a, b * 0.5)), ALL),
    ("SELECT_V2", "bcast-chan", lambda: two(S, (8,), lambda a, b: tf.where(b > 0.0, a, -a)), ALL),
    ("SELECT_V2", "const-chan", lambda: one(S, lambda x: tf.where(x > 0.0, x, C8)), ALL),
    # row x column broadcasts in 16x8 from one input (the converter's 16x8 calibration fails on two inputs of
    # these shapes: "Attempting to resize dimension 1 of tensor 0")
    ("SUB", "row-col-one-input", lambda: one((4, 1, 8), lambda x: x - tf.reshape(x[..., :1], (1, 1, 4, 1))), I16),
    ("MINIMUM", "row-col-one-input", lambda: one((4, 1, 8), lambda x: tf.minimum(x, tf.reshape(x[..., :1], (1, 1, 4, 1)))), I16),
    ("ADD", "row-col-relu6-one-input", lambda: one((4, 1, 8), lambda x: tf.nn.relu6(x + tf.reshape(x[..., :1], (1, 1, 4, 1)))), I16),
    ("MUL", "row-col-one-input", lambda: one((4, 1, 8), lambda x: x * tf.reshape(x[..., :1], (1, 1, 4, 1))), I16),
    # ADD / MUL: float through TVM, 16x8 edgemem's kernels (int8 ADD / MUL are built by integerize, tested elsewhere)
    ("ADD", "same", lambda: two(S, S, lambda a, b: L.Add()([a, b])), I16),
    ("ADD", "bcast-chan-relu", lambda: two(S, (8,), lambda a, b: tf.nn.relu(a + b)), F16),
    ("ADD", "bcast-row-col-relu6", lambda: two((4, 1, 8), (1, 4, 1), lambda a, b: tf.nn.relu6(a + b)), F),
    ("ADD", "const-scalar", lambda: one(S, lambda x: x + 0.75), F16),
    ("MUL", "same", lambda: two(S, S, lambda a, b: L.Multiply()([a, b])), I16),
    ("MUL", "bcast-chan-relu", lambda: two(S, (8,), lambda a, b: tf.nn.relu(a * b)), F16),
    ("MUL", "bcast-row-col", lambda: two((4, 1, 8), (1, 4, 1), lambda a, b: a * b), F),
    ("MUL", "const-chan-relu6", lambda: one(S, lambda x: tf.nn.relu6(x * C8)), F16),
    # joins in 16x8 (int8 and float ones: gen_layout.py). No PADV2: the converter's 16x8 PADV2 keeps a float32
    # constant_values, which TFLite Micro refuses (it needs the input's type); tests make int16 ones by hand.
    ("CONCATENATION", "keras-axis3", lambda: two(S, S, lambda a, b: L.Concatenate()([a, b])), I16),
    ("CONCATENATION", "axis1-three", lambda: two(S, S, lambda a, b: tf.concat([a, b, a * 2.0], axis=1)), I16),
    ("PAD", "zeropadding2d", lambda: one(S, lambda x: L.ZeroPadding2D(((1, 2), (2, 1)))(x)), I16),
]


def main(only: str | None = None):
    write_models(MODELS, OUT, only)


if __name__ == "__main__":
    main(sys.argv[1] if len(sys.argv) > 1 else None)
