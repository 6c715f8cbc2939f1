"""The stack a build needs, estimated from gcc's -fstack-usage files (the measured figure comes from the
device: its painted-stack high-water mark)."""

from __future__ import annotations

import re
from pathlib import Path


def stack_estimate(project: Path, graph) -> int:
    """Deepest call chain main -> edgemem_run -> kernel, from gcc's -fstack-usage files."""
    frames: dict[str, int] = {}
    for su in project.glob("*.su"):
        for line in su.read_text().splitlines():
            m = re.match(r"^.*:\d+:\d+:(\w+)\s+(\d+)\s+\w+", line)
            if m:
                frames[m.group(1)] = max(frames.get(m.group(1), 0), int(m.group(2)))
    kernels = max((frames.get(op.name, 0) for op in graph.ops), default=0)
    return frames.get("main", 0) + frames.get("edgemem_run", 0) + kernels
