"""A benchmark report (or its history) as people and tools read it: rich tables, Markdown, CSV, JSON.

The cells are built once (`report_cells`) and shared by the terminal table and Markdown, so the
two never differ; CSV and JSON carry the raw numbers (medians, quartiles, σ, min, max, interval
bounds) at full precision for spreadsheets and scripts, in the spirit of hyperfine's exports, with
every run's own figures (JSON's `samples`, and `--format csv-runs`: one line per run) and a
one-line verdict per configuration.
"""

from __future__ import annotations

import io
import json
import math
from collections.abc import Sequence

from spotcron.core.durations import format_duration
from spotcron.core.metrics import problem_list
from spotcron.present.compare import PHASE_NAMES, PHASES, MetricComparison
from spotcron.present.history import BenchmarkHistory
from spotcron.present.neutral import InertWriter, md_text, printable
from spotcron.present.report import BenchmarkReport, ConfigRow, metric_verdicts, verdict
from spotcron.present.stats import Ratio, Spread
from spotcron.present.views import format_usd

FORMATS = ("table", "md", "csv", "csv-runs", "json")
MARKS = "~ = the interval includes 1.00x: the spread does not support a difference; ? = under 2 runs, no interval"


# Below a second, the unit that keeps three digits readable: 478ns, not 4.78e-07s (time per sample).
_SMALL_UNITS = ((1e-6, 1e9, "ns"), (1e-3, 1e6, "µs"), (1.0, 1e3, "ms"))


def format_seconds(value: float | None) -> str:
    """478ns, 12.5µs, 3.1ms below a second; 2.35s and 41.2s below a minute (benchmarks time steps),
    12m05s above."""
    if value is None:
        return "-"
    if 0 < value < 1:
        for below, scale, unit in _SMALL_UNITS:
            if value < below and float(f"{value * scale:.3g}") < 1000:  # 999.96µs shows as 1ms
                return f"{value * scale:.3g}{unit}"
    if value < 10:
        return f"{value:.3g}s"
    if value < 60:
        return f"{value:.1f}".rstrip("0").rstrip(".") + "s"
    return format_duration(value)


def format_ratio(ratio: Ratio | None, *, base: bool = False, sep: str = " ") -> str:
    """`0.38x (0.31-0.45)`, marked `~` or `?`; `1.00x base` for the base itself."""
    if base:
        return "1.00x base"
    if ratio is None:
        return "-"
    text = f"{ratio.value:.2f}x"
    if ratio.mark:
        text += f" {ratio.mark}"
    interval = ratio.interval()
    if interval is not None:
        text += f"{sep}({interval})"
    return text


def with_spread(value: Spread | None, fmt, sep: str = " ") -> str:
    """The median and half the IQR as a share of it: `18m20s ±5%` (hyperfine's mean ± σ, made robust)."""
    if value is None:
        return "-"
    if value.n < 2:
        return fmt(value.median)
    if value.median == 0:
        return f"{fmt(value.median)}{sep}±{fmt(value.iqr / 2)}"
    return f"{fmt(value.median)}{sep}±{value.iqr / 2 / abs(value.median):.0%}"


def _cost_scale(report: BenchmarkReport) -> tuple[float, str]:
    """Cost per 1, 1k or 1M units, whichever shows the costs in cents rather than in exponents."""
    costs = [row.cost_per_unit.median for row in report.rows if row.cost_per_unit is not None]
    for scale, label in ((1.0, ""), (1e3, "1k "), (1e6, "1M ")):
        if not costs or max(costs) * scale >= 0.001:
            return scale, label
    return 1e6, "1M "


def _unit_headers(report: BenchmarkReport) -> list[str]:
    unit = _unit(report) or "unit"
    _, label = _cost_scale(report)
    return [f"time/{unit}", f"cost/{label}{unit}{'s' if label else ''}", f"{unit}s/s"]


def report_headers(report: BenchmarkReport, *, per_unit: bool = True) -> list[str]:
    headers = ["configuration", "machine", "runs", "time", "cost", "rel. time", "rel. cost"]
    return headers + _unit_headers(report) if per_unit else headers


