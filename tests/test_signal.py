"""TFLite Micro's Signal library operators (the micro_speech audio front-end as a graph), against TFLite Micro.

- The published front-end (../shared/models/published/tflm_audio_preprocessor_int8.tflite: Window, FftAutoScale,
  int16 Rfft, Energy, FilterBank, FilterBankSquareRoot, FilterBankSpectralSubtraction, PCAN, FilterBankLog and
  CAST on uint32/uint64): bit-exact under QEMU (stm32f746) on seeded frames, and on the host (ASan + UBSan) on
  frames from silence to full scale; its noise estimate carries across runs as in one TFLM interpreter invoked
  again and again, and edgemem_reset() restores it.
- Each operator alone, in a model made here with one custom operator (TFLM runs it as it runs the published one),
  on inputs chosen to reach its branches (saturation, every FFT stage radix, Sqrt32's and Sqrt64's paths, the
  PCAN table's ends, the log of 0 and 1): bit-exact.
- What edgemem does not compute is refused with the operator named (Framer) or with the option named.
"""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "examples"))

from make_example_model import ModelBuilder  # noqa: E402
from op_check import assert_outputs_match, build_for_host, run_in_sequence  # noqa: E402
from shared_models import model_path  # noqa: E402

from edgemem import pipeline  # noqa: E402
from edgemem.errors import UnsupportedModelError  # noqa: E402
from edgemem.reference import model_io_specs, reference_outputs_many, seeded_inputs, tflm_interpreter  # noqa: E402
from edgemem.target.host import build_host, run_host  # noqa: E402

CUSTOM = 32  # BuiltinOperator.CUSTOM


def _need_preprocessor() -> Path:
    return model_path("published/tflm_audio_preprocessor_int8")  # skips when the shared file is not there


def _frames(n: int, count: int, seed: int) -> list[np.ndarray]:
    """Audio frames from silence to full scale (FftAutoScale's shift goes from 15 to 0): silence, a quiet and a
    loud noise, a tone, full-scale noise with -32768 in it, and more seeded noise at random levels."""
    rng = np.random.default_rng(seed)
    t = np.arange(n)
    frames = [np.zeros(n), rng.integers(-3, 4, n), rng.integers(-3000, 3001, n), 12000 * np.sin(t * 0.37),
              np.r_[-32768, rng.integers(-32768, 32768, n - 1)]]  # fmt: skip
    while len(frames) < count:
        amp = int(2 ** rng.uniform(0, 15))
        frames.append(rng.integers(-amp, amp + 1, n))
    return [np.asarray(f, np.int16).reshape(1, n) for f in frames[:count]]


def _tflm_sequence(path: Path, inputs: list[list[np.ndarray]]) -> list[list[np.ndarray]]:
    """One TFLM interpreter invoked on each set of inputs in turn, no reset in between (its state carries)."""
    interp = tflm_interpreter(path)
    _, outs = model_io_specs(path)
    got = []
    for xs in inputs:
        for i, x in enumerate(xs):
            interp.set_input(x, i)
        interp.invoke()
        got.append([np.array(interp.get_output(i), copy=True) for i in range(len(outs))])
    return got


def _host_outputs(path: Path, tmp: Path, input_sets: list[list[np.ndarray]]) -> list[list[np.ndarray]]:
    """The model built for the host (gcc -Werror, ASan + UBSan), run once per input set (from the initial state)."""
    _, project = build_for_host(path, tmp)
    exe = build_host(project, tmp / "host")
    _, outs = model_io_specs(path)
    results = []
    for xs in input_sets:
        raw = run_host(exe, [np.ascontiguousarray(x).tobytes() for x in xs], [int(np.prod(s)) * d.itemsize for _, s, d in outs]).outputs
        results.append([np.frombuffer(r, dtype=d).reshape(s) for r, (_, s, d) in zip(raw, outs)])
    return results


def _check_fresh(path: Path, tmp: Path, input_sets: list[list[np.ndarray]]) -> None:
    """Each input set on a fresh model (host) = on a fresh TFLM interpreter, bit for bit, every output."""
    got = _host_outputs(path, tmp, input_sets)
    want, oracle = reference_outputs_many(path, input_sets)
    assert oracle == "tflm"
    for k, (g, w) in enumerate(zip(got, want)):
        assert_outputs_match(g, w, oracle, f"{path.name} input set {k}")


# -- the published model -------------------------------------------------------------------------------------------


