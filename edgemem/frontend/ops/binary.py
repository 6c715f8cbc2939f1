"""binary operators (see registry.py for how a lowering is written)."""

from __future__ import annotations