def report_cells(report: BenchmarkReport, *, per_unit: bool = True, sep: str = " ") -> list[list[str]]:
    """One row of cells per configuration: medians ± half the IQR, and ratios with their interval."""
    rows = []
    for row in report.rows:
        base = row.variant == report.base
        cells = [row.name + (" *" if base else ""), row.machine, f"{row.runs}/{row.runs + row.other_runs}",
                 with_spread(row.time, format_seconds, sep), with_spread(row.cost, format_usd, sep),
                 format_ratio(row.relative_time, base=base, sep=sep),
                 format_ratio(row.relative_cost, base=base, sep=sep)]
        if per_unit:
            cells += unit_cells(report, row)
        rows.append(cells)
    return rows


def unit_cells(report: BenchmarkReport, row: ConfigRow) -> list[str]:
    scale, _ = _cost_scale(report)
    return [with_spread(row.time_per_unit, format_seconds),
            with_spread(row.cost_per_unit, lambda v: format_usd(v * scale)),
            with_spread(row.throughput, significant)]


def report_caption(report: BenchmarkReport) -> str:
    caption = (f"median ±IQR/2 (as a share of the median) per run; runs: succeeded/ended; time: {report.time_basis}; "
               f"{report.cost_basis}; prices: {report.price_table}; rel.: ratio of medians to {report.base} (*) "
               f"with its exact rank interval and the confidence it has at those run counts ({_confidences(report)}; "
               f"4 or more runs a side give 95%); {MARKS}; rounds: {report.rounds}")
    if any(row.throughput is not None for row in report.rows):
        # The unit's name is the job's to write: the caption names no part of it.
        caption += "; units/s: 1 / the time per unit, so the two always agree"
    split = report.split_variants
    if split:
        caption += (f"; {', '.join(split)} ran on more than one kind of hardware: one row [k/n] per kind, never "
                    f"pooled (see the hardware table)")
    return caption


def _confidences(report: BenchmarkReport) -> str:
    levels = sorted({ratio.confidence for row in report.rows for ratio in (row.relative_time, row.relative_cost)
                     if ratio is not None and ratio.confidence is not None})
    if not levels:
        return "no intervals: under 2 runs a side"
    return "here " + ", ".join(f"{level:.0%}" for level in levels)


def report_title(report: BenchmarkReport) -> str:
    """`JOB: per configuration, relative to BASE`, and for local runs where the times come from."""
    title = f"{report.job}: per configuration, relative to {report.base}"
    where = report.measured_where
    return f"{title} ({where})" if where else title


HARDWARE_HEADERS = ["configuration", "machine (priced)", "hardware (measured by the runner)", "verdict"]


def hardware_cells(report: BenchmarkReport) -> list[list[str]]:
    """What each row ran on, as measured, beside what it was priced as, and its one-line verdict."""
    return [[row.name, row.machine, row.hardware, verdict(report, row)] for row in report.rows]


PHASE_VM_COST = "cost (VM life)"
PHASE_HEADERS = ["configuration", *(PHASE_NAMES[p] for p in PHASES), "VM life", PHASE_VM_COST, "work cost",
                 "rel. work cost"]


def phase_title(report: BenchmarkReport) -> str:
    return f"{report.job}: where a run's time and cost go (median seconds per phase)"


def phase_caption(report: BenchmarkReport) -> str:
    local = (" Locally the compared runs of a job take turns on the host: a run's wait for its turn is left out "
             "of its boot and its cost (a VM of its own would not have waited), and is in the exports as "
             "local_wait_s." if report.local_runs else "")
    return (f"boot + pull: VM created to container start (the record has no mark between the two); set-up: the "
            f"container's time outside the measured work; measured: {report.time_basis}; upload: container end to "
            f"VM deleted. cost (VM life): the first table's cost, as its note says. {report.work_cost_basis}.{local}")


