"""Layout operators (frontend/ops/layout.py) and build-time folding (frontend/fold.py) against TFLite Micro.

Two sources of models: the converter-made ones of tests/models/gen_layout.py (tests/models/ops/, int8 with
int8 or float io, float32) and hand-made ones below (ModelBuilder) for what the converter does not write:
int32/bool data, CAST between types, STRIDED_SLICE masks, run-time indices, SQUEEZE/EXPAND_DIMS operators,
3-D SPACE_TO_BATCH_ND, folded shape arithmetic. Each test builds with edgemem for the host and compares with
TFLM (tests/op_check.py): int8/int32/bool bit-exact, float32 within 1e-5 relative.
"""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "examples"))
import make_example_model as mm  # noqa: E402
import tflite  # noqa: E402
from op_check import check_model, model_param  # noqa: E402

from edgemem.errors import UnsupportedModelError  # noqa: E402

mm._NP_TO_TT.setdefault(np.dtype(np.bool_), mm.TT.BOOL)  # noqa: SLF001  (the builder has no bool tensors)

OPS_DIR = Path(__file__).resolve().parent / "models" / "ops"
LAYOUT_OPS = ("PACK", "UNPACK", "SPLIT", "SPLIT_V", "SLICE", "STRIDED_SLICE", "GATHER", "GATHER_ND", "DEPTH_TO_SPACE",
              "SPACE_TO_DEPTH", "SPACE_TO_BATCH_ND", "BATCH_TO_SPACE_ND", "MIRROR_PAD", "REVERSE_V2", "BROADCAST_TO",
              "CAST", "TILE", "RESHAPE",
              # integerize's own data movement (PAD, PADV2, TRANSPOSE, CONCATENATION, RESIZE_NEAREST_NEIGHBOR), as
              # the converter writes them
              "PAD", "PADV2", "TRANSPOSE", "CONCATENATION", "RESIZE_NEAREST_NEIGHBOR")  # fmt: skip
# float-edged int8 models (QUANTIZE/DEQUANTIZE around the operator, shared code): a few stand for all of them
IOFLOAT = ("PADV2-value_iofloat", "CONCATENATION-axis3_iofloat", "RESHAPE-flatten_iofloat", "RESHAPE-flattendense_iofloat", "PACK-axis2_iofloat", "SPLIT_V-sizes_iofloat", "STRIDED_SLICE-negstride_iofloat",
           "GATHER-axis2_iofloat", "SPACE_TO_BATCH_ND-pad_iofloat")  # fmt: skip
CONVERTED = sorted(p for p in OPS_DIR.glob("*.tflite") if p.name.split("-")[0] in LAYOUT_OPS
                   and ("_iofloat" not in p.name or p.name.rsplit("-", 1)[0] in IOFLOAT))  # fmt: skip

Q = {"scale": [0.05], "zero_point": [-3]}
OP = mm.OP


def options(name: str, **fields):
    """(options type, builder fn) of tflite.<name> with scalar ``fields`` (CamelCase names)."""

    def fn(b):
        getattr(tflite, f"{name}Start")(b)
        for key, value in fields.items():
            getattr(tflite, f"{name}Add{key}")(b, value)
        return getattr(tflite, f"{name}End")(b)

    return getattr(mm.OPTS, name), fn


def squeeze_options(dims):
    def fn(b):
        tflite.SqueezeOptionsStartSqueezeDimsVector(b, len(dims))
        for d in reversed(dims):
            b.PrependInt32(int(d))
        vec = b.EndVector()
        tflite.SqueezeOptionsStart(b)
        tflite.SqueezeOptionsAddSqueezeDims(b, vec)
        return tflite.SqueezeOptionsEnd(b)

    return mm.OPTS.SqueezeOptions, fn


Q16 = {"scale": [0.0003], "zero_point": [0]}


def _quant(dtype):
    return Q if dtype == np.int8 else (Q16 if dtype == np.int16 else None)


