"""Converter-made models of the layout operators (frontend/ops/layout.py) and of the shape arithmetic folded
at import (frontend/fold.py): run with the TensorFlow venv,

    /work/tfvenv/bin/python tests/models/gen_layout.py

It writes tests/models/ops/<OPNAME>-<variant>-<int8|int16|float32>.tflite (int8: full-integer with int8 io;
variants ending in 'iofloat': int8 with the converter's float edges; int16: 16x8 with int16 io, for the
operators of INT16; `--int16` writes only those) and checks that every model holds the
operator it is named after (the converter rewrites some: tf.squeeze becomes RESHAPE; TF 2.21 folds Keras
dilated Conv1D/Conv2D into CONV_2D with dilation, no SPACE_TO_BATCH_ND around it: those cases print SKIP, and
SPACE_TO_BATCH_ND/BATCH_TO_SPACE_ND come from tf.space_to_batch_nd/tf.batch_to_space). Arguments: only
the named variants are rewritten.
"""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
from convert import convert, op_names, write  # noqa: E402

OUT = HERE / "ops"


def _keras_model(shapes, fn, batch=1):
    import tensorflow as tf

    keras = tf.keras

    class Op(keras.layers.Layer):
        def call(self, *xs):
            return fn(*xs)

    inputs = [keras.Input(s, batch_size=batch) for s in shapes]
    out = Op()(*inputs)
    return keras.Model(inputs, out)


def cases():
    """(operator, variant, input shapes without batch, Keras builder) of every converter-made model."""
    import tensorflow as tf

    keras = tf.keras
    L = keras.layers

    def fn_model(shapes, fn):
        return lambda: _keras_model(shapes, fn)

    def flatten():
        inp = keras.Input((6, 6, 2))  # free batch: Flatten computes its shape with SHAPE/STRIDED_SLICE/PACK
        return keras.Model(inp, L.Flatten()(L.Conv2D(4, 3)(inp)))

    def flatten_reshape():
        inp = keras.Input((6, 6, 2))
        x = L.Flatten()(L.Conv2D(4, 3)(inp))
        return keras.Model(inp, L.Reshape((8, 8))(x))

    def flatten_dense():
        inp = keras.Input((6, 6, 2))
        return keras.Model(inp, L.Dense(5)(L.Flatten()(L.Conv2D(4, 3)(inp))))

    def dilated_conv1d():
        inp = keras.Input((16, 3), batch_size=1)
        return keras.Model(inp, L.Conv1D(4, 3, dilation_rate=2, padding="same")(inp))

    def dilated_conv2d():
        inp = keras.Input((10, 10, 3), batch_size=1)
        return keras.Model(inp, L.Conv2D(4, 3, dilation_rate=2, padding="valid")(inp))

    def upsampling2d():
        inp = keras.Input((4, 4, 3), batch_size=1)
        return keras.Model(inp, L.UpSampling2D(2)(inp))

    c = tf.constant
    return [
        ("RESHAPE", "flatten", flatten, "SHAPE"),
        ("RESHAPE", "flattenreshape", flatten_reshape, "SHAPE"),
        ("RESHAPE", "flattendense", flatten_dense, "SHAPE"),
        ("PACK", "axis0", fn_model([(4, 3), (4, 3)], lambda a, b: tf.stack([a, b], axis=0)), None),
        ("PACK", "axis2", fn_model([(4, 3), (4, 3), (4, 3)], lambda a, b, d: tf.stack([a, b, d], axis=2)), None),
        ("UNPACK", "axis1", fn_model([(3, 5)], lambda a: tf.unstack(a, axis=1)), None),
        ("SPLIT", "axis3", fn_model([(4, 4, 6)], lambda a: tf.split(a, 3, axis=3)), None),
        ("SPLIT_V", "sizes", fn_model([(4, 4, 7)], lambda a: tf.split(a, [2, 4, 1], axis=3)), None),
        ("SLICE", "begin", fn_model([(6, 5, 4)], lambda a: tf.slice(a, [0, 1, 1, 0], [1, 4, 3, 2])), None),
        ("SQUEEZE", "axis2", fn_model([(5, 1, 3)], lambda a: tf.squeeze(a, axis=2)), None),
        ("PAD", "hw", fn_model([(5, 6, 3)], lambda a: tf.pad(a, [[0, 0], [1, 2], [2, 1], [0, 0]])), None),
        ("PADV2", "value", fn_model([(5, 6, 3)], lambda a: tf.pad(a, [[0, 0], [1, 0], [0, 2], [0, 0]], constant_values=0.75)), None),
        ("TRANSPOSE", "perm", fn_model([(4, 5, 3)], lambda a: tf.transpose(a, [0, 3, 1, 2])), None),
        ("CONCATENATION", "axis3", fn_model([(4, 5, 3), (4, 5, 2)], lambda a, b: tf.concat([a, b], axis=3)), None),
        ("RESIZE_NEAREST_NEIGHBOR", "up2", fn_model([(4, 5, 3)], lambda a: tf.image.resize(a, (8, 10), method="nearest")), None),
        ("EXPAND_DIMS", "axis1", fn_model([(5, 3)], lambda a: tf.expand_dims(a, 1)), None),
        ("CAST", "int32", fn_model([(4, 5)], lambda a: tf.cast(tf.cast(a * 10.0, tf.int32), tf.float32)), None),
        ("STRIDED_SLICE", "step2", fn_model([(8, 8, 3)], lambda a: a[:, 1::2, ::3, :]), None),
        ("STRIDED_SLICE", "negstride", fn_model([(8, 6, 3)], lambda a: a[:, ::-1, 4:0:-2, :]), None),
        ("STRIDED_SLICE", "shrink", fn_model([(8, 6, 3)], lambda a: a[:, 2, :, 1:]), None),
        ("STRIDED_SLICE", "ellipsis", fn_model([(8, 6, 3)], lambda a: a[..., 1]), None),
        ("GATHER", "axis1", fn_model([(6, 4)], lambda a: tf.gather(a, c([3, 0, 5, 5], tf.int32), axis=1)), None),
        ("GATHER", "axis2", fn_model([(3, 8, 2)], lambda a: tf.gather(a, c([[1, 7], [2, 2]], tf.int32), axis=2)), None),
        ("GATHER_ND", "pairs", fn_model([(4, 5, 3)], lambda a: tf.gather_nd(a[0], c([[0, 1], [3, 4], [2, 2]], tf.int32))), None),
        ("DEPTH_TO_SPACE", "block2", fn_model([(3, 4, 8)], lambda a: tf.nn.depth_to_space(a, 2)), None),
        ("SPACE_TO_DEPTH", "block2", fn_model([(6, 4, 3)], lambda a: tf.nn.space_to_depth(a, 2)), None),
        ("MIRROR_PAD", "reflect", fn_model([(5, 4, 3)], lambda a: tf.pad(a, [[0, 0], [2, 1], [1, 3], [0, 0]], mode="REFLECT")), None),
        ("MIRROR_PAD", "symmetric", fn_model([(5, 4, 3)], lambda a: tf.pad(a, [[0, 0], [2, 5], [4, 1], [0, 0]], mode="SYMMETRIC")), None),
        ("REVERSE_V2", "axis1", fn_model([(5, 4, 3)], lambda a: tf.reverse(a, [1])), None),
        ("BROADCAST_TO", "rows", fn_model([(1, 4)], lambda a: tf.broadcast_to(a, [1, 3, 5, 4])), None),
        ("SPACE_TO_BATCH_ND", "dilatedconv1d", dilated_conv1d, None),
        ("SPACE_TO_BATCH_ND", "dilatedconv2d", dilated_conv2d, None),
        ("SPACE_TO_BATCH_ND", "pad", fn_model([(5, 6, 2)], lambda a: tf.space_to_batch_nd(a, [2, 3], [[1, 0], [2, 1]])), None),
        ("BATCH_TO_SPACE_ND", "crop", fn_model([(4, 3, 2)], lambda a: tf.batch_to_space(tf.concat([a] * 6, 0), [2, 3], [[1, 0], [2, 1]])), None),
        ("TILE", "upsampling2d", upsampling2d, None),
    ]  # fmt: skip



