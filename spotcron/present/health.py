"""Schedule health at a glance: per job, from its deployed spec and its run records.

Last success, the current streak of failures, missed and late ticks over the last 7 days (late:
started more than a minute after its tick), the next due time and where notifications go. A manual
run counts only when it ran the job's own spec (no overrides), as for notifications
(engine/notifications.py). Pure: records, spec and `now` in, rows out; `spotcron status` and the page use it.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime, timedelta

from spotcron.core.cron.schedule import load_time_zone, parse_schedule
from spotcron.core.errors import SpotcronError
from spotcron.core.notify_spec import Notify
from spotcron.core.runs import RunRecord, RunState
from spotcron.core.spec import JobSpec
from spotcron.engine.notifications import counts
from spotcron.engine.store import run_sort_key

WINDOW = timedelta(days=7)
LATE_AFTER = timedelta(minutes=1)
HEALTH_COLUMNS = ("job", "last success", "failing", "missed 7d", "late 7d", "next due", "notifications")
HEALTH_DROP_ORDER = ("notifications", "late 7d")


@dataclass(frozen=True)
class Health:
    job: str
    last_success: datetime | None
    consecutive_failures: int
    missed_7d: int  # ticks
    late_7d: int  # runs
    next_due: datetime | None  # None: paused, or a schedule that does not load
    paused: bool
    notifications: tuple[str, ...]

    def cells(self, now: datetime) -> tuple[str, ...]:
        from spotcron.present.views import format_age

        success = (f"{self.last_success:%Y-%m-%d %H:%M} ({format_age((now - self.last_success).total_seconds())} ago)"
                   if self.last_success else "never")
        due = "paused" if self.paused else (f"{self.next_due:%Y-%m-%d %H:%M} UTC" if self.next_due else "?")
        return (self.job, success, str(self.consecutive_failures), str(self.missed_7d), str(self.late_7d), due,
                ", ".join(self.notifications) or "none")

    def to_json(self) -> dict:
        return {"job": self.job, "last_success": self.last_success.isoformat() if self.last_success else None,
                "consecutive_failures": self.consecutive_failures, "missed_ticks_7d": self.missed_7d,
                "late_ticks_7d": self.late_7d, "next_due": self.next_due.isoformat() if self.next_due else None,
                "paused": self.paused, "notifications": list(self.notifications)}


def started_late(record: RunRecord) -> bool:
    """Whether a scheduled run started (its first VM, else its record) more than a minute after its tick."""
    if record.trigger != "schedule" or record.tick is None or record.state == RunState.MISSED:
        return False
    first = next((a.created_at for a in record.attempts if a.created_at is not None), None)
    return (first or record.created_at) - record.tick > LATE_AFTER


def missed_ticks(record: RunRecord) -> int:
    if record.state == RunState.MISSED:
        return record.missed_ticks or 1
    # A trigger that arrived past its starting_deadline: skipped, its reason says missed.
    if record.state == RunState.SKIPPED and (record.reason or "").startswith("missed"):
        return 1
    return 0


def job_health(spec: JobSpec, records: Iterable[RunRecord], now: datetime, default: Notify | None = None) -> Health:
    ordered = sorted(records, key=lambda r: run_sort_key(r.run_id), reverse=True)  # newest first
    since = now - WINDOW
    last_success = next((r.updated_at for r in ordered if r.state == RunState.SUCCEEDED and counts(r) == "good"), None)
    failures = 0
    for record in ordered:
        kind = counts(record)
        if kind == "good":
            break
        if kind == "bad":
            failures += 1
    recent = [r for r in ordered if (r.missed_until or r.tick or r.created_at) >= since]
    missed = sum(missed_ticks(r) for r in recent)
    late = sum(1 for r in recent if started_late(r))
    next_due = None
    if not spec.paused:
        try:
            next_due = parse_schedule(spec.schedule).next_after(now, load_time_zone(spec.time_zone))
        except SpotcronError:
            next_due = None
    config = spec.notify or default
    return Health(job=spec.name, last_success=last_success, consecutive_failures=failures, missed_7d=missed,
                  late_7d=late, next_due=next_due, paused=spec.paused,
                  notifications=tuple(config.destinations()) if config else ())
