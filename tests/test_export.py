"""`edgemem export PROJECT --to SYSTEM` (edgemem/export.py): the example model's build as each build system's package.

For every system: the layout's files are there and its metadata parses (JSON, YAML, Kconfig, library.properties)
and names what it should; the package's sources and its example cross-compile with arm-none-eabi-gcc -Wall -Wextra
-Werror as that system would build them (CMake with the package's toolchain file; Zephyr and ESP-IDF through a CMake
project that defines the few functions of theirs the package calls; PlatformIO and Arduino with their default -Os).
The CMake package's example, built for the host, prints the top-1 class TFLite Micro computes for the same input,
and the user's -Os is not overridden. model.h's new dimensions and quantize/dequantize helpers are checked against
TFLite's formula. A hostile model file name and tensor names reach no metadata unescaped and run nothing.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import yaml

from edgemem import pipeline
from edgemem.codegen.escape import plain_text
from edgemem.export import export, package_name
from edgemem.reference import reference_outputs

ROOT = Path(__file__).resolve().parents[1]
MODEL = ROOT / "examples" / "kws_tiny_int8.tflite"
CPU = ["-mcpu=cortex-m7", "-mthumb", "-mfpu=fpv5-sp-d16", "-mfloat-abi=hard"]  # the stm32f746's core
WARN = ["-Wall", "-Wextra", "-Werror"]

sys.path.insert(0, str(Path(__file__).parent))  # test_escaping's samples and hostile model
pytestmark = pytest.mark.skipif(shutil.which("cmake") is None or shutil.which("arm-none-eabi-gcc") is None,
                                reason="needs cmake and arm-none-eabi-gcc (make setup installs them)")


def _run(cmd, cwd=None, timeout=300) -> subprocess.CompletedProcess:
    proc = subprocess.run([str(c) for c in cmd], cwd=cwd, capture_output=True, text=True, timeout=timeout)
    assert proc.returncode == 0, " ".join(map(str, cmd)) + "\n" + proc.stdout[-3000:] + proc.stderr[-3000:]
    return proc


@pytest.fixture(scope="module")
def project(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("build") / "kws"
    pipeline.build(MODEL, "stm32f746", out, pipeline.BuildOptions(compile=False, opt_seconds=0, schedule_seconds=0.5))
    return out


def _arm_elf(path: Path) -> bool:
    head = path.read_bytes()[:20]
    return head[:4] == b"\x7fELF" and int.from_bytes(head[18:20], "little") == 40  # EM_ARM


# ------------------------------------------------------------------------------------------------ model.h


def test_header_gives_dimensions_and_tflite_quantize_dequantize(project, tmp_path):
    """The dimensions are the model's; quantize = zero_point + round-half-away(x / scale) clamped, dequantize =
    scale * (q - zero_point), as TFLite computes them in float, for edge values, halves and seeded reals."""
    info = json.loads((project / "edgemem.json").read_text())
    (inp,), (outp,) = info["inputs"], info["outputs"]
    s = np.float32(inp["scale"])
    rng = np.random.default_rng(35)
    halves = (np.arange(-140, 140, dtype=np.float32) + np.float32(0.5)) * s  # x / scale lands near k + 0.5
    xs = np.concatenate([rng.normal(0, 3, 2000).astype(np.float32), halves, np.float32([0, -0.0, 1e30, -1e30, np.nan, np.inf,
                                                                                        -np.inf, 4.1, -4.2])])  # fmt: skip
    (tmp_path / "xs.h").write_text("static const unsigned int xs_bits[] = {" + ",".join(f"0x{b:08x}u" for b in xs.view(np.uint32)) + "};\n")
    (tmp_path / "t.c").write_text("""#include <stdio.h>
