"""What `spotcron up` draws, from plain data: the log lines, the panel's rows and the --once table,
without click, a stack or a terminal."""

from __future__ import annotations

import io
from datetime import timedelta

from rich.console import Console

from spotcron.present.live import (
    InFlight,
    ended_detail,
    flight_rows,
    job_rows,
    log_line,
    panel,
    wait_rows,
    wait_table,
)
from tests.cli.conftest import NOW, make_attempt, make_record


def rendered(renderable) -> str:
    out = Console(file=io.StringIO(), width=120, force_terminal=False)
    out.print(renderable)
    return out.file.getvalue()


def test_jobs_come_soonest_first_and_a_fire_time_already_passed_says_0s():
    upcoming = {"late": NOW + timedelta(hours=2), "soon": NOW + timedelta(seconds=90), "due": NOW - timedelta(seconds=5)}
    assert job_rows(upcoming, NOW) == [
        ("due", "2026-03-02 11:59", "0s"),
        ("soon", "2026-03-02 12:01", "1m30s"),
        ("late", "2026-03-02 14:00", "2h00m"),
    ]


def test_runs_in_flight_come_oldest_first_with_how_long_they_have_been_on():
    flying = [InFlight("bot", "r2", "queued", NOW - timedelta(seconds=5)),
              InFlight("bot", "r1", "running", NOW - timedelta(minutes=3), vm="sc-bot-r1-a1")]
    assert flight_rows(flying, NOW) == [("bot/r1", "running", "3m00s", "sc-bot-r1-a1"), ("bot/r2", "queued", "5s", "")]


def test_the_panel_lists_jobs_then_runs_in_flight_then_the_footer():
    flying = [InFlight("bot", "r1", "running", NOW - timedelta(seconds=12), vm="sc-bot-r1-a1")]
    text = rendered(panel({"hello-bot": NOW + timedelta(minutes=3)}, flying, 2, NOW))
    assert text.index("hello-bot") < text.index("runs in flight") < text.index("bot/r1")
    assert "2026-03-02 12:03" in text and "3m00s" in text and "12s" in text and "sc-bot-r1-a1" in text
    assert text.rstrip().endswith("2 problem(s) in the job files (above). Ctrl-C stops everything.")
    quiet = rendered(panel({}, [], 0, NOW))
    assert "runs in flight" not in quiet and quiet.rstrip().endswith("\nCtrl-C stops everything.")


def test_a_log_line_is_the_utc_time_the_subject_the_word_and_the_detail():
    assert log_line(NOW, "bot/r1", "started", "VM sc-bot-r1-a1 in z").plain == \
        "12:00:00 bot/r1 started  VM sc-bot-r1-a1 in z"
    assert log_line(NOW, "", "warning", "").plain == "12:00:00 warning"
    styled = log_line(NOW, "", "error", "bad")
    assert [span.style for span in styled.spans][-1] == "red"


def test_an_ended_run_says_how_long_what_it_cost_its_exit_code_and_why_it_failed():
    done = make_record("bot", "r1", created=NOW, cost=0.00012, exit_code=0, reason="ignored when it succeeded")
    assert ended_detail(done, {}) == "in 1m00s, $0.00012, exit 0"
    failed = make_record("bot", "r2", "failed", created=NOW, cost=0.0001, exit_code=3, reason="exited 3\n  trace",
                         attempts=(make_attempt("bot", "r2", start=NOW, seconds=2, exit_code=3),))
    assert ended_detail(failed, {}) == "in 2s, $0.0001, exit 3: exited 3 trace"
    assert ended_detail(None, {"reason": "its record is gone"}) == "its record is gone"
    assert ended_detail(None, {}) == ""


def test_the_once_table_has_a_row_per_run_coloured_by_state():
    done = make_record("bot", "r1", created=NOW - timedelta(minutes=2), cost=0.001, exit_code=0)
    running = make_record("bot", "r2", "running", created=NOW - timedelta(seconds=30))
    failed = make_record("bot", "r3", "failed", created=NOW - timedelta(seconds=30), exit_code=1)
    assert wait_rows([done, running, failed], NOW) == [
        ("bot/r1", "succeeded", "green", "1", "1m00s", ""),  # an ended run: its work, as `runs` says it
        ("bot/r2", "running", "cyan", "1", "30s", ""),
        ("bot/r3", "failed", "red", "1", "1m00s", ""),
    ]
    text = rendered(wait_table([running], NOW))
    assert "attempt" in text and "bot/r2" in text and "running" in text and "[cyan]" not in text
