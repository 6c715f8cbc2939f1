"""`--stack auto`: the reserved stack sized from gcc's call graph plus a margin, checked by painting under QEMU.

The oracle for the bound is the device: the firmware paints the stack and reports the deepest byte the run
touched (firmware/main.c), which the call graph's main chain must cover; a reservation below that peak must
fault (the stack sits at the bottom of RAM, under the MPU-allowed region), so the check can fail. The parser
is checked on hand-written call graphs whose deepest chains are worked out by hand below.
"""

from __future__ import annotations

import dataclasses
import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

from edgemem import budget, device_run, pipeline
from edgemem.errors import DoesNotFitError, EdgememError, ToolchainError
from edgemem.reference import seeded_inputs, tflm_outputs
from edgemem.target import stack

ROOT = Path(__file__).resolve().parents[1]
EXAMPLE = ROOT / "examples" / "kws_tiny_int8.tflite"


def _ci(path: Path, nodes: dict[str, str | None], edges: list[tuple[str, str]]) -> None:
    """A call-graph file in gcc's -fcallgraph-info format: frame text per node (None: a declaration)."""
    lines = [f'graph: {{ title: "{path.stem}.c"']
    for name, frame in nodes.items():
        label = f"{name}\\n{path.stem}.c:1:1" + (f"\\n{frame}" if frame else "")
        lines.append(f'node: {{ title: "{name}" label: "{label}"' + (" shape : ellipse" if frame is None else "") + " }")
    lines += [f'edge: {{ sourcename: "{a}" targetname: "{b}" label: "x.c:2:3" }}' for a, b in edges]
    path.write_text("\n".join(lines + ["}"]) + "\n")


def test_deepest_chain_across_files_with_library_leaves_and_interrupt(tmp_path):
    _ci(tmp_path / "startup.ci", {"em_reset_c": "8 bytes (static)", "main": None}, [("em_reset_c", "main")])
    _ci(tmp_path / "main.ci", {"main": "112 bytes (static)", "edgemem_run": None, "em_puts": None},
        [("main", "edgemem_run"), ("main", "em_puts")])  # fmt: skip
    _ci(tmp_path / "model.ci", {"edgemem_run": "24 bytes (static)", "k1": None, "k2": None},
        [("edgemem_run", "k1"), ("edgemem_run", "k2")])  # fmt: skip
    _ci(tmp_path / "kernels.ci", {"k1": "200 bytes (static)", "k2": "16 bytes (static)", "memcpy": None,
                                  "k_shared": "96 bytes (dynamic,bounded)"},
        [("k2", "memcpy"), ("k2", "k_shared")])  # fmt: skip
    _ci(tmp_path / "em_runtime.ci", {"em_puts": "40 bytes (static)", "em_fault": "56 bytes (static)",
                                     "em_timer_irq_handler": "16 bytes (static)"},
        [("em_fault", "em_puts")])  # fmt: skip
    b = stack.stack_bound(tmp_path, has_fpu=True)
    # em_reset_c 8 + main 112 + edgemem_run 24 + max(k1 200, k2 16 + max(memcpy 64, k_shared 96) = 112)
    assert b.main_bytes == 8 + 112 + 24 + 200 and b.main_path == ["em_reset_c", "main", "edgemem_run", "k1"]
    assert b.fault_bytes == 56 + 40  # from an empty stack
    assert b.interrupt_bytes == 108 + 16 and b.interrupt_handler == "em_timer_irq_handler"
    assert b.bytes == 344 + 124
    assert stack.auto_stack_size(b) == 536  # 468 + max(64, 468/8 -> 59) = 532, rounded up to 8
    assert stack.stack_bound(tmp_path, has_fpu=False).interrupt_bytes == 36 + 16


@pytest.mark.parametrize("frame, edges, message", [
    ("16 bytes (dynamic)", [], "dynamic stack frame"),
    ("16 bytes (static)", [("k", "k2"), ("k2", "k")], "recursive call chain"),
])  # fmt: skip
def test_unbounded_stack_is_refused(tmp_path, frame, edges, message):
    _ci(tmp_path / "a.ci", {"em_reset_c": "8 bytes (static)", "k": frame, "k2": "8 bytes (static)"},
        [("em_reset_c", "k"), *edges])  # fmt: skip
    with pytest.raises(ToolchainError, match=message):
        stack.stack_bound(tmp_path, has_fpu=False)


def test_no_call_graph_says_what_to_do(tmp_path):
    with pytest.raises(ToolchainError, match="--stack 4K"):
        stack.stack_bound(tmp_path, has_fpu=False)


def test_stack_size_must_be_a_multiple_of_8():
    from edgemem.board import load_board

    with pytest.raises(EdgememError, match="multiple of 8"):
        budget.with_stack(load_board("stm32f746"), 1001)
    assert budget.with_stack(load_board("stm32f746"), 4096).stack_size == 4096


@pytest.fixture(scope="module")
def auto_build(tmp_path_factory):
    proj = tmp_path_factory.mktemp("stack") / "auto"
    result = pipeline.build(EXAMPLE, "stm32f746", proj, pipeline.BuildOptions(stack="auto", opt_seconds=0))
    return proj, result


