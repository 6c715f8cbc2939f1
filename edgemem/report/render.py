"""report.html: one self-contained page (inline CSS, SVG and a few lines of JS; no network) per build.

    render_report(info, profile=None) -> str        write_report(out_dir, info=None, profile=None) -> Path

``info`` is the build's BuildInfo (edgemem.json; its "memory" section, see data.py, draws the timeline and the
curves); ``profile`` is `edgemem profile`'s profile.json, whose measured figures go next to the planned ones.
The geometry (which pixel is which byte and step) is computed here; templates/report.html.j2 only draws it.
"""

from __future__ import annotations

import json
import math
from functools import lru_cache
from pathlib import Path

import jinja2
from markupsafe import Markup

from ..build_info import BuildInfo, load_build_info
from ..codegen.escape import json_in_html
from ..codegen.templates import TEMPLATES_DIR

REPORT_HTML = "report.html"
PROFILE_JSON = "profile.json"  # as profiling.PROFILE_JSON (not imported: that module pulls in QEMU and serial)
TEMPLATE = "report.html.j2"

# Geometry of the timeline and the curves chart (CSS pixels): the plot areas share their x scale, so a
# step's column in the curves chart sits under the same column of the timeline.
LEFT, RIGHT, TOP, BOTTOM = 84, 24, 30, 40
PLOT_W = 1060
TIMELINE_H = 300
MIN_RECT_H = 3.0
CURVES_H = 240
WIDTH = LEFT + PLOT_W + RIGHT

PEAK_FILL = "#e8590c"  # tensors live at the peak step
INPUT_FILL = "#8d99a6"
WORKSPACE_FILL = "#c9c2b8"
KIND_FILLS = ("#4c78a8", "#72b7b2", "#54a24b", "#b279a2", "#5f9ed1", "#9d755d", "#8cd17d", "#7a6fb0", "#86bcb6",
              "#a0cbe8", "#6b9e78", "#c39bd3")  # fmt: skip
CURVE_COLOURS = {"file": "#4c78a8", "rpo": "#54a24b", "hierarchical": "#b279a2", "exact": "#9d755d"}


@lru_cache(maxsize=1)
def _environment() -> jinja2.Environment:
    env = jinja2.Environment(
        loader=jinja2.FileSystemLoader(str(TEMPLATES_DIR)),
        undefined=jinja2.StrictUndefined,
        autoescape=True,  # tensor and model names go into HTML
        trim_blocks=True,
        lstrip_blocks=True,
    )
    env.filters["n"] = _n
    env.filters["shape"] = _shape
    env.filters["kib"] = _kib
    env.filters["signed"] = lambda v: "0" if v == 0 else f"{v:+,}"
    return env


def _n(value) -> str:
    """1234567 -> '1,234,567'; None -> '-'."""
    if value is None:
        return "-"
    if isinstance(value, float):
        return f"{value:,.2f}"
    return f"{value:,}"


def _kib(value) -> str:
    return "-" if value is None else f"{value / 1024:,.1f} KiB"


def _shape(shape) -> str:
    return "\u00d7".join(str(d) for d in shape) if shape else "scalar"


def _nice_step(span: float, ticks: int) -> float:
    """A 1-2-5 tick spacing giving about ``ticks`` ticks over ``span``."""
    if span <= 0:
        return 1
    raw = span / max(ticks, 1)
    mag = 10 ** math.floor(math.log10(raw))
    return next(m * mag for m in (1, 2, 2.5, 5, 10) if m * mag >= raw)


def _byte_label(v: float) -> str:
    return f"{int(round(v)):,}"


def _y_ticks(top: float, height: float, y0: float) -> list[dict]:
    step = _nice_step(top, 6)
    ticks, v = [], 0.0
    while v <= top + 1e-9:
        ticks.append({"y": round(y0 - v / top * height, 2) if top else y0, "label": _byte_label(v)})
        v += step
    return ticks


def _x_ticks(n: int, sw: float) -> list[dict]:
    every = max(1, math.ceil(36 / sw)) if sw > 0 else 1
    if every > 1:
        every = int(_nice_step(every * 5, 5))  # 1, 2, 5, 10, ...
    return [{"x": round(LEFT + (s + 0.5) * sw, 2), "label": str(s)} for s in range(0, n, every)]


