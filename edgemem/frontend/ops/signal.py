"""TFLite Micro's Signal library (custom operators ``Signal*``, the micro_speech audio front-end as a graph):
each operator is one call to its kernel in kernels/signal.py, TFLM's integer arithmetic.

The options are a flexbuffer map in the operator's ``custom_options`` (read with the flatbuffers package); every
value is checked here, because the model is untrusted and the values become loop bounds, shifts and table
indices in the generated C. The tables TFLM reads from input tensors at run time (FilterBank's channel layout)
must be constants, checked in range at build time, so the kernel never reads outside its buffers.

FilterBankSpectralSubtraction keeps its noise estimate across invocations: a state tensor (outside the arena,
zeros after edgemem_reset(), as TFLM's Reset memsets it); its kernel writes the output and the updated estimate
side by side, which two copies hand to the operator's two outputs.
"""

from __future__ import annotations

import numpy as np
from tvm import relax

from ...kernels import kernel_attrs
from ...kernels import layout as copies
from ...kernels import signal as k
from ..footprint import indices
from .registry import OpContext, lowering


def _options(ctx: OpContext) -> dict:
    """The custom options as a dict (a malformed flexbuffer is refused, never a traceback)."""
    from flatbuffers import flexbuffers

    raw = bytes(ctx.op.CustomOptionsAsNumpy()) if ctx.op.CustomOptionsLength() else b""
    if not raw:
        return {}
    try:
        opts = flexbuffers.Loads(raw)
    except Exception as exc:  # the flexbuffer reader raises anything on corrupt bytes
        ctx.refuse(f"its custom options could not be read as a flexbuffer map ({type(exc).__name__}); the model is corrupted. Re-export it.")
    if not isinstance(opts, dict):
        ctx.refuse("its custom options are not a flexbuffer map; the model is corrupted. Re-export it.")
    return opts


def _int(ctx: OpContext, opts: dict, key: str, lo: int, hi: int) -> int:
    value = opts.get(key)
    if isinstance(value, bool) or not isinstance(value, int) or not lo <= value <= hi:
        ctx.refuse(f"its option '{key}' is {value!r}; TFLite Micro's kernel takes an integer in [{lo}, {hi}].")
    return int(value)


def _require(ctx: OpContext, tensors, dtypes: tuple[str, ...], what: str) -> None:
    got = tuple(ctx.dtype(t) for t in tensors)
    if got != dtypes:
        ctx.refuse(f"its {what} are {list(got)}; TFLite Micro's kernel takes {list(dtypes)}.")


def _counts(ctx: OpContext, n_in: int, n_out: int) -> None:
    if len(ctx.inputs) != n_in or len(ctx.outputs) != n_out or not all(ctx.present(i) for i in range(n_in)):
        ctx.refuse(f"it has {len(ctx.inputs)} input(s) and {len(ctx.outputs)} output(s); TFLite Micro's kernel takes {n_in} and gives {n_out}.")


def _dims(ctx: OpContext, t) -> tuple[int, ...]:
    """The tensor's shape from the flatbuffer (TVM's reader takes a scalar's empty shape for a constant)."""
    return tuple(int(d) for d in indices(t.tensor.ShapeAsNumpy()))


def _size(ctx: OpContext, t) -> int:
    return int(np.prod(_dims(ctx, t), dtype=np.int64))


def _flat(ctx: OpContext, t):
    """The tensor as a 1-D array (a view; a scalar becomes one element)."""
    n = max(_size(ctx, t), 1)
    return ctx.expr(t) if _dims(ctx, t) == (n,) else ctx.reshape(ctx.expr(t), (n,))


def _shaped(ctx: OpContext, res, t):
    """A kernel's 1-D result viewed with the TFLite output's shape."""
    return res if _dims(ctx, t) == (max(_size(ctx, t), 1),) else ctx.reshape(res, _dims(ctx, t))


def _emit(ctx: OpContext, kind: str, prim, args, out, macs: int = 0, tag: str = ""):
    n = max(_size(ctx, out), 1)
    return _shaped(ctx, ctx.emit(kind, prim, args, (n,), ctx.dtype(out), macs, tag=tag), out)


