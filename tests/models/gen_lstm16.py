"""16x8 UNIDIRECTIONAL_SEQUENCE_LSTM models (int16 activations, int8 weights, int64 biases, int16 cell), made from
the converter's float32 LSTMs of gen_lstm.py (run with edgemem's Python, no TensorFlow needed:
`python tests/models/gen_lstm16.py [FILTER]`).

TensorFlow's converter refuses this operator in its 16x8 mode ("Quantization to 16x8-bit not yet supported for
op: 'UNIDIRECTIONAL_SEQUENCE_LSTM'"; the mode always takes the old quantizer, which marks the LSTM as not int16
quantizable), yet TFLite Micro runs it (EvalLstm<int16_t, int8_t, int16_t, int64_t>). So each float32 model's
LSTM is quantized here as the converter quantizes the 8x8->16 LSTM, with int16 where it has int8 activations:
- calibration: the converter's representative data (tests/models/convert.py: 32 seeded standard-normal
  samples) through a float LSTM in numpy (the state reset per sample), recording |x|, |h| and |c|;
- input, hidden state and output: int16, symmetric (zero point 0), scale max|.| / 32767;
- cell state: int16 with a power-of-two scale 2^ceil(log2 max|c|) / 32768 (TFLM requires a power of two);
- weights: int8 per tensor, symmetric, max|w| / 127; biases int64 at scale input x weight (float32 product).
A STRIDED_SLICE after the LSTM (return_sequences=False) is kept, on int16. Model edges are int16 (the int16 kind
of convert.py); two also with float edges (QUANTIZE and DEQUANTIZE around, the int16f kind). Writes
tests/models/ops/UNIDIRECTIONAL_SEQUENCE_LSTM-<variant>-<int16|iofloat-int16>.tflite.
`python tests/models/gen_lstm16.py denoiser OUT.tflite` writes a small 16x8 denoiser with float edges
(``denoiser16_model``: QUANTIZE, LSTM, FULLY_CONNECTED on 3-D, LOGISTIC, DEQUANTIZE) to OUT.
"""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
OPS = HERE / "ops"
OP = "UNIDIRECTIONAL_SEQUENCE_LSTM"
VARIANTS = ("seq-t10-i8-u12", "last-t10-i8-u12", "seq-t5-i3-u20", "seq-t10-i13-u16", "last-t5-i3-u8")
FLOAT_EDGES = ("seq-t10-i8-u12", "last-t10-i8-u12")  # also written with float edges (iofloat-int16)

# input positions in the TFLite operator (lstm_shared.h)
_X, _WX, _WH, _BIAS, _HIDDEN, _CELL = 0, (1, 2, 3, 4), (5, 6, 7, 8), (12, 13, 14, 15), 18, 19


def _builder():
    sys.path.insert(0, str(HERE.parents[1] / "examples"))
    import make_example_model as mm  # the project's flatbuffer writer

    return mm


def _sigmoid(v):
    return 1.0 / (1.0 + np.exp(-v))


def float_lstm(x: np.ndarray, wx: np.ndarray, wh: np.ndarray, bias: np.ndarray, cell_clip: float = 0.0):
    """The float LSTM (GATES order input, forget, cell, output; TANH cell activation) on x [T, I] from a zero
    state: (h [T, N], c [T, N])."""
    n = wx.shape[1]
    h, c = np.zeros(n), np.zeros(n)
    hs, cs = [], []
    for xt in x:
        pre = wx @ xt + wh @ h + bias  # [4, N]
        i, f, g, o = _sigmoid(pre[0]), _sigmoid(pre[1]), np.tanh(pre[2]), _sigmoid(pre[3])
        c = f * c + i * g
        if cell_clip > 0:
            c = np.clip(c, -cell_clip, cell_clip)
        h = o * np.tanh(c)
        hs.append(h)
        cs.append(c)
    return np.array(hs), np.array(cs)


