"""The typed contract between passes and kernels (issue 18): kernels/kernel_attrs.py is the one place an
``edgemem.*`` PrimFunc attribute is named, kernel specs are frozen dataclasses whose JSON round-trips, and a
spec rebuilt through ``dataclasses.replace`` builds the kernel a fresh build of the same arguments gives."""

from __future__ import annotations

import dataclasses
import re
from pathlib import Path

import pytest

from edgemem.kernels import int8_ops, kernel_attrs
from edgemem.kernels.specs import (
    Conv2D,
    Depthwise,
    Depthwise16,
    Depthwise16Inplace,
    DepthwiseInplace,
    DequantizeFloat,
    KernelSpec,
    Pad,
    Requant,
)
from edgemem.passes import kernel_spec

ROOT = Path(__file__).resolve().parents[1] / "edgemem"
RQ = Requant(-3, -128, 127)


def test_no_attribute_key_outside_kernel_attrs():
    """Every key kernel_attrs defines appears as a string literal in kernel_attrs.py alone."""
    keys = [*kernel_attrs.KEYS, kernel_attrs.DOT, kernel_attrs.LANES]
    assert len(set(keys)) == len(keys) and all(k.startswith("edgemem.") for k in keys)
    pattern = re.compile("|".join(rf"""["']{re.escape(k)}["']""" for k in keys))
    found = [f"{p.relative_to(ROOT)}:{n}: {line.strip()}" for p in sorted(ROOT.rglob("*.py")) if p.name != "kernel_attrs.py"
             for n, line in enumerate(p.read_text().splitlines(), 1) if pattern.search(line)]  # fmt: skip
    assert found == []
    # and the grep sees a literal where there is one (the module itself)
    assert pattern.search((ROOT / "kernels" / "kernel_attrs.py").read_text())


SPECS = [
    Conv2D(x_shape=(1, 9, 9, 3), w_shape=(3, 3, 3, 8), out_shape=(1, 5, 5, 8), stride=(2, 2), dilation=(1, 1),
           pad=(1, 1, 1, 1), in_zp=-3, rq=RQ, folded=True),
    Depthwise(x_shape=[1, 6, 6, 4], w_shape=[3, 3, 4], out_shape=[1, 6, 6, 4], stride=[1, 1], dilation=[1, 1],
              pad=[1, 1, 1, 1], in_zp=5, rq=RQ, folded=True),
    DepthwiseInplace(x_shape=(1, 6, 6, 4), w_shape=(3, 3, 4), out_shape=(1, 6, 6, 4), stride=(1, 1), dilation=(1, 1),
                     pad=(1, 1, 1, 1), in_zp=5, rq=RQ, folded=True, delay=2),
    Depthwise16(x_shape=(1, 6, 6, 4), w_shape=(3, 3, 4), out_shape=(1, 6, 6, 4), stride=(1, 1), dilation=(1, 1),
                pad=(1, 1), has_bias=False, act=(-32768, 32767)),
    Depthwise16Inplace(x_shape=(1, 6, 6, 4), w_shape=(3, 3, 4), out_shape=(1, 6, 6, 4), stride=(1, 1), dilation=(1, 1),
                       pad=(1, 1), has_bias=True, act=(-100, 100), delay=2),
    Pad(x_shape=(1, 4, 4, 2), pad_before=(0, 1, 1, 0), pad_after=(0, 1, 1, 0), pad_value=-3),
    DequantizeFloat(shape=(1, 10), scale=0.0123, zero_point=-7),
]  # fmt: skip


@pytest.mark.parametrize("spec", SPECS, ids=lambda s: s.builder)
def test_spec_json_round_trip(spec):
    again = KernelSpec.from_json(spec.to_json())
    assert again == spec and type(again) is type(spec) and hash(again) == hash(spec)
    assert again.to_json() == spec.to_json()
    with pytest.raises(dataclasses.FrozenInstanceError):
        spec.builder_args = 1  # frozen


def test_specs_normalise_their_fields():
    """Lists and numpy scalars become tuples and Python numbers: one kernel, one JSON, one memo entry."""
    import numpy as np

    a = SPECS[1]
    b = Depthwise(x_shape=np.array([1, 6, 6, 4]), w_shape=(3, 3, np.int64(4)), out_shape=(1, 6, 6, 4), stride=(1, 1),
                  dilation=(1, 1), pad=(1, 1, 1, 1), in_zp=np.int32(5), rq={"out_zp": -3, "act_min": -128, "act_max": 127},
                  folded=True)  # fmt: skip
    assert a == b and a.to_json() == b.to_json() and a.x_shape == (1, 6, 6, 4) and isinstance(b.in_zp, int)


def test_unknown_builder_is_refused():
    with pytest.raises(ValueError, match="unknown builder"):
        KernelSpec.from_dict({"builder": "winograd"})


