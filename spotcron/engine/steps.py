"""Apply one transition to a stored run record, then do what its new state calls for.

`step` is the one writer of run records after their creation: it runs the pure transition inside
`RunStore.update` (read, compute, write-if-unchanged, retried on conflict), prices a run that has
just ended, and afterwards publishes the event and, once per run, does the end-of-run work.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from datetime import datetime

from spotcron.core.runs import RunRecord, RunState
from spotcron.engine import transitions as t
from spotcron.engine.deps import Deps
from spotcron.engine.guards import settle

log = logging.getLogger("spotcron.engine")


@dataclass(frozen=True)
class Stepped:
    record: RunRecord | None  # as stored now (None: the run has no record)
    changed: bool  # this call's transition is the one that got written
    refused: str | None = None  # why it was not, when the transition refused


def step(deps: Deps, job: str, run_id: str, event: t.Event, *, now: datetime | None = None) -> Stepped:
    """Apply `event` to the stored record of job/run_id; publish and end the run as the result says."""
    now = now or deps.clock.now()
    before: dict[str, RunRecord] = {}
    refusal: list[str] = []

    def change(current: RunRecord) -> RunRecord | None:
        before["record"] = current
        refusal.clear()
        result = t.apply(current, event, now)
        if isinstance(result, t.Refused):
            refusal.append(result.why)
            return None
        if result.terminal and not current.terminal:
            result = priced(deps, result)
        return result

    record, changed = deps.store.update(job, run_id, change)
    if changed and record is not None:
        _after(deps, before["record"], record, event)
    return Stepped(record, changed, refusal[0] if refusal else None)


def priced(deps: Deps, record: RunRecord) -> RunRecord:
    if deps.run_cost is None:
        return record
    total, items = deps.run_cost(record)
    return record.model_copy(update={"cost_usd": total, "cost_items": items})


def _after(deps: Deps, before: RunRecord, after: RunRecord, event: t.Event) -> None:
    if isinstance(event, t.VmCreated):
        deps.publish("run.started", after, vm=event.attempt.vm_name, zone=event.zone)
    if (after.state == RunState.STARTING and before.state != RunState.SCHEDULED
            and len(after.attempts) > len(before.attempts)):
        deps.publish("run.retrying", after, attempt=after.current_attempt.number)
    if after.terminal and not before.terminal:
        run_ended(deps, after)


def run_ended(deps: Deps, record: RunRecord) -> None:
    """Once per run, after its terminal state is stored: events, history pruning, hooks."""
    deps.publish("run.finished", record)
    try:
        settle(deps, record)
    except Exception:  # noqa: BLE001 - an unsettled reservation only keeps the day's limit stricter
        log.warning("could not settle the VM-hours of %s/%s", record.job, record.run_id, exc_info=True)
    try:
        deps.store.prune(record.job, record.history_limit)
    except Exception:  # noqa: BLE001 - pruning is retried at the next run end
        log.warning("could not prune history of %s", record.job, exc_info=True)
    for hook in deps.on_run_end:
        try:
            hook(deps, record)
        except Exception:  # noqa: BLE001 - a page or notification must not fail the run
            log.warning("run-end hook %r failed for %s/%s", hook, record.job, record.run_id, exc_info=True)
