"""Small int8 models written with the flatbuffer builder (examples/make_example_model.py) for the pass tests:
a concatenation block, a widening layer with float output, a residual block."""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "examples"))
import make_example_model as mm  # noqa: E402

_Q = {"scale": [0.05], "zero_point": [-3]}  # every activation of the concat models (CONCATENATION needs one)


def _conv(mb, rng, name, x, c_in, c_out, k, out_shape, out=None):
    w = rng.integers(-127, 128, (c_out, k, k, c_in)).astype(np.int8)
    ws = (np.full(c_out, 0.004) * rng.uniform(0.5, 1.5, c_out)).astype(np.float32)
    wt = mb.const(f"{name}/w", w, mm.qparams(ws, 0, 0))
    b = mb.const(f"{name}/b", rng.integers(-2000, 2000, c_out).astype(np.int32), mm.qparams(ws * np.float32(_Q["scale"][0]), 0, 0))
    y = out if out is not None else mb.tensor(name, out_shape, np.int8, _Q)
    mb.op(mm.OP.CONV_2D, [x, wt, b], [y], *mm.conv2d_options(1, mm.PAD.SAME, mm.ACT.RELU), version=3)
    return y


def _concat_options(axis):
    import tflite

    def fn(b):
        tflite.ConcatenationOptionsStart(b)
        tflite.ConcatenationOptionsAddAxis(b, axis)
        tflite.ConcatenationOptionsAddFusedActivationFunction(b, mm.ACT.NONE)
        return tflite.ConcatenationOptionsEnd(b)

    return mm.OPTS.ConcatenationOptions, fn


def concat_model(axis: int, seed: int = 0) -> bytes:
    """x[1,8,8,3] -> a = conv1x1 (8), b = conv3x3 (8), c = conv1x1(a) (8); concat(a, b, c) on ``axis``
    (1: rows, 3: channels) -> conv1x1 (4). ``a`` is read by ``c`` too, so it stays a tensor of its own
    and is copied; ``b`` and ``c`` are written straight into the concatenation."""
    rng = np.random.default_rng(seed)
    mb = mm.ModelBuilder(description="edgemem concat test")
    x = mb.tensor("x", (1, 8, 8, 3), np.int8, _Q)
    a = _conv(mb, rng, "a", x, 3, 8, 1, (1, 8, 8, 8))
    b = _conv(mb, rng, "b", x, 3, 8, 3, (1, 8, 8, 8))
    c = _conv(mb, rng, "c", a, 8, 8, 1, (1, 8, 8, 8))
    cat_shape = (1, 24, 8, 8) if axis == 1 else (1, 8, 8, 24)
    cat = mb.tensor("cat", cat_shape, np.int8, _Q)
    mb.op(mm.OP.CONCATENATION, [a, b, c], [cat], *_concat_options(axis))
    y = _conv(mb, rng, "y", cat, 24 if axis == 3 else 8, 4, 1, cat_shape[:3] + (4,))
    return mb.serialize([x], [y])


def widening_model(seed: int = 0) -> bytes:
    """float x[1,16] -> QUANTIZE -> FULLY_CONNECTED 16 -> 256 -> DEQUANTIZE -> float [1,256]: the int8
    result (256 B) and the float one (1,024 B) meet at the DEQUANTIZE."""
    rng = np.random.default_rng(seed)
    mb = mm.ModelBuilder(description="edgemem dequantize-fold test")
    xf = mb.tensor("x", (1, 16), np.float32)
    q_in = {"scale": [0.02], "zero_point": [5]}
    q_out = {"scale": [0.1], "zero_point": [-7]}
    xq = mb.tensor("xq", (1, 16), np.int8, q_in)
    mb.op(mm.OP.QUANTIZE, [xf], [xq])
    w = rng.integers(-127, 128, (256, 16)).astype(np.int8)
    wt = mb.const("fc/w", w, mm.qparams([0.01], 0))
    bias = mb.const("fc/b", rng.integers(-500, 500, 256).astype(np.int32), mm.qparams([0.02 * 0.01], 0))
    yq = mb.tensor("yq", (1, 256), np.int8, q_out)
    mb.op(mm.OP.FULLY_CONNECTED, [xq, wt, bias], [yq], *mm.fully_connected_options(mm.ACT.NONE), version=4)
    yf = mb.tensor("y", (1, 256), np.float32)
    mb.op(mm.OP.DEQUANTIZE, [yq], [yf])
    return mb.serialize([xf], [yf])