def _constant(ctx: OpContext, t, what: str) -> np.ndarray:
    v = ctx.value(t)
    if v is None:
        ctx.refuse(f"its {what} '{ctx.tensor_name(t)}' is computed at run time; edgemem needs it constant (known when the model is built).")
    return np.asarray(v).reshape(-1)


@lowering("CUSTOM(SignalWindow)", types=("int16",))
def window(ctx: OpContext):
    _counts(ctx, 2, 1)
    x, w, y = ctx.inputs[0], ctx.inputs[1], ctx.outputs[0]
    _require(ctx, (x, w, y), ("int16",) * 3, "input, window and output types")
    shift = _int(ctx, _options(ctx), "shift", 0, 31)
    n, width = _size(ctx, x), _size(ctx, w)
    if len(_dims(ctx, w)) != 1 or width == 0 or n % width or _dims(ctx, y) != _dims(ctx, x):
        ctx.refuse(f"its input {list(_dims(ctx, x))}, window {list(_dims(ctx, w))} and output {list(_dims(ctx, y))} do not fit "
                   "(the window is 1-D and repeats over the input; the output is shaped like the input).")  # fmt: skip
    return _emit(ctx, "SIGNAL_WINDOW", k.window(n, width, shift), [_flat(ctx, x), _flat(ctx, w)], y, macs=n)


@lowering("CUSTOM(SignalFftAutoScale)", types=("int16",))
def fft_auto_scale(ctx: OpContext):
    _counts(ctx, 1, 2)
    x, (y, bits) = ctx.inputs[0], ctx.outputs
    _require(ctx, (x, y, bits), ("int16", "int16", "int32"), "input and output types")
    n = _size(ctx, x)
    if len(_dims(ctx, x)) != 1 or _dims(ctx, y) != _dims(ctx, x) or _dims(ctx, bits) != ():
        ctx.refuse(f"its input {list(_dims(ctx, x))} and outputs {list(_dims(ctx, y))}, {list(_dims(ctx, bits))} are not a 1-D "
                   "array, the same array and a scalar.")  # fmt: skip
    shift = ctx.emit("SIGNAL_FFT_AUTO_SCALE", k.fft_auto_scale_bits(n), [ctx.expr(x)], (1,), "int32", tag="_bits")
    scaled = ctx.emit("SIGNAL_FFT_AUTO_SCALE", k.fft_auto_scale_apply(n), [ctx.expr(x), shift], (n,), "int16")
    return relax.Tuple([scaled, ctx.reshape(shift, ())])


_RFFT_TYPES = {7: "int16", 2: "int32", 0: "float32"}  # the option T (a TensorType): the RFFT's type


