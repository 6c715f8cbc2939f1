"""Packaging hook (everything else is in pyproject.toml): a built wheel carries the repository's top-level
templates/, firmware/ and boards/ as edgemem/_data/, where edgemem/package_data.py finds them at run time.

The folders stay at the top level (the project's layout) and are copied at build time, not moved. An
editable install needs no copy: package_data.data_dir falls back to the checkout.
"""

import shutil
from pathlib import Path

from setuptools import setup
from setuptools.command.build_py import build_py

HERE = Path(__file__).resolve().parent
DATA_DIRS = ("templates", "firmware", "boards")


def _data_files() -> list[Path]:
    """The files to ship, relative to the repository (no caches, objects or hidden files)."""
    files = []
    for name in DATA_DIRS:
        for path in sorted((HERE / name).rglob("*")):
            rel = path.relative_to(HERE)
            if path.is_file() and path.suffix not in (".pyc", ".o") and not any(p.startswith((".", "__")) for p in rel.parts):
                files.append(rel)
    return files


class BuildPyWithData(build_py):
    def run(self):
        super().run()
        if self._editable():
            return
        for name in DATA_DIRS:  # a reused build/ must not ship files deleted since
            shutil.rmtree(self._target() / name, ignore_errors=True)
        for rel in _data_files():
            self.mkpath(str((self._target() / rel).parent))
            self.copy_file(str(HERE / rel), str(self._target() / rel))

    def get_outputs(self, include_bytecode=True):
        shipped = [] if self._editable() else [str(self._target() / rel) for rel in _data_files()]
        return list(super().get_outputs(include_bytecode)) + shipped

    def _target(self) -> Path:
        return Path(self.build_lib) / "edgemem" / "_data"

    def _editable(self) -> bool:
        return bool(getattr(self, "editable_mode", False))


setup(cmdclass={"build_py": BuildPyWithData})
