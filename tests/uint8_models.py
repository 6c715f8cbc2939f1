"""One-operator uint8 models written with the flatbuffer builder (examples/make_example_model.py), for the uint8
operator survey and tests (tests/test_ops_uint8.py): ``single_op_model(NAME, shape, seed)`` is a uint8 model input
``x`` of ``shape`` (scale and zero point drawn from ``seed``) through operator NAME, its outputs the model's.
Layout operators keep x's quantization, as the converter writes them; the constants they need (a permutation,
begin/end, indices) are drawn from ``seed`` too, so that several seeds cover several layouts."""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "examples"))
import make_example_model as mm  # noqa: E402


def _options(table: str, **fields):
    """(BuiltinOptions type, builder fn) of ``table`` with scalar ``fields`` (CamelCase names as tflite's Add* functions)
    and list fields written as int32 vectors."""
    import tflite

    def fn(b):
        vectors = {}
        for key, value in fields.items():
            if isinstance(value, (list, tuple)):
                getattr(tflite, f"{table}Start{key}Vector")(b, len(value))
                for v in reversed(value):
                    b.PrependInt32(int(v))
                vectors[key] = b.EndVector()
        getattr(tflite, f"{table}Start")(b)
        for key, value in fields.items():
            getattr(tflite, f"{table}Add{key}")(b, vectors.get(key, value))
        return getattr(tflite, f"{table}End")(b)

    return getattr(mm.OPTS, table), fn


_DTYPE = [np.uint8]  # the element type single_op_model is writing (int8 for the survey's control models)


def _quant(rng) -> dict:
    lo = int(np.iinfo(_DTYPE[0]).min)
    return mm.qparams([float(rng.uniform(0.005, 0.05))], [int(rng.integers(lo, lo + 256))])


def _fixed(scale, uint8_zp):
    """The fixed output quantization TFLM asks of LOGISTIC, TANH, SOFTMAX, written for uint8 (int8: zp - 128)."""
    return mm.qparams([scale], [uint8_zp - (128 if _DTYPE[0] == np.int8 else 0)])


def _const(mb, name, values, dtype=np.int32):
    return mb.const(name, np.asarray(values, dtype))


class _Op:
    """What one operator's generator sees: the builder, x, its shape and quantization, the seed's generator."""

    def __init__(self, mb, x, shape, q, rng):
        self.mb, self.x, self.shape, self.q, self.rng = mb, x, tuple(shape), q, rng

    def out(self, name, shape, dtype=None, q="same"):
        return self.mb.tensor(name, shape, dtype or _DTYPE[0], self.q if q == "same" else q)

    def one(self, code, inputs, out_shape, options=(0, None), dtype=None, q="same", version=1):
        y = self.out("y", out_shape, dtype, q)
        self.mb.op(code, inputs, [y], *options, version=version)
        return [y]


