"""What a refused build (exit 5) leaves in its output directory, and the sentence it adds to its message.

    refusal_message(error, ways, out_dir) -> str       the refusal's paragraph with its ways out, planned
    write_refusal(project, error, ways, message)        report.html + refusal.json, nothing else
    floor_refusal(...)                                  the operator at the flatbuffer floor and its tensors

The output directory of a refusal holds report.html, refusal.json (the --json error object, with ``ways_out``)
and the marker that edgemem made it (.edgemem-output), never part of a project: pipeline.build writes them on a
fresh temporary sibling and swaps it in as it would a project. There is no edgemem.json, so ``run``, ``flash`` and
``validate`` refuse the directory as not a build. report.html is the build's own report of the best plan found
(templates/report.html.j2: timeline, curves, operators), marked "does not fit", with a section naming the
operator and the tensors at the peak and the table of ways out (ways_out.py); a refusal before any plan (the
flatbuffer floor, the weights against the flash) gets a page of its own with the operator at the floor.
Every name shown comes from the model or a board file: jinja2 escapes it.
"""

from __future__ import annotations

import json
from pathlib import Path

import jinja2

REFUSAL_JSON = "refusal.json"

# the refusal's section: also included in the full report (templates/report.html.j2, as `refusal`)
SECTION = """<section id="refusal" style="border:2px solid #b91c1c;padding:8px 14px;border-radius:6px;margin:12px 0">
<p class="verdict" id="verdict-refused" style="color:#b91c1c;font-size:1.4em;font-weight:600;margin:4px 0">does not fit</p>
<p id="refusal-message">{{ refusal.message }}</p>
{% if refusal.peak %}<h2>At the peak: {{ refusal.peak.what }}</h2>
<table id="peak"><tr><th>tensor</th><th>role</th><th>shape</th><th>bytes</th></tr>
{% for t in refusal.peak.tensors %}<tr><td>{{ t.name }}</td><td>{{ t.role }}</td><td>{{ t.shape }}</td><td>{{ "{:,}".format(t.bytes) }}</td></tr>
{% endfor %}<tr><td>in all</td><td>{% if refusal.peak.align %}each rounded up to {{ refusal.peak.align }} B{% endif %}</td><td></td><td>{{ "{:,}".format(refusal.peak.bytes) }}</td></tr></table>{% endif %}
<h2>Ways out</h2>
<p>Each planned by the build's own stages with the flags shown (the arena a build with them takes; "fits": that
arena, in the default RAM region, and the firmware's static data as estimated before linking -- a kilobyte for the
runtime, and the runner's input buffer when the input is outside -- within the RAM left after the stack), in
{{ refusal.ways.seconds }} s of at most {{ refusal.ways.budget_seconds }} s. Slowdown: the predicted instructions of
the memory passes taken, against the fastest pass sequence tried with the same flags.</p>
<table id="ways"><tr><th>way</th><th>flags</th><th>arena (B)</th><th>RAM left (B)</th><th>verdict</th><th>MACs</th>
<th>instructions (predicted)</th><th>slowdown</th></tr>
{% for w in refusal.ways.ways %}<tr class="way" data-arena="{{ w.arena_bytes if w.arena_bytes is not none else '' }}"
data-fits="{{ 'yes' if w.fits else 'no' }}"><td>{{ w.way }}</td><td><code>{{ w.flags | join(' ') }}</code></td>
<td>{{ "{:,}".format(w.arena_bytes) if w.arena_bytes is not none else ("floor " ~ "{:,}".format(w.floor_bytes) if w.floor_bytes else "-") }}</td>
<td>{{ "{:,}".format(w.ram_left_bytes) if w.ram_left_bytes is not none else "-" }}</td>
<td>{% if w.fits %}fits ({{ "{:,}".format(w.ram_left_bytes - w.arena_bytes) }} B left for static data){% elif w.arena_bytes and w.static_estimate_bytes and w.ram_left_bytes and w.arena_bytes <= w.ram_left_bytes %}does not fit with the firmware's {{ "{:,}".format(w.static_estimate_bytes) }} B of static data{% else %}does not fit{% endif %}</td>
<td>{{ "{:,}".format(w.macs) if w.macs is not none else "-" }}</td>
<td>{{ "{:,}".format(w.instructions) if w.instructions is not none else "-" }}</td>
<td>{{ ("%+.1f %%" | format(w.slowdown_percent)) if w.slowdown_percent is not none else "-" }}</td></tr>
{% endfor %}</table>
{% if refusal.ways.ways and not refusal.ways.ways | selectattr("fits") | list %}<p id="none-fits">None of these fits{% if not refusal.ways.not_tried %}, no shipped board with more RAM included{% endif %}.</p>{% endif %}
{% for w in refusal.ways.ways if w.fits %}{% if loop.first %}<p>Commands:</p><ul>{% endif %}<li><code>{{ w.command }}</code></li>{% if loop.last %}</ul>{% endif %}{% endfor %}
{% if refusal.ways.not_tried %}<p id="not-tried">Not planned (the time budget ran out): {% for w in refusal.ways.not_tried %}{{ w.way }}{% if w.flags %} (<code>{{ w.flags | join(' ') }}</code>){% endif %}{{ "; " if not loop.last }}{% endfor %}.</p>{% endif %}
</section>
"""

