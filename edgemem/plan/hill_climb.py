"""Local search over the order fed to first fit (in the spirit of Vela's and TVM USMP's hill climb).

Start from the better of the size order (TFLM's) and the conflicts order. Each step proposes a
neighbouring order: most often a buffer that reaches the arena's top is moved earlier in the order,
either just before one of the buffers it was stacked on or to a random earlier position (so it is
placed before what pushed it up); otherwise one buffer is moved to a random position.
First fit is redone only from the first changed position. A neighbour is kept when the arena does not
grow (sideways moves let the search cross plateaus).

Deterministic: the random generator is seeded and the search stops after a fixed amount of work
(buffers placed plus conflicts looked at) or of neighbours tried (500 per buffer), not after a
wall-clock time; it also stops at the lower bound. The optional deadline is only a safety net for very large inputs.
"""

from __future__ import annotations

import random
import time

from .first_fit import Instance
from .model import Buffer, lower_bound

DEFAULT_WORK = 1_500_000  # first-fit work units (placements + conflicts looked at): ~0.3 s a million here
ITERATIONS_PER_BUFFER = 500  # small instances stop here long before the work budget (exact takes over)


def hill_climb(buffers: list[Buffer], incumbent: dict[str, int] | None = None, *, seed: int = 0,
               work: int = DEFAULT_WORK, deadline: float | None = None) -> dict[str, int]:  # fmt: skip
    """Offsets found by the climb. With ``incumbent`` (offsets from another algorithm) the climb also
    starts from first fit in the incumbent's offset order, which never places a buffer higher than the
    incumbent did: the result is then never worse than the incumbent."""
    inst = Instance(buffers)
    n = inst.n
    if n == 0:
        return {}
    bound = lower_bound(buffers)
    starts = [sorted(range(n), key=lambda i: (-inst.size[i], -i))]
    pressure = [inst.size[i] + sum(inst.size[j] for j in inst.conflicts[i]) for i in range(n)]
    starts.append(sorted(range(n), key=lambda i: (-pressure[i], -inst.size[i], i)))
    if incumbent is not None:
        starts.insert(0, sorted(range(n), key=lambda i: (incumbent[inst.buffers[i].name], i)))
    order, offsets, end = None, None, None
    for candidate in starts:
        offs = inst.first_fit(candidate)
        if end is None or inst.end(offs) < end:
            order, offsets, end = candidate, offs, inst.end(offs)
    rng = random.Random(seed)
    for _ in range(ITERATIONS_PER_BUFFER * n):
        if end <= bound or inst.work >= work or n < 2:
            break
        if deadline is not None and time.perf_counter() > deadline:
            break
        trial = list(order)
        top = [k for k, i in enumerate(trial) if offsets[i] + inst.size[i] == end and k > 0]
        if top and rng.random() < 0.7:  # a buffer at the top goes earlier in the order
            src = rng.choice(top)
            x = trial[src]
            under = {j for j in inst.conflicts[x] if offsets[j] < offsets[x]}
            below = [k for k in range(src) if trial[k] in under]
            if below and rng.random() < 0.5:
                dst = rng.choice(below)  # just before a buffer it was stacked on
            else:
                dst = rng.randrange(0, src)
        else:  # any buffer anywhere
            src, dst = rng.randrange(n), rng.randrange(n)
            if src == dst:
                continue
        trial.insert(dst, trial.pop(src))
        changed = min(src, dst)
        offs = inst.first_fit(trial, offsets, changed, limit=end)  # None as soon as it grows
        if offs is not None:
            order, offsets, end = trial, offs, inst.end(offs)
    return inst.as_dict(offsets)