def unary_model(op, x_shape, dtype, out_shape, consts=(), opts=(0, None), out_dtype=None, version=1, const_first=False):
    """x -> OP(x, *consts) -> y, one operator."""
    mb = mm.ModelBuilder()
    out_dtype = out_dtype or dtype
    x = mb.tensor("x", x_shape, dtype, _quant(dtype))
    cs = [mb.const(f"c{i}", np.asarray(c)) for i, c in enumerate(consts)]
    y = mb.tensor("y", out_shape, out_dtype, _quant(out_dtype))
    mb.op(op, (cs + [x]) if const_first else ([x] + cs), [y], *opts, version=version)
    return mb.serialize([x], [y])


def strided_slice_model(x_shape, dtype, begin, end, strides, out_shape, **masks):
    i32 = lambda v: np.array(v, np.int32)  # noqa: E731
    return unary_model(OP.STRIDED_SLICE, x_shape, dtype, out_shape, [i32(begin), i32(end), i32(strides)],
                       options("StridedSliceOptions", **masks))  # fmt: skip


def _ss_shape(x_shape, begin, end, strides, **m):
    from edgemem.frontend.fold import python_slices

    masks = [m.get(k, 0) for k in ("BeginMask", "EndMask", "ShrinkAxisMask", "EllipsisMask", "NewAxisMask")]
    return np.zeros(x_shape)[python_slices(x_shape, begin, end, strides, *masks)].shape


STRIDED = {
    "negative_masks": ((1, 7, 6, 3), [0, -1, 5, 0], [1, 0, 0, 3], [1, -2, -1, 1], {"BeginMask": 1, "EndMask": 8 | 2}),
    "clamped": ((1, 7, 6, 3), [0, -20, 2, 1], [1, 30, -1, 3], [1, 3, 1, 1], {}),
    "shrink_neg": ((1, 7, 6, 3), [0, -2, 0, -1], [1, 0, 6, 0], [1, 1, 2, 1], {"ShrinkAxisMask": 2 | 8}),
    "new_axis": ((1, 7, 6, 3), [0, 0, 1, 0], [1, 0, 5, 3], [1, 1, 2, 1], {"NewAxisMask": 2}),
    "ellipsis_rev": ((1, 7, 6, 3), [0, 0], [0, 0], [1, -1], {"EllipsisMask": 1, "BeginMask": 2, "EndMask": 2}),
}


def _ss_case(name, dtype):
    shape, b, e, s, m = STRIDED[name]
    return strided_slice_model(shape, dtype, b, e, s, _ss_shape(shape, b, e, s, **m), **m)


def cast_model(src, dst, shape=(2, 3, 4)):
    return unary_model(OP.CAST, shape, src, shape, out_dtype=dst)


def gather_runtime_model(dtype):
    """GATHER on x[4, 3] with indices computed at run time: a bool input cast to int32 (values 0/1)."""
    mb = mm.ModelBuilder()
    x = mb.tensor("x", (4, 3), dtype, _quant(dtype))
    sel = mb.tensor("sel", (5,), np.bool_)
    idx = mb.tensor("idx", (5,), np.int32)
    y = mb.tensor("y", (5, 3), dtype, _quant(dtype))
    mb.op(OP.CAST, [sel], [idx])
    mb.op(OP.GATHER, [x, idx], [y], *options("GatherOptions", Axis=0))
    return mb.serialize([x, sel], [y])


def embedding_model(hybrid: bool):
    """EMBEDDING_LOOKUP of run-time ids (bool cast to int32) in a constant table: int8 -> float32 (TFLM's
    hybrid lookup, zero point 0) or float32."""
    rng = np.random.default_rng(1)
    mb = mm.ModelBuilder()
    sel = mb.tensor("sel", (6,), np.bool_)
    ids = mb.tensor("ids", (6,), np.int32)
    if hybrid:
        table = mb.const("table", rng.integers(-128, 128, (3, 2, 4)).astype(np.int8), {"scale": [0.037], "zero_point": [0]})
    else:
        table = mb.const("table", rng.standard_normal((3, 2, 4)).astype(np.float32))
    y = mb.tensor("y", (6, 2, 4), np.float32)
    mb.op(OP.CAST, [sel], [ids])
    mb.op(OP.EMBEDDING_LOOKUP, [ids, table], [y])
    return mb.serialize([sel], [y])


