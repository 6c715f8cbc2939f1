"""Convert a Keras model the way TFLite's guide tells users to: TensorFlow's own converter (dev-only; run
with a Python that has `tensorflow-cpu`, see tests/models/README.md).

`int8`: full-integer post-training quantization with a representative dataset (seeded normal samples), int8
inputs and outputs (`io="int8"`) or the converter's default float edges (`io="float"`, QUANTIZE/DEQUANTIZE at
the model's edges). `int16`: the same with 16-bit activations and 8-bit weights ("16x8": the converter's
EXPERIMENTAL_TFLITE_BUILTINS_ACTIVATIONS_INT16_WEIGHTS_INT8 op set, int64 biases), int16 edges (`io="int16"`) or
float edges (`io="float"`). `float`: a plain float32 conversion.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np


def representative(shapes, seed: int, count: int = 32):
    """Seeded calibration samples, one list of arrays per step (one array per model input)."""

    def gen():
        rng = np.random.default_rng(seed)
        for _ in range(count):
            yield [rng.standard_normal((1, *s)).astype(np.float32) for s in shapes]

    return gen


def convert(model, kind: str = "int8", io: str = "int8", seed: int = 0) -> bytes:
    """The .tflite bytes of a Keras model: kind 'int8' (full-integer), 'int16' (16x8) or 'float'."""
    import tensorflow as tf

    converter = tf.lite.TFLiteConverter.from_keras_model(model)
    if kind in ("int8", "int16"):
        converter.optimizations = [tf.lite.Optimize.DEFAULT]
        converter.representative_dataset = representative([tuple(i.shape[1:]) for i in model.inputs], seed)
        converter.target_spec.supported_ops = [
            tf.lite.OpsSet.TFLITE_BUILTINS_INT8 if kind == "int8"
            else tf.lite.OpsSet.EXPERIMENTAL_TFLITE_BUILTINS_ACTIVATIONS_INT16_WEIGHTS_INT8
        ]
        if io in ("int8", "int16"):  # int8 for kind int8, int16 for kind int16: the model's own type
            converter.inference_input_type = tf.int8 if kind == "int8" else tf.int16
            converter.inference_output_type = tf.int8 if kind == "int8" else tf.int16
    elif kind != "float":
        raise ValueError(f"kind {kind!r}: 'int8', 'int16' or 'float'")
    return converter.convert()


def write(path: Path, data: bytes) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(data)
    return path


def op_names(data: bytes) -> list[str]:
    """The operators of a converted model, as the TFLite interpreter lists them."""
    import tensorflow as tf

    return [d["op_name"] for d in tf.lite.Interpreter(model_content=data)._get_ops_details()]  # noqa: SLF001


SUFFIX = {"int8": "int8", "int8f": "iofloat-int8", "int16": "int16", "int16f": "iofloat-int16", "float32": "float32"}  # kind -> file-name type


def write_models(models, out: Path, only: str | None = None) -> None:
    """Convert and write each ``(op, variant, factory, kinds)`` as ``out/<op>-<variant>-<type>.tflite``
    (kinds: "int8", "int8f" -- int8 with float edges --, "int16", "int16f" -- 16x8 --, "float32"); a model in which the converter made no
    ``op`` is reported and not written. ``only``: a substring of ``<op>-<variant>`` to (re)write just those."""
    import tensorflow as tf

    for op, variant, factory, kinds in models:
        if only and only not in f"{op}-{variant}":
            continue
        for kind in kinds:
            tf.keras.utils.set_random_seed(0)
            name = f"{op}-{variant}-{SUFFIX[kind]}.tflite"
            try:
                model = factory()
                data = convert(model, "float") if kind == "float32" else convert(model, kind.rstrip("f"), io="float" if kind.endswith("f") else kind)
            except Exception as exc:  # noqa: BLE001  (report what the converter refuses)
                print(f"{name}: converter failed: {str(exc).splitlines()[0][:200]}")
                continue
            ops = op_names(data)
            if op not in ops:
                print(f"{name}: the converter made no {op} ({ops}); not written")
                continue
            write(out / name, data)
            print(f"{name}: {len(data)} B {ops}")