def test_auto_stack_is_the_bound_plus_margin_and_covers_the_painted_peak(auto_build):
    proj, result = auto_build
    info, st = result.info, result.info["stack"]
    assert st["auto"] and st["reserved_bytes"] == info["stack_reserved_bytes"] == result.sizes.stack_bytes
    assert st["reserved_bytes"] == stack.auto_stack_size(stack.stack_bound(proj, has_fpu=True))
    assert st["reserved_bytes"] < 2048  # not the board's 16 KiB reservation
    padding = result.sizes.arena_bytes - info["arena_bytes"]  # the arena section's alignment
    assert 0 <= padding < 32
    assert info["total_ram_bytes"] == info["arena_bytes"] + padding + info["static_ram_bytes"] + st["reserved_bytes"]
    x = seeded_inputs(EXAMPLE, 1)
    res = device_run.run(proj, x)
    assert res["bit_exact"] and res["arena_high_water_bytes"] == info["arena_bytes"]
    for out, ref in zip(res["output_arrays"], tflm_outputs(EXAMPLE, x)):
        assert (out == ref).all()
    measured = res["peak_stack_bytes"]
    # the call graph's main chain bounds what the run touched, and the headroom is the stated allowances
    assert measured <= st["main_path_bytes"] <= st["bound_bytes"] <= st["reserved_bytes"]
    headroom = st["reserved_bytes"] - measured
    assert headroom <= st["margin_bytes"] + st["interrupt_bytes"] + (st["main_path_bytes"] - measured)
    assert st["main_path_bytes"] - measured <= 64, "the call graph overestimates the painted peak by more than 64 B"
    # the QEMU run's total: everything but the headroom is used
    assert info["total_ram_bytes"] - res["total_ram_bytes"] == headroom + padding


def test_a_stack_below_the_painted_peak_faults(auto_build, tmp_path):
    """The control: the same model with the stack 64 bytes under the measured peak must not run. The build
    refuses such a --stack (below the call graph's bound), so the firmware is linked here by hand."""
    from edgemem.board import load_board
    from edgemem.target.toolchain import build_firmware

    proj, result = auto_build
    measured = device_run.run(proj)["peak_stack_bytes"]
    small = (measured - 64) // 8 * 8
    with pytest.raises(DoesNotFitError, match=f"below the stack the firmware can use: its call graph's bound is {result.info['stack']['bound_bytes']:,} B"):
        pipeline.build(EXAMPLE, "stm32f746", tmp_path / "refused", pipeline.BuildOptions(stack=small, opt_seconds=0))
    pipeline.build(EXAMPLE, "stm32f746", tmp_path / "small", pipeline.BuildOptions(stack=small, opt_seconds=0, compile=False))
    build_firmware(tmp_path / "small", dataclasses.replace(load_board("stm32f746"), stack_size=small))
    with pytest.raises(EdgememError, match="stack_overflow|fault"):
        device_run.run(tmp_path / "small")


def test_cli_stack_below_the_call_graph_bound_is_refused(tmp_path):
    """--stack 64 was accepted ("fits: true") and the firmware overflowed its stack: now exit 5 naming the bound."""
    out = tmp_path / "s64"
    proc = subprocess.run([sys.executable, "-m", "edgemem.cli", "build", str(EXAMPLE), "-b", "mps2-an386", "-o", str(out),
                           "--opt-time", "0", "--stack", "64", "--ways-time", "0"], capture_output=True, text=True, cwd=ROOT,
                          timeout=600)  # fmt: skip
    assert proc.returncode == 5, proc.stderr
    text = " ".join(proc.stderr.split())
    assert "Traceback" not in text and "--stack 64 is below" in text and "call graph's bound is" in text, text
    bound = int(re.search(r"bound is ([\d,]+) B", text).group(1).replace(",", ""))
    assert bound > 64 and f"--stack {auto_stack_size_of(bound):,}" in text
    assert sorted(p.name for p in out.iterdir()) == [".edgemem-output", "refusal.json", "report.html"]  # no project


def auto_stack_size_of(bound_bytes: int) -> int:
    from edgemem.target.stack import margin_bytes

    return -(-(bound_bytes + margin_bytes(bound_bytes)) // 8) * 8


def test_cli_stack_auto_and_units(tmp_path):
    out = tmp_path / "cli"
    base = [sys.executable, "-m", "edgemem.cli", "build", str(EXAMPLE), "-o", str(out), "--opt-time", "0"]
    proc = subprocess.run(base + ["--stack", "auto", "--ram", "64K", "--json"], capture_output=True, text=True, cwd=ROOT, timeout=600)
    assert proc.returncode == 0, proc.stderr
    info = json.loads(proc.stdout)
    assert info["board_ram_bytes"] == 64 * 1024 and info["stack"]["auto"]
    assert info["stack_reserved_bytes"] == info["stack"]["reserved_bytes"] < 2048
    proc = subprocess.run(base + ["--stack", "lots", "--force"], capture_output=True, text=True, cwd=ROOT, timeout=120)
    assert proc.returncode == 2 and "Traceback" not in proc.stderr


def test_auto_stack_on_cortex_m0_with_libgcc_calls(tmp_path):
    """The M0 has no divide instruction: the kernels call libgcc (__aeabi_uidivmod), a frame the call graph
    names without a size (LIBRARY_FRAME); the painted peak must still stay under the bound."""
    result = pipeline.build(EXAMPLE, "bbc-microbit", tmp_path / "m0", pipeline.BuildOptions(stack="auto", opt_seconds=0))
    st = result.info["stack"]
    assert st["interrupt_bytes"] >= 36  # no FPU: 8 stacked words + alignment, plus the handler
    res = device_run.run(tmp_path / "m0", seeded_inputs(EXAMPLE, 2))
    assert res["bit_exact"] and res["arena_high_water_bytes"] == result.info["arena_bytes"]
    assert res["peak_stack_bytes"] <= st["main_path_bytes"] <= st["reserved_bytes"] == result.sizes.stack_bytes
