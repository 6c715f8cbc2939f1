"""report.html of a build refused before lowering (the early floor, budget.check_floor): marked "does not fit",
the operator at the floor with its tensors, and ways out with figures computed from the flatbuffer (issue 33).

The figures are the floor (no order, placement or pass goes lower) and the file's operator order placed by the
cheap planners (budget.file_order_plan: what a plan of that order needs; the build's own search can only do
better). A way out is listed with both; one whose floor still exceeds the budget is said not to fit.
Every name shown comes from the model or a board file: jinja2 escapes it.
"""

from __future__ import annotations

from pathlib import Path

import jinja2

_PAGE = jinja2.Environment(autoescape=True).from_string("""<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>edgemem: {{ model }} does not fit {{ board }}</title>
<style>body{font-family:sans-serif;max-width:60em;margin:2em auto}table{border-collapse:collapse}
td,th{border:1px solid #ccc;padding:.2em .6em;text-align:right}td:first-child,th:first-child{text-align:left}
.verdict{color:#b00;font-size:1.4em}</style></head><body>
<h1>{{ model }} on {{ board }}</h1>
<p class="verdict" id="verdict">does not fit</p>
<p>{{ message }}</p>
<h2>At the floor: operator #{{ op_index }} {{ op_kind }}</h2>
<table id="peak"><tr><th>tensor</th><th>role</th><th>bytes</th></tr>
{% for t in tensors %}<tr><td>{{ t.name }}</td><td>{{ t.role }}</td><td>{{ "{:,}".format(t.bytes) }}</td></tr>
{% endfor %}</table>
<p>Floor {{ "{:,}".format(floor) }} B; RAM left after the {{ "{:,}".format(stack) }}-byte stack: {{ "{:,}".format(budget) }} B.
{% if assumed %}Assumed: {{ assumed }}.{% endif %}</p>
<h2>Ways out</h2>
<table id="ways"><tr><th>way</th><th>floor (B)</th><th>file-order plan (B)</th><th>RAM left (B)</th><th>verdict</th></tr>
{% for w in ways %}<tr><td>{{ w.way }}</td><td>{{ "{:,}".format(w.floor) }}</td><td>{{ "{:,}".format(w.plan) }}</td>
<td>{{ "{:,}".format(w.budget) }}</td><td>{{ w.verdict }}</td></tr>
{% endfor %}</table>
<p>"fits": the file's operator order already fits the RAM left; "may fit": the floor does, the file's order does
not (the build's search decides); "does not fit": even the floor exceeds it.</p>
</body></html>
""")


def _verdict(floor: int, plan: int, budget: int) -> str:
    return "fits" if plan <= budget else ("may fit" if floor <= budget else "does not fit")


def floor_refusal(model_path: Path, board, passes, floor: int, op_index: int, budget: int, message: str) -> dict:
    """What report.html shows for a floor refusal: the operator at the floor, its tensors, and the ways out (the
    input outside the arena; the smallest catalogue board whose RAM the file's order plan fits)."""
    from ..board import list_boards, load_board
    from ..budget import file_order_plan, patch_assumption, ram_budget
    from ..frontend.footprint import op_names, operator_floor_bytes
    from ..frontend.tflite_import import read_tflite
    from ..memory import from_tflite
    from ..passes.catalogue import floor_capabilities
    from ..plan import Buffer, plan_arena

    model = read_tflite(model_path)
    caps = floor_capabilities(passes, model)
    mm = from_tflite(model, 1)
    op = mm.ops[mm.op_index.index(op_index)] if op_index in mm.op_index else None
    tensors = [] if op is None else [
        {"name": t.split(":", 1)[-1], "role": role, "bytes": int(mm.storages[t].size)}
        for role, names in (("input", op.reads), ("output", op.writes)) for t in names if t in mm.storages]
    plan, _ = file_order_plan(model, board.arena_align)
    # the input outside: its storages leave the plan, and the floor counts no model input in a patch stage
    inputs = {s.name for s in mm.storages.values() if s.producer is None}
    ranges = mm.ranges(list(range(mm.n)))
    kept = [Buffer(r.name, max(int(r.size), 1), r.first, r.last, board.arena_align) for r in ranges if r.name not in inputs]
    out_plan = plan_arena(kept, algorithms=["greedy_by_size", "greedy_by_conflicts"]).total_bytes if kept else 0
    out_floor = operator_floor_bytes(model, capabilities=floor_capabilities(passes, model, True))[0]
    out_floor = min(out_floor, out_plan)
    ways = [{"way": "the input outside the arena (--input outside)", "floor": out_floor, "plan": out_plan,
             "budget": budget, "verdict": _verdict(out_floor, out_plan, budget)}]
    boards = []
    for name in list_boards():
        try:
            other = load_board(name)
            room = ram_budget(other)  # the build's own budget (a board without a QEMU stand-in cannot be built)
        except Exception:  # noqa: BLE001 - a board edgemem cannot build for is no way out
            continue
        if room >= floor and other.flash_bytes >= _weights(model) and name != board.name:
            boards.append((room < plan, room, name))  # one the file's order fits first, then the smallest
    if boards:
        _, room, name = min(boards)
        ways.append({"way": f"board {name}", "floor": floor, "plan": plan, "budget": room,
                     "verdict": _verdict(floor, plan, room)})
    else:
        ways.append({"way": "no board of the catalogue has the RAM for the floor", "floor": floor,
                     "plan": plan, "budget": budget, "verdict": "does not fit"})
    return {"model": model_path.name, "board": board.name, "message": message, "op_index": op_index,
            "op_kind": op_names(model)[op_index] if op_index >= 0 else "", "tensors": tensors, "floor": floor,
            "stack": board.stack_size, "budget": budget, "ways": ways,
            "assumed": patch_assumption(model, caps).removeprefix("; assumed: ")}


def _weights(model) -> int:
    from ..frontend.footprint import is_constant, tensor_bytes

    sg = model.Subgraphs(0)
    tensors = [sg.Tensors(t) for t in range(sg.TensorsLength())]
    return sum(tensor_bytes(t) for t in tensors if is_constant(model, t))


def write_refusal(project: Path, facts: dict) -> None:
    (project / "report.html").write_text(_PAGE.render(**facts))