def test_build_carries_its_spec_and_is_memoized():
    spec = SPECS[0]
    prim = kernel_spec.build(spec)
    assert kernel_spec.of(prim) == spec and kernel_attrs.spec(prim) == spec
    assert kernel_spec.build(KernelSpec.from_json(spec.to_json())) is prim  # same JSON: the memo's kernel
    direct = int8_ops.conv2d_fast(spec.x_shape, spec.w_shape, spec.in_zp, spec.stride, spec.dilation, spec.pad,
                                  spec.out_shape, spec.rq)  # fmt: skip
    assert prim.without_attr(kernel_attrs.SPEC).script() == direct.script()


def test_replace_rebuilds_another_kernel():
    """A variant made with dataclasses.replace (what fold_pad does) is the kernel built from those arguments."""
    spec = SPECS[1]
    wider = dataclasses.replace(spec, x_shape=(1, 4, 4, 4), pad=(2, 2, 2, 2))
    assert type(wider) is Depthwise and wider.in_zp == spec.in_zp and wider != spec
    direct = int8_ops.depthwise_conv2d_fast((1, 4, 4, 4), spec.w_shape, spec.in_zp, spec.stride, spec.dilation,
                                            (2, 2, 2, 2), spec.out_shape, spec.rq)  # fmt: skip
    assert kernel_spec.build(wider).without_attr(kernel_attrs.SPEC).script() == direct.script()
    assert spec.in_place(3) == dataclasses.replace(SPECS[2], delay=3) and spec.in_place(3).out_of_place() == spec
    assert SPECS[4].out_of_place().in_place(2) == SPECS[4] and SPECS[0].out_of_place() is SPECS[0]


def test_accessors_round_trip():
    prim = int8_ops.pad((1, 2, 2, 1), (0, 1, 1, 0), (0, 1, 1, 0), 0)
    assert kernel_attrs.op(prim) is None and not kernel_attrs.is_kernel(prim) and kernel_attrs.macs(prim) == 0
    assert kernel_attrs.inplace(prim) is None and kernel_attrs.workspace(prim) is None and kernel_attrs.state(prim) == ()
    assert kernel_attrs.plain_output(prim) and kernel_attrs.spec(prim) is None and kernel_attrs.window(prim) is None
    p = kernel_attrs.with_kind(prim, "PAD", 12, symbol="pad_1")
    assert (kernel_attrs.op(p), kernel_attrs.macs(p), str(p.attrs["global_symbol"])) == ("PAD", 12, "pad_1")
    mark = kernel_attrs.Overlap("reverse", 48, 2)
    p = kernel_attrs.with_inplace(p, 0, mark)
    assert kernel_attrs.inplace(p) == kernel_attrs.Inplace(0, mark) and kernel_attrs.inplace(p).shift == 48
    out_of_place = kernel_attrs.without_inplace(p)
    assert kernel_attrs.inplace(out_of_place) is None and kernel_attrs.OVERLAP not in out_of_place.attrs
    p = kernel_attrs.with_inplace(p, 1)  # a plain in-place mark drops an earlier overlap
    assert kernel_attrs.inplace(p) == kernel_attrs.Inplace(1) and kernel_attrs.inplace(p).shift == 0
    p = kernel_attrs.with_state(kernel_attrs.with_workspace(p, 36), (4, 5))
    assert kernel_attrs.workspace(p) == 36 and kernel_attrs.state(p) == (4, 5) and not kernel_attrs.plain_output(p)
    w = kernel_attrs.Window((1, 8, 8, 3), (1, 4, 4, 3), (2, 2), (2, 2), (0, 0))
    assert kernel_attrs.window(kernel_attrs.with_window(p, w)) == w
    assert kernel_attrs.spec(kernel_attrs.without_spec(kernel_attrs.with_spec(p, SPECS[5]))) is None
    assert kernel_attrs.spec(kernel_attrs.with_spec(p, SPECS[5])) == SPECS[5]


def test_an_in_place_kernel_loses_restrict():
    """An element-wise kernel marked in place (inplace_elementwise) may have its output pointer equal to its
    input's: ``restrict`` on either would be undefined behaviour, so the C has none; unmarked, it keeps them."""
    from edgemem.codegen.kernels_c import prim_funcs_to_c

    prim = int8_ops.quantize_float((1, 4, 4, 8), 0.05, -3)  # a TE kernel: TVM marks it tirx.noalias
    def params(p) -> str:  # the definition's (prototypes never carry restrict)
        return re.search(r"rq\(([^)]*)\) \{", prim_funcs_to_c({"rq": p}).source).group(1)

    assert params(prim).count("restrict") == 2 and "restrict" not in params(kernel_attrs.with_inplace(prim, 0))
