"""The model input outside the arena (`edgemem build --input outside`, issue 20).

Oracles: TFLite Micro's outputs for the same input (bit-exact), the arena high-water mark QEMU measures by
painting (= the plan, which no longer holds the input), and the input-in-arena build of the same model (its
plan minus the input's bytes where the input is live at the peak). The C API is exercised on the host under
ASan/UBSan by a main written here: edgemem_run() refuses, a NULL or misaligned input is refused, the caller's
buffer is never written, and edgemem_run_from() on it gives TFLM's outputs; the input-in-arena build's
edgemem_run_from() copies and gives the same.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from edgemem import pipeline
from edgemem.target.host import SANITIZE_FLAGS, SANITIZER_ENV, WARNING_FLAGS, write_host_sources
from edgemem.device_run import run as run_on_device

sys.path.insert(0, str(Path(__file__).resolve().parent))
from small_models import _conv, mm  # noqa: E402

reference = pytest.importorskip("edgemem.reference")
pytest.importorskip("tflite_micro")
needs_arm = pytest.mark.skipif(not shutil.which("arm-none-eabi-gcc") or not shutil.which("qemu-system-arm"),
                               reason="needs arm-none-eabi-gcc and qemu-system-arm")  # fmt: skip

_Q = {"scale": [0.05], "zero_point": [-3]}


def skip_from_input_model(seed: int = 0) -> bytes:
    """x (16x16x8) -> 1x1 conv -> 3x3 conv -> ADD(x, .): the input is read again at the end, so it is live at
    the peak and the arena holds it throughout unless it is outside."""
    rng = np.random.default_rng(seed)
    mb = mm.ModelBuilder(description="edgemem input-outside test")
    x = mb.tensor("x", (1, 16, 16, 8), np.int8, _Q)
    y1 = _conv(mb, rng, "c1", x, 8, 16, 1, (1, 16, 16, 16))
    y2 = _conv(mb, rng, "c2", y1, 16, 8, 3, (1, 16, 16, 8))
    out = mb.tensor("out", (1, 16, 16, 8), np.int8, _Q)
    mb.op(mm.OP.ADD, [x, y2], [out], *mm.add_options(mm.ACT.NONE), version=2)
    return mb.serialize([x], [out])


@pytest.fixture(scope="module")
def model(tmp_path_factory) -> Path:
    path = tmp_path_factory.mktemp("model") / "skip_from_input.tflite"
    path.write_bytes(skip_from_input_model())
    return path


@pytest.fixture(scope="module")
def builds(model, tmp_path_factory):
    """where -> (project dir, build info): the same model with its input in the arena and outside it."""
    out = {}
    for where in ("arena", "outside"):
        project = tmp_path_factory.mktemp(where) / "p"
        # not inplace_residual: it would write the ADD over x, so x's bytes would be shared in both plans
        result = pipeline.build(model, "stm32f746", project, pipeline.BuildOptions(
            input_outside=where == "outside", passes=("fold_pad", "inplace_depthwise", "inplace_elementwise"),
            compile=bool(shutil.which("arm-none-eabi-gcc"))))
        out[where] = (project, result.info)
    return out


def test_plan_leaves_the_input_out_and_reports_the_accounting(builds):
    (_, inside), (_, outside) = builds["arena"], builds["outside"]
    x_bytes = 16 * 16 * 8
    assert "input_outside" not in inside
    assert outside["input_outside"]["bytes"] == x_bytes
    assert "excludes the model input" in outside["input_outside"]["accounting"]
    # the input is live at every step of the input-in-arena plan: outside, the arena drops by exactly its bytes
    assert inside["lower_bound_bytes"] - outside["lower_bound_bytes"] == x_bytes
    assert outside["arena_bytes"] == outside["lower_bound_bytes"] <= inside["arena_bytes"] - x_bytes
    # the report's memory timeline: the input is an arena tensor in one build, absent from the other
    assert [t["role"] for t in inside["memory"]["tensors"]].count("input") == 1
    assert [t["role"] for t in outside["memory"]["tensors"]].count("input") == 0


def test_generated_api(builds):
    project, _ = builds["outside"]
    header, source = (project / "model.h").read_text(), (project / "model.c").read_text()
    assert "#define EDGEMEM_INPUT_OUTSIDE 1" in header
    assert "int32_t edgemem_run_from(const void *input);" in header
    assert "em_inputs[0u]" in source  # the first kernel reads the caller's pointer, not an arena offset
    inside = (builds["arena"][0] / "model.h").read_text()
    assert "EDGEMEM_INPUT_OUTSIDE" not in inside.split("#ifndef EDGEMEM_MODEL_H")[1]
    assert (project / "lib" / "model.h").read_text() == header  # the library carries the same API


@needs_arm
def test_qemu_bit_exact_and_high_water_equals_plan(builds, model):
    project, info = builds["outside"]
    for seed in (0, 1):
        res = run_on_device(project, seed=seed)
        assert res["bit_exact"] is True, res
        assert res["arena_high_water_bytes"] == info["arena_bytes"], res
    # the harness keeps the input in its own .bss buffer: static RAM grows by it, the arena does not
    assert info["static_ram_bytes"] >= builds["arena"][1]["static_ram_bytes"] + 16 * 16 * 8


_API_MAIN = r"""
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include "model.h"