def residual_model(seed: int = 0) -> bytes:
    rng = np.random.default_rng(seed)
    mb = mm.ModelBuilder(description="edgemem residual test")
    x = mb.tensor("x", (1, 8, 8, 8), np.int8, _Q)
    y1 = _conv(mb, rng, "c1", x, 8, 8, 1, (1, 8, 8, 8))
    y2 = _conv(mb, rng, "c2", y1, 8, 8, 3, (1, 8, 8, 8))
    out = mb.tensor("out", (1, 8, 8, 8), np.int8, _Q)
    mb.op(mm.OP.ADD, [y1, y2], [out], *mm.add_options(mm.ACT.NONE), version=2)
    return mb.serialize([x], [out])


def uint8_edges_model(in_q=(1 / 255, 0), q_in=(1 / 255, -128), q_conv=(0.05, -3), out_q=(0.05, 125), seed: int = 0) -> bytes:
    """A camera model's pattern (OpenMV's FastDepth): uint8 x[1,8,8,3] (``in_q``) -> QUANTIZE -> int8 (``q_in``)
    -> CONV_2D 3x3 (``q_conv``) -> QUANTIZE -> uint8 y[1,8,8,4] (``out_q``). The default scales are the
    converter's (same scale, zero points 128 apart: TFLM's x ^ 0x80 shortcut); others take Requantize's
    multiplier and clamp."""
    rng = np.random.default_rng(seed)
    mb = mm.ModelBuilder(description="edgemem uint8 edges test")
    x = mb.tensor("x", (1, 8, 8, 3), np.uint8, mm.qparams([in_q[0]], [in_q[1]]))
    xq = mb.tensor("xq", (1, 8, 8, 3), np.int8, mm.qparams([q_in[0]], [q_in[1]]))
    mb.op(mm.OP.QUANTIZE, [x], [xq])
    w = rng.integers(-127, 128, (4, 3, 3, 3)).astype(np.int8)
    ws = np.full(4, 0.01, np.float32)
    wt = mb.const("conv/w", w, mm.qparams(ws, 0, 0))
    b = mb.const("conv/b", rng.integers(-200, 200, 4).astype(np.int32), mm.qparams(ws * np.float32(q_in[0]), 0, 0))
    yq = mb.tensor("yq", (1, 8, 8, 4), np.int8, mm.qparams([q_conv[0]], [q_conv[1]]))
    mb.op(mm.OP.CONV_2D, [xq, wt, b], [yq], *mm.conv2d_options(1, mm.PAD.SAME, mm.ACT.NONE), version=3)
    y = mb.tensor("y", (1, 8, 8, 4), np.uint8, mm.qparams([out_q[0]], [out_q[1]]))
    mb.op(mm.OP.QUANTIZE, [yq], [y], version=2)
    return mb.serialize([x], [y])


def _split_options(n):
    import tflite

    def fn(b):
        tflite.SplitOptionsStart(b)
        tflite.SplitOptionsAddNumSplits(b, n)
        return tflite.SplitOptionsEnd(b)

    return mm.OPTS.SplitOptions, fn


def _unpack_options(n, axis):
    import tflite

    def fn(b):
        tflite.UnpackOptionsStart(b)
        tflite.UnpackOptionsAddNum(b, n)
        tflite.UnpackOptionsAddAxis(b, axis)
        return tflite.UnpackOptionsEnd(b)

    return mm.OPTS.UnpackOptions, fn