def phase_cells(report: BenchmarkReport, sep: str = " ") -> list[list[str]]:
    rows = []
    for row in report.rows:
        phases = row.phases
        base = row.variant == report.base
        cells = [row.name, *(format_seconds(getattr(phases, p)) if phases else "-" for p in PHASES),
                 format_seconds(phases.vm) if phases else "-", with_spread(row.cost, format_usd, sep),
                 with_spread(row.work_cost, format_usd, sep), format_ratio(row.relative_work_cost, base=base, sep=sep)]
        rows.append(cells)
    return rows


def comparison_headers(report: BenchmarkReport) -> list[str]:
    return ["metric", "configuration", "runs", "time", "rel. time", "work cost", "rel. work cost"]


def comparison_cells(report: BenchmarkReport, sep: str = " ") -> list[list[str]]:
    """One row per metric and configuration: the per-task comparison of the articles' charts."""
    base = report.row(report.base).name
    cells = []
    for comparison in all_comparisons(report):
        for row in comparison.rows:
            is_base = row.name == base
            cells.append([comparison.metric, row.name + (" *" if is_base else ""),
                          str(row.time.n) if row.time else "0", with_spread(row.time, format_seconds, sep),
                          format_ratio(row.relative_time, base=is_base, sep=sep),
                          with_spread(row.work_cost, format_usd, sep),
                          format_ratio(row.relative_work_cost, base=is_base, sep=sep)])
    return cells


def all_comparisons(report: BenchmarkReport) -> list[MetricComparison]:
    return [*report.comparisons, *([report.overall] if report.overall else [])]


def comparison_title(report: BenchmarkReport) -> str:
    where = f" ({report.host_words})" if report.all_local else ""
    return f"{report.job}: each compared metric, relative to {report.base}{where}"


def comparison_caption(report: BenchmarkReport) -> str:
    text = (f"one comparison per metric of benchmark.compare: median and ratio to {report.base} with its rank "
            f"interval; work cost: the metric's seconds x the per-second price")
    if report.overall:
        text += ("; overall (geomean): the geometric mean of the per-metric ratios (each metric weighs the same), "
                 "its interval from the runs' own geometric means; time there is a run's geometric mean")
    return text


def verdict_lines(report: BenchmarkReport) -> list[str]:
    return [line for comparison in all_comparisons(report) for line in metric_verdicts(report, comparison)]


def problem_lines(report: BenchmarkReport) -> list[str]:
    """A line per problem of each run's metrics.json: every one of a file, not only its first."""
    return [f"{row.variant}/{run_id}: {problem}" for row in report.rows for run_id, text in row.metrics_problems
            for problem in problem_list(text)]


def unmeasured_lines(report: BenchmarkReport, *, each: bool = False) -> list[str]:
    """The runs that ended without success, with their reason: a GPU entry with no GPU says so here.

    Runs of one configuration that ended for the same reason make one line, `t4: 3 runs skipped:
    REASON`, with how to name each; `each` gives a line per run, `t4/RUN: skipped: REASON`.
    """
    lines = []
    for row in report.rows:
        groups: dict[str, list[str]] = {}
        for run_id, why in row.unmeasured:
            groups.setdefault(why, []).append(run_id)
        for why, runs in groups.items():
            if each or len(runs) == 1:
                lines += [f"{row.variant}/{run_id}: {why}" for run_id in runs]
            else:
                state, _, reason = why.partition(": ")
                lines.append(f"{row.variant}: {len(runs)} runs {state}: {reason} (--detail names each run)")
    return lines


def metrics_note(report: BenchmarkReport) -> str:
    """What the default report says in place of the metrics.json table it leaves to --detail."""
    names, _ = metric_cells(report.rows)
    if not names:
        return ""
    shown = f": {', '.join(names[:4])}{', ...' if len(names) > 4 else ''}"
    return (f"metrics.json: {len(names)} metric{'s' if len(names) != 1 else ''} per run{shown}; --detail shows "
            f"their medians per configuration, --format csv-runs or --json every run's")