#include <string.h>
#include "model.h"
#include "xs.h"
int main(void)
{
    static const uint32_t in_shape[] = EDGEMEM_INPUT_0_SHAPE, out_shape[] = EDGEMEM_OUTPUT_0_SHAPE;
    unsigned k;
    printf("%u %u %u %u %u %u %u\\n", EDGEMEM_INPUT_0_DIM_0, EDGEMEM_INPUT_0_DIM_1, EDGEMEM_INPUT_0_DIM_2, EDGEMEM_INPUT_0_DIM_3,
           EDGEMEM_INPUT_0_ELEMENTS, EDGEMEM_OUTPUT_0_DIM_1, EDGEMEM_OUTPUT_0_ELEMENTS);
    printf("%u %u %u\\n", (unsigned)(sizeof in_shape / sizeof in_shape[0]), in_shape[1], out_shape[1]);
    for (k = 0; k < sizeof xs_bits / sizeof xs_bits[0]; k++) {
        float x;
        memcpy(&x, &xs_bits[k], sizeof x);
        printf("%d ", edgemem_quantize_input_0(x));
    }
    printf("\\n");
    for (k = 0; k < 256; k++) {
        float y = edgemem_dequantize_output_0((int8_t)(k - 128));
        uint32_t b;
        memcpy(&b, &y, sizeof b);
        printf("%u ", (unsigned)b);
    }
    printf("\\n");
    return 0;
}
""")
    _run(["gcc", "-std=c11", *WARN, "-I", project / "lib", "-I", tmp_path, tmp_path / "t.c", "-o", tmp_path / "t"])
    lines = _run([tmp_path / "t"]).stdout.splitlines()
    assert [int(v) for v in lines[0].split()] == [*inp["shape"], int(np.prod(inp["shape"])), outp["shape"][1], int(np.prod(outp["shape"]))]
    assert [int(v) for v in lines[1].split()] == [len(inp["shape"]), inp["shape"][1], outp["shape"][1]]

    with np.errstate(invalid="ignore", over="ignore"):
        r = (xs / s).astype(np.float64)  # the float division TFLite's Quantize does, then exact arithmetic
        want = np.sign(r) * np.floor(np.abs(r) + 0.5)
        want = np.clip(np.nan_to_num(want, nan=0.0), -1e6, 1e6) + inp["zero_point"]
    want = np.clip(want, -128, 127).astype(int)
    assert [int(v) for v in lines[2].split()] == want.tolist()
    q = np.arange(-128, 128)
    want_y = (np.float32(outp["scale"]) * (q - outp["zero_point"]).astype(np.float32)).astype(np.float32)
    assert np.array([int(v) for v in lines[3].split()], dtype=np.uint32).tolist() == want_y.view(np.uint32).tolist()


# ------------------------------------------------------------------------------------------------ CMake


def _export(project: Path, system: str, out: Path, **kw) -> Path:
    return export(project, system, out, **kw)


def test_cmake_package_example_prints_tflite_micros_top1_on_the_host(project, tmp_path):
    pkg = _export(project, "cmake", tmp_path / "pkg")
    build = tmp_path / "host"
    _run(["cmake", "-S", pkg, "-B", build, f"-DCMAKE_C_FLAGS={' '.join(WARN)}"])
    _run(["cmake", "--build", build])
    text = _run([build / "example" / "kws_tiny_int8_example"]).stdout
    m = re.fullmatch(r"edgemem example: top-1 class (\d+) value (-?\d+) real_x1000 (-?\d+)\n", text)
    assert m, text
    info = json.loads((project / "edgemem.json").read_text())
    spec = info["inputs"][0]
    x = np.full(spec["shape"], spec["zero_point"], dtype=np.int8)  # quantize(0.0) is the zero point
    (want,), oracle = reference_outputs(MODEL, [x])
    assert oracle == "tflm"
    out = info["outputs"][0]
    top = int(np.argmax(want.reshape(-1)))
    assert (int(m[1]), int(m[2])) == (top, int(want.reshape(-1)[top]))
    assert abs(int(m[3]) - out["scale"] * (int(want.reshape(-1)[top]) - out["zero_point"]) * 1000) <= 0.5 + 1e-6


_KINDS = {  # model, build options: int16 edges, float edges, the input outside the arena, and a float32 model
    "int16": ("tests/models/arch/kws_dscnn-int16.tflite", {}),
    "float_edges": ("tests/models/arch/kws_dscnn_floatio-int8.tflite", {}),
    "input_outside": ("examples/kws_tiny_int8.tflite", {"input_outside": True}),
    "float32": ("tests/models/arch/kws_dscnn-float32.tflite", {}),
}


@pytest.mark.parametrize("kind", list(_KINDS))
def test_cmake_example_of_other_models_prints_tflite_micros_top1(kind, tmp_path):
    """The example adapts to the model: int16 or float tensors, the input outside the arena (edgemem_run_from_inputs)."""
    path, options = _KINDS[kind]
    model = ROOT / path
    project = tmp_path / "p"
    pipeline.build(model, "stm32f746", project, pipeline.BuildOptions(compile=False, opt_seconds=0, schedule_seconds=0.5, **options))
    pkg = export(project, "cmake", tmp_path / "pkg", name="m")
    build = tmp_path / "host"
    _run(["cmake", "-S", pkg, "-B", build, f"-DCMAKE_C_FLAGS={' '.join(WARN)}"])
    _run(["cmake", "--build", build])
    m = re.fullmatch(r"edgemem example: top-1 class (\d+) value (-?\d+) real_x1000 (-?\d+)\n", _run([build / "example" / "m_example"]).stdout)
    assert m
    info = json.loads((project / "edgemem.json").read_text())
    spec, out = info["inputs"][0], info["outputs"][0]
    quantized = spec["scale"] is not None and spec["dtype"] != "float32"
    x = np.full(spec["shape"], spec["zero_point"] if quantized else 0, dtype=np.dtype(spec["dtype"]))
    (want, *_), oracle = reference_outputs(model, [x])
    flat = want.reshape(-1)
    top = int(np.argmax(flat))
    assert int(m[1]) == top
    real = float(flat[top]) if out["dtype"] == "float32" else out["scale"] * (int(flat[top]) - out["zero_point"])
    assert abs(int(m[3]) - real * 1000) <= 0.5 + 1e-3 * max(1.0, abs(real * 1000))
    if out["dtype"] != "float32":
        assert int(m[2]) == int(flat[top])


def test_cmake_package_cross_compiles_with_the_users_os_and_no_forced_o2(project, tmp_path):
    pkg = _export(project, "cmake", tmp_path / "pkg")
    layout = {p.relative_to(pkg).as_posix() for p in pkg.rglob("*") if p.is_file()}
    assert {"CMakeLists.txt", "cmake/arm-none-eabi.cmake", "example/CMakeLists.txt", "example/main.c", "include/model.h",
            "include/kws_tiny_int8.h", "src/model.c", "src/weights.c", "src/kernels.c", "README.md"} <= layout
    build = tmp_path / "arm"
    _run(["cmake", "-S", pkg, "-B", build, f"-DCMAKE_TOOLCHAIN_FILE={pkg / 'cmake' / 'arm-none-eabi.cmake'}", "-DCMAKE_BUILD_TYPE=",
          f"-DCMAKE_C_FLAGS=-Os {' '.join(WARN)}", "-DCMAKE_EXPORT_COMPILE_COMMANDS=ON"])  # fmt: skip
    _run(["cmake", "--build", build])
    commands = json.loads((build / "compile_commands.json").read_text())
    assert len(commands) == 4  # three model sources and the example
    for c in commands:
        levels = re.findall(r"(?<!\S)-O\w*", c["command"])
        assert levels == ["-Os"], c["command"]  # the user's level, and no other after it
        assert all(flag in c["command"].split() for flag in CPU)
    assert _arm_elf(build / "example" / "kws_tiny_int8_example")


@pytest.mark.parametrize("given, want", [(["-DCMAKE_C_FLAGS=-Os"], ["-Os"]), (["-DCMAKE_BUILD_TYPE=MinSizeRel"], ["-Os"]),
                                         ([], ["-O2"])])  # fmt: skip
def test_build_lib_keeps_the_users_optimisation_level(project, tmp_path, given, want):
    """lib/ of a build (not only the exported packages): -O2 only when neither a build type nor a flag chose one."""
    build = tmp_path / "b"
    _run(["cmake", "-S", project / "lib", "-B", build, "-DCMAKE_EXPORT_COMPILE_COMMANDS=ON", *given])
    for c in json.loads((build / "compile_commands.json").read_text()):
        assert re.findall(r"(?<!\S)-O\w*", c["command"]) == want, c["command"]


# ------------------------------------------------------------------------------------------------ the others

_SHIM = """cmake_minimum_required(VERSION 3.13)
set(CMAKE_SYSTEM_NAME Generic)
set(CMAKE_SYSTEM_PROCESSOR arm)
set(CMAKE_C_COMPILER arm-none-eabi-gcc)
set(CMAKE_TRY_COMPILE_TARGET_TYPE STATIC_LIBRARY)
project(shim C)
set(FLAGS %(flags)s)
add_compile_options(${FLAGS})
add_link_options(${FLAGS} --specs=nano.specs --specs=nosys.specs)
add_library(shim_interface INTERFACE)
# Zephyr's functions for a module's CMakeLists.txt (those the package calls), as Zephyr's extensions define them
macro(zephyr_library_named name)
  set_property(GLOBAL PROPERTY SHIM_LIBRARY ${name})
  add_library(${name} STATIC)
  target_link_libraries(${name} PUBLIC shim_interface)
