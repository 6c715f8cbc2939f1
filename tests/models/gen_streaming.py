"""Converter-made streaming models with resource variables (dev-only: run with the TensorFlow venv,
`.venv-tf/bin/python tests/models/gen_streaming.py`).

A streaming model keeps state between invocations in `tf.Variable`s: TensorFlow's converter (2.21, with
`experimental_enable_resource_variables`) writes them as TFLite resource variables, a CALL_ONCE operator running
an init subgraph (VAR_HANDLE + ASSIGN_VARIABLE of the initial values) and VAR_HANDLE / READ_VARIABLE /
ASSIGN_VARIABLE in the main subgraph. The model here is a streaming 1-D convolution over the last K frames: a
ring buffer of the K-1 previous frames (initial value zeros) and a running sum of every frame seen (initial value
0.5, so that a wrong initial value shows), read again after its update (the converter keeps that second
READ_VARIABLE after the ASSIGN_VARIABLE).

`stream-conv1d`: a 1-D convolution over the last 5 frames of 8 features and a dense layer, frame by frame, the ring
buffer and the weights in tf.Variables (the weights only read: a READ_VARIABLE of a variable nothing assigns after
CALL_ONCE). `stream-keras-uninitialized` (float32 only): the same with Keras layers inside the tf.Module, whose
weights the converter makes variables that its CALL_ONCE never initializes (TFLM outputs NaN): a model edgemem
must refuse.

Writes tests/models/streaming/<name>-<float32|int8|iofloat-int8>.tflite: float32, and full-integer int8 (int8 edges,
or float edges for `stream-conv` (iofloat-int8); the variables quantized too: the converter's
`_experimental_variable_quantization`) with a seeded representative dataset. A run writes the same bytes every time."""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import tensorflow as tf

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from convert import op_names, representative, write  # noqa: E402

OUT = HERE / "streaming"
FRAME, TAPS, UNITS = 4, 3, 8
STATE_OPS = {"CALL_ONCE", "VAR_HANDLE", "READ_VARIABLE", "ASSIGN_VARIABLE"}


class StreamingConv(tf.Module):
    """y = relu(window . W + b) + mean(running sum); window = the last TAPS frames, the newest being x."""

    def __init__(self):
        super().__init__()
        rng = np.random.default_rng(0)
        self.w = tf.constant(rng.standard_normal((TAPS * FRAME, UNITS)).astype(np.float32) * 0.3)
        self.b = tf.constant(rng.standard_normal((UNITS,)).astype(np.float32) * 0.1)
        self.ring = tf.Variable(tf.zeros((1, TAPS - 1, FRAME)), trainable=False)
        self.total = tf.Variable(tf.fill((1, FRAME), 0.5), trainable=False)

    @tf.function(input_signature=[tf.TensorSpec((1, FRAME), tf.float32, name="x")])
    def __call__(self, x):
        window = tf.concat([self.ring, tf.reshape(x, (1, 1, FRAME))], axis=1)
        self.ring.assign(window[:, 1:, :])
        self.total.assign(self.total + x)
        y = tf.matmul(tf.reshape(window, (1, TAPS * FRAME)), self.w) + self.b
        return tf.nn.relu(y) + tf.reduce_mean(self.total, axis=1, keepdims=True)


class StreamingConv1D(tf.Module):
    """A 1-D convolution (kernel KERNEL, valid padding, relu) and a dense layer run frame by frame: the ring buffer
    holds the KERNEL-1 previous frames of features, as a streaming keyword spotter keeps them. The weights are
    tf.Variables as well, which nothing assigns after CALL_ONCE (READ_VARIABLE only)."""

    FEATURES, KERNEL, FILTERS, CLASSES = 8, 5, 12, 4

    def __init__(self):
        super().__init__()
        rng = np.random.default_rng(1)
        self.kernel = tf.Variable(rng.standard_normal((self.KERNEL, self.FEATURES, self.FILTERS)).astype(np.float32) * 0.2, trainable=False)
        self.dense = tf.Variable(rng.standard_normal((self.FILTERS, self.CLASSES)).astype(np.float32) * 0.3, trainable=False)
        self.ring = tf.Variable(tf.zeros((1, self.KERNEL - 1, self.FEATURES)), trainable=False)

    @tf.function(input_signature=[tf.TensorSpec((1, 1, 8), tf.float32, name="frame")])
    def __call__(self, frame):
        window = tf.concat([self.ring, frame], axis=1)
        self.ring.assign(window[:, 1:, :])
        y = tf.nn.relu(tf.nn.conv1d(window, self.kernel, stride=1, padding="VALID"))
        return tf.matmul(tf.reshape(y, (1, self.FILTERS)), self.dense)


class StreamingKerasLayers(tf.Module):
    """The same with Keras layers (Conv1D, Dense) inside the tf.Module: the converter makes their weights resource
    variables that its CALL_ONCE does not initialize (TFLM then reads uninitialized memory: NaN outputs), which
    edgemem refuses."""

    def __init__(self):
        super().__init__()
        self.conv = tf.keras.layers.Conv1D(12, 5, activation="relu")
        self.out = tf.keras.layers.Dense(4)
        self.conv.build((1, 5, 8))
        self.out.build((1, 12))
        self.ring = tf.Variable(tf.zeros((1, 4, 8)), trainable=False)

    @tf.function(input_signature=[tf.TensorSpec((1, 1, 8), tf.float32, name="frame")])
    def __call__(self, frame):
        window = tf.concat([self.ring, frame], axis=1)
        self.ring.assign(window[:, 1:, :])
        return self.out(tf.reshape(self.conv(window), (1, 12)))


MODULES = {"stream-conv": (StreamingConv, (FRAME,)), "stream-conv1d": (StreamingConv1D, (1, 8)),
           "stream-keras-uninitialized": (StreamingKerasLayers, (1, 8))}
KINDS = {"stream-keras-uninitialized": ("float32",), "stream-conv": ("float32", "int8", "iofloat-int8")}  # default: float32, int8


def convert(name: str, kind: str) -> bytes:
    tf.keras.utils.set_random_seed(0)
    factory, input_shape = MODULES[name]
    module = factory()
    converter = tf.lite.TFLiteConverter.from_concrete_functions([module.__call__.get_concrete_function()], module)
    converter.experimental_enable_resource_variables = True
    if kind in ("int8", "iofloat-int8"):
        converter.optimizations = [tf.lite.Optimize.DEFAULT]
        converter.representative_dataset = representative([input_shape], seed=1)
        converter.target_spec.supported_ops = [tf.lite.OpsSet.TFLITE_BUILTINS_INT8]
        if kind == "int8":  # else float edges: QUANTIZE and DEQUANTIZE around the int8 model
            converter.inference_input_type = tf.int8
            converter.inference_output_type = tf.int8
        converter._experimental_variable_quantization = True  # noqa: SLF001  (else the variables stay float)
    return converter.convert()


if __name__ == "__main__":
    for name in MODULES:
        for kind in KINDS.get(name, ("float32", "int8")):
            try:
                data = convert(name, kind)
            except Exception as exc:  # noqa: BLE001  (report what the converter refuses)
                print(f"{name}-{kind}: converter failed: {str(exc).splitlines()[0][:200]}")
                continue
            ops = op_names(data)
            if not STATE_OPS <= set(ops):
                print(f"{name}-{kind}: the converter made no resource variables ({ops}); not written")
                continue
            path = write(OUT / f"{name}-{kind}.tflite", data)
            print(f"{path.name}: {len(data)} B {ops}")
