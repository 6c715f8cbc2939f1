"""A generic schedule for the fused float kernels TVM legalizes: no intermediate buffers.

Legalized kernels materialise each stage (a padded input copy, a full conv accumulator, the bias
add) as a buffer: kilobytes of scratch the arena plan does not see. Inlining every injective stage
into its consumer and computing each remaining reduction at its consumer's innermost loop leaves
scalar accumulators only.
"""

from __future__ import annotations

import tvm
import tvm.s_tir
from tvm import tirx


def _try(fn, *args) -> bool:
    try:
        fn(*args)
        return True
    except tvm.s_tir.schedule.ScheduleError:  # the primitive's own legality check said no
        return False


def _blocks(sch):
    return list(sch.get_child_blocks(sch.get_sblock("root")))


def scalar_schedule(func: tirx.PrimFunc) -> tirx.PrimFunc:
    sch = tvm.s_tir.Schedule(func)
    progress = True
    while progress:  # inline until nothing more is injective and inlinable
        progress = any(_try(sch.compute_inline, b) or _try(sch.reverse_compute_inline, b) for b in _blocks(sch))
    for block in reversed(_blocks(sch)):
        consumers = sch.get_consumers(block)
        if len(consumers) == 1:
            outer = len(sch.get_loops(consumers[0]))
            if _try(sch.compute_at, block, sch.get_loops(consumers[0])[-1]):
                inner = sch.get_loops(block)[outer:]
                if inner:  # the zero-init goes before the reduction loops, not inside them
                    _try(sch.decompose_reduction, block, inner[0])
    return sch.mod["main"]
