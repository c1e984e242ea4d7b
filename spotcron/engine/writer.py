"""Apply one transition to a stored run record, then do what its new state calls for.

This module is the one writer of run records, and engine/transitions.py the one place that builds
them: `create` stores a new record (`transitions.scheduled`, perhaps already skipped), and `step`
runs a pure transition inside `RunStore.update` (read, compute, write-if-unchanged, retried on
conflict), prices a run that has just ended, and afterwards publishes the event and finishes the
run's end. tests/architecture/test_layers.py keeps it so.

The end of a run is durable. Entering a terminal state records every end-of-run effect as owed
in the same write (`RunRecord.with_state`): the `run.finished` event, settling the VM-hours
admissions, history pruning and one `hook:NAME` entry per run-end hook that applies to the run
(engine/hooks.py); an end that leaves the run's VM alive (another run took its place) owes its
deletion first (`owe_vm_deletion`). `do_owed_effects` does each entry still owed on its own and records what got done,
what failed (on the run: `effect_failures`) and what was given up (`EffectsDone`), so a function
that dies, or meets a transient error, between the terminal write and an effect leaves the effect
owed, not lost. The run keeps an `owed` live
marker until nothing is owed, and whoever touches the run next finishes it: the same handler at
once, any later step on the ended run (a redelivered callback or start), or the sweep, which
finds the marker in its one listing of the live index.

Each effect is idempotent, because a crash after an effect and before its "done" is written makes
the next toucher do it again: `run.finished` carries an `event_id` (JOB/RUN/finished) that
consumers deduplicate on; a settlement is a create-only object; pruning deletes what is left.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from datetime import datetime

from spotcron.core.errors import Transient
from spotcron.core.runs import HOOK_PREFIX, Effect, RunRecord, RunState
from spotcron.engine import transitions
from spotcron.engine.day_hours import settle
from spotcron.engine.deps import Deps
from spotcron.engine.hooks import hook_named, hook_tries, owe_hooks, owed_entries
from spotcron.engine.hooks import started as hook_started
from spotcron.engine.store import RecordConflict

log = logging.getLogger("spotcron.engine")


@dataclass(frozen=True)
class Stepped:
    record: RunRecord | None  # as stored now (None: the run has no record)
    changed: bool  # this call's transition is the one that got written
    refused: str | None = None  # why it was not, when the transition refused


def step(deps: Deps, job: str, run_id: str, event: transitions.Event, *, now: datetime | None = None) -> Stepped:
    """Apply `event` to the stored record of job/run_id; publish and end the run as the result says."""
    now = now or deps.clock.now()
    before: dict[str, RunRecord] = {}
    refusal: list[str] = []

    def change(current: RunRecord) -> RunRecord | None:
        before["record"] = current
        refusal.clear()
        result = transitions.apply(current, event, now)
        if isinstance(result, transitions.Refused):
            refusal.append(result.why)
            return None
        if result.terminal and not current.terminal:
            result = owe_vm_deletion(event, owe_hooks(deps, priced(deps, result)))
        return result

    record, changed = deps.store.update(job, run_id, change)
    if changed and record is not None:
        _after(deps, before["record"], record, event)
    if record is not None and record.owed and not isinstance(event, transitions.EffectsDone):
        record = do_owed_effects(deps, record)
    return Stepped(record, changed, refusal[0] if refusal else None)


def create(deps: Deps, record: RunRecord) -> bool:
    """Store a new run record; False when a record of that run already exists (a redelivery)."""
    return deps.store.create(record)


def priced(deps: Deps, record: RunRecord) -> RunRecord:
    if deps.run_cost is None:
        return record
    # A cost function may say why it priced nothing, and (local mode) the wait its cost leaves out.
    total, items, *more = deps.run_cost(record)
    return transitions.priced(record, total, items, more[0] if more else None,
                              more[1] if len(more) > 1 else None)


def _after(deps: Deps, before: RunRecord, after: RunRecord, event: transitions.Event) -> None:
    if isinstance(event, transitions.VmCreated):
        deps.publish("run.started", after, vm=event.attempt.vm_name, zone=event.zone)
        hook_started(deps, after, log)
    if (after.state == RunState.STARTING and before.state not in (RunState.SCHEDULED, RunState.QUEUED)
            and len(after.attempts) > len(before.attempts)):
        deps.publish("run.retrying", after, attempt=after.current_attempt.number)
    if after.state == RunState.QUEUED and before.state != RunState.QUEUED:
        deps.publish("run.queued", after)


# Ends that leave the run's VM running: another run of its job took its place (engine/concurrency.py).
# Every other end deletes the VM before it is written (job_done), or finds it gone or never made.
_VM_OUTLIVES_END = (transitions.Replaced, transitions.Cancel)


def owe_vm_deletion(event: transitions.Event, record: RunRecord) -> RunRecord:
    """`record` (just ended by `event`) owing its VM's deletion first, when the end leaves it alive.

    Owed, not done after the write: a handler that dies between the two would leave the VM
    running beside the run that replaced it until its deadline, with no run record left to say
    it should not be. Owed, whoever touches the run next deletes it (a redelivered start's
    concurrency check, the sweep)."""
    attempt = record.current_attempt
    if not isinstance(event, _VM_OUTLIVES_END) or attempt is None or not attempt.zone:
        return record
    return record.model_copy(update={"owed": (Effect.DELETE_VM, *(e for e in record.owed if e != Effect.DELETE_VM))})


def finished_event_id(record: RunRecord) -> str:
    return f"{record.job}/{record.run_id}/finished"


def do_owed_effects(deps: Deps, record: RunRecord, *, pruned: set[str] | None = None) -> RunRecord:
    """Do what the end of `record` still owes, record what got done and what failed; the record
    as stored.

    Each owed entry is done on its own: one that fails stays owed for the next toucher (the sweep
    at the latest), its failure recorded on the run, while the others are recorded done; a hook
    past its `max_tries` is given up (engine/hooks.py). Nothing here raises for a failed effect.
    A crash (any BaseException) propagates with everything still owed.

    `pruned`: the jobs already pruned by this caller's pass (the sweep's), shared across its calls.
    A job is pruned at most once per pass, so one pass deletes at most one budget of its history
    however many of its runs owe a prune; a later owed prune of a job already in it is recorded
    done, as that prune covered the job's whole history (a run whose end still owes effects is
    kept, so the first one's entry stays owed if it did not finish).
    """
    if not record.terminal or not record.owed:
        return record
    done: list[Effect | str] = []
    failed: list[tuple[str, str]] = []
    given_up: list[tuple[str, str]] = []
    instead: list[str] = []

    def attempt(entry: Effect | str, action) -> bool:
        try:
            action()
        except Exception as exc:  # noqa: BLE001 - owed until done: the sweep tries again
            error = f"{type(exc).__name__}: {exc}"
            log.warning("%s/%s: the end of the run still owes %s (%s); the sweep tries again",
                        record.job, record.run_id, entry, error, exc_info=not isinstance(exc, Transient))
            limit = hook_tries(deps, str(entry))
            tries = record.effect_failures.get(str(entry))
            if limit is not None and (tries.tries if tries else 0) + 1 >= limit:
                log.error("%s/%s: giving up %s after %d tries: %s", record.job, record.run_id, entry, limit, error)
                given_up.append((str(entry), error))
            else:
                failed.append((str(entry), error))
            return False
        return True

    for effect in record.owed:
        if effect == Effect.HOOKS:
            # Ended before its hooks were named (a record created already ended): each hook now
            # gets an entry of its own, owed until it is done.
            pending = [entry for entry in owed_entries(deps, record) if entry not in record.owed]
            for entry in pending:
                if not attempt(entry, lambda entry=entry: _do(deps, record, entry)):
                    instead.append(entry)
            done.append(effect)
            continue
        if effect == Effect.PRUNE and pruned is not None:
            if record.job in pruned:
                done.append(effect)
                continue
            pruned.add(record.job)
        if attempt(effect, lambda effect=effect: _do(deps, record, effect)):
            done.append(effect)
    if not done and not failed and not given_up:
        return record
    event = transitions.EffectsDone(tuple(done), tuple(failed), tuple(given_up), tuple(instead))
    try:
        return step(deps, record.job, record.run_id, event).record or record
    except (Transient, RecordConflict) as exc:
        log.warning("%s/%s: its end's effects were done but not recorded (%s); the sweep does them again",
                    record.job, record.run_id, exc)
        return record


def _do(deps: Deps, record: RunRecord, effect: Effect | str) -> None:
    if effect == Effect.DELETE_VM:
        attempt = record.current_attempt
        if attempt is not None and attempt.zone:
            deps.compute.delete_instance(attempt.zone, attempt.vm_name)  # gone already: False, done
    elif effect == Effect.FINISHED_EVENT:
        deps.publish("run.finished", record, strict=True, event_id=finished_event_id(record))
    elif effect == Effect.SETTLE:
        settle(deps, record)
    elif effect == Effect.PRUNE:
        deps.store.prune(record.job, record.history_limit)
    elif isinstance(effect, str) and effect.startswith(HOOK_PREFIX):
        hook = hook_named(deps, effect)
        if hook is None:
            raise LookupError(f"no run-end hook named {effect[len(HOOK_PREFIX):]!r} is installed here")
        hook(deps, record)
    else:
        raise LookupError(f"unknown owed effect {effect!r}")
