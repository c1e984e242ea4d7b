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
from datetime import datetime

from spotcron.core.errors import SpotcronError
from spotcron.core.overrides import Overrides
from spotcron.core.runs import RunRecord, RunState, manual_run_id, scheduled_run_id
from spotcron.core.spec import JobSpec
from spotcron.engine import transitions
from spotcron.engine.attempts import create_attempt
from spotcron.engine.concurrency import apply_concurrency
from spotcron.engine.deps import Deps
from spotcron.engine.missed import covering_streak
from spotcron.engine.pruned_mark import PrunedMark
from spotcron.engine.queue import start_queued
from spotcron.engine.spot_advice import placed
from spotcron.engine.tick_trust import check_tick
from spotcron.engine.ticks import BadTrigger, exact_tick, latest_fire, readable_schedule
from spotcron.engine.writer import create, do_owed_effects, priced, step

log = logging.getLogger("spotcron.engine")


@dataclass(frozen=True)
class LaunchOutcome:
    job: str
    run_id: str
    state: str
    reason: str | None
    duplicate: bool  # this delivery found the run already started by another


def launch(deps: Deps, spec: JobSpec, *, requested_at: datetime, manual: bool = False,
           nonce: str | None = None, tick: datetime | None = None,
           overrides: Overrides | None = None, fired_with: JobSpec | None = None) -> list[LaunchOutcome]:
    """Start one run per matrix entry of `spec` for `tick`, or the tick at `requested_at`.
    `overrides` (a manual run only) change every configuration and are recorded on each run.

    `fired_with`: the spec the message named, when a deploy replaced it since (SpecStore.fired_with).
    The tick is read by the schedule that fired it; it runs `spec` when `spec`'s schedule fires
    then too, and is recorded skipped (saying why) when the deploy moved the schedule off it."""
    if spec.paused and not manual:
        log.info("job %s is paused; ignoring its trigger", spec.name)
        return []
    reading: datetime | None = None
    if manual:
        tick = None
    else:
        named = tick is not None
        timing = fired_with if fired_with is not None and not manual else spec
        if tick is not None:
            tick = exact_tick(timing, tick, now=deps.clock.now())
        schedule, zone = readable_schedule(timing)
        if tick is None:
            tick = latest_fire(timing, schedule, zone, requested_at)
        if tick is None:
            raise BadTrigger(f"job {spec.name}: schedule {spec.schedule!r} has no fire time before {requested_at}")
        # A publisher writes the tick attribute; only the deploy and Pub/Sub's publish time vouch for it.
        tick = check_tick(deps, spec, tick, published=requested_at, named=named, fired_with=fired_with)
        # Lateness counts from the reading of the tick the message was published at: around a DST
        # change a scheduler may fire a tick at another plausible reading (CronSchedule.readings).
        reading = max((r for r in schedule.readings(tick, zone) if r <= requested_at), default=tick)
    overtaken = None if manual or fired_with is None or tick is None else _moved_off(spec, fired_with, tick)
    if manual and nonce is None:
        # The same request always names the same run: a redelivery must not start a second one.
        nonce = hashlib.sha256(requested_at.isoformat().encode()).hexdigest()[:8]
    pruned = _pruned_marks(deps, spec.name, manual=manual)
    if overrides is not None and not manual:
        raise BadTrigger(f"job {spec.name}: only a manual run may have overrides")
    variants = spec.variants() if overrides is None else _overridden(spec, overrides)
    return [_launch_one(deps, variant, tick, reading, requested_at, nonce, pruned, overrides, overtaken)
            for variant in variants]


def _moved_off(spec: JobSpec, fired_with: JobSpec, tick: datetime) -> str | None:
    """Why `tick`, fired by `fired_with`'s schedule, does not run `spec` (deployed since), or None
    when `spec`'s schedule fires at `tick` too."""
    try:
        schedule, zone = readable_schedule(spec)
        if latest_fire(spec, schedule, zone, tick) == tick:
            return None
    except BadTrigger:
        pass
    return (f"skipped: a deploy changed the schedule from {fired_with.schedule!r} ({fired_with.time_zone}) to "
            f"{spec.schedule!r} ({spec.time_zone}) after its {tick:%Y-%m-%d %H:%M} UTC tick fired; the schedule "
            f"deployed now has no such tick")