_PAGE = jinja2.Environment(autoescape=True).from_string("""<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>edgemem: {{ model }} does not fit {{ board }}</title>
<style>body{font-family:sans-serif;max-width:70em;margin:2em auto}table{border-collapse:collapse}
td,th{border:1px solid #ccc;padding:.2em .6em;text-align:right}td:first-child,th:first-child{text-align:left}</style>
</head><body>
<h1>{{ model }} on {{ board }}</h1>
""" + SECTION + """
</body></html>
""")


def refusal_facts(error, ways: dict, message: str) -> dict:
    """What the refusal section shows: the message, the peak (of the best plan, or the operator at the floor),
    the ways out."""
    peak = None
    best = error.best_plan() if getattr(error, "best_plan", None) else None
    if best is not None and best.get("memory"):
        peak = _plan_peak(best["memory"])
    elif getattr(error, "refusal", None) is not None:
        peak = error.refusal()
    return {"message": message, "peak": peak, "ways": ways, "best": best}


def _plan_peak(memory: dict) -> dict:
    step = memory["steps"][memory["peak"]["step"]] if memory["steps"] else {}
    live = set(memory["peak"]["tensors"])
    tensors = [{"name": t["name"], "role": t["role"], "shape": "x".join(map(str, t["shape"])), "bytes": t["bytes"]}
               for t in memory["tensors"] if t["name"] in live]  # fmt: skip
    tensors.sort(key=lambda t: -t["bytes"])
    what = f"step {memory['peak']['step']}, operator {step.get('op', '')} ({step.get('kind', '')})"
    return {"what": what, "tensors": tensors, "bytes": memory["peak"]["bytes"], "align": memory["align"]}


def floor_refusal(model_path: Path, board, passes, floor: int, op_index: int, budget: int, input_outside: bool) -> dict:
    """The peak of a floor refusal (budget.check_floor): the operator at the floor and its tensors."""
    from ..frontend.footprint import op_names
    from ..frontend.tflite_import import read_tflite
    from ..memory import from_tflite

    model = read_tflite(model_path)
    mm = from_tflite(model, 1)
    op = mm.ops[mm.op_index.index(op_index)] if op_index in mm.op_index else None
    tensors = [] if op is None else [
        {"name": t.split(":", 1)[-1], "role": role, "shape": "", "bytes": int(mm.storages[t].size)}
        for role, names in (("input", op.reads), ("output", op.writes)) for t in names if t in mm.storages]
    kind = op_names(model)[op_index] if op_index >= 0 else ""
    return {"what": f"operator #{op_index} {kind}, at the floor of {floor:,} B (no order or pass goes lower; RAM "
                    f"left {budget:,} B)", "tensors": tensors, "bytes": floor, "align": None}  # fmt: skip


def refusal_message(error, ways: dict, out_dir: Path) -> str:
    """The refusal's paragraph followed by its ways out (planned, ways_out.py) and where its report is."""
    fits = [w for w in ways["ways"] if w["fits"]]
    shown = []
    for w in ways["ways"]:
        if w["arena_bytes"] is not None:
            arena = f"arena {w['arena_bytes']:,} B"
        elif w.get("floor_bytes"):
            arena = f"floor {w['floor_bytes']:,} B (refused before planning)"
        else:
            arena = "refused before an arena was planned"
        slower = f", {w['slowdown_percent']:+.1f} % predicted instructions" if w.get("slowdown_percent") is not None else ""
        verdict = "fits" if w["fits"] else "does not fit"
        if not w["fits"] and w["arena_bytes"] and w.get("static_estimate_bytes") and w["arena_bytes"] <= (w["ram_left_bytes"] or 0):
            verdict += f" with the firmware's {w['static_estimate_bytes']:,} B of static data"
        shown.append(f"{' '.join(w['flags']) or w['way']}: {arena} with {w['ram_left_bytes'] or 0:,} B of RAM left, "
                     f"{verdict}{slower}")  # fmt: skip
    text = str(error)
    if shown:
        text += f" Ways out, each planned: {'; '.join(shown)}."
    if not ways["budget_seconds"]:
        text += " Ways out not planned (--ways-time 0)."
    if ways["not_tried"]:
        text += f" Not planned (--ways-time): {'; '.join(' '.join(w['flags']) or w['way'] for w in ways['not_tried'])}."
    if fits:
        text += f" E.g.: {fits[0]['command']}."
    elif shown:
        text += f" None of these fits{'' if ways['not_tried'] else ', no shipped board with more RAM included'}."
    return text + f" The refusal's report: {out_dir / 'report.html'}."


def write_refusal(project: Path, error, ways: dict, message: str, model: str, board: str) -> None:
    """report.html (the best plan found, marked "does not fit", or the refusal's own page) and refusal.json."""
    from ..build_info import JSON_SCHEMA
    from ..errors import KINDS
    from .render import render_report

    facts = refusal_facts(error, ways, message)
    best = facts.pop("best")
    if best is not None:
        html = render_report(best, refusal=facts)
    else:
        html = _PAGE.render(model=model, board=board, refusal=facts)
    (project / "report.html").write_text(html, encoding="utf-8", errors="backslashreplace")
    obj = {"schema": JSON_SCHEMA, "error": {"exit_code": error.exit_code, "kind": KINDS[error.exit_code],
                                            "message": message, "arena_bytes": getattr(error, "arena_bytes", None),
                                            "ways_out": ways}}  # fmt: skip
    (project / REFUSAL_JSON).write_text(json.dumps(obj, indent=2) + "\n")