def rich_tables(report: BenchmarkReport, *, detail: bool = False) -> list:
    """The report as rich Tables: the comparison, work per unit when runs report work, and with
    `detail` the median of every metric metrics.json reported (metrics_note says so otherwise).

    Cells fold rather than being cut; intervals go on a second line to keep the columns narrow.
    rich is imported here: only terminal output needs it.
    """
    from rich import box
    from rich.table import Table
    from rich.text import Text as RichText

    # Units and metric names are what a job wrote: every title, header and cell is plain Text, so
    # nothing in them is read as rich markup (a unit of "[/]" would raise MarkupError), and
    # printable, so nothing in them is a terminal escape.
    def Text(text: str) -> RichText:  # noqa: N802 - stands in for rich's Text everywhere below
        return RichText(printable(text, lines=True))

    def new_table(title: str | None) -> Table:
        return Table(title=Text(title) if title else None, box=box.SIMPLE_HEAD, pad_edge=False,
                     padding=(0, 0, 0, 1))

    main = new_table(report_title(report))
    main.caption = Text(report_caption(report))
    width = min(max(len(row.variant) for row in report.rows) + 2, 16)
    for index, header in enumerate(report_headers(report, per_unit=False)):
        if index < 2:  # names fold; figures are short and never wrap
            main.add_column(Text(header), overflow="fold", min_width=width if index == 0 else 10)
        else:
            main.add_column(Text(header), justify="right", no_wrap=True)
    for cells in report_cells(report, per_unit=False, sep="\n"):
        main.add_row(*map(Text, cells))
    tables = [main]
    what = new_table(f"{report.job}: what each configuration ran on, and the verdict")
    for header in HARDWARE_HEADERS:
        what.add_column(header, overflow="fold")
    for cells in hardware_cells(report):
        what.add_row(*map(Text, cells))
    tables.append(what)
    phases = new_table(phase_title(report))
    phases.caption = Text(phase_caption(report))
    # The VM-life cost is the first table's `cost`: here it would only widen the table past a page.
    kept = [i for i, header in enumerate(PHASE_HEADERS) if header != PHASE_VM_COST]
    for index in kept:
        phases.add_column(Text(PHASE_HEADERS[index]), overflow="fold", justify="left" if index == 0 else "right")
    for cells in phase_cells(report, sep="\n"):
        phases.add_row(*(Text(cells[i]) for i in kept))
    tables.append(phases)
    if report.comparisons:
        compared = new_table(comparison_title(report))
        compared.caption = Text(comparison_caption(report))
        for index, header in enumerate(comparison_headers(report)):
            compared.add_column(Text(header), overflow="fold", justify="left" if index < 2 else "right")
        for cells in comparison_cells(report, sep="\n"):
            compared.add_row(*map(Text, cells))
        tables.append(compared)
    if any(row.work_unit for row in report.rows):
        units = new_table(f"{report.job}: per unit of work ({_unit(report)}s, from metrics.json)")
        units.add_column("configuration", overflow="fold")
        for header in _unit_headers(report):
            units.add_column(Text(header), overflow="fold", justify="right")
        for row in report.rows:
            units.add_row(*map(Text, (row.name, *unit_cells(report, row))))
        tables.append(units)
    names, cells = metric_cells(report.rows)
    if names and detail:
        # A metric a line and a configuration a column: a job reports dozens of metrics and compares a
        # few configurations, so this stays one page wide where a column per metric would not.
        extra = new_table(f"{report.job}: metrics.json, median per run")
        extra.add_column("metric", overflow="fold")
        for row in cells:
            extra.add_column(Text(row[0]), justify="right", overflow="fold")
        for index, name in enumerate(names, 1):
            extra.add_row(Text(name), *(Text(row[index]) for row in cells))
        tables.append(extra)
    return tables


def metric_cells(rows: Sequence[ConfigRow]) -> tuple[list[str], list[list[str]]]:
    names = sorted({name for row in rows for name in row.metrics})
    cells = []
    for row in rows:
        cells.append([row.name, *(_measure(*row.metrics[n]) if n in row.metrics else "-" for n in names)])
    return names, cells


