"""A job's `concurrency` policy, applied to a run about to begin: `allow` lets it run beside the
job's live runs, `forbid` skips it while an older one lives, `replace` ends the others first.

Scheduled ticks go before manual runs (any `trigger=manual` start, whoever published it): under
`forbid` and `replace` a manual run never ends or holds back a tick. A manual run that finds a
tick of its job live is skipped, naming it; a tick that finds only manual runs live ends them
(`cancelled`, which counts for nothing and notifies no failure) and runs. So at most one run of
the job lives either way, and a publisher on the start topic cannot switch a job's schedule off.
Among ticks, and among manual runs, the policy applies as it reads.
"""

from __future__ import annotations

from datetime import datetime

from spotcron.core.runs import RunRecord, RunState
from spotcron.engine import transitions
from spotcron.engine.deps import Deps
from spotcron.engine.found_vm import with_found_vm
from spotcron.engine.store import run_sort_key
from spotcron.engine.writer import step


def apply_concurrency(deps: Deps, record: RunRecord) -> RunRecord:
    spec = transitions.spec_of(record)
    if spec.concurrency == "allow":
        return record
    others = [other for other in _live_runs_of(deps, record) if other.run_id != record.run_id]
    ticks = [o for o in others if not _manual(o)]
    if _manual(record) and ticks:
        names = ", ".join(o.run_id for o in ticks)
        reason = (f"scheduled run {names} is live, and scheduled runs go before manual runs "
                  f"(concurrency: {spec.concurrency})")
        return step(deps, record.job, record.run_id, transitions.Skip(reason)).record or record
    if not _manual(record):
        if spec.concurrency == "forbid":
            # Between ticks the rule is as it reads; only the manual runs are ended, below.
            ticks = [o for o in ticks if o.state != RunState.SCHEDULED or _order(o) < _order(record)]
            if ticks:
                return _skip(deps, record, ticks)
        for other in others:
            if _manual(other):
                _end(deps, other, transitions.Cancel(
                    f"ended for scheduled run {record.run_id}: scheduled runs go before manual runs "
                    f"(concurrency: {spec.concurrency})"))
        if spec.concurrency == "replace":
            for other in ticks:
                _end(deps, other, transitions.Replaced(by=record.run_id))
        return record
    # A manual run among manual runs only.
    if spec.concurrency == "forbid":
        # Two runs still `scheduled` at once (two "run now"s) see each other: the older goes
        # ahead and the younger is skipped, the same order read from either side, so never both.
        others = [o for o in others if o.state != RunState.SCHEDULED or _order(o) < _order(record)]
        if others:
            return _skip(deps, record, others)
        return record
    for other in others:  # replace
        _end(deps, other, transitions.Replaced(by=record.run_id))
    return record


def _manual(record: RunRecord) -> bool:
    return record.trigger == "manual"


def _skip(deps: Deps, record: RunRecord, others: list[RunRecord]) -> RunRecord:
    names = ", ".join(o.run_id for o in others)
    reason = f"previous run {names} is still running (concurrency: forbid)"
    return step(deps, record.job, record.run_id, transitions.Skip(reason)).record or record


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


def _end(deps: Deps, other: RunRecord, event: transitions.Replaced | transitions.Cancel) -> None:
    # The run ends first, then its VM goes: a delivery of that run landing its insert in between
    # then finds it ended and deletes its own VM, instead of recording a VM that outlives its run.
    # A start that died right after its insert left a VM the record does not know of: adopted
    # first (engine/found_vm.py), so the end deletes it and settles the hours it ran.
    other = with_found_vm(deps, other)
    ended = step(deps, other.job, other.run_id, event).record or other
    attempt = ended.current_attempt
    if attempt is not None and attempt.zone:
        deps.compute.delete_instance(attempt.zone, attempt.vm_name)