# main.c runs the model twice (two stack/arena paints), each from edgemem_reset(), and refuses different outputs;
# for the state test the second pass keeps the state of the first and the firmware prints the second run's outputs.
_MAIN_PATCHES = [
    ("edgemem_reset(); /* every pass from the initial state", "if (pass == 0u) edgemem_reset(); /* every pass from the initial state"),
    ("} else if (h != hash0 || st != status) {", "} else if ((h == hash0 && 0) || st != status) {"),
]


def _firmware(path: Path, tmp: Path, keep_state: bool = False) -> Path:
    import shutil

    from edgemem.target.toolchain import build_firmware

    if shutil.which("arm-none-eabi-gcc") is None or shutil.which("qemu-system-arm") is None:
        pytest.skip("no arm-none-eabi-gcc or qemu-system-arm")
    project = tmp / "p"
    pipeline.build(path, "stm32f746", project, pipeline.BuildOptions(compile=False))
    if keep_state:
        main_c = (project / "main.c").read_text()
        for old, new in _MAIN_PATCHES:
            assert main_c.count(old) == 1, f"main.c no longer has {old!r}: update this test"
            main_c = main_c.replace(old, new)
        (project / "main.c").write_text(main_c)
    build_firmware(project)
    return project


def test_published_preprocessor_is_bit_exact_under_qemu(tmp_path):
    """The firmware (arm-none-eabi-gcc, Cortex-M7, QEMU) on three seeded frames (runs from the reset state):
    bit-exact with TFLM, and the arena the device measures is the planned one."""
    from edgemem import device_run

    path = _need_preprocessor()
    project = _firmware(path, tmp_path)
    inputs = [seeded_inputs(path, seed) for seed in range(3)]
    want, oracle = reference_outputs_many(path, inputs)
    assert oracle == "tflm"
    for seed, (x, w) in enumerate(zip(inputs, want)):
        run = device_run.run(project, x)
        assert_outputs_match(run["output_arrays"], w, oracle, f"QEMU seed {seed}")
        assert run["arena_high_water_bytes"] == run["arena_bytes"]


def test_published_preprocessor_noise_estimate_carries_under_qemu(tmp_path):
    """The firmware runs the model twice on one frame without a reset in between: its output is TFLM's second
    invocation, which differs from the first (the spectral subtraction's noise estimate is what is compared)."""
    from edgemem import device_run

    path = _need_preprocessor()
    project = _firmware(path, tmp_path, keep_state=True)
    x = [_frames(480, 3, seed=2)[2]]
    got = device_run.run(project, x)["output_arrays"][0]
    first, second = (outs[0] for outs in _tflm_sequence(path, [x, x]))
    np.testing.assert_array_equal(got, second)
    assert not np.array_equal(first, second)


def test_published_preprocessor_state_carries_across_runs_on_the_host(tmp_path):
    """Eight frames in a row (silence to full scale) without a reset = one TFLM interpreter invoked eight times;
    edgemem_reset() gives the first run's output again; and the noise estimate matters: a fresh run on the last
    frame differs from the eighth run (so the comparison can fail)."""
    path = _need_preprocessor()
    frames = _frames(480, 8, seed=5)
    got, again = run_in_sequence(path, tmp_path, frames)
    want = [outs[0] for outs in _tflm_sequence(path, [[f] for f in frames])]
    for k, (g, w) in enumerate(zip(got, want)):
        np.testing.assert_array_equal(g, w, err_msg=f"run {k}")
    np.testing.assert_array_equal(again, want[0], err_msg="after edgemem_reset")
    assert not np.array_equal(_tflm_sequence(path, [[frames[-1]]])[0][0], want[-1])


def test_published_preprocessor_frames_from_silence_to_full_scale(tmp_path):
    """Each frame of _frames on a fresh model, host build with ASan + UBSan (no undefined behaviour in the
    kernels, whatever TFLM's C relies on): bit-exact."""
    path = _need_preprocessor()
    _check_fresh(path, tmp_path, [[f] for f in _frames(480, 8, seed=6)])


# -- one operator per model ----------------------------------------------------------------------------------------


def _custom_model(code: str, options: dict | None, inputs: list, outputs: list, consts: dict | None = None) -> bytes:
    """A model of one custom operator ``code``: ``inputs`` and ``outputs`` are (name, shape, dtype), ``consts``
    (name -> array) constant inputs placed after the activations in the order given."""
    from flatbuffers import flexbuffers

    b = ModelBuilder()
    ins = [b.tensor(name, shape, dtype) for name, shape, dtype in inputs]
    const_ids = [b.const(name, array) for name, array in (consts or {}).items()]
    outs = [b.tensor(name, shape, dtype) for name, shape, dtype in outputs]
    raw = flexbuffers.Dumps(options) if options is not None else None
    b.op(CUSTOM, ins + const_ids, outs, custom_code=code, custom_options=raw)
    return b.serialize(ins, outs)


