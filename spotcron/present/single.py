"""`spotcron report JOB` for a job without a matrix: a plain summary of its runs, and how to get a
comparison. With one configuration there is nothing to compare; a table of `(default)` against
itself at `1.00x base` says nothing and reads as if something were compared.

The figures are the benchmark report's (the same rows, medians, spreads and cost basis), laid out
for one configuration: runs, time, cost, the cost of the measured work, the phases of a run, work
per unit when metrics.json reports work, and the metrics' medians. Report in, text out.
"""

from __future__ import annotations

from typing import Any

from spotcron.present.exports import (
    _unit_headers,
    format_seconds,
    metric_cells,
    problem_lines,
    unit_cells,
    unmeasured_lines,
    with_spread,
)
from spotcron.present.neutral import md_text, printable
from spotcron.present.report import NO_VARIANT, BenchmarkReport, ConfigRow
from spotcron.present.views import format_usd


def is_single(report: BenchmarkReport) -> bool:
    """Whether the job has one configuration (no matrix): every row is its default configuration."""
    return all(row.variant == NO_VARIANT for row in report.rows)


def _label(report: BenchmarkReport, row: ConfigRow) -> str:
    """The job's name; the hardware each row ran on when its runs ran on several kinds."""
    return report.job if len(report.rows) == 1 else f"{report.job} on {row.hardware}"


def summary_headers(report: BenchmarkReport) -> list[str]:
    headers = ["runs", "machine", "time", "cost", "work cost", "boot + pull", "VM life"]
    if any(row.work_unit for row in report.rows):
        headers += _unit_headers(report)  # time/sample, cost/1k samples, samples/s
    return headers


def summary_cells(report: BenchmarkReport) -> list[list[str]]:
    per_unit = any(row.work_unit for row in report.rows)
    rows = []
    for row in report.rows:
        phases = row.phases
        cells = [f"{row.runs}/{row.runs + row.other_runs}", row.machine,
                 with_spread(row.time, format_seconds), with_spread(row.cost, format_usd),
                 with_spread(row.work_cost, format_usd),
                 format_seconds(phases.boot_pull if phases else None), format_seconds(phases.vm if phases else None)]
        if per_unit:
            cells += unit_cells(report, row)
        rows.append(cells)
    return rows


def summary_title(report: BenchmarkReport) -> str:
    where = f" ({report.measured_where})" if report.measured_where else ""
    return f"{report.job}: its runs{where}"


def summary_caption(report: BenchmarkReport) -> str:
    return (f"median ±IQR/2 (as a share of the median) per run; runs: succeeded/ended; time: {report.time_basis}; "
            f"{report.cost_basis}; work cost: {report.time_basis} x the machine's per-second price; "
            f"prices: {report.price_table}; rounds: {report.rounds}")


def how_to_compare(report: BenchmarkReport) -> str:
    return (f"{report.job} has no matrix, so there is nothing to compare its runs with. To compare "
            f"configurations (machine types, GPUs, settings), give its job file a `matrix:` (or `axes:`) and "
            f"`benchmark: {{base: NAME}}`; see docs/benchmarks.md. Each run: `spotcron runs {report.job}`.")


def _row_lines(report: BenchmarkReport, *, each: bool = False) -> list[str]:
    """The hardware each row ran on, when more than one kind; then what the report warns of."""
    lines = []
    if len(report.rows) > 1:
        lines += [f"row {number}: {_label(report, row)}" for number, row in enumerate(report.rows, 1)]
    lines += [f"warning: {line}" for line in report.warnings]
    lines += [f"metrics.json problem: {line}" for line in problem_lines(report)]
    lines += [f"not measured: {line}" for line in unmeasured_lines(report, each=each)]
    return lines


def _keys(report: BenchmarkReport) -> tuple[str, list[str]]:
    """The column that names each row, so a part of a table split by columns reads alone: the job,
    or the row's number (`row N:` below says what it ran on) when its runs ran on several kinds."""
    if len(report.rows) == 1:
        return "job", [report.job]
    return "row", [str(number) for number in range(1, len(report.rows) + 1)]


def summary_tables(report: BenchmarkReport, *, detail: bool = False) -> tuple[list[Any], list[str]]:
    """The `table` format: rich Tables (the runs, the metrics' medians) and the lines after them.
    Each table's first column names its rows; a pipe's split parts repeat it."""
    from rich import box
    from rich.table import Table
    from rich.text import Text as RichText

    def text(value: str) -> RichText:  # job-written text (units, names): never markup or escapes
        return RichText(printable(value, lines=True))

    def new_table(title: str) -> Table:
        return Table(title=text(title), box=box.SIMPLE_HEAD, pad_edge=False, padding=(0, 0, 0, 1),
                     title_justify="left")

    runs = new_table(summary_title(report))
    runs.caption = text(summary_caption(report))
    runs.caption_justify = "left"
    key, keys = _keys(report)
    runs.add_column(text(key), overflow="fold")
    for index, header in enumerate(summary_headers(report)):
        runs.add_column(text(header), justify="left" if index == 1 else "right", overflow="fold")
    for name, cells in zip(keys, summary_cells(report), strict=True):
        runs.add_row(*map(text, (name, *cells)))
    tables: list[Any] = [runs]
    names, cells = metric_cells(report.rows)
    if names:
        metrics = new_table(f"{report.job}: metrics.json, median per run")
        metrics.add_column(text(key), overflow="fold")
        for name in names:
            metrics.add_column(text(name), justify="right", overflow="fold")
        for name, row in zip(keys, cells, strict=True):
            metrics.add_row(*map(text, (name, *row[1:])))
        tables.append(metrics)
    lines = [printable(line) for line in _row_lines(report, each=detail)] + ["", how_to_compare(report)]
    return tables, lines


def summary_markdown(report: BenchmarkReport, *, detail: bool = False) -> str:
    headers = summary_headers(report)
    lines = [f"**{md_text(summary_title(report))}**", "", _md_row(headers),
             "|" + "|".join(":---" if i == 1 else "---:" for i in range(len(headers))) + "|"]
    lines += [_md_row(cells) for cells in summary_cells(report)]
    lines += ["", md_text(summary_caption(report))]
    names, cells = metric_cells(report.rows)
    if names:
        lines += ["", _md_row(names), "|" + "---:|" * len(names)]
        lines += [_md_row(row[1:]) for row in cells]
    extra = _row_lines(report, each=detail)
    if extra:
        lines += ["", *(f"- {md_text(line, line=True)}" for line in extra)]
    lines += ["", md_text(how_to_compare(report), line=True)]
    return "\n".join(lines) + "\n"


def _md_row(cells: list[str]) -> str:
    return "| " + " | ".join(md_text(cell) for cell in cells) + " |"
