"""`edgemem validate --data`: the user's own samples on the device (QEMU), accuracy, confusion matrix and top-1
agreement with TFLite Micro and a float model (edgemem/validation.py validate_data, edgemem/dataset.py).

Oracles: TFLite Micro run here on the same samples (its top-1 as labels gives accuracy 1.0; labels changed on
purpose move exactly those samples off the diagonal), numpy's bincount for the matrix, and floats made from known
int8 values (x = (q - zero_point) * scale), which quantizing must turn back into exactly q.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from typer.testing import CliRunner

import edgemem
from edgemem import pipeline
from edgemem.build_info import load_build_info
from edgemem.cli import app
from edgemem.reference import seeded_inputs, tflm_outputs

ROOT = Path(__file__).resolve().parents[1]
EXAMPLE = ROOT / "examples" / "kws_tiny_int8.tflite"
FLOAT = ROOT / "examples" / "kws_tiny_float.tflite"
N = 8


@pytest.fixture(scope="module")
def project(tmp_path_factory):
    out = tmp_path_factory.mktemp("vdata") / "kws"
    pipeline.build(EXAMPLE, "mps2-an385", out, pipeline.BuildOptions(opt_seconds=0))
    return out


@pytest.fixture(scope="module")
def samples():
    xs = [seeded_inputs(str(EXAMPLE), seed)[0] for seed in range(N)]
    top = np.array([int(np.argmax(tflm_outputs(str(EXAMPLE), [x])[0])) for x in xs])
    return np.stack([x[0] for x in xs]), top  # samples without the batch dimension, as users keep them


def _validate(project, *args) -> tuple[int, dict]:
    res = CliRunner().invoke(app, ["validate", str(project), *map(str, args), "--json"])
    return res.exit_code, json.loads(res.stdout)


def test_labels_that_are_tflms_own_predictions_give_accuracy_one(project, samples, tmp_path):
    x, top = samples
    np.savez(tmp_path / "d.npz", x=x, y=top)
    code, rep = _validate(project, "--data", tmp_path / "d.npz")
    assert code == 0 and rep["count"] == N and rep["all_match"] and rep["oracle"] == "tflm"
    assert rep["accuracy"] == 1.0 and rep["top1_agreement"] == 1.0 and rep["bit_exact_count"] == N
    matrix = np.array(rep["confusion_matrix"])
    assert matrix.shape == (4, 4) and np.array_equal(np.diag(matrix), np.bincount(top, minlength=4))
    assert matrix.sum() == N and [s["predicted"] for s in rep["samples"]] == top.tolist()
    api = edgemem.validate(project, data=tmp_path / "d.npz")  # the Python API gives the same report
    assert api.accuracy == 1.0 and api.confusion_matrix == rep["confusion_matrix"] and api.all_match


def test_wrong_labels_land_off_the_diagonal(project, samples, tmp_path):
    x, top = samples
    y = top.copy()
    y[:3] = (y[:3] + 1) % 4  # one-hot below: the other label layout
    np.savez(tmp_path / "d.npz", x=x, y=np.eye(4, dtype=np.int64)[y])
    code, rep = _validate(project, "--data", tmp_path / "d.npz")
    assert code == 0 and rep["accuracy"] == (N - 3) / N
    expected = np.zeros((4, 4), np.int64)
    np.add.at(expected, (y, top), 1)
    assert rep["confusion_matrix"] == expected.tolist()


def test_float_samples_are_quantized_with_the_inputs_scale_and_compared_with_the_float_model(project, samples, tmp_path):
    x, _ = samples
    spec = load_build_info(project).inputs[0]
    floats = ((x.astype(np.float32) - spec.zero_point) * np.float32(spec.scale)).astype(np.float32)
    np.savez(tmp_path / "f.npz", x=floats)
    code, rep = _validate(project, "--data", tmp_path / "f.npz", "--reference", FLOAT)
    assert code == 0 and rep["bit_exact_count"] == N and rep["accuracy"] is None
    # quantized back to exactly the int8 samples: the device's top-1 is TFLM's on them
    assert [s["predicted"] for s in rep["samples"]] == samples[1].tolist()
    float_top = [int(np.argmax(tflm_outputs(str(FLOAT), [f[None]])[0])) for f in floats]
    assert rep["float_top1_agreement"] == np.mean(np.array(float_top) == samples[1])


def test_a_folder_per_class(project, samples, tmp_path):
    x, top = samples
    names = ["down", "go", "stop", "up"]  # sorted: labels 0..3 in this order
    for k, (sample, label) in enumerate(zip(x, top)):
        (tmp_path / "data" / names[label]).mkdir(parents=True, exist_ok=True)
        np.save(tmp_path / "data" / names[label] / f"s{k}.npy", sample)
    for name in names:  # a class no sample has still has its folder (its index is its place among the folders)
        (tmp_path / "data" / name).mkdir(exist_ok=True)
    code, rep = _validate(project, "--data", tmp_path / "data")
    assert code == 0 and rep["accuracy"] == 1.0 and rep["classes"] == names and rep["count"] == N


@pytest.mark.parametrize("case", ["shape", "dtype", "no_x", "labels", "missing", "reference_without_data"])
def test_bad_data_is_refused_in_one_paragraph(project, samples, tmp_path, case):
    x, top = samples
    path = tmp_path / "d.npz"
    if case == "shape":
        np.savez(path, x=x[:, :10])
    elif case == "dtype":
        np.savez(path, x=x.astype(np.int16))
    elif case == "no_x":
        np.savez(path, samples=x)
    elif case == "labels":
        np.savez(path, x=x, y=top[:-1])
    args = ["--reference", FLOAT] if case == "reference_without_data" else ["--data", path]
    res = CliRunner().invoke(app, ["validate", str(project), *map(str, args)])
    assert res.exit_code == 2 and "Traceback" not in res.output, res.output
    assert res.stderr.startswith("error:") and len(res.stderr.strip().split("\n\n")) == 1
