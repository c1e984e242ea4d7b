"""Missed ticks: a tick that was due and never started leaves a `missed` record.

A tick is missed when its starting_deadline has passed and no run of it has a record: no start
message reached start_job (the scheduler entry paused or deleted, the start or dispatch function
failing, a deploy in between, `spotcron up` stopped or the machine asleep). Fire times come from
the same cron code that fires the ticks (core/cron/schedule.py), from where the previous pass
stopped (`missed/JOB.json`: the instant checked through, and the missed record still open) and
never from before the job's schedule was deployed as it is now (engine/dispatch_specs.py: an
edit of anything else leaves that time alone). A paused job misses nothing.

Consecutive missed ticks of one job are one record, named after the first tick, with their count
and the last tick (`missed_ticks`, `missed_until`): an every-minute job down for a day is one
record, extended pass by pass, never 1,440. A record is created ended (state `missed`), so its
end owes what every end owes (run.finished, the log entry, the notification of a `missed`
streak's start); extending it owes nothing again. Whether a tick has a record is one read of the
record a start of it would have made, so a pass costs a read per tick due since the last one.

The sweep runs a pass in both scheduling modes (runtime/entrypoints.py), once an hour (`pass_due`:
a missed tick is recorded within the hour after its starting_deadline); `spotcron up` runs one at
every sweep and at start, for the ticks that fell while it was stopped.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

from spotcron.core.cron.schedule import load_time_zone, parse_schedule
from spotcron.core.errors import PreconditionFailed, SpotcronError
from spotcron.core.runs import RunRecord, RunState, scheduled_run_id, tick_of, utc_minute
from spotcron.core.spec import JobSpec
from spotcron.engine import transitions
from spotcron.engine.deployed import Replaced
from spotcron.engine.deps import Deps
from spotcron.engine.hooks import owe_hooks
from spotcron.engine.pruned_mark import PrunedMark
from spotcron.engine.writer import create, do_owed_effects, step

log = logging.getLogger("spotcron.engine")

PREFIX = "missed/"
FIRST_LOOK_BACK = timedelta(days=7)  # how far back a job never checked before is looked at
MAX_TICKS_PER_PASS = 2000  # reads per job and pass; the rest waits for the next pass
# Earlier ticks read back from a late tick to find the streak that holds it: its streak is the
# newest tick with a record before it, unless a very late start of a tick inside it got one too.
STREAK_LOOK_BACK = 3
Reason = Callable[[datetime], str]

PER_JOB_REASON = ("no start message reached start_job (the job's scheduler entry paused or deleted, "
                  "or start_job failing)")
LOCAL_REASON = "spotcron up was not running (stopped, or the machine asleep)"


def watermark_name(job: str) -> str:
    return f"{PREFIX}{job}.json"


@dataclass(frozen=True)
class Watermark:
    through: datetime | None  # every tick at or before this was checked
    open_run: str | None  # the missed record the last checked tick belongs to, if it was missed
    generation: int = 0


@dataclass(frozen=True)
class Missed:
    job: str
    run_id: str
    ticks: int  # in this pass
    extended: bool  # added to an open record rather than a new one


def read_watermark(deps: Deps, job: str) -> Watermark:
    blob = deps.blobs.read(watermark_name(job))
    if blob is None:
        return Watermark(None, None, 0)
    try:
        data = json.loads(blob.data)
        through = datetime.fromisoformat(data["through"])
        return Watermark(through, data.get("open_run"), blob.generation)
    except (ValueError, KeyError, TypeError):
        log.error("%s does not parse; checking %s again from its first look-back", watermark_name(job), job)
        return Watermark(None, None, blob.generation)


def ticks_between(spec: JobSpec, after: datetime, until: datetime, limit: int = MAX_TICKS_PER_PASS) -> list[datetime]:
    """The job's fire instants t with after < t <= until, oldest first, at most `limit`."""
    cron, zone = parse_schedule(spec.schedule), load_time_zone(spec.time_zone)
    ticks: list[datetime] = []
    cursor = after
    while len(ticks) < limit and (tick := cron.next_after(cursor, zone)) <= until:
        ticks.append(tick)
        cursor = tick
    return ticks


def record_of_tick(deps: Deps, spec: JobSpec, tick: datetime) -> RunRecord | None:
    """The record of the tick's run (the first configuration's is made first), or its missed record."""
    first = spec.variants()[0]
    found = deps.store.read(spec.name, scheduled_run_id(tick, first.run_suffix))
    if found is None and first.run_suffix:
        found = deps.store.read(spec.name, scheduled_run_id(tick))  # a missed record names the tick alone
    return found


