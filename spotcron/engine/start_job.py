"""start_job: from a scheduler message (or a "run now") to a VM per matrix entry.

The dispatcher (`scheduling: shared`) names the exact tick; it must be one of the schedule's
fire instants. Cloud Scheduler's own Pub/Sub messages carry no schedule time, so there the tick
is the job's latest fire time at or before the message's publish time. The run id comes from
that tick, which is what turns at-least-once delivery into exactly one run.

A named tick later than now (beyond what clocks may disagree by) is refused: a dispatcher
publishes a tick only once it is due, so such a message comes from a wrong clock or someone
else, and starting it would start the run early.
"""

from __future__ import annotations

import hashlib
import logging
from dataclasses import dataclass
from datetime import datetime, timedelta
from zoneinfo import ZoneInfo

from spotcron.core.cron.schedule import CronSchedule, load_time_zone, parse_schedule
from spotcron.core.durations import format_duration
from spotcron.core.errors import SpotcronError
from spotcron.core.runs import RunRecord, RunState, manual_run_id, scheduled_run_id
from spotcron.core.spec import JobSpec
from spotcron.engine import transitions
from spotcron.engine.spot_advice import placed
from spotcron.engine.attempts import create_attempt
from spotcron.engine.deps import Deps
from spotcron.engine.queue import start_queued
from spotcron.engine.writer import create, do_owed_effects, priced, step
from spotcron.engine.store import run_sort_key

log = logging.getLogger("spotcron.engine")

# How far apart two clocks may be: a tick (or a dispatch cursor) later than now by more is wrong.
TICK_TOLERANCE = timedelta(seconds=60)
# A named tick older than the job's starting_deadline by more than this is refused outright
# (acknowledged, logged) instead of recorded as missed: Pub/Sub redelivers a message for at most
# its subscription's retention (7 days at most), and a tick of year 1 must never reach the
# schedule walk (it overflowed there, and the message was redelivered for a day).
STALE_TICK_MARGIN = timedelta(days=7)


class BadTrigger(SpotcronError):
    """A start message that can never be acted on (acknowledge it, do not retry)."""


@dataclass(frozen=True)
class LaunchOutcome:
    job: str
    run_id: str
    state: str
    reason: str | None
    duplicate: bool  # this delivery found the run already started by another


def launch(deps: Deps, spec: JobSpec, *, requested_at: datetime, manual: bool = False,
           nonce: str | None = None, tick: datetime | None = None) -> list[LaunchOutcome]:
    """Start one run per matrix entry of `spec` for `tick`, or the tick at `requested_at`."""
    if spec.paused and not manual:
        log.info("job %s is paused; ignoring its trigger", spec.name)
        return []
    reading: datetime | None = None
    if manual:
        tick = None
    else:
        if tick is not None:
            tick = exact_tick(spec, tick, now=deps.clock.now())
        schedule, zone = _readable_schedule(spec)
        if tick is None:
            tick = _latest_fire(spec, schedule, zone, requested_at)
        if tick is None:
            raise BadTrigger(f"job {spec.name}: schedule {spec.schedule!r} has no fire time before {requested_at}")
        # Lateness counts from the reading of the tick the message was published at: around a DST
        # change a scheduler may fire a tick at another plausible reading (CronSchedule.readings).
        reading = max((r for r in schedule.readings(tick, zone) if r <= requested_at), default=tick)
    if manual and nonce is None:
        # The same request always names the same run: a redelivery must not start a second one.
        nonce = hashlib.sha256(requested_at.isoformat().encode()).hexdigest()[:8]
    pruned_through = _pruned_floor(deps, spec.name, manual=manual)
    return [_launch_one(deps, variant, tick, reading, requested_at, nonce, pruned_through)
            for variant in spec.variants()]