def _write(tmp: Path, data: bytes) -> Path:
    path = tmp / "m.tflite"
    path.write_bytes(data)
    return path


def _wide_u32(rng, n: int) -> np.ndarray:
    """uint32 values spread over every magnitude (0, 1, 2, then 2^k-ish for every k)."""
    v = rng.integers(0, 1 << 32, n, dtype=np.uint64) >> rng.integers(0, 33, n).astype(np.uint64)
    v[:3] = [0, 1, 2]
    v[3] = 0xFFFFFFFF
    return v.astype(np.uint32)


def test_window_saturates_and_repeats_like_tflm(tmp_path):
    """Window on two frames sharing one window (the window repeats), full-scale samples and weights (the int16
    saturation both ways), two shifts."""
    rng = np.random.default_rng(0)
    w = rng.integers(-32768, 32768, 64).astype(np.int16)
    for shift in (12, 3):
        work = tmp_path / f"shift{shift}"
        work.mkdir()
        model = _custom_model("SignalWindow", {"shift": shift}, [("x", (2, 64), np.int16)], [("y", (2, 64), np.int16)], {"w": w})
        path = _write(work, model)
        _check_fresh(path, work, [seeded_inputs(path, s) for s in range(2)])


def test_fft_auto_scale_shift_and_scaled_frame(tmp_path):
    """FftAutoScale's two outputs (the scaled frame, the shift) from silence (shift 15) to a frame holding -32768."""
    model = _custom_model("SignalFftAutoScale", {}, [("x", (96,), np.int16)], [("y", (96,), np.int16), ("bits", (), np.int32)])
    path = _write(tmp_path, model)
    _check_fresh(path, tmp_path, [[f.reshape(96)] for f in _frames(96, 7, seed=1)])


@pytest.mark.parametrize("fft_length,frame", [(512, 480), (256, 256), (128, 100), (32, 7), (8, 8)])
@pytest.mark.parametrize("dtype", ["int16", "int32", "float32"])
def test_rfft_every_stage_radix(dtype, fft_length, frame, tmp_path):
    """The int16, int32 (KISS FFT fixed point 16 and 32, bit-exact) and float32 RFFT (within the float
    tolerance): half lengths 256 and 64 (radix-4 stages only), 128, 16 and 4 (a radix-2 stage innermost), frames
    shorter than the FFT (zero padding), two frames per call; int32 frames are the int16 ones times 2^16 plus
    full-range noise in the low bits, float32 ones the int16 ones / 32768."""
    code = {"int16": 7, "int32": 2, "float32": 0}[dtype]
    model = _custom_model("SignalRfft", {"T": code, "fft_length": fft_length}, [("x", (2, frame), dtype)],
                          [("y", (2, fft_length + 2), dtype)])  # fmt: skip
    path = _write(tmp_path, model)
    frames = _frames(frame, 6, seed=fft_length)
    if dtype == "int32":
        low = np.random.default_rng(fft_length).integers(0, 1 << 16, (6, frame))
        frames = [(f.astype(np.int64) * 65536 + lo).astype(np.int32) for f, lo in zip(frames, low)]
    elif dtype == "float32":
        frames = [(f / 32768.0).astype(np.float32) for f in frames]
    _check_fresh(path, tmp_path, [[np.concatenate([frames[k], frames[k + 3]])] for k in range(3)])


def test_energy_of_a_band(tmp_path):
    """Energy of bins [3, 60) of 65 (full-scale bins: the square sums reach 2^31), bit-exact inside the band;
    outside it TFLM leaves its output as the arena had it, edgemem writes 0."""
    model = _custom_model("SignalEnergy", {"end_index": 60, "start_index": 3}, [("x", (130,), np.int16)], [("y", (65,), np.uint32)])
    path = _write(tmp_path, model)
    inputs = [seeded_inputs(path, s) for s in range(3)] + [[np.full(130, -32768, np.int16)]]
    got = _host_outputs(path, tmp_path, inputs)
    want, _ = reference_outputs_many(path, inputs)
    for k, (g, w) in enumerate(zip(got, want)):
        np.testing.assert_array_equal(g[0][3:60], w[0][3:60], err_msg=f"input {k}")
        assert not g[0][:3].any() and not g[0][60:].any()


