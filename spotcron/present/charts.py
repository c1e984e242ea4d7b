"""PNG charts of a benchmark report: relative time and cost with their intervals, one panel per
compared metric, the phases of a run, cost against time with the frontier, and each
configuration's history across ticks. A chart of local runs says in its title that it measured
the local host, not the machine types: a PNG is what gets pasted into a post.

matplotlib is imported inside the functions (it costs about a second) and used through its
object API with the Agg canvas: no pyplot, so no global figure state and no display needed.
"""

from __future__ import annotations

import io
from pathlib import Path
from typing import Literal

from spotcron.present.compare import PHASE_NAMES, PHASES, MetricComparison
from spotcron.present.history import BenchmarkHistory, regressions
from spotcron.present.report import BenchmarkReport, ConfigRow

Metric = Literal["time", "cost"]
_TITLES = {"time": "time per run", "cost": "cost per run"}
BASE, BETTER, WORSE, UNSURE = "#555555", "#2b8a3e", "#c92a2a", "#adb5bd"  # bar colours
FRONTIER = "#1864ab"


def chart_name(job: str, kind: str) -> str:
    """`JOB-relative-time.png`, `JOB-relative-cost.png`, `JOB-cost-vs-time.png`, `JOB-history.png`,
    `JOB-per-metric.png`, `JOB-phases.png`."""
    return f"{job}-relative-{kind}.png" if kind in ("time", "cost") else f"{job}-{kind}.png"


def chart_title(report: BenchmarkReport, what: str) -> str:
    """`JOB: WHAT`, and for local runs on a second line where they were measured."""
    title = f"{report.job}: {what}"
    return f"{title}\n({report.host_words})" if report.local_runs else title


def _figure(height: float, width: float = 7.0):
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    figure = Figure(figsize=(width, height), dpi=100)
    FigureCanvasAgg(figure)
    return figure


def _png(figure) -> bytes:
    figure.tight_layout()
    buffer = io.BytesIO()
    # No Software tag: the same report gives the same bytes on every matplotlib version.
    figure.savefig(buffer, format="png", metadata={"Software": None})
    return buffer.getvalue()


def relative_chart(report: BenchmarkReport, metric: Metric) -> bytes | None:
    """A horizontal bar per configuration, 1.0 = the base, with the ratio's interval as an error bar.

    Green: faster or cheaper than the base, red: slower or costlier, grey: the interval includes
    1.0 (the spread does not support a difference). None when no configuration has data.
    """
    attr = "relative_time" if metric == "time" else "relative_cost"
    rows = [r for r in report.rows if getattr(r, attr) is not None]
    if not rows:
        return None
    ratios = [getattr(r, attr) for r in rows]
    colours = [BASE if r.variant == report.base else UNSURE if q.supported is False else
               BETTER if q.value <= 1 else WORSE for r, q in zip(rows, ratios, strict=True)]
    values = [q.value for q in ratios]
    lower = [max(0.0, q.value - q.low) if q.low is not None and r.variant != report.base else 0
             for r, q in zip(rows, ratios, strict=True)]
    upper = [max(0.0, q.high - q.value) if q.high is not None and r.variant != report.base else 0
             for r, q in zip(rows, ratios, strict=True)]

    figure = _figure(0.55 * len(rows) + 1.4)
    axes = figure.add_subplot()
    positions = list(range(len(rows)))[::-1]  # first configuration on top
    axes.barh(positions, values, color=colours, xerr=[lower, upper], ecolor="#222222", capsize=4)
    axes.set_yticks(positions, [r.name for r in rows])
    axes.axvline(1.0, color="#222222", linestyle="--", linewidth=1)
    for y, row, q, top in zip(positions, rows, ratios, upper, strict=True):
        label = "base" if row.variant == report.base else q.mark
        axes.text(q.value + top, y, f" {q.value:.2f}x{(' ' + label) if label else ''}", va="center", fontsize=9)
    axes.set_xlim(0, max(v + u for v, u in zip(values, upper, strict=True)) * 1.25)
    levels = sorted({f"{q.confidence:.0%}" for q in ratios if q.confidence is not None})
    basis = f"{report.time_basis}" if metric == "time" else "VM life x price"
    axes.set_xlabel(f"{_TITLES[metric]} ({basis}) relative to {report.base} (lower is better; bars: "
                    f"{'/'.join(levels) or 'no'} interval)")
    axes.set_title(chart_title(report, f"relative {_TITLES[metric]}"), fontsize=11)
    return _png(figure)


