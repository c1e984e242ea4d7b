"""Which tick a start message means: the schedule's fire instants, read exactly as Cloud Scheduler
reads them, and how far a named tick may sit from now."""

from __future__ import annotations

from datetime import datetime, timedelta
from zoneinfo import ZoneInfo

from spotcron.core.cron.schedule import CronSchedule, load_time_zone, parse_schedule
from spotcron.core.durations import format_duration
from spotcron.core.errors import SpotcronError
from spotcron.core.spec import JobSpec


class BadTrigger(SpotcronError):
    """A start message that can never be acted on (acknowledge it, do not retry)."""

# How far apart two clocks may be: a tick (or a dispatch cursor) later than now by more is wrong.
TICK_TOLERANCE = timedelta(seconds=60)


# A named tick older than the job's starting_deadline by more than this is refused outright
# (acknowledged, logged) instead of recorded as missed: Pub/Sub redelivers a message for at most
# its subscription's retention (7 days at most), and a tick of year 1 must never reach the
# schedule walk (it overflows there, and a failing message is redelivered for a day).
STALE_TICK_MARGIN = timedelta(days=7)


def readable_schedule(spec: JobSpec) -> tuple[CronSchedule, ZoneInfo]:
    """The job's schedule and zone; BadTrigger when this runtime cannot read them.

    A bad cron string, or a zone this runtime's tzdata lacks, fails the same way on every
    redelivery: acknowledging it is the only way to stop Pub/Sub retrying until retention ends.
    """
    try:
        return parse_schedule(spec.schedule), load_time_zone(spec.time_zone)
    except SpotcronError as exc:
        raise BadTrigger(f"job {spec.name}: cannot read its schedule {spec.schedule!r} in time zone "
                         f"{spec.time_zone!r}: {exc}; fix the job file and deploy it again") from None


def latest_fire(spec: JobSpec, schedule: CronSchedule, zone: ZoneInfo, at: datetime) -> datetime | None:
    """The schedule's latest fire time at or before `at`; BadTrigger when `at` is out of the
    calendar's range (the walk overflows at year 1 or 9999): it would fail on every redelivery."""
    try:
        return schedule.latest_at_or_before(at, zone)
    except (OverflowError, ValueError) as exc:
        raise BadTrigger(f"job {spec.name}: no fire time of {spec.schedule!r} can be found before {at:%Y-%m-%dT%H:%M}Z "
                         f"({exc})") from None


def exact_tick(spec: JobSpec, tick: datetime, *, now: datetime) -> datetime:
    """`tick` when it is one of the schedule's fire instants and is due by `now`; BadTrigger
    otherwise, so a message naming any other minute cannot start a run the schedule never asked
    for, nor one before its time."""
    if tick > now + TICK_TOLERANCE:
        raise BadTrigger(f"job {spec.name}: tick {tick:%Y-%m-%dT%H:%M}Z is {format_duration((tick - now).total_seconds())} "
                         f"after now ({now:%Y-%m-%dT%H:%M:%S}Z), more than the {TICK_TOLERANCE.total_seconds():.0f}s "
                         f"a clock may be off: a dispatcher publishes a tick only once it is due, so this message is "
                         f"refused; check the clock of whatever published it")
    oldest = now - timedelta(seconds=spec.starting_deadline) - STALE_TICK_MARGIN
    if tick < oldest:
        raise BadTrigger(f"job {spec.name}: tick {tick:%Y-%m-%dT%H:%M}Z is older than its starting_deadline "
                         f"({format_duration(spec.starting_deadline)}) plus {format_duration(STALE_TICK_MARGIN.total_seconds())}: "
                         f"no redelivery is that late, so this message is refused")
    schedule, zone = readable_schedule(spec)
    fired = latest_fire(spec, schedule, zone, tick)
    if fired != tick:
        raise BadTrigger(f"job {spec.name}: tick {tick:%Y-%m-%dT%H:%M}Z is not a fire time of schedule "
                         f"{spec.schedule!r} in {spec.time_zone}")
    return tick
