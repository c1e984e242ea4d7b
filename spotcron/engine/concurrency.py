"""A job's `concurrency` policy, applied to a run about to begin: `allow` lets it run beside the
job's live runs, `forbid` skips it while an older one lives, `replace` ends the others first."""

from __future__ import annotations

from datetime import datetime

from spotcron.core.runs import RunRecord, RunState
from spotcron.engine import transitions
from spotcron.engine.deps import Deps
from spotcron.engine.store import run_sort_key
from spotcron.engine.writer import step


def apply_concurrency(deps: Deps, record: RunRecord) -> RunRecord:
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