def _bars(axes, rows, ratios, base: str) -> None:
    """Horizontal bars of `ratios` (one per row name), coloured and labelled as relative_chart's."""
    colours = [BASE if name == base else UNSURE if q.supported is False else BETTER if q.value <= 1 else WORSE
               for name, q in zip(rows, ratios, strict=True)]
    # An interval need not hold the ratio of medians (a rank interval of a skewed sample): no negative bars.
    lower = [max(0.0, q.value - q.low) if q.low is not None and name != base else 0
             for name, q in zip(rows, ratios, strict=True)]
    upper = [max(0.0, q.high - q.value) if q.high is not None and name != base else 0
             for name, q in zip(rows, ratios, strict=True)]
    positions = list(range(len(rows)))[::-1]
    axes.barh(positions, [q.value for q in ratios], color=colours, xerr=[lower, upper], ecolor="#222222", capsize=3)
    axes.set_yticks(positions, rows)
    axes.axvline(1.0, color="#222222", linestyle="--", linewidth=1)
    for y, name, q, top in zip(positions, rows, ratios, upper, strict=True):
        label = "base" if name == base else q.mark
        axes.text(q.value + top, y, f" {q.value:.2f}x{(' ' + label) if label else ''}", va="center", fontsize=8)
    axes.set_xlim(0, max(q.value + u for q, u in zip(ratios, upper, strict=True)) * 1.3)


def metric_chart(report: BenchmarkReport) -> bytes | None:
    """One panel per compared metric (and the overall geometric mean): each configuration's time
    relative to the base, as the articles charted each model. None without compared metrics."""
    panels: list[MetricComparison] = [*report.comparisons, *([report.overall] if report.overall else [])]
    panels = [p for p in panels if any(r.relative_time is not None for r in p.rows)]
    if not panels:
        return None
    base = report.row(report.base).name
    rows = max(len(p.rows) for p in panels)
    figure = _figure(0.45 * rows * len(panels) + 1.2 * len(panels) + 0.6)
    for index, panel in enumerate(panels):
        axes = figure.add_subplot(len(panels), 1, index + 1)
        shown = [r for r in panel.rows if r.relative_time is not None]
        _bars(axes, [r.name for r in shown], [r.relative_time for r in shown], base)
        anchor = panel.row(base)
        median = f", {base} median {anchor.time.median:.3g} s" if anchor and anchor.time else ""
        axes.set_title(f"{panel.metric}{median}", fontsize=10)
    figure.axes[-1].set_xlabel(f"time relative to {base} (lower is better; bars: rank interval)")
    figure.suptitle(chart_title(report, "relative time per compared metric"), fontsize=11)
    return _png(figure)


def phase_chart(report: BenchmarkReport) -> bytes | None:
    """A stacked bar per configuration: median seconds of boot + pull, set-up, measured work, upload."""
    rows = [r for r in report.rows if r.phases is not None and any(getattr(r.phases, p) for p in PHASES)]
    if not rows:
        return None
    figure = _figure(0.55 * len(rows) + 1.6)
    axes = figure.add_subplot()
    positions = list(range(len(rows)))[::-1]
    left = [0.0] * len(rows)
    colours = {"boot_pull": "#adb5bd", "setup": "#ffd43b", "measured": FRONTIER, "upload": "#868e96"}
    for phase in PHASES:
        widths = [getattr(r.phases, phase) or 0.0 for r in rows]
        axes.barh(positions, widths, left=left, color=colours[phase], label=PHASE_NAMES[phase])
        left = [a + b for a, b in zip(left, widths, strict=True)]
    axes.set_yticks(positions, [r.name for r in rows])
    axes.set_xlabel(f"median seconds per run (measured: {report.time_basis}; the VM bills all of it)")
    axes.legend(loc="lower right", fontsize=8)
    axes.set_title(chart_title(report, "where a run's time goes"), fontsize=11)
    return _png(figure)


