"""GELU models (the transformer encoder's feed-forward activation), written by TensorFlow's converter.

    /work/tfvenv/bin/python tests/models/gen_gelu.py

Writes tests/models/ops/GELU-<variant>-<int8|float32>.tflite: exact (erf) and approximate (tanh) GELU after a
1x1 convolution (which gives the GELU input a quantization of its own), int8 io and float32.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
from convert import convert, write  # noqa: E402

OUT = HERE / "ops"


def model(approximate: bool, shape):
    import tensorflow as tf

    k = tf.keras
    x_in = k.Input(shape, batch_size=1)
    h = k.layers.Conv1D(shape[-1], 1)(x_in)
    out = k.layers.Lambda(lambda t: k.activations.gelu(t, approximate=approximate))(h)
    return k.Model(x_in, out)


def main() -> None:
    import tensorflow as tf

    for variant, approximate, shape in (("erf", False, (8, 16)), ("tanh", True, (8, 16)), ("erf_odd", False, (3, 7))):
        for kind in ("int8", "float32"):
            tf.keras.utils.set_random_seed(7)
            data = convert(model(approximate, shape), "int8" if kind == "int8" else "float")
            write(OUT / f"GELU-{variant}-{kind}.tflite", data)
            print(f"GELU-{variant}-{kind}: {len(data)} bytes", flush=True)


if __name__ == "__main__":
    main()