endmacro()
function(zephyr_library_sources)
  get_property(lib GLOBAL PROPERTY SHIM_LIBRARY)
  target_sources(${lib} PRIVATE ${ARGN})
endfunction()
function(zephyr_include_directories)
  foreach(dir ${ARGN})
    get_filename_component(abs ${dir} ABSOLUTE BASE_DIR ${CMAKE_CURRENT_SOURCE_DIR})
    target_include_directories(shim_interface INTERFACE ${abs})
  endforeach()
endfunction()
# ESP-IDF's component registration (SRCS and INCLUDE_DIRS), as a static library
function(idf_component_register)
  cmake_parse_arguments(ARG "" "" "SRCS;INCLUDE_DIRS;REQUIRES" ${ARGN})
  set_property(GLOBAL PROPERTY SHIM_LIBRARY component)
  add_library(component STATIC ${ARG_SRCS})
  foreach(dir ${ARG_INCLUDE_DIRS})
    get_filename_component(abs ${dir} ABSOLUTE BASE_DIR ${CMAKE_CURRENT_SOURCE_DIR})
    target_include_directories(shim_interface INTERFACE ${abs})
  endforeach()
  target_link_libraries(component PUBLIC shim_interface m)
endfunction()
add_subdirectory(%(package)s package)
get_property(lib GLOBAL PROPERTY SHIM_LIBRARY)
add_executable(app %(app)s)
target_link_libraries(app PRIVATE ${lib})
"""


def _shim_build(pkg: Path, app: list[Path], tmp_path: Path, defines=()) -> Path:
    """Build the package's CMakeLists.txt and the example through the shim; returns the app's ELF."""
    shim = tmp_path / "shim"
    shim.mkdir()
    flags = " ".join(["-Os", *WARN, *CPU])
    (shim / "CMakeLists.txt").write_text(_SHIM % {"flags": flags, "package": str(pkg), "app": " ".join(map(str, app))})
    _run(["cmake", "-S", shim, "-B", shim / "b", *[f"-D{d}" for d in defines]])
    _run(["cmake", "--build", shim / "b"])
    return shim / "b" / "app"


def _kconfig(pkg: Path):
    """The package's Kconfig read by kconfiglib (the Kconfig implementation Zephyr's build runs)."""
    kconfiglib = pytest.importorskip("kconfiglib", reason="kconfiglib is in the test extras: pip install -e '.[test]'")
    kconf = kconfiglib.Kconfig(str(pkg / "Kconfig"), warn_to_stderr=False)
    assert kconf.warnings == [], kconf.warnings
    return kconf


def test_zephyr_module(project, tmp_path):
    pkg = _export(project, "zephyr", tmp_path / "pkg")
    module = yaml.safe_load((pkg / "zephyr" / "module.yml").read_text())
    assert module["name"] == "kws_tiny_int8"
    assert (pkg / module["build"]["cmake"] / "CMakeLists.txt").is_file() and (pkg / module["build"]["kconfig"]).is_file()
    kconf = _kconfig(pkg)
    symbol = "EDGEMEM_KWS_TINY_INT8"
    assert kconf.syms[symbol].nodes[0].prompt[0] == "edgemem model kws_tiny_int8.tflite"
    kconf.load_config(str(pkg / "samples" / "hello" / "prj.conf"))
    assert kconf.syms[symbol].str_value == "y"  # the sample enables the module
    sample = (pkg / "samples" / "hello" / "CMakeLists.txt").read_text()
    assert "find_package(Zephyr" in sample
    (src,) = re.findall(r"target_sources\(app PRIVATE (\S+)\)", sample)
    elf = _shim_build(pkg, [pkg / "samples" / "hello" / src], tmp_path, [f"CONFIG_{symbol}=y"])
    assert _arm_elf(elf)


def test_esp_idf_component(project, tmp_path):
    pkg = _export(project, "esp-idf", tmp_path / "pkg")
    manifest = yaml.safe_load((pkg / "idf_component.yml").read_text())
    assert manifest["version"] == "0.1.0" and "kws_tiny_int8.tflite" in manifest["description"]
    main = pkg / "examples" / "hello" / "main"
    dep = yaml.safe_load((main / "idf_component.yml").read_text())["dependencies"]["kws_tiny_int8"]
    assert (main / dep["path"]).resolve() == pkg.resolve()
    assert "include($ENV{IDF_PATH}/tools/cmake/project.cmake)" in (pkg / "examples" / "hello" / "CMakeLists.txt").read_text()
    assert "void app_main(void)" in (main / "main.c").read_text()
    # IDF's startup calls app_main: here a main of the test's calls it, so that the example links
    (tmp_path / "start.c").write_text("void app_main(void);\nint main(void)\n{\n    app_main();\n    return 0;\n}\n")
    assert _arm_elf(_shim_build(pkg, [main / "main.c", tmp_path / "start.c"], tmp_path))


def _idf_pack(pkg: Path, name: str, tmp_path: Path) -> dict:
    """The ESP-IDF component manager's packer (`compote component pack`, offline: it validates idf_component.yml and
    applies its `files` rules); returns the packed archive's idf_component.yml."""
    import tarfile

    pytest.importorskip("idf_component_manager", reason="idf-component-manager is in the test extras: pip install -e '.[test]'")
    compote = Path(sys.executable).with_name("compote")
    tmp_path.mkdir(parents=True, exist_ok=True)
    env = {**os.environ, "IDF_TOOLS_PATH": str(tmp_path / "idf-tools")}
    proc = subprocess.run([str(compote), "-W", "component", "pack", "--name", name, "--dest-dir", str(tmp_path / "dist")],
                          cwd=pkg, env=env, capture_output=True, text=True, timeout=300)  # fmt: skip
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    (archive,) = (tmp_path / "dist").glob("*.tgz")
    with tarfile.open(archive) as tar:
        names = {n.removeprefix("./") for n in tar.getnames()}
        assert {"idf_component.yml", "CMakeLists.txt", "src/model.c", "include/model.h", "examples/hello/main/main.c"} <= names
        assert ".edgemem-output" not in names
        return yaml.safe_load(tar.extractfile("./idf_component.yml").read())


