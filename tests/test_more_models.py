"""End to end on the models that need PAD, MEAN, MUL, STRIDED_SLICE, TRANSPOSE, CONCATENATION,
RESIZE_NEAREST_NEIGHBOR and float QUANTIZE/DEQUANTIZE at the model's edges: built for the STM32F746
(with --ram/--flash raised for the models that do not fit it; QEMU's mps2-an500 stand-in holds 4 MiB
of RAM and of flash), run under QEMU on two seeded inputs and compared with TFLite Micro
(`tflite_micro`, the oracle that shares no code with edgemem) bit for bit, float outputs included.

Measured wall time per model (build + 2 QEMU runs, 2-core machine): 2-8 s for the first six; the two
224x224 ImageNet models (2.4 MB arena, 1.9-2.4 G instructions per inference) take about 15 and 26 s.
"""

from __future__ import annotations


import numpy as np
import pytest

from edgemem import device_run, pipeline
from edgemem.reference import seeded_inputs, tflm_outputs

from shared_models import model_path

MIB = 1024 * 1024

# model -> (RAM, flash) budget to plan for on stm32f746; None keeps the board's 320 KiB / 1 MiB.
MORE_MODELS = {
    "mltk_kws_mobilenetv2_int8": (None, None),  # PAD, MEAN
    "arm_cifar10_image_recognition_int8": (None, None),  # STRIDED_SLICE, MUL, PAD, broadcast ADD
    "mltk_rock_paper_scissors": (None, None),  # float input/output: QUANTIZE, DEQUANTIZE
    "tinyengine_mcunet_vww": (None, None),  # QUANTIZE, PAD, TRANSPOSE, MEAN (one axis), DEQUANTIZE
    "armzoo_yolo_fastest_192_face_v4_int8": (1 * MIB, None),  # RESIZE (half-pixel), CONCATENATION, MAX_POOL_2D
    "tinyengine_mcunet_person_det": (1 * MIB, None),  # RESIZE, three float outputs
    "tinyengine_mcunetv2_large": (4 * MIB, 4 * MIB),  # MEAN + MUL squeeze-excite blocks
    "tflm_xtensa_mobilenet_v2_224_int8": (4 * MIB, 4 * MIB),  # TRANSPOSE, PAD, MEAN
    "mlperf_ic_resnet_large_int8": (None, None),  # no new operator: the one shared model no other QEMU test runs
}
SEEDS = (0, 1)


@pytest.mark.parametrize("name", list(MORE_MODELS))
def test_model_runs_on_stm32f746_bit_exact_with_tflm(name, tmp_path):
    path = model_path(name)
    ram, flash = MORE_MODELS[name]
    result = pipeline.build(path, "stm32f746", tmp_path / "proj", pipeline.BuildOptions(ram=ram, flash=flash))
    info = result.info
    assert info["fits"]
    assert info["arena_bytes"] == info["lower_bound_bytes"]
    for seed in SEEDS:
        inputs = seeded_inputs(path, seed)
        res = device_run.run(tmp_path / "proj", inputs, timeout_s=600)
        reference = tflm_outputs(path, inputs)  # computed here, independently of device_run.run
        assert len(res["output_arrays"]) == len(reference)
        for out, ref in zip(res["output_arrays"], reference):
            assert out.dtype == ref.dtype and out.shape == tuple(ref.shape)
            np.testing.assert_array_equal(out, ref, err_msg=f"{name} seed {seed}")
        assert res["arena_high_water_bytes"] == info["arena_bytes"]


@pytest.mark.parametrize("name, before, after", [
    ("mltk_kws_mobilenetv2_int8", 76_176, 45_360), ("tinyengine_mcunet_vww", 161_472, 96_000),
])  # fmt: skip
def test_pad_folding_removes_the_padded_copies(name, before, after):
    """PAD (zero point as value) feeding only convolutions becomes the convolution's padding: the padded
    tensor never exists. The peak is recomputed here from live ranges of each graph, with and without the
    fold; test_model_runs_like_tflm runs the folded models bit-exact."""
    from edgemem.frontend.tflite_import import import_tflite
    from edgemem.ir.graph import read_graph
    from edgemem.passes.fold_pad import fold_pad
    from edgemem.passes.integerize import integerize
    from edgemem.schedule.liveness import peak_bytes

    lowered = integerize(import_tflite(model_path(name)).relax_mod)
    plain, folded = read_graph(lowered), read_graph(fold_pad(lowered))
    n_pads = sum(op.kind == "PAD" for op in plain.ops)
    assert n_pads > 0 and not any(op.kind == "PAD" for op in folded.ops)
    assert len(folded.ops) == len(plain.ops) - n_pads
    file_order = lambda g: list(range(len(g.ops)))  # noqa: E731
    assert peak_bytes(plain, file_order(plain), 4) == before
    assert peak_bytes(folded, file_order(folded), 4) == after
