"""Running a Relax module on the host: TVM compiles it for LLVM and the Relax VM runs it (the tests' way to
check that a pass changes bytes, never results)."""

from __future__ import annotations

from collections import OrderedDict

import tvm
from tvm import relax

_COMPILED: OrderedDict = OrderedDict()  # id(mod) -> (mod, vm): a module run on several inputs compiles once


def _vm(mod):
    key = id(mod)
    if key in _COMPILED and _COMPILED[key][0] is mod:  # the module is held, so its id is not reused
        _COMPILED.move_to_end(key)
        return _COMPILED[key][1]
    vm = relax.VirtualMachine(tvm.compile(mod, target="llvm"), tvm.cpu())
    _COMPILED[key] = (mod, vm)
    while len(_COMPILED) > 4:
        _COMPILED.popitem(last=False)
    return vm


def run(mod, inputs) -> list:
    """The outputs of ``mod["main"]`` on ``inputs`` (numpy arrays), as numpy arrays."""
    out = _vm(mod)["main"](*[tvm.runtime.tensor(a) for a in inputs])
    return [o.numpy() for o in ([out] if isinstance(out, tvm.runtime.Tensor) else list(out))]
