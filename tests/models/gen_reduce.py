"""Converter-made models of the reduction family (dev-only: run with the TensorFlow venv,
`/work/tfvenv/bin/python tests/models/gen_reduce.py`): reductions (SUM, REDUCE_MAX, REDUCE_MIN, REDUCE_ALL,
MEAN), ARG_MAX / ARG_MIN, CUMSUM, RESIZE_BILINEAR, RESIZE_NEAREST_NEIGHBOR and the pooling layers, int8 (int8
and float edges), 16x8 (int16 and float edges) and float32. Writes
tests/models/ops/<OPNAME>-<variant>-<int8|iofloat-int8|int16|iofloat-int16|float32>.tflite and prints each model's
operators. `gen_reduce.py [FILTER] [KINDS]`: only the models whose <OPNAME>-<variant> contains FILTER, only the
comma-separated KINDS (e.g. `"" int16,int16f` writes the int16 models and leaves the others alone)."""

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


def lam(shape, fn, name="m"):
    x = keras.Input(shape)
    return keras.Model(x, L.Lambda(fn)(x), name=name)


def seq(shape, *layers):
    x = keras.Input(shape)
    y = x
    for layer in layers:
        y = layer(y)
    return keras.Model(x, y)



def cnn():
    """Conv, pools, bilinear upsampling, global max and average pooling, argmax: the family's kernels between
    TVM's own (float) or integerize's (int8) operators."""
    x = keras.Input((12, 12, 3))
    y = L.Conv2D(8, 3, padding="same", activation="relu")(x)
    y = L.MaxPooling2D(2)(y)
    y = L.UpSampling2D(2, interpolation="bilinear")(y)
    y = L.AveragePooling2D(3, 2, padding="same")(y)
    y = L.Conv2D(6, 3, activation="relu")(y)
    y = L.Concatenate()([L.GlobalMaxPooling2D()(y), L.GlobalAveragePooling2D()(y)])
    return keras.Model(x, L.Lambda(lambda t: tf.argmax(t, axis=-1, output_type=tf.int32))(y))


def conv_cumsum():
    x = keras.Input((5, 6, 3))
    y = L.Conv2D(4, 1)(x)
    y = L.Lambda(lambda t: tf.math.cumsum(t, axis=2, reverse=True))(y)
    return keras.Model(x, L.Conv2D(2, 1)(y))


