"""Converter-made streaming models with resource variables (dev-only: run with the TensorFlow venv,
`.venv-tf/bin/python tests/models/gen_streaming.py`).

A streaming model keeps state between invocations in `tf.Variable`s: TensorFlow's converter (2.21, with
`experimental_enable_resource_variables`) writes them as TFLite resource variables, a CALL_ONCE operator running
an init subgraph (VAR_HANDLE + ASSIGN_VARIABLE of the initial values) and VAR_HANDLE / READ_VARIABLE /
ASSIGN_VARIABLE in the main subgraph. The model here is a streaming 1-D convolution over the last K frames: a
ring buffer of the K-1 previous frames (initial value zeros) and a running sum of every frame seen (initial value
0.5, so that a wrong initial value shows), read again after its update (the converter keeps that second
READ_VARIABLE after the ASSIGN_VARIABLE).

Writes tests/models/streaming/stream-conv-<float32|int8>.tflite: float32, and full-integer int8 (int8 edges, the
variables quantized too: the converter's `_experimental_variable_quantization`) with a seeded representative
dataset. A run writes the same bytes every time."""

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


def convert(kind: str) -> bytes:
    tf.keras.utils.set_random_seed(0)
    module = StreamingConv()
    converter = tf.lite.TFLiteConverter.from_concrete_functions([module.__call__.get_concrete_function()], module)
    converter.experimental_enable_resource_variables = True
    if kind == "int8":
        converter.optimizations = [tf.lite.Optimize.DEFAULT]
        converter.representative_dataset = representative([(FRAME,)], seed=1)
        converter.target_spec.supported_ops = [tf.lite.OpsSet.TFLITE_BUILTINS_INT8]
        converter.inference_input_type = tf.int8
        converter.inference_output_type = tf.int8
        converter._experimental_variable_quantization = True  # noqa: SLF001  (else the variables stay float)
    return converter.convert()


if __name__ == "__main__":
    for kind in ("float32", "int8"):
        data = convert(kind)
        ops = op_names(data)
        if not STATE_OPS <= set(ops):
            print(f"stream-conv-{kind}: the converter made no resource variables ({ops}); not written")
            continue
        path = write(OUT / f"stream-conv-{kind}.tflite", data)
        print(f"{path.name}: {len(data)} B {ops}")