def checked_ticks(deps: Deps, spec: JobSpec, ticks: list[datetime],
                  pruned: PrunedMark | None = None) -> list[tuple[datetime, bool]]:
    """(tick, has a record, had one that history pruning deleted, or lies inside a missed
    record's range) for each tick."""
    flags: list[tuple[datetime, bool]] = []
    covered_until: datetime | None = None
    first = spec.variants()[0].run_suffix
    for tick in ticks:
        if covered_until is not None and tick <= covered_until:
            flags.append((tick, True))
            continue
        if pruned is not None and (pruned.covers(scheduled_run_id(tick, first)) or pruned.covers(scheduled_run_id(tick))):
            flags.append((tick, True))
            continue
        record = record_of_tick(deps, spec, tick)
        if record is not None and record.state == RunState.MISSED and record.missed_until is not None:
            covered_until = record.missed_until  # a pass that died before its watermark made it
        flags.append((tick, record is not None))
    return flags


def groups(flags: list[tuple[datetime, bool]]) -> list[list[datetime]]:
    """The runs of consecutive missed ticks in (tick, started) order."""
    out: list[list[datetime]] = []
    current: list[datetime] = []
    for tick, was_started in flags:
        if was_started:
            if current:
                out.append(current)
            current = []
        else:
            current.append(tick)
    if current:
        out.append(current)
    return out


def check_job(deps: Deps, spec: JobSpec, *, now: datetime, deployed_at: datetime | None,
              reason: Reason, replaced: Replaced | None = None) -> list[Missed]:
    """One pass over one job: record its missed ticks since the last pass; what was recorded."""
    if spec.paused:
        return []
    mark = read_watermark(deps, spec.name)
    until = now - timedelta(seconds=spec.starting_deadline)
    floor = now - FIRST_LOOK_BACK
    base = max(mark.through, floor) if mark.through is not None else floor
    if deployed_at is not None:
        # Only ticks of the spec as deployed now: nothing before the minute it was deployed in.
        floor = max(floor, utc_minute(deployed_at) - timedelta(microseconds=1))
    after = max(mark.through, floor) if mark.through is not None else floor
    pruned = deps.store.pruned_mark(spec.name)
    if pruned.floor is not None:
        # History pruning deleted the records up to this tick: their absence is no missed tick.
        # After it, the mark names each run it deleted (checked_ticks).
        try:
            after = max(after, datetime.strptime(tick_of(pruned.floor), "%Y%m%d-%H%M").replace(tzinfo=UTC))
        except ValueError:
            log.warning("%s: pruning mark %r names no tick; ignored", spec.name, pruned.floor)
        else:
            base = max(base, datetime.strptime(tick_of(pruned.floor), "%Y%m%d-%H%M").replace(tzinfo=UTC))
    ticks: list[datetime] = []
    gone = replaced.spec if replaced is not None else None
    if gone is not None and replaced is not None and deployed_at is not None and not gone.paused \
            and gone.name == spec.name:
        # Before the deploy that changed the schedule, the ticks of the schedule it replaced (from
        # its own deploy on, when that is still known).
        if replaced.since is not None:
            base = max(base, utc_minute(replaced.since) - timedelta(microseconds=1))
        try:
            ticks = ticks_between(gone, base, min(now - timedelta(seconds=gone.starting_deadline),
                                                  utc_minute(deployed_at) - timedelta(microseconds=1)))
        except SpotcronError as exc:
            log.warning("%s: the schedule its deploy replaced does not load (%s); its ticks are not checked",
                        spec.name, exc)
    if until > after:
        ticks += ticks_between(spec, after, until, MAX_TICKS_PER_PASS - len(ticks))
    if not ticks:
        return []
    flags = checked_ticks(deps, spec, ticks, pruned)
    found: list[Missed] = []
    open_run = mark.open_run if mark.through is not None and mark.through >= after else None
    for index, group in enumerate(groups(flags)):
        continues = index == 0 and open_run is not None and group[0] == ticks[0]
        if continues and _extend(deps, spec.name, open_run, group):
            found.append(Missed(spec.name, open_run, len(group), True))
            continue
        found.append(_create(deps, spec, group, reason(group[0]), now))
    last_tick, last_started = flags[-1]
    still_open = None if last_started else (found[-1].run_id if found else None)
    _write_watermark(deps, spec.name, last_tick, still_open, mark.generation)
    return found