def test_esp_idf_component_manager_packs_the_component(project, tmp_path):
    """The component manager accepts the manifest; the control: it refuses a version that is not one."""
    pkg = export(project, "esp-idf", tmp_path / "pkg")
    assert _idf_pack(pkg, "kws_tiny_int8", tmp_path / "ok")["version"] == "0.1.0"
    manifest = pkg / "idf_component.yml"
    manifest.write_text(re.sub(r"^version: .*$", 'version: "one"', manifest.read_text(), flags=re.M))
    with pytest.raises(AssertionError, match="Invalid version"):
        _idf_pack(pkg, "kws_tiny_int8", tmp_path / "bad")


def _gcc_objects(sources: list[Path], includes: list[Path], out: Path, extra=()) -> None:
    out.mkdir(exist_ok=True)
    for src in sources:
        cc = "arm-none-eabi-g++" if src.suffix == ".ino" else "arm-none-eabi-gcc"
        # Arduino's builder compiles a sketch as C++ with Arduino.h included first
        lang = ["-x", "c++", "-std=gnu++17", "-include", "Arduino.h"] if src.suffix == ".ino" else ["-std=gnu11"]
        _run([cc, *lang, "-Os", *WARN, *CPU, *[f"-I{i}" for i in includes], *extra, "-c", src, "-o", out / (src.name + ".o")])


