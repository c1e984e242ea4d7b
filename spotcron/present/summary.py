"""The results page's summary: how the jobs are doing and what they cost, from their run records.

Pure: records and `now` in, figures out. Success rates count runs that ran to a verdict and were
created in the window (present/success.py: skipped, missed and cancelled runs are named beside the
rate, not counted as failures; a run still going has no verdict yet); spend is what the records priced (every
attempt's VM and disk), so it leaves out the stack's fixed items (scheduler, functions, storage),
which `spotcron cost` projects from the schedules.
"""

from __future__ import annotations

import calendar
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

from spotcron.core.runs import RunRecord
from spotcron.cost.local_wait import work_cost_usd
from spotcron.engine.store import run_sort_key
from spotcron.present.success import Tally

WINDOWS_DAYS = (7, 30)
PROJECTION_DAYS = 30  # the run rate of the last 30 days, scaled to this month's length


@dataclass(frozen=True)
class Rate:
    days: int
    tally: Tally  # of the runs that ran (present/success.py); skipped and cancelled ones beside it

    @property
    def succeeded(self) -> int:
        return self.tally.succeeded

    @property
    def ran(self) -> int:
        return self.tally.ran

    @property
    def percent(self) -> float | None:
        return self.tally.percent

    def text(self) -> str:
        return self.tally.text()


@dataclass(frozen=True)
class PageSummary:
    jobs: int
    runs: int  # every run on record, of every job
    rates: tuple[Rate, ...]
    month: str  # "November 2026"
    spent_this_month: float
    projected_month: float | None  # None: no priced run in the last 30 days
    projection_basis: str
    sampled: int | None = None  # figures from only the newest N runs of each job (None: all of the window)

    def rate(self, days: int) -> Rate:
        return next(r for r in self.rates if r.days == days)


def window_start(now: datetime) -> datetime:
    """The oldest moment the summary looks at: 30 days back, or the start of the month if earlier."""
    month_start = now.astimezone(UTC).replace(day=1, hour=0, minute=0, second=0, microsecond=0)
    return min(month_start, now - timedelta(days=max(WINDOWS_DAYS + (PROJECTION_DAYS,))))


def ids_since(run_ids: Iterable[str], since: datetime) -> list[str]:
    """The run ids whose tick is at or after `since` (run ids start with their UTC minute)."""
    cutoff = f"{since.astimezone(UTC):%Y%m%d-%H%M}"
    return [run_id for run_id in run_ids if run_sort_key(run_id) >= cutoff]


def summarize(records_by_job: Mapping[str, Sequence[RunRecord]], now: datetime, *,
              totals: Mapping[str, int] | None = None, sampled: int | None = None) -> PageSummary:
    """`records_by_job` holds at least every run since `window_start(now)`; `totals` counts all runs."""
    now = now.astimezone(UTC)
    records = [r for rs in records_by_job.values() for r in rs]
    rates = []
    for days in WINDOWS_DAYS:
        since = now - timedelta(days=days)
        rates.append(Rate(days, Tally.of(r for r in records if r.created_at >= since)))
    month_start = now.replace(day=1, hour=0, minute=0, second=0, microsecond=0)
    spent = sum(work_cost_usd(r) or 0.0 for r in records if r.created_at >= month_start)
    projected, basis = _projection(records, now)
    runs = sum(totals.values()) if totals is not None else len(records)
    return PageSummary(jobs=len(records_by_job), runs=runs, rates=tuple(rates), month=f"{now:%B %Y}",
                       spent_this_month=spent, projected_month=projected, projection_basis=basis, sampled=sampled)


def _projection(records: Sequence[RunRecord], now: datetime) -> tuple[float | None, str]:
    """The last 30 days' run costs per day, times the days of this month.

    A stack younger than 30 days is measured from its first run in the window (at least a day),
    so a week-old stack is not projected at a quarter of its rate.
    """
    since = now - timedelta(days=PROJECTION_DAYS)
    priced = [r for r in records if r.created_at >= since and r.cost_usd is not None]
    if not priced:
        return None, "no priced runs in the last 30 days"
    first = min(r.created_at for r in priced)
    days = min(float(PROJECTION_DAYS), max(1.0, (now - first).total_seconds() / 86400))
    month_days = calendar.monthrange(now.year, now.month)[1]
    spent = sum(work_cost_usd(r) or 0.0 for r in priced)
    span = f"{days:.0f} days" if days >= 2 else "1 day"
    return spent / days * month_days, f"the run rate of the last {span}, over {month_days} days"
