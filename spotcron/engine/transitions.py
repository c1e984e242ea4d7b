"""Every change of a run record, as a named pure function of (record, event, now).

Each transition returns the new record or a `Refused` saying why the event does not apply to the
record as it is now. Refusals are normal: deliveries, callbacks and sweeps race, and whichever
writes second sees the first one's record and is refused. `engine.writer.step` is the only caller
that writes; it runs a transition inside the store's read-modify-write and then does the event's
side effects (events, pruning, the next attempt's VM). The verdict on an ended attempt and the
choice between retrying and finalizing each live here, once.

    scheduled --Begin--> starting --VmCreated--> running --AttemptReported/VmGone--> terminal
        |                  |  ^ MoveAttempt              |            |
        |                  |  +----- (retry) -----------+------------+
        +--Skip--> skipped +--CreateRefused/Stuck--> failed
                           +--Queue--> queued --Dequeue--> starting
                                         +--QueueExpired--> skipped (failed for a retry)
    any live state --Replaced--> failed, --Cancel--> cancelled, --Fail--> failed
    starting/queued, no VM yet --Withdrawn--> skipped (cancelled once an earlier attempt had a VM)
    terminal (effects owed) --EffectsDone--> terminal (fewer owed)
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime, timedelta

from spotcron.core import layout
from spotcron.core.runs import (
    Attempt,
    Effect,
    EffectFailure,
    Outcome,
    Placement,
    RunRecord,
    RunState,
    StateChange,
    vm_name,
)
from spotcron.core.spec import JobSpec
from spotcron.engine.placement import attempt_order


@dataclass(frozen=True)
class Refused:
    """The event does not apply to the record as it is now; the record stays as it is."""

    why: str


Result = RunRecord | Refused


# --- events ------------------------------------------------------------------------------------

@dataclass(frozen=True)
class Begin:
    """A delivery takes a `scheduled` run: its first attempt is chosen and written before any create."""

    attempt: Attempt
    placement: Placement | None = None  # the zone order and its receipt, when placement applies


@dataclass(frozen=True)
class Skip:
    """A `scheduled` run will not run (missed its starting deadline, or forbidden by a live run)."""

    reason: str


@dataclass(frozen=True)
class Claim:
    """A delivery is about to create the current attempt's VM; the newer `updated_at` tells the sweep."""

    attempt: Attempt


@dataclass(frozen=True)
class MoveAttempt:
    """The create failed in a way another zone or provisioning model may not: try `next_try`."""

    attempt: Attempt
    next_try: Attempt


@dataclass(frozen=True)
class VmCreated:
    """The attempt's VM exists (created or adopted): the run is `running` until `deadline`."""

    attempt: Attempt
    zone: str
    created_at: datetime
    provisioning_model: str
    instance_id: str
    deadline: datetime


@dataclass(frozen=True)
class CreateRefused:
    """Compute Engine refused the attempt's VM for good (quota, permission, image, no capacity)."""

    attempt: Attempt
    reason: str


@dataclass(frozen=True)
class Queue:
    """The attempt's VM would cross a stack limit: the run waits for room (`reason` names the limit)."""

    attempt: Attempt
    reason: str


@dataclass(frozen=True)
class Dequeue:
    """Room freed for a queued run: it goes back to `starting` to create its attempt's VM."""

    attempt: Attempt


@dataclass(frozen=True)
class QueueExpired:
    """A queued run's starting_deadline passed before room freed."""

    reason: str


@dataclass(frozen=True)
class EffectsDone:
    """What became of an ended run's owed effects this time (engine/writer.do_owed_effects): `done`
    ones leave `owed`; `failed` ones (entry, error) stay owed with the failure recorded; `given_up`
    ones leave `owed` with the failure recorded as given up; `owed_instead` joins `owed` (the hooks
    entry of a run ended before its hooks were named splits into one entry per hook)."""

    done: tuple[Effect | str, ...]
    failed: tuple[tuple[str, str], ...] = ()
    given_up: tuple[tuple[str, str], ...] = ()
    owed_instead: tuple[str, ...] = ()


@dataclass(frozen=True)
class MissedMore:
    """More consecutive ticks of the job were missed right after a `missed` record's last one."""

    until: datetime
    more: int


@dataclass(frozen=True)
class Stuck:
    """The sweep found the run `scheduled`/`starting` with no VM, unchanged since `seen_at`."""

    seen_at: datetime
    reason: str


