"""A user's own data for `edgemem validate --data`: read, shaped and quantized as the model's input takes it.

Two layouts, as users of Keras and Edge Impulse keep them:
- a ``.npz`` file with ``x`` (N samples) and optionally ``y`` (N integer labels, or N one-hot rows);
- a folder of ``.npy`` files, one sample each: directly in it (no labels), or in one subfolder per class
  (``data/<class>/*.npy``; the label is the class name when every name is an integer, else its index in
  sorted order).

Each sample must hold as many elements as the model input (a leading batch dimension of 1 may be left out).
Float samples of a quantized input are quantized with the input's scale and zero point, rounding half away from
zero as TFLite's QUANTIZE does; integer samples must already have the input's type.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np

from .errors import EdgememError

MAX_SAMPLES = 100_000  # each sample is one device run: beyond this, validation takes days under QEMU


@dataclass
class Dataset:
    x: list[np.ndarray]  # one array per sample, the model input's shape and dtype
    x_float: list[np.ndarray] | None  # the samples as floats (the user's, or dequantized) for a float reference model
    y: np.ndarray | None  # integer labels, or None
    classes: list[str]  # the class names (the labels' meaning), [] without labels
    source: str


def load_dataset(path: str | Path, spec) -> Dataset:
    """The samples at ``path`` for the model input ``spec`` (build_info.TensorSpec); EdgememError (one
    paragraph) for anything that is not such data."""
    path = Path(path)
    if path.is_dir():
        raw, y, classes = _read_folder(path)
    elif path.is_file():
        raw, y, classes = _read_npz(path)
    else:
        raise EdgememError(f"--data '{path}' does not exist: give a .npz file (x, optional y) or a folder of .npy samples.")
    if not 0 < len(raw) <= MAX_SAMPLES:
        raise EdgememError(f"--data '{path}' holds {len(raw):,} samples: give between 1 and {MAX_SAMPLES:,}.")
    if y is not None and len(y) != len(raw):
        raise EdgememError(f"--data '{path}': {len(raw):,} samples but {len(y):,} labels; give one label per sample.")
    x = [_as_input(np.asarray(s), spec, path, k) for k, s in enumerate(raw)]
    floats = [np.asarray(s, np.float32).reshape(spec.shape) for s in raw] if _is_float(raw[0]) else None
    if floats is None and spec.scale is not None and not isinstance(spec.scale, list):
        floats = [((s.astype(np.float32) - np.float32(spec.zero_point or 0)) * np.float32(spec.scale)) for s in x]
    return Dataset(x, floats, y, classes, str(path))


def _read_npz(path: Path):
    try:
        with np.load(path, allow_pickle=False) as z:
            if "x" not in z.files:
                raise EdgememError(f"--data '{path}' has no array named 'x' (it holds {', '.join(z.files) or 'none'}): "
                                   "save the samples as x (and labels as y), e.g. np.savez(path, x=x, y=y).")  # fmt: skip
            x, y = z["x"], z["y"] if "y" in z.files else None
    except EdgememError:
        raise
    except Exception as exc:  # not a zip, a pickled object array, a truncated file: numpy's own reasons
        raise EdgememError(f"--data '{path}' could not be read as a .npz file ({type(exc).__name__}: {exc}). Save it "
                           "with numpy: np.savez(path, x=samples, y=labels).") from None  # fmt: skip
    if x.ndim < 1:
        raise EdgememError(f"--data '{path}': x is a scalar; give an array of samples (N, ...).")
    return list(x), None if y is None else _labels(y, path), []


def _read_folder(path: Path):
    subfolders = sorted(p for p in path.iterdir() if p.is_dir())
    if not subfolders:
        return [_read_npy(f) for f in sorted(path.glob("*.npy"))], None, []
    names = [p.name for p in subfolders]
    numeric = all(n.isdigit() for n in names)
    samples, labels = [], []
    for k, folder in enumerate(subfolders):
        for f in sorted(folder.glob("*.npy")):
            samples.append(_read_npy(f))
            labels.append(int(folder.name) if numeric else k)
    return samples, np.asarray(labels, np.int64), [] if numeric else names


def _read_npy(f: Path) -> np.ndarray:
    try:
        return np.load(f, allow_pickle=False)
    except Exception as exc:
        raise EdgememError(f"--data sample '{f}' could not be read as a .npy file ({type(exc).__name__}: {exc}).") from None


def _labels(y: np.ndarray, path: Path) -> np.ndarray:
    if y.ndim == 2:  # one-hot (or scores): the class of each row
        y = np.argmax(y, axis=1)
    if y.ndim != 1 or not np.issubdtype(y.dtype, np.integer):
        raise EdgememError(f"--data '{path}': y must be integer labels (N,) or one-hot rows (N, classes), got "
                           f"{y.dtype}{list(y.shape)}.")  # fmt: skip
    if len(y) and y.min() < 0:
        raise EdgememError(f"--data '{path}': label {int(y.min())} is negative; labels are class indices 0, 1, ...")
    return y.astype(np.int64)


def _is_float(sample) -> bool:
    return np.issubdtype(np.asarray(sample).dtype, np.floating)


def _as_input(sample: np.ndarray, spec, path: Path, k: int) -> np.ndarray:
    want = np.dtype(spec.dtype)
    if sample.size != int(np.prod(spec.shape, dtype=np.int64)):
        raise EdgememError(f"--data '{path}': sample {k} has {sample.size:,} elements {list(sample.shape)} but the model "
                           f"input '{spec.name}' takes {spec.dtype}{spec.shape}; give samples of that shape.")  # fmt: skip
    sample = sample.reshape(spec.shape)
    if _is_float(sample) and np.issubdtype(want, np.floating):
        return sample.astype(want)
    if _is_float(sample):
        if spec.scale is None or isinstance(spec.scale, list):
            raise EdgememError(f"--data '{path}': float samples, but input '{spec.name}' ({spec.dtype}) has no single "
                               "scale to quantize them with; give samples of the input's type.")  # fmt: skip
        if not np.all(np.isfinite(sample)):
            raise EdgememError(f"--data '{path}': sample {k} holds NaN or infinite values.")
        info = np.iinfo(want)
        scaled = sample.astype(np.float64) / float(spec.scale)
        q = np.sign(scaled) * np.floor(np.abs(scaled) + 0.5) + float(spec.zero_point or 0)  # half away from zero
        return np.clip(q, info.min, info.max).astype(want)
    if sample.dtype != want:
        raise EdgememError(f"--data '{path}': sample {k} is {sample.dtype}, the model input '{spec.name}' is "
                           f"{spec.dtype}; give {spec.dtype} samples, or floats to be quantized with its scale.")  # fmt: skip
    return sample
