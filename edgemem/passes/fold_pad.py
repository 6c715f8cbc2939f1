"""PAD folding: a PAD whose value is the zero point and whose only readers are convolutions becomes
their padding, so the padded copy never exists in RAM.

Exact: a border byte equal to the input's zero point contributes (zp - zp) * w = 0 to every sum, which
is what a padded convolution does for the positions it skips. Only spatial (H, W) padding of an NHWC
tensor folds; the convolution is rebuilt from its spec with the PAD's input shape and the summed padding.
"""

from __future__ import annotations

import dataclasses

import tvm

from ..kernels.specs import Conv2D, Depthwise, Pad
from . import kernel_spec
from .rewrite import Bindings, add_kernel, rebuild

_CONVS = (Conv2D, Depthwise)


def _foldable(b: Bindings, pad_var) -> list | None:
    """The convolution vars reading ``pad_var`` if the PAD folds into all of them, else None."""
    k = b.kernel(pad_var)
    if k is None or not isinstance(k.spec, Pad) or pad_var in b.outputs:
        return None
    spec = k.spec
    before, after = spec.pad_before, spec.pad_after
    if len(before) != 4 or before[0] or after[0] or before[3] or after[3]:
        return None
    readers = b.readers.get(pad_var, [])
    for r in readers:
        rk = b.kernel(r)
        if rk is None or type(rk.spec) not in _CONVS:
            return None
        if not rk.args[0].same_as(pad_var) or any(a.same_as(pad_var) for a in rk.args[1:]):
            return None
        if rk.spec.in_zp != spec.pad_value:
            return None
    return readers or None


def _folded_conv(b: Bindings, conv_var, pad_spec: Pad, pad_input):
    _gv, prim, spec, args = b.kernel(conv_var)
    t, l = pad_spec.pad_before[1], pad_spec.pad_before[2]
    bottom, right = pad_spec.pad_after[1], pad_spec.pad_after[2]
    new_spec = dataclasses.replace(spec, x_shape=pad_spec.x_shape,
                                   pad=(spec.pad[0] + t, spec.pad[1] + l, spec.pad[2] + bottom, spec.pad[3] + right))  # fmt: skip
    old = b.defs[conv_var]

    def replacement(bb, env):
        new_gv = add_kernel(bb, kernel_spec.build(new_spec), prim)
        new_args = [env.get(pad_input, pad_input)] + [env.get(a, a) for a in args[1:]]
        return tvm.relax.call_tir(new_gv, new_args, old.ty_args[0])

    return replacement


def fold_pad(mod: tvm.IRModule) -> tvm.IRModule:
    """Fold every foldable PAD into the convolutions that read it."""
    b = Bindings(mod)
    replace, drop = {}, set()
    for var in b.defs:
        convs = _foldable(b, var)
        if convs is None:
            continue
        pad = b.kernel(var)
        for c in convs:
            replace[c] = _folded_conv(b, c, pad.spec, pad.args[0])
        drop.add(var)
    return rebuild(mod, replace, drop) if replace else mod