@dataclass(frozen=True)
class Fail:
    """End a live run as failed, whatever it was doing."""

    reason: str


@dataclass(frozen=True)
class Replaced:
    """`concurrency: replace`: a newer run deleted this run's VM."""

    by: str


@dataclass(frozen=True)
class Withdrawn:
    """The job of a run still waiting for its attempt's VM was paused, removed or deployed again
    (engine/still_deployed.py): the attempt gets no VM and the run ends."""

    attempt: Attempt
    reason: str


@dataclass(frozen=True)
class HostLacks:
    """The host cannot run the attempt's configuration at all (local mode: the GPUs it names):
    the run ends `skipped` before it is admitted, so it never holds room under the limits."""

    attempt: Attempt
    reason: str


@dataclass(frozen=True)
class Cancel:
    """The run is stopped on purpose: the stack that ran it was stopped, or (a manual run) a
    scheduled run of its job takes its place (engine/concurrency.py); its VM is gone or going."""

    reason: str


@dataclass(frozen=True)
class AttemptReported:
    """job_done: the runner's report of how attempt `number` ended (`zone` from the verified token)."""

    number: int
    status: str  # exited | preempted | unavailable
    exit_code: int | None
    timed_out: bool
    uploaded: bool
    manifest_present: bool
    started_at: datetime | None
    finished_at: datetime | None
    zone: str
    zones: tuple[str, ...]  # the stack's zones, for a job that names none
    # The attempt's checked metrics.json as record fields (metrics or metrics_problem); kept when the run ends.
    metrics: tuple[tuple[str, object], ...] = ()
    problem: str | None = None  # the runner's word on why the job did not start (no GPU, driver failed)
    secret_versions: tuple[tuple[str, str], ...] = ()  # the version each secret resolved to
    # The VM's creation and instance id as job_done found them (the live instance, else the token's
    # signed claim): a callback may beat the start delivery's write of them, and the attempt must
    # still be billed and settled for the time its VM ran.
    vm_created_at: datetime | None = None
    instance_id: str | None = None


@dataclass(frozen=True)
class ManifestFacts:
    exit_code: int | None
    timed_out: bool


@dataclass(frozen=True)
class VmGone:
    """The sweep: the current attempt's VM is gone and never called back."""

    number: int
    manifest: ManifestFacts | None
    past_deadline: bool
    zones: tuple[str, ...]
    metrics: tuple[tuple[str, object], ...] = ()  # as in AttemptReported


Event = (Begin | Skip | Claim | MoveAttempt | VmCreated | CreateRefused | Queue | Dequeue | QueueExpired
         | EffectsDone | Stuck | Fail | Replaced | Cancel | AttemptReported | VmGone | MissedMore | Withdrawn
         | HostLacks)


# --- pure helpers --------------------------------------------------------------------------------

def spec_of(record: RunRecord) -> JobSpec:
    if record.spec is None:
        raise ValueError(f"run {record.job}/{record.run_id} has no spec")
    return JobSpec.from_payload(record.spec)


def zones_for(spec: JobSpec, default: tuple[str, ...]) -> tuple[str, ...]:
    return spec.machine.zones or default


def zone_order(record: RunRecord, spec: JobSpec, default: tuple[str, ...]) -> tuple[str, ...]:
    """The zones the run tries, in order: its placement's when it has one, else the fixed order."""
    if record.placement is not None and record.placement.zones:
        return record.placement.zones
    return zones_for(spec, default)


def attempt_zones(record: RunRecord, spec: JobSpec, default: tuple[str, ...], attempt: Attempt) -> tuple[str, ...]:
    """The zones `attempt` tries, in order: as written with it, or (a record without them) worked
    out again from the run's zone order and the zone that lost the attempt before it."""
    if attempt.zone_order:
        return attempt.zone_order
    previous = next((a for a in record.attempts if a.number == attempt.number - 1), None)
    lost = previous is not None and previous.outcome in (Outcome.PREEMPTED, Outcome.LOST)
    return _ordered(record, spec, default, lost_in=previous.zone if lost and previous is not None else None)


def _ordered(record: RunRecord, spec: JobSpec, default: tuple[str, ...], *, lost_in: str | None) -> tuple[str, ...]:
    placement = record.placement
    unlikely = frozenset(c.zone for c in placement.choices if c.capacity == "none") if placement else frozenset()
    return attempt_order(zone_order(record, spec, default), lost_in=lost_in, unlikely=unlikely)


