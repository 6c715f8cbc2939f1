"""First fit in a given order: each buffer goes to the lowest aligned offset where it overlaps no
already placed buffer that is live at the same time. Every heuristic here is an order fed to it."""

from __future__ import annotations

from .model import Buffer


def _aligned_up(n: int, align: int) -> int:
    return -(-n // align) * align


def first_fit_offset(buf: Buffer, placed: list[tuple[int, int]]) -> int:
    """Lowest offset for ``buf`` among ``placed`` (offset, padded size) of time-conflicting buffers."""
    offset = 0
    for start, size in sorted(placed):
        if offset + buf.padded <= start:
            break
        offset = max(offset, _aligned_up(start + size, buf.align))
    return offset


def first_fit(order: list[Buffer]) -> dict[str, int]:
    offsets: dict[str, int] = {}
    done: list[Buffer] = []
    for buf in order:
        conflicts = [(offsets[o.name], o.padded) for o in done if o.overlaps_in_time(buf)]
        offsets[buf.name] = first_fit_offset(buf, conflicts)
        done.append(buf)
    return offsets
