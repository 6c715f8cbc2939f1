"""Running a Relax module on the host: TVM compiles it for LLVM and the Relax VM runs it (the tests' way to
check that a pass changes bytes, never results)."""

from __future__ import annotations

import tvm
from tvm import relax


def run(mod, inputs) -> list:
    """The outputs of ``mod["main"]`` on ``inputs`` (numpy arrays), as numpy arrays."""
    vm = relax.VirtualMachine(tvm.compile(mod, target="llvm"), tvm.cpu())
    out = vm["main"](*[tvm.runtime.tensor(a) for a in inputs])
    return [o.numpy() for o in ([out] if isinstance(out, tvm.runtime.Tensor) else list(out))]