def split_fc_model(how: str = "split", n: int = 2, seed: int = 0) -> bytes:
    """A GRU cell's pattern (XMOS's denoisers): int8 x -> SPLIT (x[1, 8n] in ``n`` [1,8] pieces) or UNPACK (x[n,8]
    in its ``n`` rows [8]) -> a FULLY_CONNECTED 8 -> 6 on each piece -> ADD (when n > 1) -> y[1,6]. The
    FULLY_CONNECTEDs read the pieces of a multi-output operator; with n = 1 (a Keras RNN unrolled over one time
    step) that operator has a single output."""
    rng = np.random.default_rng(seed)
    mb = mm.ModelBuilder(description="edgemem split fc test")
    q = {"scale": [0.05], "zero_point": [-3]}
    if how == "split":
        x = mb.tensor("x", (1, 8 * n), np.int8, q)
        pieces = [mb.tensor(f"x{i}", (1, 8), np.int8, q) for i in range(n)]
        axis = mb.const("axis", np.array(1, np.int32))
        mb.op(mm.OP.SPLIT, [axis, x], pieces, *_split_options(n))
    else:
        x = mb.tensor("x", (n, 8), np.int8, q)
        pieces = [mb.tensor(f"x{i}", (8,), np.int8, q) for i in range(n)]
        mb.op(mm.OP.UNPACK, [x], pieces, *_unpack_options(n, 0))
    outs = []
    for i, piece in enumerate(pieces):
        w = mb.const(f"fc{i}/w", rng.integers(-127, 128, (6, 8)).astype(np.int8), mm.qparams([0.01], 0))
        b = mb.const(f"fc{i}/b", rng.integers(-300, 300, 6).astype(np.int32), mm.qparams([0.05 * 0.01], 0))
        y = mb.tensor(f"fc{i}", (1, 6), np.int8, mm.qparams([0.04], [2 - i]))
        mb.op(mm.OP.FULLY_CONNECTED, [piece, w, b], [y], *mm.fully_connected_options(mm.ACT.NONE), version=4)
        outs.append(y)
    if n == 1:
        return mb.serialize([x], outs)
    out = mb.tensor("y", (1, 6), np.int8, mm.qparams([0.06], [-1]))
    mb.op(mm.OP.ADD, outs, [out], *mm.add_options(mm.ACT.NONE), version=2)
    return mb.serialize([x], [out])


def _mean_options():
    import tflite

    def fn(b):
        tflite.ReducerOptionsStart(b)
        tflite.ReducerOptionsAddKeepDims(b, True)
        return tflite.ReducerOptionsEnd(b)

    return mm.OPTS.ReducerOptions, fn


def channel_pad_model(seed: int = 0) -> bytes:
    """MediaPipe's palm and hand detectors' pattern (OpenMV's openmv_palm_detection_full_192): int8 x[1,8,8,4] ->
    MAX_POOL_2D 2x2 /2 -> PAD of the channels 4 -> 8 (with the pool's zero point 97) -> ADD with CONV_2D 3x3 /2
    (8 channels) of x -> y[1,4,4,8], and MEAN over rows and columns of y -> m[1,1,1,8]. The int32 paddings and axes
    carry a quantization table with empty scale and zero-point vectors, as the converter writes them there: no
    quantization to TFLite."""
    rng = np.random.default_rng(seed)
    mb = mm.ModelBuilder(description="edgemem channel pad test")
    q_x, q_pool, no_quant = mm.qparams([0.3], [97]), mm.qparams([0.3], [97]), {"scale": [], "zero_point": []}
    x = mb.tensor("x", (1, 8, 8, 4), np.int8, q_x)
    pool = mb.tensor("pool", (1, 4, 4, 4), np.int8, q_pool)
    mb.op(mm.OP.MAX_POOL_2D, [x], [pool], *mm.pool2d_options((2, 2), 2, mm.PAD.VALID))
    pads = mb.const("channel_padding/Pad/paddings", np.array([[0, 0], [0, 0], [0, 0], [0, 4]], np.int32), no_quant)
    padded = mb.tensor("channel_padding/Pad", (1, 4, 4, 8), np.int8, q_pool)
    mb.op(mm.OP.PAD, [pool, pads], [padded])
    w = rng.integers(-127, 128, (8, 3, 3, 4)).astype(np.int8)
    ws = np.full(8, 0.004, np.float32)
    wt = mb.const("conv/w", w, mm.qparams(ws, 0, 0))
    b = mb.const("conv/b", rng.integers(-2000, 2000, 8).astype(np.int32), mm.qparams(ws * np.float32(0.3), 0, 0))
    conv = mb.tensor("conv", (1, 4, 4, 8), np.int8, mm.qparams([0.1], [22]))
    mb.op(mm.OP.CONV_2D, [x, wt, b], [conv], *mm.conv2d_options(2, mm.PAD.SAME, mm.ACT.NONE), version=3)
    y = mb.tensor("y", (1, 4, 4, 8), np.int8, mm.qparams([0.12], [-8]))
    mb.op(mm.OP.ADD, [padded, conv], [y], *mm.add_options(mm.ACT.NONE), version=2)
    axes = mb.const("mean/axes", np.array([1, 2], np.int32), no_quant)
    m = mb.tensor("m", (1, 1, 1, 8), np.int8, mm.qparams([0.05], [3]))
    mb.op(mm.OP.MEAN, [y, axes], [m], *_mean_options(), version=2)
    return mb.serialize([x], [y, m])


