"""report.html (edgemem/report): the figures it shows are the build's, and a real browser draws them.

The oracles: edgemem.json's "memory" section is checked against figures computed elsewhere (the planner's
lower bound, the schedulers' peaks, the plan's placements, and, after `edgemem profile`, the arena
high-water marks the device measured by painting); the page is then opened in headless Chromium (Debian's
`chromium`): its DOM after the scripts ran must hold those figures, and its screenshot must show each
tensor's rectangle where the plan puts it (the peak's tensors in the peak colour, empty arena white).
"""

from __future__ import annotations

import json
import shutil
import struct
import subprocess
import sys
import zlib
from html.parser import HTMLParser
from pathlib import Path

import pytest
from typer.testing import CliRunner

from edgemem import pipeline, profiling
from edgemem.cli import app
from edgemem.report import render_report, write_report
from edgemem.report.render import LEFT, PEAK_FILL, PLOT_W, TIMELINE_H, TOP
from edgemem.build_info import load_build_info

ROOT = Path(__file__).resolve().parents[1]
SHARED = ROOT.parent / "shared" / "models"
EXAMPLE = ROOT / "examples" / "kws_tiny_int8.tflite"
CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
WINDOW = (1280, 2600)

sys.path.insert(0, str(Path(__file__).resolve().parent))
import small_models  # noqa: E402


# ---------------------------------------------------------------- helpers: a PNG reader, a DOM reader, Chromium


