"""The learned effect table of the pass orchestrator (orchestrate.py): per pass and pass pair, how often a
pass is an opportunity on a fresh module, how often ``p`` keeps or creates ``q``, and ``p``'s mean arena ratio.

It ships as ``effects.json`` next to this file. Runs only *read* it; every run returns its observations and
``learn`` merges them into the file. A user build never writes it: the package may be installed read-only,
builds must not depend on which models were built before on the same machine (the same model gives the same
result), and parallel builds would race on the file. ``benchmarks/passes.py --learn`` refreshes it from the
shared models.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable
from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path

EFFECTS_FILE = "effects.json"
MIN_OBSERVATIONS = 3  # fewer observations of a pass (pair) than this: no belief
LIKELY, UNLIKELY = 0.9, 0.1  # observed rates at or beyond these count as beliefs


def _belief(hits: int, seen: int) -> bool | None:
    if seen < MIN_OBSERVATIONS:
        return None
    rate = hits / seen
    return True if rate >= LIKELY else False if rate <= UNLIKELY else None


@dataclass
class EffectTable:
    """Counts observed across models. ``root[q] = [seen, opportunity]`` on an unpassed module;
    ``after[p][q] = [seen while q was an opportunity, still one after p, seen while q was not, one after p]``;
    ``gain[p] = [applications as an opportunity, sum of arena after / before]``."""

    root: dict = field(default_factory=dict)
    after: dict = field(default_factory=dict)
    gain: dict = field(default_factory=dict)
    models: list = field(default_factory=list)

    # what a run believes
    def root_belief(self, q: str) -> bool | None:
        seen, hits = self.root.get(q, (0, 0))
        return _belief(hits, seen)

    def after_belief(self, p: str, q: str, was: bool) -> bool | None:
        c = self.after.get(p, {}).get(q, (0, 0, 0, 0))
        return _belief(c[1], c[0]) if was else _belief(c[3], c[2])

    def arena_ratio(self, p: str) -> float:
        n, total = self.gain.get(p, (0, 0.0))
        return total / n if n else 1.0

    # what a run saw
    def saw_root(self, q: str, opportunity: bool) -> None:
        c = self.root.setdefault(q, [0, 0])
        c[0] += 1
        c[1] += int(opportunity)

    def saw_after(self, p: str, q: str, was: bool, now: bool) -> None:
        c = self.after.setdefault(p, {}).setdefault(q, [0, 0, 0, 0])
        base = 0 if was else 2
        c[base] += 1
        c[base + 1] += int(now)

    def saw_gain(self, p: str, ratio: float) -> None:
        c = self.gain.setdefault(p, [0, 0.0])
        c[0] += 1
        c[1] += ratio

    def merged(self, other: EffectTable) -> EffectTable:
        out = EffectTable.from_json(self.to_json())
        for q, (seen, hits) in other.root.items():
            c = out.root.setdefault(q, [0, 0])
            c[0], c[1] = c[0] + seen, c[1] + hits
        for p, row in other.after.items():
            for q, counts in row.items():
                c = out.after.setdefault(p, {}).setdefault(q, [0, 0, 0, 0])
                for i in range(4):
                    c[i] += counts[i]
        for p, (n, total) in other.gain.items():
            c = out.gain.setdefault(p, [0, 0.0])
            c[0], c[1] = c[0] + n, c[1] + total
        out.models = sorted(set(out.models) | set(other.models))
        return out

    def is_empty(self) -> bool:
        return not (self.root or self.after or self.gain)

    def to_json(self) -> dict:
        return {"version": 1, "models": list(self.models), "root": self.root, "after": self.after,
                "gain": {p: [n, round(total, 6)] for p, (n, total) in self.gain.items()}}  # fmt: skip

    @classmethod
    def from_json(cls, data: dict) -> EffectTable:
        return cls(root={q: list(c) for q, c in data.get("root", {}).items()},
                   after={p: {q: list(c) for q, c in row.items()} for p, row in data.get("after", {}).items()},
                   gain={p: list(c) for p, c in data.get("gain", {}).items()},
                   models=list(data.get("models", [])))  # fmt: skip

    @classmethod
    def load(cls, path: str | Path | None = None) -> EffectTable:
        """The table shipped in the package (or the file at ``path``); empty when there is none."""
        if path is not None:
            source = Path(path)
            return cls.from_json(json.loads(source.read_text())) if source.is_file() else cls()
        shipped = resources.files(__package__).joinpath(EFFECTS_FILE)
        return cls.from_json(json.loads(shipped.read_text())) if shipped.is_file() else cls()

    def save(self, path: str | Path | None = None) -> Path:
        target = Path(path) if path is not None else Path(__file__).with_name(EFFECTS_FILE)
        text = json.dumps(self.to_json(), indent=1, sort_keys=True)
        text = re.sub(r"\[\s+([^\[\]{}]*?)\s+\]", lambda m: "[" + " ".join(m.group(1).split()) + "]", text)  # counts on one line
        target.write_text(text + "\n")
        return target


def learn(observations: Iterable[EffectTable], base: EffectTable | None = None) -> EffectTable:
    """``base`` (default: empty) with every run's observations added: the explicit learning step."""
    table = base or EffectTable()
    for obs in observations:
        table = table.merged(obs)
    return table
