"""A local run whose container ran 2 s after waiting 38 s for its turn on the host: `up` (a log line,
its table, a pipe), `run --follow` and `runs` say both, never "succeeded in 40s"."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from spotcron.core import layout
from spotcron.core.hardware import Hardware
from spotcron.core.runs import Attempt, RunRecord
from spotcron.present.follow import Streams
from spotcron.present.live import ended_detail, wait_rows
from spotcron.present.progress import PipeProgress
from spotcron.present.views import run_row

T0 = datetime(2026, 11, 22, 10, 0, tzinfo=UTC)


def waited_run(waited: float | None = 38.0) -> RunRecord:
    start = T0 + timedelta(seconds=(waited or 0) + 0.5)
    attempt = Attempt(number=1, vm_name="sc-bench-a1", machine_type="e2-standard-2", zone="local-zone1-a",
                      created_at=T0, started_at=start, finished_at=start + timedelta(seconds=2),
                      deleted_at=start + timedelta(seconds=2.5), outcome="exited", exit_code=0)
    return RunRecord(job="bench", run_id="20261122-1000-r2", state="succeeded", created_at=T0,
                     updated_at=start + timedelta(seconds=2.5), attempts=(attempt,), exit_code=0, cost_usd=0.0001,
                     local_wait_s=waited, results_prefix=layout.attempt_prefix("bench", "20261122-1000-r2", 1),
                     hardware=Hardware(local=True, host="laptop", cpus=2, waited_s=waited))


def test_up_says_the_work_and_the_wait_in_a_pipe_a_log_line_and_its_table():
    record = waited_run()
    progress = PipeProgress(T0)
    assert progress.lines([record], T0 + timedelta(seconds=41)) == [
        "10:00:41 bench/20261122-1000-r2 succeeded in 2s (waited 38s for its turn)"]
    assert ended_detail(record, {}) == "in 2s (waited 38s for its turn), $0.0001, exit 0"
    assert wait_rows([record], T0 + timedelta(seconds=41))[0][4] == "2s (waited 38s)"


def test_run_follow_and_runs_say_it_too():
    record = waited_run()
    reports: list[str] = []
    streams = Streams(False, write=lambda text: None, report=reports.append)
    streams.start([("bench", record.run_id)])
    assert streams.outcome([record]) == 0
    assert reports == ["bench/20261122-1000-r2 succeeded in 2s (waited 38s for its turn), exit 0"]
    assert run_row(record, T0).duration == "2s (waited 38s)"


def test_a_run_that_did_not_wait_says_its_work_time_alone():
    record = waited_run(None)
    assert PipeProgress(T0).lines([record], T0 + timedelta(seconds=3)) == [
        "10:00:03 bench/20261122-1000-r2 succeeded in 2s"]
    assert run_row(record, T0).duration == "2s"


def test_a_wait_under_a_second_is_not_said():
    """The first repeat takes its turn at once: "(waited 0s for its turn)" says nothing."""
    record = waited_run(0.3)
    assert PipeProgress(T0).lines([record], T0 + timedelta(seconds=3)) == [
        "10:00:03 bench/20261122-1000-r2 succeeded in 2s"]
    assert run_row(record, T0).duration == "2s"
