"""`edgemem export PROJECT --to SYSTEM`: a build's model library as the native package of an embedded build system.

    cmake       CMakeLists.txt (target NAME), include/ + src/, example/ (an executable), cmake/arm-none-eabi.cmake
    zephyr      zephyr/module.yml, CMakeLists.txt (zephyr_library under CONFIG_EDGEMEM_NAME), Kconfig,
                samples/hello/ (a Zephyr application: CMakeLists.txt, prj.conf, src/main.c)
    platformio  library.json, include/ + src/, examples/hello/ (main.c and a platformio.ini for the host)
    arduino     library.properties, src/ (sources and headers), examples/Hello/Hello.ino
    esp-idf     idf_component.yml, CMakeLists.txt (idf_component_register), include/ + src/, examples/hello/

The sources are the build's lib/ (model.c/.h, weights.c/.h, kernels.c/.h) as they are, plus NAME.h (includes
model.h: the header a build system finds the library by). The metadata is rendered from templates/export_*.j2,
every string a model or a board file supplies through an escape.py filter for its format. No package sets an
optimisation level (the application's -Os stays -Os); the example fills each input with the quantized value of
0.0, runs the model once and prints the top-1 class of output 0. The output directory follows `edgemem build`'s
rules (project_dir.py): an existing one only with --force, and only one edgemem made.
"""

from __future__ import annotations

import re
import shutil
from pathlib import Path

from . import __version__
from .codegen.escape import cmake_unix_command
from .codegen.library import LIBRARY_DIR, MODEL_HEADERS, MODEL_SOURCES
from .codegen.templates import render
from .errors import EdgememError

SYSTEMS = ("cmake", "zephyr", "platformio", "arduino", "esp-idf")
_NAME = re.compile(r"[a-z][a-z0-9_]{0,62}", re.ASCII)
# C types of the tensor types the example reads (others are read as bytes)
_CTYPES = {"int8": "int8_t", "uint8": "uint8_t", "int16": "int16_t", "uint16": "uint16_t", "int32": "int32_t",
           "uint32": "uint32_t", "int64": "int64_t", "float32": "float", "bool": "uint8_t"}  # fmt: skip
_QUANTIZED = ("int8", "uint8", "int16")  # the types model.h has quantize/dequantize helpers for

# Each system: (template, path in the package) for the generated files; the sources go to SOURCES/HEADERS dirs.
_LAYOUT = {
    "cmake": {"src": "src", "include": "include", "files": [
        ("export_cmake_CMakeLists.txt.j2", "CMakeLists.txt"), ("export_cmake_example_CMakeLists.txt.j2", "example/CMakeLists.txt"),
        ("export_arm_toolchain.cmake.j2", "cmake/arm-none-eabi.cmake"), ("export_example.c.j2", "example/main.c")]},
    "zephyr": {"src": "src", "include": "include", "files": [
        ("export_zephyr_module.yml.j2", "zephyr/module.yml"), ("export_zephyr_CMakeLists.txt.j2", "CMakeLists.txt"),
        ("export_zephyr_Kconfig.j2", "Kconfig"), ("export_zephyr_sample_CMakeLists.txt.j2", "samples/hello/CMakeLists.txt"),
        ("export_zephyr_prj.conf.j2", "samples/hello/prj.conf"), ("export_example.c.j2", "samples/hello/src/main.c")]},
    "platformio": {"src": "src", "include": "include", "files": [
        ("export_platformio_library.json.j2", "library.json"), ("export_platformio_example.ini.j2", "examples/hello/platformio.ini"),
        ("export_example.c.j2", "examples/hello/src/main.c")]},
    "arduino": {"src": "src", "include": "src", "files": [
        ("export_arduino_library.properties.j2", "library.properties"), ("export_example.c.j2", "examples/Hello/Hello.ino")]},
    "esp-idf": {"src": "src", "include": "include", "files": [
        ("export_espidf_idf_component.yml.j2", "idf_component.yml"), ("export_espidf_CMakeLists.txt.j2", "CMakeLists.txt"),
        ("export_espidf_example_CMakeLists.txt.j2", "examples/hello/CMakeLists.txt"),
        ("export_espidf_main_CMakeLists.txt.j2", "examples/hello/main/CMakeLists.txt"),
        ("export_espidf_main_idf_component.yml.j2", "examples/hello/main/idf_component.yml"),
        ("export_example.c.j2", "examples/hello/main/main.c")]},
}  # fmt: skip


