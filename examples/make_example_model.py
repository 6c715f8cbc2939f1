#!/usr/bin/env python3
"""Write edgemem's own example model "kws_tiny" as a .tflite flatbuffer.

No TensorFlow: the flatbuffer is assembled with the generated builder
functions of the ``tflite`` package (``tflite.ModelStart``,
``tflite.TensorAddShape``, ...) on a ``flatbuffers.Builder``, and the int8
quantization is derived the way TFLite's post-training quantizer does it:

1. seeded random float weights (He-normal) and biases;
2. the float network is run with numpy (float64) on seeded random inputs to
   calibrate every activation tensor's [min, max];
3. activations: asymmetric int8, ``scale = (max - min) / 255`` with the range
   widened to include 0, zero point nudged to an integer; weights: symmetric
   per-channel int8 in [-127, 127], zero point 0; FULLY_CONNECTED weights
   symmetric per-tensor; biases int32 with ``scale = in_scale * w_scale``;
   AVERAGE_POOL_2D / RESHAPE keep their input's parameters; SOFTMAX output is
   fixed at scale 1/256, zero point -128.

Graph (NHWC)::

    input int8 [1,49,10,1]
      CONV_2D 3x3 /2 SAME, 8 ch, RELU            -> [1,25,5,8]
      DEPTHWISE_CONV_2D 3x3 /1 SAME, RELU6       -> [1,25,5,8]
      CONV_2D 1x1, 16 ch  (a)   CONV_2D 1x1, 16 ch (b)   (both read the dw output)
      ADD a + b                                  -> [1,25,5,16]
      AVERAGE_POOL_2D 25x5 VALID                 -> [1,1,1,16]
      RESHAPE                                    -> [1,16]
      FULLY_CONNECTED 4                          -> [1,4]
      SOFTMAX                                    -> [1,4] (scale 1/256, zp -128)

Usage::

    python examples/make_example_model.py [-o PATH] [--seed N] [--float]

The output bytes depend only on the seed (and numpy's float arithmetic):
running the script twice gives identical files.

The module also exposes :class:`ModelBuilder`, a small general-purpose
flatbuffer writer that tests use to build one-op models.
"""

from __future__ import annotations

import argparse
import sys
from dataclasses import dataclass, field
from pathlib import Path

import flatbuffers
import numpy as np
import tflite

HERE = Path(__file__).resolve().parent
DEFAULT_INT8_PATH = HERE / "kws_tiny_int8.tflite"
DEFAULT_FLOAT_PATH = HERE / "kws_tiny_float.tflite"
DEFAULT_SYMBOLIC_PATH = HERE / "kws_tiny_batch_int8.tflite"
DEFAULT_SEED = 20240601

OP = tflite.BuiltinOperator
OPTS = tflite.BuiltinOptions
ACT = tflite.ActivationFunctionType
PAD = tflite.Padding
TT = tflite.TensorType

_NP_TO_TT = {
    np.dtype(np.float32): TT.FLOAT32,
    np.dtype(np.int32): TT.INT32,
    np.dtype(np.int8): TT.INT8,
    np.dtype(np.uint8): TT.UINT8,
    np.dtype(np.int16): TT.INT16,
    np.dtype(np.int64): TT.INT64,
    np.dtype(np.uint32): TT.UINT32,
    np.dtype(np.uint64): TT.UINT64,
    np.dtype(np.bool_): TT.BOOL,
}


# ---------------------------------------------------------------------------
# Generic flatbuffer writer
# ---------------------------------------------------------------------------


@dataclass
class _Tensor:
    name: str
    shape: tuple
    ttype: int
    buffer: int
    quant: dict | None
    signature: tuple | None = None  # shape_signature (-1 = symbolic), written only when given
    variable: bool = False  # state kept across invocations (an LSTM's hidden and cell state)