def frontier(rows: list[ConfigRow]) -> list[ConfigRow]:
    """The configurations no other beats on both time and cost: the cheapest for each speed."""
    measured = sorted((r for r in rows if r.median_seconds is not None and r.cost_per_run is not None),
                      key=lambda r: (r.median_seconds, r.cost_per_run))
    best: list[ConfigRow] = []
    for row in measured:
        if not best or row.cost_per_run < best[-1].cost_per_run:
            best.append(row)
    return best


def scatter_chart(report: BenchmarkReport) -> bytes | None:
    """Median cost against median time per configuration, IQR whiskers, the frontier joined."""
    rows = [r for r in report.rows if r.time is not None and r.cost is not None]
    if not rows:
        return None
    on_front = frontier(rows)
    figure = _figure(4.6)
    axes = figure.add_subplot()
    for row in rows:
        best = row in on_front
        axes.errorbar(row.time.median, row.cost.median,
                      xerr=[[row.time.median - row.time.q1], [row.time.q3 - row.time.median]],
                      yerr=[[row.cost.median - row.cost.q1], [row.cost.q3 - row.cost.median]],
                      fmt="o", color=FRONTIER if best else "#868e96", ecolor="#ced4da", capsize=3,
                      markersize=8 if best else 6)
        axes.annotate(row.name + (" *" if row.variant == report.base else ""),
                      (row.time.median, row.cost.median), textcoords="offset points", xytext=(6, 6), fontsize=9)
    axes.step([r.median_seconds for r in on_front], [r.cost_per_run for r in on_front], where="post",
              color=FRONTIER, linewidth=1.2, label="frontier: cheapest for its speed")
    axes.set_xlabel(f"time per run, s ({report.time_basis}; median, IQR whiskers)")
    axes.set_ylabel("cost per run, USD (the VM's life x price)")
    # Room around the points for their labels and whiskers.
    axes.set_xlim(0, max(r.time.high for r in rows) * 1.15)
    axes.set_ylim(0, max(r.cost.high for r in rows) * 1.2)
    axes.legend(loc="lower left", fontsize=8)
    axes.set_title(chart_title(report, "cost against time (* = base)"), fontsize=11)
    return _png(figure)


