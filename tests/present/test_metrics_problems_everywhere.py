"""A run that succeeded but wrote a broken metrics.json: every surface that says `succeeded` says
so too (`runs`, `up`, `up --once`, `run --follow`, `logs --follow`, the page), and each names every
problem of the file, as the report does."""

from __future__ import annotations

import json
from datetime import timedelta

import pytest

from spotcron.core.jobdata import problem_text
from spotcron.core.metrics import MetricsProblem, parse_metrics, problem_list
from spotcron.present import exports
from spotcron.present.follow import Streams, ended_line
from spotcron.present.live import ended_detail, wait_rows, wait_table
from spotcron.present.logs import RunOutput
from spotcron.present.notes import metrics_flag, metrics_note, run_note
from spotcron.present.page import render_index
from spotcron.present.progress import PipeProgress
from spotcron.present.views import run_row
from tests.cli.conftest import NOW, make_record

WHERE = "results/metrics.json of attempt 1"
BROKEN = json.dumps({"work": {"value": 0, "unit": "samples"},
                     "metrics": {"train_seconds": {"value": "fast", "unit": "s"}, "acc": {"value": 0.9}}}).encode()


def broken_problems() -> list[str]:
    with pytest.raises(MetricsProblem) as caught:
        parse_metrics(BROKEN, WHERE)
    return list(caught.value.problems)


def test_parse_metrics_names_every_problem_of_the_file_not_only_the_first():
    problems = broken_problems()
    assert problems == [
        f"{WHERE}: work.value is 0; the work done must be more than 0 (steps, samples, items processed)",
        f"{WHERE}: metrics.train_seconds.value is \"fast\"; write a finite number",
        f"{WHERE}: metrics.acc.unit is missing; name the unit in at most 32 printable characters, "
        "e.g. \"s\", \"samples\", \"1\" for a ratio",
    ]
    assert problem_list(problem_text(MetricsProblem(*problems))) == problems  # as the record keeps them


def test_a_file_with_very_many_problems_names_some_and_counts_the_rest():
    many = json.dumps({"metrics": {f"m{n}": {"value": "x", "unit": "s"} for n in range(30)}}).encode()
    with pytest.raises(MetricsProblem) as caught:
        parse_metrics(many, WHERE)
    assert len(caught.value.problems) == 9 and caught.value.problems[-1] == f"{WHERE}: and 22 more problems like these"


def noted_run(run_id: str = "r1"):
    record = make_record("bench", run_id, created=NOW - timedelta(minutes=2), cost=0.001, exit_code=0)
    return record.model_copy(update={"metrics_problem": problem_text(MetricsProblem(*broken_problems()))})


def test_the_note_says_where_once_and_numbers_every_problem():
    note = metrics_note(noted_run())
    assert note.startswith(f"{WHERE} has 3 problems: (1) work.value is 0;")
    assert "(2) metrics.train_seconds.value is \"fast\"" in note and "(3) metrics.acc.unit is missing" in note
    assert metrics_flag(noted_run()) == "metrics.json: 3 problems"
    plain = make_record("bench", "r2", created=NOW, cost=0.001, exit_code=0)
    assert (metrics_note(plain), metrics_flag(plain), run_note(plain)) == ("", "", "")


def test_runs_table_says_it(capsys):
    row = run_row(noted_run(), NOW)
    assert row.status == "succeeded" and row.reason == metrics_note(noted_run())


def test_up_log_line_and_once_table_and_pipe_progress_say_it():
    record = noted_run()
    assert ended_detail(record, {}).endswith(f", but {metrics_note(record)}")
    assert wait_rows([record], NOW)[0][-1] == "metrics.json: 3 problems"
    from io import StringIO

    from rich.console import Console

    out = Console(file=StringIO(), width=200, force_terminal=False)
    out.print(wait_table([record], NOW))
    assert "note" in out.file.getvalue() and "metrics.json: 3 problems" in out.file.getvalue()
    progress = PipeProgress(NOW - timedelta(minutes=2))
    assert progress.lines([record], NOW) == [f"{NOW:%H:%M:%S} bench/r1 succeeded in 1m00s, but metrics.json: 3 problems"]


def test_run_follow_and_logs_follow_say_it():
    record = noted_run()
    reports = []
    streams = Streams(False, write=lambda text: None, report=reports.append)
    streams.start([("bench", "r1")])
    assert streams.outcome([record]) == 0
    assert reports == [f"bench/r1 succeeded in 1m00s, exit 0, but {metrics_note(record)}"]
    output = RunOutput("bench", "r1")
    assert ended_line(output, record) == f"bench/r1 ended succeeded, but {metrics_note(record)} (no logs)"


def test_the_page_says_it():
    page = render_index({"bench": [noted_run()]}, {}, generated_at=NOW)
    assert "metrics.acc.unit is missing" in page and "work.value is 0" in page


def test_the_report_names_every_problem_of_a_file():
    from spotcron.cost.prices import load_prices
    from spotcron.present.report import benchmark_report

    report = benchmark_report("bench", [noted_run()], load_prices(), "us-central1")
    lines = exports.problem_lines(report)
    assert len(lines) == 3 and all(line.startswith("r1: ") or "/r1: " in line for line in lines)
    assert any("metrics.acc.unit is missing" in line for line in lines)