_SHORT = (("DEPTHWISE_CONV_2D", "DW_CONV"), ("FULLY_CONNECTED", "FC"), ("AVERAGE_POOL_2D", "AVG_POOL"),
          ("MAX_POOL_2D", "MAX_POOL"), ("CONCATENATION", "CONCAT"), ("TRANSPOSE_CONV", "TCONV"), ("CONV_2D", "CONV"),
          ("UNIDIRECTIONAL_SEQUENCE_LSTM", "LSTM"), ("RESIZE_NEAREST_NEIGHBOR", "RESIZE_NN"))  # fmt: skip
LABEL_CHAR_W = 6.2  # about the width of one character of the 10 px labels


def short_kind(kind: str) -> str:
    for long, short in _SHORT:
        if kind == long:
            return short
    return kind if len(kind) <= 14 else kind[:13] + "\u2026"


def _kind_labels(steps: list[dict], sw: float) -> tuple[list[dict], str, float]:
    """The operator kinds under the step columns: (labels, "flat" | "rotated" | "", room they need below)."""
    labels = [{"x": round(LEFT + (s + 0.5) * sw, 2), "label": short_kind(st["kind"]), "kind": st["kind"]} for s, st in enumerate(steps)]
    longest = max((len(x["label"]) for x in labels), default=0) * LABEL_CHAR_W
    if longest <= sw - 6:
        return labels, "flat", 14.0
    if sw >= 11:
        return labels, "rotated", longest + 8
    return [], "", 0.0


def _rect_label(t: dict, w: float, h: float) -> str:
    """The tensor's name (and size) written in its rectangle's top left corner when there is room; only in
    rectangles tall enough that their middle stays clear of it."""
    if h < 28:
        return ""
    name = t["name"] if t["role"] in ("activation", t["name"]) else f"{t['name']} ({t['role']})"
    for text in (f"{name}  {t['bytes']:,} B", name):
        if len(text) * LABEL_CHAR_W + 8 <= w:
            return text
    return ""


def _tip(t: dict, steps: list[dict]) -> str:
    def who(s: int | None) -> str:
        if s is None:
            return "the caller (model input)"
        return f"step {s} {steps[s]['kind']} ({steps[s]['op']})" if s < len(steps) else f"step {s}"

    lines = [f"{t['name']}  {_shape(t['shape'])} {t['dtype']}  {t['bytes']:,} B",
             f"pool {t['pool']}, offset {t['offset']:,}..{t['offset'] + t['bytes']:,}",
             f"live steps {t['first']}..{t['last']}" if t["first"] != t["last"] else f"live at step {t['first']} only",
             f"made by {who(t['producer'])}"]  # fmt: skip
    if t["role"] == "workspace":
        lines[-1] = f"scratch of {who(t['producer'])}"
    readers = [who(c) for c in t["consumers"]]
    if readers:
        lines.append("read by " + "; ".join(readers[:6]) + (f"; and {len(readers) - 6} more" if len(readers) > 6 else ""))
    if t["role"] == "output":
        lines.append("model output (kept to the end)")
    if t.get("alias"):
        lines.append(f"written in place over {t['alias']}")
    if t.get("views"):
        lines.append("also seen as " + ", ".join(t["views"]))
    return "\n".join(lines)


def _fills(memory: dict) -> tuple[dict, dict]:
    """Colour of each tensor (the producer's kind; inputs and scratch grey; the peak's tensors orange)."""
    kinds: dict[str, str] = {}
    for step in memory["steps"]:
        kinds.setdefault(step["kind"], KIND_FILLS[len(kinds) % len(KIND_FILLS)])
    peak = set(memory["peak"]["tensors"])
    fills = {}
    for t in memory["tensors"]:
        if t["name"] in peak:
            fills[t["name"]] = PEAK_FILL
        elif t["role"] == "input":
            fills[t["name"]] = INPUT_FILL
        elif t["role"] == "workspace":
            fills[t["name"]] = WORKSPACE_FILL
        else:
            fills[t["name"]] = kinds.get(memory["steps"][t["producer"]]["kind"], KIND_FILLS[0])
    return fills, kinds


