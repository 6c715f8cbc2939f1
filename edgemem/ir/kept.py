"""Values computed once per TVM object: a structural hash, a weight array copied out of TVM.

The orchestrator reads and rewrites hundreds of modules that share most of their objects (a pass rewrites
main and adds a few kernels; the kernels and weight Constants are the input module's own). A cache keys each
object by its address and holds the object itself, so the address cannot be reused by another while cached.
"""

from __future__ import annotations

from typing import Any, Callable

LIMIT = 20000  # objects per cache before it starts over (a long benchmark reads many models)


def per_object(cache: dict, obj, compute: Callable[[Any], Any]):
    """``compute(obj)``, computed once for this object while it stays in ``cache``."""
    handle = obj.__chandle__()
    if handle not in cache:
        if len(cache) >= LIMIT:
            cache.clear()
        cache[handle] = (obj, compute(obj))
    return cache[handle][1]
