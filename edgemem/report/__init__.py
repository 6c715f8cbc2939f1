"""The build's HTML report (report.html): memory timeline, live-bytes curves, per-operator table, passes.

    memory_info(...)  the "memory" section of edgemem.json, recorded at build time (data.py); model_names: shown names
    render_report(info, profile=None) -> str; write_report(out_dir, ...) -> Path  (render.py)
"""

from .data import memory_info, model_names
from .render import REPORT_HTML, render_report, write_report

__all__ = ["REPORT_HTML", "memory_info", "model_names", "render_report", "write_report"]