@dataclass
class _Op:
    opcode: int
    inputs: list
    outputs: list
    options_type: int
    options_fn: object  # callable(builder) -> offset, or None
    custom_options: bytes | None = None  # a CUSTOM operator's options (a flexbuffer)


@dataclass
class ModelBuilder:
    """Collects tensors/buffers/operators of one subgraph (and of the others ``subgraph`` adds), then serializes.

    ``quant`` dicts have keys ``scale`` (sequence of float), ``zero_point``
    (sequence of int) and optionally ``quantized_dimension`` (int).
    """

    description: str = "edgemem"
    buffers: list = field(default_factory=lambda: [b""])  # buffer 0: empty sentinel
    tensors: list = field(default_factory=list)
    ops: list = field(default_factory=list)
    opcodes: list = field(default_factory=list)  # [(builtin_code, version, custom_code or None)]
    children: list = field(default_factory=list)  # subgraphs 1, 2, ... (WHILE's cond and body, IF's branches)
    name: str = "main"
    inputs: list = field(default_factory=list)  # of a child subgraph (subgraph 0's are serialize()'s arguments)
    outputs: list = field(default_factory=list)

    def subgraph(self, name: str) -> "ModelBuilder":
        """A new subgraph (index 1, 2, ... in call order) sharing this model's buffers and operator codes: add its
        tensors and operators to it, set its ``inputs`` and ``outputs``; ``serialize`` writes it."""
        child = ModelBuilder(self.description, self.buffers, [], [], self.opcodes, name=name)
        self.children.append(child)
        return child

    def tensor(self, name, shape, dtype, quant=None, signature=None, variable=False) -> int:
        sig = None if signature is None else tuple(int(d) for d in signature)
        self.tensors.append(_Tensor(name, tuple(int(d) for d in shape), _NP_TO_TT[np.dtype(dtype)], 0, quant, sig, variable))
        return len(self.tensors) - 1

    def const(self, name, array, quant=None) -> int:
        array = np.ascontiguousarray(array)
        self.buffers.append(array.astype(array.dtype.newbyteorder("<"), copy=False).tobytes())
        self.tensors.append(
            _Tensor(name, tuple(array.shape), _NP_TO_TT[array.dtype], len(self.buffers) - 1, quant)
        )
        return len(self.tensors) - 1

    def op(self, builtin, inputs, outputs, options_type=0, options_fn=None, version=1, custom_code=None, custom_options=None):
        """One operator; a CUSTOM one (builtin 32) names its ``custom_code`` and may carry ``custom_options``."""
        key = (int(builtin), int(version), custom_code)
        if key not in self.opcodes:
            self.opcodes.append(key)
        self.ops.append(_Op(self.opcodes.index(key), list(inputs), list(outputs), options_type, options_fn, custom_options))

    # -- serialization -----------------------------------------------------

    @staticmethod
    def _int_vector(b, start_fn, values, prepend):
        start_fn(b, len(values))
        for v in reversed(values):
            prepend(v)
        return b.EndVector()

    @staticmethod
    def _offset_vector(b, start_fn, offsets):
        start_fn(b, len(offsets))
        for o in reversed(offsets):
            b.PrependUOffsetTRelative(o)
        return b.EndVector()

    @staticmethod
    def _aligned_bytes(b, data: bytes, alignment=16):
        b.StartVector(1, len(data), alignment)
        b.head = b.head - len(data)
        b.Bytes[b.head : b.head + len(data)] = data
        b.vectorNumElems = len(data)
        return b.EndVector()

    def serialize(self, inputs, outputs) -> bytes:
        b = flatbuffers.Builder(1024)

        # Buffers
        buf_offs = []
        for data in self.buffers:
            data_off = self._aligned_bytes(b, data) if data else None
            tflite.BufferStart(b)
            if data_off is not None:
                tflite.BufferAddData(b, data_off)
            buf_offs.append(tflite.BufferEnd(b))
        buffers_vec = self._offset_vector(b, tflite.ModelStartBuffersVector, buf_offs)

        subgraphs = [self._serialize_subgraph(b, self, inputs, outputs, "main")]
        subgraphs += [self._serialize_subgraph(b, c, c.inputs, c.outputs, c.name) for c in self.children]
        sgs_vec = self._offset_vector(b, tflite.ModelStartSubgraphsVector, subgraphs)

        oc_offs = []
        for code, version, custom_code in self.opcodes:
            name = b.CreateString(custom_code) if custom_code is not None else None
            tflite.OperatorCodeStart(b)
            if name is not None:
                tflite.OperatorCodeAddCustomCode(b, name)
            tflite.OperatorCodeAddDeprecatedBuiltinCode(b, min(code, 127))
            tflite.OperatorCodeAddBuiltinCode(b, code)
            tflite.OperatorCodeAddVersion(b, version)
            oc_offs.append(tflite.OperatorCodeEnd(b))
        oc_vec = self._offset_vector(b, tflite.ModelStartOperatorCodesVector, oc_offs)

        desc = b.CreateString(self.description)
        tflite.ModelStart(b)
        tflite.ModelAddVersion(b, 3)
        tflite.ModelAddOperatorCodes(b, oc_vec)
        tflite.ModelAddSubgraphs(b, sgs_vec)
        tflite.ModelAddDescription(b, desc)
        tflite.ModelAddBuffers(b, buffers_vec)
        model = tflite.ModelEnd(b)
        b.Finish(model, file_identifier=b"TFL3")
        return bytes(b.Output())

    @staticmethod
    def _serialize_subgraph(b, sg, inputs, outputs, sg_title) -> int:
        # Tensors
        t_offs = []
        for t in sg.tensors:
            name = b.CreateString(t.name)
            shape = ModelBuilder._int_vector(b, tflite.TensorStartShapeVector, t.shape, b.PrependInt32)
            sig = None
            if t.signature is not None:
                sig = ModelBuilder._int_vector(b, tflite.TensorStartShapeSignatureVector, t.signature, b.PrependInt32)
            q_off = None
            if t.quant is not None:
                scale = ModelBuilder._int_vector(
                    b, tflite.QuantizationParametersStartScaleVector,
                    [float(s) for s in t.quant["scale"]], b.PrependFloat32,
                )
                zp = ModelBuilder._int_vector(
                    b, tflite.QuantizationParametersStartZeroPointVector,
                    [int(z) for z in t.quant["zero_point"]], b.PrependInt64,
                )
                tflite.QuantizationParametersStart(b)
                tflite.QuantizationParametersAddScale(b, scale)
                tflite.QuantizationParametersAddZeroPoint(b, zp)
                tflite.QuantizationParametersAddQuantizedDimension(b, int(t.quant.get("quantized_dimension", 0)))
                q_off = tflite.QuantizationParametersEnd(b)
            tflite.TensorStart(b)
            tflite.TensorAddShape(b, shape)
            if sig is not None:
                tflite.TensorAddShapeSignature(b, sig)
            tflite.TensorAddType(b, t.ttype)
            tflite.TensorAddBuffer(b, t.buffer)
            tflite.TensorAddName(b, name)
            if t.variable:
                tflite.TensorAddIsVariable(b, True)
            if q_off is not None:
                tflite.TensorAddQuantization(b, q_off)
            t_offs.append(tflite.TensorEnd(b))
        tensors_vec = ModelBuilder._offset_vector(b, tflite.SubGraphStartTensorsVector, t_offs)
        # Operators
        op_offs = []
        for op in sg.ops:
            ins = ModelBuilder._int_vector(b, tflite.OperatorStartInputsVector, op.inputs, b.PrependInt32)
            outs = ModelBuilder._int_vector(b, tflite.OperatorStartOutputsVector, op.outputs, b.PrependInt32)
            opt = op.options_fn(b) if op.options_fn is not None else None
            custom = ModelBuilder._int_vector(b, tflite.OperatorStartCustomOptionsVector, list(op.custom_options), b.PrependUint8) if op.custom_options else None
            tflite.OperatorStart(b)
            tflite.OperatorAddOpcodeIndex(b, op.opcode)
            tflite.OperatorAddInputs(b, ins)
            tflite.OperatorAddOutputs(b, outs)
            if opt is not None:
                tflite.OperatorAddBuiltinOptionsType(b, op.options_type)
                tflite.OperatorAddBuiltinOptions(b, opt)
            if custom is not None:
                tflite.OperatorAddCustomOptions(b, custom)
            op_offs.append(tflite.OperatorEnd(b))
        ops_vec = ModelBuilder._offset_vector(b, tflite.SubGraphStartOperatorsVector, op_offs)
        sg_in = ModelBuilder._int_vector(b, tflite.SubGraphStartInputsVector, list(inputs), b.PrependInt32)
        sg_out = ModelBuilder._int_vector(b, tflite.SubGraphStartOutputsVector, list(outputs), b.PrependInt32)
        sg_name = b.CreateString(sg_title)
        tflite.SubGraphStart(b)
        tflite.SubGraphAddTensors(b, tensors_vec)
        tflite.SubGraphAddInputs(b, sg_in)
        tflite.SubGraphAddOutputs(b, sg_out)
        tflite.SubGraphAddOperators(b, ops_vec)
        tflite.SubGraphAddName(b, sg_name)
        return tflite.SubGraphEnd(b)


