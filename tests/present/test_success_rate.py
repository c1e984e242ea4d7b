"""The success rate counts the runs that ran: a run skipped (the host lacks its GPU, a concurrency
policy, a late tick), missed or cancelled is named beside the rate, never counted as a failure.
Before, `make run` on a host without a GPU gave "succeeded, last 7 days 70% (14 of 20)" and "12 of
18 ended runs succeeded" though nothing had failed."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from spotcron.core.runs import Attempt, RunRecord
from spotcron.present.page import render_index
from spotcron.present.success import Tally
from spotcron.present.summary import summarize

NOW = datetime(2026, 11, 24, 8, 0, tzinfo=UTC)
GPU_SKIP = ("not run on this host: the configuration asks for nvidia-tesla-t4 x1, and this host has no NVIDIA GPU "
            "(nvidia-smi lists none); not run on the CPU")


def record(minutes: int, state: str, reason: str | None = None, job: str = "bench") -> RunRecord:
    at = NOW - timedelta(minutes=minutes)
    ran = state not in ("skipped", "missed")
    attempts = (Attempt(number=1, vm_name=f"sc-{job}-{minutes}", machine_type="e2-small", created_at=at,
                        started_at=at + timedelta(seconds=5), finished_at=at + timedelta(seconds=9),
                        deleted_at=at + timedelta(seconds=10)),) if ran else ()
    return RunRecord(job=job, run_id=f"{at:%Y%m%d-%H%M}", state=state, reason=reason, created_at=at, updated_at=at,
                     attempts=attempts, cost_usd=0.0001 if ran else None)


def make_run() -> list[RunRecord]:
    """What `make run` leaves on a host without a GPU: every run that ran succeeded."""
    return ([record(m, "succeeded") for m in range(1, 15)] + [record(m, "skipped", GPU_SKIP) for m in range(20, 26)]
            + [record(30, "running")])


def test_skipped_runs_are_beside_the_rate_not_failures():
    tally = Tally.of(make_run())
    assert (tally.succeeded, tally.ran, tally.percent) == (14, 14, 100.0)
    assert tally.text() == "100% (14 of 14 that ran; 6 skipped, not counted)"


def test_failures_still_count_and_cancelled_and_missed_are_named():
    runs = make_run() + [record(40, "failed", "the job exited with code 3"), record(41, "timed_out"),
                         record(42, "cancelled", "the local stack was stopped"), record(43, "missed")]
    tally = Tally.of(runs)
    assert (tally.succeeded, tally.ran) == (14, 16)
    assert tally.text() == "88% (14 of 16 that ran; 6 skipped, 1 missed, 1 cancelled, not counted)"
    assert Tally.of([record(1, "skipped")]).text() == "no runs ran (1 skipped)"
    assert Tally.of([]).text() == "no runs ended"


def test_the_page_summary_and_job_line_leave_skipped_runs_out_of_the_rate():
    runs = make_run()
    summary = summarize({"bench": runs}, NOW)
    assert summary.rate(7).text() == "100% (14 of 14 that ran; 6 skipped, not counted)"
    html = render_index({"bench": runs}, {}, generated_at=NOW, summary=summary)
    assert "<dt>succeeded, last 7 days</dt><dd>100% (14 of 14 that ran; 6 skipped, not counted)</dd>" in html
    assert "of these, 14 of 14 runs that ran succeeded (6 skipped, not counted)" in html
