"""PNG bar charts of a benchmark report: time and cost per configuration, relative to the base.

matplotlib is imported inside the functions (it costs about a second) and used through its
object API with the Agg canvas: no pyplot, so no global figure state and no display needed.
"""

from __future__ import annotations

import io
from pathlib import Path
from typing import Literal

from spotcron.present.report import BenchmarkReport

Metric = Literal["time", "cost"]
_TITLES = {"time": "time per run", "cost": "cost per run"}


def chart_name(job: str, metric: Metric) -> str:
    return f"{job}-relative-{metric}.png"


def relative_chart(report: BenchmarkReport, metric: Metric) -> bytes | None:
    """A horizontal bar per configuration, 1.0 = the base; None when no configuration has data."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    attr = "relative_time" if metric == "time" else "relative_cost"
    rows = [r for r in report.rows if getattr(r, attr) is not None]
    if not rows:
        return None
    labels = [r.variant for r in rows]
    values = [getattr(r, attr) for r in rows]
    colours = ["#555555" if r.variant == report.base else ("#2b8a3e" if v <= 1 else "#c92a2a")
               for r, v in zip(rows, values, strict=True)]

    figure = Figure(figsize=(7, 0.55 * len(rows) + 1.4), dpi=100)
    FigureCanvasAgg(figure)
    axes = figure.add_subplot()
    positions = list(range(len(rows)))[::-1]  # first configuration on top
    axes.barh(positions, values, color=colours)
    axes.set_yticks(positions, labels)
    axes.axvline(1.0, color="#222222", linestyle="--", linewidth=1)
    for y, value in zip(positions, values, strict=True):
        axes.text(value, y, f" {value:.2f}x", va="center", fontsize=9)
    axes.set_xlim(0, max(values) * 1.2)
    axes.set_xlabel(f"{_TITLES[metric]} relative to {report.base} (lower is better)")
    axes.set_title(f"{report.job}: relative {_TITLES[metric]}")
    figure.tight_layout()
    buffer = io.BytesIO()
    # No Software tag: the same report gives the same bytes on every matplotlib version.
    figure.savefig(buffer, format="png", metadata={"Software": None})
    return buffer.getvalue()


def chart_caption(report: BenchmarkReport, metric: Metric) -> str:
    """What the relative chart shows, in words: its alt text and caption on the page."""
    attr = "relative_time" if metric == "time" else "relative_cost"
    values = ", ".join(f"{r.variant} {getattr(r, attr):.2f}x" for r in report.rows if getattr(r, attr) is not None)
    return f"{report.job}: {_TITLES[metric]} relative to {report.base} (1.00x): {values}"


def chart_captions(report: BenchmarkReport) -> dict[str, str]:
    return {chart_name(report.job, metric): chart_caption(report, metric) for metric in ("time", "cost")}


def chart_pngs(report: BenchmarkReport) -> dict[str, bytes]:
    """{file name: PNG} for the relative time and relative cost charts that have data."""
    charts = {}
    for metric in ("time", "cost"):
        png = relative_chart(report, metric)
        if png is not None:
            charts[chart_name(report.job, metric)] = png
    return charts


def write_charts(report: BenchmarkReport, directory: Path) -> list[Path]:
    directory.mkdir(parents=True, exist_ok=True)
    written = []
    for name, png in chart_pngs(report).items():
        path = directory / name
        path.write_bytes(png)
        written.append(path)
    return written