def embedding_activation_model(dtype):
    """EMBEDDING_LOOKUP of constant ids in a run-time table (int8 -> int8 or float32)."""
    mb = mm.ModelBuilder()
    table = mb.tensor("table", (5, 3), dtype, _quant(dtype))
    ids = mb.const("ids", np.array([4, 0, 2, 2], np.int32))
    y = mb.tensor("y", (4, 3), dtype, _quant(dtype))
    mb.op(OP.EMBEDDING_LOOKUP, [ids, table], [y])
    return mb.serialize([table], [y])


def dynamic_update_slice_model(dtype, start):
    mb = mm.ModelBuilder()
    x = mb.tensor("x", (1, 6, 5, 2), dtype, _quant(dtype))
    u = mb.tensor("u", (1, 3, 2, 2), dtype, _quant(dtype))
    s = mb.const("start", np.array(start, np.int32))
    y = mb.tensor("y", (1, 6, 5, 2), dtype, _quant(dtype))
    mb.op(OP.DYNAMIC_UPDATE_SLICE, [x, u, s], [y])
    return mb.serialize([x, u], [y])


def multi_output_model(op, dtype):
    """SPLIT / UNPACK of int32 or bool data, one output unused by the model (only two are outputs)."""
    mb = mm.ModelBuilder()
    x = mb.tensor("x", (2, 6, 3), dtype, _quant(dtype))
    if op == OP.SPLIT:
        axis = mb.const("axis", np.array(1, np.int32))
        ys = [mb.tensor(f"y{i}", (2, 2, 3), dtype, _quant(dtype)) for i in range(3)]
        mb.op(OP.SPLIT, [axis, x], ys, *options("SplitOptions", NumSplits=3))
    else:
        ys = [mb.tensor(f"y{i}", (2, 6), dtype, _quant(dtype)) for i in range(3)]
        mb.op(OP.UNPACK, [x], ys, *options("UnpackOptions", Num=3, Axis=2))
    return mb.serialize([x], [ys[0], ys[2]])


def zeros_like_model(dtype):
    """y = x + ZEROS_LIKE(x): the zeros are folded at import (the shape is fixed), the ADD takes them as a constant
    (an int32 one widened to int64 by TVM's legalization: an int64 constant in flash)."""
    mb = mm.ModelBuilder()
    x = mb.tensor("x", (2, 3, 4), dtype, _quant(dtype))
    z = mb.tensor("z", (2, 3, 4), dtype, _quant(dtype))
    y = mb.tensor("y", (2, 3, 4), dtype, {"scale": [0.07], "zero_point": [5]} if dtype == np.int8 else None)
    mb.op(OP.ZEROS_LIKE, [x], [z])
    mb.op(OP.ADD, [x, z], [y], *mm.add_options())
    return mb.serialize([x], [y])


def fill_model(dtype):
    """FILL of a constant shape with a value read at run time (a model input [1] reshaped to a scalar; the
    harness's seeded inputs cannot be scalars)."""
    mb = mm.ModelBuilder()
    v1 = mb.tensor("v1", (1,), dtype, _quant(dtype))
    v = mb.tensor("v", (), dtype, _quant(dtype))
    y = mb.tensor("y", (2, 3, 2), dtype, _quant(dtype))
    mb.op(OP.RESHAPE, [v1, mb.const("scalar", np.zeros(0, np.int32))], [v])
    mb.op(OP.FILL, [mb.const("dims", np.array([2, 3, 2], np.int32)), v], [y])
    return mb.serialize([v1], [y])


def pack_model(dtype):
    mb = mm.ModelBuilder()
    a, b = (mb.tensor(n, (3, 2), dtype, _quant(dtype)) for n in "ab")
    y = mb.tensor("y", (3, 2, 2), dtype, _quant(dtype))
    mb.op(OP.PACK, [a, b], [y], *options("PackOptions", ValuesCount=2, Axis=-1))
    return mb.serialize([a, b], [y])


