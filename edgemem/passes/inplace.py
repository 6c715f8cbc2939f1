"""In-place kernels (after TinyEngine): the output is written over an input that dies there.

Depthwise convolution: each output is held back on the stack (a few rows of one channel) until the
input pixel it overwrites has been read by its last reader; where that would take too much stack, one
input channel's plane is the scratch (the workspace).

Applies to a depthwise convolution with depth multiplier 1 and batch 1 whose output is no larger than
its input, when the input is read by nothing else, owns its storage (a kernel's output or a model input,
not a reshape view) and is not a model output. The rebuilt kernel returns (output, workspace); the
output names the input as its alias and the planner tries to give both the same offset (the kernel is
correct either way). The 16x8 depthwise (kernels/conv16.py) takes the streaming form only (no int16 workspace).
"""

from __future__ import annotations

import numpy as np
import tvm
from tvm import relax

from ..kernels import conv16, int8_ops, kernel_attrs
from ..kernels.specs import Depthwise, Depthwise16
from . import kernel_spec
from .rewrite import Bindings, add_kernel, rebuild


_INPLACE = (Depthwise, Depthwise16)  # the spec families with an in-place form (their ``in_place``)


def _delay(spec) -> int:
    return int8_ops.depthwise_inplace_delay(spec.x_shape, spec.w_shape, spec.stride, spec.dilation, spec.pad,
                                            spec.out_shape)  # fmt: skip


def _eligible(b: Bindings, var) -> bool:
    k = b.kernel(var)
    if k is None or type(k.spec) not in _INPLACE:
        return False
    spec, x = k.spec, k.args[0]
    n, h, w, c = spec.x_shape
    if n != 1 or spec.w_shape[2] != c or int(np.prod(spec.out_shape)) > n * h * w * c:
        return False
    if isinstance(spec, Depthwise16) and not 1 <= _delay(spec) <= conv16.MAX_INPLACE_DELAY16:
        return False  # int16: streaming only
    if not isinstance(x, relax.Var) or b.sole_reader(x) is None or not b.sole_reader(x).same_as(var):
        return False
    producer = b.defs.get(x)
    return producer is None or b.kernel(x) is not None  # a model input, or a kernel's own output


def _inplace_call(b: Bindings, var):
    gv, prim, spec, args = b.kernel(var)
    # usually no arena scratch at all: each output waits on the stack until the input pixel it overwrites
    # has been read by its last reader (a few rows of one channel); else one channel plane of workspace
    delay = _delay(spec)
    streaming = delay > 0
    new_spec = spec.in_place(delay)
    wide = isinstance(spec, Depthwise16)
    n, h, w, c = spec.x_shape
    out_ty = b.defs[var].ty_args[0]

    def replacement(bb, env):
        new_prim = kernel_attrs.with_inplace(kernel_spec.build(new_spec), 0)
        if not streaming:
            new_prim = kernel_attrs.with_workspace(new_prim, h * w)
        new_gv = add_kernel(bb, new_prim, prim)
        new_args = [env.get(a, a) for a in args]
        if not spec.has_bias:  # the in-place kernel always takes a bias
            new_args.insert(2, relax.const(np.zeros(c, np.int64 if wide else np.int32), "int64" if wide else "int32"))
        if streaming:
            return relax.call_tir(new_gv, new_args, out_ty)
        both = bb.emit(relax.call_tir(new_gv, new_args, [out_ty, relax.TensorType((h * w,), "int8")]))
        return relax.TupleGetItem(both, 0)

    return replacement


def inplace_depthwise(mod: tvm.IRModule) -> tvm.IRModule:
    """Every eligible depthwise convolution written over its input."""
    b = Bindings(mod)
    replace = {var: _inplace_call(b, var) for var in b.defs if _eligible(b, var)}
    return rebuild(mod, replace) if replace else mod


# -- element-wise kernels: output element i depends on input element i only ----------------------------

_ELEMENTWISE = ("QUANTIZE", "ADD", "MUL")  # kernels that run one ascending loop over the output's elements


def _bytes_per_element(ty) -> int:
    return np.dtype(str(ty.dtype)).itemsize


def _owns_storage(b: Bindings, x) -> bool:
    value = b.defs.get(x)
    return value is None or b.kernel(x) is not None or isinstance(value, relax.TupleGetItem)


def _elementwise_target(b: Bindings, var) -> int | None:
    """Index of the argument an element-wise kernel may overwrite: same shape as the output, elements at
    least as wide (writing element i then never reaches an element not read yet), read by nothing else."""
    k = b.kernel(var)
    if k is None:
        return None
    if k.kind not in _ELEMENTWISE or kernel_attrs.inplace(k.prim) is not None:
        return None
    args = k.args
    out_ty = b.defs[var].ty_args[0]
    for i, x in enumerate(args):
        if not isinstance(x, relax.Var) or isinstance(x.ty, relax.TupleType):
            continue
        same_shape = [int(d) for d in x.ty.shape.values] == [int(d) for d in out_ty.shape.values]
        reader = b.sole_reader(x)
        if same_shape and _bytes_per_element(x.ty) >= _bytes_per_element(out_ty) and reader is not None \
                and reader.same_as(var) and _owns_storage(b, x):  # fmt: skip
            return i
    return None


def _elementwise_call(b: Bindings, var, index: int):
    gv, prim, _spec, args = b.kernel(var)
    out_ty = b.defs[var].ty_args[0]

    def replacement(bb, env):
        # no restrict: the output pointer may equal the input's (with_inplace drops it)
        new_gv = add_kernel(bb, kernel_attrs.with_inplace(prim, index), prim)
        return relax.call_tir(new_gv, [env.get(a, a) for a in args], out_ty)

    return replacement


def inplace_elementwise(mod: tvm.IRModule) -> tvm.IRModule:
    """QUANTIZE, ADD and MUL written over an input that dies there (a float model input quantized to int8
    takes a quarter of its own bytes, for example)."""
    b = Bindings(mod)
    replace = {}
    for var in b.defs:
        index = _elementwise_target(b, var)
        if index is not None:
            replace[var] = _elementwise_call(b, var, index)
    return rebuild(mod, replace) if replace else mod
