"""Converter-made models with int4 weights (dev-only: run with the TensorFlow venv, `.venv-tf/bin/python
tests/models/gen_int4.py`). TensorFlow 2.21's converter writes INT4 (packed, two weights a byte) constant weights
only from quantization-aware graphs whose weights pass through a 4-bit fake quantization, with its experimental
`_experimental_low_bit_qat` flag: the way a user gets an int4 .tflite today. Each model is a `tf.Module` whose
weights are seeded constants fake-quantized to 4 bits (per tensor, or per output channel) and whose activations are
fake-quantized to 8 bits with ranges measured on a float pass over seeded calibration inputs (uniform over the input
range, as the tests' int8 inputs are). Writes tests/models/int4/<name>.tflite and prints each model's tensor types
(a model where the converter left no INT4 tensor, or that it fails on, is not written).
"""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import tensorflow as tf

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
from convert import write  # noqa: E402

OUT = HERE / "int4"
IN_RANGE = 3.0  # the input's float range is [-IN_RANGE, IN_RANGE]
INT4 = 17


def fq4(w: np.ndarray, per_channel: bool) -> tf.Tensor:
    """``w`` fake-quantized to 4 bits (narrow range -7..7, symmetric), per tensor or along its last axis."""
    if per_channel:
        m = np.maximum(np.abs(w).reshape(-1, w.shape[-1]).max(axis=0), 1e-3).astype(np.float32)
        return tf.quantization.fake_quant_with_min_max_vars_per_channel(tf.constant(w), -m, m, num_bits=4, narrow_range=True)
    m = float(max(np.abs(w).max(), 1e-3))
    return tf.quantization.fake_quant_with_min_max_vars(tf.constant(w), -m, m, num_bits=4, narrow_range=True)


class Net:
    """A chain of layers; ``run(x, ranges)`` records each activation's range when ``ranges`` is a list being
    filled (the float pass) and fake-quantizes with them when it is a full list (the QAT graph)."""

    def __init__(self, layers, seed: int):
        self.layers, self.rng = layers, np.random.default_rng(seed)
        self.params = [self._init(spec) for spec in layers]

    def _init(self, spec):
        kind = spec["kind"]
        if kind == "conv":
            w = self.rng.normal(size=(*spec["k"], spec["cin"], spec["cout"]))
            b = self.rng.normal(scale=0.3, size=spec["cout"])
        elif kind == "dw":
            w = self.rng.normal(size=(*spec["k"], spec["cin"], 1))
            b = self.rng.normal(scale=0.3, size=spec["cin"])
        elif kind == "fc":
            w = self.rng.normal(size=(spec["cin"], spec["cout"])) / np.sqrt(spec["cin"])
            b = self.rng.normal(scale=0.3, size=spec["cout"])
        else:
            return None
        return w.astype(np.float32), (b.astype(np.float32) if spec.get("bias", True) else None)

    def run(self, x, ranges: list, qat: bool):
        step = iter(range(1 << 20))

        def act(y):
            k = next(step)
            if not qat:
                ranges.append((min(float(tf.reduce_min(y)), 0.0), max(float(tf.reduce_max(y)), 0.0)))
                return y
            lo, hi = ranges[k]
            return tf.quantization.fake_quant_with_min_max_vars(y, lo, hi, num_bits=8)

        y = act(x)
        for spec, p in zip(self.layers, self.params):
            kind, relu = spec["kind"], spec.get("act")
            if kind == "flatten":
                y = tf.reshape(y, [y.shape[0], -1])
                continue
            w, b = p
            pc = spec.get("per_channel", False)
            if kind == "conv":
                y = tf.nn.conv2d(y, fq4(w, pc) if qat else w, spec.get("stride", 1), spec.get("pad", "SAME"))
            elif kind == "dw":
                wq = tf.reshape(fq4(w.reshape(*w.shape[:2], 1, -1), pc), w.shape) if qat else w
                y = tf.nn.depthwise_conv2d(y, wq, [1, spec.get("stride", 1), spec.get("stride", 1), 1], spec.get("pad", "SAME"))
            else:
                y = tf.matmul(y, fq4(w, pc) if qat else w)
            if b is not None:
                y = y + b
            y = {"relu": tf.nn.relu, "relu6": tf.nn.relu6, None: lambda v: v}[relu](y)
            y = act(y)
        return y


