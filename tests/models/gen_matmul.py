"""Converter-made models of the matmul family: FULLY_CONNECTED (Keras Dense), BATCH_MATMUL, TRANSPOSE_CONV,
SOFTMAX with a scaling, LOG_SOFTMAX, L2_NORMALIZATION (dev-only: run with /work/tfvenv/bin/python).

Writes tests/models/ops/<OPNAME>-<variant>-<int8|float32>.tflite (SOFTMAX16: 16x8 SOFTMAX models, <int16|iofloat-int16>);
an int8 model with float edges (QUANTIZE /
DEQUANTIZE at the model's input and output) gets the variant suffix ``-fio``. Every written model is checked to
contain the operator it is named after (the converter sometimes rewrites one). FULLY_CONNECTED, BATCH_MATMUL and
TRANSPOSE_CONV are also converted in 16x8 mode (int16 activations, int8 weights, int64 biases): ``-int16``
(int16 edges) and, for a few variants, ``-iofloat-int16`` (float edges).

Usage: ``gen_matmul.py [--kinds int16,int16f] [--only SUBSTRING] [FAMILY ...]``: ``--kinds`` writes only those
kinds (e.g. the 16x8 ones without rewriting the int8 files), ``--only`` only the variants whose
``<OPNAME>-<variant>`` contains the substring (SOFTMAX16 writes its own files whatever these say).
"""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
from convert import convert, write  # noqa: E402

OUT = HERE / "ops"


def _ops_of(data: bytes) -> list[str]:
    import tensorflow as tf

    interp = tf.lite.Interpreter(model_content=data)
    return [d["op_name"] for d in interp._get_ops_details()]  # noqa: SLF001  (the public analyzer only prints)


KINDS: set[str] | None = None  # --kinds: write only these kinds
ONLY: str | None = None  # --only: write only the variants whose "<op>-<variant>" contains this
I16 = ("int8", "int8-fio", "float32", "int16")  # the default kinds plus 16x8 with int16 edges
I16F = I16 + ("int16f",)  # ... and 16x8 with float edges


def emit(op: str, variant: str, model, kinds=("int8", "int8-fio", "float32"), seed: int = 0):
    """Convert ``model`` in each of ``kinds`` and write it; checks that ``op`` is in the result (a 16x8 model
    without it is reported and not written: the converter does not make every operator in 16x8 mode)."""
    if ONLY and ONLY not in f"{op}-{variant}":
        return
    for kind in kinds:
        if KINDS is not None and kind not in KINDS:
            continue
        if kind == "float32":
            data, name = convert(model, "float"), f"{op}-{variant}-float32.tflite"
        elif kind == "int8":
            data, name = convert(model, "int8", io="int8", seed=seed), f"{op}-{variant}-int8.tflite"
        elif kind == "int16":
            data, name = convert(model, "int16", io="int16", seed=seed), f"{op}-{variant}-int16.tflite"
        elif kind == "int16f":
            data, name = convert(model, "int16", io="float", seed=seed), f"{op}-{variant}-iofloat-int16.tflite"
        else:
            data, name = convert(model, "int8", io="float", seed=seed), f"{op}-{variant}-fio-int8.tflite"
        ops = _ops_of(data)
        if op not in ops:
            if kind.startswith("int16"):
                print(f"{name}: the converter wrote {ops}, no {op}; not written")
                continue
            raise SystemExit(f"{name}: the converter wrote {ops}, no {op}")
        write(OUT / name, data)
        print(f"{name}: {len(data)} B, {ops}")


def _seeded(layer, seed: int):
    """Give a layer's weights seeded values (Keras initializers are seeded per process otherwise)."""
    rng = np.random.default_rng(seed)
    layer.set_weights([rng.standard_normal(w.shape).astype(np.float32) * (0.5 if w.ndim > 1 else 0.2) for w in layer.get_weights()])