def test_platformio_library(project, tmp_path):
    pkg = _export(project, "platformio", tmp_path / "pkg")
    manifest = json.loads((pkg / "library.json").read_text())
    assert manifest["name"] == "kws_tiny_int8" and manifest["version"] == "0.1.0"
    src, inc = pkg / manifest["build"]["srcDir"], pkg / manifest["build"]["includeDir"]
    assert (inc / manifest["headers"]).is_file() and "flags" not in manifest["build"]  # no -O of edgemem's
    (example,) = manifest["examples"]
    for f in example["files"]:
        assert (pkg / example["base"] / f).is_file()
    sources = sorted(src.glob("*.c")) + [pkg / example["base"] / "src" / "main.c"]
    assert len(sources) == 4
    _gcc_objects(sources, [inc], tmp_path / "o")  # PlatformIO's default build: -Os, the library's includeDir
    _run(["arm-none-eabi-gcc", *CPU, "--specs=nano.specs", "--specs=nosys.specs", *sorted((tmp_path / "o").glob("*.o")),
          "-lm", "-o", tmp_path / "app.elf"])  # fmt: skip
    assert _arm_elf(tmp_path / "app.elf")


def _pio_pack(pkg: Path, tmp_path: Path) -> dict:
    """PlatformIO's own packer (`pio pkg pack`, offline: it validates library.json against PlatformIO's manifest schema
    and applies its export rules); returns the packed tarball's library.json."""
    import tarfile

    pytest.importorskip("platformio", reason="PlatformIO is in the test extras: pip install -e '.[test]'")
    env = {**os.environ, "PLATFORMIO_CORE_DIR": str(tmp_path / "pio-core"), "PLATFORMIO_SETTING_ENABLE_TELEMETRY": "No"}
    tmp_path.mkdir(parents=True, exist_ok=True)
    tarball = tmp_path / "pkg.tar.gz"
    proc = subprocess.run([sys.executable, "-m", "platformio", "pkg", "pack", str(pkg), "-o", str(tarball)], env=env,
                          capture_output=True, text=True, timeout=300)  # fmt: skip
    assert proc.returncode == 0 and tarball.is_file(), proc.stdout[-3000:] + proc.stderr[-3000:]
    with tarfile.open(tarball) as tar:
        names = set(tar.getnames())
        assert {"library.json", "src/model.c", "include/model.h", "examples/hello/src/main.c"} <= names
        assert ".edgemem-output" not in names
        return json.loads(tar.extractfile("library.json").read())