def model(name, shape, layers, seed):
    net = Net(layers, seed)
    rng = np.random.default_rng(seed + 100)
    ranges: list = []
    calib = rng.uniform(-IN_RANGE, IN_RANGE, size=(64, *shape)).astype(np.float32)
    net.run(tf.constant(calib), ranges, qat=False)
    ranges[0] = (-IN_RANGE, IN_RANGE)

    class M(tf.Module):
        @tf.function(input_signature=[tf.TensorSpec([1, *shape], tf.float32)])
        def __call__(self, x):
            return net.run(x, ranges, qat=True)

    m = M()
    converter = tf.lite.TFLiteConverter.from_concrete_functions([m.__call__.get_concrete_function()], m)
    converter.optimizations = [tf.lite.Optimize.DEFAULT]
    converter._experimental_low_bit_qat = True  # noqa: SLF001  (TF 2.21's only way to int4 weights)
    converter.inference_input_type = tf.int8
    converter.inference_output_type = tf.int8
    return name, converter.convert()


def conv(cin, cout, k=(3, 3), **kw):
    return dict(kind="conv", cin=cin, cout=cout, k=k, **kw)


def dw(cin, k=(3, 3), **kw):
    return dict(kind="dw", cin=cin, k=k, **kw)


def fc(cin, cout, **kw):
    return dict(kind="fc", cin=cin, cout=cout, **kw)


FLAT = dict(kind="flatten")
MODELS = [
    # one operator each: odd weight counts (3*3*3*3 = 81, 7*5 = 35), per tensor and per channel, fused activations
    lambda: model("conv-k3-odd-relu", (6, 6, 3), [conv(3, 3, act="relu")], 1),
    lambda: model("conv-k3-s2-perchannel-relu6", (9, 9, 2), [conv(2, 5, stride=2, per_channel=True, act="relu6")], 2),
    lambda: model("conv-k1-valid-nobias", (5, 4, 4), [conv(4, 3, k=(1, 1), pad="VALID", bias=False)], 3),
    lambda: model("conv-k5x3-perchannel", (8, 7, 3), [conv(3, 7, k=(5, 3), pad="VALID", per_channel=True)], 4),
    lambda: model("dw-k3-perchannel-relu", (6, 6, 5), [dw(5, per_channel=True, act="relu")], 5),
    lambda: model("dw-k3-s2", (7, 7, 3), [dw(3, stride=2)], 6),
    lambda: model("fc-odd-relu", (7,), [fc(7, 5, act="relu")], 7),
    lambda: model("fc-nobias", (16,), [fc(16, 9, bias=False)], 8),
    # (no per-channel FULLY_CONNECTED: TF 2.21's converter fails on one, "'tfl.transpose' op has mismatched quantized
    # axes", and TFLM refuses it; tests/int4_models.py writes one for the refusal)
    # a small net: convolutions, a depthwise, a dense head, each with int4 weights
    lambda: model("net-small", (12, 12, 2), [conv(2, 6, stride=2, per_channel=True, act="relu"), dw(6, per_channel=True, act="relu6"),
                                             conv(6, 5, k=(1, 1), per_channel=True, act="relu"), FLAT, fc(180, 10, act="relu"), fc(10, 3)], 10),
]


def _types(data: bytes) -> list[str]:
    """The names of the INT4 tensors (read from the flatbuffer: the TF interpreter reports them as int8)."""
    from tensorflow.lite.python import schema_py_generated as schema

    m = schema.ModelT.InitFromObj(schema.Model.GetRootAsModel(data, 0))
    return [t.name.decode() for t in m.subgraphs[0].tensors if t.type == INT4]


def main() -> int:
    for make in MODELS:
        try:
            name, data = make()
        except Exception as exc:  # noqa: BLE001  (the converter's errors: reported, the other models still written)
            print(f"converter failed: {str(exc).splitlines()[0][:300]}")
            continue
        names = _types(data)
        if not names:
            print(f"{name}: no INT4 tensor, not written")
            continue
        write(OUT / f"{name}.tflite", data)
        print(f"{name}.tflite: {len(data)} B, INT4: {names}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