def _read(path: Path):
    """(LSTM weights, options, STRIDED_SLICE after it or None) of a float32 converter-made model."""
    import tflite
    from tflite.BuiltinOperator import BuiltinOperator

    model = tflite.Model.GetRootAsModel(path.read_bytes(), 0)
    sg = model.Subgraphs(0)

    def value(i):
        t = sg.Tensors(i)
        dtype = {0: np.float32, 2: np.int32}[t.Type()]
        data = model.Buffers(t.Buffer()).DataAsNumpy()
        return np.frombuffer(data.tobytes(), dtype).reshape([int(d) for d in t.ShapeAsNumpy()] or [])

    code = lambda op: model.OperatorCodes(op.OpcodeIndex()).BuiltinCode()  # noqa: E731
    ops = [sg.Operators(k) for k in range(sg.OperatorsLength())]
    lstm = next(op for op in ops if code(op) == BuiltinOperator.UNIDIRECTIONAL_SEQUENCE_LSTM)
    ins = [int(i) for i in lstm.InputsAsNumpy()]
    opts = tflite.UnidirectionalSequenceLSTMOptions()
    opts.Init(lstm.BuiltinOptions().Bytes, lstm.BuiltinOptions().Pos)
    lstm_info = {
        "x_shape": [int(d) for d in sg.Tensors(ins[_X]).ShapeAsNumpy()],
        "wx": np.stack([value(ins[i]) for i in _WX]), "wh": np.stack([value(ins[i]) for i in _WH]),
        "bias": np.stack([value(ins[i]) for i in _BIAS]), "cell_clip": float(opts.CellClip()),
        "time_major": bool(opts.TimeMajor()), "activation": int(opts.FusedActivationFunction()),
    }  # fmt: skip
    out = int(lstm.OutputsAsNumpy()[0])
    slice_info = None
    for op in ops:
        if code(op) == BuiltinOperator.STRIDED_SLICE and int(op.InputsAsNumpy()[0]) == out:
            so = tflite.StridedSliceOptions()
            so.Init(op.BuiltinOptions().Bytes, op.BuiltinOptions().Pos)
            slice_info = {
                "consts": [value(int(i)) for i in op.InputsAsNumpy()[1:4]],
                "out_shape": [int(d) for d in sg.Tensors(int(op.OutputsAsNumpy()[0])).ShapeAsNumpy()],
                "masks": {"BeginMask": so.BeginMask(), "EndMask": so.EndMask(), "EllipsisMask": so.EllipsisMask(),
                          "NewAxisMask": so.NewAxisMask(), "ShrinkAxisMask": so.ShrinkAxisMask()},
            }  # fmt: skip
    return lstm_info, slice_info


def calibrate(info, seed: int = 0, count: int = 32) -> tuple[float, float, float]:
    """max |x|, |h|, |c| over the converter's representative samples (convert.representative)."""
    rng = np.random.default_rng(seed)
    shape = info["x_shape"][1:]
    mx = mh = mc = 0.0
    for _ in range(count):
        x = rng.standard_normal((1, *shape)).astype(np.float32)[0]
        h, c = float_lstm(x.astype(np.float64), info["wx"], info["wh"], info["bias"], info["cell_clip"])
        mx, mh, mc = max(mx, np.abs(x).max()), max(mh, np.abs(h).max()), max(mc, np.abs(c).max())
    return mx, mh, mc