def _overridden(spec: JobSpec, overrides: Overrides) -> list[JobSpec]:
    """Every configuration of `spec` with `overrides`, all checked before any run is created:
    BadTrigger (acknowledged) when one breaks a rule of the spec, whose words never quote a value."""
    problem = overrides.problem(spec)
    if problem:
        raise BadTrigger(f"refused the manual start of job {spec.name}: its overrides cannot run the deployed spec: "
                         f"{problem}")
    return [overrides.applied(variant) for variant in spec.variants()]


def _pruned_marks(deps: Deps, job: str, *, manual: bool) -> list[PrunedMark]:
    """The pruning marks a request of this kind is held to: manual runs are pruned apart and have
    a mark of their own (engine/store.prune)."""
    return [deps.store.pruned_mark(job)] + ([deps.store.pruned_mark(job, manual=True)] if manual else [])


def _was_pruned(marks: list[PrunedMark], run_id: str) -> bool:
    return any(mark.covers(run_id) for mark in marks)


def _pruned_meanwhile(deps: Deps, record: RunRecord) -> bool:
    """Whether history pruning passed this run while its record was being created: pruning raises
    its mark before it deletes, so a run the mark names now was pruned and is being brought back
    by a late delivery. Its new record goes again, and the run does not start."""
    if not _was_pruned(_pruned_marks(deps, record.job, manual=record.trigger == "manual"), record.run_id):
        return False
    log.warning("job %s: dropped a trigger for run %s, pruned while the trigger was handled (history_limit %s)",
                record.job, record.run_id, record.history_limit)
    deps.store.remove(record)
    return True


def _launch_one(deps: Deps, spec: JobSpec, tick: datetime | None, reading: datetime | None,
                requested_at: datetime, nonce: str, pruned: list[PrunedMark],
                overrides: Overrides | None = None, overtaken: str | None = None) -> LaunchOutcome:
    now = deps.clock.now()
    manual = tick is None
    # A manual run's id comes from the message's publish time, not from when it is handled, so a
    # redelivered "run now" names the same run instead of starting a second one.
    suffix = spec.run_suffix  # the matrix entry and the repeat: each is a run of its own
    run_id = manual_run_id(requested_at, nonce, suffix) if manual else scheduled_run_id(tick, suffix)
    record = transitions.scheduled(spec, run_id, tick, now, overrides=overrides.recorded() if overrides else None)
    if _was_pruned(pruned, run_id) and deps.store.read(spec.name, run_id) is None:
        # A redelivery for a run that history pruning already deleted: recreating it would start
        # the run (or record it as missed) a second time. A tick that never had a record is not
        # in the mark, however many younger runs were pruned: it starts (engine/pruned_mark.py).
        log.warning("job %s: dropped a trigger for run %s, older than the history kept (history_limit %s)",
                    spec.name, run_id, spec.history_limit)
        return LaunchOutcome(job=spec.name, run_id=run_id, state="dropped",
                             reason="older than the runs kept by history_limit", duplicate=True)
    late = (now - reading).total_seconds() if tick is not None and reading is not None else 0.0
    if tick is not None and late > spec.starting_deadline:
        read_as = f", read as {reading:%H:%M} UTC" if reading != tick else ""
        reason = (f"missed: the trigger arrived {late:.0f}s after its {tick:%H:%M} UTC tick{read_as} "
                  f"(starting_deadline {spec.starting_deadline}s)")
        if deps.store.read(spec.name, run_id) is None and (streak := covering_streak(deps, spec.name, tick)):
            # The missed-tick pass recorded this tick in a streak already: a second record would
            # end it twice (two run.finished, two notifications).
            log.info("job %s: a late trigger for %s, recorded missed in streak %s", spec.name, run_id, streak.run_id)
            return _outcome(streak, duplicate=True)
        record = priced(deps, transitions.skip(record, transitions.Skip(reason), now))
        created = create(deps, record)
        # Its end is owed in the record just written; a duplicate finishes what a crashed first
        # delivery left owed.
        stored = record if created else deps.store.read(spec.name, run_id) or record
        return _outcome(do_owed_effects(deps, stored), duplicate=not created)
    if overtaken is not None:
        record = priced(deps, transitions.skip(record, transitions.Skip(overtaken), now))
        created = create(deps, record)
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
        record = apply_concurrency(deps, record)
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


def _outcome(record: RunRecord, *, duplicate: bool) -> LaunchOutcome:
    return LaunchOutcome(job=record.job, run_id=record.run_id, state=record.state, reason=record.reason,
                         duplicate=duplicate)
