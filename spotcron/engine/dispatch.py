"""dispatch: one scheduler entry for every job (`scheduling: shared` in infra/stack.yaml).

In per-job mode every job has its own Cloud Scheduler entry ($0.10 a month each beyond three)
and start_job infers the tick from the message's publish time, because Cloud Scheduler's Pub/Sub
messages carry none. In shared mode one entry fires every minute; this function works out which
deployed jobs fire in that minute, with the same cron engine and each job's time zone, and
publishes their start messages with the exact tick. The sweep rides the same entry: on its
interval the dispatcher publishes the sweep's message too.

The cursor (`dispatch/cursor.json`) holds the minute through which every due tick has been
published. Each invocation publishes the ticks in (cursor, now] that are still within their
job's starting_deadline and no older than the minute its schedule was deployed in (not its last
edit: engine/dispatch_specs.py), and only then
moves the cursor, under a generation precondition. The dispatcher is at-least-once: one that
dies or fails anywhere leaves its minutes to the next, and two that race may both publish a
minute. start_job is exactly-once: the run id comes from the tick, so a tick published twice
starts one run. A minute in which nothing fires leaves the cursor alone (a write is a Class A
operation; the catch-up window still starts at the last minute that dispatched).

Without a cursor (the first minute in shared mode) every job is caught up within its deadline
and deploy minute too: a tick its per-job entry already started runs once. A cursor that holds no
minute, or one later than now by more than a clock may be off (a clock jump, a bad write, a
restored object), is damaged: it would make every minute look dispatched and never be
rewritten. It is logged, every job is caught up the same way, and the cursor is written back to
now's minute.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Iterable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta

from spotcron.core import layout
from spotcron.core.cron.schedule import load_time_zone, parse_schedule
from spotcron.core.errors import PreconditionFailed, SpotcronError
from spotcron.core.runs import utc_minute
from spotcron.core.spec import JobSpec
from spotcron.engine.deployed import Replaced, start_body
from spotcron.engine.deps import Deps
from spotcron.engine.dispatch_specs import SpecSource
from spotcron.engine.messages import TICK_ATTRIBUTE, format_tick
from spotcron.engine.tick_trust import vouch_late
from spotcron.engine.ticks import TICK_TOLERANCE

log = logging.getLogger("spotcron.engine")

MINUTE = timedelta(minutes=1)
WRITE_TRIES = 5
PUBLISH_THREADS = 16  # Pub/Sub's client batches concurrent publishes; one at a time would take N round trips
SWEEP_MESSAGE = {"sweep": True}
_DAMAGED = ("starting again from every job's starting_deadline (start_job starts a tick already started "
            "only once)")


class DispatchFailed(SpotcronError):
    """Some start messages were not published; the cursor stays before them, so the next minute retries."""


@dataclass(frozen=True)
class Due:
    spec: JobSpec
    tick: datetime

    @property
    def key(self) -> tuple[str, datetime]:
        return (self.spec.name, self.tick)


@dataclass(frozen=True)
class Cursor:
    through: datetime | None  # every due tick up to this minute is published; None before the first
    generation: int  # of the cursor object; 0 while it does not exist
    damaged: bool = False  # held no minute, or one in the future: catch every job up within its deadline


@dataclass
class DispatchState:
    """What a warm dispatcher keeps between minutes: the cursor as it last read or wrote it. A
    stale one costs a read: it is read again before anything is published."""

    cursor: Cursor | None = None


@dataclass
class DispatchReport:
    minute: datetime
    started: list[tuple[str, datetime]] = field(default_factory=list)  # (job, tick) published
    swept: bool = False
    lost_race: int = 0  # cursor writes another dispatcher got in before
    skipped_jobs: list[str] = field(default_factory=list)  # specs whose schedule did not load

    def summary(self) -> dict[str, object]:
        return {"minute": format_tick(self.minute), "started": len(self.started), "swept": self.swept,
                "lost_race": self.lost_race, "skipped_jobs": len(self.skipped_jobs)}


# --- pure ------------------------------------------------------------------------------------------

def due_ticks(specs: Iterable[JobSpec], *, after: datetime | None, now: datetime,
              skipped: list[str] | None = None, deployed_at: Mapping[str, datetime] | None = None,
              replaced: Mapping[str, Replaced] | None = None) -> list[Due]:
    """Every fire instant t of every unpaused job with after < t <= now, now - t <= its
    starting_deadline, and t not before the minute its schedule was deployed in (`deployed_at`),
    oldest first. `after` None: as far back as those bounds allow. A job whose schedule or zone
    does not load is named in `skipped` and left out: one bad spec must not stop the others.

    Before that minute, the ticks of the spec whose schedule it replaced (`replaced`) within that
    spec's starting_deadline are due, naming it: start_job reads them by the schedule that fired
    them and runs the spec deployed now, or records them skipped."""
    due: list[Due] = []
    for spec in specs:
        gone = (replaced or {}).get(spec.name)
        if gone is not None and deployed_at and spec.name in deployed_at and gone.spec.name == spec.name:
            floor = utc_minute(deployed_at[spec.name])
            since = {spec.name: gone.since} if gone.since is not None else None
            due.extend(d for d in due_ticks([gone.spec], after=after, now=min(now, floor - timedelta(microseconds=1)),
                                            deployed_at=since)
                       if now - d.tick <= timedelta(seconds=gone.spec.starting_deadline))
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
        if deployed_at and spec.name in deployed_at:
            # A job created, rescheduled or unpaused during a minute owns that minute's tick, whether the
            # dispatch of that minute ran before the deploy finished or after; nothing earlier.
            oldest = max(oldest, utc_minute(deployed_at[spec.name]))
        cursor = oldest - timedelta(microseconds=1)
        if after is not None:
            cursor = max(cursor, after)
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


def checked(cursor: Cursor, now: datetime) -> Cursor:
    """`cursor`, or a damaged one when it is later than `now` by more than a clock may be off."""
    if cursor.through is None or cursor.through <= now + TICK_TOLERANCE:
        return cursor
    log.error("dispatch: %s says %s, after now (%s) by more than %ds: damaged (a clock jump, a bad write or a "
              "restored object); %s", layout.DISPATCH_CURSOR, format_tick(cursor.through),
              now.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ"), TICK_TOLERANCE.total_seconds(), _DAMAGED)
    return Cursor(None, cursor.generation, damaged=True)


# --- the cursor --------------------------------------------------------------------------------------

def read_cursor(deps: Deps, now: datetime | None = None) -> Cursor:
    blob = deps.blobs.read(layout.DISPATCH_CURSOR)
    if blob is None:
        return Cursor(None, 0)
    try:
        raw = json.loads(blob.data)["through"]
        if raw is None:  # written before the first dispatch ever finished
            return Cursor(None, blob.generation)
        through = datetime.fromisoformat(raw.replace("Z", "+00:00"))
        if through.tzinfo is None:
            raise ValueError("no time zone")
    except (ValueError, KeyError, TypeError, AttributeError) as exc:
        # Overwritten under the same precondition as any other cursor.
        log.error("dispatch: %s does not hold a minute (%s): damaged; %s", layout.DISPATCH_CURSOR, exc, _DAMAGED)
        return Cursor(None, blob.generation, damaged=True)
    return checked(Cursor(through.astimezone(UTC), blob.generation), now if now is not None else deps.clock.now())


def _write_cursor(deps: Deps, through: datetime, generation: int) -> int:
    body = json.dumps({"through": format_tick(through)}).encode()
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
    deployed_at = source.deployed_at()
    replaced = source.replaced()

    def due_after(cursor: Cursor) -> list[Due]:
        skipped: list[str] = []
        # No cursor (the first minute in shared mode, or one whose dispatcher died before writing
        # it) or a damaged one: as far back as each job's deadline and deploy minute allow.
        due = due_ticks(specs, after=cursor.through, now=now, skipped=skipped, deployed_at=deployed_at,
                        replaced=replaced)
        report.skipped_jobs = skipped
        return due

    held = checked(state.cursor, now) if state.cursor is not None else None
    cursor = held if held is not None and not held.damaged else read_cursor(deps, now)
    due = due_after(cursor)
    if due and cursor is held:
        # A warm instance's cursor may be stale (another instance dispatched since): read it before
        # publishing, or that instance's minutes would go out again.
        cursor = read_cursor(deps, now)
        due = due_after(cursor)
    state.cursor = cursor
    if not due and not cursor.damaged:
        return report
    vouch_late(deps, [item.key for item in due], minute)  # a catch-up's ticks are published late on purpose
    failed = _publish(deps, due, report)
    # Only now may the cursor say these minutes are done: a dispatcher that dies before this line
    # leaves them to the next one. After a failure, only up to the minute before the oldest tick
    # that failed: the next minute publishes it (and those after it) again.
    through = minute if not failed else min(item.tick for item, _ in failed) - MINUTE
    state.cursor = _advance(deps, cursor, through, now, report)
    if failed:
        raise DispatchFailed(f"{len(failed)} of {len(due)} start messages were not published (the next minute tries "
                             "them again): " + "; ".join(f"{item.spec.name} at {format_tick(item.tick)}: {exc}"
                                                         for item, exc in failed[:5]))
    return report


def _advance(deps: Deps, cursor: Cursor, through: datetime, now: datetime, report: DispatchReport) -> Cursor | None:
    """Move the cursor to `through` unless it is there or later already; None when unsure.

    Losing the precondition means another dispatcher wrote first. Writing over it is still right:
    what it recorded was published, and so is everything up to `through`."""
    for _ in range(WRITE_TRIES):
        if not cursor.damaged and cursor.through is not None and cursor.through >= through:
            return cursor
        try:
            return Cursor(through, _write_cursor(deps, through, cursor.generation))
        except PreconditionFailed:
            report.lost_race += 1
            cursor = read_cursor(deps, now)
    log.error("dispatch: %s changed under each of %d writes; the next minute publishes these ticks again "
              "(start_job starts each once)", layout.DISPATCH_CURSOR, WRITE_TRIES)
    return None


def _publish(deps: Deps, due: Sequence[Due], report: DispatchReport) -> list[tuple[Due, Exception]]:
    def one(item: Due) -> tuple[str, datetime]:
        deps.events.publish(deps.settings.start_topic, start_body(item.spec),
                            {TICK_ATTRIBUTE: format_tick(item.tick)})
        return item.key

    failures: list[tuple[Due, Exception]] = []
    if not due:
        return failures
    with ThreadPoolExecutor(max_workers=min(PUBLISH_THREADS, len(due))) as pool:
        futures = [(item, pool.submit(one, item)) for item in due]
        for item, future in futures:
            try:
                report.started.append(future.result())
            except Exception as exc:  # noqa: BLE001 - every message gets its try; the rest are retried
                failures.append((item, exc))
    return failures
