"""Whole architectures as users bring them: small Keras models converted with TensorFlow's converter.

Run with the dev-only TensorFlow venv (CI has no TensorFlow; the .tflite files are committed):

    /work/tfvenv/bin/python tests/models/gen_architectures.py [NAME ...]
    python tests/models/gen_architectures.py --manifest      # with edgemem's Python (the `tflite` package)

Writes ``tests/models/arch/<name>-int8.tflite`` (full integer, int8 input/output),
``tests/models/arch/<name>_floatio-int8.tflite`` (full integer inside, the converter's float edges: QUANTIZE
and DEQUANTIZE at the model's input and output) and ``tests/models/arch/<name>-float32.tflite``, and
``<name>-int16.tflite`` / ``<name>_floatio-int16.tflite`` (16x8: int16 activations, int8 weights; audio and
small-vision architectures only, see INT16), and ``tests/models/arch/MANIFEST.json``: per file its size and the TFLite operators it holds (with the operand
type, as edgemem's support check classifies them). Every model has weights=None and a seeded
initialisation, a small input and a small class count, so the whole set stays a few MB.
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")


HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
from convert import convert, write  # noqa: E402

OUT = HERE / "arch"
SEED = 1234


def _keras():
    import tensorflow as tf

    return tf, tf.keras


# ---------------------------------------------------------------- the architectures

def mobilenet_v1():
    tf, k = _keras()
    return k.applications.MobileNet(input_shape=(96, 96, 3), alpha=0.25, weights=None, classes=10)


def mobilenet_v2():
    tf, k = _keras()
    """Without the final 1x1 conv to 1280 channels (143 K weights, most of the model): the same operators."""
    base = k.applications.MobileNetV2(input_shape=(96, 96, 3), alpha=0.35, weights=None, include_top=False)
    x = k.layers.GlobalAveragePooling2D()(base.get_layer("block_16_project_BN").output)
    out = k.layers.Dense(10, activation="softmax")(x)
    return k.Model(base.input, out)


def _mobilenet_v3_small(minimalistic: bool):
    tf, k = _keras()
    base = k.applications.MobileNetV3Small(input_shape=(96, 96, 3), alpha=0.35, minimalistic=minimalistic, weights=None,
                                           include_top=False, pooling="avg", include_preprocessing=False)
    out = k.layers.Dense(10, activation="softmax")(base.output)  # not the 1024-channel top: 10x the weights
    return k.Model(base.input, out)


def mobilenet_v3_small():
    return _mobilenet_v3_small(False)


def mobilenet_v3_small_minimalistic():
    return _mobilenet_v3_small(True)


def efficientnet_like():
    """MBConv blocks as EfficientNet has them: expand 1x1, depthwise, squeeze-excite (swish, sigmoid gate),
    project 1x1, residual add."""
    tf, k = _keras()
    L = k.layers
    x_in = k.Input((64, 64, 3), batch_size=1)
    x = L.Conv2D(16, 3, strides=2, padding="same", use_bias=False)(x_in)
    x = L.BatchNormalization()(x)
    x = L.Activation("swish")(x)

    def mbconv(x, out_ch, expand, stride, kernel):
        in_ch = x.shape[-1]
        h = x
        if expand != 1:
            h = L.Conv2D(in_ch * expand, 1, use_bias=False)(h)
            h = L.BatchNormalization()(h)
            h = L.Activation("swish")(h)
        h = L.DepthwiseConv2D(kernel, strides=stride, padding="same", use_bias=False)(h)
        h = L.BatchNormalization()(h)
        h = L.Activation("swish")(h)
        ch = h.shape[-1]
        se = L.GlobalAveragePooling2D(keepdims=True)(h)
        se = L.Conv2D(max(1, in_ch // 4), 1, activation="swish")(se)
        se = L.Conv2D(ch, 1, activation="sigmoid")(se)
        h = L.Multiply()([h, se])
        h = L.Conv2D(out_ch, 1, use_bias=False)(h)
        h = L.BatchNormalization()(h)
        if stride == 1 and in_ch == out_ch:
            h = L.Add()([h, x])
        return h

    x = mbconv(x, 16, 1, 1, 3)
    x = mbconv(x, 24, 4, 2, 3)
    x = mbconv(x, 24, 4, 1, 3)
    x = mbconv(x, 40, 4, 2, 5)
    x = L.Conv2D(96, 1, use_bias=False)(x)
    x = L.BatchNormalization()(x)
    x = L.Activation("swish")(x)
    x = L.GlobalAveragePooling2D()(x)
    out = L.Dense(10, activation="softmax")(x)
    return k.Model(x_in, out)


def transformer_encoder():
    """One pre-norm encoder block on a [1, 16, 32] sequence: LayerNormalization, 2-head self-attention,
    residual, LayerNormalization, GELU feed-forward, residual."""
    tf, k = _keras()
    L = k.layers
    x_in = k.Input((16, 32), batch_size=1)
    h = L.LayerNormalization(epsilon=1e-6)(x_in)
    h = L.MultiHeadAttention(num_heads=2, key_dim=16)(h, h)
    x = L.Add()([x_in, h])
    h = L.LayerNormalization(epsilon=1e-6)(x)
    h = L.Dense(64, activation="gelu")(h)
    h = L.Dense(32)(h)
    out = L.Add()([x, h])
    return k.Model(x_in, out)


def unet():
    """UpSampling2D: Keras 3 writes it as RESHAPE + TILE (TFLM has no TILE kernel: LiteRT is the oracle)."""
    return _unet(lambda L: L.UpSampling2D())


def unet_resize():
    """The same U-Net upsampling with a nearest-neighbour Resizing layer: RESIZE_NEAREST_NEIGHBOR."""
    return _unet(lambda L: (lambda x: L.Resizing(x.shape[1] * 2, x.shape[2] * 2, interpolation="nearest")(x)))


def _unet(upsampling):
    tf, k = _keras()
    L = k.layers
    x_in = k.Input((32, 32, 3), batch_size=1)
    c1 = L.Conv2D(8, 3, padding="same", activation="relu")(x_in)
    c1 = L.Conv2D(8, 3, padding="same", activation="relu")(c1)
    p1 = L.MaxPooling2D()(c1)
    c2 = L.Conv2D(16, 3, padding="same", activation="relu")(p1)
    p2 = L.MaxPooling2D()(c2)
    c3 = L.Conv2D(32, 3, padding="same", activation="relu")(p2)
    u2 = upsampling(L)(c3)
    u2 = L.Concatenate()([u2, c2])
    c4 = L.Conv2D(16, 3, padding="same", activation="relu")(u2)
    u1 = upsampling(L)(c4)
    u1 = L.Concatenate()([u1, c1])
    c5 = L.Conv2D(8, 3, padding="same", activation="relu")(u1)
    out = L.Conv2D(2, 1)(c5)
    return k.Model(x_in, out)


def _recurrent(layer: str, unroll: bool, steps: int = 10):
    tf, k = _keras()
    L = k.layers
    x_in = k.Input((steps, 8), batch_size=1)
    rnn = getattr(L, layer)(16, unroll=unroll)
    out = L.Dense(4)(rnn(x_in))
    return k.Model(x_in, out)


def gru():
    return _recurrent("GRU", False)


def gru_unrolled():
    return _recurrent("GRU", True)


def lstm():
    return _recurrent("LSTM", False)


def lstm_unrolled():
    return _recurrent("LSTM", True)


def gru_seq100():
    """Keras 3's GRU over 100 steps: a WHILE loop (cond and body subgraphs) that edgemem unrolls at import."""
    return _recurrent("GRU", False, 100)


