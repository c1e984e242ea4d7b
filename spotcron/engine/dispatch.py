"""dispatch: one scheduler entry for every job (`scheduling: shared` in infra/stack.yaml).

In per-job mode every job has its own Cloud Scheduler entry ($0.10 a month each beyond three)
and start_job infers the tick from the message's publish time, because Cloud Scheduler's Pub/Sub
messages carry none. In shared mode one entry fires every minute; this function works out which
deployed jobs fire in that minute, with the same cron engine and each job's time zone, and
publishes their start messages with the exact tick. The sweep rides the same entry: on its
interval the dispatcher publishes the sweep's message too.

The cursor (`dispatch/cursor.json`) holds the last minute dispatched. Each invocation starts the
ticks in (cursor, now] that are still within their job's starting_deadline, so after an outage
the missed minutes are caught up. The cursor moves *before* anything is published, under a
generation precondition: of two dispatchers racing on one minute only one wins the write, and
only the winner publishes. A minute in which nothing fires leaves the cursor alone (a write is
a Class A operation; the catch-up window still starts at the last minute that dispatched).
"""

from __future__ import annotations

import json
import logging
from collections.abc import Iterable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta

from spotcron.core import layout
from spotcron.core.cron.schedule import load_time_zone, parse_schedule
from spotcron.core.errors import PreconditionFailed, SpotcronError
from spotcron.core.runs import utc_minute
from spotcron.core.spec import JobSpec
from spotcron.engine.deployed import start_body
from spotcron.engine.deps import Deps
from spotcron.engine.dispatch_specs import SpecSource
from spotcron.engine.messages import TICK_ATTRIBUTE, format_tick

log = logging.getLogger("spotcron.engine")

MINUTE = timedelta(minutes=1)
CLAIM_TRIES = 5
PUBLISH_THREADS = 16  # Pub/Sub's client batches concurrent publishes; one at a time would take N round trips
SWEEP_MESSAGE = {"sweep": True}


class DispatchFailed(SpotcronError):
    """Some start messages could not be published; the cursor went back so the next minute retries."""

    def __init__(self, message: str, *, cursor: Cursor | None = None):
        super().__init__(message)
        self.cursor = cursor  # as given back, when it could be


@dataclass(frozen=True)
class Due:
    spec: JobSpec
    tick: datetime

    @property
    def key(self) -> tuple[str, datetime]:
        return (self.spec.name, self.tick)


@dataclass(frozen=True)
class Cursor:
    through: datetime | None  # the last minute dispatched; None before the first
    generation: int  # of the cursor object; 0 while it does not exist


@dataclass
class DispatchState:
    """What a warm dispatcher keeps between minutes: the cursor as it last read or wrote it. A
    stale one costs nothing but a lost claim: the write's precondition fails, and it reads again."""

    cursor: Cursor | None = None


@dataclass
class DispatchReport:
    minute: datetime
    started: list[tuple[str, datetime]] = field(default_factory=list)  # (job, tick) published
    swept: bool = False
    lost_race: int = 0  # claims another dispatcher won first
    skipped_jobs: list[str] = field(default_factory=list)  # specs whose schedule did not load

    def summary(self) -> dict[str, object]:
        return {"minute": format_tick(self.minute), "started": len(self.started), "swept": self.swept,
                "lost_race": self.lost_race, "skipped_jobs": len(self.skipped_jobs)}


# --- pure ------------------------------------------------------------------------------------------

def due_ticks(specs: Iterable[JobSpec], *, after: datetime, now: datetime,
              skipped: list[str] | None = None) -> list[Due]:
    """Every fire instant t of every unpaused job with after < t <= now and now - t <= its
    starting_deadline, oldest first. A job whose schedule or zone does not load is named in
    `skipped` and left out: one bad spec must not stop the others."""
    due: list[Due] = []
    for spec in specs:
        if spec.paused:
            continue
        try:
            cron, tz = parse_schedule(spec.schedule), load_time_zone(spec.time_zone)
        except SpotcronError as exc:
            log.error("dispatch: job %s left out: %s", spec.name, exc)
            if skipped is not None:
                skipped.append(spec.name)
            continue
        # A tick exactly starting_deadline old still runs, as in launch; one microsecond more does not.
        oldest = now - timedelta(seconds=spec.starting_deadline)
        cursor = max(after, oldest - timedelta(microseconds=1))
        while (tick := cron.next_after(cursor, tz)) <= now:
            due.append(Due(spec, tick))
            cursor = tick
    return sorted(due, key=lambda d: (d.tick, d.spec.name))


def sweep_due(now: datetime, interval_s: int) -> bool:
    """Whether `now`'s minute is one of the sweep's: every `interval_s` rounded to whole minutes,
    counted from the hour (as deploy's `*/N * * * *` sweep entry fires in per-job mode)."""
    minutes = max(1, round(interval_s / 60))
    if minutes >= 60:
        hours = minutes // 60
        return now.minute == 0 and now.hour % max(1, min(hours, 24)) == 0
    return now.minute % minutes == 0