def fully_connected():
    import tensorflow as tf

    k = tf.keras

    def dense(in_shape, units, act=None, bias=True, seed=0):
        x = k.Input(in_shape, batch_size=1)
        layer = k.layers.Dense(units, activation=act, use_bias=bias)
        y = layer(x)
        _seeded(layer, seed)
        return k.Model(x, y)

    emit("FULLY_CONNECTED", "2d", dense((16,), 10, seed=1), kinds=I16F)
    emit("FULLY_CONNECTED", "relu", dense((24,), 7, act="relu", seed=2), kinds=I16)
    emit("FULLY_CONNECTED", "relu6", dense((12,), 9, act=tf.nn.relu6, seed=3), kinds=I16)
    emit("FULLY_CONNECTED", "nobias", dense((20,), 5, bias=False, seed=4), kinds=I16)
    emit("FULLY_CONNECTED", "3d", dense((4, 12), 6, seed=5), kinds=I16F)  # keep_num_dims: [1, 4, 6]
    emit("FULLY_CONNECTED", "4d", dense((2, 3, 8), 5, act="relu", seed=6), kinds=I16)


def batch_matmul():
    import tensorflow as tf

    k = tf.keras

    def two(a_shape, b_shape, fn):
        # Named in order: the converter feeds the calibration samples by sorted input name.
        a, b = k.Input(a_shape, batch_size=1, name="in0"), k.Input(b_shape, batch_size=1, name="in1")
        return k.Model([a, b], k.layers.Lambda(lambda t: fn(t[0], t[1]))([a, b]))

    mm = tf.linalg.matmul
    emit("BATCH_MATMUL", "plain", two((4, 8), (8, 5), mm), kinds=I16F)
    emit("BATCH_MATMUL", "adjy", two((4, 8), (6, 8), lambda a, b: mm(a, b, transpose_b=True)), kinds=I16)
    emit("BATCH_MATMUL", "adjx", two((8, 4), (8, 5), lambda a, b: mm(a, b, transpose_a=True)), kinds=I16)
    emit("BATCH_MATMUL", "adjxy", two((8, 4), (6, 8), lambda a, b: mm(a, b, transpose_a=True, transpose_b=True)), kinds=I16)
    emit("BATCH_MATMUL", "bcast", two((3, 4, 8), (1, 8, 5), mm), kinds=I16)  # [1,3,4,8] x [1,1,8,5]
    emit("BATCH_MATMUL", "bcast-rank", two((2, 3, 4, 6), (6, 5), mm), kinds=I16)  # rank 5 x rank 3
    emit("BATCH_MATMUL", "dot", two((5, 8), (6, 8), lambda a, b: k.layers.Dot(axes=2)([a, b])), kinds=I16)

    rng = np.random.default_rng(11)
    const = tf.constant(rng.standard_normal((3, 8, 5)).astype(np.float32))
    x = k.Input((3, 4, 8), batch_size=1)
    emit("BATCH_MATMUL", "const-rhs", k.Model(x, k.layers.Lambda(lambda t: mm(t, const))(x)), kinds=I16)
    const_l = tf.constant(rng.standard_normal((3, 6, 4)).astype(np.float32))
    x = k.Input((3, 4, 5), batch_size=1)
    emit("BATCH_MATMUL", "const-lhs", k.Model(x, k.layers.Lambda(lambda t: mm(const_l, t))(x)), kinds=I16)

    # Self-attention without projections: softmax(q k^T) v (two BATCH_MATMULs around a SOFTMAX).
    q, v = k.Input((6, 8), batch_size=1, name="in0"), k.Input((6, 8), batch_size=1, name="in1")
    emit("BATCH_MATMUL", "attention", k.Model([q, v], k.layers.Attention()([q, v])), kinds=I16)


