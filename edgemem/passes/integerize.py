"""QDQ -> integer: the Relax pass that makes int8 models run as integers.

TVM's TFLite frontend imports an int8 model as ``dequantize -> float op -> quantize`` per
operator. This pass recognises each of those islands and replaces it with one ``call_tir`` to an
integer kernel (edgemem.kernels.int8_ops) carrying TFLite Micro's arithmetic: activations stay
int8, weights stay int8 constants, accumulators are int32 and requantization is fixed-point.
Reshapes of int8 and int16 tensors stay Relax reshapes (views, no copy).

Every recognised island is one TFLite operator; anything else is reported with the TFLite
operator it stopped at (the frontend's record of which operator produced which variable), so an unsupported model fails loudly instead of silently running in float.

Islands (``quantize(f(dequantize(x), ...))``): CONV_2D, DEPTHWISE_CONV_2D, FULLY_CONNECTED, ADD and
MUL (constant or broadcast operands too), CONCATENATION (one quantization), LOGISTIC, QUANTIZE int8 ->
int8, and QUANTIZE of a float model input. Ops the frontend keeps on int8 directly (PAD, STRIDED_SLICE,
TRANSPOSE, RESIZE_NEAREST_NEIGHBOR) become copy kernels; a DEQUANTIZE that is a model output becomes an
int8 -> float32 kernel. Operators with a lowering of their own (frontend/ops/: MEAN, SOFTMAX, the pools and
the rest) arrive as kernel calls and are copied over.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import tvm
from tvm import relax

from ..errors import UnsupportedModelError
from ..kernels import int8_ops, kernel_attrs, logistic
from ..kernels.specs import Conv2D, Depthwise, DequantizeFloat, KernelSpec, Pad
from . import kernel_spec
from .rewrite import Bindings, abandon
from ..kernels.fixed_point import (
    activation_range,
    add_rescale,
    conv_multipliers,
    fully_connected_multiplier,
    mul_multiplier,
    rescale_multiplier,
)
from ..kernels.int8_ops import Requant

SUPPORTED_INT8_OPS = (
    "CONV_2D", "DEPTHWISE_CONV_2D", "FULLY_CONNECTED", "ADD", "MUL", "MEAN", "AVERAGE_POOL_2D", "MAX_POOL_2D",
    "RESHAPE", "SOFTMAX", "PAD", "PADV2", "STRIDED_SLICE", "TRANSPOSE", "CONCATENATION", "RESIZE_NEAREST_NEIGHBOR",
    "QUANTIZE", "DEQUANTIZE", "LOGISTIC", "UNIDIRECTIONAL_SEQUENCE_LSTM",
)  # fmt: skip


# ---------------------------------------------------------------- reading the QDQ graph

def _op(expr) -> str | None:
    if isinstance(expr, relax.Call) and isinstance(expr.op, tvm.ir.Op):
        return expr.op.name.removeprefix("relax.")
    return None


def _shape(expr) -> tuple[int, ...]:
    return tuple(int(d) for d in expr.ty.shape.values)


def _dtype(expr) -> str:
    return str(expr.ty.dtype)


def _const_value(expr) -> np.ndarray | None:
    if hasattr(expr, "value") and hasattr(expr.value, "numpy") and not isinstance(expr, relax.Var):
        return expr.value.numpy()
    return None


@dataclass
class Dequant:
    """``dequantize(source, scale, zero_point)``: source is an int8 Relax var (activation) or an
    int8 numpy array (constant weight/bias, already through any reshape/permute)."""

    source: object
    scale: np.ndarray
    zero_point: np.ndarray

    @property
    def is_const(self) -> bool:
        return isinstance(self.source, np.ndarray)

    @property
    def scalar_scale(self) -> float:
        return float(self.scale.reshape(-1)[0])

    @property
    def scalar_zp(self) -> int:
        return int(self.zero_point.reshape(-1)[0])


class _Graph(Bindings):
    """The frontend's bindings (rewrite.Bindings: definitions, readers, outputs, kernel calls), with the QDQ
    lookups integerize adds: a value seen through plain bindings, constants evaluated on the host."""

    def __init__(self, mod: tvm.IRModule):
        super().__init__(mod)
        self._consts: dict = {}

    def value(self, expr):
        """Look through variable bindings inside the function (not through int8 activations)."""
        while isinstance(expr, relax.Var) and expr in self.defs:
            if _is_int8(expr) and self.const(expr) is None:
                return expr  # an int8 activation (any producer): a kernel boundary
            expr = self.defs[expr]
        return expr

    def const(self, expr) -> np.ndarray | None:
        """_const_tree, memoised per variable: weights are looked up by several islands."""
        if not isinstance(expr, relax.Var):
            return _const_tree(self, expr)
        if expr not in self._consts:
            self._consts[expr] = _const_tree(self, self.defs.get(expr, expr))
        return self._consts[expr]


def _is_int8(expr) -> bool:
    return str(getattr(expr.ty, "dtype", "")) == "int8"


def _const_tree(g: _Graph, expr) -> np.ndarray | None:
    """Evaluate a constant int8 expression (constants through reshape/permute_dims) in numpy."""
    if isinstance(expr, relax.Var):
        return g.const(expr) if expr in g.defs else None
    value = _const_value(expr)
    if value is not None:
        return value
    op = _op(expr)
    if op == "reshape":
        inner = _const_tree(g, expr.args[0])
        return None if inner is None else inner.reshape(_shape(expr))
    if op == "permute_dims":
        inner = _const_tree(g, expr.args[0])
        return None if inner is None else np.transpose(inner, [int(a) for a in expr.attrs.axes])
    return None


def _dequant(g: _Graph, expr) -> Dequant | None:
    expr = g.value(expr)
    if _op(expr) != "dequantize":
        return None
    data, scale, zp = expr.args
    scale_v, zp_v = _const_tree(g, scale), _const_tree(g, zp)
    if scale_v is None or zp_v is None:
        return None
    const = _const_tree(g, data)
    return Dequant(const if const is not None else g.value(data), np.asarray(scale_v, np.float32), np.asarray(zp_v))


def _weight(g: _Graph, expr) -> tuple[np.ndarray, Dequant] | None:
    """A conv weight: dequantize(const) possibly followed by reshapes (the frontend's layouts)."""
    expr = g.value(expr)
    if _op(expr) == "reshape":
        inner = _weight(g, expr.args[0])
        return None if inner is None else (inner[0].reshape(_shape(expr)), inner[1])
    d = _dequant(g, expr)
    if d is None or not d.is_const:
        return None
    return d.source, d


# ---------------------------------------------------------------- activation clamps

def _activation_range(kind: str, scale: float, zp: int) -> tuple[int, int]:
    """TFLite's CalculateActivationRangeQuantized for int8."""
    return activation_range(kind, scale, zp)


def _activation_from_clip(lo: float, hi: float, scale: float, zp: int) -> tuple[int, int]:
    """The frontend wrote the fused activation as an int8 clip with Python rounding; find which
    activation it was and recompute its bounds the way TFLM does (they differ only on ties)."""
    for kind in ("NONE", "RELU", "RELU6", "RELU_N1_TO_1"):
        exact = _activation_range(kind, scale, zp)
        if abs(exact[0] - lo) <= 1 and abs(exact[1] - hi) <= 1 and (kind != "NONE" or (lo, hi) == (-128, 127)):
            return exact
    return int(lo), int(hi)


# ---------------------------------------------------------------- the rewrite

class _Integerizer:
    # int8 -> int8 operators the frontend leaves on integers (no QDQ island): Relax op -> handler
    _MOVES = {
        "nn.pad": "_pad",
        "strided_slice": "_strided_slice",
        "permute_dims": "_transpose",
        "image.resize2d": "_resize",
    }

    def __init__(self, mod: tvm.IRModule):
        self.g = _Graph(mod)  # the frontend's module: kernels it already called (int8 LSTM) live there too
        self.func = mod["main"]
        self.bb = relax.BlockBuilder()
        self.env: dict = {}  # old int8 var (or float var of a float island) -> new var
        self.count = 0
        self.float_ops = 0  # Relax float operators copied from float islands (legalized by TVM afterwards)
        self.island = self._island_vars()

    # -- emission
    def _call(self, name: str, prim: tvm.tirx.PrimFunc, args: list, out_shape, kind: str, macs: int, dtype: str = "int8",
              spec: KernelSpec | None = None):
        prim = kernel_attrs.with_kind(prim, kind, macs, symbol=name)
        if spec is not None:  # how the kernel was built: passes rebuild it with other shapes or padding
            prim = kernel_attrs.with_spec(prim, spec)
        gv = self.bb.add_func(prim, name)
        call = relax.call_tir(gv, args, relax.TensorType(tuple(out_shape), dtype))
        return self.bb.emit(call)

    def _name(self, kind: str) -> str:
        self.count += 1
        return f"{kind.lower()}_{self.count}"

    def _act(self, var) -> object:
        """The new var standing for an old int8 activation var."""
        if var not in self.env:
            raise UnsupportedModelError("it reads an int8 tensor before edgemem could produce it (unsupported graph structure).")
        return self.env[var]

    # -- driver
    def run(self):
        clip_of = {}  # quantize var -> (lo, hi) of the int8 clip that immediately follows it
        alias = {}
        self.outputs = set(self._output_vars())
        for var, value in self.g.defs.items():
            if _op(value) == "clip" and _dtype(var) == "int8":
                src = value.args[0]
                quantized = isinstance(src, relax.Var) and _op(self.g.defs.get(src)) == "quantize"
                if quantized and self.g.sole_reader(src) is not None:
                    clip_of[src] = (float(value.args[1].value), float(value.args[2].value))
                    alias[var] = src
        with self.bb.function("main"):
            params = []
            for p in self.g.params:
                new = relax.Var(p.name, p.ty)
                self.env[p] = new
                params.append(new)
            with self.bb.dataflow():
                for var, value in self.g.defs.items():  # in binding order
                    try:
                        self._binding(var, value, clip_of, alias)
                    except UnsupportedModelError as exc:
                        exc.relax_var = var  # lower.py names the TFLite operator from it
                        raise
                outs = self._output_vars()
                new_outs = [self._act(alias.get(o, o)) for o in outs]
                # One output binding per output; the function returns their tuple (no tuple binding,
                # which the graph reader would not take for a kernel).
                results = [self.bb.emit_output(o) for o in new_outs]
            self.bb.emit_func_output(results[0] if len(results) == 1 else relax.Tuple(results), params)
        return self.bb.get()

    def _output_vars(self) -> list:
        """The model outputs, through the frontend's ``gv = (a, b, c)`` tuple of several outputs and its
        ``gv = lv`` rebindings of an output the converter had already bound."""
        body = self.func.body.body
        if isinstance(body, relax.Var) and isinstance(self.g.defs.get(body), relax.Tuple):
            body = self.g.defs[body]
        outs = list(body.fields) if isinstance(body, relax.Tuple) else [body]
        return [self._through_rebindings(o) for o in outs]

    def _through_rebindings(self, var):
        while isinstance(var, relax.Var) and isinstance(self.g.defs.get(var), relax.Var):
            var = self.g.defs[var]
        return var

    def _binding(self, var, value, clip_of, alias):
        if isinstance(value, relax.Tuple):
            return  # the outputs' tuple, rebuilt from the new outputs at the end
        if self.g.kernel(var) is not None or (isinstance(value, relax.TupleGetItem) and value.tuple_value in self.env):
            self.env[var] = self._kernel_call(var, self._float_arg)
            return
        if isinstance(value, relax.Var) and value in self.env:  # a plain rebinding (the frontend's output)
            self.env[var] = self.env[value]
            return
        op = _op(value)
        if var in alias:
            self.env[var] = self._act(alias[var])
            return
        if op == "reshape" and _dtype(var) == "int16" and isinstance(value.args[0], relax.Var) and value.args[0] in self.env:
            self.env[var] = self.bb.emit(relax.op.reshape(self._act(value.args[0]), _shape(var)))  # a view, as int8's
            return
        if _dtype(var) != "int8":
            if op == "dequantize" and var in self.outputs:
                self.env[var] = self._dequantize_output(var, value)
            elif var in self.outputs:  # a float op's result is a model output: the island ends there
                self.env[var] = self._float(var)
            return  # other float or int32 intermediates are consumed by the island that quantizes them
        if op == "quantize":
            self.env[var] = self._quantized(var, value, clip_of.get(var))
        elif op == "reshape" and isinstance(value.args[0], relax.Var) and value.args[0] in self.env:
            self.env[var] = self.bb.emit(relax.op.reshape(self._act(value.args[0]), _shape(var)))
        elif op in ("permute_dims", "reshape") and _const_tree(self.g, value) is not None:
            return  # a constant weight in the making
        elif op in self._MOVES and isinstance(value.args[0], relax.Var) and value.args[0] in self.env:
            self.env[var] = getattr(self, self._MOVES[op])(var, value)
        else:
            raise UnsupportedModelError(f"edgemem cannot run '{op}' on int8 data as integers yet. Supported int8 operators: {', '.join(SUPPORTED_INT8_OPS)}.")

    def _kernel_call(self, var, arg=None):
        """A kernel the frontend called directly (an integer LSTM, an operator lowering) and its (output,
        workspace) pick: copied over with its operands renamed (by ``arg``, default ``_act``)."""
        value = self.g.defs[var]
        if isinstance(value, relax.TupleGetItem):
            return self.bb.emit(relax.TupleGetItem(self.env[value.tuple_value], value.index))
        arg = arg or self._act
        k = self.g.kernel(var)
        new_gv = self.bb.add_func(k.prim, self._name(k.kind or k.gv.name_hint))
        new_args = [arg(a) if isinstance(a, relax.Var) else a for a in k.args]
        out_ty = value.ty_args[0]
        out_ty = list(out_ty.fields) if isinstance(out_ty, relax.TupleType) else out_ty
        return self.bb.emit(relax.call_tir(new_gv, new_args, out_ty))

    # -- islands
    def _quantized(self, var, value, clip):
        body, scale, zp = value.args
        out_scale = float(_const_tree(self.g, scale).reshape(-1)[0])
        out_zp = int(_const_tree(self.g, zp).reshape(-1)[0])
        out_shape = _shape(var)
        if body in self.island:
            # QUANTIZE ending a float island (TFLite DEQUANTIZE -> float operators -> QUANTIZE, which the converter
            # leaves where it cannot quantize an operator): the float operators run as float kernels, like TFLM's
            if clip is not None:
                raise UnsupportedModelError("its QUANTIZE has a clip after it that is not a fused activation edgemem knows.")
            prim = int8_ops.quantize_float(out_shape, out_scale, out_zp)
            return self._call(self._name("quantize"), prim, [self._float(body)], out_shape, "QUANTIZE", 0)
        act = "NONE"
        expr = self.g.value(body)
        if _op(expr) == "nn.relu":
            act, expr = "RELU", self.g.value(expr.args[0])
        elif _op(expr) == "clip" and _dtype(expr) == "float32":
            lo, hi = float(expr.args[1].value), float(expr.args[2].value)
            act = {(0.0, 6.0): "RELU6", (-1.0, 1.0): "RELU_N1_TO_1"}.get((lo, hi), None)
            if act is None:
                raise UnsupportedModelError(f"float clip({lo}, {hi}) is not a TFLite activation edgemem knows.")
            expr = self.g.value(expr.args[0])
        if clip is not None:
            rng = _activation_from_clip(clip[0], clip[1], out_scale, out_zp)
        else:
            rng = _activation_range(act, out_scale, out_zp)
        rq = Requant(out_zp, *rng)

        bias = None
        if _op(expr) == "add":
            lhs, rhs = (self.g.value(a) for a in expr.args)
            d_l, d_r = _dequant(self.g, lhs), _dequant(self.g, rhs)
            if d_l is not None and d_r is not None and not (d_l.is_const and d_r.is_const):
                return self._add(out_shape, d_l, d_r, out_scale, rq)
            bias_d = d_r if d_r is not None and d_r.is_const else None
            if bias_d is None and _op(rhs) == "dequantize":
                const = _const_tree(self.g, rhs.args[0])
                bias_d = None if const is None else Dequant(const, np.zeros(1, np.float32), np.zeros(1))
            if bias_d is None:
                raise UnsupportedModelError("unrecognised ADD form.")
            bias, expr = bias_d.source.astype(np.int32).reshape(-1), lhs
        op = _op(expr)
        if op == "nn.conv2d":
            return self._conv(expr, bias, out_scale, out_shape, rq)
        if op == "matmul":
            return self._fully_connected(expr, bias, out_scale, out_shape, rq)
        if op == "sigmoid":
            return self._logistic(var, expr, out_scale, out_zp)
        if op == "multiply":
            return self._mul(var, expr, out_scale, rq)
        if op == "concat":
            return self._concat(var, expr, out_scale, out_zp)
        if op == "dequantize" and act == "NONE":
            return self._requantize(var, expr, out_scale, out_zp)
        if op is None and expr in self.env and _dtype(expr) == "float32":
            prim = int8_ops.quantize_float(out_shape, out_scale, out_zp)
            return self._call(self._name("quantize"), prim, [self._act(expr)], out_shape, "QUANTIZE", 0)
        if op is None and isinstance(expr, relax.Var) and _dtype(expr) == "float32":
            raise UnsupportedModelError("it quantizes a float tensor that is neither a model input nor computed from a DEQUANTIZE operator; edgemem cannot run that.")
        raise UnsupportedModelError(f"edgemem does not know the int8 form of '{op}'.")

    # -- float islands: DEQUANTIZE -> float operators -> QUANTIZE inside an int8 model
    def _island_vars(self) -> set:
        """The float vars of float islands: the frontend named the DEQUANTIZE operators of int8 activations in
        main's attrs (frontend/tflite_import.py); every float value computed from one of them is in its island."""
        attrs = self.func.attrs
        starts = set(str(attrs["edgemem.float_island_starts"]).split(",")) if attrs is not None and "edgemem.float_island_starts" in attrs else set()
        island = set()
        if not starts:
            return island
        for var, value in self.g.defs.items():
            if _is_int8(var):
                continue
            if var.name in starts or any(isinstance(a, relax.Var) and a in island for a in self._operands(value)) \
                    or (isinstance(value, relax.Var) and value in island) \
                    or (isinstance(value, relax.TupleGetItem) and value.tuple_value in island):  # fmt: skip
                island.add(var)
        return island

    @staticmethod
    def _operands(value) -> list:
        found = []
        for a in getattr(value, "args", []):
            found.extend(a.fields if isinstance(a, relax.Tuple) else [a])
        return found

    def _float(self, expr):
        """The new expression of a float tensor of the old graph: float ops copied over (TVM legalizes them
        after the rewrite, see ``integerize``), int8 activations dequantized by TFLM's DEQUANTIZE kernel,
        constant DEQUANTIZEs folded to float32 constants on the host."""
        if not isinstance(expr, relax.Var):
            return expr
        if expr in self.env:
            return self.env[expr]
        if expr not in self.g.defs:
            raise UnsupportedModelError("it reads a float tensor before edgemem could produce it (unsupported graph structure).")
        value = self.g.defs[expr]
        op = _op(value)
        if op == "dequantize":
            d = _dequant(self.g, expr)
            if d is None or d.scale.size != 1:
                raise UnsupportedModelError("its DEQUANTIZE is not of a per-tensor int8 tensor.")
            if d.is_const:  # TFLM: float(scale * (q - zp)), the scale float32
                values = ((d.source.astype(np.int32) - d.scalar_zp).astype(np.float32) * np.float32(d.scalar_scale)).astype(np.float32)
                new = relax.const(values.reshape(_shape(expr)), "float32")
            else:
                new = self._dequantize_output(expr, value)
        elif self.g.kernel(expr) is not None:
            new = self._kernel_call(expr, self._float_arg)
        elif isinstance(value, relax.Var):
            new = self._float(value)
        elif isinstance(value, relax.TupleGetItem):
            new = self.bb.emit(relax.TupleGetItem(self._float(value.tuple_value), value.index))
        elif isinstance(value, relax.Call) and op is not None:
            args = [relax.Tuple([self._float_arg(f) for f in a.fields]) if isinstance(a, relax.Tuple) else self._float_arg(a)
                    for a in value.args]  # fmt: skip
            new = self.bb.emit(relax.Call(value.op, args, value.attrs, value.ty_args))
            self.float_ops += 1
        elif _const_value(value) is not None:
            new = value
        else:
            raise UnsupportedModelError("edgemem cannot run this float computation inside an int8 model.")
        self.env[expr] = new
        return new

    def _float_arg(self, a):
        if isinstance(a, relax.Var) and _is_int8(a):
            return self._act(a)
        return self._float(a) if isinstance(a, relax.Var) else a

    def _logistic(self, var, expr, out_scale, out_zp):
        """LOGISTIC: a 256-byte table of TFLM's fixed-point results (kernels/logistic.py)."""
        d = _dequant(self.g, expr.args[0])
        if d is None or d.scale.size != 1 or (d.is_const and d.source.dtype != np.int8):
            raise UnsupportedModelError("LOGISTIC does not read one per-tensor int8 tensor.")
        if out_zp != -128 or abs(out_scale * 256 - 1) > 1e-6:
            raise UnsupportedModelError(f"int8 LOGISTIC output quantized with scale {out_scale}, zero point {out_zp}; TFLite requires 1/256 and -128.")
        table = logistic.logistic_table(d.scalar_scale, d.scalar_zp)
        shape = _shape(var)
        return self._call(self._name("logistic"), logistic.table_lookup(shape), [self._int8_source(d, shape), relax.const(table)], shape,
                          "LOGISTIC", 0)  # fmt: skip

    def _int8_source(self, d: Dequant, shape):
        """The int8 tensor a kernel reads: an activation, or a constant (an operator's input folded at import,
        frontend/fold.py) read from flash."""
        return relax.const(np.ascontiguousarray(d.source).reshape(shape)) if d.is_const else self._act(d.source)

    def _conv(self, conv, bias, out_scale, out_shape, rq):
        a = conv.attrs
        d_in = _dequant(self.g, conv.args[0])
        w = _weight(self.g, conv.args[1])
        if d_in is None or d_in.is_const or w is None:
            raise UnsupportedModelError("conv2d whose input or weight is not a dequantized int8 tensor.")
        wv, wd = w
        if str(a.data_layout) != "NHWC":
            raise UnsupportedModelError(f"conv2d layout {a.data_layout} (expected NHWC).")
        x_shape = _shape(d_in.source)
        groups = int(a.groups)
        stride, dil = [int(s) for s in a.strides], [int(s) for s in a.dilation]
        pad = [int(p) for p in a.padding]
        in_scale, in_zp = d_in.scalar_scale, d_in.scalar_zp
        x = self._act(d_in.source)
        if np.any(wd.zero_point != 0):
            raise UnsupportedModelError("conv weights with a non-zero zero point (TFLite int8 requires 0).")
        # The fast kernels (spec "folded"): the bias constant holds bias - in_zp * sum(w) per output channel,
        # so the kernels sum raw int8 products; conv weights go back to TFLite's OHWI (one contiguous run per
        # output channel and kernel row).
        if groups == 1:
            o = wv.shape[3]
            mult, shift = conv_multipliers(in_scale, np.broadcast_to(wd.scale.reshape(-1), (o,)), out_scale)
            kh, kw = wv.shape[:2]
            family, w_shape = Conv2D, tuple(wv.shape)
            kind, macs = "CONV_2D", int(np.prod(out_shape)) * kh * kw * wv.shape[2]
            wconst = np.ascontiguousarray(wv.astype(np.int8).transpose(3, 0, 1, 2))
            folded = int8_ops.folded_bias(bias, wv, in_zp, out_axis=3)
        elif groups == x_shape[3] and str(a.kernel_layout) == "HWOI":
            kh, kw, o = wv.shape[0], wv.shape[1], wv.shape[2] * wv.shape[3]
            wconst = wv.reshape(kh, kw, o).astype(np.int8)
            mult, shift = conv_multipliers(in_scale, np.broadcast_to(wd.scale.reshape(-1), (o,)), out_scale)
            kind, macs = "DEPTHWISE_CONV_2D", int(np.prod(out_shape)) * kh * kw
            family, w_shape = Depthwise, tuple(wconst.shape)
            folded = int8_ops.folded_bias(bias, wconst, in_zp, out_axis=2)
        else:
            raise UnsupportedModelError(f"grouped conv2d (groups={groups}) is not a TFLite operator edgemem supports.")
        spec = family(x_shape=x_shape, w_shape=w_shape, has_bias=True, folded=True, in_zp=in_zp, stride=stride,
                      dilation=dil, pad=pad, out_shape=out_shape, rq=rq)
        prim = kernel_spec.build(spec)
        args = [x, relax.const(wconst), relax.const(folded), relax.const(mult), relax.const(shift)]
        return self._call(self._name(kind), prim, args, out_shape, kind, macs, spec=spec)

    def _fully_connected(self, mm, bias, out_scale, out_shape, rq):
        d_in = _dequant(self.g, mm.args[0])
        d_w = _dequant(self.g, mm.args[1])
        if d_in is None or d_w is None or not d_w.is_const or (d_in.is_const and d_in.scale.size != 1):
            raise UnsupportedModelError("matmul that is not an int8 FULLY_CONNECTED.")
        w = np.ascontiguousarray(d_w.source.T).astype(np.int8)  # back to TFLite's [O, K]
        # A constant input (step 0 of an unrolled recurrent loop reads the constant initial state) is passed
        # from flash like the weights.
        x, x_shape = self._operand(d_in, "FULLY_CONNECTED")
        consts = []
        if d_w.scale.size == 1:
            m, s = fully_connected_multiplier(d_in.scalar_scale, d_w.scalar_scale, out_scale)
            w_zp = d_w.scalar_zp
        else:
            # Per-channel (one scale per output row, what today's converter writes for Dense): TFLM's
            # FullyConnectedPerChannel, multipliers from double(in) * double(w[o]) / double(out) like a conv.
            if d_w.scale.size != w.shape[0]:
                raise UnsupportedModelError(f"FULLY_CONNECTED weights with {d_w.scale.size} scales for {w.shape[0]} output rows; TFLite quantizes them per output row.")
            if np.any(d_w.zero_point != 0):
                raise UnsupportedModelError("per-channel FULLY_CONNECTED weights with a non-zero zero point (TFLite requires symmetric weights).")
            mult, shift = conv_multipliers(d_in.scalar_scale, d_w.scale.reshape(-1), out_scale)
            m = s = None
            w_zp = 0
            consts = [relax.const(mult), relax.const(shift)]
        args = [x, relax.const(w)]
        if w_zp == 0:  # TFLite's int8 weights are symmetric: the input zero point folds into the bias
            prim = int8_ops.fully_connected_fast(x_shape, w.shape, m, s, rq)
            args.append(relax.const(int8_ops.folded_bias(bias, w, d_in.scalar_zp, out_axis=0)))
        else:
            prim = int8_ops.fully_connected(x_shape, w.shape, bias is not None, d_in.scalar_zp, w_zp, m, s, rq)
            if bias is not None:
                args.append(relax.const(bias.astype(np.int32)))
        args += consts
        return self._call(self._name("fully_connected"), prim, args, out_shape, "FULLY_CONNECTED", int(np.prod(out_shape)) * w.shape[1])

    def _operand(self, d: Dequant, what: str):
        """(Relax argument, shape) of an element-wise operand: an int8 activation or an int8
        constant (per-tensor quantized: one scale for the whole operand)."""
        if d.scale.size != 1:
            raise UnsupportedModelError(f"{what} operand with per-channel quantization ({d.scale.size} scales); TFLite {what} takes per-tensor int8 operands.")
        if d.is_const:
            if d.source.dtype != np.int8:
                raise UnsupportedModelError(f"{what} with a constant {d.source.dtype} operand; TFLite int8 {what} takes int8 operands.")
            value = np.ascontiguousarray(d.source)
            return relax.const(value), tuple(value.shape)
        return self._act(d.source), _shape(d.source)

    def _add(self, out_shape, d1: Dequant, d2: Dequant, out_scale, rq):
        same_shape = not d1.is_const and not d2.is_const and _shape(d1.source) == _shape(d2.source) == tuple(out_shape)
        if not same_shape:
            return self._broadcast_add(out_shape, d1, d2, out_scale, rq)
        left_shift = 20
        mults = add_rescale(d1.scalar_scale, d2.scalar_scale, out_scale, left_shift)
        prim = int8_ops.add(tuple(out_shape), d1.scalar_zp, d2.scalar_zp, left_shift, *mults, rq)
        args = [self._act(d1.source), self._act(d2.source)]
        return self._call(self._name("add"), prim, args, out_shape, "ADD", 0)

    def _broadcast_add(self, out_shape, d1: Dequant, d2: Dequant, out_scale, rq):
        """ADD with a constant operand or numpy broadcasting (TFLM's broadcast path: the same
        per-element arithmetic)."""
        (a, a_shape), (b, b_shape) = self._operand(d1, "ADD"), self._operand(d2, "ADD")
        mults = add_rescale(d1.scalar_scale, d2.scalar_scale, out_scale, 20)
        prim = int8_ops.broadcast_add(a_shape, b_shape, tuple(out_shape), d1.scalar_zp, d2.scalar_zp, 20, *mults, rq)
        return self._call(self._name("add"), prim, [a, b], out_shape, "ADD", 0)

    def _mul(self, var, expr, out_scale, rq):
        d1, d2 = (_dequant(self.g, a) for a in expr.args)
        if d1 is None or d2 is None or (d1.is_const and d2.is_const):
            raise UnsupportedModelError("MUL is not a product of dequantized int8 tensors.")
        (a, a_shape), (b, b_shape) = self._operand(d1, "MUL"), self._operand(d2, "MUL")
        m, s = mul_multiplier(d1.scalar_scale, d2.scalar_scale, out_scale)
        out_shape = _shape(var)
        prim = int8_ops.mul(a_shape, b_shape, out_shape, d1.scalar_zp, d2.scalar_zp, m, s, rq)
        return self._call(self._name("mul"), prim, [a, b], out_shape, "MUL", int(np.prod(out_shape)))

    def _concat(self, var, expr, out_scale, out_zp):
        parts = expr.args[0].fields if isinstance(expr.args[0], relax.Tuple) else None
        ds = [_dequant(self.g, p) for p in parts or []]
        if not ds or any(d is None for d in ds) or all(d.is_const for d in ds):
            raise UnsupportedModelError("CONCATENATION is not of dequantized int8 activations.")
        for d in ds:
            if np.float32(d.scalar_scale) != np.float32(out_scale) or d.scalar_zp != out_zp:
                raise UnsupportedModelError(f"CONCATENATION mixes quantizations (scale {d.scalar_scale} zero point {d.scalar_zp} vs output {out_scale}, {out_zp}); TFLite Micro requires one quantization for int8.")
        args, shapes = zip(*[self._operand(d, "CONCATENATION") for d in ds])  # a constant part is read from flash
        axis = int(expr.attrs.axis) % len(shapes[0])
        prim = int8_ops.concatenation(list(shapes), axis)
        return self._call(self._name("concatenation"), prim, list(args), _shape(var), "CONCATENATION", 0)

    def _requantize(self, var, expr, out_scale, out_zp):
        """TFLite QUANTIZE from int8 to int8 (a change of scale/zero point)."""
        d = _dequant(self.g, expr)
        if d is None or d.is_const:
            raise UnsupportedModelError("QUANTIZE does not read an int8 activation.")
        m, s = rescale_multiplier(d.scalar_scale, out_scale)
        shape = _shape(var)
        prim = int8_ops.requantize(shape, d.scalar_zp, m, s, out_zp)
        return self._call(self._name("quantize"), prim, [self._act(d.source)], shape, "QUANTIZE", 0)

    def _dequantize_output(self, var, value):
        """DEQUANTIZE of an int8 activation into a float32 model output; of an int8 constant (an SSD's anchors, known
        when the model is built) the kernel reads the constant from flash: a model output is an arena tensor that a
        kernel writes."""
        d = _dequant(self.g, var)
        if d is None or d.scale.size != 1 or (d.is_const and d.source.dtype != np.int8):
            raise UnsupportedModelError("the model output is a DEQUANTIZE edgemem cannot run (not of a per-tensor int8 tensor).")
        shape = _shape(var)
        spec = DequantizeFloat(shape=shape, scale=float(d.scalar_scale), zero_point=int(d.scalar_zp))
        prim = kernel_spec.build(spec)
        return self._call(self._name("dequantize"), prim, [self._int8_source(d, shape)], shape, "DEQUANTIZE", 0, dtype="float32", spec=spec)

    # -- int8 data movement (the frontend keeps these on integers)
    def _pad(self, var, value):
        a = value.attrs
        if str(a.pad_mode) != "constant":
            raise UnsupportedModelError(f"PAD mode {a.pad_mode} (TFLite PAD is constant).")
        widths = [int(w) for w in a.pad_width]
        pad_value = int(round(float(a.pad_value)))  # the zero point (PAD) or constant_values (PADV2)
        spec = Pad(x_shape=_shape(value.args[0]), pad_before=widths[0::2], pad_after=widths[1::2], pad_value=pad_value)
        prim = kernel_spec.build(spec)
        return self._call(self._name("pad"), prim, [self._act(value.args[0])], _shape(var), "PAD", 0, spec=spec)

    def _strided_slice(self, var, value):
        x_shape, out_shape = _shape(value.args[0]), _shape(var)
        axes, begin, _end, strides = ([int(f.value) for f in t.fields] for t in value.args[1:5])
        full_begin, full_strides = [0] * len(x_shape), [1] * len(x_shape)
        for ax, b, st in zip(axes, begin, strides):
            dim = x_shape[ax]
            full_begin[ax] = min(max(b + dim if b < 0 else b, 0), dim)
            full_strides[ax] = st
        for d, b, st, n in zip(x_shape, full_begin, full_strides, out_shape):
            if st <= 0 or (n > 0 and b + (n - 1) * st >= d):
                raise UnsupportedModelError(f"STRIDED_SLICE (begin {begin}, strides {strides} on {x_shape}) is not supported: only positive strides.")
        prim = int8_ops.strided_slice(x_shape, full_begin, full_strides, out_shape)
        return self._call(self._name("strided_slice"), prim, [self._act(value.args[0])], out_shape, "STRIDED_SLICE", 0)

    def _transpose(self, var, value):
        axes = [int(a) for a in value.attrs.axes]
        prim = int8_ops.transpose(_shape(value.args[0]), axes)
        return self._call(self._name("transpose"), prim, [self._act(value.args[0])], _shape(var), "TRANSPOSE", 0)

    def _resize(self, var, value):
        a = value.attrs
        if str(a.method) != "nearest_neighbor" or str(a.layout) != "NHWC":
            raise UnsupportedModelError(f"resize ({a.method}, {a.layout}) on int8 data: only RESIZE_NEAREST_NEIGHBOR (NHWC).")
        mode = str(a.coordinate_transformation_mode)
        align_corners, half_pixel = mode == "align_corners", mode == "half_pixel"
        x_shape, out_shape = _shape(value.args[0]), _shape(var)
        rows = nearest_neighbor_sources(x_shape[1], out_shape[1], align_corners, half_pixel)
        cols = nearest_neighbor_sources(x_shape[2], out_shape[2], align_corners, half_pixel)
        prim = int8_ops.resize_nearest(x_shape, out_shape[1:3])
        args = [self._act(value.args[0]), relax.const(rows), relax.const(cols)]
        return self._call(self._name("resize_nearest_neighbor"), prim, args, out_shape, "RESIZE_NEAREST_NEIGHBOR", 0)


def nearest_neighbor_sources(in_size: int, out_size: int, align_corners: bool, half_pixel: bool) -> np.ndarray:
    """Source index of each output row (or column), TFLM's GetNearestNeighbor in float32."""
    f32 = np.float32
    if align_corners and out_size > 1:
        scale = f32(in_size - 1) / f32(out_size - 1)
    else:
        scale = f32(in_size) / f32(out_size)
    offset = f32(0.5) if half_pixel else f32(0.0)
    sources = []
    for i in range(out_size):
        pos = (f32(i) + offset) * scale
        idx = int(np.floor(pos))
        if align_corners and pos - f32(idx) >= f32(0.5):  # TfLiteRound: ties away from zero (pos >= 0)
            idx += 1
        idx = min(idx, in_size - 1)
        sources.append(max(idx, 0) if half_pixel else idx)
    return np.array(sources, dtype=np.int32)


def integerize(mod: tvm.IRModule) -> tvm.IRModule:
    """Rewrite the frontend's QDQ main function into integer kernels, one per TFLite operator, as the
    file has them (memory passes such as PAD folding and in-place kernels come after, in passes/).
    Float-only graphs are not handled here (they have no quantize)."""
    rewriter = _Integerizer(mod)
    try:
        new = rewriter.run()
    except UnsupportedModelError:
        abandon(rewriter.bb)
        raise
    return _legalize_float_islands(new) if rewriter.float_ops else new


def _legalize_float_islands(mod: tvm.IRModule) -> tvm.IRModule:
    """The float operators copied from float islands become kernels: TVM's LegalizeOps (the kernels already
    there are call_tir and stay as they are; no fusion, which would merge them with edgemem's int8 kernels),
    each new PrimFunc with edgemem's scalar schedule (no intermediate buffers), as for a float model."""
    from ..kernels.float_schedule import scalar_schedule
    from .split_slices import split_to_slices

    mod = split_to_slices(mod)  # one kernel per part, not one returning a tuple
    before = {gv.name_hint for gv in mod.functions}
    with tvm.target.Target({"kind": "c"}), tvm.transform.PassContext(opt_level=3):
        mod = relax.transform.LegalizeOps()(mod)
    for gv, func in list(mod.functions.items()):
        if isinstance(func, tvm.tirx.PrimFunc) and gv.name_hint not in before:
            mod[gv] = scalar_schedule(func)
    return mod