static uint8_t frame[EDGEMEM_INPUT_0_BYTES + EDGEMEM_ARENA_ALIGN] __attribute__((aligned(EDGEMEM_ARENA_ALIGN)));
static uint8_t copy[EDGEMEM_INPUT_0_BYTES];

int main(int argc, char **argv)
{
    FILE *f;
    int32_t st;
    uint32_t p;
    (void)argc;
    f = fopen(argv[1], "rb");
    if (f == NULL || fread(frame, 1, EDGEMEM_INPUT_0_BYTES, f) != EDGEMEM_INPUT_0_BYTES) return 10;
    fclose(f);
    memcpy(copy, frame, sizeof copy);
#if defined(EDGEMEM_INPUT_OUTSIDE)
    printf("run %d\n", (int)edgemem_run());
    printf("input_ptr %d\n", edgemem_input(0) == NULL);
    printf("misaligned %d\n", (int)edgemem_run_from(frame + 1));
#endif
    printf("null %d\n", (int)edgemem_run_from(NULL));
    for (p = 0; p < 2u; p++) {
        uint32_t k;
        memset(edgemem_pool_base[0], p ? 0x5A : 0xA5, edgemem_pool_size[0]);
        st = edgemem_run_from(frame);
        printf("run_from %d untouched %d\n", (int)st, memcmp(copy, frame, sizeof copy) == 0);
        for (k = 0; k < edgemem_output_bytes(0); k++) printf("%02x", ((const uint8_t *)edgemem_output(0))[k]);
        printf("\n");
    }
    return 0;
}
"""


@pytest.mark.skipif(not shutil.which("gcc"), reason="needs gcc")
@pytest.mark.parametrize("where", ["outside", "arena"])
def test_c_api_on_the_host_under_sanitizers(builds, model, where, tmp_path):
    project, info = builds[where]
    sources = [s for s in write_host_sources(project, tmp_path) if s.name != "host_main.c"]
    (tmp_path / "api_main.c").write_text(_API_MAIN)
    exe = tmp_path / "api"
    cmd = ["gcc", *WARNING_FLAGS, "-O1", "-g", *SANITIZE_FLAGS, *map(str, sources), str(tmp_path / "api_main.c"),
           "-I", str(tmp_path), "-lm", "-o", str(exe)]  # fmt: skip
    subprocess.run(cmd, check=True, capture_output=True, text=True)
    x = reference.seeded_inputs(model, 3)[0]
    (tmp_path / "x.bin").write_bytes(x.tobytes())
    proc = subprocess.run([str(exe), str(tmp_path / "x.bin")], capture_output=True, text=True,
                          env={**os.environ, **SANITIZER_ENV}, timeout=120)  # fmt: skip
    assert proc.returncode == 0 and proc.stderr == "", proc.stderr
    lines = proc.stdout.split("\n")
    if where == "outside":
        assert lines[:3] == ["run -104", "input_ptr 1", "misaligned -105"]
        lines = lines[3:]
    assert lines[0] == "null -105"
    ref = np.asarray(reference.tflm_outputs(model, [x])[0]).astype(np.int8).tobytes().hex()
    # twice, over differently painted arenas: same outputs, TFLM's, and (outside) the caller's frame untouched
    assert lines[1:5] == ["run_from 0 untouched 1", ref, "run_from 0 untouched 1", ref]


def test_bad_value_of_the_option(model, tmp_path):
    proc = subprocess.run([sys.executable, "-m", "edgemem.cli", "build", str(model), "-o", str(tmp_path / "o"),
                           "--input", "flash"], capture_output=True, text=True, cwd=Path(__file__).resolve().parents[1])  # fmt: skip
    assert proc.returncode == 2, proc.stderr
    assert "error:" in proc.stderr and "'outside'" in proc.stderr and "Traceback" not in proc.stderr
    assert not (tmp_path / "o").exists()


@needs_arm
def test_profile_build_measures_the_plan_at_every_step(model, tmp_path):
    """A profiling build (inputs embedded in flash, per-step high-water marks over the UART): with the input
    outside, every step's measured arena high-water mark is the plan's, and the outputs are TFLM's."""
    from edgemem import profiling

    out = tmp_path / "prof"
    info = pipeline.build(model, "stm32f746", out, pipeline.BuildOptions(input_outside=True, opt_seconds=0,
                                                                         profile=True)).info  # fmt: skip
    res = profiling.profile(out)
    assert res["arena_matches_plan"] is True
    assert res["bit_exact"] is True, res
    assert max(s["high_water_bytes"][0] for s in info["profile"]["steps"]) == info["arena_bytes"]


@pytest.mark.skipif(not shutil.which("gcc"), reason="needs gcc")
def test_host_runner_with_the_input_outside(builds, model, tmp_path):
    """The host runner (templates/host_main.c.j2, what tests/test_sanitize.py runs) in its --input outside form."""
    from edgemem.target.host import build_host, run_host

    project, info = builds["outside"]
    exe = build_host(project, tmp_path / "host", cc="gcc", sanitize=True)
    x = reference.seeded_inputs(model, 5)
    run = run_host(exe, [a.tobytes() for a in x], [o["bytes"] for o in info["outputs"]])
    assert run.stderr == ""
    ref = np.asarray(reference.tflm_outputs(model, x)[0]).astype(np.int8).tobytes()
    assert run.outputs[0] == ref