# (op, variant, model factory, kinds): kinds among "int8" (io int8), "int8f" (io float), "float32", "int16"
# (16x8, int16 edges) and "int16f" (16x8, float edges); int16 only where TFLite Micro has an int16 kernel
# (SUM, MEAN, the pools, RESIZE_NEAREST_NEIGHBOR; not REDUCE_MAX/MIN, ARG_*, CUMSUM, RESIZE_BILINEAR)
ALL = ("int8", "int8f", "float32")
I8, I8F, I8IO = ("int8",), ("int8", "float32"), ("int8", "int8f")
I16, I16F = ("int16",), ("int16f",)
MODELS = [
    ("SUM", "axis12-keep", lambda: lam((5, 6, 4), lambda x: tf.reduce_sum(x, axis=[1, 2], keepdims=True)), ALL + I16 + I16F),
    ("SUM", "axis-1", lambda: lam((4, 7), lambda x: tf.reduce_sum(x, axis=-1)), I8F + I16),
    ("SUM", "axis0of3", lambda: lam((3, 4, 5), lambda x: tf.reduce_sum(x, axis=1)), I8 + I16F),
    ("REDUCE_MAX", "axis12", lambda: lam((5, 6, 4), lambda x: tf.reduce_max(x, axis=[1, 2])), ALL),
    ("REDUCE_MAX", "axis-1-keep", lambda: lam((4, 7), lambda x: tf.reduce_max(x, axis=-1, keepdims=True)), I8),
    ("REDUCE_MAX", "globalmax1d", lambda: seq((9, 6), L.GlobalMaxPooling1D()), I8),
    ("REDUCE_MAX", "globalmax2d", lambda: seq((5, 7, 6), L.GlobalMaxPooling2D()), I8F),
    ("REDUCE_MIN", "axis1", lambda: lam((5, 6, 4), lambda x: tf.reduce_min(x, axis=1)), I8F),
    ("REDUCE_MIN", "axis02-keep", lambda: lam((5, 6, 4), lambda x: tf.reduce_min(x, axis=[1, 3], keepdims=True)), I8IO),
    ("REDUCE_ALL", "gt0-axis-1", lambda: lam((4, 7), lambda x: tf.cast(tf.reduce_all(x > 0.0, axis=-1), tf.float32)), ("float32",)),
    ("MEAN", "axis12-keep", lambda: lam((5, 6, 4), lambda x: tf.reduce_mean(x, axis=[1, 2], keepdims=True)), ALL + I16 + I16F),
    ("MEAN", "axis12", lambda: lam((5, 6, 4), lambda x: tf.reduce_mean(x, axis=[1, 2])), I8 + I16),
    ("MEAN", "axis-1", lambda: lam((5, 6, 4), lambda x: tf.reduce_mean(x, axis=-1)), I8F + I16F),
    ("MEAN", "axis13", lambda: lam((5, 6, 4), lambda x: tf.reduce_mean(x, axis=[1, 3])), I8 + I16),
    ("MEAN", "globalavg1d", lambda: seq((9, 6), L.GlobalAveragePooling1D()), I8 + I16F),
    ("MEAN", "globalavg2d", lambda: seq((5, 7, 6), L.GlobalAveragePooling2D()), I8F + I16),
    ("ARG_MAX", "axis-1", lambda: lam((4, 7), lambda x: tf.argmax(x, axis=-1)), ALL),
    ("ARG_MAX", "axis1-int32", lambda: lam((5, 6, 4), lambda x: tf.argmax(x, axis=1, output_type=tf.int32)), I8F),
    ("ARG_MIN", "axis-1", lambda: lam((4, 7), lambda x: tf.argmin(x, axis=-1)), I8F),
    ("CUMSUM", "axis1", lambda: lam((5, 4), lambda x: tf.math.cumsum(x, axis=1)), ("float32",)),
    ("CUMSUM", "exclusive-reverse", lambda: lam((5, 4), lambda x: tf.math.cumsum(x, axis=0, exclusive=True, reverse=True)), ("float32",)),
    ("ARG_MAX", "cnn-mixed", cnn, ("int8", "float32")),
    ("CUMSUM", "conv-mixed", conv_cumsum, ("float32",)),
    ("RESIZE_BILINEAR", "upsample2x", lambda: seq((4, 5, 3), L.UpSampling2D(2, interpolation="bilinear")), ALL),
    ("RESIZE_BILINEAR", "align-corners", lambda: lam((4, 5, 3), lambda x: tf.compat.v1.image.resize_bilinear(x, (7, 9), align_corners=True)), I8F),
    ("RESIZE_BILINEAR", "half-pixel", lambda: lam((4, 5, 3), lambda x: tf.image.resize(x, (7, 3), method="bilinear")), I8F),
    ("RESIZE_BILINEAR", "legacy", lambda: lam((4, 5, 3), lambda x: tf.compat.v1.image.resize_bilinear(x, (6, 8))), I8),
    ("AVERAGE_POOL_2D", "valid-s2", lambda: seq((8, 8, 3), L.AveragePooling2D(2)), ALL + I16 + I16F),
    ("AVERAGE_POOL_2D", "same-3x3-s2", lambda: seq((7, 9, 3), L.AveragePooling2D(3, 2, padding="same")), I8 + I16),
    ("AVERAGE_POOL_2D", "same-3x3-s1", lambda: seq((5, 6, 3), L.AveragePooling2D(3, 1, padding="same")), I8F + I16F),
    ("AVERAGE_POOL_2D", "relu", lambda: lam((6, 6, 3), lambda x: tf.nn.relu(tf.nn.avg_pool2d(x, 2, 2, "VALID"))), I8F + I16),
    ("MAX_POOL_2D", "valid-s2", lambda: seq((8, 8, 3), L.MaxPooling2D(2)), I8F + I16),
    ("MAX_POOL_2D", "same-3x3-s2", lambda: seq((7, 9, 3), L.MaxPooling2D(3, 2, padding="same")), I8IO + I16F),
    ("MAX_POOL_2D", "valid-3x2-s1", lambda: seq((6, 7, 3), L.MaxPooling2D((3, 2), 1)), I8 + I16),
    ("MAX_POOL_2D", "relu6", lambda: lam((6, 6, 3), lambda x: tf.nn.relu6(tf.nn.max_pool2d(x, 2, 2, "VALID"))), I8F + I16),
    ("RESIZE_NEAREST_NEIGHBOR", "legacy", lambda: lam((4, 5, 3), lambda x: tf.compat.v1.image.resize_nearest_neighbor(x, (8, 7))), I16 + I16F),
    ("RESIZE_NEAREST_NEIGHBOR", "half-pixel", lambda: lam((4, 5, 3), lambda x: tf.image.resize(x, (7, 3), method="nearest")), I16),
    ("RESIZE_NEAREST_NEIGHBOR", "align-corners", lambda: lam((4, 5, 3), lambda x: tf.compat.v1.image.resize_nearest_neighbor(x, (7, 9), align_corners=True)), I16),
    ("L2_POOL_2D", "probe", lambda: lam((6, 6, 3), lambda x: tf.sqrt(tf.nn.avg_pool2d(tf.square(x), 2, 2, "VALID"))), ("float32",)),
]


def main(only: str | None = None, kinds: str | None = None):
    """``kinds``: a comma-separated subset of kinds to (re)write (e.g. "int16,int16f"), leaving the others alone."""
    models = MODELS
    if kinds:
        keep = set(kinds.split(","))
        models = [(op, v, f, tuple(k for k in ks if k in keep)) for op, v, f, ks in MODELS]
    write_models(models, OUT, only)


if __name__ == "__main__":
    main(sys.argv[1] if len(sys.argv) > 1 and sys.argv[1] else None, sys.argv[2] if len(sys.argv) > 2 else None)