# -- builtin options helpers (each returns a callable(builder) -> offset) ----


def conv2d_options(stride=1, padding=PAD.SAME, act=ACT.NONE):
    def fn(b):
        tflite.Conv2DOptionsStart(b)
        tflite.Conv2DOptionsAddPadding(b, padding)
        tflite.Conv2DOptionsAddStrideW(b, stride)
        tflite.Conv2DOptionsAddStrideH(b, stride)
        tflite.Conv2DOptionsAddFusedActivationFunction(b, act)
        tflite.Conv2DOptionsAddDilationWFactor(b, 1)
        tflite.Conv2DOptionsAddDilationHFactor(b, 1)
        return tflite.Conv2DOptionsEnd(b)

    return OPTS.Conv2DOptions, fn


def depthwise_options(stride=1, padding=PAD.SAME, act=ACT.NONE, depth_multiplier=1):
    def fn(b):
        tflite.DepthwiseConv2DOptionsStart(b)
        tflite.DepthwiseConv2DOptionsAddPadding(b, padding)
        tflite.DepthwiseConv2DOptionsAddStrideW(b, stride)
        tflite.DepthwiseConv2DOptionsAddStrideH(b, stride)
        tflite.DepthwiseConv2DOptionsAddDepthMultiplier(b, depth_multiplier)
        tflite.DepthwiseConv2DOptionsAddFusedActivationFunction(b, act)
        tflite.DepthwiseConv2DOptionsAddDilationWFactor(b, 1)
        tflite.DepthwiseConv2DOptionsAddDilationHFactor(b, 1)
        return tflite.DepthwiseConv2DOptionsEnd(b)

    return OPTS.DepthwiseConv2DOptions, fn