def history_chart(history: BenchmarkHistory, where: str | None = None) -> bytes | None:
    """Time and cost per tick, one line per configuration; a flagged latest tick is circled in red."""
    series = [s for s in history.series if len(s.points) >= 2]
    if not series:
        return None
    figure = _figure(5.6, 8.0)
    time_axes, cost_axes = figure.subplots(2, 1, sharex=True)
    ticks = sorted({p.tick for s in series for p in s.points})
    for s in series:
        xs = [ticks.index(p.tick) for p in s.points]
        for axes, attr, band in ((time_axes, "seconds", s.time_band), (cost_axes, "cost", s.cost_band)):
            pairs = [(x, getattr(p, attr)) for x, p in zip(xs, s.points, strict=True) if getattr(p, attr) is not None]
            if not pairs:
                continue
            line = axes.plot([x for x, _ in pairs], [y for _, y in pairs], marker="o", markersize=3,
                             label=s.variant)[0]
            if band is not None:
                axes.fill_between([pairs[-band.history - 1][0], pairs[-1][0]], band.low, band.high,
                                  color=line.get_color(), alpha=0.12, linewidth=0)
                if band.flag:
                    axes.plot([pairs[-1][0]], [pairs[-1][1]], marker="o", markersize=12, fillstyle="none",
                              color=WORSE, markeredgewidth=2)
    time_axes.set_ylabel("time per run, s")
    cost_axes.set_ylabel("cost per run, USD")
    step = max(1, len(ticks) // 8)
    width = 10 if len({t[:10] for t in ticks}) == len(ticks) else 16  # the day, or the minute when days repeat
    cost_axes.set_xticks(range(0, len(ticks), step), [ticks[i][:width] for i in range(0, len(ticks), step)],
                         rotation=30, ha="right", fontsize=8)
    time_axes.legend(loc="upper left", fontsize=8, ncols=min(4, len(series)))
    title = f"{history.job}: median per tick (band: earlier ticks; red ring: outside it)"
    time_axes.set_title(f"{title}\n({where})" if where else title, fontsize=11)
    return _png(figure)


def chart_caption(report: BenchmarkReport, metric: Metric) -> str:
    """What the relative chart shows, in words: its alt text and caption on the page."""
    attr = "relative_time" if metric == "time" else "relative_cost"
    values = ", ".join(f"{r.name} {getattr(r, attr).value:.2f}x" for r in report.rows
                       if getattr(r, attr) is not None)
    return f"{report.job}: {_TITLES[metric]} relative to {report.base} (1.00x): {values}"


def chart_captions(report: BenchmarkReport, history: BenchmarkHistory | None = None) -> dict[str, str]:
    captions = {chart_name(report.job, metric): chart_caption(report, metric) for metric in ("time", "cost")}
    names = ", ".join(r.name for r in frontier(list(report.rows)))
    captions[chart_name(report.job, "cost-vs-time")] = (f"{report.job}: cost per run against time per run; "
                                                        f"frontier: {names or 'none'}")
    if report.comparisons:
        panels = [*report.comparisons, *([report.overall] if report.overall else [])]
        captions[chart_name(report.job, "per-metric")] = f"{report.job}: time relative to {report.base} per " + \
            "; ".join(f"{p.metric}: " + ", ".join(f"{r.name} {r.relative_time.value:.2f}x" for r in p.rows
                                                   if r.relative_time is not None) for p in panels)
    captions[chart_name(report.job, "phases")] = (f"{report.job}: median seconds per phase of a run (boot + pull, "
                                                  f"set-up, measured, upload)")
    if report.local_runs:
        captions = {name: f"{text} ({report.host_words})" for name, text in captions.items()}
    if history is not None:
        captions[chart_name(report.job, "history")] = f"{report.job}: time and cost per tick; {regressions(history)}"
    return captions


def chart_pngs(report: BenchmarkReport, history: BenchmarkHistory | None = None) -> dict[str, bytes]:
    """{file name: PNG} for every chart that has data; a job with one configuration (no matrix) has
    nothing to compare, so only its phases and its history."""
    charts: dict[str, bytes | None] = {}
    if len({row.variant for row in report.rows}) > 1:
        charts = {chart_name(report.job, metric): relative_chart(report, metric) for metric in ("time", "cost")}
        charts[chart_name(report.job, "cost-vs-time")] = scatter_chart(report)
        charts[chart_name(report.job, "per-metric")] = metric_chart(report)
    charts[chart_name(report.job, "phases")] = phase_chart(report)
    if history is not None:
        charts[chart_name(report.job, "history")] = history_chart(history,
                                                                  report.host_words if report.local_runs else None)
    return {name: png for name, png in charts.items() if png is not None}


def write_charts(report: BenchmarkReport, directory: Path, history: BenchmarkHistory | None = None) -> list[Path]:
    directory.mkdir(parents=True, exist_ok=True)
    written = []
    for name, png in chart_pngs(report, history).items():
        path = directory / name
        path.write_bytes(png)
        written.append(path)
    return written