def transpose_conv():
    import tensorflow as tf

    k = tf.keras

    def deconv(in_shape, filters, kernel, strides, padding, bias=True, act=None, seed=0):
        x = k.Input(in_shape, batch_size=1)
        layer = k.layers.Conv2DTranspose(filters, kernel, strides=strides, padding=padding, use_bias=bias, activation=act)
        y = layer(x)
        _seeded(layer, seed)
        return k.Model(x, y)

    emit("TRANSPOSE_CONV", "s1-same", deconv((5, 5, 3), 4, 3, 1, "same", seed=1), kinds=I16)
    emit("TRANSPOSE_CONV", "s2-same", deconv((4, 5, 3), 4, 3, 2, "same", seed=2), kinds=I16F)
    emit("TRANSPOSE_CONV", "s2-valid", deconv((4, 4, 2), 3, 3, 2, "valid", seed=3), kinds=I16)
    emit("TRANSPOSE_CONV", "s1-valid-nobias", deconv((4, 4, 3), 5, 2, 1, "valid", bias=False, seed=4), kinds=I16)
    emit("TRANSPOSE_CONV", "s2-same-k4-relu", deconv((3, 3, 4), 2, 4, 2, "same", act="relu", seed=5), kinds=I16)


def softmax_family():
    import tensorflow as tf

    k = tf.keras

    def unary(in_shape, fn):
        x = k.Input(in_shape, batch_size=1)
        return k.Model(x, k.layers.Lambda(fn)(x))

    # TF 2.21's converter keeps a scaling as a MUL before a beta=1 SOFTMAX (beta != 1: hand-made models in the tests)
    emit("SOFTMAX", "scaled2", unary((10,), lambda t: tf.nn.softmax(2.0 * t)))
    emit("SOFTMAX", "scaled0.3-3d", unary((3, 7), lambda t: tf.nn.softmax(t * 0.3)))
    emit("SOFTMAX", "beta1-4d", unary((2, 3, 6), lambda t: tf.nn.softmax(t)))
    emit("LOG_SOFTMAX", "2d", unary((10,), tf.nn.log_softmax))
    emit("LOG_SOFTMAX", "3d", unary((4, 9), tf.nn.log_softmax))
    emit("L2_NORMALIZATION", "2d", unary((12,), lambda t: tf.math.l2_normalize(t, axis=-1)))
    emit("L2_NORMALIZATION", "3d", unary((3, 8), lambda t: tf.math.l2_normalize(t, axis=-1)))
    # keras.layers.UnitNormalization converts to SQUARE, SUM, RSQRT, MINIMUM, MUL (no L2_NORMALIZATION)


def softmax_int16():
    """16x8 SOFTMAX models (int16 and float edges), written as SOFTMAX-<variant>-<int16|iofloat-int16>.tflite: only
    beta-1 SOFTMAX alone (the scaled variants' MUL is another family's int16 operator)."""
    import tensorflow as tf

    k = tf.keras

    def unary(in_shape):
        x = k.Input(in_shape, batch_size=1)
        return k.Model(x, k.layers.Lambda(tf.nn.softmax)(x))

    for variant, shape, kinds in (("beta1-4d", (2, 3, 6), ("int16", "iofloat-int16")), ("beta1-2d", (10,), ("int16",)),
                                  ("beta1-wide", (3, 200), ("int16",))):
        for kind in kinds:
            data, name = convert(unary(shape), "int16", io="float" if kind.startswith("iofloat") else "int16"), f"SOFTMAX-{variant}-{kind}.tflite"
            ops = _ops_of(data)
            if "SOFTMAX" not in ops:
                raise SystemExit(f"{name}: the converter wrote {ops}, no SOFTMAX")
            write(OUT / name, data)
            print(f"{name}: {len(data)} B, {ops}")


GENERATORS = {"FULLY_CONNECTED": fully_connected, "BATCH_MATMUL": batch_matmul, "TRANSPOSE_CONV": transpose_conv,
              "SOFTMAX": softmax_family, "SOFTMAX16": softmax_int16}


def main(argv=None) -> int:
    import argparse

    global KINDS, ONLY
    parser = argparse.ArgumentParser()
    parser.add_argument("--kinds", help="comma-separated kinds to write (int8, int8-fio, float32, int16, int16f)")
    parser.add_argument("--only", help="write only the variants whose <OPNAME>-<variant> contains this")
    parser.add_argument("families", nargs="*", help=f"some of {list(GENERATORS)} (default: all)")
    args = parser.parse_args(argv if argv is not None else sys.argv[1:])
    KINDS = set(args.kinds.split(",")) if args.kinds else None
    ONLY = args.only
    names = args.families or list(GENERATORS)
    for name in names:
        GENERATORS[name]()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
