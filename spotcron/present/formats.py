"""A benchmark report, or its history, in the output format asked for.

Every format but `table` is text, ready for a file or a pipe. `table` is for a terminal: rich
tables, which only the caller's console can lay out (its width, whether it is a terminal), and the
plain lines that follow them.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from spotcron.present import exports
from spotcron.present.history import BenchmarkHistory
from spotcron.present.neutral import printable
from spotcron.present.report import BenchmarkReport
from spotcron.present.single import is_single, summary_markdown, summary_tables

FORMATS = exports.FORMATS


@dataclass(frozen=True)
class Tables:
    """The `table` format: renderables to print whole (never cut), then lines to print as they are."""

    renderables: list[Any]
    lines: list[str] = field(default_factory=list)


def render_report(report: BenchmarkReport, fmt: str, *, history: BenchmarkHistory | None = None,
                  charts: Sequence[str] = (), detail: bool = False) -> str | Tables:
    """`report` in `fmt` (one of FORMATS); with `history`, the history instead. `charts` are the
    paths of the charts written, which JSON lists. Text ends with a newline.

    The table and Markdown formats read as a summary: the metrics.json medians of a matrix job (its
    compared metrics are in the comparison already) and a line per run not measured are `detail`'s,
    and by default a line says how to see them. CSV and JSON always hold everything."""
    if fmt not in FORMATS:
        raise ValueError(f"format {fmt!r}: use one of {', '.join(FORMATS)}")
    charts = list(charts)
    if history is not None:
        if fmt == "json":
            return json.dumps({**history.to_json(), "charts": charts}, indent=2) + "\n"
        if fmt in ("csv", "csv-runs"):
            return exports.history_csv(history)
        if fmt == "md":
            return exports.history_markdown(history)
        return Tables([exports.history_table(history)])
    if fmt in ("table", "md") and is_single(report):
        # One configuration: its runs summed up, never compared with themselves.
        if fmt == "md":
            return summary_markdown(report, detail=detail)
        tables, lines = summary_tables(report, detail=detail)
        return Tables(tables, lines)
    if fmt == "json":
        return exports.json_text(report, charts=charts) + "\n"
    if fmt == "csv":
        return exports.csv_text(report)
    if fmt == "csv-runs":
        return exports.runs_csv(report)
    if fmt == "md":
        return exports.markdown(report, detail=detail)
    # Job-written text (reasons, problems, units, host names) reaches these lines: shown escaped.
    lines = [f"verdict: {printable(line)}" for line in exports.verdict_lines(report)]
    lines += [f"warning: {printable(line)}" for line in report.warnings]
    lines += [f"metrics.json problem: {printable(line)}" for line in exports.problem_lines(report)]
    lines += [f"not measured: {printable(line)}" for line in exports.unmeasured_lines(report, each=detail)]
    note = exports.metrics_note(report)
    if note and not detail:
        lines.append(printable(note))
    return Tables(exports.rich_tables(report, detail=detail), lines)
