"""`--stack auto`: the stack a firmware needs, bounded from the compiler's call graph, instead of a fixed
reservation (16 KiB by default, which dominated the RAM report of small models: 21,704 B total for a
5,000 B arena).

gcc writes, per translation unit, the call graph with each function's frame (``-fcallgraph-info=su``:
``*.ci`` files, one node per function with "N bytes (static)", one edge per call). The bound is the
deepest path of that graph:

- from the C entry ``em_reset_c`` (the naked ``Reset_Handler`` only paints the stack and branches to it;
  the call graph cannot see an ``asm`` branch) down through ``main``, ``edgemem_run`` and every kernel;
- from ``em_fault``, the fault report: the fault entries move MSP back to the top of the stack first, so
  that path starts from an empty stack and only has to fit on its own;
- plus, on top of the deepest point, one interrupt: the exception frame the core pushes (8 words, 26
  with the FPU's lazily stacked context, and a word of alignment) and the deepest handler
  (``*_irq_handler``). The runtime enables one interrupt (the timer), so nothing nests.

A function the graph names without a frame (newlib's memcpy/memset/strlen, libgcc helpers) is a leaf of
``LIBRARY_FRAME`` bytes. A recursive call or a frame gcc calls "dynamic" (alloca, a variable-length
array) has no bound: ``--stack auto`` refuses the build then, naming the function.

The reservation is the bound plus a margin (``margin_bytes``), rounded up to 8 bytes (AAPCS stack
alignment; the linker script asserts it). The profiling runtime paints the stack and reports the peak
the run really used (firmware/main.c), so a build run under QEMU shows measured <= bound <= reserved.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path

from edgemem.errors import ToolchainError

CALLGRAPH_FLAG = "-fcallgraph-info=su"  # gcc >= 10; with -fstack-usage's figures on each node
LIBRARY_FRAME = 64  # bytes allowed for a function without a frame in the graph (newlib/libgcc leaves)
ENTRY = "em_reset_c"
FAULT_ROOT = "em_fault"
_EXCEPTION_FRAME = {False: 32 + 4, True: 104 + 4}  # bytes the core stacks on exception entry (+ alignment)

_NODE = re.compile(r'node:\s*\{\s*title:\s*"([^"]+)"\s*label:\s*"([^"]*)"')
_EDGE = re.compile(r'edge:\s*\{\s*sourcename:\s*"([^"]+)"\s*targetname:\s*"([^"]+)"')
_FRAME = re.compile(r"\\n(\d+) bytes \(([a-z, ]+)\)")


@dataclass
class CallGraph:
    frames: dict[str, int] = field(default_factory=dict)  # function -> its own frame (bytes)
    unbounded: dict[str, str] = field(default_factory=dict)  # function -> gcc's "dynamic" qualifier
    callees: dict[str, set[str]] = field(default_factory=dict)

    def frame(self, fn: str) -> int:
        return self.frames.get(fn, LIBRARY_FRAME)


def read_callgraph(directory: str | Path) -> CallGraph:
    """The firmware's call graph from every ``*.ci`` file gcc wrote in ``directory``."""
    graph = CallGraph()
    files = sorted(Path(directory).glob("*.ci"))
    if not files:
        raise ToolchainError(
            f"no call-graph files (*.ci) in {directory}: --stack auto needs gcc's {CALLGRAPH_FLAG} (gcc 10 or "
            "later); rebuild the project, or give the stack size in bytes (--stack 4K)."
        )
    for ci in files:
        text = ci.read_text(errors="replace")
        for name, label in _NODE.findall(text):
            m = _FRAME.search(label)
            if m is None:
                continue  # a declaration: defined in another file or in a library
            graph.frames[name] = max(graph.frames.get(name, 0), int(m.group(1)))
            if "dynamic" in m.group(2) and "bounded" not in m.group(2):
                graph.unbounded[name] = m.group(2)
        for src, dst in _EDGE.findall(text):
            graph.callees.setdefault(src, set()).add(dst)
    return graph


def deepest(graph: CallGraph, root: str) -> tuple[int, list[str]]:
    """Bytes of the deepest call chain from ``root`` (its own frame included) and that chain."""
    memo: dict[str, tuple[int, list[str]]] = {}
    on_path: list[str] = []

    def walk(fn: str) -> tuple[int, list[str]]:
        if fn in memo:
            return memo[fn]
        if fn in on_path:
            cycle = " -> ".join(on_path[on_path.index(fn):] + [fn])
            raise ToolchainError(f"--stack auto cannot bound a recursive call chain ({cycle}); give the stack size "
                                 "in bytes (--stack 8K).")  # fmt: skip
        if fn in graph.unbounded:
            raise ToolchainError(f"--stack auto cannot bound function {fn}: gcc reports a dynamic stack frame "
                                 f"({graph.unbounded[fn]}); give the stack size in bytes (--stack 8K).")  # fmt: skip
        on_path.append(fn)
        below, chain = max((walk(c) for c in graph.callees.get(fn, ())), default=(0, []), key=lambda r: r[0])
        on_path.pop()
        memo[fn] = (graph.frame(fn) + below, [fn] + chain)
        return memo[fn]

    return walk(root)


@dataclass
class StackBound:
    main_bytes: int  # deepest chain from the C entry (what the painted peak of a run can reach)
    main_path: list[str]
    fault_bytes: int  # the fault report's chain, from an empty stack
    interrupt_bytes: int  # exception frame + deepest interrupt handler, on top of the main chain
    interrupt_handler: str | None

    @property
    def bytes(self) -> int:
        return max(self.main_bytes + self.interrupt_bytes, self.fault_bytes)


def stack_bound(directory: str | Path, has_fpu: bool) -> StackBound:
    """The worst-case stack of the firmware built in ``directory`` (see the module doc)."""
    graph = read_callgraph(directory)
    if ENTRY not in graph.frames:
        raise ToolchainError(f"the call graph in {directory} has no {ENTRY} (the runtime's C entry): is this an "
                             "edgemem firmware project?")  # fmt: skip
    main_bytes, main_path = deepest(graph, ENTRY)
    fault_bytes = deepest(graph, FAULT_ROOT)[0] if FAULT_ROOT in graph.frames else 0
    handlers = sorted(f for f in graph.frames if f.endswith("_irq_handler"))
    worst = max(((deepest(graph, h)[0], h) for h in handlers), default=(0, None))
    irq = _EXCEPTION_FRAME[has_fpu] + worst[0] if worst[1] else 0
    return StackBound(main_bytes, main_path, fault_bytes, irq, worst[1])


def margin_bytes(bound: int) -> int:
    """What ``--stack auto`` reserves above the bound: an eighth of it, at least 64 bytes (frames gcc
    cannot see exactly: library leaves bigger than LIBRARY_FRAME, a compiler-inserted helper)."""
    return max(64, -(-bound // 8))


def auto_stack_size(bound: StackBound) -> int:
    """The reservation for ``--stack auto``: bound + margin, a multiple of 8."""
    total = bound.bytes + margin_bytes(bound.bytes)
    return -(-total // 8) * 8