def _timeline(info: BuildInfo, memory: dict) -> list[dict]:
    """One SVG panel per pool: each tensor a rectangle, x = its live steps, y = its planned offset."""
    steps, n = memory["steps"], max(len(memory["steps"]), 1)
    sw = PLOT_W / n
    fills, _ = _fills(memory)
    peak = memory["peak"]
    panels = []
    for pool in memory["pools"]:
        group = [t for t in memory["tensors"] if t["pool"] == pool]
        size = max([info.arena_pools.get(pool, 0)] + [t["offset"] + t["bytes"] for t in group] + [1])
        k = TIMELINE_H / size  # pixels per byte
        y0 = TOP + TIMELINE_H
        rects = []
        for t in sorted(group, key=lambda t: -t["bytes"]):  # small ones last: drawn on top
            h = max(t["bytes"] * k, MIN_RECT_H)  # tiny tensors stay visible (and hoverable), growing upwards
            rects.append({
                "name": t["name"], "x": round(LEFT + t["first"] * sw, 2), "w": round((t["last"] - t["first"] + 1) * sw, 2),
                "y": round(y0 - t["offset"] * k - h, 2), "h": round(h, 2), "fill": fills[t["name"]],
                "peak": t["name"] in peak["tensors"], "tip": _tip(t, steps), "tensor": t,
                "label": _rect_label(t, (t["last"] - t["first"] + 1) * sw, h),
            })  # fmt: skip
        in_pool = [t for t in group if t["first"] <= peak["step"] <= t["last"]]
        labels, mode, room = _kind_labels(steps, sw)
        panels.append({
            "pool": pool, "size": size, "width": WIDTH, "height": TOP + TIMELINE_H + BOTTOM + room, "rects": rects,
            "y_ticks": _y_ticks(size, TIMELINE_H, y0), "x_ticks": _x_ticks(len(steps), sw),
            "kind_labels": labels, "label_mode": mode, "label_room": room,
            "peak_x": round(LEFT + peak["step"] * sw, 2), "peak_w": round(sw, 2),
            "peak_bytes": sum(t["bytes"] for t in in_pool), "sw": sw, "k": k, "y0": y0,
        })  # fmt: skip
    return panels


def _curves(info: BuildInfo, memory: dict, profile: dict | None) -> dict:
    """The live-bytes curves (step functions over the timeline's columns) and the horizontal lines."""
    n = max(len(memory["steps"]), 1)
    sw = PLOT_W / n
    chosen = info.scheduler
    series = []
    for name, curve in memory["curves"].items():
        same = name != chosen and curve == memory["curves"].get(chosen)
        series.append({"name": name, "values": curve, "chosen": name == chosen, "same": same,
                       "colour": "#1f2937" if name == chosen else CURVE_COLOURS.get(name, "#888"), "peak": max(curve, default=0)})  # fmt: skip
    series.sort(key=lambda s: s["chosen"])  # the chosen order drawn last, on top
    planned_hw = [sum(s["high_water_bytes"]) for s in memory["steps"]]
    measured = [r["measured_high_water_bytes"] for r in profile["steps"]] if profile else []
    budget = memory.get("ram_budget_bytes")
    top = max([info.arena_bytes, info.lower_bound_bytes, 1] + [s["peak"] for s in series] + planned_hw + measured)
    budget_on_chart = budget is not None and budget <= top * 1.6
    if budget_on_chart:
        top = max(top, budget)
    top *= 1.08
    y0 = TOP + CURVES_H

    def y(v: float) -> float:
        return round(y0 - v / top * CURVES_H, 2)

    def steps_path(values: list[int]) -> str:
        pts = []
        for s, v in enumerate(values):
            pts += [f"{LEFT + s * sw:.2f},{y(v)}", f"{LEFT + (s + 1) * sw:.2f},{y(v)}"]
        return "M" + " L".join(pts) if pts else ""

    for s in series:
        s["path"] = steps_path(s["values"])
    lines = [{"label": f"arena {info.arena_bytes:,} B", "y": y(info.arena_bytes), "cls": "arena"},
             {"label": f"lower bound {info.lower_bound_bytes:,} B", "y": y(info.lower_bound_bytes), "cls": "bound"}]  # fmt: skip
    if budget_on_chart:
        lines.append({"label": f"RAM left after the stack {budget:,} B", "y": y(budget), "cls": "budget"})
    if lines[0]["y"] == lines[1]["y"]:  # arena = lower bound: one line, one label
        lines = [{"label": f"arena = lower bound = {info.arena_bytes:,} B", "y": lines[0]["y"], "cls": "bound"}] + lines[2:]
    others = {k: v for k, v in info.schedulers_tried.items() if k not in memory["curves"]}
    return {
        "width": WIDTH, "height": TOP + CURVES_H + BOTTOM, "series": series, "lines": lines,
        "y_ticks": _y_ticks(top, CURVES_H, y0), "x_ticks": _x_ticks(len(memory["steps"]), sw),
        "hw_path": steps_path(planned_hw),
        "measured": [{"x": round(LEFT + (s + 0.5) * sw, 2), "y": y(v), "v": v, "step": s} for s, v in enumerate(measured)],
        "budget": budget, "budget_on_chart": budget_on_chart, "others": others,
        "peak_x": round(LEFT + memory["peak"]["step"] * sw, 2), "peak_w": round(sw, 2),
    }  # fmt: skip


