"""Converter-made one-operator models of CONV_2D and DEPTHWISE_CONV_2D (dev-only: run with the TensorFlow venv,
`/work/tfvenv/bin/python tests/models/gen_conv.py [FILTER]`): strides 1 and 2, same and valid padding, 1x1, 3x3
and 5x5 kernels, dilation 2, depth multiplier 2, fused RELU / RELU6, Keras Conv1D (a CONV_2D on a [N, 1, W, C]
view), with and without bias; in 16x8 (int16 activations, int8 weights, int64 biases: "int16" with int16 edges,
"int16f" with float edges) and int8. Writes tests/models/ops/<OPNAME>-<variant>-<type>.tflite and prints each
model's operators (a model without the operator it is named after is not written)."""

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


def seq(shape, *layers):
    x = keras.Input(shape, batch_size=1)
    y = x
    for layer in layers:
        y = layer(y)
    return keras.Model(x, y)


def _bias(use_bias: bool):
    # A nonzero bias (Keras starts biases at 0, which would leave the bias path untested).
    return dict(use_bias=use_bias, bias_initializer=keras.initializers.RandomNormal(stddev=0.3)) if use_bias else dict(use_bias=False)


def conv(shape, filters, kernel, strides=1, padding="same", dilation=1, act=None, bias=True):
    return lambda: seq(shape, L.Conv2D(filters, kernel, strides=strides, padding=padding, dilation_rate=dilation,
                                       activation=act, **_bias(bias)))


def conv1d(shape, filters, kernel, strides=1, padding="same", act=None, bias=True):
    return lambda: seq(shape, L.Conv1D(filters, kernel, strides=strides, padding=padding, activation=act, **_bias(bias)))


def dwconv(shape, kernel, strides=1, padding="same", dilation=1, mult=1, act=None, bias=True):
    return lambda: seq(shape, L.DepthwiseConv2D(kernel, strides=strides, padding=padding, dilation_rate=dilation,
                                                depth_multiplier=mult, activation=act, **_bias(bias)))


def dwconv1d(shape, kernel, strides=1, padding="same", mult=1, act=None, bias=True):
    return lambda: seq(shape, L.DepthwiseConv1D(kernel, strides=strides, padding=padding, depth_multiplier=mult,
                                                activation=act, **_bias(bias)))


ALL = ("int16", "int16f", "int8")
I16 = ("int16", "int8")
C, D = "CONV_2D", "DEPTHWISE_CONV_2D"
MODELS = [
    (C, "3x3-same-s1", conv((8, 8, 3), 6, 3), ALL),
    (C, "3x3-valid-s2-relu", conv((9, 9, 4), 5, 3, strides=2, padding="valid", act="relu"), ALL),
    (C, "1x1", conv((5, 6, 8), 7, 1), I16),
    (C, "5x5-same-s2-relu6", conv((10, 9, 2), 4, 5, strides=2, act=tf.nn.relu6), I16),
    (C, "3x3-dil2", conv((9, 9, 3), 4, 3, dilation=2), I16),
    (C, "2x3-valid-nobias", conv((7, 8, 5), 3, (2, 3), padding="valid", bias=False), I16),
    (C, "3x3-same-s2-even", conv((8, 8, 4), 8, 3, strides=2), I16),  # SAME with an even input: padding offset
    (C, "conv1d-k3", conv1d((16, 4), 6, 3), ALL),
    (C, "conv1d-k5-s2-valid-relu", conv1d((20, 3), 5, 5, strides=2, padding="valid", act="relu"), I16),
    (D, "3x3-same-s1", dwconv((8, 8, 4), 3), ALL),
    (D, "3x3-valid-s2-relu", dwconv((9, 9, 5), 3, strides=2, padding="valid", act="relu"), ALL),
    (D, "5x5-same-s2-relu6", dwconv((10, 9, 3), 5, strides=2, act=tf.nn.relu6), I16),
    (D, "3x3-dil2", dwconv((9, 9, 3), 3, dilation=2), I16),
    (D, "mult2", dwconv((6, 6, 3), 3, mult=2), ALL),
    (D, "mult2-valid-nobias", dwconv((6, 7, 4), (2, 3), padding="valid", mult=2, bias=False), I16),
    (D, "1x1", dwconv((5, 5, 6), 1), I16),
    (D, "conv1d-k3", dwconv1d((16, 4), 3), I16),
]


def main(only: str | None = None):
    write_models(MODELS, OUT, only)


if __name__ == "__main__":
    main(sys.argv[1] if len(sys.argv) > 1 else None)