def lstm_seq100():
    return _recurrent("LSTM", False, 100)


def conv1d_dilated():
    """A TCN-like 1-D net: causal and dilated Conv1D, then global pooling and a classifier."""
    tf, k = _keras()
    L = k.layers
    x_in = k.Input((64, 4), batch_size=1)
    x = L.Conv1D(16, 3, padding="causal", activation="relu")(x_in)
    x = L.Conv1D(16, 3, padding="causal", dilation_rate=2, activation="relu")(x)
    x = L.Conv1D(16, 3, padding="same", dilation_rate=4, activation="relu")(x)
    x = L.Conv1D(16, 5, padding="valid", strides=2)(x)
    x = L.GlobalAveragePooling1D()(x)
    out = L.Dense(5)(x)
    return k.Model(x_in, out)


def conv_autoencoder():
    tf, k = _keras()
    L = k.layers
    x_in = k.Input((32, 32, 1), batch_size=1)
    x = L.Conv2D(8, 3, strides=2, padding="same", activation="relu")(x_in)
    x = L.Conv2D(16, 3, strides=2, padding="same", activation="relu")(x)
    x = L.Conv2DTranspose(8, 3, strides=2, padding="same", activation="relu")(x)
    x = L.Conv2DTranspose(4, 3, strides=2, padding="same", activation="relu")(x)
    out = L.Conv2D(1, 3, padding="same", activation="sigmoid")(x)
    return k.Model(x_in, out)


