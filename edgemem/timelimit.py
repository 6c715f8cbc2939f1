"""A deadline the expensive parts of the build look at from inside their loops (issue 30: a hostile model of
thousands of operators must not make `--opt-time` or `--schedule-time` run away).

    with deadline(seconds):   everything called inside may run until then (nested deadlines: the earlier wins)
    check()                   raise TimeUp past the current deadline (none set: never)
    remaining()               seconds left (None: no deadline)

The pass search (passes/orchestrate.py) sets one around each trial; the memory passes' binding loops, the
graph reader and the measure's schedulers look at it, so one trial on a huge module stops where it is instead
of running to its end. Whoever set the deadline catches TimeUp and keeps the best result found before it.
"""

from __future__ import annotations

import time
from contextlib import contextmanager
from contextvars import ContextVar
from typing import Iterator

_DEADLINE: ContextVar[float | None] = ContextVar("edgemem_deadline", default=None)


class TimeUp(Exception):
    """The deadline set by ``deadline`` has passed."""


@contextmanager
def deadline(seconds: float | None) -> Iterator[None]:
    """Run the block under a deadline ``seconds`` from now (None: no new one); an enclosing earlier one stays."""
    outer = _DEADLINE.get()
    mine = None if seconds is None else time.perf_counter() + max(seconds, 0.0)
    token = _DEADLINE.set(mine if outer is None else outer if mine is None else min(outer, mine))
    try:
        yield
    finally:
        _DEADLINE.reset(token)


def remaining() -> float | None:
    end = _DEADLINE.get()
    return None if end is None else end - time.perf_counter()


def ensure(seconds: float) -> None:
    """Raise TimeUp now if less than ``seconds`` are left: before a step nothing can stop once begun (one TVM call)."""
    left = remaining()
    if left is not None and left < seconds:
        raise TimeUp("the time budget would run out during the next step")


def check() -> None:
    end = _DEADLINE.get()
    if end is not None and time.perf_counter() > end:
        raise TimeUp("the time budget ran out")
