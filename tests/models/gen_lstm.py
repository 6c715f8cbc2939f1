"""Converter-made UNIDIRECTIONAL_SEQUENCE_LSTM models (dev-only: run with the TensorFlow venv and tf_keras,
`/work/tfvenv/bin/python tests/models/gen_lstm.py [FILTER]`).

Keras 3's LSTM layer is never fused into TFLite's UNIDIRECTIONAL_SEQUENCE_LSTM; the legacy Keras (the
`tf_keras` package, selected with TF_USE_LEGACY_KERAS=1 before TensorFlow is imported) is, so the models are
made with it. float32 and full-integer int8 (int8 edges) of: LSTM(12) on [1, 10, 8] returning the sequence,
the same returning the last step only (the converter slices it off with STRIDED_SLICE), and other sizes; the
first two also int8 with float edges (QUANTIZE and DEQUANTIZE around it).
16x8 (int16 activations, int8 weights): TensorFlow's converter (2.21) refuses it for this operator ("Quantization
to 16x8-bit not yet supported for op: 'UNIDIRECTIONAL_SEQUENCE_LSTM'": the 16x8 mode always takes the old
quantizer, whose LSTM is not int16-quantizable), so tests/models/gen_lstm16.py quantizes the float32 models
written here the way the converter quantizes the 8x8->16 LSTM, with int16 activations (two more sizes are
made in float32 only for it).
Writes tests/models/ops/UNIDIRECTIONAL_SEQUENCE_LSTM-<variant>-<float32|int8|iofloat-int8>.tflite (a model whose
LSTM the converter did not fuse is reported and not written; a run of the whole generator writes the same
bytes every time)."""

from __future__ import annotations

import os
import sys
from pathlib import Path

os.environ["TF_USE_LEGACY_KERAS"] = "1"  # before TensorFlow: tf.keras is then tf_keras, whose LSTM fuses

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

import tensorflow as tf  # noqa: E402
import tf_keras as keras  # noqa: E402

from convert import write_models  # noqa: E402

OUT = HERE / "ops"
L = keras.layers
OP = "UNIDIRECTIONAL_SEQUENCE_LSTM"


def lstm(steps: int, features: int, units: int, sequences: bool = True, **kw):
    def make():
        keras.backend.clear_session()  # layer names (and so the bytes) independent of the models made before
        keras.utils.set_random_seed(0)
        x = keras.Input((steps, features), batch_size=1, name="x")
        return keras.Model(x, L.LSTM(units, return_sequences=sequences, **kw)(x))

    return make


KINDS = ("float32", "int8")
MODELS = [
    (OP, "seq-t10-i8-u12", lstm(10, 8, 12), (*KINDS, "int8f")),
    (OP, "last-t10-i8-u12", lstm(10, 8, 12, sequences=False), (*KINDS, "int8f")),
    (OP, "seq-t5-i3-u20", lstm(5, 3, 20), KINDS),
    (OP, "seq-t16-i20-u7", lstm(16, 20, 7), KINDS),
    # float32 only: the source of 16x8 models (gen_lstm16.py; the converter refuses to make a 16x8 LSTM)
    (OP, "seq-t10-i13-u16", lstm(10, 13, 16), ("float32",)),
    (OP, "last-t5-i3-u8", lstm(5, 3, 8, sequences=False), ("float32",)),
]

if __name__ == "__main__":
    assert tf.keras is keras or tf.keras.__name__.startswith("tf_keras"), "tf.keras is not tf_keras"
    write_models(MODELS, OUT, sys.argv[1] if len(sys.argv) > 1 else None)