def kws_dscnn():
    """A small keyword-spotting DS-CNN (after the MLPerf Tiny KWS net, narrower): a 49x10 MFCC map, a strided
    10x4 convolution, depthwise-separable blocks, global average pooling and a softmax over 12 words."""
    tf, k = _keras()
    L = k.layers
    x_in = k.Input((49, 10, 1), batch_size=1)
    x = L.Conv2D(32, (10, 4), strides=2, padding="same", activation="relu")(x_in)
    for _ in range(3):
        x = L.DepthwiseConv2D(3, padding="same", activation="relu")(x)
        x = L.Conv2D(32, 1, activation="relu")(x)
    x = L.AveragePooling2D(pool_size=(25, 5))(x)
    x = L.Flatten()(x)
    out = L.Dense(12, activation="softmax")(x)
    return k.Model(x_in, out)


def denoiser_lstm():
    """A small speech denoiser: per frame of 16 spectral bins an LSTM (16 units, over 10 frames) predicts a
    sigmoid mask that multiplies the noisy input. Built with the legacy Keras (tf_keras), the only one whose LSTM
    the converter fuses into UNIDIRECTIONAL_SEQUENCE_LSTM (set by main(): TF_USE_LEGACY_KERAS=1)."""
    tf, k = _keras()
    L = k.layers
    x_in = k.Input((10, 16), batch_size=1)
    h = L.LSTM(16, return_sequences=True)(x_in)
    mask = L.Dense(16, activation="sigmoid")(h)
    out = L.Multiply()([x_in, mask])
    return k.Model(x_in, out)


ARCHITECTURES = {f.__name__: f for f in (
    mobilenet_v1, mobilenet_v2, mobilenet_v3_small, mobilenet_v3_small_minimalistic, efficientnet_like,
    transformer_encoder, unet, unet_resize, gru, gru_unrolled, lstm, lstm_unrolled, gru_seq100, lstm_seq100, conv1d_dilated, conv_autoencoder,
    kws_dscnn, denoiser_lstm,
)}  # fmt: skip
LEGACY_KERAS = {"denoiser_lstm"}

# file stem suffix -> convert() arguments
FORMS = {"-int8": dict(kind="int8", io="int8"), "_floatio-int8": dict(kind="int8", io="float"), "-float32": dict(kind="float"),
         "-int16": dict(kind="int16", io="int16"), "_floatio-int16": dict(kind="int16", io="float")}  # fmt: skip
# the 16x8 forms (int16 activations, int8 weights) of the audio and small-vision architectures only
INT16 = {"conv1d_dilated", "conv_autoencoder", "kws_dscnn", "denoiser_lstm"}


def forms(name: str) -> list[str]:
    return [f for f in FORMS if "int16" not in f or name in INT16]


# ---------------------------------------------------------------- the manifest