def folded_reshape_model(dtype):
    """x[1,4,6,2] -> RESHAPE(x, shape) where shape = CONCATENATION(STRIDED_SLICE(SHAPE(x)), CAST(FILL([1], 12.0))):
    every shape operator folded at build time, the RESHAPE a view."""
    mb = mm.ModelBuilder()
    x = mb.tensor("x", (1, 4, 6, 2), dtype, _quant(dtype))
    shp, head, tail, tail_f, new_shape = (mb.tensor(n, s, t) for n, s, t in (
        ("shape", (4,), np.int32), ("head", (2,), np.int32), ("tail", (1,), np.int32), ("tail_f", (1,), np.float32),
        ("new_shape", (3,), np.int32)))  # fmt: skip
    y = mb.tensor("y", (1, 4, 12), dtype, _quant(dtype))
    i32 = lambda v: mb.const(f"k{len(mb.tensors)}", np.array(v, np.int32))  # noqa: E731
    mb.op(OP.SHAPE, [x], [shp], *options("ShapeOptions", OutType=mm.TT.INT32))
    mb.op(OP.STRIDED_SLICE, [shp, i32([0]), i32([2]), i32([1])], [head], *options("StridedSliceOptions"))
    twelve = mb.tensor("twelve", (), np.float32)  # a scalar (the builder's constants are 1-D at least)
    mb.op(OP.RESHAPE, [mb.const("twelve_1", np.array([12.0], np.float32)), i32(np.zeros(0, np.int32))], [twelve])
    mb.op(OP.FILL, [i32([1]), twelve], [tail_f])
    mb.op(OP.CAST, [tail_f], [tail])
    mb.op(OP.CONCATENATION, [head, tail], [new_shape], *options("ConcatenationOptions", Axis=0))
    mb.op(OP.RESHAPE, [x, new_shape], [y])
    return mb.serialize([x], [y])


def broadcast_args_model(dtype, broadcast_args: bool = False):
    """BROADCAST_TO(x[3,1], shape) with shape = CONCATENATION([2], SHAPE(x) * [1, 4]) (or BROADCAST_ARGS(SHAPE(x),
    [2,1,4]), which neither TFLM's nor LiteRT's Python interpreter registers) plus ZEROS_LIKE folded into a
    constant operand of a PACK: the shape operators all evaluated at build time."""
    mb = mm.ModelBuilder()
    x = mb.tensor("x", (3, 1), dtype, _quant(dtype))
    shp, bshape = mb.tensor("shape", (2,), np.int32), mb.tensor("bshape", (3,), np.int32)
    b = mb.tensor("b", (2, 3, 4), dtype, _quant(dtype))
    z = mb.tensor("z", (2, 3, 4), dtype, _quant(dtype))
    y = mb.tensor("y", (2, 2, 3, 4), dtype, _quant(dtype))
    mb.op(OP.SHAPE, [x], [shp], *options("ShapeOptions", OutType=mm.TT.INT32))
    if broadcast_args:
        mb.op(OP.BROADCAST_ARGS, [shp, mb.const("other", np.array([2, 1, 4], np.int32))], [bshape])
    else:
        scaled = mb.tensor("scaled", (2,), np.int32)
        mb.op(OP.MUL, [shp, mb.const("times", np.array([1, 4], np.int32))], [scaled], *options("MulOptions"))
        mb.op(OP.CONCATENATION, [mb.const("two", np.array([2], np.int32)), scaled], [bshape], *options("ConcatenationOptions", Axis=0))
    mb.op(OP.BROADCAST_TO, [x, bshape], [b], version=2)  # TFLM wants a constant shape: LiteRT is the oracle
    if dtype != np.int8:  # LiteRT (the oracle here) has no int8 ZEROS_LIKE
        mb.op(OP.ZEROS_LIKE, [b], [z])
    mb.op(OP.PACK, [b, z if dtype != np.int8 else b], [y], *options("PackOptions", ValuesCount=2, Axis=0))
    return mb.serialize([x], [y])


