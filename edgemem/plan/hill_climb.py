"""Local search over the order fed to first fit (in the spirit of Vela's and TVM USMP's hill climb).

Start from the better greedy order; repeatedly move one buffer that ends at the arena's top earlier in
the order, or swap two random buffers, keeping a change when the arena does not grow. Seeded, so a
given input always gives the same plan; stops at the lower bound, an iteration cap or a deadline.
"""

from __future__ import annotations

import random
import time

from .first_fit import first_fit
from .model import Buffer, arena_end, lower_bound


def hill_climb(buffers: list[Buffer], *, seed: int = 0, iterations: int = 2000, deadline: float | None = None) -> dict[str, int]:
    if not buffers:
        return {}
    rng = random.Random(seed)
    order = sorted(buffers, key=lambda b: (-b.padded, -b.first))
    best = first_fit(order)
    best_end, bound = arena_end(buffers, best), lower_bound(buffers)
    for _ in range(iterations):
        if best_end <= bound or (deadline is not None and time.perf_counter() > deadline):
            break
        trial = _neighbour(order, best, best_end, rng)
        offsets = first_fit(trial)
        end = arena_end(buffers, offsets)
        if end <= best_end:
            order, best, best_end = trial, offsets, end
    return best


def _neighbour(order: list[Buffer], offsets: dict[str, int], end: int, rng: random.Random) -> list[Buffer]:
    trial = list(order)
    top = [i for i, b in enumerate(trial) if offsets[b.name] + b.padded == end]
    if top and rng.random() < 0.5:  # pull a buffer that sets the peak to an earlier position
        i = rng.choice(top)
        j = rng.randrange(0, i + 1)
        trial.insert(j, trial.pop(i))
    else:
        i, j = rng.randrange(len(trial)), rng.randrange(len(trial))
        trial[i], trial[j] = trial[j], trial[i]
    return trial