def new_attempt(record: RunRecord, spec: JobSpec, zones: tuple[str, ...], *, after_zone: str | None = None) -> Attempt:
    """The next attempt and the zones it tries (placement.attempt_order): after a preemption
    (`after_zone` lost the VM) it starts one zone further down, wraps around, and tries that
    zone last."""
    number = len(record.attempts) + 1
    order = _ordered(record, spec, zones, lost_in=after_zone)
    gpu = spec.machine.gpu
    return Attempt(
        number=number, vm_name=vm_name(record.job, record.run_id, number), zone=order[0], zone_order=order,
        machine_type=spec.machine.type, provisioning_model="SPOT" if spec.machine.spot else "STANDARD",
        gpu=f"{gpu.type} x{gpu.count}" if gpu else None, disk_gb=spec.machine.disk_gb,
        service_account=spec.service_account, external_ip=spec.external_ip,
    )


def vm_deadline(spec: JobSpec, grace: int, created: datetime) -> datetime:
    return created + timedelta(seconds=spec.timeout + grace)


def is_current_attempt(record: RunRecord, attempt: Attempt) -> bool:
    """Whether `attempt` is still the one being created: a concurrent delivery may have moved on."""
    current = record.current_attempt
    return (record.state == RunState.STARTING and current is not None and current.number == attempt.number
            and current.zone == attempt.zone and current.provisioning_model == attempt.provisioning_model)


def verdict(outcome: Outcome, exit_code: int | None, *, complete: bool, callback: bool,
            problem: str | None = None) -> tuple[RunState, str | None]:
    """The run's state after an attempt ended this way. `complete`: its manifest is there;
    `problem`: the runner's reason when the job did not start at all."""
    lost = "" if callback else " (callback lost)"
    if outcome == Outcome.UNAVAILABLE:
        return RunState.SKIPPED, f"not run on this host: {problem or 'it lacks the hardware the configuration names'}"
    if outcome == Outcome.PREEMPTED:
        return RunState.PREEMPTED, "Spot VM preempted"
    if outcome == Outcome.LOST:
        return RunState.LOST, "the VM vanished without calling back (preempted or crashed)"
    if outcome == Outcome.TIMED_OUT:
        if not callback and not complete:
            return RunState.TIMED_OUT, "the VM outlived its deadline without reporting"
        return RunState.TIMED_OUT, f"the container ran past its timeout and was killed{lost}"
    if exit_code is None and problem:
        return RunState.FAILED, f"the job did not start: {problem}"
    if exit_code is None:  # the runner reports no code when setup failed or the container would not start
        return RunState.FAILED, f"the container did not start, so it has no exit code{lost}; the attempt's logs say why"
    if exit_code != 0:
        # "the job": its container on a VM, or its local.command in local mode; both end with a code.
        return RunState.FAILED, f"the job exited with code {exit_code}{lost}"
    if not complete:
        return RunState.FAILED, "the results upload did not complete (no manifest)"
    return RunState.SUCCEEDED, None


def retries_left(record: RunRecord, spec: JobSpec, state: RunState) -> bool:
    """Whether a run whose latest attempt ended in `state` may try again."""
    if state in (RunState.PREEMPTED, RunState.LOST):
        used = sum(1 for a in record.attempts if a.outcome in (Outcome.PREEMPTED, Outcome.LOST))
        return used <= spec.retries.preemption
    if state == RunState.FAILED:
        # Every attempt that exited without succeeding is a failure, whatever its exit code.
        used = sum(1 for a in record.attempts if a.outcome == Outcome.EXITED)
        return used <= spec.retries.failure
    return False


def retry_or_finalize(record: RunRecord, ended: Attempt, state: RunState, reason: str | None, now: datetime,
                      zones: tuple[str, ...]) -> RunRecord:
    """After attempt `ended` (already in `record`): the next attempt when the budget allows, else the end."""
    spec = spec_of(record)
    if retries_left(record, spec, state):
        after_zone = ended.zone if state in (RunState.PREEMPTED, RunState.LOST) else None
        follow = new_attempt(record, spec, zones, after_zone=after_zone)
        return record.with_attempt(follow, now).with_state(RunState.STARTING, now, f"{reason}; retrying")
    results = layout.attempt_prefix(record.job, record.run_id, ended.number) if state == RunState.SUCCEEDED else None
    return record.with_state(state, now, reason, exit_code=ended.exit_code, results_prefix=results)