def _filter_bank_tables(n_in: int, channels: int, rng):
    """Triangular-ish overlapping channels as the micro_speech front-end lays them out: channel c starts at a
    rising frequency, its weights and the previous channel's unweights share the weight positions."""
    edges = np.linspace(2, n_in - 1, channels + 2).astype(int)
    fstart = edges[:-1].astype(np.int16)
    width = np.diff(edges).astype(np.int16)
    wstart = np.r_[0, np.cumsum(width)[:-1]].astype(np.int16)
    n_w = int(width.sum())
    weights = rng.integers(0, 4096, n_w).astype(np.int16)
    unweights = (4096 - weights).astype(np.int16)
    weights[0] = -5  # a negative weight: TFLM multiplies it as uint64 (wraps)
    return weights, unweights, fstart, wstart, width


def test_filter_bank_accumulates_like_tflm(tmp_path):
    rng = np.random.default_rng(3)
    n_in, channels = 65, 12
    weights, unweights, fstart, wstart, width = _filter_bank_tables(n_in, channels, rng)
    consts = {"w": weights, "uw": unweights, "fs": fstart, "ws": wstart, "wd": width}
    model = _custom_model("SignalFilterBank", {"num_channels": channels}, [("x", (n_in,), np.uint32)], [("y", (channels,), np.uint64)], consts)
    path = _write(tmp_path, model)
    _check_fresh(path, tmp_path, [[_wide_u32(np.random.default_rng(s), n_in)] for s in range(3)])


def test_filter_bank_square_root_both_paths(tmp_path):
    """Sqrt32 below 2^32 and Sqrt64 above, with the roots' round-up and its cap, shifted down by 0..15."""
    model = _custom_model("SignalFilterBankSquareRoot", None, [("x", (64,), np.uint64), ("bits", (), np.int32)], [("y", (64,), np.uint32)])
    path = _write(tmp_path, model)
    rng = np.random.default_rng(4)
    sets = []
    for bits in (0, 3, 15):
        v = rng.integers(0, 1 << 63, 64, dtype=np.uint64) >> rng.integers(0, 64, 64).astype(np.uint64)
        v[:6] = [0, 1, 2, 0xFFFFFFFF, 0xFFFE0001, 0xFFFFFFFFFFFFFFFF]
        sets.append([v, np.array(bits, np.int32)])
    _check_fresh(path, tmp_path, sets)


@pytest.mark.parametrize("clamping", [False, True])
def test_spectral_subtraction_state_carries(clamping, tmp_path):
    """Six runs without a reset (the noise estimate carries) = one TFLM interpreter invoked six times, output 0;
    both outputs (the output and the estimate) bit-exact on a fresh run."""
    opts = {"alternate_one_minus_smoothing": 15401, "alternate_smoothing": 983, "clamping": clamping, "min_signal_remaining": 819,
            "num_channels": 16, "one_minus_smoothing": 15975, "smoothing": 409, "smoothing_bits": 10, "spectral_subtraction_bits": 14}  # fmt: skip
    model = _custom_model("SignalFilterBankSpectralSubtraction", opts, [("x", (16,), np.uint32)],
                          [("y", (16,), np.uint32), ("noise", (16,), np.uint32)])  # fmt: skip
    path = _write(tmp_path, model)
    rng = np.random.default_rng(5)
    xs = [(rng.integers(0, 1 << 22, 16) >> rng.integers(0, 22, 16)).astype(np.uint32) for _ in range(6)]
    xs[3][:4] = [0, 0xFFFFFFFF, 1 << 21, 7]  # the estimate above the signal (the clamp), a wrapping shift
    got, again = run_in_sequence(path, tmp_path / "seq", xs)
    want = _tflm_sequence(path, [[x] for x in xs])
    for k, (g, w) in enumerate(zip(got, want)):
        np.testing.assert_array_equal(g, w[0], err_msg=f"run {k}")
    np.testing.assert_array_equal(again, want[0][0])
    assert not np.array_equal(_tflm_sequence(path, [[xs[-1]]])[0][0], want[-1][0])
    _check_fresh(path, tmp_path / "fresh", [[x] for x in xs[:2]])


def test_pcan_gain_table_from_end_to_end(tmp_path):
    """PCAN with a 125-entry gain table over its whole int16 range, noise estimates 0, 1, 2 (table entries) up
    to 2^32 - 1 (the last octave), signals from 0 to 2^32 - 1 (both branches of PcanShrink)."""
    rng = np.random.default_rng(6)
    lut = rng.integers(-32768, 32768, 125).astype(np.int16)
    model = _custom_model("SignalPCAN", {"snr_shift": 6}, [("x", (48,), np.uint32), ("noise", (48,), np.uint32)],
                          [("y", (48,), np.uint32)], {"lut": lut})  # fmt: skip
    path = _write(tmp_path, model)
    _check_fresh(path, tmp_path, [[_wide_u32(np.random.default_rng(s), 48), _wide_u32(np.random.default_rng(s + 9), 48)] for s in range(3)])


