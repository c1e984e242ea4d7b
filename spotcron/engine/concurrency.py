"""A job's `concurrency` policy, applied to a run about to begin: `allow` lets it run beside the
job's live runs, `forbid` skips it while an older one lives, `replace` ends the others first.

Scheduled ticks go before manual runs (any `trigger=manual` start, whoever published it): under
`forbid` and `replace` a manual run never ends or holds back a tick. A manual run that finds a
tick of its job live is skipped, naming it; a tick that finds only manual runs live ends them
(`cancelled`, which counts for nothing and notifies no failure) and runs. So at most one run of
the job lives either way, and a publisher on the start topic cannot switch a job's schedule off.
Among ticks, and among manual runs, the policy applies as it reads, with one order under
`replace`: a run replaces only runs older than itself (an earlier tick; a manual run requested
earlier). A late delivery of an older one (Pub/Sub redelivers a failed start within its
`starting_deadline`) that finds a newer run of its kind live is skipped, naming it: the stale
tick never ends the current one. Two ticks starting at once converge the same way from either
side, the newer runs.

A run this ends owes its VM's deletion in the same write that ends it (engine/writer.py), so a
handler that dies right after leaves it owed, not forgotten: the next check that meets the ended
run under its stale live marker (a redelivered start) deletes the VM and puts the marker right,
and so does the sweep, which the marker written before the end leads to it (engine/store.py).
"""

from __future__ import annotations

import logging
from datetime import datetime

from spotcron.core.errors import Transient
from spotcron.core.runs import RunRecord, RunState
from spotcron.engine import transitions
from spotcron.engine.deps import Deps
from spotcron.engine.found_vm import with_found_vm
from spotcron.engine.live_index import OWED
from spotcron.engine.store import run_sort_key
from spotcron.engine.writer import do_owed_effects, step

log = logging.getLogger("spotcron.engine")


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
        if spec.concurrency == "replace":
            newer = [o for o in ticks if _newer(o, record)]
            if newer:
                return _skip_for_newer(deps, record, newer, "scheduled")
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
    newer = [o for o in others if _newer(o, record)]  # replace
    if newer:
        return _skip_for_newer(deps, record, newer, "manual")
    for other in others:
        _end(deps, other, transitions.Replaced(by=record.run_id))
    return record


def _manual(record: RunRecord) -> bool:
    return record.trigger == "manual"


def _skip(deps: Deps, record: RunRecord, others: list[RunRecord]) -> RunRecord:
    names = ", ".join(o.run_id for o in others)
    reason = f"previous run {names} is still running (concurrency: forbid)"
    return step(deps, record.job, record.run_id, transitions.Skip(reason)).record or record


def _skip_for_newer(deps: Deps, record: RunRecord, newer: list[RunRecord], kind: str) -> RunRecord:
    names = ", ".join(o.run_id for o in newer)
    reason = (f"newer {kind} run {names} is live, and a run replaces only older ones: this one came late "
              f"(concurrency: replace)")
    return step(deps, record.job, record.run_id, transitions.Skip(reason)).record or record


def _order(record: RunRecord) -> tuple[datetime, str]:
    return record.created_at, run_sort_key(record.run_id)


def _newer(other: RunRecord, record: RunRecord) -> bool:
    """Whether `other` belongs to a later tick (or, both manual, a later request) than `record`.
    Run ids sort by that time (core/runs.py), whenever the start was handled; both are of one
    configuration and repeat here, so the rest of their ids is the same."""
    return run_sort_key(other.run_id) > run_sort_key(record.run_id)


def _live_runs_of(deps: Deps, record: RunRecord) -> list[RunRecord]:
    """The live runs of `record`'s job and configuration. A run whose live marker outlived its end
    (its ender died before renaming it) is finished on the way: what its end owes (its VM's
    deletion among it) is done and its markers put right."""
    markers: dict[str, list[str]] = {}
    live: set[str] = set()
    for entry in deps.store.live_index():
        if entry.job == record.job:
            markers.setdefault(entry.run_id, []).append(entry.name)
            if entry.kind != OWED:  # an `owed` marker alone: its own handler or the sweep finishes it
                live.add(entry.run_id)
    runs = []
    for run_id in sorted(live):
        names = markers[run_id]
        other = deps.store.read(record.job, run_id)
        if other is None:
            continue
        if other.terminal:
            _finish(deps, other, names)
        elif other.variant == record.variant and other.repeat == record.repeat:
            runs.append(other)
    return runs


def _finish(deps: Deps, ended: RunRecord, markers: list[str]) -> None:
    try:
        ended = do_owed_effects(deps, ended)
        deps.store.fix_markers(ended, markers)
    except Transient as exc:  # not this start's to fail for: the sweep finishes it too
        log.warning("%s/%s: finishing its end met %s; the sweep tries again", ended.job, ended.run_id, exc)


def _end(deps: Deps, other: RunRecord, event: transitions.Replaced | transitions.Cancel) -> None:
    # The run ends first, then its VM goes (an effect the end owes, done at once by `step`): a
    # delivery of that run landing its insert in between then finds it ended and deletes its own
    # VM, instead of recording a VM that outlives its run. A start that died right after its
    # insert left a VM the record does not know of: adopted first (engine/found_vm.py), so the end
    # deletes it and settles the hours it ran.
    other = with_found_vm(deps, other)
    step(deps, other.job, other.run_id, event)