def lstm16_model(wx, wh, bias, x_shape, x_scale, h_scale, c_scale, cell_clip=0.0, time_major=False, slice_info=None,
                 activation=4, x_zp=0, h_zp=0, bias_dtype=np.int64, float_edges=False) -> bytes:
    """A 16x8 LSTM (and a STRIDED_SLICE after it if ``slice_info``) from float weights [4, N, I], [4, N, N], biases
    [4, N] and the three activation scales; weights quantized per tensor, biases to int64. The converter's
    zero points are 0; ``x_zp``/``h_zp`` (TFLM applies them as offsets) and ``bias_dtype`` are for tests.
    ``float_edges``: a float32 input and output, QUANTIZE and DEQUANTIZE around (the converter's int16f kind)."""
    import tflite
    from tflite.BuiltinOperator import BuiltinOperator
    from tflite.BuiltinOptions import BuiltinOptions

    mm = _builder()
    n = wx.shape[1]
    steps = x_shape[0] if time_major else x_shape[1]
    sym = lambda s, zp=0: {"scale": [float(np.float32(s))], "zero_point": [int(zp)]}  # noqa: E731
    mb = mm.ModelBuilder()
    x = mb.tensor("x", x_shape, np.int16, quant=sym(x_scale, x_zp))
    model_in = x
    if float_edges:
        model_in = mb.tensor("x_float", x_shape, np.float32)
        mb.op(BuiltinOperator.QUANTIZE, [model_in], [x])
    ins = [x]
    w_scales = []
    for g in range(4):
        q, s = mm.quantize_symmetric(wx[g], None)
        w_scales.append(s[0])
        ins.append(mb.const(f"wx{g}", q, quant=sym(s[0])))
    for g in range(4):
        q, s = mm.quantize_symmetric(wh[g], None)
        ins.append(mb.const(f"wh{g}", q, quant=sym(s[0])))
    ins += [-1, -1, -1]
    for g in range(4):
        b_scale = np.float32(x_scale) * np.float32(w_scales[g])
        ins.append(mb.const(f"b{g}", np.round(bias[g] / np.float64(b_scale)).astype(bias_dtype), quant=sym(b_scale)))
    ins += [-1, -1]
    ins.append(mb.tensor("h", [1, n], np.int16, quant=sym(h_scale, h_zp), variable=True))
    ins.append(mb.tensor("c", [1, n], np.int16, quant=sym(c_scale), variable=True))
    ins += [-1, -1, -1, -1]
    y = mb.tensor("y", [steps, 1, n] if time_major else [1, steps, n], np.int16, quant=sym(h_scale, h_zp))

    def options(b):
        tflite.UnidirectionalSequenceLSTMOptionsStart(b)
        tflite.UnidirectionalSequenceLSTMOptionsAddFusedActivationFunction(b, activation)
        tflite.UnidirectionalSequenceLSTMOptionsAddCellClip(b, cell_clip)
        tflite.UnidirectionalSequenceLSTMOptionsAddTimeMajor(b, time_major)
        return tflite.UnidirectionalSequenceLSTMOptionsEnd(b)

    mb.op(BuiltinOperator.UNIDIRECTIONAL_SEQUENCE_LSTM, ins, [y], BuiltinOptions.UnidirectionalSequenceLSTMOptions, options)
    out = y
    if slice_info is not None:
        consts = [mb.const(f"ss{k}", np.asarray(v, np.int32)) for k, v in enumerate(slice_info["consts"])]
        out = mb.tensor("y_last", slice_info["out_shape"], np.int16, quant=sym(h_scale, h_zp))

        def slice_options(b):
            tflite.StridedSliceOptionsStart(b)
            for key, v in slice_info["masks"].items():
                getattr(tflite, f"StridedSliceOptionsAdd{key}")(b, v)
            return tflite.StridedSliceOptionsEnd(b)

        mb.op(BuiltinOperator.STRIDED_SLICE, [y, *consts], [out], BuiltinOptions.StridedSliceOptions, slice_options)
    if float_edges:
        out_float = mb.tensor("y_float", slice_info["out_shape"] if slice_info else [steps, 1, n] if time_major else [1, steps, n],
                              np.float32)  # fmt: skip
        mb.op(BuiltinOperator.DEQUANTIZE, [out], [out_float], version=2)
        out = out_float
    return mb.serialize([model_in], [out])


def from_float(path: Path, float_edges: bool = False) -> bytes:
    """The 16x8 model of a float32 converter-made LSTM model, quantized as the module doc says."""
    info, slice_info = _read(path)
    mx, mh, mc = calibrate(info)
    c_scale = 2.0 ** np.ceil(np.log2(mc)) / 32768
    return lstm16_model(info["wx"], info["wh"], info["bias"], info["x_shape"], mx / 32767, mh / 32767, c_scale,
                        info["cell_clip"], info["time_major"], slice_info, info["activation"], float_edges=float_edges)  # fmt: skip


