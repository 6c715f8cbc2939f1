"""Byte sizes as users write them: `320K`, `320KiB`, `1M`, `0x50000`, `327680`.

K and M are binary (1024, 1024**2), as in linker scripts and microcontroller datasheets ("320 Kbytes of SRAM");
`KB`/`KiB`/`k` are accepted as the same unit, so `--ram 320KB` means what an STM32 datasheet means.
"""

from __future__ import annotations

import re

_UNITS = {"": 1, "b": 1, "k": 1024, "kb": 1024, "kib": 1024, "m": 1024**2, "mb": 1024**2, "mib": 1024**2}
_SIZE = re.compile(r"\s*(0x[0-9a-f]+|\d+(?:\.\d+)?)\s*([a-z]*)\s*", re.IGNORECASE)


def parse_size(text: str | int) -> int:
    """Bytes of ``text``; ValueError (saying what is accepted) for anything else."""
    if isinstance(text, int):
        return text
    m = _SIZE.fullmatch(str(text))
    unit = m.group(2).lower() if m else None
    if m is None or unit not in _UNITS:
        raise ValueError(f"'{text}' is not a size: give bytes (327680, 0x50000) or a number with a unit K, KiB, KB, M, MiB or MB (320K, 1M)")
    number = m.group(1)
    value = int(number, 16) if number.lower().startswith("0x") else float(number) * _UNITS[unit]
    if value != int(value):
        raise ValueError(f"'{text}' is not a whole number of bytes")
    return int(value)
