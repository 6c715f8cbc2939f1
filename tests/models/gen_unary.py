"""Converter-made models of the unary family (dev-only: run with the TensorFlow venv,
`/work/tfvenv/bin/python tests/models/gen_unary.py [FILTER]`): HARD_SWISH, LEAKY_RELU, PRELU, TANH, ELU, ABS,
NEG, EXP, LOG, SQRT, RSQRT, SQUARE, SIN, COS, CEIL, FLOOR, ROUND, RELU, RELU6, LOGISTIC. int8 (int8 and float
edges) for the operators TFLite Micro has an int8 kernel of, int16 (16x8, int16 and float edges) for those it
has an int16 kernel of (ABS, LEAKY_RELU, TANH, RELU, RELU6, LOGISTIC; not PRELU, see below), float32 for all. Writes
tests/models/ops/<OPNAME>-<variant>-<int8|iofloat-int8|int16|iofloat-int16|float32>.tflite and prints each model's operators (a
model whose operator the converter rewrote away is reported and not written)."""

from __future__ import annotations

import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

import tensorflow as tf  # noqa: E402

from convert import write_models  # noqa: E402

OUT = HERE / "ops"
keras = tf.keras
L = keras.layers
S = (4, 6, 3)  # batch 1 prepended


def one(fn, shape=S):
    x = keras.Input(shape, name="x")
    return keras.Model(x, L.Lambda(fn)(x))


def layer(make, shape=S):
    x = keras.Input(shape, name="x")
    return keras.Model(x, make()(x))


def positive(x):
    """|x| + 0.05: the domain of LOG, SQRT, RSQRT."""
    return tf.abs(x) + 0.05



ALL = ("int8", "int8f", "float32")
F = ("float32",)
I8 = ("int8",)
I8F = ("int8", "float32")
I16 = ("int16", "int16f")  # 16x8, where TFLite Micro has an int16 kernel

MODELS = [
    ("HARD_SWISH", "keras", lambda: layer(lambda: L.Activation("hard_swish")), ALL),
    ("LEAKY_RELU", "keras", lambda: layer(lambda: L.LeakyReLU(negative_slope=0.2)), ALL + I16),
    ("LEAKY_RELU", "alpha1.5", lambda: one(lambda x: tf.nn.leaky_relu(x, alpha=1.5)), I8F + ("int16",)),
    # TF 2.21's converter refuses PRELU in 16x8 ("not yet supported"): int16 PRELU is tested with hand-made models
    ("PRELU", "full", lambda: layer(lambda: L.PReLU(alpha_initializer=keras.initializers.RandomUniform(-0.5, 0.5, seed=1))), I8F),
    ("PRELU", "shared12", lambda: layer(lambda: L.PReLU(alpha_initializer=keras.initializers.RandomUniform(-0.5, 0.5, seed=2), shared_axes=[1, 2])), ALL),
    ("PRELU", "shared123", lambda: layer(lambda: L.PReLU(alpha_initializer=keras.initializers.Constant(0.25), shared_axes=[1, 2, 3])), I8),
    ("PRELU", "shared1", lambda: layer(lambda: L.PReLU(alpha_initializer=keras.initializers.RandomUniform(0.0, 0.5, seed=3), shared_axes=[1])), I8F),
    ("TANH", "keras", lambda: layer(lambda: L.Activation("tanh")), ALL + I16),
    ("TANH", "scaled", lambda: one(lambda x: tf.tanh(3.0 * x)), I8),
    # the converter leaves ELU in float (DEQUANTIZE -> ELU -> QUANTIZE) even for full-integer: int8 ELU is
    # tested with hand-made models only
    ("ELU", "keras", lambda: layer(lambda: L.Activation("elu")), F),
    ("ABS", "tf", lambda: one(tf.abs), ALL + I16),
    ("ABS", "shifted", lambda: one(lambda x: tf.abs(x + 0.5)), I8),
    ("NEG", "tf", lambda: one(tf.math.negative), F),
    ("EXP", "tf", lambda: one(tf.exp), F),
    ("LOG", "abs-eps", lambda: one(lambda x: tf.math.log(positive(x))), F),
    ("SQRT", "abs-eps", lambda: one(lambda x: tf.sqrt(positive(x))), F),
    ("RSQRT", "abs-eps", lambda: one(lambda x: tf.math.rsqrt(positive(x))), I8F),
    ("SQUARE", "tf", lambda: one(tf.square), F),
    ("SIN", "tf", lambda: one(tf.sin), F),
    ("COS", "tf", lambda: one(tf.cos), F),
    ("CEIL", "scaled", lambda: one(lambda x: tf.math.ceil(4.0 * x)), F),
    ("FLOOR", "scaled", lambda: one(lambda x: tf.math.floor(4.0 * x)), F),
    ("ROUND", "scaled", lambda: one(lambda x: tf.round(4.0 * x)), F),
    ("RELU", "keras", lambda: layer(lambda: L.ReLU()), F + I16),
    ("RELU6", "keras", lambda: layer(lambda: L.ReLU(max_value=6.0)), F + I16),
    ("LOGISTIC", "keras", lambda: layer(lambda: L.Activation("sigmoid")), F + I16),
    ("LOGISTIC", "big", lambda: layer(lambda: L.Activation("sigmoid"), (8, 8, 16)), ("int16",)),
    ("TANH", "big", lambda: layer(lambda: L.Activation("tanh"), (2, 300)), ("int16",)),
]


def main(only: str | None = None):
    write_models(MODELS, OUT, only)


if __name__ == "__main__":
    main(sys.argv[1] if len(sys.argv) > 1 else None)