def test_platformio_pack_validates_the_manifest(project, tmp_path):
    """PlatformIO's packer accepts the package (its schema: name, semantic version, fields) and the control: it
    refuses a manifest whose version is not semantic, so the check can fail."""
    pkg = export(project, "platformio", tmp_path / "pkg")
    assert _pio_pack(pkg, tmp_path)["name"] == "kws_tiny_int8"
    manifest = json.loads((pkg / "library.json").read_text())
    (pkg / "library.json").write_text(json.dumps({**manifest, "version": "one"}))
    with pytest.raises(AssertionError, match="semantic"):
        _pio_pack(pkg, tmp_path / "bad")


_ARDUINO_H = """#include <stdint.h>
/* the part of Arduino's core the example uses */
class HardwareSerialStub {
public:
    void begin(unsigned long baud);
    void print(const char *s);
    void print(long v);
    void print(unsigned long v);
    void println(const char *s);
    void println(long v);
};
extern HardwareSerialStub Serial;
"""


def test_arduino_library(project, tmp_path):
    pkg = _export(project, "arduino", tmp_path / "pkg")
    props = dict(line.split("=", 1) for line in (pkg / "library.properties").read_text().splitlines())
    assert props["name"] == "kws_tiny_int8" and props["version"] == "0.1.0" and props["architectures"] == "*"
    assert {"author", "maintainer", "sentence", "paragraph", "category", "url"} <= set(props)
    assert (pkg / "src" / props["includes"]).is_file()
    sketch = pkg / "examples" / "Hello" / "Hello.ino"  # an example's folder and sketch share their name
    assert "void setup()" in sketch.read_text() and "void loop()" in sketch.read_text()
    (tmp_path / "core").mkdir()
    (tmp_path / "core" / "Arduino.h").write_text(_ARDUINO_H)
    _gcc_objects(sorted((pkg / "src").glob("*.c")) + [sketch], [pkg / "src", tmp_path / "core"], tmp_path / "o")
    assert len(list((tmp_path / "o").glob("*.o"))) == 4


