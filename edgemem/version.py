"""edgemem's version: the installed package's, else (run from a source tree that is not installed) pyproject's."""

from __future__ import annotations

import tomllib
from importlib import metadata
from pathlib import Path

PYPROJECT = Path(__file__).resolve().parents[1] / "pyproject.toml"


def package_version() -> str:
    """The version `edgemem --version` prints; "unknown" when neither the metadata nor pyproject.toml says."""
    try:
        return metadata.version("edgemem")
    except metadata.PackageNotFoundError:
        pass
    try:
        return str(tomllib.loads(PYPROJECT.read_text())["project"]["version"])
    except (OSError, ValueError, KeyError, TypeError):
        return "unknown"