def start_message(spec: JobSpec) -> dict:
    """The start message's body for `spec`: what its own scheduler entry would publish (name, digest)."""
    return start_body(spec)


# --- the cursor --------------------------------------------------------------------------------------

def read_cursor(deps: Deps) -> Cursor:
    blob = deps.blobs.read(layout.DISPATCH_CURSOR)
    if blob is None:
        return Cursor(None, 0)
    try:
        raw = json.loads(blob.data)["through"]
        if raw is None:  # given back before the first dispatch ever finished
            return Cursor(None, blob.generation)
        through = datetime.fromisoformat(raw.replace("Z", "+00:00"))
        if through.tzinfo is None:
            raise ValueError("no time zone")
    except (ValueError, KeyError, TypeError, AttributeError) as exc:
        # Overwritten under the same precondition as any other cursor, so a racing dispatcher still loses.
        log.error("dispatch: %s does not hold a minute (%s); starting from this minute", layout.DISPATCH_CURSOR, exc)
        return Cursor(None, blob.generation)
    return Cursor(through.astimezone(UTC), blob.generation)


def _write_cursor(deps: Deps, through: datetime | None, generation: int) -> int:
    body = json.dumps({"through": format_tick(through) if through else None}).encode()
    return deps.blobs.write(layout.DISPATCH_CURSOR, body, if_generation_match=generation,
                            content_type="application/json")


# --- the function ------------------------------------------------------------------------------------

def dispatch(deps: Deps, source: SpecSource, *, version: str | None = None,
             state: DispatchState | None = None) -> DispatchReport:
    """Start every tick due now (and any missed ones still within their deadline); sweep on its interval.

    `version`: the deployed set's version from the dispatch message (see dispatch_specs); `state`:
    kept by the caller between invocations, so a minute in which nothing fires reads nothing.
    """
    state = state if state is not None else DispatchState()
    now = deps.clock.now()
    minute = utc_minute(now)
    report = DispatchReport(minute=minute)
    if sweep_due(now, deps.settings.sweep_interval):
        # Not claimed: a second sweep costs one invocation and changes nothing the first did not.
        deps.events.publish(deps.settings.sweep_topic, SWEEP_MESSAGE)
        report.swept = True
    specs = source.current(version)
    for _ in range(CLAIM_TRIES):
        if state.cursor is None:
            state.cursor = read_cursor(deps)
        cursor = state.cursor
        after = cursor.through if cursor.through is not None else minute - MINUTE
        skipped: list[str] = []
        due = due_ticks(specs, after=after, now=now, skipped=skipped)
        report.skipped_jobs = skipped
        if not due:
            return report
        through = max(minute, after)
        try:
            claimed = _write_cursor(deps, through, cursor.generation)
        except PreconditionFailed:
            report.lost_race += 1  # another dispatcher took these minutes (or ours was stale): look again
            state.cursor = None
            continue
        state.cursor = Cursor(through, claimed)
        try:
            _publish(deps, due, after, claimed, report)
        except DispatchFailed as failed:
            state.cursor = failed.cursor
            raise
        return report
    raise DispatchFailed(f"the dispatch cursor kept changing; gave up after {CLAIM_TRIES} tries")


def _publish(deps: Deps, due: Sequence[Due], after: datetime, claimed: int, report: DispatchReport) -> None:
    def one(item: Due) -> tuple[str, datetime]:
        deps.events.publish(deps.settings.start_topic, start_message(item.spec),
                            {TICK_ATTRIBUTE: format_tick(item.tick)})
        return item.key

    failures: list[str] = []
    with ThreadPoolExecutor(max_workers=min(PUBLISH_THREADS, len(due))) as pool:
        futures = [(item, pool.submit(one, item)) for item in due]
        for item, future in futures:
            try:
                report.started.append(future.result())
            except Exception as exc:  # noqa: BLE001 - every message gets its try; the rest are retried
                failures.append(f"{item.spec.name} at {format_tick(item.tick)}: {exc}")
    if not failures:
        return
    # Give the minutes back (to where this window began, even when there was no cursor before) so
    # the next invocation starts them again; those already published still start once (the run
    # id comes from the tick).
    cursor: Cursor | None = None
    try:
        cursor = Cursor(after, _write_cursor(deps, after, claimed))
        outcome = "the next minute tries them again"
    except PreconditionFailed:
        outcome = "another dispatcher has moved on, so they are lost"
    raise DispatchFailed(f"{len(failures)} of {len(due)} start messages were not published ({outcome}): "
                         + "; ".join(failures[:5]), cursor=cursor)
