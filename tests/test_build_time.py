"""Build time (issue 33): the shortcuts that make a build faster leave what it builds unchanged.

- TVMScript parsing (kernels/tvmscript_macros.py): names and constants are evaluated without compiling them and
  other expression shapes compile once; the oracle is TVM's own evaluator, put back for a second parse of the
  same kernels, which must give structurally equal PrimFuncs.
- Kernel C generation (codegen/kernels_c.py) lowers a model's kernels in a few modules on threads; the oracle is
  the same kernels lowered in one module on one thread, which must give the same C, byte for byte.
benchmarks/build_time.py measures the time, and its outputs were diffed byte for byte against the build before
these changes on every shared model (benchmarks/build_time.md).
"""

from __future__ import annotations

import threading
from pathlib import Path

import pytest
import tvm_ffi
from tvm.script.parser.core import evaluator
from tvm.script.parser.core import utils as parser_utils

from edgemem.codegen import kernels_c
from edgemem.codegen.model_c import compile_kernels
from edgemem.frontend.tflite_import import import_tflite
from edgemem.ir.graph import read_graph
from edgemem.kernels import tvmscript_macros
from edgemem.passes import kernel_spec
from edgemem.passes.lower import lower_to_kernels

EXAMPLE = Path(__file__).resolve().parents[1] / "examples" / "kws_tiny_int8.tflite"


def _lowered_ops():
    """The example model's kernels, every one parsed afresh (the spec memo emptied first)."""
    kernel_spec._build_cached.cache_clear()
    model = import_tflite(EXAMPLE)
    return read_graph(lower_to_kernels(model.relax_mod, model.op_labels)).ops


def test_kernels_parse_the_same_with_tvms_own_evaluator(monkeypatch):
    calls = {"all": 0, "slow": 0}
    fast, slow = evaluator._eval_expr, tvmscript_macros._eval_slow
    assert fast is tvmscript_macros._eval_expr  # installed by importing the kernels

    def counted(node, table):
        calls["all"] += 1
        return fast(node, table)

    def counted_slow(node, table):
        calls["slow"] += 1
        return slow(node, table)

    with monkeypatch.context() as m:
        m.setattr(evaluator, "_eval_expr", counted)
        m.setattr(tvmscript_macros, "_eval_slow", counted_slow)
        tvmscript_macros._codes.clear()
        quick = _lowered_ops()
    # TVM compiled every expression; now names, constants and shapes already met take no compile
    assert calls["all"] > 1000 and calls["slow"] < 0.05 * calls["all"], calls
    with monkeypatch.context() as m:  # TVM's own evaluator and annotation reader
        m.setattr(evaluator, "_eval_expr", slow)
        m.setattr(parser_utils, "_collect_annotation_names", tvmscript_macros._collect_annotation_names)
        plain = _lowered_ops()
    kernel_spec._build_cached.cache_clear()
    assert [op.name for op in quick] == [op.name for op in plain]
    for a, b in zip(quick, plain):
        assert tvm_ffi.structural_equal(a.prim, b.prim), a.name


def test_kernel_c_lowered_on_threads_is_the_one_module_c(monkeypatch):
    model = import_tflite(EXAMPLE)
    graph = read_graph(lower_to_kernels(model.relax_mod, model.op_labels))
    threads = set()
    lower = kernels_c._lower_and_print

    def on_thread(funcs):
        threads.add(threading.get_ident())
        return lower(funcs)

    with monkeypatch.context() as m:
        m.setattr(kernels_c, "_lower_and_print", on_thread)
        m.setattr(kernels_c, "_PARALLEL_KERNELS", 2)
        m.setattr(kernels_c.os, "cpu_count", lambda: 3)
        assert len(kernels_c._chunks([op.name for op in graph.ops])) == 3
        split = compile_kernels(graph)
    assert len(threads) == 3
    with monkeypatch.context() as m:
        m.setattr(kernels_c, "_PARALLEL_KERNELS", 10**9)  # one module, this thread
        whole = compile_kernels(graph)
    assert len(graph.ops) >= 3
    assert split.source == whole.source and split.header == whole.header
    assert (split.scratch_bytes, split.const_params, split.param_ctypes) == \
        (whole.scratch_bytes, whole.const_params, whole.param_ctypes)  # fmt: skip


@pytest.mark.parametrize("cores, kernels, chunks", [(1, 30, 1), (2, 30, 2), (16, 30, 4), (2, 3, 1)])
def test_kernels_split_over_the_cores(monkeypatch, cores, kernels, chunks):
    monkeypatch.setattr(kernels_c.os, "cpu_count", lambda: cores)
    names = [f"k{i}" for i in range(kernels)]
    split = kernels_c._chunks(names)
    assert len(split) == chunks and sorted(n for c in split for n in c) == sorted(names)