def read_png(path: Path) -> tuple[int, int, list[bytes]]:
    """(width, height, rows of RGB bytes) of an 8-bit RGB/RGBA non-interlaced PNG (what Chromium writes)."""
    data = path.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n", f"{path} is not a PNG"
    pos, idat, width = 8, b"", 0
    while pos < len(data):
        length, kind = struct.unpack(">I4s", data[pos : pos + 8])
        body = data[pos + 8 : pos + 8 + length]
        if kind == b"IHDR":
            width, height, depth, colour, _, _, interlace = struct.unpack(">IIBBBBB", body)
            assert depth == 8 and colour in (2, 6) and interlace == 0, (depth, colour, interlace)
            bpp = 3 if colour == 2 else 4
        elif kind == b"IDAT":
            idat += body
        pos += 12 + length
    raw, stride, rows, prev = zlib.decompress(idat), width * bpp, [], bytearray(width * bpp)
    for y in range(height):
        f, line = raw[y * (stride + 1)], bytearray(raw[y * (stride + 1) + 1 : (y + 1) * (stride + 1)])
        for i in range(stride):
            a = line[i - bpp] if i >= bpp else 0
            b, c = prev[i], prev[i - bpp] if i >= bpp else 0
            if f == 1:
                line[i] = (line[i] + a) & 255
            elif f == 2:
                line[i] = (line[i] + b) & 255
            elif f == 3:
                line[i] = (line[i] + (a + b) // 2) & 255
            elif f == 4:
                p = a + b - c
                pa, pb, pc = abs(p - a), abs(p - b), abs(p - c)
                line[i] = (line[i] + (a if pa <= pb and pa <= pc else b if pb <= pc else c)) & 255
        rows.append(bytes(line) if bpp == 3 else bytes(v for i, v in enumerate(line) if i % 4 != 3))
        prev = line
    return width, height, rows


def pixel(image, x: float, y: float) -> tuple[int, int, int]:
    _, _, rows = image
    row, i = rows[int(y)], int(x) * 3
    return row[i], row[i + 1], row[i + 2]


def near(colour: tuple[int, int, int], hex_colour: str, tol: int = 6) -> bool:
    want = tuple(int(hex_colour[i : i + 2], 16) for i in (1, 3, 5))
    return all(abs(a - b) <= tol for a, b in zip(colour, want))


class Dom(HTMLParser):
    """The elements of a page that carry figures: by id, the timeline's tensors, the operator rows."""

    def __init__(self, text: str):
        super().__init__()
        self.by_id: dict[str, dict] = {}
        self.tensors: list[dict] = []
        self.rows: dict[int, dict[str, str]] = {}
        self.curves: dict[str, dict] = {}
        self.root: dict = {}
        self._row: int | None = None
        self.feed(text)

    def handle_starttag(self, tag, attrs):
        a = dict(attrs)
        if tag == "html":
            self.root = a
        if "id" in a:
            self.by_id[a["id"]] = a
        if tag == "rect" and "tensor" in a.get("class", "").split():
            self.tensors.append(a)
        if tag == "path" and "data-order" in a:
            self.curves[a["data-order"]] = a
        if tag == "tr" and "data-step" in a:
            self._row = int(a["data-step"])
            self.rows[self._row] = {}
        if tag == "td" and self._row is not None and "data-field" in a:
            self.rows[self._row][a["data-field"]] = a["data-value"]

    def handle_endtag(self, tag):
        if tag == "tr":
            self._row = None


def chromium(page: Path, png: Path) -> str:
    """Open ``page`` in headless Chromium: write its screenshot to ``png``, return the DOM after its scripts."""
    cmd = [CHROMIUM, "--headless", "--no-sandbox", "--disable-gpu", "--hide-scrollbars", "--no-first-run",
           "--force-device-scale-factor=1", f"--window-size={WINDOW[0]},{WINDOW[1]}",
           f"--user-data-dir={png.parent / 'chromium-profile'}", f"--screenshot={png}", "--dump-dom", page.resolve().as_uri()]  # fmt: skip
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0 and png.is_file(), done.stderr[-2000:]
    return done.stdout


def _build(model, out: Path, **options) -> dict:
    pipeline.build(model, "stm32f746", out, pipeline.BuildOptions(overwrite=True, **options))
    return load_build_info(out)


def _padded(n: int, align: int) -> int:
    return -(-n // align) * align


# ---------------------------------------------------------------- the figures (edgemem.json) against other sources


def check_memory_section(info: dict) -> None:
    """edgemem.json's "memory" section agrees with the planner's and the schedulers' own figures."""
    mem = info["memory"]
    steps, tensors, align = mem["steps"], mem["tensors"], mem["align"]
    assert len(steps) == info["ops"] == len(mem["order"]) and sorted(mem["order"]) == list(range(info["ops"]))
    # live bytes: the tensors live at each step, padded, an in-place output sharing its dying input's bytes
    by_name = {t["name"]: t for t in tensors}
    for s, row in enumerate(steps):
        live = sum(_padded(t["bytes"], align) for t in tensors if t["first"] <= s <= t["last"])
        live -= sum(min(_padded(t["bytes"], align), _padded(by_name[t["alias"]]["bytes"], align)) for t in tensors
                    if t["first"] == s and t.get("alias") in by_name and by_name[t["alias"]]["last"] == s)  # fmt: skip
        assert row["live_bytes"] == live == mem["live_bytes"][s], (s, row)
    # the chosen order's peak is the planner's lower bound and the winning scheduler's peak; the others' too
    assert max(mem["live_bytes"]) == info["lower_bound_bytes"] == info["schedulers_tried"][info["scheduler"]]
    assert mem["peak"]["bytes"] == info["lower_bound_bytes"] and mem["live_bytes"][mem["peak"]["step"]] == mem["peak"]["bytes"]
    for name, curve in mem["curves"].items():
        assert len(curve) == len(steps) and max(curve) == info["schedulers_tried"][name], name
    # every scheduler that ran has its curve (hierarchical and exact too: their orders, not only their peaks)
    assert set(mem["curves"]) == set(info["schedulers_tried"]) and {"file", "rpo", "hierarchical"} <= set(mem["curves"])
    # the placements: inside their pool, never two live tensors on the same bytes (but in-place pairs)
    for t in tensors:
        assert 0 <= t["offset"] and t["offset"] + t["bytes"] <= info["arena_pools"][t["pool"]], t
    for i, a in enumerate(tensors):
        for b in tensors[i + 1 :]:
            if a["pool"] == b["pool"] and a["first"] <= b["last"] and b["first"] <= a["last"]:
                apart = a["offset"] + a["bytes"] <= b["offset"] or b["offset"] + b["bytes"] <= a["offset"]
                assert apart or a["name"] == b.get("alias") or b["name"] == a.get("alias"), (a, b)
    # per step: MACs add up, weights are the model's
    assert sum(s["macs"] for s in steps) == mem["macs"] > 0
    assert sum(s["weights_bytes"] for s in steps) <= info["weights_bytes"]
    assert max(sum(s["high_water_bytes"]) for s in steps) <= info["arena_bytes"]


def c_scratch(kernels_c: str) -> dict[str, int]:
    """Bytes of the local arrays each kernel function of the generated C declares (what the compiler puts on
    the stack), read from the C text: the oracle of the report's per-kernel scratch."""
    import re

    item = {"int8_t": 1, "uint8_t": 1, "int16_t": 2, "uint16_t": 2, "int32_t": 4, "uint32_t": 4, "int64_t": 8,
            "uint64_t": 8, "float": 4, "double": 8}  # fmt: skip
    sizes, fn = {}, None
    for line in kernels_c.splitlines():
        m = re.match(r"^\S.*\b(\w+)\(.*\) \{$", line)
        if m:
            fn = m.group(1)
            sizes[fn] = 0
        elif line.startswith("}"):
            fn = None
        elif fn is not None:
            d = re.match(r"^\s+(?:static )?(\w+) \w+\[(\d+)\];", line)
            if d and d.group(1) in item:
                sizes[fn] += item[d.group(1)] * int(d.group(2))
    return sizes


def check_variants(info: dict, kernels_c: str) -> None:
    """Per step, the kernel variant and its scratch (issue 19): the scratch is what the generated C declares;
    an in-place kernel is one whose output the planner may place over an input (the tensor's alias), a fused
    kernel (CONV_2D+ADD) names what it fused, an int8 convolution runs the fast kernel."""
    mem = info["memory"]
    declared = c_scratch(kernels_c)
    out_alias = {t["name"]: t.get("alias") for t in mem["tensors"]}
    for s in mem["steps"]:
        v = s["variant"]
        assert s["scratch_bytes"] == declared[s["op"]], (s["op"], s["scratch_bytes"], declared[s["op"]])
        assert v["fused"] == s["kind"].split("+")[1:] and all(k in v["label"] for k in v["fused"])
        alias = out_alias.get(s["output"]["name"])
        if alias is not None:  # the planner may place the output over that input: the kernel's variant says so
            assert v["in_place_over"] is not None and f"over {alias}" in v["label"], s
        if v["in_place_over"] is not None:
            assert s["in_place"], s
        if s["kind"].split("+")[0] in ("CONV_2D", "DEPTHWISE_CONV_2D") and s["output"]["dtype"] == "int8":
            assert v["fast"] is True and "fast" in v["label"], s
    assert any(s["scratch_bytes"] for s in mem["steps"])


def check_dom(dom: Dom, info: dict, profile: dict | None) -> None:
    """The page holds the figures of edgemem.json (and of profile.json)."""
    mem = info["memory"]
    assert dom.by_id["arena-bytes"]["data-value"] == str(info["arena_bytes"])
    assert dom.by_id["macs"]["data-value"] == str(mem["macs"])
    assert len(dom.tensors) == len(mem["tensors"])
    drawn = {r["data-tensor"]: r for r in dom.tensors}
    for t in mem["tensors"]:
        r = drawn[t["name"]]
        assert (int(r["data-offset"]), int(r["data-bytes"]), int(r["data-first"]), int(r["data-last"])) == \
            (t["offset"], t["bytes"], t["first"], t["last"])  # fmt: skip
        tip = r["data-tip"]  # the hover text: shape, bytes, producer and readers
        assert f"{t['bytes']:,} B" in tip and ("x".join(map(str, t["shape"])) in tip.replace("\u00d7", "x"))
        if t["producer"] is not None:
            assert f"step {t['producer']} {mem['steps'][t['producer']]['kind']}" in tip, tip
        for c in t["consumers"][:6]:
            assert f"step {c} {mem['steps'][c]['kind']}" in tip.split("read by", 1)[1], tip
    assert sorted(dom.rows) == list(range(len(mem["steps"])))
    for s in mem["steps"]:
        row = dom.rows[s["step"]]
        assert int(row["macs"]) == s["macs"] and int(row["weights_bytes"]) == s["weights_bytes"]
        assert int(row["live_bytes"]) == s["live_bytes"] and int(row["high_water_bytes"]) == sum(s["high_water_bytes"])
        assert row["variant"] == s["variant"]["label"] and int(row["scratch_bytes"]) == s["scratch_bytes"]
    assert int(dom.curves[info["scheduler"]]["data-peak"]) == info["lower_bound_bytes"]
    assert {k: int(v["data-peak"]) for k, v in dom.curves.items()} == {k: max(c) for k, c in mem["curves"].items()}
    if profile is None:
        assert "measured_high_water_bytes" not in dom.rows[0]
        return
    assert dom.by_id["measured-arena-bytes"]["data-value"] == str(profile["arena_high_water_bytes"])
    for p in profile["steps"]:
        row = dom.rows[p["step"]]
        assert int(row["measured_high_water_bytes"]) == p["measured_high_water_bytes"]
        assert int(row["stack_bytes"]) == p["stack_high_water_bytes"] and int(row["instructions"]) == p["instructions"]
        macs = mem["steps"][p["step"]]["macs"]
        assert row["instructions_per_mac"] == (str(round(p["instructions"] / macs, 2)) if macs else "")


def check_screenshot(image, dom: Dom, info: dict) -> None:
    """Every tensor's rectangle is where the plan puts it: its centre in its fill (the peak colour for the
    tensors live at the peak step), and a spot of the arena no tensor uses is empty (light)."""
    mem = info["memory"]
    layout = json.loads(dom.root["data-layout"])
    n = len(mem["steps"])
    peak_step = max(range(n), key=lambda s: (mem["live_bytes"][s], -s))  # the first step of the highest live
    peak = {t["name"] for t in mem["tensors"] if t["first"] <= peak_step <= t["last"]}
    assert peak == set(mem["peak"]["tensors"])
    width, height, _ = image
    sw = PLOT_W / n
    for pool in mem["pools"]:
        box = layout[f"timeline-{pool}"]
        assert box["y"] + box["height"] <= height, "the timeline is below the screenshot"
        k = TIMELINE_H / info["arena_pools"][pool]
        bottom = box["y"] + TOP + TIMELINE_H

        def at(step: float, offset: float) -> tuple[float, float]:
            return box["x"] + LEFT + step * sw, bottom - offset * k  # noqa: B023 (called in this iteration)

        group = [t for t in mem["tensors"] if t["pool"] == pool]
        checked = 0
        for t in group:
            # a step of its own: not one it shares with an in-place partner on the same bytes
            own = [s for s in range(t["first"], t["last"] + 1) if not any(
                o is not t and o["first"] <= s <= o["last"] and o["offset"] < t["offset"] + t["bytes"]
                and t["offset"] < o["offset"] + o["bytes"] for o in group)]  # fmt: skip
            if t["bytes"] * k < 8 or sw < 8 or not own:
                continue  # too thin to aim at a pixel
            x, y = at(own[len(own) // 2] + 0.5, t["offset"] + t["bytes"] / 2)
            c = pixel(image, x, y)
            if t["name"] in peak:
                assert near(c, PEAK_FILL), (pool, t["name"], c)
                checked += 1
            else:
                assert not near(c, PEAK_FILL, 40) and min(c) < 230, (pool, t["name"], c)  # drawn, not in the peak colour
        if any(t["name"] in peak for t in group):
            assert checked, f"no peak tensor of pool {pool} large enough to check"
        # an empty spot: a step column and an offset no tensor covers (with a margin), away from the peak band
        for s in range(n):
            if s == peak_step:
                continue
            used = sorted((t["offset"], t["offset"] + t["bytes"]) for t in group if t["first"] <= s <= t["last"])
            lo = 0
            for a, b in used + [(info["arena_pools"][pool], None)]:
                if (a - lo) * k >= 10 and sw >= 6:
                    x, y = at(s + 0.5, (lo + a) / 2)
                    assert min(pixel(image, x, y)) >= 228, (pool, s, lo, a, pixel(image, x, y))
                    break
                lo = max(lo, b or 0)
    # the live-bytes chart is drawn: the chosen order's curve (dark) crosses the chart's columns
    box = layout["curves-chart"]
    dark = sum(1 for y in range(int(box["y"]), int(box["y"] + box["height"]))
               for x in range(int(box["x"] + LEFT), int(box["x"] + LEFT + PLOT_W), 3) if max(pixel(image, x, y)) < 70)  # fmt: skip
    assert dark > PLOT_W / 3 / 2, dark


def check_in_browser(out: Path, info: dict, profile: dict | None, tmp_path: Path) -> None:
    if CHROMIUM is None:
        pytest.skip("chromium is not installed (apt-get install chromium; `make setup` installs it): the page was "
                    "checked without a browser only")  # fmt: skip
    png = tmp_path / "report.png"
    dom = Dom(chromium(out / "report.html", png))
    assert "data-layout" in dom.root, "the page's script did not run"
    check_dom(dom, info, profile)
    check_screenshot(read_png(png), dom, info)


# ---------------------------------------------------------------- the tests


def test_report_profiled_kws_tiny_measured_next_to_planned(tmp_path):
    """The demo model, built for profiling and profiled under QEMU: `edgemem report` shows the device's
    high-water marks, stack and instructions next to the plan's, and a browser draws the plan."""
    out = tmp_path / "kws"
    runner = CliRunner()
    result = runner.invoke(app, ["build", str(EXAMPLE), "-o", str(out), "--profile", "--run", "--json"])
    assert result.exit_code == 0, result.output
    info = load_build_info(out)
    check_memory_section(info)
    profile = json.loads((out / profiling.PROFILE_JSON).read_text())
    # the device measured the high-water marks the plan predicts, step by step
    assert [r["measured_high_water_bytes"] for r in profile["steps"]] == [sum(s["high_water_bytes"]) for s in info["memory"]["steps"]]
    check_variants(info, (out / "kernels.c").read_text())
    check_dom(Dom((out / "report.html").read_text()), info, profile)  # `build --profile --run` rewrote the page
    (out / "report.html").unlink()
    result = runner.invoke(app, ["report", str(out)])
    assert result.exit_code == 0, result.output
    page = (out / "report.html").read_text()
    assert "http://" not in page and "https://" not in page and "<link" not in page  # self-contained
    check_dom(Dom(page), info, profile)  # the raw page, before any browser
    check_in_browser(out, info, profile, tmp_path)


def test_report_concat_model_unlinked(tmp_path):
    """A model with a concatenation written in place and a tensor read twice, built without compiling."""
    model = tmp_path / "concat.tflite"
    model.write_bytes(small_models.concat_model(3))
    out = tmp_path / "concat"
    info = _build(model, out, compile=False)
    check_memory_section(info)
    assert info["memory"]["steps"][info["memory"]["peak"]["step"]]["kind"] == "CONCATENATION"
    check_variants(info, (out / "kernels.c").read_text())
    check_dom(Dom((out / "report.html").read_text()), info, None)
    # a board's profile (`edgemem profile --port`): core cycles instead of QEMU's instructions
    steps = [{"step": s["step"], "measured_high_water_bytes": sum(s["high_water_bytes"]), "pools_match": True,
              "stack_high_water_bytes": 200 + s["step"], "ticks": 1000 * (s["step"] + 1)} for s in info["memory"]["steps"]]  # fmt: skip
    board = {"model": info["model"], "board": info["board"], "source": "serial /dev/ttyACM0 at 115200 baud", "seed": 0,
             "steps": steps, "arena_high_water_bytes": info["arena_bytes"], "arena_matches_plan": True, "peak_stack_bytes": 205,
             "total_ticks": sum(r["ticks"] for r in steps), "tick_unit": "cycles", "bit_exact": True, "matches_reference": True}  # fmt: skip
    dom = Dom(render_report(info, board))
    assert [int(dom.rows[r["step"]]["ticks"]) for r in steps] == [r["ticks"] for r in steps]
    assert [int(dom.rows[r["step"]]["stack_bytes"]) for r in steps] == [r["stack_high_water_bytes"] for r in steps]
    assert "instructions_per_mac" not in dom.rows[0] and dom.by_id["measured-arena-bytes"]["data-value"] == str(info["arena_bytes"])
    assert Dom(render_report(info, {**board, "model": "/elsewhere.tflite"})).rows[0].get("ticks") is None  # not this build's
    check_in_browser(out, info, None, tmp_path)


SHARED_MODELS = {"mlperf_kws_dscnn_int8": {}, "tinyengine_mcunet_vww": {"pool_per_region": True, "compile": False}}


@pytest.mark.parametrize("name", sorted(SHARED_MODELS))
def test_report_shared_models(name, tmp_path):
    """The issue's acceptance models: kws_dscnn (linked), mcunet_vww planned over two RAM regions."""
    model = SHARED / f"{name}.tflite"
    if not model.is_file():
        pytest.skip(f"{model} is not here (the shared models live next to the repository)")
    out = tmp_path / name
    info = _build(model, out, opt_seconds=0, schedule_seconds=0.5, **SHARED_MODELS[name])
    check_memory_section(info)
    check_variants(info, (out / "kernels.c").read_text())
    if SHARED_MODELS[name].get("pool_per_region"):
        assert len(info["arena_pools"]) == 2, info["arena_pools"]  # both panels drawn
    check_dom(Dom((out / "report.html").read_text()), info, None)
    check_in_browser(out, info, None, tmp_path)


def test_report_kernel_variants_resnet8(tmp_path):
    """resnet8 (issue 19's "the report shows, per kernel, the variant chosen and its scratch"): the convolutions
    fused with their residual ADD are shown fused and in place over the skip, each kernel with the scratch its
    C declares; the page holds the same (no browser: the drawing is checked on the models above)."""
    model = SHARED / "mlperf_ic_resnet8_int8.tflite"
    if not model.is_file():
        pytest.skip(f"{model} is not here (the shared models live next to the repository)")
    out = tmp_path / "resnet8"
    info = _build(model, out, compile=False, opt_seconds=0, schedule_seconds=0.5)
    check_variants(info, (out / "kernels.c").read_text())
    fused = [s for s in info["memory"]["steps"] if s["kind"] == "CONV_2D+ADD"]
    assert len(fused) == 3 and all(s["variant"]["fast"] and s["variant"]["in_place_over"] for s in fused)
    check_dom(Dom((out / "report.html").read_text()), info, None)


def test_report_command_errors_and_old_builds(tmp_path):
    runner = CliRunner()
    result = runner.invoke(app, ["report", str(tmp_path)])
    assert result.exit_code != 0 and "not an edgemem build" in result.output
    # a build made before the report existed: the page says what is missing instead of failing
    info = {"model": "/m/old.tflite", "board": "stm32f746", "ops": 3, "scheduler": "file", "schedulers_tried": {"file": 96},
            "planner": "greedy_by_size", "arena_bytes": 96, "arena_pools": {"arena": 96}, "lower_bound_bytes": 96,
            "weights_bytes": 10, "stack_reserved_bytes": 16384, "stack_estimate_bytes": 0, "board_ram_bytes": 327680,
            "board_flash_bytes": 1 << 20, "build_seconds": 1.0, "passes": {"sequence": [{"pass": "fold_pad", "changed": False}]}}  # fmt: skip
    (tmp_path / "edgemem.json").write_text(json.dumps(info))
    (tmp_path / "profile.json").write_text("{not json")
    result = runner.invoke(app, ["report", str(tmp_path), "-o", str(tmp_path / "r.html")])
    assert result.exit_code == 0, result.output
    page = (tmp_path / "r.html").read_text()
    assert 'id="no-memory"' in page and "old.tflite" in page and 'data-value="96"' in page
    assert render_report(info).count("<svg") == 1  # the budget bar only
    assert write_report(tmp_path) == tmp_path / "report.html"
