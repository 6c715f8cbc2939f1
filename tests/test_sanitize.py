"""Every model that builds, compiled for the host with -Wall -Wextra -Werror and AddressSanitizer +
UndefinedBehaviorSanitizer (gcc, and clang when installed), run on seeded inputs and compared with TFLite Micro.

"Every model that builds" is found at run time: each .tflite in ../shared/models and examples/ goes through
`pipeline.build(compile=False)` with a budget no model exceeds (the host has the memory; the board's budget is
tested elsewhere), and the ones edgemem refuses (UnsupportedModelError) are skipped with the reason. A run
passes when the program exits 0 with nothing on stderr (no sanitizer report) and its outputs are TFLM's, bit for
bit (float outputs included: the host runs the same float32 operations in the same order).
"""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path

import numpy as np
import pytest

from edgemem import build_info, pipeline
from edgemem.errors import DeviceError, DoesNotFitError, UnsupportedModelError
from edgemem.target.host import HOST_COMPILERS, build_host, run_host

ROOT = Path(__file__).resolve().parents[1]
MODELS = ROOT.parent / "shared" / "models"
MODEL_FILES = sorted(MODELS.glob("*.tflite")) + sorted(MODELS.glob("published/*.tflite")) + sorted((ROOT / "examples").glob("*.tflite"))
COMPILERS = [cc for cc in HOST_COMPILERS if shutil.which(cc)]
HUGE = 1 << 30  # RAM and flash budget for the host build
SEEDS = (0, 1)

reference = pytest.importorskip("edgemem.reference")
pytest.importorskip("tflite_micro")


@pytest.fixture(scope="module")
def projects(tmp_path_factory):
    """model path -> generated project (or the reason it does not build), each built once."""
    cache: dict[Path, Path | str] = {}

    def get(model: Path) -> Path:
        if model not in cache:
            out = tmp_path_factory.mktemp("proj") / model.stem
            try:
                pipeline.build(model, "stm32f746", out, pipeline.BuildOptions(compile=False, ram=HUGE, flash=HUGE))
                cache[model] = out
            except (UnsupportedModelError, DoesNotFitError) as e:
                cache[model] = f"{type(e).__name__}: {str(e)[:300]}"
        if isinstance(cache[model], str):
            pytest.skip(f"{model.name} does not build: {cache[model]}")
        return cache[model]

    return get


def assert_bit_exact(raw: bytes, ref: np.ndarray, spec: dict) -> None:
    out = np.frombuffer(raw, dtype=spec["dtype"]).reshape(spec["shape"])
    np.testing.assert_array_equal(out, np.asarray(ref).reshape(out.shape), err_msg=f"output '{spec['name']}' ({spec['producer']})")


@pytest.mark.skipif(not COMPILERS, reason="no host C compiler (apt-get install gcc clang)")
@pytest.mark.parametrize("cc", COMPILERS)
@pytest.mark.parametrize("model", MODEL_FILES, ids=[m.stem for m in MODEL_FILES])
def test_host_build_under_asan_ubsan_matches_tflm(model, cc, projects, tmp_path):
    project = projects(model)
    info = json.loads((project / build_info.BUILD_INFO).read_text())
    exe = build_host(project, tmp_path / "host", cc=cc, sanitize=True)
    for seed in SEEDS:
        inputs = reference.seeded_inputs(model, seed)
        run = run_host(exe, [x.tobytes() for x in inputs], [o["bytes"] for o in info["outputs"]])
        assert run.stderr == "", run.stderr  # not even a recovered sanitizer warning
        for raw, ref, spec in zip(run.outputs, reference.tflm_outputs(model, inputs), info["outputs"]):
            assert_bit_exact(raw, ref, spec)


def test_at_least_the_acceptance_models_were_sanitized(projects):
    """Guard against a run where everything is skipped: the models the device tests run must build here too."""
    names = ["mlperf_kws_dscnn_int8", "mlperf_vww_96_int8", "mlperf_ic_resnet8_int8", "tflm_person_detect_int8"]
    present = [MODELS / f"{n}.tflite" for n in names if (MODELS / f"{n}.tflite").is_file()]
    for model in present + [ROOT / "examples" / "kws_tiny_int8.tflite"]:
        assert projects(model).is_dir()


