"""Valid but odd int8 models, made from a seed, for differential fuzzing against TFLite Micro (benchmarks/fuzz.py
--target odd, tests/test_odd_models.py).

Odd the way no converter writes them, valid the way TFLM accepts them: tensor names duplicated, empty, or holding
C/shell/markup syntax (a command in `$(...)` that would touch a marker file); one-pixel and one-channel shapes;
1x1 pooling windows and windows narrower than their stride; extreme (but finite, positive) scales and zero points
anywhere in the int8 range; fan-out (a tensor read by several operators, or twice by one); dead-end tensors also
listed as outputs; long chains. Every operator here is one TFLM runs in int8.
"""

from __future__ import annotations

import sys
from dataclasses import dataclass
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "examples"))
import make_example_model as mm  # noqa: E402

HOSTILE_NAMES = [
    "", "x", "x", "*/ #error injected /*", "a\nb", "\\", "\"quoted\"", "[/x] [bold]markup[/bold]", "%s%n", "<script>",
    "$(touch {mark})", "`touch {mark}`", "; touch {mark} #", "${{shell touch {mark}}}", "名前", "tab\there", "a" * 300,
    "end\\",
]  # fmt: skip


@dataclass
class OddModel:
    data: bytes
    description: str  # the operators, for a report line


class _Gen:
    def __init__(self, seed: int, mark: str, max_ops: int):
        self.rng = np.random.default_rng(seed)
        self.mark = mark
        self.max_ops = max_ops
        self.mb = mm.ModelBuilder()
        self.tensors: list[tuple[int, tuple, dict]] = []  # (index, shape, quant) of every activation
        self.ops: list[str] = []

    # -- pieces
    def name(self, default: str) -> str:
        if self.rng.random() < 0.5:
            return HOSTILE_NAMES[self.rng.integers(len(HOSTILE_NAMES))].format(mark=self.mark)
        return default

    def quant(self) -> dict:
        scale = float(np.exp(self.rng.uniform(np.log(1e-4), np.log(20.0))))
        return mm.qparams(scale, int(self.rng.integers(-128, 128)))

    def act(self, shape, quant=None) -> int:
        quant = quant or self.quant()
        t = self.mb.tensor(self.name(f"t{len(self.mb.tensors)}"), shape, np.int8, quant)
        self.tensors.append((t, tuple(shape), quant))
        return t

    def pick(self, rank: int | None = 4):
        cands = [t for t in self.tensors if rank is None or len(t[1]) == rank]
        return cands[self.rng.integers(len(cands))] if cands else None

    # -- operators: each returns True when it added one
    def conv(self, depthwise: bool) -> bool:
        src = self.pick(4)
        if src is None:
            return False
        t, (n, h, w, c), q = src
        k, stride = int(self.rng.integers(1, 4)), int(self.rng.integers(1, 3))
        same = bool(self.rng.integers(2)) or h < k or w < k
        oh, ow = (-(-h // stride), -(-w // stride)) if same else ((h - k) // stride + 1, (w - k) // stride + 1)
        co = c if depthwise else int(self.rng.integers(1, 9))
        wshape = (1, k, k, co) if depthwise else (co, k, k, c)
        wq = self.rng.integers(-127, 128, wshape).astype(np.int8)
        ws = np.exp(self.rng.uniform(np.log(1e-3), np.log(0.1), co)).astype(np.float32)
        wt = self.mb.const(self.name("w"), wq, mm.qparams(ws, 0, 3 if depthwise else 0))
        bs = (ws * np.float32(q["scale"][0])).astype(np.float32)
        b = self.mb.const(self.name("b"), self.rng.integers(-5000, 5000, co).astype(np.int32), mm.qparams(bs, 0, 0))
        y = self.act((n, oh, ow, co))
        acti = [mm.ACT.NONE, mm.ACT.RELU, mm.ACT.RELU6][self.rng.integers(3)]
        pad = mm.PAD.SAME if same else mm.PAD.VALID
        if depthwise:
            self.mb.op(mm.OP.DEPTHWISE_CONV_2D, [t, wt, b], [y], *mm.depthwise_options(stride, pad, acti), version=3)
        else:
            self.mb.op(mm.OP.CONV_2D, [t, wt, b], [y], *mm.conv2d_options(stride, pad, acti), version=3)
        self.ops.append(f"{'DW' if depthwise else 'CONV'}{k}x{k}s{stride}")
        return True

    def pool(self) -> bool:
        src = self.pick(4)
        if src is None:
            return False
        t, (n, h, w, c), q = src
        fh, fw = int(self.rng.integers(1, min(h, 3) + 1)), int(self.rng.integers(1, min(w, 3) + 1))
        stride = int(self.rng.integers(1, 4))
        same = bool(self.rng.integers(2))
        oh, ow = (-(-h // stride), -(-w // stride)) if same else ((h - fh) // stride + 1, (w - fw) // stride + 1)
        kind = mm.OP.MAX_POOL_2D if self.rng.integers(2) else mm.OP.AVERAGE_POOL_2D
        y = self.act((n, oh, ow, c), q)  # TFLM's int8 pools keep the quantization
        self.mb.op(kind, [t], [y], *mm.pool2d_options((fh, fw), stride, mm.PAD.SAME if same else mm.PAD.VALID))
        self.ops.append(f"{'MAX' if kind == mm.OP.MAX_POOL_2D else 'AVG'}{fh}x{fw}s{stride}")
        return True

    def binary(self) -> bool:
        src = self.pick(None)
        if src is None:
            return False
        t, shape, _ = src
        same = [s for s in self.tensors if s[1] == shape]
        other = same[self.rng.integers(len(same))]  # possibly t itself: one tensor read twice by one operator
        kind = mm.OP.ADD if self.rng.integers(2) else mm.OP.MUL
        y = self.act(shape)
        self.mb.op(kind, [t, other[0]], [y], *(mm.add_options() if kind == mm.OP.ADD else mm.mul_options()))
        self.ops.append("ADD" if kind == mm.OP.ADD else "MUL")
        return True

    def fully_connected(self) -> bool:
        src = self.pick(None)
        if src is None:
            return False
        t, shape, q = src
        flat = int(np.prod(shape))
        if flat > 4096:
            return False
        if len(shape) != 2:
            r = self.act((1, flat), q)
            self.mb.op(mm.OP.RESHAPE, [t, self.mb.const(self.name("shape"), np.array([1, flat], np.int32))], [r],
                       *mm.reshape_options([1, flat]))  # fmt: skip
            self.ops.append("RESHAPE")
            t = r
        units = int(self.rng.integers(1, 17))
        ws = np.float32(np.exp(self.rng.uniform(np.log(1e-3), np.log(0.05))))
        wt = self.mb.const(self.name("fc/w"), self.rng.integers(-127, 128, (units, flat)).astype(np.int8), mm.qparams(ws, 0))
        b = self.mb.const(self.name("fc/b"), self.rng.integers(-5000, 5000, units).astype(np.int32),
                          mm.qparams(ws * np.float32(q["scale"][0]), 0))  # fmt: skip
        y = self.act((1, units))
        self.mb.op(mm.OP.FULLY_CONNECTED, [t, wt, b], [y], *mm.fully_connected_options(), version=4)
        self.ops.append("FC")
        return True

    def softmax(self) -> bool:
        src = self.pick(2)
        if src is None:
            return False
        y = self.act(src[1], mm.qparams(1.0 / 256, -128))  # TFLM's int8 SOFTMAX output quantization
        self.mb.op(mm.OP.SOFTMAX, [src[0]], [y], *mm.softmax_options(float(self.rng.choice([1.0, 0.5, 2.0]))))
        self.ops.append("SOFTMAX")
        return True

    def generate(self) -> OddModel:
        h, w, c = (int(v) for v in self.rng.integers(1, (13, 13, 9)))
        x = self.act((1, h, w, c))
        makers = [lambda: self.conv(False), lambda: self.conv(True), self.pool, self.pool, self.binary,
                  self.fully_connected, self.softmax]  # fmt: skip
        n_ops = int(self.rng.integers(1, self.max_ops + 1))
        tries = 0
        while len(self.mb.ops) < n_ops and tries < 10 * n_ops:
            tries += 1
            makers[self.rng.integers(len(makers))]()
        if not self.mb.ops:
            self.pool()
        produced = [t for t, _, _ in self.tensors[1:]]
        read = {i for op in self.mb.ops for i in op.inputs}
        outputs = [t for t in produced if t not in read] or [produced[-1]]
        if len(produced) > 1 and self.rng.random() < 0.3:  # an intermediate tensor also listed as an output
            extra = produced[self.rng.integers(len(produced) - 1)]
            outputs = sorted(set(outputs) | {extra})
        self.mb.description = self.name("odd")
        return OddModel(self.mb.serialize([x], outputs), " ".join(self.ops))


def odd_model(seed: int, mark: str, max_ops: int = 8) -> OddModel:
    """The model of ``seed``; hostile names that run a command would create the file ``mark``."""
    return _Gen(seed, mark, max_ops).generate()