# --- transitions ---------------------------------------------------------------------------------

def begin(record: RunRecord, event: Begin, now: datetime) -> Result:
    if record.state != RunState.SCHEDULED:
        return Refused(f"already {record.state}")
    if event.placement is not None:
        record = record.model_copy(update={"placement": event.placement})
    return record.with_attempt(event.attempt, now).with_state(RunState.STARTING, now)


def scheduled(spec: JobSpec, run_id: str, tick: datetime | None, now: datetime, *,
              overrides: dict | None = None) -> RunRecord:
    """A new run of `spec` in `scheduled`: a tick's (`tick` set) or a manual one's (`tick` None);
    `overrides`: what a manual run changed of the deployed spec (core/overrides.py), as recorded."""
    return RunRecord(
        job=spec.name, run_id=run_id, variant=spec.variant, repeat=spec.repeat_index,
        trigger="schedule" if tick is not None else "manual",
        tick=tick, created_at=now, updated_at=now, history=(StateChange(state=RunState.SCHEDULED, at=now),),
        history_limit=spec.history_limit, spec=spec.to_payload(), overrides=overrides,
    )


def missed(spec: JobSpec, run_id: str, first: datetime, last: datetime, count: int, reason: str,
           now: datetime) -> RunRecord:
    """A record, already ended `missed`, for `count` consecutive ticks from `first` to `last` that
    never started (engine/missed.py); it owes what every end owes."""
    record = RunRecord(
        job=spec.name, run_id=run_id, trigger="schedule", tick=first, created_at=now, updated_at=now,
        history=(StateChange(state=RunState.SCHEDULED, at=now),), history_limit=spec.history_limit,
        spec=spec.to_payload(), missed_ticks=count, missed_until=last,
    )
    return record.with_state(RunState.MISSED, now, reason).model_copy(update={"cost_usd": 0.0})


def missed_more(record: RunRecord, event: MissedMore, now: datetime) -> Result:
    if record.state != RunState.MISSED:
        return Refused(f"not a missed record (now {record.state})")
    if record.missed_until is not None and event.until <= record.missed_until:
        return Refused("those ticks are in the record already")
    return record.model_copy(update={"missed_ticks": (record.missed_ticks or 1) + event.more,
                                     "missed_until": event.until, "updated_at": now})


def priced(record: RunRecord, total: float | None, items: dict[str, float], problem: str | None = None,
           local_wait_s: float | None = None) -> RunRecord:
    """What the ended run cost, as the engine's cost function worked it out, or why it has no cost;
    `local_wait_s`: the local VM's wait for its turn that the cost leaves out."""
    return record.model_copy(update={"cost_usd": total, "cost_items": items, "cost_problem": problem,
                                     "local_wait_s": local_wait_s})


def skip(record: RunRecord, event: Skip, now: datetime) -> Result:
    if record.state != RunState.SCHEDULED:
        return Refused(f"already {record.state}")
    return record.with_state(RunState.SKIPPED, now, event.reason)


def claim(record: RunRecord, event: Claim, now: datetime) -> Result:
    if not is_current_attempt(record, event.attempt):
        return Refused("the attempt is no longer the one being created")
    return record.model_copy(update={"updated_at": now})


def move_attempt(record: RunRecord, event: MoveAttempt, now: datetime) -> Result:
    if not is_current_attempt(record, event.attempt):
        return Refused("the attempt is no longer the one being created")
    return record.with_attempt(event.next_try, now)


def vm_created(record: RunRecord, event: VmCreated, now: datetime) -> Result:
    if not is_current_attempt(record, event.attempt):
        return Refused("the attempt is no longer the one being created")
    started = event.attempt.model_copy(update={
        "created_at": event.created_at, "zone": event.zone, "provisioning_model": event.provisioning_model,
        "instance_id": event.instance_id or None})
    return record.with_attempt(started, now).with_state(RunState.RUNNING, now, deadline=event.deadline)


def create_refused(record: RunRecord, event: CreateRefused, now: datetime) -> Result:
    if record.terminal or not is_current_attempt(record, event.attempt):
        return Refused("the attempt is no longer the one being created")
    current = record.current_attempt
    assert current is not None
    failed = current.model_copy(update={"outcome": Outcome.CREATE_FAILED, "error": event.reason})
    return record.with_attempt(failed, now).with_state(RunState.FAILED, now, event.reason)