# ------------------------------------------------------------------------------------------------ names, directory


def test_metadata_escapers_hold_every_byte_value_exactly():
    """yaml_string and json_value parse back to exactly the text, on one line; plain_text keeps only characters inert
    in Kconfig strings and library.properties values, and percent-decodes back to the text's UTF-8."""
    from urllib.parse import unquote_to_bytes

    from edgemem.codegen.escape import json_value, utf8, yaml_string
    from test_escaping import SAMPLES

    for text in SAMPLES:
        y = yaml_string(text)
        assert "\n" not in y and yaml.safe_load(f"k: {y}  # c")["k"] == text
        assert json.loads(json_value(text)) == text and json_value(text).isascii()
        p = plain_text(text)
        assert re.fullmatch(r"[A-Za-z0-9 ._,:;+=@/()!?'*%-]*", p) and not p.startswith(" ") and not p.endswith(" ")
        assert unquote_to_bytes(p) == utf8(text)


def test_package_name_is_an_identifier_of_every_system():
    assert package_name("/x/kws_tiny_int8.tflite") == "kws_tiny_int8"
    assert package_name("/x/9 Ünï-côdé $(x).tflite") == "model_9_n_c_d_x"
    assert package_name("/x/....tflite") == "model"


def test_refuses_an_existing_directory_and_a_bad_name(project, tmp_path):
    from edgemem.errors import EdgememError

    mine = tmp_path / "mine"
    mine.mkdir()
    (mine / "notes.txt").write_text("keep")
    for kw in ({}, {"force": True}):
        with pytest.raises(EdgememError, match="already exists|only a directory edgemem made"):
            export(project, "zephyr", mine, **kw)
    assert [p.name for p in mine.iterdir()] == ["notes.txt"]
    export(project, "zephyr", tmp_path / "pkg")
    export(project, "arduino", tmp_path / "pkg", force=True)  # edgemem made it: replaced
    assert (tmp_path / "pkg" / "library.properties").is_file() and not (tmp_path / "pkg" / "Kconfig").exists()
    with pytest.raises(EdgememError, match="--name"):
        export(project, "cmake", tmp_path / "n", name="Bad Name")
    with pytest.raises(EdgememError, match="--to"):
        export(project, "make", tmp_path / "n")
    proc = subprocess.run([sys.executable, "-m", "edgemem.cli", "export", str(project), "--to", "vxworks", "-o",
                           str(tmp_path / "v")], capture_output=True, text=True, cwd=ROOT)  # fmt: skip
    assert proc.returncode == 2 and "Traceback" not in proc.stderr and not (tmp_path / "v").exists()
    proc = subprocess.run([sys.executable, "-m", "edgemem.cli", "export", str(project), "--to", "arduino"],
                          capture_output=True, text=True, cwd=ROOT)  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    assert (project.parent / f"{project.name}-arduino" / "library.properties").is_file()  # the default: PROJECT-SYSTEM


