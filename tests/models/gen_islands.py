"""int8 models in which TensorFlow's converter leaves float islands (DEQUANTIZE -> float operators -> QUANTIZE)
around operators it does not quantize, as users get them from the full-integer conversion.

    /work/tfvenv/bin/python tests/models/gen_islands.py

Writes ``tests/models/islands/<name>-int8.tflite`` (int8 io) and ``<name>_floatio-int8.tflite`` (float io).
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
from convert import convert, write  # noqa: E402

OUT = HERE / "islands"
SEED = 99


def _model(middle):
    import tensorflow as tf

    k = tf.keras
    x_in = k.Input((6, 16), batch_size=1)
    h = k.layers.Conv1D(16, 1)(x_in)  # per-channel CONV_2D (a Dense would be a per-channel FULLY_CONNECTED)
    h = middle(k, h)
    out = k.layers.Add()([h, x_in])
    return k.Model(x_in, out)


MODELS = {
    # SIN then FLOOR: two float operators in a row, one island
    "sin_floor": lambda k, h: k.layers.Lambda(lambda t: k.ops.floor(k.ops.sin(t)))(h),
    # FLOOR, then a float MUL on its result: a two-operator island
    "floor_mul": lambda k, h: k.layers.Lambda(lambda t: k.ops.floor(t * 3.0) * 0.5)(h),
    # SIN and COS of one dequantized tensor, added in float: one DEQUANTIZE feeding two float operators
    "sin_cos": lambda k, h: k.layers.Lambda(lambda t: k.ops.sin(t) + k.ops.cos(t))(h),
}


def main() -> None:
    import tensorflow as tf

    for name, middle in MODELS.items():
        for suffix, io in (("-int8", "int8"), ("_floatio-int8", "float")):
            tf.keras.utils.set_random_seed(SEED)
            data = convert(_model(middle), "int8", io=io)
            write(OUT / f"{name}{suffix}.tflite", data)
            print(f"{name}{suffix}: {len(data)} bytes", flush=True)


if __name__ == "__main__":
    main()