def pool2d_options(filter_hw, stride=1, padding=PAD.VALID, act=ACT.NONE):
    def fn(b):
        tflite.Pool2DOptionsStart(b)
        tflite.Pool2DOptionsAddPadding(b, padding)
        tflite.Pool2DOptionsAddStrideW(b, stride)
        tflite.Pool2DOptionsAddStrideH(b, stride)
        tflite.Pool2DOptionsAddFilterHeight(b, filter_hw[0])
        tflite.Pool2DOptionsAddFilterWidth(b, filter_hw[1])
        tflite.Pool2DOptionsAddFusedActivationFunction(b, act)
        return tflite.Pool2DOptionsEnd(b)

    return OPTS.Pool2DOptions, fn


def add_options(act=ACT.NONE):
    def fn(b):
        tflite.AddOptionsStart(b)
        tflite.AddOptionsAddFusedActivationFunction(b, act)
        return tflite.AddOptionsEnd(b)

    return OPTS.AddOptions, fn


def mul_options(act=ACT.NONE):
    def fn(b):
        tflite.MulOptionsStart(b)
        tflite.MulOptionsAddFusedActivationFunction(b, act)
        return tflite.MulOptionsEnd(b)

    return OPTS.MulOptions, fn


def reshape_options(new_shape):
    def fn(b):
        tflite.ReshapeOptionsStartNewShapeVector(b, len(new_shape))
        for d in reversed(new_shape):
            b.PrependInt32(int(d))
        vec = b.EndVector()
        tflite.ReshapeOptionsStart(b)
        tflite.ReshapeOptionsAddNewShape(b, vec)
        return tflite.ReshapeOptionsEnd(b)

    return OPTS.ReshapeOptions, fn


