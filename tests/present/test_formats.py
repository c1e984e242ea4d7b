"""The report's output formats, chosen without click: text for files and scripts, tables for a terminal."""

from __future__ import annotations

import csv
import io
import json
from datetime import UTC, datetime, timedelta

import pytest
from rich.table import Table

from spotcron.cli.report import report as report_command
from spotcron.core import layout
from spotcron.core.runs import Attempt, RunRecord
from spotcron.cost.prices import load_prices
from spotcron.present.formats import FORMATS, Tables, render_report
from spotcron.present.history import benchmark_history
from spotcron.present.report import benchmark_report

T0 = datetime(2026, 11, 23, 3, 0, tzinfo=UTC)
CHARTS = ["out/bench-relative-time.png"]


def bench_run(variant: str, work_s: float, week: int, state: str = "succeeded", problem: str | None = None
              ) -> RunRecord:
    start = T0 + timedelta(weeks=week)
    attempt = Attempt(number=1, vm_name="a1", machine_type="e2-standard-4", disk_gb=10, created_at=start,
                      started_at=start, finished_at=start + timedelta(seconds=work_s),
                      deleted_at=start + timedelta(seconds=work_s + 20), outcome="exited", exit_code=0)
    run_id = f"{start:%Y%m%d-%H%M}-{variant}"
    return RunRecord(job="bench", run_id=run_id, variant=variant, state=state, created_at=start, updated_at=start,
                     tick=start, attempts=(attempt,), results_prefix=layout.attempt_prefix("bench", run_id, 1),
                     reason=None if state == "succeeded" else "exit 1", metrics_problem=problem)


@pytest.fixture(scope="module")
def records():
    return [bench_run("base", 100, 0), bench_run("base", 110, 1), bench_run("fast", 50, 0),
            bench_run("fast", 55, 1, problem="metrics.json: not JSON"), bench_run("fast", 0, 2, state="failed")]


@pytest.fixture(scope="module")
def result(records):
    return benchmark_report("bench", records, load_prices(), "us-central1")


def test_the_command_offers_every_format():
    choices = next(p for p in report_command.params if p.name == "fmt").type.choices
    assert tuple(choices) == FORMATS


def test_text_formats(result):
    data = json.loads(render_report(result, "json", charts=CHARTS))
    assert data["charts"] == CHARTS and [row["variant"] for row in data["rows"]] == ["base", "fast"]
    rows = list(csv.DictReader(io.StringIO(render_report(result, "csv"))))
    assert [row["configuration"] for row in rows] == ["base", "fast"]
    runs = list(csv.DictReader(io.StringIO(render_report(result, "csv-runs"))))
    assert len(runs) == 4  # a line per succeeded run
    markdown = render_report(result, "md")
    assert "| configuration | machine |" in markdown
    for fmt in ("json", "csv", "csv-runs", "md"):
        assert render_report(result, fmt).endswith("\n")


def test_the_table_format_is_tables_then_the_problems_and_the_runs_not_measured(result):
    tables = render_report(result, "table")
    assert isinstance(tables, Tables) and all(isinstance(t, Table) for t in tables.renderables)
    assert len(tables.renderables) == 3  # the comparison, what each ran on, the phases: no work, no metrics
    fast = [row for row in result.rows if row.variant == "fast"][0]
    assert tables.lines == [f"metrics.json problem: fast/{fast.metrics_problems[0][0]}: metrics.json: not JSON",
                            f"not measured: fast/{fast.unmeasured[0][0]}: {fast.unmeasured[0][1]}"]


def test_with_a_history_every_format_shows_the_history(result, records):
    history = benchmark_history(result, records)
    data = json.loads(render_report(result, "json", history=history, charts=CHARTS))
    assert data["charts"] == CHARTS and data["job"] == "bench" and "series" in data
    assert render_report(result, "csv", history=history) == render_report(result, "csv-runs", history=history)
    assert render_report(result, "csv", history=history).startswith("configuration,tick,runs,")
    assert "each configuration per tick" in render_report(result, "md", history=history)
    tables = render_report(result, "table", history=history)
    assert isinstance(tables, Tables) and len(tables.renderables) == 1 and tables.lines == []


def test_an_unknown_format_is_refused(result):
    with pytest.raises(ValueError, match="format 'xml': use one of table, md, csv, csv-runs, json"):
        render_report(result, "xml")
