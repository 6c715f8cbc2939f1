"""Which operators of a model edgemem can run, decided from the flatbuffer before any lowering.

An operator is supported when edgemem has its own lowering for its operand type (frontend/ops/), when it
is an int8 operator integerize builds from TVM's QDQ import (passes/integerize.py), or when it is a float
operator TVM's frontend converts (TVM then legalizes it). Everything else is listed at once, each with its
index, name, type and output tensor, so that a user sees the whole gap in one message.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from ..errors import UnsupportedModelError
from .fold import fold_model
from .footprint import indices


@dataclass(frozen=True)
class Unsupported:
    index: int
    name: str
    operand_type: str
    output: str

    def label(self) -> str:
        return f"operator #{self.index} {self.name} (output '{self.output}') on {self.operand_type}"


def frontend_operators(model) -> frozenset[str]:
    """The operators TVM's TFLite frontend has a converter for (its table, read off a converter of this model)."""
    from tvm.relax.frontend.tflite import tflite_frontend as tf

    return frozenset(tf.OperatorConverter(model, model.Subgraphs(0), None, None).convert_map)


def is_supported(name: str, operand_type: str, frontend_ops: frozenset[str], types=None) -> bool:
    from ..passes.integerize import SUPPORTED_INT8_OPS
    from .ops import registry

    if registry.find(name, operand_type, types) is not None:  # types: registry.OpTypes, for lowerings with a predicate
        return True
    if operand_type == "int8":
        return name in SUPPORTED_INT8_OPS
    if operand_type in ("float32", "int32", "bool", "int64"):
        return name in frontend_ops
    return False


def unsupported_operators(model, op_names: list[str]) -> list[Unsupported]:
    from .ops.registry import operand_type, operator_types
    from .tflite_import import tensor_name

    sg = model.Subgraphs(0)
    frontend_ops = frontend_operators(model)
    found = []
    _, folded = fold_model(model)  # evaluated at import (frontend/fold.py): no kernel needed
    for i, name in enumerate(op_names):
        if i in folded:
            continue
        op = sg.Operators(i)
        kind = operand_type(sg, op, model, name)
        if not is_supported(name, kind, frontend_ops, operator_types(sg, op)):
            outs = [int(t) for t in indices(op.OutputsAsNumpy()) if t >= 0]
            found.append(Unsupported(i, name, kind, tensor_name(sg, outs[0]) if outs else "none"))
    return found


def check_operators(model, op_names: list[str], path) -> None:
    """Refuse, in one paragraph naming every one of them, the operators edgemem cannot run."""
    missing = unsupported_operators(model, op_names)
    if not missing:
        return
    shown = "; ".join(u.label() for u in missing[:12]) + (f"; and {len(missing) - 12} more" if len(missing) > 12 else "")
    kinds = sorted({f"{u.name} ({u.operand_type})" for u in missing})
    raise UnsupportedModelError(
        f"{Path(path).name}: edgemem has no kernel for {len(missing)} operator(s) of this model: {shown}. "
        f"Missing: {', '.join(kinds)}. Replace these layers in the model (or convert it with other types), or file "
        "an issue naming the operators; the rest of the model is supported."
    )