@pytest.mark.parametrize("bits,scale", [(3, 64), (0, 1 << 16), (7, -3)])
def test_filter_bank_log(bits, scale, tmp_path):
    """Log32 of every magnitude (0 and 1 give 0), the int16 cap, a negative output_scale (TFLM's uint32 wrap)."""
    model = _custom_model("SignalFilterBankLog", {"input_correction_bits": bits, "output_scale": scale}, [("x", (40,), np.uint32)],
                          [("y", (40,), np.int16)])  # fmt: skip
    path = _write(tmp_path, model)
    _check_fresh(path, tmp_path, [[_wide_u32(np.random.default_rng(s), 40)] for s in range(3)])


# -- refused -------------------------------------------------------------------------------------------------------


def test_framer_is_refused_naming_only_it(tmp_path):
    """A model of a Window and a Framer (a Signal operator not in the front-end) side by side: the refusal
    (exit 4) names the Framer, the one operator edgemem has no kernel for, and not the Window beside it."""
    from flatbuffers import flexbuffers

    b = ModelBuilder()
    x, z = b.tensor("x", (16,), np.int16), b.tensor("z", (1, 64), np.int16)
    w = b.const("w", np.ones(16, np.int16))
    y, f, ok = b.tensor("y", (16,), np.int16), b.tensor("f", (1, 2, 32), np.int16), b.tensor("ok", (), np.bool_)
    b.op(CUSTOM, [x, w], [y], custom_code="SignalWindow", custom_options=flexbuffers.Dumps({"shift": 1}))
    b.op(CUSTOM, [z], [f, ok], custom_code="SignalFramer", custom_options=flexbuffers.Dumps({"frame_size": 32, "frame_step": 32, "prefill": False}))
    path = _write(tmp_path, b.serialize([x, z], [y, f]))
    with pytest.raises(UnsupportedModelError, match=r"no kernel for 1 operator\(s\).*Missing: CUSTOM\(SignalFramer\) \(int16\)\.") as info:
        pipeline.build(path, "stm32f746", tmp_path / "p", pipeline.BuildOptions(compile=False))
    assert "SignalWindow" not in str(info.value)


@pytest.mark.parametrize("options,message", [
    ({"shift": 40}, "option 'shift' is 40"),
    ({}, "option 'shift' is None"),
    ({"shift": "twelve"}, "option 'shift' is 'twelve'"),
])  # fmt: skip
def test_bad_window_options_are_refused(options, message, tmp_path):
    model = _custom_model("SignalWindow", options, [("x", (16,), np.int16)], [("y", (16,), np.int16)], {"w": np.ones(16, np.int16)})
    path = _write(tmp_path, model)
    with pytest.raises(UnsupportedModelError, match=message):
        pipeline.build(path, "stm32f746", tmp_path / "p", pipeline.BuildOptions(compile=False))


@pytest.mark.parametrize("raw", [b"\x07\x01\xff", bytes(range(40)), b"\x00"])
def test_corrupt_custom_options_are_refused(raw, tmp_path):
    """Custom options that are no flexbuffer map (truncated, garbage, a lone byte): one message, no traceback."""
    b = ModelBuilder()
    x, y = b.tensor("x", (16,), np.int16), b.tensor("y", (16,), np.int16)
    b.op(CUSTOM, [x, b.const("w", np.ones(16, np.int16))], [y], custom_code="SignalWindow", custom_options=raw)
    path = _write(tmp_path, b.serialize([x], [y]))
    with pytest.raises(UnsupportedModelError, match="custom options|option 'shift'"):
        pipeline.build(path, "stm32f746", tmp_path / "p", pipeline.BuildOptions(compile=False))


def test_filter_bank_tables_outside_the_input_are_refused(tmp_path):
    """A channel reaching past the input bins would make TFLM (and a kernel taking the tables as they are) read
    out of bounds: refused at build time."""
    rng = np.random.default_rng(7)
    weights, unweights, fstart, wstart, width = _filter_bank_tables(65, 4, rng)
    fstart[-1] = 60  # + its width > 65
    consts = {"w": weights, "uw": unweights, "fs": fstart, "ws": wstart, "wd": width}
    path = _write(tmp_path, _custom_model("SignalFilterBank", {"num_channels": 4}, [("x", (65,), np.uint32)], [("y", (4,), np.uint64)], consts))
    with pytest.raises(UnsupportedModelError, match="outside its 65 input bins"):
        pipeline.build(path, "stm32f746", tmp_path / "p", pipeline.BuildOptions(compile=False))