# the layout operators TFLite Micro has an int16 kernel for (or moves bytes of any type): their 16x8 forms too.
# Not PADV2: the converter's 16x8 PADV2 keeps a float32 constant_values, which TFLM's PADV2 refuses (it needs the
# input's type); tests/test_ops_int16_binary.py makes int16 PADV2 models by hand.
INT16 = {"RESHAPE", "PACK", "UNPACK", "SPLIT", "SPLIT_V", "SLICE", "SQUEEZE", "PAD", "TRANSPOSE", "CONCATENATION",
         "RESIZE_NEAREST_NEIGHBOR", "EXPAND_DIMS", "STRIDED_SLICE", "REVERSE_V2", "BROADCAST_TO"}  # fmt: skip


def main() -> None:
    import tensorflow as tf

    tf.keras.utils.set_random_seed(0)
    OUT.mkdir(parents=True, exist_ok=True)
    args = sys.argv[1:]
    int16_only = "--int16" in args  # only the 16x8 forms (int16 activations, int16 io)
    only = set(args) - {"--int16"}  # variants to (re)write, all when none given
    forms = (("int8", "int8", "", "int8"), ("int8", "float", "_iofloat", "int8"), ("float", "int8", "", "float32"))
    for op, variant, build, marker in cases():
        if only and variant not in only:
            continue
        model = build()
        for kind, io, suffix, tag in (() if int16_only else forms) + ((("int16", "int16", "", "int16"),) if op in INT16 else ()):
            if op == "CAST" and kind in ("int8", "int16"):
                continue  # int8 CAST models come from ModelBuilder (the converter puts DEQUANTIZE before CAST)
            data = convert(model, kind, io)
            ops = op_names(data)
            if (marker or op) not in ops:
                print(f"SKIP {op}-{variant}{suffix}-{tag}: converter wrote {ops}")
                continue
            path = write(OUT / f"{op}-{variant}{suffix}-{tag}.tflite", data)
            print(f"{path.name}: {len(data)} B {ops}")


if __name__ == "__main__":
    np.random.seed(0)
    main()