def significant(value: float, digits: int = 4) -> str:
    """`value` to `digits` significant digits, with thousands separators and no exponent in the
    range people read (14,800 rather than 1.48e+04); far outside it, the exponent form."""
    if not math.isfinite(value) or value == 0 or not 1e-4 <= abs(value) < 1e15:
        return f"{value:,.{digits}g}"
    decimals = max(0, digits - 1 - math.floor(math.log10(abs(value))))
    text = f"{round(value, decimals):,.{decimals}f}"
    return text.rstrip("0").rstrip(".") if "." in text else text


def _measure(value: float, unit: str) -> str:
    return significant(value) if unit == "1" else f"{significant(value)} {unit}"


def markdown(report: BenchmarkReport, *, detail: bool = True) -> str:
    """A GitHub-flavoured Markdown table, its caption and any metrics problems; without `detail`,
    as `spotcron report` prints it by default: no metrics.json table, runs not measured in groups."""
    per_unit = any(row.work_unit for row in report.rows)
    headers = report_headers(report, per_unit=per_unit)
    # measured_where names a local run's host, which the job wrote: literal text, like every cell.
    where = f" ({md_text(report.measured_where)})" if report.measured_where else ""
    lines = [f"**{md_text(report.job)}**: per configuration, relative to `{report.base}`{where}", "",
             _md_row(headers), "|" + "|".join(":---" if i < 2 else "---:" for i in range(len(headers))) + "|"]
    lines += [_md_row(cells) for cells in report_cells(report, per_unit=per_unit)]
    lines += ["", md_text(report_caption(report), line=True)]
    lines += ["", _md_row(HARDWARE_HEADERS), "|:---|:---|:---|:---|"]
    lines += [_md_row(cells) for cells in hardware_cells(report)]
    lines += ["", f"**{md_text(phase_title(report))}**", "", _md_row(PHASE_HEADERS),
              "|:---|" + "---:|" * (len(PHASE_HEADERS) - 1)]
    lines += [_md_row(cells) for cells in phase_cells(report)]
    lines += ["", md_text(phase_caption(report), line=True)]
    if report.comparisons:
        headers = comparison_headers(report)
        # The title names the hosts of local runs, which the jobs wrote: literal, like every line here.
        lines += ["", f"**{md_text(comparison_title(report))}**", "", _md_row(headers),
                  "|:---|:---|" + "---:|" * (len(headers) - 2)]
        lines += [_md_row(cells) for cells in comparison_cells(report)]
        lines += ["", md_text(comparison_caption(report), line=True), "",
                  *(f"- {md_text(line, line=True)}" for line in verdict_lines(report))]
    if report.warnings:
        lines += ["", "warnings:", *(f"- {md_text(line, line=True)}" for line in report.warnings)]
    names, cells = metric_cells(report.rows)
    if names and detail:
        lines += ["", _md_row(["configuration", *names]), "|:---|" + "---:|" * len(names)]
        lines += [_md_row(row) for row in cells]
    elif names:
        lines += ["", md_text(metrics_note(report), line=True)]
    problems = problem_lines(report)
    if problems:
        lines += ["", "metrics.json problems:", *(f"- {md_text(line, line=True)}" for line in problems)]
    unmeasured = unmeasured_lines(report, each=detail)
    if unmeasured:
        lines += ["", "runs not measured:", *(f"- {md_text(line, line=True)}" for line in unmeasured)]
    return "\n".join(lines) + "\n"


def _md_row(cells: Sequence[str]) -> str:
    # Cells carry job-written text (units, hardware, configurations): literal, never markup.
    return "| " + " | ".join(md_text(cell) for cell in cells) + " |"


CSV_SPREADS = (("time_s", "time"), ("cost_usd", "cost"), ("time_per_unit_s", "time_per_unit"),
               ("cost_per_unit_usd", "cost_per_unit"), ("throughput_per_s", "throughput"))