PARETO_W, PARETO_H = 460, 240  # the scatter of the objective's points (arena x predicted instructions)


def _pareto(info: BuildInfo) -> dict | None:
    """The memory/latency objective's points (passes/objective.py) as a small scatter: x = arena bytes, y =
    predicted instructions, the taken one ringed, the RAM budget a vertical line when it is in range."""
    pareto = info.pareto
    if not pareto or not pareto.get("points"):
        return None
    pts = pareto["points"]
    budget = (info.memory or {}).get("ram_budget_bytes")
    xs = [p["arena_bytes"] for p in pts]
    ys = [p["instructions"] for p in pts]
    x_lo, x_hi = min(xs), max(xs)
    if budget is not None and x_lo <= budget <= 2 * x_hi:
        x_hi = max(x_hi, budget)
    y_lo, y_hi = min(ys), max(ys)
    pad_x, pad_y = max((x_hi - x_lo) * 0.08, 64), max((y_hi - y_lo) * 0.12, y_hi * 0.002, 1)
    x_lo, x_hi, y_lo, y_hi = max(x_lo - pad_x, 0), x_hi + pad_x, max(y_lo - pad_y, 0), y_hi + pad_y
    left, top, w, h = 84, 14, PARETO_W - 84 - 16, PARETO_H - 14 - 40

    def px(v):
        return round(left + (v - x_lo) / (x_hi - x_lo) * w, 2)

    def py(v):
        return round(top + h - (v - y_lo) / (y_hi - y_lo) * h, 2)

    dots = [{"x": px(p["arena_bytes"]), "y": py(p["instructions"]), "taken": p["taken"], "p": p} for p in pts]
    x_step, y_step = _nice_step(x_hi - x_lo, 4), _nice_step(y_hi - y_lo, 4)
    x_ticks = [{"x": px(v), "label": _byte_label(v)} for v in _range(x_lo, x_hi, x_step)]
    y_ticks = [{"y": py(v), "label": f"{v / 1e6:,.3f} M"} for v in _range(y_lo, y_hi, y_step)]
    line = px(budget) if budget is not None and x_lo <= budget <= x_hi else None
    return {"width": PARETO_W, "height": PARETO_H, "left": left, "top": top, "w": w, "h": h, "dots": dots,
            "x_ticks": x_ticks, "y_ticks": y_ticks, "budget_x": line, "budget": budget, **pareto}  # fmt: skip


def _range(lo: float, hi: float, step: float) -> list[float]:
    v = math.ceil(lo / step) * step
    out = []
    while v <= hi + 1e-9:
        out.append(v)
        v += step
    return out


def _budget_bar(info: BuildInfo, profile: dict | None) -> dict:
    """The board's RAM as one bar: arena, static data, stack, free."""
    ram = info.board_ram_bytes
    parts = [("arena", info.arena_bytes, PEAK_FILL),
             ("static .data+.bss", info.static_ram_bytes or 0, "#7a6fb0"),
             ("stack (reserved)", info.stack_reserved_bytes, "#8d99a6")]  # fmt: skip
    used = sum(p[1] for p in parts)
    linked = info.total_ram_bytes
    padding = linked - used if linked is not None else 0  # the linker's alignment of the sections
    used += padding
    segments, x = [], float(LEFT)
    for label, size, colour in parts + [("free", max(ram - used, 0), "#f3f4f6")]:
        w = PLOT_W * size / ram if ram else 0
        if size and w < 2:
            w = 2.0
        segments.append({"label": label, "bytes": size, "x": round(x, 2), "w": round(w, 2), "colour": colour})
        x += w
    stack_measured = profile.get("peak_stack_bytes") if profile else None
    return {"width": WIDTH, "height": 64, "segments": segments, "ram": ram, "used": used, "padding": padding,
            "percent": 100.0 * used / ram if ram else 0.0, "stack_measured": stack_measured}  # fmt: skip