def queue(record: RunRecord, event: Queue, now: datetime) -> Result:
    if not is_current_attempt(record, event.attempt):
        return Refused("the attempt is no longer the one being created")
    return record.with_state(RunState.QUEUED, now, event.reason)


def dequeue(record: RunRecord, event: Dequeue, now: datetime) -> Result:
    current = record.current_attempt
    if record.state != RunState.QUEUED or current is None or current.number != event.attempt.number:
        return Refused(f"not queued (now {record.state})")
    return record.with_state(RunState.STARTING, now, None).model_copy(update={"reason": None})


def queue_expired(record: RunRecord, event: QueueExpired, now: datetime) -> Result:
    if record.state != RunState.QUEUED:
        return Refused(f"not queued (now {record.state})")
    current = record.current_attempt
    waited = current.model_copy(update={"outcome": Outcome.CREATE_FAILED, "error": event.reason}) if current else None
    updated = record.with_attempt(waited, now) if waited else record
    # A first attempt that never got room did no work: skipped, as a missed tick is. A retry's
    # run did work before, so not getting room again is a failure of the run.
    return updated.with_state(RunState.FAILED if record.had_vm else RunState.SKIPPED, now, event.reason)


def effects_done(record: RunRecord, event: EffectsDone, now: datetime) -> Result:
    if not record.terminal:
        return Refused(f"not ended (now {record.state})")
    leaving = set(event.done) | {entry for entry, _ in event.given_up}
    owed = tuple(effect for effect in record.owed if effect not in leaving)
    if any(effect in record.owed for effect in event.done):
        owed = tuple(dict.fromkeys((*owed, *event.owed_instead)))
    failures = dict(record.effect_failures)
    for (entry, error), gave_up in [*((f, False) for f in event.failed), *((g, True) for g in event.given_up)]:
        if entry not in record.owed and not (gave_up or entry in event.owed_instead):
            continue  # done meanwhile by another toucher
        before = failures.get(entry, EffectFailure())
        failures[entry] = EffectFailure(tries=before.tries + 1, error=error[:500], at=now, gave_up=gave_up)
    if owed == record.owed and failures == record.effect_failures:
        return Refused("nothing of it was owed")
    return record.model_copy(update={"owed": owed, "effect_failures": failures})


def stuck(record: RunRecord, event: Stuck, now: datetime) -> Result:
    if record.state not in (RunState.SCHEDULED, RunState.STARTING):
        return Refused(f"now {record.state}")
    if record.updated_at > event.seen_at:
        # A delivery took the run up again after the sweep read it: it is not stuck.
        return Refused(f"changed since {event.seen_at:%H:%M:%S}: a delivery is working on it")
    return record.with_state(RunState.FAILED, now, event.reason)


def fail(record: RunRecord, event: Fail, now: datetime) -> Result:
    if record.terminal:
        return Refused(f"already {record.state}")
    return record.with_state(RunState.FAILED, now, event.reason)


def replaced(record: RunRecord, event: Replaced, now: datetime) -> Result:
    if record.terminal:
        return Refused(f"already {record.state}")
    updated = _vm_ended_for_good(record, Outcome.LOST, now)
    return updated.with_state(RunState.FAILED, now, f"replaced by run {event.by} (concurrency: replace)")


def cancel(record: RunRecord, event: Cancel, now: datetime) -> Result:
    if record.terminal:
        return Refused(f"already {record.state}")
    updated = _vm_ended_for_good(record, Outcome.CANCELLED, now)
    return updated.with_state(RunState.CANCELLED, now, event.reason)


def _waiting_for(record: RunRecord, attempt: Attempt) -> Attempt | Refused:
    """The run's current attempt when the run still waits for `attempt`'s VM, else the refusal."""
    current = record.current_attempt
    if (record.state not in (RunState.STARTING, RunState.QUEUED) or current is None
            or current.number != attempt.number or current.created_at is not None):
        return Refused(f"not waiting for attempt {attempt.number}'s VM (now {record.state})")
    return current


def withdrawn(record: RunRecord, event: Withdrawn, now: datetime) -> Result:
    current = _waiting_for(record, event.attempt)
    if isinstance(current, Refused):
        return current
    ended = current.model_copy(update={"outcome": Outcome.CREATE_FAILED, "error": event.reason})
    updated = record.with_attempt(ended, now)
    return updated.with_state(RunState.CANCELLED if record.had_vm else RunState.SKIPPED, now, event.reason)