def constant_dequantize_model(seed: int = 0) -> bytes:
    """An SSD detector's anchors (ST's st_ssd_mobilenet_v1_025_192_COCO): int8 constants [1,4,4] and [1,2,4] ->
    CONCATENATION -> DEQUANTIZE -> float output a[1,6,4], known when the model is built (edgemem evaluates the
    CONCATENATION at import, frontend/fold.py); beside it int8 x[1,6,4] -> ADD with the concatenation -> DEQUANTIZE ->
    float output y[1,6,4]."""
    rng = np.random.default_rng(seed)
    mb = mm.ModelBuilder(description="edgemem constant dequantize test")
    q = mm.qparams([0.0076], [-66])
    c1 = mb.const("anchors/1", rng.integers(-128, 128, (1, 4, 4)).astype(np.int8), q)
    c2 = mb.const("anchors/2", rng.integers(-128, 128, (1, 2, 4)).astype(np.int8), q)
    cat = mb.tensor("anchors", (1, 6, 4), np.int8, q)
    mb.op(mm.OP.CONCATENATION, [c1, c2], [cat], *_concat_options(1))
    a = mb.tensor("a", (1, 6, 4), np.float32)
    mb.op(mm.OP.DEQUANTIZE, [cat], [a], version=2)
    x = mb.tensor("x", (1, 6, 4), np.int8, mm.qparams([0.01], [4]))
    s = mb.tensor("sum", (1, 6, 4), np.int8, mm.qparams([0.02], [-10]))
    mb.op(mm.OP.ADD, [x, cat], [s], *mm.add_options(mm.ACT.NONE), version=2)
    y = mb.tensor("y", (1, 6, 4), np.float32)
    mb.op(mm.OP.DEQUANTIZE, [s], [y], version=2)
    return mb.serialize([x], [a, y])


def folded_constant_logistic_model(seed: int = 0) -> bytes:
    """int8 constants [1,2,4] and [1,4,4] -> CONCATENATION (evaluated at import) -> LOGISTIC -> ADD with int8
    x[1,6,4] -> y: TVM converts LOGISTIC by looking its input up as an expression, which a folded constant is not."""
    rng = np.random.default_rng(seed)
    mb = mm.ModelBuilder(description="edgemem folded constant logistic test")
    q = mm.qparams([0.02], [-5])
    c1 = mb.const("c/1", rng.integers(-128, 128, (1, 2, 4)).astype(np.int8), q)
    c2 = mb.const("c/2", rng.integers(-128, 128, (1, 4, 4)).astype(np.int8), q)
    cat = mb.tensor("c", (1, 6, 4), np.int8, q)
    mb.op(mm.OP.CONCATENATION, [c1, c2], [cat], *_concat_options(1))
    t = mb.tensor("logistic", (1, 6, 4), np.int8, mm.qparams([1 / 256], [-128]))
    mb.op(mm.OP.LOGISTIC, [cat], [t])
    x = mb.tensor("x", (1, 6, 4), np.int8, mm.qparams([0.01], [4]))
    y = mb.tensor("y", (1, 6, 4), np.int8, mm.qparams([0.02], [-10]))
    mb.op(mm.OP.ADD, [x, t], [y], *mm.add_options(mm.ACT.NONE), version=2)
    return mb.serialize([x], [y])


def pointwise_model(width: int, channels: int = 16, seed: int = 0) -> bytes:
    """x[1,1,width,channels] -> CONV_2D 1x1 -> y of the same shape: input and output live together, so the
    arena is 2 * width * channels bytes, a size a test can aim at a region's boundary."""
    rng = np.random.default_rng(seed)
    mb = mm.ModelBuilder(description="edgemem pointwise test")
    x = mb.tensor("x", (1, 1, width, channels), np.int8, _Q)
    y = _conv(mb, rng, "y", x, channels, channels, 1, (1, 1, width, channels))
    return mb.serialize([x], [y])