def _op_rows(memory: dict, profile: dict | None) -> list[dict]:
    measured = {r["step"]: r for r in profile["steps"]} if profile else {}
    top_live = max((s["live_bytes"] for s in memory["steps"]), default=0) or 1
    rows = []
    for s in memory["steps"]:
        m = measured.get(s["step"], {})
        instr = m.get("instructions")
        rows.append({
            **s, "planned_high_water": sum(s["high_water_bytes"]),
            "live_percent": round(100.0 * s["live_bytes"] / top_live, 1),
            "peak": s["step"] == memory["peak"]["step"],
            "measured_high_water": m.get("measured_high_water_bytes"), "pools_match": m.get("pools_match", True),
            "stack": m.get("stack_high_water_bytes"), "instructions": instr, "ticks": m.get("ticks"),
            "instructions_per_mac": round(instr / s["macs"], 2) if instr is not None and s["macs"] else None,
        })  # fmt: skip
    return rows


def _profile_matches(info: BuildInfo, profile: dict | None) -> dict | None:
    """profile.json only when it belongs to this build (same model, board and step count)."""
    if not profile:
        return None
    memory = info.memory
    if profile.get("model") != info.model or profile.get("board") != info.board:
        return None
    if memory and len(profile.get("steps", [])) != len(memory.get("steps", [])):
        return None
    return profile


def render_report(info: BuildInfo | dict, profile: dict | None = None, refusal: dict | None = None) -> str:
    """The HTML page of one build (its BuildInfo, or edgemem.json as read; profile.json as ``profile``, if any);
    with ``refusal`` (report/refusal.py), the best plan of a refused build, marked "does not fit" with its ways out."""
    info = info if isinstance(info, BuildInfo) else BuildInfo.from_json(info)
    profile = _profile_matches(info, profile)
    memory = info.memory
    context = {
        "geometry": {"left": LEFT, "top": TOP, "plot_w": PLOT_W, "timeline_h": TIMELINE_H}, "peak_fill": PEAK_FILL,
        "info": info, "profile": profile, "memory": memory, "model_name": info.model_name,
        "passes": info.passes, "baselines": info.pass_baselines,
        "budget": _budget_bar(info, profile), "pareto": _pareto(info),
        "on_qemu": bool(profile) and "total_instructions" in profile,
        "data_json": json_in_html(json.dumps({"arena_bytes": info.arena_bytes, "lower_bound_bytes": info.lower_bound_bytes})),
    }  # fmt: skip
    if refusal is not None:
        from .refusal import SECTION

        context["refusal_html"] = Markup(_environment().from_string(SECTION).render(refusal=refusal))
    if memory:
        _, kinds = _fills(memory)
        context.update({
            "panels": _timeline(info, memory), "curves": _curves(info, memory, profile), "rows": _op_rows(memory, profile),
            "kinds": kinds, "input_fill": INPUT_FILL, "workspace_fill": WORKSPACE_FILL,
            "peak_step": memory["steps"][memory["peak"]["step"]] if memory["steps"] else None,
        })  # fmt: skip
    return _environment().get_template(TEMPLATE).render(**context)


def write_report(out_dir: str | Path, info: BuildInfo | dict | None = None, profile: dict | None = None,
                 path: str | Path | None = None) -> Path:  # fmt: skip
    """Write the report of the build in ``out_dir`` (default ``out_dir/report.html``); reads edgemem.json and
    profile.json from there unless given."""
    out_dir = Path(out_dir)
    if info is None:
        info = load_build_info(out_dir)
    if profile is None and (out_dir / PROFILE_JSON).is_file():
        try:
            profile = json.loads((out_dir / PROFILE_JSON).read_text())
        except (OSError, ValueError):
            profile = None
    target = Path(path) if path is not None else out_dir / REPORT_HTML
    # a file name's undecodable bytes (surrogateescape) have no UTF-8: shown as \udcNN rather than failing the build
    target.write_text(render_report(info, profile), encoding="utf-8", errors="backslashreplace")
    return target