_TYPES = {0: "float32", 1: "float16", 2: "int32", 3: "uint8", 4: "int64", 6: "bool", 7: "int16", 9: "int8"}


def operators(data: bytes) -> list[str]:
    """The model's operators as 'NAME(type)' in file order (the operand type as edgemem classifies it)."""
    import tflite
    from tflite.BuiltinOperator import BuiltinOperator

    names = {v: k for k, v in vars(BuiltinOperator).items() if not k.startswith("_")}
    m = tflite.Model.GetRootAsModel(data, 0)
    sg = m.Subgraphs(0)
    found = []
    for i in range(sg.OperatorsLength()):
        op = sg.Operators(i)
        code = m.OperatorCodes(op.OpcodeIndex())
        name = names.get(max(code.BuiltinCode(), code.DeprecatedBuiltinCode()), f"CUSTOM:{code.CustomCode()}")
        ins = [int(t) for t in (op.InputsAsNumpy() if op.InputsLength() else []) if t >= 0]
        consts = [t for t in ins if m.Buffers(sg.Tensors(t).Buffer()).DataLength() > 0]
        act = [t for t in ins if t not in consts] or ins
        outs = [int(t) for t in op.OutputsAsNumpy()]
        typ = _TYPES.get(sg.Tensors((act or outs)[0]).Type(), "?")
        found.append(f"{name}({typ})")
    return found


def convert_one(name: str, suffix: str) -> None:
    import tensorflow as tf

    tf.keras.utils.set_random_seed(SEED)
    data = convert(ARCHITECTURES[name](), **FORMS[suffix])
    write(OUT / f"{name}{suffix}.tflite", data)


def tf_version() -> str:
    import subprocess

    return subprocess.run([sys.executable, "-c", "import tensorflow as tf; print(tf.__version__)"], capture_output=True,
                          text=True).stdout.strip()  # fmt: skip


def main(names: list[str]) -> None:
    """Each conversion in its own process: TensorFlow's converter crashes (SIGSEGV) on some of them (int8 GRU
    with its while loop); those are listed in FAILED.json with the exit code instead of a file."""
    import subprocess

    failed_path = OUT / "FAILED.json"
    failed = json.loads(failed_path.read_text()) if failed_path.exists() else {}
    for name in names or list(ARCHITECTURES):
        for suffix in forms(name):
            stem = f"{name}{suffix}"
            env = {**os.environ, "TF_USE_LEGACY_KERAS": "1"} if name in LEGACY_KERAS else None
            proc = subprocess.run([sys.executable, __file__, "--one", name, suffix], capture_output=True, text=True, env=env)
            if proc.returncode == 0:
                failed.pop(stem, None)
                print(f"{stem}: {(OUT / f'{stem}.tflite').stat().st_size} bytes", flush=True)
            else:
                (OUT / f"{stem}.tflite").unlink(missing_ok=True)
                tail = [ln for ln in proc.stderr.splitlines() if ln.strip() and "warn" not in ln][-1:] or [""]
                how = "crashed (SIGSEGV)" if proc.returncode == -11 else f"failed (exit code {proc.returncode}): {tail[0][:300]}"
                failed[stem] = f"TensorFlow {tf_version()}'s converter {how}"
                print(f"{stem}: FAILED {failed[stem]}", flush=True)
    failed_path.write_text(json.dumps(dict(sorted(failed.items())), indent=1) + "\n")


def write_manifest() -> None:
    manifest = {}
    for path in sorted(OUT.glob("*.tflite")):
        data = path.read_bytes()
        ops = operators(data)
        manifest[path.stem] = {"bytes": len(data), "operators": sorted(set(ops)), "operator_count": len(ops)}
    (OUT / "MANIFEST.json").write_text(json.dumps(manifest, indent=1) + "\n")


if __name__ == "__main__":
    if sys.argv[1:] == ["--manifest"]:
        write_manifest()
    elif sys.argv[1:2] == ["--one"]:
        convert_one(*sys.argv[2:4])
    else:
        main(sys.argv[1:])