def _pruned_floor(deps: Deps, job: str, *, manual: bool) -> str | None:
    """The newest run id of `job` that history pruning deleted, as a request of this kind sees it:
    manual runs are pruned apart and have a mark of their own (engine/store.prune)."""
    marks = [deps.store.pruned_through(job)] + ([deps.store.pruned_through(job, manual=True)] if manual else [])
    return max((m for m in marks if m), key=run_sort_key, default=None)


def _pruned_meanwhile(deps: Deps, record: RunRecord) -> bool:
    """Whether history pruning passed this run while its record was being created: pruning raises
    its mark before it deletes, so a run at or under the mark now was pruned and is being brought
    back by a late delivery. Its new record goes again, and the run does not start."""
    floor = _pruned_floor(deps, record.job, manual=record.trigger == "manual")
    if floor is None or run_sort_key(record.run_id) > run_sort_key(floor):
        return False
    log.warning("job %s: dropped a trigger for run %s, pruned while the trigger was handled (history_limit %s)",
                record.job, record.run_id, record.history_limit)
    deps.store.remove(record)
    return True


def _readable_schedule(spec: JobSpec) -> tuple[CronSchedule, ZoneInfo]:
    """The job's schedule and zone; BadTrigger when this runtime cannot read them.

    A bad cron string, or a zone this runtime's tzdata lacks, fails the same way on every
    redelivery: acknowledging it is the only way to stop Pub/Sub retrying until retention ends.
    """
    try:
        return parse_schedule(spec.schedule), load_time_zone(spec.time_zone)
    except SpotcronError as exc:
        raise BadTrigger(f"job {spec.name}: cannot read its schedule {spec.schedule!r} in time zone "
                         f"{spec.time_zone!r}: {exc}; fix the job file and deploy it again") from None


def _latest_fire(spec: JobSpec, schedule: CronSchedule, zone: ZoneInfo, at: datetime) -> datetime | None:
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
    schedule, zone = _readable_schedule(spec)
    fired = _latest_fire(spec, schedule, zone, tick)
    if fired != tick:
        raise BadTrigger(f"job {spec.name}: tick {tick:%Y-%m-%dT%H:%M}Z is not a fire time of schedule "
                         f"{spec.schedule!r} in {spec.time_zone}")
    return tick


def _launch_one(deps: Deps, spec: JobSpec, tick: datetime | None, reading: datetime | None,
                requested_at: datetime, nonce: str, pruned_through: str | None) -> LaunchOutcome:
    now = deps.clock.now()
    manual = tick is None
    # A manual run's id comes from the message's publish time, not from when it is handled, so a
    # redelivered "run now" names the same run instead of starting a second one.
    suffix = spec.run_suffix  # the matrix entry and the repeat: each is a run of its own
    run_id = manual_run_id(requested_at, nonce, suffix) if manual else scheduled_run_id(tick, suffix)
    record = transitions.scheduled(spec, run_id, tick, now)
    if (pruned_through is not None and run_sort_key(run_id) <= run_sort_key(pruned_through)
            and deps.store.read(spec.name, run_id) is None):
        # A redelivery for a run that history pruning already deleted: recreating it would start
        # the run (or record it as missed) a second time.
        log.warning("job %s: dropped a trigger for run %s, older than the history kept (history_limit %s)",
                    spec.name, run_id, spec.history_limit)
        return LaunchOutcome(job=spec.name, run_id=run_id, state="dropped",
                             reason="older than the runs kept by history_limit", duplicate=True)
    late = (now - reading).total_seconds() if tick is not None and reading is not None else 0.0
    if tick is not None and late > spec.starting_deadline:
        read_as = f", read as {reading:%H:%M} UTC" if reading != tick else ""
        reason = (f"missed: the trigger arrived {late:.0f}s after its {tick:%H:%M} UTC tick{read_as} "
                  f"(starting_deadline {spec.starting_deadline}s)")
        record = priced(deps, transitions.skip(record, transitions.Skip(reason), now))
        created = create(deps, record)
        # Its end is owed in the record just written; a duplicate finishes what a crashed first
        # delivery left owed.
        stored = record if created else deps.store.read(spec.name, run_id) or record
        return _outcome(do_owed_effects(deps, stored), duplicate=not created)
    created = create(deps, record)
    if created and _pruned_meanwhile(deps, record):
        return LaunchOutcome(job=spec.name, run_id=run_id, state="dropped",
                             reason="older than the runs kept by history_limit", duplicate=True)
    if created:
        deps.publish("run.scheduled", record)
    return _outcome(advance(deps, spec.name, run_id), duplicate=not created)