def covering_streak(deps: Deps, job: str, tick: datetime) -> RunRecord | None:
    """The `missed` record whose streak holds `tick` under an earlier tick's run id, if any.

    A tick inside a streak has no record of its own, so a late redelivery of its start message
    would otherwise record it a second time. One listing of the job's run folders and a read or
    two; start_job asks only for a tick that is past its starting_deadline and has no record."""
    own = tick_of(scheduled_run_id(tick))
    earlier = sorted({tick_of(run_id) for run_id in deps.store.run_ids(job)
                      if not run_id.startswith("m") and tick_of(run_id) < own})
    for first in reversed(earlier[-STREAK_LOOK_BACK:]):
        record = deps.store.read(job, first)  # a missed record names its first tick alone
        if record is None or record.state != RunState.MISSED:
            continue
        if record.tick is not None and record.missed_until is not None and record.tick <= tick <= record.missed_until:
            return record
    return None


def _create(deps: Deps, spec: JobSpec, group: list[datetime], reason: str, now: datetime) -> Missed:
    run_id = scheduled_run_id(group[0])
    record = owe_hooks(deps, transitions.missed(spec, run_id, group[0], group[-1], len(group), reason, now))
    if create(deps, record):
        log.warning("%s: %d tick(s) missed from %s to %s: %s", spec.name, len(group), group[0].isoformat(),
                    group[-1].isoformat(), reason)
        do_owed_effects(deps, record)
        return Missed(spec.name, run_id, len(group), False)
    # A start of that tick got its record in after all (a very late delivery), or another pass made it.
    existing = deps.store.read(spec.name, run_id)
    if existing is not None and existing.state == RunState.MISSED:
        _extend(deps, spec.name, run_id, group)
    return Missed(spec.name, run_id, len(group), False)


def _extend(deps: Deps, job: str, run_id: str, group: list[datetime]) -> bool:
    current = deps.store.read(job, run_id)
    if current is None or current.state != RunState.MISSED:
        return False
    stepped = step(deps, job, run_id, transitions.MissedMore(until=group[-1], more=len(group)))
    return stepped.record is not None and stepped.record.state == RunState.MISSED


def _write_watermark(deps: Deps, job: str, through: datetime, open_run: str | None, generation: int) -> None:
    body = json.dumps({"through": through.isoformat(), "open_run": open_run}).encode()
    try:
        deps.blobs.write(watermark_name(job), body, if_generation_match=generation, content_type="application/json")
    except PreconditionFailed:
        # Another pass got there first and recorded the same ticks (creates are create-only).
        log.info("%s: another pass moved the missed-tick watermark first", job)


def record_missed(deps: Deps, specs: Iterable[JobSpec], deployed_at: Mapping[str, datetime], *,
                  reason: Reason, now: datetime | None = None,
                  replaced: Mapping[str, Replaced] | None = None) -> list[Missed]:
    """A pass over every deployed job; one job's problem never stops the others."""
    now = now or deps.clock.now()
    found: list[Missed] = []
    for spec in specs:
        try:
            found.extend(check_job(deps, spec, now=now, deployed_at=deployed_at.get(spec.name), reason=reason,
                                   replaced=(replaced or {}).get(spec.name)))
        except (SpotcronError, OSError, ValueError) as exc:
            log.warning("missed ticks of %s not checked this time: %s", spec.name, exc)
    return found


def pass_due(now: datetime, sweep_interval_s: int) -> bool:
    """Whether this sweep makes a missed-tick pass: once an hour, at minute 0 (a pass reads
    the deployed specs and a watermark per job, which a healthy sweep otherwise never does), or
    every sweep when sweeps come faster than every 5 minutes (local mode)."""
    if sweep_interval_s < 300:
        return True
    # Every `*/N` sweep entry, and the dispatcher's sweep minutes, include minute 0 of the hour. A
    # sweep that arrives a minute late skips a pass; the next hour's checks the same ticks.
    return now.minute == 0


def missed_reason(scheduling: str, dispatched_through: datetime | None = None) -> Reason:
    """Why a tick was missed, as far as the stack can tell."""
    def reason(tick: datetime) -> str:
        if scheduling != "shared":
            return PER_JOB_REASON
        if dispatched_through is not None and tick <= dispatched_through:
            return ("the dispatcher published its start message but start_job recorded no run "
                    "(the start function failed, or the message was lost)")
        return "the dispatcher did not run for its minute (its scheduler entry paused, or the dispatch function failing)"
    return reason


def ticks_of(record: RunRecord) -> str:
    """`12:00` or `12:00 to 13:59 (120 ticks)`, for people."""
    first = record.tick
    if first is None:
        return tick_of(record.run_id)
    if not record.missed_until or record.missed_until == first:
        return f"{first:%Y-%m-%d %H:%M}"
    return f"{first:%Y-%m-%d %H:%M} to {record.missed_until:%Y-%m-%d %H:%M} ({record.missed_ticks} ticks)"
