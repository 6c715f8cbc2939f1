"""lib/: the model as a static library for the user's own firmware (STM32CubeIDE, Zephyr, Pico SDK, ESP-IDF or
plain CMake), next to the demo firmware of a build.

It holds the model's sources only -- model.c/.h, weights.c/.h, kernels.c/.h: no main, no startup code, no
semihosting -- and a CMakeLists.txt exporting the target ``edgemem_model``, compiled with the board core's flags
when the compiler targets Arm. The arena pools are plain static arrays there (no linker section of edgemem's), or,
with ``EDGEMEM_EXTERNAL_ARENA``, the application's own buffer given with ``edgemem_set_arena``.
"""

from __future__ import annotations

import re
from pathlib import Path

from .. import __version__
from .escape import cmake_unix_command
from .templates import render

LIBRARY_DIR = "lib"
MODEL_SOURCES = ("model.c", "weights.c", "kernels.c")
MODEL_HEADERS = ("model.h", "weights.h", "kernels.h")
# the firmware's pools sit in linker sections its own linker script places; the user's script knows none of them
SECTION_ATTRIBUTE = re.compile(r'section\("[^"]*"\)\s*,\s*')


def without_sections(model_c: str) -> str:
    """model.c with its pools as plain static arrays (no linker section attribute)."""
    return SECTION_ATTRIBUTE.sub("", model_c)


def write_library(project: Path, sources: dict[str, str], board, model_name: str) -> Path:
    """Write ``project/lib`` from the rendered model sources; returns that directory."""
    lib = Path(project) / LIBRARY_DIR
    lib.mkdir(parents=True, exist_ok=True)
    for name in (*MODEL_SOURCES, *MODEL_HEADERS):
        text = sources[name]
        (lib / name).write_text(without_sections(text) if name == "model.c" else text)
    context = dict(model_name=model_name, board=board, version=__version__, cpu_flags=cmake_unix_command(board.core.gcc_flags),
                   sources=MODEL_SOURCES)  # fmt: skip
    (lib / "CMakeLists.txt").write_text(render("lib_CMakeLists.txt.j2", **context))
    (lib / "README.md").write_text(render("lib_README.md.j2", **context))
    return lib