def space_batch_3d_model(dtype):
    """SPACE_TO_BATCH_ND then BATCH_TO_SPACE_ND on 3-D [1, 10, 3] (block 3, pad 1/1, crop 1/1)."""
    mb = mm.ModelBuilder()
    x = mb.tensor("x", (1, 10, 3), dtype, _quant(dtype))
    s = mb.tensor("s", (3, 4, 3), dtype, _quant(dtype))
    y = mb.tensor("y", (1, 10, 3), dtype, _quant(dtype))
    mb.op(OP.SPACE_TO_BATCH_ND, [x, mb.const("block", np.array([3], np.int32)), mb.const("pad", np.array([[1, 1]], np.int32))], [s])
    mb.op(OP.BATCH_TO_SPACE_ND, [s, mb.const("block2", np.array([3], np.int32)), mb.const("crop", np.array([[1, 1]], np.int32))], [y])
    return mb.serialize([x], [s, y])


MODELS = {
    "squeeze_int8": lambda: unary_model(OP.SQUEEZE, (1, 4, 1, 3), np.int8, (4, 3), opts=squeeze_options([0, 2])),
    # int16 (16x8 models): the converter writes RESHAPE for these, TFLM runs them on int16 all the same
    "squeeze_int16": lambda: unary_model(OP.SQUEEZE, (1, 4, 1, 3), np.int16, (4, 3), opts=squeeze_options([0, 2])),
    "expand_dims_int16": lambda: unary_model(OP.EXPAND_DIMS, (4, 3), np.int16, (4, 1, 3), [np.array(1, np.int32)]),
    "dynamic_update_slice_int16": lambda: dynamic_update_slice_model(np.int16, [0, 2, 3, 0]),
    "expand_dims_int8": lambda: unary_model(OP.EXPAND_DIMS, (4, 3), np.int8, (4, 1, 3), [np.array(-2, np.int32)]),
    "expand_dims_bool": lambda: unary_model(OP.EXPAND_DIMS, (4, 3), np.bool_, (1, 4, 3), [np.array(0, np.int32)]),
    "expand_dims_float32": lambda: unary_model(OP.EXPAND_DIMS, (4, 3), np.float32, (4, 3, 1), [np.array(2, np.int32)]),
    **{f"zeros_like_{np.dtype(t).name}": (lambda t=t: zeros_like_model(t)) for t in (np.int8, np.int32, np.float32)},
    "squeeze_float32": lambda: unary_model(OP.SQUEEZE, (1, 4, 1, 3), np.float32, (4, 1, 3), opts=squeeze_options([0])),
    "pack_int32": lambda: pack_model(np.int32),
    "pack_bool_reverse": lambda: unary_model(OP.REVERSE_V2, (3, 4, 2), np.bool_, (3, 4, 2), [np.array([1], np.int32)]),
    "split_int32": lambda: multi_output_model(OP.SPLIT, np.int32),
    "unpack_int8": lambda: multi_output_model(OP.UNPACK, np.int8),
    "split_v_float_neg1": lambda: _split_v(np.float32),
    "slice_bool": lambda: unary_model(OP.SLICE, (3, 5, 2), np.bool_, (2, 3, 2), [np.array([1, 1, 0], np.int32), np.array([-1, 3, -1], np.int32)]),
    "slice_int32": lambda: unary_model(OP.SLICE, (3, 5, 2), np.int32, (1, 4, 1), [np.array([2, 1, 1], np.int32), np.array([1, -1, 1], np.int32)]),
    "mirror_pad_int32": lambda: unary_model(OP.MIRROR_PAD, (3, 4), np.int32, (6, 7), [np.array([[2, 1], [0, 3]], np.int32)], options("MirrorPadOptions", Mode=0)),
    "mirror_pad_int8_symmetric": lambda: unary_model(OP.MIRROR_PAD, (1, 3, 4, 2), np.int8, (1, 8, 6, 2), [np.array([[0, 0], [3, 2], [1, 1], [0, 0]], np.int32)], options("MirrorPadOptions", Mode=1)),
    "gather_runtime_int8": lambda: gather_runtime_model(np.int8),
    "gather_runtime_float32": lambda: gather_runtime_model(np.float32),
    "gather_int32_const": lambda: unary_model(OP.GATHER, (5, 3), np.int32, (2, 2, 3), [np.array([[4, 0], [1, 1]], np.int32)], options("GatherOptions", Axis=0)),
    "gather_int64_indices_float32": lambda: unary_model(OP.GATHER, (5, 3), np.float32, (2, 3), [np.array([4, 1], np.int64)], options("GatherOptions", Axis=0)),
    "fill_runtime_value_float32": lambda: fill_model(np.float32),
    "fill_runtime_value_int8": lambda: fill_model(np.int8),
    "gather_nd_int32_full": lambda: unary_model(OP.GATHER_ND, (3, 4), np.int32, (2,), [np.array([[2, 3], [0, 1]], np.int32)]),
    "embedding_hybrid": lambda: embedding_model(True),
    "embedding_float32": lambda: embedding_model(False),
    "embedding_table_int8": lambda: embedding_activation_model(np.int8),
    "embedding_table_float32": lambda: embedding_activation_model(np.float32),
    "dynamic_update_slice_int8": lambda: dynamic_update_slice_model(np.int8, [0, 2, 1, 0]),
    "dynamic_update_slice_float32_clamped": lambda: dynamic_update_slice_model(np.float32, [0, 5, -2, 3]),
    "dynamic_update_slice_int32": lambda: dynamic_update_slice_model(np.int32, [0, 1, 3, 0]),
    "depth_to_space_block3_float32": lambda: unary_model(OP.DEPTH_TO_SPACE, (1, 2, 3, 18), np.float32, (1, 6, 9, 2), opts=options("DepthToSpaceOptions", BlockSize=3)),
    "space_to_depth_block3_int8": lambda: unary_model(OP.SPACE_TO_DEPTH, (1, 6, 3, 2), np.int8, (1, 2, 1, 18), opts=options("SpaceToDepthOptions", BlockSize=3)),
    "space_batch_3d_int8": lambda: space_batch_3d_model(np.int8),
    "space_batch_3d_float32": lambda: space_batch_3d_model(np.float32),
    "broadcast_to_int32": lambda: unary_model(OP.BROADCAST_TO, (3, 1), np.int32, (2, 3, 4), [np.array([2, 3, 4], np.int32)]),
    "tile_int8": lambda: unary_model(OP.TILE, (2, 3), np.int8, (4, 9), [np.array([2, 3], np.int32)]),
    "folded_reshape_int8": lambda: folded_reshape_model(np.int8),
    "folded_reshape_float32": lambda: folded_reshape_model(np.float32),
    "folded_broadcast_int8": lambda: broadcast_args_model(np.int8),
    "folded_broadcast_float32": lambda: broadcast_args_model(np.float32),
    "cast_int8_int32": lambda: cast_model(np.int8, np.int32),
    "cast_int8_float32": lambda: cast_model(np.int8, np.float32),
    "cast_int32_int8": lambda: cast_model(np.int32, np.int8),
    "cast_int32_float32": lambda: cast_model(np.int32, np.float32),
    "cast_float32_int32": lambda: cast_model(np.float32, np.int32),
    "cast_float32_int8": lambda: cast_model(np.float32, np.int8),
    "cast_bool_float32": lambda: cast_model(np.bool_, np.float32),
    "cast_bool_int32": lambda: cast_model(np.bool_, np.int32),
    "cast_bool_int8": lambda: cast_model(np.bool_, np.int8),
    "cast_int32_bool": lambda: cast_model(np.int32, np.bool_),  # TFLM has no bool output: LiteRT is the oracle
    "cast_float32_bool": lambda: cast_model(np.float32, np.bool_),
    **{f"strided_{n}_{t.__name__}": (lambda n=n, t=t: _ss_case(n, t)) for n in STRIDED for t in (np.int8, np.float32)},
    "strided_negative_masks_bool": lambda: _ss_case("negative_masks", np.bool_),
    "strided_clamped_int32": lambda: _ss_case("clamped", np.int32),
}  # fmt: skip