def package_name(model_file: str, name: str | None = None) -> str:
    """The package's identifier: ``name`` if given (checked), else the model file's stem reduced to [a-z0-9_]."""
    if name is not None:
        if not _NAME.fullmatch(name):
            raise EdgememError(f"--name {name!r} is not a package name edgemem can use in every build system: give "
                               "a lowercase letter followed by up to 62 lowercase letters, digits or '_' (e.g. kws_v2).")  # fmt: skip
        return name
    stem = re.sub(r"[^a-z0-9]+", "_", Path(model_file).stem.lower(), flags=re.ASCII).strip("_")
    stem = stem if stem[:1].isalpha() else f"model_{stem}".rstrip("_")
    return stem[:63].rstrip("_")


def export(project: str | Path, system: str, out_dir: str | Path, *, name: str | None = None, force: bool = False) -> Path:
    """Write ``system``'s package of the build in ``project`` into ``out_dir`` (whole or not at all)."""
    from .build_info import build_board, load_build_info
    from .project_dir import write_atomically

    if system not in SYSTEMS:
        raise EdgememError(f"--to {system!r} is not a build system edgemem exports to; choose one of {', '.join(SYSTEMS)}.")
    project, out_dir = Path(project), Path(out_dir)
    info = load_build_info(project)
    board = build_board(info, project)
    sources = _library_files(project)
    if project.resolve().is_relative_to(Path(out_dir).resolve()):
        raise EdgememError(f"the build '{project}' is inside the output directory '{out_dir}', which the export would "
                           "replace: it would be deleted. Choose another directory with -o.")  # fmt: skip
    pkg = package_name(info.model, name)
    context = _context(pkg, info, board, system)
    layout = _LAYOUT[system]

    def fill(tmp: Path) -> None:
        for src in sources:
            where = layout["src"] if src.suffix == ".c" else layout["include"]
            (tmp / where).mkdir(parents=True, exist_ok=True)
            shutil.copyfile(src, tmp / where / src.name)
        (tmp / layout["include"] / f"{pkg}.h").write_text(render("export_header.h.j2", **context))
        for template, path in layout["files"]:
            (tmp / path).parent.mkdir(parents=True, exist_ok=True)
            (tmp / path).write_text(render(template, **context))
        (tmp / "README.md").write_text(render("export_README.md.j2", **context))

    write_atomically(out_dir, force, fill)
    return out_dir


def _library_files(project: Path) -> list[Path]:
    lib = project / LIBRARY_DIR
    files = [lib / n for n in (*MODEL_SOURCES, *MODEL_HEADERS)]
    missing = [f.name for f in files if not f.is_file()]
    if missing:
        raise EdgememError(f"'{project}' has no model library to export ({lib} lacks {', '.join(missing)}): it was made "
                           "by an older edgemem or by a --dim build, which writes no C. Rebuild it with `edgemem build "
                           "--force` (without --dim), then export it.")  # fmt: skip
    return files


def _tensors(items: list) -> list[dict]:
    """What the example needs of each input or output: its C type and whether model.h can (de)quantize it."""
    out = []
    for t in items:
        dtype = str(t.dtype)
        out.append({"ctype": _CTYPES.get(dtype, "uint8_t"), "typed": dtype in _CTYPES,
                    "quantized": dtype in _QUANTIZED and isinstance(t.scale, (int, float))})  # fmt: skip
    return out


def _context(pkg: str, info, board, system: str) -> dict:
    """The templates' values; ``target`` (the CMake and Zephyr library) is prefixed, so that no package name clashes
    with a library the link already names (a package "m" would link to itself instead of libm)."""
    model_file = Path(info.model).name
    return {
        "name": pkg, "symbol": pkg.upper(), "target": f"edgemem_{pkg}", "system": system, "version": __version__, "package_version": __version__,
        "model_name": model_file, "board": board, "arena_bytes": info.arena_bytes,
        "inputs": _tensors(info.inputs), "outputs": _tensors(info.outputs),
        "sources": list(MODEL_SOURCES), "headers": [*MODEL_HEADERS, f"{pkg}.h"],
        "cpu_flags": cmake_unix_command(board.core.gcc_flags),
    }  # fmt: skip