CSV_STATS = ("median", "q1", "q3", "iqr", "stdev", "min", "max")


def csv_text(report: BenchmarkReport) -> str:
    """One line per configuration; every statistic in its own column, empty where unknown."""
    out = io.StringIO()
    writer = InertWriter(out)  # job-written text never runs as a formula
    header = ["configuration", "hardware_row", "machine", "hardware", "base", "runs", "other_runs", "work_unit"]
    header += [f"{prefix}_{stat}" for prefix, _ in CSV_SPREADS for stat in CSV_STATS]
    for name in RATIOS:
        header += [name, f"{name}_low", f"{name}_high", f"{name}_supported", f"{name}_confidence"]
    header += [f"phase_{name}_s" for name in (*PHASES, "vm", "local_wait")]
    comparisons = all_comparisons(report)
    for comparison in comparisons:
        header += [f"{comparison.metric}:{field}" for field in ("median_s", "relative", "low", "high", "confidence",
                                                                "relative_work_cost")]
    writer.writerow([*header, "verdict"])
    base = report.row(report.base)
    for row in report.rows:
        line: list = [row.variant, f"{row.split[0]}/{row.split[1]}" if row.split else "", row.machine, row.hardware,
                      row is base, row.runs, row.other_runs, row.work_unit or ""]
        for _, attr in CSV_SPREADS:
            stats = getattr(row, attr)
            line += [_blank(stats.to_json()[s]) if stats else "" for s in CSV_STATS]
        for attr in RATIOS:
            ratio = getattr(row, attr)
            data = ratio.to_json() if ratio else {}
            line += [_blank(data.get("ratio")), _blank(data.get("low")), _blank(data.get("high")),
                     _blank(data.get("supported")), _blank(data.get("confidence"))]
        phases = row.phases.to_json() if row.phases else {}
        line += [_blank(phases.get(f"{name}_s")) for name in (*PHASES, "vm", "local_wait")]
        for comparison in comparisons:
            figures = comparison.row(row.name)
            ratio = figures.relative_time if figures else None
            work = figures.relative_work_cost if figures else None
            line += [_blank(figures.time.median if figures and figures.time else None),
                     _blank(ratio.value if ratio else None), _blank(ratio.low if ratio else None),
                     _blank(ratio.high if ratio else None), _blank(ratio.confidence if ratio else None),
                     _blank(work.value if work else None)]
        writer.writerow([*line, verdict(report, row)])
    return out.getvalue()


RATIOS = ("relative_time", "relative_cost", "relative_cost_per_unit", "relative_work_cost")
RUN_HEADER = ["configuration", "hardware_row", "run_id", "tick", "time_s", "cost_usd", "work_cost_usd", "work",
              "work_unit", "local", "host", "machine_type", "zone", "cpu_model", "cpus", "memory_mib", "threads",
              "load_start", "load_end", "gpus", "gpu_count", "gpu_driver",
              *(f"phase_{name}_s" for name in (*PHASES, "vm")), "local_wait_s"]


def runs_csv(report: BenchmarkReport) -> str:
    """One line per measured run, at full precision: its time, cost, work, phases, what it ran on,
    and every metric it wrote (a `metric:NAME` column each, in the metric's own unit)."""
    out = io.StringIO()
    writer = InertWriter(out)  # job-written text never runs as a formula
    metrics = sorted({(name, unit) for row in report.rows for run in row.runs_detail
                      for name, (_, unit) in run.metrics.items()})
    names = list(dict.fromkeys(name for name, _ in metrics))
    units = {name: "/".join(sorted({u for n, u in metrics if n == name})) for name in names}
    writer.writerow([*RUN_HEADER, *(f"metric:{name} ({units[name]})" for name in names)])
    for row in report.rows:
        for run in row.runs_detail:
            hw = run.hardware
            gpus = hw.gpus if hw is not None else ()
            writer.writerow([
                row.variant, f"{row.split[0]}/{row.split[1]}" if row.split else "", run.run_id, run.tick,
                _blank(run.seconds), _blank(run.cost), _blank(run.work_cost), _blank(run.work), run.work_unit or "",
                run.local,
                *(_blank(getattr(hw, name, None)) for name in ("host", "machine_type", "zone", "cpu_model", "cpus",
                                                               "memory_mib", "threads", "load_start", "load_end")),
                "/".join(sorted({g.name for g in gpus})), len(gpus) if hw is not None else "",
                "/".join(sorted({g.driver for g in gpus if g.driver})),
                *(_blank(run.phases.get(name)) for name in (*PHASES, "vm", "wait")),
                *(_blank(run.metrics[name][0] if name in run.metrics else None) for name in names),
            ])
    return out.getvalue()