def dense_model(inputs: int, outputs: int, seed: int = 0) -> bytes:
    """x[1,inputs] -> FULLY_CONNECTED -> y[1,outputs]: inputs * outputs bytes of weights (flash), little RAM."""
    rng = np.random.default_rng(seed)
    mb = mm.ModelBuilder(description="edgemem dense test")
    x = mb.tensor("x", (1, inputs), np.int8, _Q)
    wt = mb.const("fc/w", rng.integers(-127, 128, (outputs, inputs)).astype(np.int8), mm.qparams([0.004], 0))
    bias = mb.const("fc/b", rng.integers(-500, 500, outputs).astype(np.int32), mm.qparams([0.004 * 0.05], 0))
    y = mb.tensor("y", (1, outputs), np.int8, _Q)
    mb.op(mm.OP.FULLY_CONNECTED, [x, wt, bias], [y], *mm.fully_connected_options(mm.ACT.NONE), version=4)
    return mb.serialize([x], [y])


# ---------------------------------------------------------------- operator options shared by the int16 tests


def depthwise_options(stride, padding, act, dilation=(1, 1), multiplier=1):
    """DepthwiseConv2DOptions for mm.ModelBuilder.op (stride and dilation as (H, W))."""
    import tflite

    def fn(b):
        tflite.DepthwiseConv2DOptionsStart(b)
        tflite.DepthwiseConv2DOptionsAddPadding(b, padding)
        tflite.DepthwiseConv2DOptionsAddStrideW(b, stride[1])
        tflite.DepthwiseConv2DOptionsAddStrideH(b, stride[0])
        tflite.DepthwiseConv2DOptionsAddDepthMultiplier(b, multiplier)
        tflite.DepthwiseConv2DOptionsAddFusedActivationFunction(b, act)
        tflite.DepthwiseConv2DOptionsAddDilationWFactor(b, dilation[1])
        tflite.DepthwiseConv2DOptionsAddDilationHFactor(b, dilation[0])
        return tflite.DepthwiseConv2DOptionsEnd(b)

    return mm.OPTS.DepthwiseConv2DOptions, fn


def transpose_conv_options(stride, padding, act):
    """TransposeConvOptions for mm.ModelBuilder.op (stride as (H, W))."""
    import tflite

    def fn(b):
        tflite.TransposeConvOptionsStart(b)
        tflite.TransposeConvOptionsAddPadding(b, padding)
        tflite.TransposeConvOptionsAddStrideH(b, stride[0])
        tflite.TransposeConvOptionsAddStrideW(b, stride[1])
        tflite.TransposeConvOptionsAddFusedActivationFunction(b, act)
        return tflite.TransposeConvOptionsEnd(b)

    return mm.OPTS.TransposeConvOptions, fn


# ---------------------------------------------------------------- a bias as TFLM's int64 pointer reads it


def _bias_table(data: bytes, op_index: int, bias_input: int):
    """(bias tensor, its buffer's flatbuffer table) of input ``bias_input`` of operator ``op_index`` (negative:
    from the end) of subgraph 0."""
    import tflite

    m = tflite.Model.GetRootAsModel(data, 0)
    sg = m.Subgraphs(0)
    op = sg.Operators(op_index % sg.OperatorsLength())
    t = sg.Tensors(int(op.Inputs(bias_input)))
    return t, m.Buffers(t.Buffer())._tab


def bias_as_tflm_reads_it(data: bytes, op_index: int, bias_input: int) -> np.ndarray:
    """The int64 values at the start of that operator's bias data (what TFLM's int64 pointer reads), as many as the
    file holds of the bias's channel count."""
    t, tab = _bias_table(data, op_index, bias_input)
    start = tab.Vector(tab.Offset(4))
    raw = data[start : start + 8 * int(t.ShapeAsNumpy()[0])]
    return np.frombuffer(raw[: len(raw) // 8 * 8], "<i8")


def bias_moved_to_end(data: bytes, op_index: int, bias_input: int) -> bytes:
    """``data`` with that operator's bias data moved to the last bytes of the file: TFLM's int64 read of it runs
    past the end of the file (undefined)."""
    import struct

    _, tab = _bias_table(data, op_index, bias_input)
    field_pos = tab.Pos + tab.Offset(4)
    start = tab.Vector(tab.Offset(4))
    payload = bytes(tab.Bytes[start : start + tab.VectorLen(tab.Offset(4))])
    out = bytearray(data)
    out += bytes(-(len(out) + 4) % 16)  # the data 16-aligned after its length word
    vector = len(out)
    out += struct.pack("<I", len(payload)) + payload
    struct.pack_into("<I", out, field_pos, vector - field_pos)
    return bytes(out)
