"""Float SPLIT (and UNPACK, which TVM's frontend writes as a split and squeezes) as one strided slice per part.

TVM legalizes ``relax.split`` into one kernel that returns a tuple of its parts; edgemem's graph reader plans one
output per kernel (a kernel's own workspace aside). Each part read by ``TupleGetItem`` becomes its own
``strided_slice`` of the input instead: the same bytes, one kernel per part, each part planned on its own.
"""

from __future__ import annotations

import tvm
from tvm import relax


def _is_split(value) -> bool:
    return isinstance(value, relax.Call) and isinstance(value.op, tvm.ir.Op) and value.op.name == "relax.split"


@relax.expr_functor.mutator
class _SplitToSlices(relax.PyExprMutator):
    def __init__(self, mod: tvm.IRModule):
        super().__init__(mod)
        self.mod_ = mod
        self.parts: dict = {}  # the old split var -> its new parts

    def visit_var_binding_(self, binding):
        value = binding.value
        if _is_split(value):
            x = self.visit_expr(value.args[0])
            shape = [int(d) for d in x.ty.shape.values]
            axis = int(value.attrs.axis) % len(shape)
            sections = value.attrs.indices_or_sections
            if isinstance(sections, (int, tvm.tirx.IntImm)):
                n = int(sections)
                bounds = [i * shape[axis] // n for i in range(n + 1)]
            else:
                bounds = [0, *[int(i) for i in sections], shape[axis]]
            self.parts[binding.var] = [
                self.builder_.emit(relax.op.strided_slice(x, [axis], [b], [e])) for b, e in zip(bounds, bounds[1:])
            ]
            return
        if isinstance(value, relax.TupleGetItem) and value.tuple_value in self.parts:
            self.set_var_remap(binding.var, self.parts[value.tuple_value][value.index])
            return
        super().visit_var_binding_(binding)

    def transform(self) -> tvm.IRModule:
        for gv, func in self.mod_.functions.items():
            if isinstance(func, relax.Function):
                self.builder_.update_func(gv, self.visit_expr(func))
        return self.builder_.get()


def split_to_slices(mod: tvm.IRModule) -> tvm.IRModule:
    """``mod`` with every Relax split read part by part written as strided slices (unchanged if it has none)."""
    found = []
    relax.analysis.post_order_visit(mod["main"], lambda e: found.append(e) if _is_split(e) else None)
    return _SplitToSlices(mod).transform() if found else mod
