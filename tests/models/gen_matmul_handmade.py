"""Hand-made models of the matmul family that TF's converter does not write (run with edgemem's venv, from the
repository: `python tests/models/gen_matmul_handmade.py`): SVDF (no Keras layer converts to it) and SOFTMAX with
beta != 1 (TF 2.21 keeps a scaling as a MUL). Written with the builders of tests/test_ops_matmul.py into
tests/models/ops/<OPNAME>-<variant>-<int8|float32>.tflite, next to the converter's models.
"""

from __future__ import annotations

import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))

import numpy as np  # noqa: E402
import test_ops_matmul as t  # noqa: E402  (it puts examples/ on the path)

mm = t.mm

MODELS = {
    "SVDF-rank1-int8": t.svdf_model(1, 12, 6, 5, 1),
    "SVDF-rank2-int8state-int8": t.svdf_model(1, 10, 4, 3, 2, state_dtype=np.int8, state_q=(0.05, 9), seed=2),
    "SVDF-rank2-relu-float32": t.svdf_model(1, 9, 6, 4, 2, dtype=np.float32, act=mm.ACT.RELU, seed=3),
    "SOFTMAX-beta2.5-int8": t.unary_model("SOFTMAX", (1, 10), options=mm.softmax_options(2.5)),
    "SOFTMAX-beta0.4-float32": t.unary_model("SOFTMAX", (2, 9), dtype=np.float32, options=mm.softmax_options(0.4)),
}


def main() -> int:
    for name, data in MODELS.items():
        (HERE / "ops" / f"{name}.tflite").write_bytes(data)
        print(f"{name}.tflite: {len(data)} B")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