def denoiser16_model(steps: int = 10, features: int = 16, units: int = 16, seed: int = 0) -> bytes:
    """A small 16x8 "denoiser" with float edges, as the converter would write it if it took a 16x8 LSTM:
    x float [1, T, F] -> QUANTIZE (int16) -> LSTM(units, return_sequences) -> FULLY_CONNECTED(F) on 3-D
    (keep_num_dims, per-channel int8 weights, int64 bias) -> LOGISTIC (int16, output scale 2^-15) -> DEQUANTIZE.
    Weights are seeded Keras-like initialisations (Glorot-uniform kernels, orthogonal recurrent kernels, the
    forget gate's bias 1), scales calibrated on the converter's representative data. The operator versions and
    FULLY_CONNECTED's options are the converter's for Dense + sigmoid on 3-D in 16x8 (probed with TF 2.21)."""
    import tflite
    from tflite.BuiltinOperator import BuiltinOperator as OP
    from tflite.BuiltinOptions import BuiltinOptions

    mm = _builder()
    rng = np.random.default_rng(seed)
    glorot = lambda fan_in, fan_out, shape: rng.uniform(-1, 1, shape) * np.sqrt(6 / (fan_in + fan_out))  # noqa: E731
    wx = glorot(features, 4 * units, (4, units, features))
    wh = np.stack([np.linalg.qr(rng.standard_normal((units, units)))[0] for _ in range(4)])
    bias = np.zeros((4, units))
    bias[1] = 1.0  # unit_forget_bias
    wd = glorot(units, features, (features, units))
    bd = rng.uniform(-0.2, 0.2, features)
    # calibration (convert.representative: 32 standard-normal samples of seed 0)
    cal = np.random.default_rng(0)
    mx = mh = mc = md = 0.0
    for _ in range(32):
        x = cal.standard_normal((1, steps, features)).astype(np.float32)[0].astype(np.float64)
        h, c = float_lstm(x, wx, wh, bias)
        d = h @ wd.T + bd
        mx, mh, mc, md = max(mx, np.abs(x).max()), max(mh, np.abs(h).max()), max(mc, np.abs(c).max()), max(md, np.abs(d).max())
    sym = lambda s: {"scale": [float(np.float32(s))], "zero_point": [0]}  # noqa: E731
    x_scale, h_scale, c_scale, d_scale = mx / 32767, mh / 32767, 2.0 ** np.ceil(np.log2(mc)) / 32768, md / 32767

    mb = mm.ModelBuilder()
    xf = mb.tensor("x", [1, steps, features], np.float32)
    xq = mb.tensor("x_int16", [1, steps, features], np.int16, quant=sym(x_scale))
    mb.op(OP.QUANTIZE, [xf], [xq])
    ins = [xq]
    w_scales = []
    for g in range(4):
        q, sc = mm.quantize_symmetric(wx[g], None)
        w_scales.append(sc[0])
        ins.append(mb.const(f"wx{g}", q, quant=sym(sc[0])))
    for g in range(4):
        q, sc = mm.quantize_symmetric(wh[g], None)
        ins.append(mb.const(f"wh{g}", q, quant=sym(sc[0])))
    ins += [-1, -1, -1]
    for g in range(4):
        b_scale = np.float32(x_scale) * np.float32(w_scales[g])
        ins.append(mb.const(f"b{g}", np.round(bias[g] / np.float64(b_scale)).astype(np.int64), quant=sym(b_scale)))
    ins += [-1, -1]
    ins.append(mb.tensor("h", [1, units], np.int16, quant=sym(h_scale), variable=True))
    ins.append(mb.tensor("c", [1, units], np.int16, quant=sym(c_scale), variable=True))
    ins += [-1, -1, -1, -1]
    hq = mb.tensor("lstm", [1, steps, units], np.int16, quant=sym(h_scale))

    def lstm_options(b):
        tflite.UnidirectionalSequenceLSTMOptionsStart(b)
        tflite.UnidirectionalSequenceLSTMOptionsAddFusedActivationFunction(b, 4)
        return tflite.UnidirectionalSequenceLSTMOptionsEnd(b)

    mb.op(OP.UNIDIRECTIONAL_SEQUENCE_LSTM, ins, [hq], BuiltinOptions.UnidirectionalSequenceLSTMOptions, lstm_options)
    wq, wsc = mm.quantize_symmetric(wd, 0)
    b_scales = (np.float32(h_scale) * wsc.astype(np.float32)).astype(np.float32)
    w_t = mb.const("dense_w", wq, quant={"scale": [float(v) for v in wsc], "zero_point": [0] * features, "quantized_dimension": 0})
    b_t = mb.const("dense_b", np.round(bd / b_scales.astype(np.float64)).astype(np.int64),
                   quant={"scale": [float(v) for v in b_scales], "zero_point": [0] * features, "quantized_dimension": 0})  # fmt: skip
    dq = mb.tensor("dense", [1, steps, features], np.int16, quant=sym(d_scale))

    def fc_options(b):
        tflite.FullyConnectedOptionsStart(b)
        tflite.FullyConnectedOptionsAddKeepNumDims(b, True)
        return tflite.FullyConnectedOptionsEnd(b)

    mb.op(OP.FULLY_CONNECTED, [hq, w_t, b_t], [dq], BuiltinOptions.FullyConnectedOptions, fc_options, version=5)
    mq = mb.tensor("mask_int16", [1, steps, features], np.int16, quant=sym(2.0**-15))
    mb.op(OP.LOGISTIC, [dq], [mq], version=2)
    mf = mb.tensor("mask", [1, steps, features], np.float32)
    mb.op(OP.DEQUANTIZE, [mq], [mf], version=2)
    return mb.serialize([xf], [mf])


if __name__ == "__main__":
    if len(sys.argv) == 3 and sys.argv[1] == "denoiser":  # gen_lstm16.py denoiser OUT.tflite
        Path(sys.argv[2]).write_bytes(denoiser16_model())
        sys.exit(0)
    only = sys.argv[1] if len(sys.argv) > 1 else None
    for variant in VARIANTS:
        if only and only not in f"{OP}-{variant}":
            continue
        for float_edges in (False, True) if variant in FLOAT_EDGES else (False,):
            name = f"{OP}-{variant}-{'iofloat-int16' if float_edges else 'int16'}.tflite"
            data = from_float(OPS / f"{OP}-{variant}-float32.tflite", float_edges)
            (OPS / name).write_bytes(data)
            print(f"{name}: {len(data)} B")