@lowering("CUSTOM(SignalRfft)", types=tuple(_RFFT_TYPES.values()))
def rfft(ctx: OpContext):
    _counts(ctx, 1, 1)
    x, y = ctx.inputs[0], ctx.outputs[0]
    opts = _options(ctx)
    dtype = _RFFT_TYPES.get(opts.get("T")) if isinstance(opts.get("T"), int) else None
    if dtype is None:
        ctx.refuse(f"its type option T is {opts.get('T')!r}: TFLite Micro's RFFT is int16, int32 or float32 (T 7, 2 or 0).")
    _require(ctx, (x, y), (dtype, dtype), "input and output types")
    length = _int(ctx, opts, "fft_length", 4, 1 << 14)
    if not k.rfft_supported(length):
        ctx.refuse(f"its fft_length is {length}; edgemem's fixed-point RFFT takes a power of two (KISS FFT's radix-4 and radix-2 stages).")
    xs, ys = _dims(ctx, x), _dims(ctx, y)
    if not xs or len(xs) != len(ys) or xs[:-1] != ys[:-1] or ys[-1] != length + 2 or not 0 < xs[-1] <= length:
        ctx.refuse(f"its input {list(xs)} and output {list(ys)} do not fit fft_length {length} (frames of at most "
                   f"{length} samples in, {length // 2 + 1} complex bins out per frame).")  # fmt: skip
    batches = _size(ctx, x) // xs[-1]
    perm, tw, sup = k.rfft_tables(length, dtype)
    macs = batches * (length // 2) * max(int(np.log2(length // 2)), 1) * 2
    return _emit(ctx, "SIGNAL_RFFT", k.rfft(batches, xs[-1], length, dtype), [_flat(ctx, x), perm, tw, sup], y, macs=macs)


@lowering("CUSTOM(SignalEnergy)", types=("int16",))
def energy(ctx: OpContext):
    _counts(ctx, 1, 1)
    x, y = ctx.inputs[0], ctx.outputs[0]
    _require(ctx, (x, y), ("int16", "uint32"), "input and output types")
    bins = _size(ctx, y)
    if len(_dims(ctx, y)) != 1 or _size(ctx, x) != 2 * bins:
        ctx.refuse(f"its input {list(_dims(ctx, x))} is not the complex (re, im) form of its 1-D output {list(_dims(ctx, y))}.")
    opts = _options(ctx)
    start = _int(ctx, opts, "start_index", 0, bins)
    end = _int(ctx, opts, "end_index", start, bins)
    return _emit(ctx, "SIGNAL_ENERGY", k.energy(bins, start, end), [_flat(ctx, x)], y, macs=2 * (end - start))


@lowering("CUSTOM(SignalFilterBank)", types=("uint32",))
def filter_bank(ctx: OpContext):
    _counts(ctx, 6, 1)
    x, y = ctx.inputs[0], ctx.outputs[0]
    _require(ctx, (x, *ctx.inputs[1:], y), ("uint32",) + ("int16",) * 5 + ("uint64",), "input, table and output types")
    channels = _int(ctx, _options(ctx), "num_channels", 1, 1 << 15)
    weights, unweights, fstart, wstart, width = (_constant(ctx, t, what) for t, what in zip(
        ctx.inputs[1:], ("weights", "unweights", "channel frequency starts", "channel weight starts", "channel widths")))  # fmt: skip
    n_in = _size(ctx, x)
    layout = [a.astype(np.int64) for a in (fstart, wstart, width)]
    if len(_dims(ctx, y)) != 1 or _size(ctx, y) != channels or any(a.size != channels + 1 for a in layout) or weights.size != unweights.size:
        ctx.refuse(f"its output {list(_dims(ctx, y))}, channel tables {[int(a.size) for a in layout]} and weights "
                   f"{weights.size}/{unweights.size} do not fit num_channels {channels} (tables of num_channels + 1).")  # fmt: skip
    f0, w0, wd = layout
    if (wd < 0).any() or (f0 < 0).any() or (w0 < 0).any() or (f0 + wd > n_in).any() or (w0 + wd > weights.size).any():
        ctx.refuse(f"its channel tables reach outside its {n_in} input bins or {weights.size} weights; TFLite Micro would read out of bounds.")
    prim = k.filter_bank(n_in, channels, int(weights.size))
    args = [_flat(ctx, x)] + [np.ascontiguousarray(a, np.int16) for a in (weights, unweights, fstart, wstart, width)]
    return _emit(ctx, "SIGNAL_FILTER_BANK", prim, args, y, macs=2 * int(wd.sum()))


@lowering("CUSTOM(SignalFilterBankSquareRoot)", types=("uint64",))
def filter_bank_square_root(ctx: OpContext):
    _counts(ctx, 2, 1)
    x, bits, y = ctx.inputs[0], ctx.inputs[1], ctx.outputs[0]
    _require(ctx, (x, bits, y), ("uint64", "int32", "uint32"), "input, scale and output types")
    if len(_dims(ctx, x)) != 1 or _dims(ctx, y) != _dims(ctx, x) or _size(ctx, bits) != 1:
        ctx.refuse(f"its input {list(_dims(ctx, x))}, scale {list(_dims(ctx, bits))} and output {list(_dims(ctx, y))} are not "
                   "a 1-D array, a scalar and an array like the input.")  # fmt: skip
    return _emit(ctx, "SIGNAL_FILTER_BANK_SQUARE_ROOT", k.filter_bank_square_root(_size(ctx, x)), [ctx.expr(x), _flat(ctx, bits)], y)


@lowering("CUSTOM(SignalFilterBankSpectralSubtraction)", types=("uint32",))
def spectral_subtraction(ctx: OpContext):
    _counts(ctx, 1, 2)
    x, (y, noise_out) = ctx.inputs[0], ctx.outputs
    _require(ctx, (x, y, noise_out), ("uint32",) * 3, "input and output types")
    opts = _options(ctx)
    channels = _int(ctx, opts, "num_channels", 1, 1 << 15)
    if any(_dims(ctx, t) != (channels,) for t in (x, y, noise_out)):
        ctx.refuse(f"its input and outputs are {[list(_dims(ctx, t)) for t in (x, y, noise_out)]}; num_channels is {channels}.")
    u32 = (1 << 32) - 1
    smoothing = (_int(ctx, opts, "smoothing", 0, u32), _int(ctx, opts, "alternate_smoothing", 0, u32))
    one_minus = (_int(ctx, opts, "one_minus_smoothing", 0, u32), _int(ctx, opts, "alternate_one_minus_smoothing", 0, u32))
    clamping = opts.get("clamping", False)
    if not isinstance(clamping, bool):
        ctx.refuse(f"its option 'clamping' is {clamping!r}; TFLite Micro's kernel takes a boolean.")
    prim = k.spectral_subtraction(channels, smoothing, one_minus, _int(ctx, opts, "min_signal_remaining", 0, u32),
                                  _int(ctx, opts, "smoothing_bits", 0, 31), _int(ctx, opts, "spectral_subtraction_bits", 0, 63), clamping)  # fmt: skip
    prim = kernel_attrs.with_state(prim, (k.SPECTRAL_STATE_PARAM,))
    both = ctx.emit("SIGNAL_FILTER_BANK_SPECTRAL_SUBTRACTION", prim, [ctx.expr(x), np.zeros(channels, np.uint32)],
                    (2, channels), "uint32", macs=3 * channels)  # fmt: skip
    rows = []
    for row in (0, 1):
        copy = copies.affine_copy((2, channels), "uint32", (channels,), [row, 0], [1, 1], [None, 0])
        rows.append(ctx.emit("SIGNAL_FILTER_BANK_SPECTRAL_SUBTRACTION", copy, [both], (channels,), "uint32", tag=f"_out{row}"))
    return relax.Tuple(rows)


@lowering("CUSTOM(SignalPCAN)", types=("uint32",))
def pcan(ctx: OpContext):
    _counts(ctx, 3, 1)
    x, noise, lut, y = ctx.inputs[0], ctx.inputs[1], ctx.inputs[2], ctx.outputs[0]
    _require(ctx, (x, noise, lut, y), ("uint32", "uint32", "int16", "uint32"), "input, noise estimate, gain table and output types")
    channels = _size(ctx, x)
    if len(_dims(ctx, x)) != 1 or _dims(ctx, noise) != _dims(ctx, x) or _dims(ctx, y) != _dims(ctx, x):
        ctx.refuse(f"its input {list(_dims(ctx, x))}, noise estimate {list(_dims(ctx, noise))} and output {list(_dims(ctx, y))} are not 1-D arrays of one length.")
    if _size(ctx, lut) < k.PCAN_LUT_MIN:
        ctx.refuse(f"its gain table has {_size(ctx, lut)} entries; TFLite Micro's kernel reads up to {k.PCAN_LUT_MIN}.")
    shift = _int(ctx, _options(ctx), "snr_shift", 0, 63)
    prim = k.pcan(channels, _size(ctx, lut), shift)
    return _emit(ctx, "SIGNAL_PCAN", prim, [ctx.expr(x), ctx.expr(noise), _flat(ctx, lut)], y, macs=3 * channels)


@lowering("CUSTOM(SignalFilterBankLog)", types=("uint32",))
def filter_bank_log(ctx: OpContext):
    _counts(ctx, 1, 1)
    x, y = ctx.inputs[0], ctx.outputs[0]
    _require(ctx, (x, y), ("uint32", "int16"), "input and output types")
    if len(_dims(ctx, x)) != 1 or _dims(ctx, y) != _dims(ctx, x):
        ctx.refuse(f"its input {list(_dims(ctx, x))} and output {list(_dims(ctx, y))} are not 1-D arrays of one length.")
    opts = _options(ctx)
    prim = k.filter_bank_log(_size(ctx, x), _int(ctx, opts, "input_correction_bits", 0, 31),
                             _int(ctx, opts, "output_scale", -(1 << 31), (1 << 31) - 1))  # fmt: skip
    return _emit(ctx, "SIGNAL_FILTER_BANK_LOG", prim, [ctx.expr(x), np.array(k.LOG_LUT, np.int32)], y, macs=2 * _size(ctx, x))
