"""One storage model: which bytes are live at each step (model.py), built from the lowered OpGraph or
straight from the flatbuffer (adapters.py), and the early floor under the passes' capabilities (floor.py).
Every other module that needs liveness calls this package; see model.py for the rule."""

from .adapters import VIEW_OPS, aligned, from_graph, from_tflite
from .floor import DropDead, Elide, Overlap, op_floors, operator_floor, vanishing
from .model import MemOp, MemoryModel, Range, Storage, curve, live_at, live_events, peak, shared_bytes, smaller

__all__ = [
    "VIEW_OPS", "DropDead", "Elide", "MemOp", "MemoryModel", "Overlap", "Range", "Storage", "aligned", "curve", "from_graph",
    "from_tflite", "live_at", "live_events", "op_floors", "operator_floor", "peak", "shared_bytes", "smaller", "vanishing",
]
