"""Cell-by-cell comparison of two passes.md tables in their arena columns (issue 18: a re-run must be equal
or smaller everywhere). Prints every cell that differs and the count of larger ones; exit 1 if any is larger.

    python3 benchmarks/compare_passes.py <(git show 33435cf:benchmarks/passes.md) benchmarks/passes.md   # vs 2026-11-23
"""

from __future__ import annotations

import re
import sys

ARENA_COLUMNS = ("none", "fixed", "greedy", "search", "orchestrated", "run 2 arena", "LOO arena",
                 "QEMU: build (minimizing) arena, bit-exact")  # fmt: skip


def main_table(path: str) -> dict[str, dict[str, str]]:
    """model -> column -> cell of the file's first table (the one whose header starts with 'model')."""
    rows: dict[str, dict[str, str]] = {}
    header = None
    for line in open(path):
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if header is None:
            header = cells if line.startswith("| model |") else None
        elif not line.startswith("|"):
            break
        elif not line.startswith("|---") and len(cells) == len(header):
            rows[cells[0]] = dict(zip(header, cells))
    return rows


def number(cell: str) -> int | None:
    m = re.match(r"([\d,]+)", cell or "")
    return int(m.group(1).replace(",", "")) if m else None


def main(old_path: str, new_path: str) -> int:
    old, new = main_table(old_path), main_table(new_path)
    larger = 0
    for model, cells in new.items():
        for col in ARENA_COLUMNS:
            a, b = number(old.get(model, {}).get(col, "")), number(cells.get(col, ""))
            if a is None or b is None or a == b:
                continue
            larger += b > a
            print(f"{'LARGER' if b > a else 'smaller'} {model} {col}: {a:,} -> {b:,}")
    print(f"{larger} larger cells of {len(new)} models")
    return 1 if larger else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1], sys.argv[2]))
