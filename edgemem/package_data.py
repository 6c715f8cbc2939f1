"""Where the non-Python files a build reads are: templates/, firmware/ and boards/.

They sit at the repository's top level (the project's layout). A wheel ships them inside the package, as
edgemem/_data/<name>/ (setup.py copies them there when it builds), so an installed edgemem builds from any
directory; an editable install or a checkout on PYTHONPATH has no _data/ and reads the top-level folders.
"""

from __future__ import annotations

from importlib import resources
from pathlib import Path
from typing import Literal

DataDir = Literal["templates", "firmware", "boards"]

_CHECKOUT = Path(__file__).resolve().parents[1]


def data_dir(name: DataDir) -> Path:
    """The directory `name` of the installed package if there is one, else the source checkout's."""
    shipped = resources.files(__package__) / "_data" / name
    # A wheel installed on disk gives a real directory; the generated Makefile and jinja2 need file-system paths.
    if isinstance(shipped, Path) and shipped.is_dir():
        return shipped
    return _CHECKOUT / name
