"""The build's output directory: written whole or not at all.

A build (or a symbolic plan) fills a temporary sibling of the output directory and moves it into place only
when complete, so a failed build leaves no half-written project and an existing one is replaced only with
--force.
"""

from __future__ import annotations

import os
import shutil
import tempfile
from collections.abc import Callable
from pathlib import Path

from .errors import EdgememError


def check_output_dir(model_path: Path, out_dir: Path) -> None:
    """Replacing the output directory must not delete the model being built (a model kept inside it)."""
    if model_path.resolve().is_relative_to(out_dir.resolve()):
        raise EdgememError(
            f"the model '{model_path}' is inside the output directory '{out_dir}', which the build replaces: it would "
            "be deleted. Choose another directory with -o, or move the model out of it."
        )


def write_atomically(out_dir: Path, overwrite: bool, fill: Callable[[Path], None]) -> None:
    """Run ``fill`` on a temporary sibling of ``out_dir`` and move it into place only when it returns."""
    out_dir = out_dir.resolve()
    if out_dir.exists() and not overwrite:
        raise EdgememError(
            f"output directory '{out_dir}' already exists; edgemem does not overwrite it silently. "
            "Pass --force to replace it, or choose another directory with -o."
        )
    out_dir.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{out_dir.name}.", dir=out_dir.parent))
    try:
        fill(tmp)
        if out_dir.exists():
            shutil.rmtree(out_dir)
        os.replace(tmp, out_dir)
    finally:
        if tmp.exists():
            shutil.rmtree(tmp, ignore_errors=True)