def _blank(value: object) -> object:
    return "" if value is None else value


def json_text(report: BenchmarkReport, **extra: object) -> str:
    return json.dumps({**report.to_json(), **extra}, indent=2)


# --- history ------------------------------------------------------------------------------------


HISTORY_HEADERS = ["configuration", "tick (UTC)", "runs", "time", "cost", "flag"]


def history_cells(history: BenchmarkHistory) -> list[list[str]]:
    rows = []
    for series in history.series:
        for index, point in enumerate(series.points):
            last = index == len(series.points) - 1
            flag = series.flag_text() if last else "! hardware changed" if point.hardware_changed else ""
            if point.hardware_changed:
                flag += f" (now {'; '.join(point.hardware)})"
            rows.append([series.variant, point.tick, str(point.runs), format_seconds(point.seconds),
                         format_usd(point.cost), flag])
    return rows


def history_caption(history: BenchmarkHistory) -> str:
    from spotcron.present.history import regressions

    return (f"median per tick; time: {history.time_basis}; flag: the latest tick outside the band of the ticks "
            f"before it (median ± max(5.19 MAD, 5%), at least 4 earlier ticks), and any tick whose hardware "
            f"(measured by the runner) differs from the tick before; {regressions(history)}")


def history_markdown(history: BenchmarkHistory) -> str:
    lines = [f"**{md_text(history.job)}**: each configuration per tick", "", _md_row(HISTORY_HEADERS),
             "|:---|:---|---:|---:|---:|:---|"]
    lines += [_md_row(row) for row in history_cells(history)]
    lines += ["", md_text(history_caption(history), line=True)]
    return "\n".join(lines) + "\n"


def history_csv(history: BenchmarkHistory) -> str:
    out = io.StringIO()
    writer = InertWriter(out)  # job-written text never runs as a formula
    writer.writerow(["configuration", "tick", "runs", "time_s", "cost_usd", "time_flag", "cost_flag", "hardware",
                     "hardware_changed"])
    for series in history.series:
        for index, point in enumerate(series.points):
            last = index == len(series.points) - 1
            time_flag = series.time_band.flag if last and series.time_band else None
            cost_flag = series.cost_band.flag if last and series.cost_band else None
            writer.writerow([series.variant, point.tick, point.runs, _blank(point.seconds), _blank(point.cost),
                             _blank(time_flag), _blank(cost_flag), "; ".join(point.hardware), point.hardware_changed])
    return out.getvalue()


def history_table(history: BenchmarkHistory):
    from rich import box
    from rich.table import Table
    from rich.text import Text

    table = Table(title=Text(f"{history.job}: each configuration per tick"), box=box.SIMPLE_HEAD, pad_edge=False,
                  padding=(0, 0, 0, 1), caption=Text(history_caption(history)))
    for index, header in enumerate(HISTORY_HEADERS):
        table.add_column(Text(header), justify="right" if 2 <= index <= 4 else "left", no_wrap=index != 0)
    for cells in history_cells(history):
        table.add_row(*(Text(str(cell)) for cell in cells))
    return table


def _unit(report: BenchmarkReport) -> str | None:
    units = [row.work_unit for row in report.rows if row.work_unit]
    return units[0].removesuffix("s") if units else None  # "samples" → time/sample, samples/s