def fully_connected_options(act=ACT.NONE):
    def fn(b):
        tflite.FullyConnectedOptionsStart(b)
        tflite.FullyConnectedOptionsAddFusedActivationFunction(b, act)
        tflite.FullyConnectedOptionsAddKeepNumDims(b, False)
        return tflite.FullyConnectedOptionsEnd(b)

    return OPTS.FullyConnectedOptions, fn


def while_options(cond: int, body: int):
    def fn(b):
        tflite.WhileOptionsStart(b)
        tflite.WhileOptionsAddCondSubgraphIndex(b, cond)
        tflite.WhileOptionsAddBodySubgraphIndex(b, body)
        return tflite.WhileOptionsEnd(b)

    return OPTS.WhileOptions, fn


def softmax_options(beta=1.0):
    def fn(b):
        tflite.SoftmaxOptionsStart(b)
        tflite.SoftmaxOptionsAddBeta(b, beta)
        return tflite.SoftmaxOptionsEnd(b)

    return OPTS.SoftmaxOptions, fn


# ---------------------------------------------------------------------------
# Quantization (post-training, the TFLite way)
# ---------------------------------------------------------------------------


def activation_qparams(lo: float, hi: float, qmin=-128, qmax=127):
    """Asymmetric int8 parameters for the float range [lo, hi] (0 included)."""
    lo, hi = min(float(lo), 0.0), max(float(hi), 0.0)
    if hi == lo:
        return np.float32(1.0), 0
    scale = np.float32((hi - lo) / (qmax - qmin))
    zp_from_min = qmin - lo / float(scale)
    if zp_from_min < qmin:
        zp = qmin
    elif zp_from_min > qmax:
        zp = qmax
    else:
        zp = int(np.round(zp_from_min))
    return scale, zp


def quantize_symmetric(w: np.ndarray, axis: int | None):
    """Symmetric int8 in [-127, 127]; per channel along ``axis`` (None: per tensor).

    Returns ``(q_int8, scales_float32)``.
    """
    if axis is None:
        amax = np.array([np.max(np.abs(w))])
        scales = (amax / 127.0).astype(np.float32)
        scales[scales == 0] = np.float32(1.0)
        q = np.clip(np.round(w / np.float64(scales[0])), -127, 127).astype(np.int8)
        return q, scales
    other = tuple(i for i in range(w.ndim) if i != axis)
    amax = np.max(np.abs(w), axis=other)
    scales = (amax / 127.0).astype(np.float32)
    scales[scales == 0] = np.float32(1.0)
    shape = [1] * w.ndim
    shape[axis] = -1
    q = np.clip(np.round(w / scales.astype(np.float64).reshape(shape)), -127, 127).astype(np.int8)
    return q, scales


