"""Where tests find the third-party models: ../shared/models next to the repository (never committed here).
A test of a model that is not there is skipped, not failed."""

from __future__ import annotations

from pathlib import Path

import pytest

MODELS = Path(__file__).resolve().parents[2] / "shared" / "models"


def model_path(name: str) -> Path:
    path = MODELS / f"{name}.tflite"
    if not path.is_file():
        pytest.skip(f"{path} is not here (the shared models live next to the repository)")
    return path