@pytest.mark.skipif(not COMPILERS, reason="no host C compiler")
def test_asan_sees_an_access_past_a_pool(projects, tmp_path):
    """The yardstick can fail: output 0 moved to the last byte of its pool, so the host main's read of the output
    runs past the pool. ASan must report it (the pools are plain globals in the host build, with redzones)."""
    project = projects(ROOT / "examples" / "kws_tiny_int8.tflite")
    broken = tmp_path / "broken"
    shutil.copytree(project, broken)
    info = json.loads((project / build_info.BUILD_INFO).read_text())
    model_c = (broken / "model.c").read_text()
    head, sep, tail = model_c.partition("void *edgemem_output(uint32_t i)")
    pool, size = next(iter(info["arena_pools"].items()))
    tail = re.sub(r"case 0u: return &em_pool_\w+\[\d+u\];", f"case 0u: return &em_pool_{pool}[{size - 1}u];", tail, count=1)
    (broken / "model.c").write_text(head + sep + tail)
    exe = build_host(broken, tmp_path / "host", cc=COMPILERS[0], sanitize=True)
    x = reference.seeded_inputs(ROOT / "examples" / "kws_tiny_int8.tflite", 0)
    with pytest.raises(DeviceError, match="AddressSanitizer"):
        run_host(exe, [a.tobytes() for a in x], [o["bytes"] for o in info["outputs"]])


@pytest.mark.skipif(not COMPILERS, reason="no host C compiler")
def test_ubsan_sees_signed_overflow(tmp_path):
    """The other yardstick: a kernel with a signed overflow is reported by UBSan through run_host."""
    project = tmp_path / "fake"
    project.mkdir()
    (project / "model.h").write_text(
        "#include <stdint.h>\n#define EDGEMEM_NUM_INPUTS 1\n#define EDGEMEM_NUM_OUTPUTS 1\n#define EDGEMEM_NUM_POOLS 1\n"
        "extern uint8_t *const edgemem_pool_base[1];\nextern const uint32_t edgemem_pool_size[1];\n"
        "void *edgemem_input(uint32_t i);\nuint32_t edgemem_input_bytes(uint32_t i);\nvoid *edgemem_output(uint32_t i);\n"
        "uint32_t edgemem_output_bytes(uint32_t i);\nint32_t edgemem_run(void);\nvoid edgemem_reset(void);\n"
    )  # fmt: skip
    (project / "model.c").write_text(
        '#include "model.h"\n#include "kernels.h"\n'
        'static uint8_t em_pool_arena[8] __attribute__((section(".edgemem_arena.arena"), aligned(16)));\n'
        "uint8_t *const edgemem_pool_base[1] = {em_pool_arena};\nconst uint32_t edgemem_pool_size[1] = {8u};\n"
        "void *edgemem_input(uint32_t i) { (void)i; return &em_pool_arena[0]; }\n"
        "uint32_t edgemem_input_bytes(uint32_t i) { (void)i; return 4u; }\n"
        "void *edgemem_output(uint32_t i) { (void)i; return &em_pool_arena[4]; }\n"
        "uint32_t edgemem_output_bytes(uint32_t i) { (void)i; return 4u; }\n"
        "void edgemem_reset(void) {}\n"
        "int32_t edgemem_run(void) { return em_k_scale((const int32_t *)(void *)&em_pool_arena[0], (int32_t *)(void *)&em_pool_arena[4]); }\n"
    )  # fmt: skip
    (project / "kernels.h").write_text("#include <stdint.h>\nint32_t em_k_scale(const int32_t *x, int32_t *y);\n")
    (project / "kernels.c").write_text('#include "kernels.h"\nint32_t em_k_scale(const int32_t *x, int32_t *y) { *y = *x * 65536; return 0; }\n')
    (project / "weights.h").write_text("")
    (project / "weights.c").write_text("typedef int em_empty_unit;\n")
    exe = build_host(project, tmp_path / "host", cc=COMPILERS[0], sanitize=True)
    ok = run_host(exe, [(1000).to_bytes(4, "little")], [4])  # 65,536,000 fits in int32
    assert int.from_bytes(ok.outputs[0], "little") == 65_536_000
    with pytest.raises(DeviceError, match="runtime error"):
        run_host(exe, [(1 << 20).to_bytes(4, "little")], [4])  # 2^36 does not