def quantize_bias(b: np.ndarray, in_scale, w_scales):
    """int32 bias with scale ``in_scale * w_scale`` (float32 product), per
    channel if ``w_scales`` has one entry per channel, else per tensor."""
    scales = np.atleast_1d(np.float32(in_scale) * np.asarray(w_scales, np.float32)).astype(np.float32)
    # per-tensor weights -> one bias scale (a per-channel list would confuse
    # runtimes that read only the legacy single-scale field)
    q = np.round(b / scales.astype(np.float64))
    q = np.clip(q, np.iinfo(np.int32).min, np.iinfo(np.int32).max).astype(np.int32)
    return q, scales


def qparams(scale, zero_point, dim=0):
    s = np.atleast_1d(np.asarray(scale, np.float32))
    z = np.atleast_1d(np.asarray(zero_point, np.int64))
    if z.size == 1 and s.size > 1:
        z = np.zeros(s.shape, np.int64)
    return {"scale": s.tolist(), "zero_point": z.tolist(), "quantized_dimension": dim}


# ---------------------------------------------------------------------------
# Float reference network (numpy, float64) used for calibration
# ---------------------------------------------------------------------------


def _same_pads(size, k, stride):
    out = -(-size // stride)
    total = max((out - 1) * stride + k - size, 0)
    return out, total // 2, total - total // 2


def conv2d_float(x, w, b, stride=1, padding="SAME", depthwise=False):
    """NHWC conv; ``w`` is [O,KH,KW,I] (or [1,KH,KW,C] if ``depthwise``)."""
    n, h, wd, _c = x.shape
    kh, kw = w.shape[1], w.shape[2]
    if padding == "SAME":
        oh, pt, pb = _same_pads(h, kh, stride)
        ow, pl, pr = _same_pads(wd, kw, stride)
    else:
        oh, ow = (h - kh) // stride + 1, (wd - kw) // stride + 1
        pt = pb = pl = pr = 0
    xp = np.pad(x, ((0, 0), (pt, pb), (pl, pr), (0, 0)))
    cout = w.shape[3] if depthwise else w.shape[0]
    y = np.zeros((n, oh, ow, cout), np.float64)
    for i in range(kh):
        for j in range(kw):
            patch = xp[:, i : i + stride * (oh - 1) + 1 : stride, j : j + stride * (ow - 1) + 1 : stride, :]
            if depthwise:
                y += patch * w[0, i, j, :]
            else:
                y += np.einsum("nhwc,oc->nhwo", patch, w[:, i, j, :])
    return y + b


def _act(y, act):
    if act == ACT.RELU:
        return np.maximum(y, 0.0)
    if act == ACT.RELU6:
        return np.clip(y, 0.0, 6.0)
    return y


def _softmax(z):
    e = np.exp(z - z.max(axis=-1, keepdims=True))
    return e / e.sum(axis=-1, keepdims=True)


# ---------------------------------------------------------------------------
# kws_tiny
# ---------------------------------------------------------------------------

INPUT_SHAPE = (1, 49, 10, 1)
N_CLASSES = 4


def make_float_weights(seed: int) -> dict:
    rng = np.random.default_rng(seed)

    def he(shape, fan_in):
        return rng.normal(0.0, np.sqrt(2.0 / fan_in), size=shape)

    return {
        "conv1_w": he((8, 3, 3, 1), 9),
        "conv1_b": rng.normal(0.0, 0.1, 8),
        "dw_w": he((1, 3, 3, 8), 9),
        "dw_b": rng.normal(0.0, 0.1, 8),
        "pwa_w": he((16, 1, 1, 8), 8),
        "pwa_b": rng.normal(0.0, 0.1, 16),
        "pwb_w": 0.5 * he((16, 1, 1, 8), 8),  # smaller branch: different scale
        "pwb_b": rng.normal(0.0, 0.05, 16),
        "fc_w": he((N_CLASSES, 16), 16),
        "fc_b": rng.normal(0.0, 0.1, N_CLASSES),
    }


def float_forward(W: dict, x: np.ndarray) -> dict:
    """Run the float network; return every activation tensor by name."""
    t = {"input": x}
    t["conv1"] = _act(conv2d_float(x, W["conv1_w"], W["conv1_b"], stride=2), ACT.RELU)
    t["dw"] = _act(conv2d_float(t["conv1"], W["dw_w"], W["dw_b"], depthwise=True), ACT.RELU6)
    t["pwa"] = conv2d_float(t["dw"], W["pwa_w"], W["pwa_b"])
    t["pwb"] = conv2d_float(t["dw"], W["pwb_w"], W["pwb_b"])
    t["add"] = t["pwa"] + t["pwb"]
    t["pool"] = t["add"].mean(axis=(1, 2), keepdims=True)
    t["flat"] = t["pool"].reshape(x.shape[0], -1)
    t["logits"] = t["flat"] @ W["fc_w"].T + W["fc_b"]
    t["probs"] = _softmax(t["logits"])
    return t


def calibration_inputs(seed: int, n: int = 64) -> np.ndarray:
    rng = np.random.default_rng(seed + 1)
    return rng.standard_normal((n,) + INPUT_SHAPE[1:])


def build_kws_tiny(seed: int = DEFAULT_SEED, float_model: bool = False, symbolic_batch: bool = False) -> bytes:
    """Serialized kws_tiny model (int8, or float32 with ``float_model``). ``symbolic_batch``: every
    activation's shape_signature has -1 as its batch dim (and RESHAPE's new shape too), as the TFLite
    converter writes a model with an unknown batch; shapes keep 1 there."""
    W = make_float_weights(seed)
    ranges = {k: (float(v.min()), float(v.max())) for k, v in float_forward(W, calibration_inputs(seed)).items()}
    mb = ModelBuilder(description=f"edgemem kws_tiny ({'float32' if float_model else 'int8'}), seed {seed}")

    if float_model:
        f32 = np.float32

        def act(name, shape, _rng_key=None):
            return mb.tensor(name, shape, f32)

        def conv_w(name, w, _axis):
            return mb.const(name, w.astype(f32)), None

        def bias(name, b, _in_scale, _w_scales):
            return mb.const(name, b.astype(f32))

        def fc_w(name, w):
            return mb.const(name, w.astype(f32)), None
    else:
        aq = {k: activation_qparams(*r) for k, r in ranges.items()}
        # ops that do not requantize share their input's parameters
        aq["pool"] = aq["add"]
        aq["flat"] = aq["add"]
        aq["probs"] = (np.float32(1.0 / 256.0), -128)

        def act(name, shape, rng_key):
            s, z = aq[rng_key]
            sig = (-1,) + tuple(shape[1:]) if symbolic_batch else None
            return mb.tensor(name, shape, np.int8, qparams(s, z), signature=sig)

        def conv_w(name, w, axis):
            q, s = quantize_symmetric(w, axis)
            return mb.const(name, q, qparams(s, 0, axis)), s

        def bias(name, b, in_scale, w_scales):
            q, s = quantize_bias(b, in_scale, w_scales)
            return mb.const(name, q, qparams(s, 0, 0))

        def fc_w(name, w):
            q, s = quantize_symmetric(w, None)
            return mb.const(name, q, qparams(s, 0, 0)), s

    def scale_of(key):
        return None if float_model else aq[key][0]

    v_int8 = (lambda v8, vf: vf if float_model else v8)

    x = act("input", INPUT_SHAPE, "input")
    # CONV_2D 3x3 /2 SAME, RELU
    w1, s1 = conv_w("conv1/weights", W["conv1_w"], 0)
    b1 = bias("conv1/bias", W["conv1_b"], scale_of("input"), s1)
    c1 = act("conv1/relu", (1, 25, 5, 8), "conv1")
    mb.op(OP.CONV_2D, [x, w1, b1], [c1], *conv2d_options(2, PAD.SAME, ACT.RELU), version=v_int8(3, 1))
    # DEPTHWISE_CONV_2D 3x3 SAME, RELU6
    wd, sd = conv_w("dw/weights", W["dw_w"], 3)
    bd = bias("dw/bias", W["dw_b"], scale_of("conv1"), sd)
    d = act("dw/relu6", (1, 25, 5, 8), "dw")
    mb.op(OP.DEPTHWISE_CONV_2D, [c1, wd, bd], [d], *depthwise_options(1, PAD.SAME, ACT.RELU6), version=v_int8(3, 1))
    # two 1x1 convolutions of the same tensor
    wa, sa = conv_w("pw_a/weights", W["pwa_w"], 0)
    ba = bias("pw_a/bias", W["pwa_b"], scale_of("dw"), sa)
    a = act("pw_a/out", (1, 25, 5, 16), "pwa")
    mb.op(OP.CONV_2D, [d, wa, ba], [a], *conv2d_options(1, PAD.VALID, ACT.NONE), version=v_int8(3, 1))
    wb, sb = conv_w("pw_b/weights", W["pwb_w"], 0)
    bb = bias("pw_b/bias", W["pwb_b"], scale_of("dw"), sb)
    bt = act("pw_b/out", (1, 25, 5, 16), "pwb")
    mb.op(OP.CONV_2D, [d, wb, bb], [bt], *conv2d_options(1, PAD.VALID, ACT.NONE), version=v_int8(3, 1))
    # residual ADD
    s = act("add", (1, 25, 5, 16), "add")
    mb.op(OP.ADD, [a, bt], [s], *add_options(ACT.NONE), version=v_int8(2, 1))
    # global average pool
    p = act("pool", (1, 1, 1, 16), "pool")
    mb.op(OP.AVERAGE_POOL_2D, [s], [p], *pool2d_options((25, 5), 1, PAD.VALID), version=v_int8(2, 1))
    # reshape to [1,16]
    new_shape = [-1 if symbolic_batch else 1, 16]
    shp = mb.const("flatten/shape", np.array(new_shape, np.int32))
    f = act("flatten", (1, 16), "flat")
    mb.op(OP.RESHAPE, [p, shp], [f], *reshape_options(new_shape), version=1)
    # FULLY_CONNECTED
    wf, sf = fc_w("fc/weights", W["fc_w"])
    bf = bias("fc/bias", W["fc_b"], scale_of("flat"), sf)
    lg = act("fc/logits", (1, N_CLASSES), "logits")
    mb.op(OP.FULLY_CONNECTED, [f, wf, bf], [lg], *fully_connected_options(ACT.NONE), version=v_int8(4, 1))
    # SOFTMAX
    pr = act("probs", (1, N_CLASSES), "probs")
    mb.op(OP.SOFTMAX, [lg], [pr], *softmax_options(1.0), version=v_int8(2, 1))

    return mb.serialize([x], [pr])


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("-o", "--output", type=Path, help="output path (default examples/kws_tiny_{int8,float}.tflite)")
    ap.add_argument("--seed", type=int, default=DEFAULT_SEED)
    ap.add_argument("--float", dest="float_model", action="store_true", help="write the float32 variant")
    ap.add_argument("--symbolic-batch", action="store_true",
                    help="int8 variant whose batch dim is -1 in every activation's shape_signature "
                         "(default path examples/kws_tiny_batch_int8.tflite)")
    args = ap.parse_args(argv)
    if args.symbolic_batch and args.float_model:
        ap.error("--symbolic-batch makes the int8 variant only")
    default = DEFAULT_SYMBOLIC_PATH if args.symbolic_batch else DEFAULT_FLOAT_PATH if args.float_model else DEFAULT_INT8_PATH
    out = args.output or default
    data = build_kws_tiny(args.seed, args.float_model, args.symbolic_batch)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_bytes(data)
    print(f"wrote {out} ({len(data)} bytes)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