def _split_v(dtype):
    mb = mm.ModelBuilder()
    x = mb.tensor("x", (2, 7), dtype, _quant(dtype))
    ys = [mb.tensor(f"y{i}", (2, n), dtype, _quant(dtype)) for i, n in enumerate((2, 4, 1))]
    mb.op(OP.SPLIT_V, [x, mb.const("sizes", np.array([2, -1, 1], np.int32)), mb.const("axis", np.array(-1, np.int32))], ys,
          *options("SplitVOptions", NumSplits=3))  # fmt: skip
    return mb.serialize([x], ys)


@pytest.mark.parametrize("path", [model_param(p) for p in CONVERTED])
def test_converted(path, tmp_path):
    try:
        check_model(path, tmp_path)
    except UnsupportedModelError as exc:  # Keras Dense after Flatten: int8 per-channel weights, another family's
        if "per-channel FULLY_CONNECTED" not in str(exc):
            raise
        pytest.skip(f"{path.name}: {exc}")


@pytest.mark.parametrize("name", sorted(MODELS))
def test_built(name, tmp_path):
    check_model(MODELS[name](), tmp_path)


def test_fold_evaluates_flatten_shape_ops():
    """Keras Flatten with a free batch: SHAPE, STRIDED_SLICE and PACK are evaluated at import."""
    from edgemem.frontend.fold import fold_model
    from edgemem.frontend.tflite_import import read_tflite

    model = read_tflite(OPS_DIR / "RESHAPE-flatten-int8.tflite")
    values, folded = fold_model(model)
    assert len(folded) == 3
    assert any(v.tolist() == [1, 64] for v in values.values())


