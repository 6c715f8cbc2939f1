"""In-place depthwise convolution (after TinyEngine): the output is written over the input, which dies
there; one input channel's plane is the only scratch (the workspace).

Applies to a depthwise convolution with depth multiplier 1 and batch 1 whose output is no larger than
its input, when the input is read by nothing else, owns its storage (a kernel's output or a model input,
not a reshape view) and is not a model output. The rebuilt kernel returns (output, workspace); the
output names the input as its alias and the planner tries to give both the same offset (the kernel is
correct either way).
"""

from __future__ import annotations

import numpy as np
import tvm
from tvm import relax

from . import kernel_spec
from .rewrite import Bindings, add_kernel, rebuild


def _eligible(b: Bindings, var) -> bool:
    k = b.kernel(var)
    if k is None or k[2] is None or k[2]["builder"] != "depthwise_conv2d":
        return False
    spec, x = k[2], k[3][0]
    n, h, w, c = spec["x_shape"]
    if n != 1 or spec["w_shape"][2] != c or int(np.prod(spec["out_shape"])) > n * h * w * c:
        return False
    if not isinstance(x, relax.Var) or b.sole_reader(x) is None or not b.sole_reader(x).same_as(var):
        return False
    producer = b.defs.get(x)
    return producer is None or b.kernel(x) is not None  # a model input, or a kernel's own output


def _inplace_call(b: Bindings, var):
    gv, prim, spec, args = b.kernel(var)
    new_spec = {**spec, "builder": "depthwise_conv2d_inplace"}
    n, h, w, c = spec["x_shape"]
    out_ty = b.defs[var].ty_args[0]

    def replacement(bb, env):
        new_prim = (kernel_spec.build(new_spec).with_attr("edgemem.spec", kernel_spec.dumps(new_spec))
                    .with_attr("edgemem.inplace", 0).with_attr("edgemem.workspace", h * w))  # fmt: skip
        new_gv = add_kernel(bb, new_prim, prim)
        new_args = [env.get(a, a) for a in args]
        if not spec["has_bias"]:  # the in-place kernel always takes a bias
            new_args.insert(2, relax.const(np.zeros(c, np.int32)))
        both = bb.emit(relax.call_tir(new_gv, new_args, [out_ty, relax.TensorType((h * w,), "int8")]))
        return relax.TupleGetItem(both, 0)

    return replacement


def inplace_depthwise(mod: tvm.IRModule) -> tvm.IRModule:
    """Every eligible depthwise convolution written over its input."""
    b = Bindings(mod)
    replace = {var: _inplace_call(b, var) for var in b.defs if _eligible(b, var)}
    return rebuild(mod, replace) if replace else mod
