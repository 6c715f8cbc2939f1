"""DEQUANTIZE folded into its producer at a float model's outputs.

A model with float outputs ends in int8 kernel -> DEQUANTIZE: the int8 result and the float one are
live together at the DEQUANTIZE (5 bytes per element). Folded, the producer stores the float itself
(kernels/redirect.dequantized: the DEQUANTIZE kernel's own expression applied to each int8 value, so
the floats are bit for bit the same) and the int8 tensor is gone; the float output is then live at the
producer's step with its inputs instead. That is a saving where the producer's inputs are smaller than
its int8 output (a widening FULLY_CONNECTED or convolution, an upsampling); the orchestrator measures it.

The other boundary, QUANTIZE of a float input, is not folded into its consumer: the consumer would read
4-byte floats for its whole step, where in-place QUANTIZE (passes/inplace.py) leaves 1-byte values.
"""

from __future__ import annotations

import tvm
from tvm import relax

from ..kernels import kernel_attrs
from ..kernels.redirect import dequantized, only_stores_output
from ..kernels.specs import DequantizeFloat
from .rewrite import Bindings, add_kernel, rebuild


def _foldable(b: Bindings, var):
    """(producer var, scale, zero point) if ``var`` is a DEQUANTIZE whose int8 input a kernel makes
    for it alone."""
    k = b.kernel(var)
    if k is None or not isinstance(k.spec, DequantizeFloat):
        return None
    x = k.args[0]
    pk = b.kernel(x) if isinstance(x, relax.Var) else None
    if pk is None or b.sole_reader(x) is None or not b.sole_reader(x).same_as(var):
        return None
    prim = pk.prim
    if not kernel_attrs.plain_output(prim) or str(prim.params[-1].ty.dtype) != "int8" or not only_stores_output(prim):
        return None
    return x, k.spec.scale, k.spec.zero_point


def _folded_call(b: Bindings, var, producer, scale: float, zero_point: int):
    _gv, prim, _spec, args = b.kernel(producer)
    out_ty = b.defs[var].ty_args[0]

    def replacement(bb, env):
        gv = add_kernel(bb, dequantized(prim, scale, zero_point), prim, "dq")
        return relax.call_tir(gv, [env.get(a, a) for a in args], out_ty)

    return replacement


def fold_dequantize(mod: tvm.IRModule) -> tvm.IRModule:
    """Every DEQUANTIZE whose producer can store floats folded into it."""
    b = Bindings(mod)
    replace, drop = {}, set()
    for var in list(b.defs):
        found = _foldable(b, var)
        if found is not None:
            producer, scale, zp = found
            replace[var] = _folded_call(b, var, producer, scale, zp)
            drop.add(producer)
    return rebuild(mod, replace, drop) if replace else mod