def _reshape(o: _Op):
    n = int(np.prod(o.shape))
    new = (n // o.shape[-1], o.shape[-1])
    return o.one(mm.OP.RESHAPE, [o.x, _const(o.mb, "shape", new)], new, mm.reshape_options(new))


def _squeeze(o: _Op):
    shape = (1,) + o.shape
    o.mb.tensors[o.x].shape = shape  # x gets a leading 1 that SQUEEZE drops
    return o.one(mm.OP.SQUEEZE, [o.x], o.shape, _options("SqueezeOptions", SqueezeDims=[0]))


def _expand_dims(o: _Op):
    axis = int(o.rng.integers(0, len(o.shape) + 1))
    shape = o.shape[:axis] + (1,) + o.shape[axis:]
    return o.one(mm.OP.EXPAND_DIMS, [o.x, _const(o.mb, "axis", [axis])], shape)


def _shape(o: _Op):
    return o.one(mm.OP.SHAPE, [o.x], (len(o.shape),), _options("ShapeOptions", OutType=2), dtype=np.int32, q=None)


def _reverse(o: _Op):
    axis = int(o.rng.integers(0, len(o.shape)))
    return o.one(mm.OP.REVERSE_V2, [o.x, _const(o.mb, "axis", [axis])], o.shape)


def _transpose(o: _Op):
    perm = o.rng.permutation(len(o.shape))
    return o.one(mm.OP.TRANSPOSE, [o.x, _const(o.mb, "perm", perm)], tuple(o.shape[p] for p in perm))


def _concatenation(o: _Op):
    axis = len(o.shape) - 1
    x2 = o.mb.tensor("x2", o.shape, _DTYPE[0], o.q)
    shape = o.shape[:-1] + (2 * o.shape[-1],)
    return o.one(mm.OP.CONCATENATION, [o.x, x2], shape, _options("ConcatenationOptions", Axis=axis, FusedActivationFunction=0))


def _gather(o: _Op):
    idx = o.rng.integers(0, o.shape[-1], 5)
    axis = len(o.shape) - 1
    return o.one(mm.OP.GATHER, [o.x, _const(o.mb, "idx", idx)], o.shape[:-1] + (5,), _options("GatherOptions", Axis=axis))


def _gather_nd(o: _Op):
    idx = [[int(o.rng.integers(0, o.shape[0]))] for _ in range(3)]
    return o.one(mm.OP.GATHER_ND, [o.x, _const(o.mb, "idx", idx)], (3,) + o.shape[1:])


def _pack(o: _Op):
    x2 = o.mb.tensor("x2", o.shape, _DTYPE[0], o.q)
    return o.one(mm.OP.PACK, [o.x, x2], (2,) + o.shape, _options("PackOptions", ValuesCount=2, Axis=0))


def _unpack(o: _Op):
    outs = [o.out(f"y{i}", o.shape[1:]) for i in range(o.shape[0])]
    o.mb.op(mm.OP.UNPACK, [o.x], outs, *_options("UnpackOptions", Num=o.shape[0], Axis=0))
    return outs


def _split(o: _Op):
    axis = len(o.shape) - 1
    n = 2 if o.shape[axis] % 2 == 0 else 1
    outs = [o.out(f"y{i}", o.shape[:-1] + (o.shape[-1] // n,)) for i in range(n)]
    o.mb.op(mm.OP.SPLIT, [_const(o.mb, "axis", axis), o.x], outs, *_options("SplitOptions", NumSplits=n))
    return outs


def _split_v(o: _Op):
    axis = len(o.shape) - 1
    sizes = [1, o.shape[-1] - 1]
    outs = [o.out(f"y{i}", o.shape[:-1] + (s,)) for i, s in enumerate(sizes)]
    o.mb.op(mm.OP.SPLIT_V, [o.x, _const(o.mb, "sizes", sizes), _const(o.mb, "axis", axis)], outs, *_options("SplitVOptions", NumSplits=2))
    return outs


def _begin_size(o: _Op):
    begin = [int(o.rng.integers(0, d)) for d in o.shape]
    size = [int(o.rng.integers(1, d - b + 1)) for d, b in zip(o.shape, begin)]
    return begin, size


def _slice(o: _Op):
    begin, size = _begin_size(o)
    return o.one(mm.OP.SLICE, [o.x, _const(o.mb, "begin", begin), _const(o.mb, "size", size)], tuple(size))


def _strided_slice(o: _Op):
    begin, size = _begin_size(o)
    end = [b + s for b, s in zip(begin, size)]
    strides = [1] * (len(o.shape) - 1) + [2]
    shape = tuple(size[:-1]) + ((size[-1] + 1) // 2,)
    ins = [o.x, _const(o.mb, "begin", begin), _const(o.mb, "end", end), _const(o.mb, "strides", strides)]
    return o.one(mm.OP.STRIDED_SLICE, ins, shape, _options("StridedSliceOptions", BeginMask=0, EndMask=0))


def _pads(o: _Op):
    return [[int(o.rng.integers(0, 3)), int(o.rng.integers(0, 3))] for _ in o.shape]


def _pad(o: _Op):
    pads = _pads(o)
    shape = tuple(d + a + b for d, (a, b) in zip(o.shape, pads))
    return o.one(mm.OP.PAD, [o.x, _const(o.mb, "pads", pads)], shape)


def _mirror_pad(o: _Op):
    pads = [[min(a, d - 1), min(b, d - 1)] for d, (a, b) in zip(o.shape, _pads(o))]
    shape = tuple(d + a + b for d, (a, b) in zip(o.shape, pads))
    return o.one(mm.OP.MIRROR_PAD, [o.x, _const(o.mb, "pads", pads)], shape, _options("MirrorPadOptions", Mode=0))


def _tile(o: _Op):
    mult = [int(o.rng.integers(1, 3)) for _ in o.shape]
    return o.one(mm.OP.TILE, [o.x, _const(o.mb, "mult", mult)], tuple(d * m for d, m in zip(o.shape, mult)))


def _broadcast_to(o: _Op):
    shape = (2,) + o.shape
    return o.one(mm.OP.BROADCAST_TO, [o.x, _const(o.mb, "shape", shape)], shape)


def _depth_to_space(o: _Op):
    n, h, w, c = o.shape
    return o.one(mm.OP.DEPTH_TO_SPACE, [o.x], (n, h * 2, w * 2, c // 4), _options("DepthToSpaceOptions", BlockSize=2))


def _space_to_depth(o: _Op):
    n, h, w, c = o.shape
    return o.one(mm.OP.SPACE_TO_DEPTH, [o.x], (n, h // 2, w // 2, c * 4), _options("SpaceToDepthOptions", BlockSize=2))


def _binary(code, options):
    def gen(o: _Op):
        x2 = o.mb.tensor("x2", o.shape, _DTYPE[0], _quant(o.rng))
        return o.one(code, [o.x, x2], o.shape, options, q=_quant(o.rng))

    return gen


def _unary(code, options=(0, None), q=None):
    def gen(o: _Op):
        fixed = {"fixed256": (1 / 256, 0), "fixed128": (1 / 128, 128)}
        return o.one(code, [o.x], o.shape, options, q=_fixed(*fixed[q]) if q in fixed else _quant(o.rng))

    return gen


def _pool(code):
    def gen(o: _Op):
        n, h, w, c = o.shape
        return o.one(code, [o.x], (n, h // 2, w // 2, c), mm.pool2d_options((2, 2), 2), q="same")

    return gen


def _weights(rng, shape):
    lo = int(np.iinfo(_DTYPE[0]).min)
    return rng.integers(lo + 1, lo + 256, shape).astype(_DTYPE[0]), mm.qparams([0.01], [0 if lo else 128])


def _conv(o: _Op):
    n, h, w, c = o.shape
    wt = o.mb.const("w", *_weights(o.rng, (4, 3, 3, c)))
    b = o.mb.const("b", o.rng.integers(-500, 500, 4).astype(np.int32), mm.qparams([0.01 * o.q["scale"][0]], [0]))
    return o.one(mm.OP.CONV_2D, [o.x, wt, b], (n, h, w, 4), mm.conv2d_options(1, mm.PAD.SAME), q=_quant(o.rng))


def _fully_connected(o: _Op):
    k = int(np.prod(o.shape[1:]))
    wt = o.mb.const("w", *_weights(o.rng, (4, k)))
    b = o.mb.const("b", o.rng.integers(-500, 500, 4).astype(np.int32), mm.qparams([0.01 * o.q["scale"][0]], [0]))
    return o.one(mm.OP.FULLY_CONNECTED, [o.x, wt, b], (o.shape[0], 4), mm.fully_connected_options(), q=_quant(o.rng))


def _cast(o: _Op):
    return o.one(mm.OP.CAST, [o.x], o.shape, dtype=np.int32, q=None)


def _dequantize(o: _Op):
    return o.one(mm.OP.DEQUANTIZE, [o.x], o.shape, dtype=np.float32, q=None)


def _quantize_to(dtype):
    def gen(o: _Op):
        lo = int(np.iinfo(dtype).min) if np.iinfo(dtype).bits == 8 else 0
        return o.one(mm.OP.QUANTIZE, [o.x], o.shape, dtype=dtype, q=mm.qparams([float(o.rng.uniform(0.005, 0.05))], [int(o.rng.integers(lo, lo + 256))]))

    return gen


def _quantize_from(dtype, q):
    """QUANTIZE of x read as ``dtype`` (its quantization ``q``; None for float32) to uint8 (the int8 twin: to int8)."""
    def gen(o: _Op):
        o.mb.tensors[o.x].ttype = mm._NP_TO_TT[np.dtype(dtype)]
        o.mb.tensors[o.x].quant = q
        return o.one(mm.OP.QUANTIZE, [o.x], o.shape, q=_quant(o.rng))

    return gen


def _arg_max(o: _Op):
    axis = len(o.shape) - 1
    return o.one(mm.OP.ARG_MAX, [o.x, _const(o.mb, "axis", [axis])], o.shape[:-1], _options("ArgMaxOptions", OutputType=2), dtype=np.int32, q=None)


def _mean(o: _Op):
    return o.one(mm.OP.MEAN, [o.x, _const(o.mb, "axis", [1, 2])], (o.shape[0], 1, 1, o.shape[3]), _options("ReducerOptions", KeepDims=True), q=_quant(o.rng))


def _resize_nearest(o: _Op):
    n, h, w, c = o.shape
    return o.one(mm.OP.RESIZE_NEAREST_NEIGHBOR, [o.x, _const(o.mb, "size", [2 * h, 2 * w])], (n, 2 * h, 2 * w, c), _options("ResizeNearestNeighborOptions", AlignCorners=False))


def _comparison(code):
    def gen(o: _Op):
        x2 = o.mb.tensor("x2", o.shape, _DTYPE[0], o.q)
        return o.one(code, [o.x, x2], o.shape, dtype=np.bool_, q=None)

    return gen


def _minmax(code):
    def gen(o: _Op):
        x2 = o.mb.tensor("x2", o.shape, _DTYPE[0], o.q)
        return o.one(code, [o.x, x2], o.shape)

    return gen


GENERATORS = {
    # data movement
    "RESHAPE": _reshape, "SQUEEZE": _squeeze, "EXPAND_DIMS": _expand_dims, "SHAPE": _shape, "REVERSE_V2": _reverse,
    "TRANSPOSE": _transpose, "CONCATENATION": _concatenation, "GATHER": _gather, "GATHER_ND": _gather_nd,
    "PACK": _pack, "UNPACK": _unpack, "SPLIT": _split, "SPLIT_V": _split_v, "SLICE": _slice,
    "STRIDED_SLICE": _strided_slice, "PAD": _pad, "MIRROR_PAD": _mirror_pad, "TILE": _tile,
    "BROADCAST_TO": _broadcast_to, "DEPTH_TO_SPACE": _depth_to_space, "SPACE_TO_DEPTH": _space_to_depth,
    "RESIZE_NEAREST_NEIGHBOR": _resize_nearest, "CAST": _cast,
    # type conversions
    "DEQUANTIZE": _dequantize, "QUANTIZE_U8_I8": _quantize_to(np.int8), "QUANTIZE_U8_U8": _quantize_to(np.uint8),
    "QUANTIZE_U8_I16": _quantize_to(np.int16), "QUANTIZE_U8_I32": _quantize_to(np.int32),
    "QUANTIZE_I8_U8": _quantize_from(np.int8, mm.qparams([0.02], [-5])), "QUANTIZE_F32_U8": _quantize_from(np.float32, None),
    # arithmetic
    "ADD": _binary(mm.OP.ADD, mm.add_options()), "SUB": _binary(mm.OP.SUB, _options("SubOptions", FusedActivationFunction=0)),
    "MUL": _binary(mm.OP.MUL, mm.mul_options()), "MAXIMUM": _minmax(mm.OP.MAXIMUM), "MINIMUM": _minmax(mm.OP.MINIMUM),
    "LOGISTIC": _unary(mm.OP.LOGISTIC, q="fixed256"), "TANH": _unary(mm.OP.TANH, q="fixed128"),
    "SOFTMAX": _unary(mm.OP.SOFTMAX, mm.softmax_options(), q="fixed256"),
    "RELU": _unary(mm.OP.RELU), "RELU6": _unary(mm.OP.RELU6), "HARD_SWISH": _unary(mm.OP.HARD_SWISH),
    "LEAKY_RELU": _unary(mm.OP.LEAKY_RELU, _options("LeakyReluOptions", Alpha=0.2)), "ABS": _unary(mm.OP.ABS), "NEG": _unary(mm.OP.NEG),
    "MAX_POOL_2D": _pool(mm.OP.MAX_POOL_2D), "AVERAGE_POOL_2D": _pool(mm.OP.AVERAGE_POOL_2D),
    "CONV_2D": _conv, "FULLY_CONNECTED": _fully_connected, "ARG_MAX": _arg_max, "MEAN": _mean,
    "EQUAL": _comparison(mm.OP.EQUAL), "LESS": _comparison(mm.OP.LESS), "GREATER": _comparison(mm.OP.GREATER),
}  # fmt: skip


def single_op_model(name: str, shape=(1, 4, 6, 8), seed: int = 0, dtype=np.uint8) -> bytes:
    """uint8 x[shape] -> operator ``name`` (a key of GENERATORS) -> its outputs; ``dtype`` int8 writes the same
    model in int8 (weights and zero points too), the survey's check that a model TFLM refuses in uint8 is valid."""
    _DTYPE[0] = np.dtype(dtype).type
    rng = np.random.default_rng(seed)
    mb = mm.ModelBuilder(description=f"edgemem uint8 {name}")
    q = _quant(rng)
    x = mb.tensor("x", shape, _DTYPE[0], q)
    op = _Op(mb, x, shape, q, rng)
    outs = GENERATORS[name](op)
    extra = [t for t, tensor in enumerate(mb.tensors) if tensor.name == "x2"]
    return mb.serialize([x] + extra, outs)


def _flatten(mb, x, shape, q):
    """A Flatten computed from the tensor's shape (as TensorFlow's ``reshape(x, [tf.shape(x)[0], -1])``): SHAPE ->
    STRIDED_SLICE (the batch) -> CONCATENATION with [-1] -> RESHAPE; SHAPE reads the uint8 tensor, and the chain is
    evaluated at import."""
    s = mb.tensor("flat/shape", (len(shape),), np.int32)
    mb.op(mm.OP.SHAPE, [x], [s], *_options("ShapeOptions", OutType=2))
    batch = mb.tensor("flat/batch", (1,), np.int32)
    ins = [s, _const(mb, "flat/b", [0]), _const(mb, "flat/e", [1]), _const(mb, "flat/s", [1])]
    mb.op(mm.OP.STRIDED_SLICE, ins, [batch], *_options("StridedSliceOptions", BeginMask=0, EndMask=0))
    new = mb.tensor("flat/new", (2,), np.int32)
    cat = _options("ConcatenationOptions", Axis=0, FusedActivationFunction=0)
    mb.op(mm.OP.CONCATENATION, [batch, _const(mb, "flat/minus1", [-1])], [new], *cat)
    flat = (shape[0], int(np.prod(shape[1:])))
    y = mb.tensor("flat", flat, np.uint8, q)
    mb.op(mm.OP.RESHAPE, [x, new], [y])
    return y


def camera_model(shape=(1, 8, 8, 3), seed: int = 0) -> bytes:
    """A camera model around uint8 layout operators: uint8 frame x -> REVERSE_V2 (mirrored along its width) ->
    QUANTIZE int8 -> CONV_2D 3x3 (4) -> QUANTIZE uint8 (y) -> Flatten (SHAPE, STRIDED_SLICE, CONCATENATION, RESHAPE) ->
    outputs: the flat uint8 tensor and its DEQUANTIZE (float32)."""
    rng = np.random.default_rng(seed)
    n, h, w, c = shape
    mb = mm.ModelBuilder(description="edgemem uint8 camera model")
    q_x = mm.qparams([1 / 255], [0])
    x = mb.tensor("x", shape, np.uint8, q_x)
    mirrored = mb.tensor("mirrored", shape, np.uint8, q_x)
    mb.op(mm.OP.REVERSE_V2, [x, _const(mb, "axis", [2])], [mirrored])
    q_in = mm.qparams([float(rng.uniform(0.003, 0.006))], [int(rng.integers(-128, -100))])
    xq = mb.tensor("xq", shape, np.int8, q_in)
    mb.op(mm.OP.QUANTIZE, [mirrored], [xq])
    ws = np.full(4, 0.01, np.float32)
    wt = mb.const("conv/w", rng.integers(-127, 128, (4, 3, 3, c)).astype(np.int8), mm.qparams(ws, 0, 0))
    b = mb.const("conv/b", rng.integers(-200, 200, 4).astype(np.int32), mm.qparams(ws * np.float32(q_in["scale"][0]), 0, 0))
    yq = mb.tensor("yq", (n, h, w, 4), np.int8, mm.qparams([0.05], [int(rng.integers(-10, 10))]))
    mb.op(mm.OP.CONV_2D, [xq, wt, b], [yq], *mm.conv2d_options(1, mm.PAD.SAME, mm.ACT.NONE), version=3)
    q_y = mm.qparams([float(rng.uniform(0.03, 0.08))], [int(rng.integers(100, 156))])
    y = mb.tensor("y", (n, h, w, 4), np.uint8, q_y)
    mb.op(mm.OP.QUANTIZE, [yq], [y], version=2)
    flat = _flatten(mb, y, (n, h, w, 4), q_y)
    yf = mb.tensor("flat_float", mb.tensors[flat].shape, np.float32)
    mb.op(mm.OP.DEQUANTIZE, [flat], [yf], version=2)
    return mb.serialize([x], [flat, yf])


def movement_model(width: int = 6, channels: int = 4, rows: int = 3, seed: int = 0) -> bytes:
    """Only uint8 data movement: x[1,1,width,channels] -> SQUEEZE (axis 0) -> BROADCAST_TO [rows,1,width,channels]
    -> REVERSE_V2 (one axis, or two neighbours -- TFLM refuses others --, drawn from ``seed``) -> RESHAPE [rows*width, channels] (y)."""
    rng = np.random.default_rng(seed)
    mb = mm.ModelBuilder(description="edgemem uint8 movement model")
    q = _quant_u8(rng)
    x = mb.tensor("x", (1, 1, width, channels), np.uint8, q)
    sq = mb.tensor("squeezed", (1, width, channels), np.uint8, q)
    mb.op(mm.OP.SQUEEZE, [x], [sq], *_options("SqueezeOptions", SqueezeDims=[0]))
    big = (rows, 1, width, channels)
    br = mb.tensor("broadcast", big, np.uint8, q)
    mb.op(mm.OP.BROADCAST_TO, [sq, _const(mb, "shape", big)], [br])
    first = int(rng.integers(0, 4))
    axes = [first] if first == 3 or rng.integers(0, 2) else [first, first + 1]
    rv = mb.tensor("reversed", big, np.uint8, q)
    mb.op(mm.OP.REVERSE_V2, [br, _const(mb, "axes", axes)], [rv])
    y = mb.tensor("y", (rows * width, channels), np.uint8, q)
    mb.op(mm.OP.RESHAPE, [rv, _const(mb, "new", [rows * width, channels])], [y])
    return mb.serialize([x], [y])


def _quant_u8(rng) -> dict:
    return mm.qparams([float(rng.uniform(0.005, 0.05))], [int(rng.integers(0, 256))])


def requantize_model(shape, in_dtype, in_q, out_dtype, out_q) -> bytes:
    """x -> QUANTIZE -> y of ``shape``, each of its type and (scale, zero point); ``in_q`` None for a float x."""
    mb = mm.ModelBuilder(description="edgemem requantize")
    x = mb.tensor("x", shape, in_dtype, None if in_q is None else mm.qparams([in_q[0]], [in_q[1]]))
    y = mb.tensor("y", shape, out_dtype, mm.qparams([out_q[0]], [out_q[1]]))
    mb.op(mm.OP.QUANTIZE, [x], [y], version=2)
    return mb.serialize([x], [y])


def constant_dequantize_model(seed: int = 0) -> bytes:
    """float x[2,8] + DEQUANTIZE(uint8 constant [1,8]) -> y (float32): uint8-stored weights dequantized for a float
    operator."""
    rng = np.random.default_rng(seed)
    mb = mm.ModelBuilder(description="edgemem uint8 constant dequantize")
    x = mb.tensor("x", (2, 8), np.float32)
    w = mb.const("w", rng.integers(0, 256, (1, 8)).astype(np.uint8), _quant_u8(rng))
    wf = mb.tensor("wf", (1, 8), np.float32)
    mb.op(mm.OP.DEQUANTIZE, [w], [wf])
    y = mb.tensor("y", (2, 8), np.float32)
    mb.op(mm.OP.ADD, [x, wf], [y], *mm.add_options())
    return mb.serialize([x], [y])