def advance(deps: Deps, job: str, run_id: str) -> RunRecord:
    """Move a run from `scheduled` through `starting` to `running`, from wherever it is now.

    Safe to call from any number of deliveries at once: each step is a conditional update.
    """
    record = deps.store.read(job, run_id)
    if record is None:
        raise SpotcronError(f"run {job}/{run_id} has no record")
    if record.terminal:
        return do_owed_effects(deps, record)  # a redelivery finishes what a crashed end left owed
    if record.state == RunState.SCHEDULED:
        record = _apply_concurrency(deps, record)
    begun = False
    if record.state == RunState.SCHEDULED:
        spec = transitions.spec_of(record)
        placement = placed(deps, spec)
        staged = record.model_copy(update={"placement": placement}) if placement else record
        first = transitions.new_attempt(staged, spec, deps.settings.zones)
        stepped = step(deps, job, run_id, transitions.Begin(first, placement))
        record, begun = stepped.record or record, stepped.changed
    if record.state == RunState.STARTING:
        record = create_attempt(deps, record, claimed=begun)
        if record.state == RunState.QUEUED:
            # Queued behind older runs, perhaps with room free right now: the queue starts the
            # oldest first (the sweep would, a pass later).
            start_queued(deps)
            record = deps.store.read(job, run_id) or record
    return record


def _apply_concurrency(deps: Deps, record: RunRecord) -> RunRecord:
    spec = transitions.spec_of(record)
    if spec.concurrency == "allow":
        return record
    others = [other for other in _live_runs_of(deps, record) if other.run_id != record.run_id]
    if spec.concurrency == "forbid":
        # Two runs still `scheduled` at once (a tick and a "run now") see each other: the older goes
        # ahead and the younger is skipped, the same order read from either side, so never both.
        others = [o for o in others if o.state != RunState.SCHEDULED or _order(o) < _order(record)]
    if not others:
        return record
    if spec.concurrency == "forbid":
        names = ", ".join(o.run_id for o in others)
        reason = f"previous run {names} is still running (concurrency: forbid)"
        return step(deps, record.job, record.run_id, transitions.Skip(reason)).record or record
    for other in others:  # replace
        _replace(deps, other, by=record.run_id)
    return record


def _order(record: RunRecord) -> tuple[datetime, str]:
    return record.created_at, run_sort_key(record.run_id)


def _live_runs_of(deps: Deps, record: RunRecord) -> list[RunRecord]:
    runs = []
    for job, run_id in deps.store.live_runs():
        if job != record.job:
            continue
        other = deps.store.read(job, run_id)
        if (other is not None and not other.terminal and other.variant == record.variant
                and other.repeat == record.repeat):
            runs.append(other)
    return runs


def _replace(deps: Deps, other: RunRecord, *, by: str) -> None:
    # The run ends first, then its VM goes: a delivery of that run landing its insert in between
    # then finds it ended and deletes its own VM, instead of recording a VM that outlives its run.
    ended = step(deps, other.job, other.run_id, transitions.Replaced(by=by)).record or other
    attempt = ended.current_attempt
    if attempt is not None and attempt.zone:
        deps.compute.delete_instance(attempt.zone, attempt.vm_name)


def _outcome(record: RunRecord, *, duplicate: bool) -> LaunchOutcome:
    return LaunchOutcome(job=record.job, run_id=record.run_id, state=record.state, reason=record.reason,
                         duplicate=duplicate)