def host_lacks(record: RunRecord, event: HostLacks, now: datetime) -> Result:
    current = _waiting_for(record, event.attempt)
    if isinstance(current, Refused):
        return current
    ended = current.model_copy(update={"outcome": Outcome.UNAVAILABLE, "error": event.reason})
    return record.with_attempt(ended, now).with_state(RunState.SKIPPED, now, f"not run on this host: {event.reason}")


def attempt_reported(record: RunRecord, event: AttemptReported, now: datetime) -> Result:
    attempt = next((a for a in record.attempts if a.number == event.number), None)
    if attempt is None:
        return Refused(f"run has no attempt {event.number}")
    if attempt.outcome is not None:
        return Refused(f"attempt {event.number} already reported {attempt.outcome}")
    if event.status == "preempted":
        outcome = Outcome.PREEMPTED
    elif event.status == "unavailable":
        outcome = Outcome.UNAVAILABLE
    elif event.timed_out:
        outcome = Outcome.TIMED_OUT
    else:
        outcome = Outcome.EXITED
    ended = attempt.model_copy(update={
        "outcome": outcome, "exit_code": event.exit_code, "started_at": event.started_at,
        "finished_at": event.finished_at, "deleted_at": now, "zone": attempt.zone or event.zone,
        **({"secret_versions": dict(event.secret_versions)} if event.secret_versions else {}),
        "created_at": attempt.created_at or event.vm_created_at,
        "instance_id": attempt.instance_id or event.instance_id or None,
    })
    updated = record.with_attempt(ended, now)
    current = record.current_attempt
    if record.terminal or current is None or current.number != attempt.number:
        return updated  # a late report from an old attempt: keep its facts, not its verdict
    state, reason = verdict(outcome, event.exit_code, complete=event.manifest_present and event.uploaded,
                            callback=True, problem=event.problem)
    return _with_metrics(retry_or_finalize(updated, ended, state, reason, now, event.zones), event.metrics)


def vm_gone(record: RunRecord, event: VmGone, now: datetime) -> Result:
    latest = record.current_attempt
    if record.state != RunState.RUNNING or latest is None or latest.number != event.number:
        return Refused("the attempt is no longer the running one")
    facts = event.manifest
    if facts is not None:
        outcome = Outcome.TIMED_OUT if facts.timed_out else Outcome.EXITED
        exit_code = facts.exit_code
    elif event.past_deadline or (record.deadline is not None and now >= record.deadline):
        outcome, exit_code = Outcome.TIMED_OUT, None
    else:
        outcome, exit_code = Outcome.LOST, None
    ended = latest.model_copy(update={"outcome": outcome, "exit_code": exit_code,
                                      "deleted_at": latest.deleted_at or now})
    updated = record.with_attempt(ended, now)
    state, reason = verdict(outcome, exit_code, complete=facts is not None, callback=False)
    return _with_metrics(retry_or_finalize(updated, ended, state, reason, now, event.zones), event.metrics)


def _with_metrics(result: Result, metrics: tuple[tuple[str, object], ...]) -> Result:
    """A run that ended keeps its last attempt's checked metrics.json (see engine/results.py)."""
    if metrics and isinstance(result, RunRecord) and result.terminal:
        return result.model_copy(update=dict(metrics))
    return result


def _vm_ended_for_good(record: RunRecord, outcome: Outcome, now: datetime) -> RunRecord:
    current = record.current_attempt
    if current is None or current.outcome is not None:
        return record
    return record.with_attempt(current.model_copy(update={"deleted_at": now, "outcome": outcome}), now)


TRANSITIONS: dict[type, Callable[[RunRecord, object, datetime], Result]] = {
    Begin: begin, Skip: skip, Claim: claim, MoveAttempt: move_attempt, VmCreated: vm_created,
    CreateRefused: create_refused, Queue: queue, Dequeue: dequeue, QueueExpired: queue_expired,
    EffectsDone: effects_done, Stuck: stuck, Fail: fail, Replaced: replaced, Cancel: cancel,
    AttemptReported: attempt_reported, VmGone: vm_gone, MissedMore: missed_more, Withdrawn: withdrawn,
    HostLacks: host_lacks,
}


def apply(record: RunRecord, event: Event, now: datetime) -> Result:
    """The record after `event`, or why the event does not apply. Never raises for a refusal."""
    return TRANSITIONS[type(event)](record, event, now)  # type: ignore[arg-type]
