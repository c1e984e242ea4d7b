"""`spotcron report` on a job without a matrix: a plain summary of its runs and how to add a matrix,
never `(default)` compared with itself at `1.00x base`."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from io import StringIO

from click.testing import CliRunner
from rich.console import Console

from spotcron.cli.report import report as report_command
from spotcron.core import layout
from spotcron.core.metrics import parse_metrics
from spotcron.core.runs import Attempt, RunRecord
from spotcron.cost.prices import load_prices
from spotcron.present.charts import chart_name, chart_pngs
from spotcron.present.formats import render_report
from spotcron.present.report import benchmark_report

T0 = datetime(2026, 11, 22, 10, 0, tzinfo=UTC)


def hello_run(hour: int, seconds: float, variant: str | None = None) -> RunRecord:
    created = T0 + timedelta(hours=hour)
    attempt = Attempt(number=1, vm_name=f"sc-hello-{hour}-a1", machine_type="e2-small", zone="us-central1-a",
                      created_at=created, started_at=created + timedelta(seconds=20),
                      finished_at=created + timedelta(seconds=20 + seconds),
                      deleted_at=created + timedelta(seconds=30 + seconds), outcome="exited", exit_code=0)
    run_id = f"20261122-{10 + hour}00" + (f"-{variant}" if variant else "")
    metrics = {"work": {"value": 6400, "unit": "samples"}, "metrics": {"accuracy": {"value": 0.91, "unit": "1"}}}
    return RunRecord(job="hello", run_id=run_id, variant=variant, state="succeeded", created_at=created,
                     updated_at=created + timedelta(seconds=31 + seconds), attempts=(attempt,), exit_code=0,
                     cost_usd=0.0002, results_prefix=layout.attempt_prefix("hello", run_id, 1),
                     metrics=parse_metrics(json.dumps(metrics).encode()))


RUNS = [hello_run(0, 10), hello_run(1, 11), hello_run(2, 12)]


def shown(rendered) -> str:
    out = Console(file=StringIO(), width=200, force_terminal=False)
    for table in rendered.renderables:
        out.print(table)
    return out.file.getvalue() + "\n".join(rendered.lines)


def test_a_job_without_a_matrix_gets_a_summary_of_its_runs_and_how_to_add_a_matrix():
    report = benchmark_report("hello", RUNS, load_prices(), "us-central1")
    for text in (shown(render_report(report, "table")), render_report(report, "md")):
        said = " ".join(text.split())
        assert "1.00x" not in said and "(default)" not in said and "base" not in said.replace("benchmark: {base", "")
        assert "hello: its runs" in said and "3/3" in said and "11s ±" in said  # the median of 10, 11, 12 s
        assert "samples/s" in said and "accuracy" in said and "0.91" in said
        assert "hello has no matrix, so there is nothing to compare its runs with" in said
        assert "matrix:" in said and "docs/benchmarks.md" in said


def test_its_charts_are_its_phases_alone_never_a_ratio_to_itself():
    report = benchmark_report("hello", RUNS, load_prices(), "us-central1")
    assert list(chart_pngs(report)) == [chart_name("hello", "phases")]


def test_a_matrix_job_is_still_compared():
    runs = [hello_run(0, 10, "small"), hello_run(0, 20, "big")]
    text = shown(render_report(benchmark_report("hello", runs, load_prices(), "us-central1"), "table"))
    assert "1.00x base" in text and "no matrix" not in text


def test_the_report_command_says_it(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    for name in ("SPOTCRON_JOBS", "SPOTCRON_STACK", "SPOTCRON_PRICES", "SPOTCRON_STATE_DIR"):
        monkeypatch.delenv(name, raising=False)
    (tmp_path / "jobs").mkdir()
    (tmp_path / "jobs" / "hello.yaml").write_text('schedule: "0 * * * *"\nimage: busybox\n')
    for record in RUNS:
        path = tmp_path / "bucket" / layout.run_record(record.job, record.run_id)
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(record.to_json())
    result = CliRunner().invoke(report_command, ["hello", "--records", str(tmp_path / "bucket")])
    assert result.exit_code == 0, result.output
    said = " ".join(result.output.split())
    assert "hello has no matrix" in said and "1.00x" not in said and "(default)" not in said
