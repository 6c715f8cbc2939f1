"""edgemem.passes.integerize on real models, run on the host and checked against TFLite Micro.

The integerized Relax module (int8 call_tir kernels + reshapes) is compiled for the host CPU with
TVM's llvm target and run with the Relax VM; three seeded inputs per model are compared with the
`tflite_micro` interpreter (TFLM's reference kernels, no code shared with edgemem). Outputs must
be bit-exact, except those produced by SOFTMAX/LOGISTIC/TANH, which may differ by 1 LSB.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

tvm = pytest.importorskip("tvm")
pytest.importorskip("tflite_micro")
from tvm import relax  # noqa: E402

from edgemem.frontend.tflite_import import import_tflite  # noqa: E402
from edgemem.passes.integerize import integerize  # noqa: E402
from edgemem.reference import seeded_inputs, tflm_outputs  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
MODELS = ROOT.parent / "shared" / "models"

CHECKED_MODELS = [
    "mlperf_kws_dscnn_int8", "mlperf_vww_96_int8", "mlperf_ic_resnet8_int8", "mlperf_ad_fc_autoencoder_int8",
    "mlperf_sww_int8", "tflm_person_detect_int8", "tflm_micro_speech_int8", "tflm_hello_world_int8",
]  # fmt: skip
SEEDS = (0, 1, 2)
TOLERANT = {"SOFTMAX", "LOGISTIC", "TANH"}  # TFLM's fixed-point exp/tanh: 1 LSB allowed


def _model_path(name: str) -> Path:
    path = MODELS / f"{name}.tflite"
    if not path.is_file():
        pytest.skip(f"{path} is not here (the shared models live next to the repository)")
    return path


def _output_producers(path: Path) -> list[str]:
    """Builtin name of the operator writing each model output, in output order."""
    import tflite
    from tflite.BuiltinOperator import BuiltinOperator

    names = {v: k for k, v in BuiltinOperator.__dict__.items() if not k.startswith("_")}
    model = tflite.Model.GetRootAsModel(path.read_bytes(), 0)
    sg = model.Subgraphs(0)
    producer = {}
    for i in range(sg.OperatorsLength()):
        op = sg.Operators(i)
        code = model.OperatorCodes(op.OpcodeIndex())
        name = names.get(max(code.BuiltinCode(), code.DeprecatedBuiltinCode()), "?")
        for t in op.OutputsAsNumpy():
            producer[int(t)] = name
    return [producer.get(int(t), "INPUT") for t in sg.OutputsAsNumpy()]


def _run(vm, inputs: list[np.ndarray]) -> list[np.ndarray]:
    out = vm["main"](*[tvm.runtime.tensor(a) for a in inputs])
    outs = [out] if isinstance(out, tvm.runtime.Tensor) else list(out)
    return [o.numpy() for o in outs]


def _compile(path: Path):
    mod = integerize(import_tflite(path).relax_mod)
    return relax.VirtualMachine(tvm.compile(mod, target="llvm"), tvm.cpu())


def _check_against_tflm(path: Path, vm, seed: int) -> None:
    inputs = seeded_inputs(path, seed)
    expected = tflm_outputs(path, inputs)
    got = _run(vm, inputs)
    assert len(got) == len(expected)
    for i, (g, e, producer) in enumerate(zip(got, expected, _output_producers(path))):
        assert g.dtype == e.dtype and g.shape == e.shape, f"output {i}: {g.dtype}{g.shape} vs TFLM {e.dtype}{e.shape}"
        diff = int(np.abs(g.astype(np.int64) - e.astype(np.int64)).max(initial=0))
        allowed = 1 if producer in TOLERANT else 0
        assert diff <= allowed, f"{path.name} seed {seed} output {i} ({producer}) differs from TFLM by {diff}"


@pytest.fixture(scope="module", params=CHECKED_MODELS)
def host_model(request):
    """(path, Relax VM running the integerized module): compiled once per model."""
    path = _model_path(request.param)
    return path, _compile(path)


@pytest.mark.parametrize("seed", SEEDS)
def test_integerized_model_matches_tflm(host_model, seed):
    path, vm = host_model
    _check_against_tflm(path, vm, seed)


def test_conv_fed_directly_by_average_pool():
    """MicroNet-M's last CONV_2D reads the AVERAGE_POOL_2D output with no RESHAPE in between."""
    path = _model_path("armzoo_kws_micronet_m_int8")
    _check_against_tflm(path, _compile(path), 0)