def test_refuses_runtime_slice_begin(tmp_path):
    """A STRIDED_SLICE whose begin is computed at run time is refused with a message."""
    mb = mm.ModelBuilder()
    x = mb.tensor("x", (4, 3), np.int8, Q)
    begin = mb.tensor("begin", (2,), np.int32)
    y = mb.tensor("y", (2, 3), np.int8, Q)
    i32 = lambda v: mb.const(f"k{len(mb.tensors)}", np.array(v, np.int32))  # noqa: E731
    mb.op(OP.STRIDED_SLICE, [x, begin, i32([2, 3]), i32([1, 1])], [y], *options("StridedSliceOptions"))
    with pytest.raises(UnsupportedModelError, match="begin .* computed at run time"):
        check_model(mb.serialize([x, begin], [y]), tmp_path)


def test_fold_broadcast_args():
    """BROADCAST_ARGS of SHAPE and a constant folds to numpy's broadcast shape (no interpreter runs it)."""
    from edgemem.frontend.fold import fold_model
    from edgemem.frontend.tflite_import import parse_tflite

    values, folded = fold_model(parse_tflite(broadcast_args_model(np.float32, broadcast_args=True)))
    assert folded == {0, 1, 3}  # SHAPE, BROADCAST_ARGS, ZEROS_LIKE (of a tensor whose shape is fixed)
    assert [2, 3, 4] in [v.tolist() for v in values.values()]


def test_floor_ignores_folded_operators():
    """The RAM floor read from the flatbuffer counts no folded operator and no folded shape vector: Flatten's
    RESHAPE (a view, in place) needs its input only, the CONV_2D before it sets the floor."""
    from edgemem.frontend.footprint import operator_floor_bytes
    from edgemem.frontend.tflite_import import read_tflite

    floor, op = operator_floor_bytes(read_tflite(OPS_DIR / "RESHAPE-flatten-int8.tflite"), frozenset({"RESHAPE"}), True)
    assert (floor, op) == (6 * 6 * 2 + 4 * 4 * 4, 0)