def test_hostile_names_are_escaped_in_every_package_and_run_nothing(tmp_path):
    from test_escaping import MODEL_FILE, _hostile_model, _no_pwned

    model = tmp_path / MODEL_FILE
    model.write_bytes(_hostile_model())
    project = tmp_path / "p"
    pipeline.build(model, "stm32f746", project, pipeline.BuildOptions(compile=False, opt_seconds=0, schedule_seconds=0.5))
    pkgs = {s: export(project, s, tmp_path / s) for s in ("cmake", "zephyr", "platformio", "arduino", "esp-idf")}
    name = package_name(MODEL_FILE)
    assert re.fullmatch(r"[a-z][a-z0-9_]*", name)
    assert json.loads((pkgs["platformio"] / "library.json").read_text())["description"].startswith(f"The edgemem model {MODEL_FILE} for")
    assert _pio_pack(pkgs["platformio"], tmp_path / "pio")["description"].startswith(f"The edgemem model {MODEL_FILE} for")
    assert yaml.safe_load((pkgs["esp-idf"] / "idf_component.yml").read_text())["description"].startswith(f"The edgemem model {MODEL_FILE} for")
    assert _idf_pack(pkgs["esp-idf"], name, tmp_path / "idf")["description"].startswith(f"The edgemem model {MODEL_FILE} for")
    assert yaml.safe_load((pkgs["zephyr"] / "zephyr" / "module.yml").read_text())["name"] == name
    props = dict(line.split("=", 1) for line in (pkgs["arduino"] / "library.properties").read_text().splitlines())
    assert props["sentence"] == f"The edgemem model {plain_text(MODEL_FILE)} for board stm32f746."
    node = _kconfig(pkgs["zephyr"]).syms[f"EDGEMEM_{name.upper()}"].nodes[0]
    assert node.prompt[0] == f"edgemem model {plain_text(MODEL_FILE)}"  # one string, nothing expanded or cut
    assert node.help.startswith(f"The edgemem model {plain_text(MODEL_FILE)}, generated for board stm32f746:\n")
    build = tmp_path / "cmake-build"
    _run(["cmake", "-S", pkgs["cmake"], "-B", build, f"-DCMAKE_TOOLCHAIN_FILE={pkgs['cmake'] / 'cmake' / 'arm-none-eabi.cmake'}",
          f"-DCMAKE_C_FLAGS={' '.join(WARN)}"], cwd=tmp_path)  # fmt: skip
    _run(["cmake", "--build", build], cwd=tmp_path)
    assert _arm_elf(build / "example" / f"{name}_example")
    _no_pwned(tmp_path, Path.cwd())
