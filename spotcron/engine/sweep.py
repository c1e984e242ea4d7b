"""sweep: reap what went wrong, every few minutes.

- a managed VM that is STOPPED/TERMINATED, alive past its deadline, or of a run that has ended
  (replaced by a newer run whose start died before deleting it), is deleted with its disk;
- a run whose VM vanished without calling back (preempted, crashed, callback lost) is finished
  from its manifest when the upload completed, else retried or marked lost;
- a run stuck in `starting` is adopted when its VM exists, else failed;
- an ended run whose end still owes effects (a crash or a transient error after its terminal
  write) has them done (engine/writer.do_owed_effects);
- queued runs are started when room has freed, or skipped past their deadline (engine/queue.py).
Nothing without our label is ever touched, nor a managed VM of a live run inside its deadline.

Its work follows the runs that need it. One aggregated list of the managed VMs and one listing
of the live index (whose marker names carry a running run's attempt, zone, VM and deadline, and
since when a run has waited for its VM; see engine/live_index.py) show which runs need attention:
a running run whose VM is missing, stopped or past its deadline, a run waiting for its VM for too
long, a run with two markers. Only those records are read. With everything healthy a sweep makes one
Compute call and one Storage call, however many VMs are live. Nothing retries a failed sweep, so a
listing that keeps failing does not end it: without the VM list it looks up the VMs the live index
names, one get each; without the index it deletes only stopped and overdue VMs.
"""

from __future__ import annotations

import enum
import logging
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime, timedelta

from spotcron.core.descriptor import METADATA_KEY, RunDescriptor
from spotcron.core.errors import Transient
from spotcron.core.runs import RunRecord, RunState
from spotcron.engine import transitions
from spotcron.engine.attempts import create_attempt
from spotcron.engine.deps import Deps
from spotcron.engine.live_index import OWED, QUEUED, RUNNING, WAITING, LiveEntry
from spotcron.engine.ports import DEAD_STATUSES, Instance
from spotcron.engine.queue import start_queued
from spotcron.engine.results import manifest_document, metrics_changes
from spotcron.engine.spot_advice import refresh_advice
from spotcron.engine.still_deployed import deployed_problem
from spotcron.engine.store import RecordConflict, run_sort_key
from spotcron.engine.writer import do_owed_effects, step

log = logging.getLogger("spotcron.engine")

# A VM created moments ago may not show in a list yet; don't call it vanished before this.
LIST_LAG = timedelta(minutes=2)
# Past its deadline a VM gets this long before we delete it ourselves. Zero: Compute Engine's
# maxRunDuration normally gets there first, but when it is late the sweep is all there is, and any
# slack here would let a VM outlive its deadline by more than one sweep interval.
DEADLINE_SLACK = timedelta(0)
# The sweep is not redelivered (the next tick comes anyway), so a listing that meets a transient
# error is tried again at once; one that keeps failing leaves the sweep working from what it has.
LIST_TRIES = 3  # for listings and deletes alike
# How long the sweep keeps re-trying the insert of an attempt that has no VM (transient errors)
# before it calls the run stuck; a first attempt also gets its job's starting_deadline.
CREATE_PATIENCE = timedelta(minutes=30)


@dataclass
class SweepReport:
    deleted_vms: list[tuple[str, str]] = field(default_factory=list)  # (vm, reason)
    ended_runs: list[tuple[str, str, str]] = field(default_factory=list)  # (job, run, state)
    retried_runs: list[tuple[str, str]] = field(default_factory=list)
    adopted_runs: list[tuple[str, str]] = field(default_factory=list)
    effects_done: list[tuple[str, str]] = field(default_factory=list)  # ended runs whose owed effects it did
    dequeued_runs: list[tuple[str, str, str]] = field(default_factory=list)  # (job, run, state now)
    errors: list[str] = field(default_factory=list)  # what failed this time; the next sweep tries again

    def summary(self) -> dict[str, int]:
        return {"deleted_vms": len(self.deleted_vms), "ended_runs": len(self.ended_runs),
                "retried_runs": len(self.retried_runs), "adopted_runs": len(self.adopted_runs),
                "effects_done": len(self.effects_done), "dequeued_runs": len(self.dequeued_runs),
                "errors": len(self.errors)}


def sweep(deps: Deps) -> SweepReport:
    report = _sweep(deps)
    # Once per interval, after the VMs are seen to: placement's advice (engine/spot_advice.py). Its
    # failure is reported and never stops a sweep; starts meanwhile use the fixed order.
    try:
        refresh_advice(deps)
    except Exception as exc:  # noqa: BLE001 - advice is optional; the next sweep tries again
        report.errors.append(f"refreshing the Spot advice: {exc}")
        log.warning("sweep: refreshing the Spot advice: %s", exc)
    return report


def _sweep(deps: Deps) -> SweepReport:
    """The sweep of the VMs and the live index; the records it reads are those of the runs
    `needs_attention` picks."""
    now = deps.clock.now()
    report = SweepReport()
    # One unreadable record or failed call must not stop the rest: a stopped or overdue VM left
    # for the next sweep would outlive its deadline by more than one sweep interval. So every
    # step for one run or one VM catches *any* exception (a record that does not parse, a file a
    # job wrote that nobody thought of, a bug): it is logged with that run's id and the pass goes
    # on; the next sweep tries that run again.
    unread: set[tuple[str, str]] = set()
    listed = _listed("listing the managed VMs", deps.compute.list_managed, report)
    index = _listed("listing the live index", deps.store.live_index, report)
    markers: dict[tuple[str, str], list[LiveEntry]] = {}
    for entry in index or []:
        markers.setdefault((entry.job, entry.run_id), []).append(entry)
    if listed is not None:
        instances = {(i.zone, i.name): i for i in listed if i.managed}
    else:
        instances = _named_vms(deps, markers, unread, report)
    records: dict[tuple[str, str], RunRecord] = {}
    ended: dict[tuple[str, str], RunRecord] = {}  # read, and found ended: their VMs go
    ending: list[tuple[tuple[str, str], RunRecord, list[LiveEntry]]] = []
    for key, entries in markers.items():
        if key in unread or not needs_attention(deps, entries, instances, now):
            continue
        try:
            record = deps.store.read(*key)
            if record is not None and record.terminal:
                ended[key] = record
            if record is not None and record.terminal and record.owed:
                if any(entry.kind == QUEUED for entry in entries):
                    continue  # the queue pass below finishes it (engine/queue.py), once
                ending.append((key, record, entries))  # after the VMs, the runs and the queue: see below
                continue
            if record is None or record.terminal:
                for entry in entries:  # left by an interrupted update, or a start that died before its record
                    if record is None and _record_may_follow(entry, now):
                        continue
                    deps.blobs.delete(entry.name)
                continue
            deps.store.fix_markers(record, [entry.name for entry in entries])
        except Exception as exc:  # noqa: BLE001 - one run never stops the pass (see above)
            unread.add(key)
            _failed(report, f"reading {key[0]}/{key[1]}", exc)
            continue
        records[key] = record

    timed_out: set[tuple[str, str]] = set()
    for key, instance in list(instances.items()):
        run_key = (instance.labels.get("job", ""), instance.labels.get("run", ""))
        try:
            record = records.get(run_key) or ended.get(run_key)
            reap = _reap_reason(deps, instance, record, markers.get(run_key, []), now,
                                run_known=index is not None and run_key not in unread)
            if reap is None:
                continue
            _deleted(deps, instance)
        except Exception as exc:  # noqa: BLE001 - one VM never stops the pass
            _failed(report, f"reaping {instance.name} (run {run_key[0]}/{run_key[1]})", exc)
            continue
        del instances[key]
        report.deleted_vms.append((instance.name, reap.reason))
        log.info("sweep deleted %s: %s", instance.name, reap.reason)
        if reap.why is ReapWhy.PAST_DEADLINE:
            timed_out.add(key)

    for record in records.values():
        try:
            _sweep_run(deps, record, instances, timed_out, now, report)
        except Exception as exc:  # noqa: BLE001 - one run never stops the pass
            _failed(report, f"sweeping {record.job}/{record.run_id}", exc)
    if index is not None:
        _start_queued(deps, index, unread, report)
    # Ends still owed (a crash or an error after a terminal write) come last, a bounded number per
    # pass, in an order that turns with the clock: one job's backlog (a run whose pruning has a
    # hundred thousand objects to delete) never stands before the reaping, the runs and the queue,
    # nor always before other jobs' ends.
    _finish_ends(deps, ending, now, report)
    for error in report.errors:
        log.warning("sweep: %s", error)
    return report


ENDS_PER_PASS = 100


def _finish_ends(deps: Deps, ending: list[tuple[tuple[str, str], RunRecord, list[LiveEntry]]], now: datetime,
                 report: SweepReport) -> None:
    if not ending:
        return
    ending.sort(key=lambda item: item[0])
    turn = int(now.timestamp() // 60) % len(ending)
    pruned: set[str] = set()  # one prune, one delete budget, per job and pass
    for key, record, entries in (ending[turn:] + ending[:turn])[:ENDS_PER_PASS]:
        try:
            record = do_owed_effects(deps, record, pruned=pruned)
            deps.store.fix_markers(record, [entry.name for entry in entries])
            if not record.owed:
                report.effects_done.append(key)
        except Exception as exc:  # noqa: BLE001 - one run never stops the pass
            _failed(report, f"finishing the end of {key[0]}/{key[1]}", exc)


def _start_queued(deps: Deps, index: list[LiveEntry], unread: set[tuple[str, str]], report: SweepReport) -> None:
    """Queued runs, oldest tick first, once the VMs above are seen to (a reaped VM frees room)."""
    readable = [entry for entry in index if (entry.job, entry.run_id) not in unread]  # start_queued picks and orders
    try:
        moved = start_queued(deps, readable, report.errors, check_held=True)
    except Exception as exc:  # noqa: BLE001 - the queue's own listing or a bug: the pass is done anyway
        _failed(report, "starting queued runs", exc)
        return
    report.dequeued_runs.extend((r.job, r.run_id, r.state) for r in moved)


def _failed(report: SweepReport, what: str, exc: Exception) -> None:
    """Note a failure of one run's step; an error we did not expect keeps its traceback in the log."""
    report.errors.append(f"{what}: {type(exc).__name__}: {exc}")
    if not isinstance(exc, Transient | RecordConflict | ValueError):
        log.error("sweep: %s failed unexpectedly; the pass goes on", what, exc_info=exc)


def _deleted(deps: Deps, instance: Instance) -> None:
    """Delete `instance`, tried LIST_TRIES times while it meets transient errors: nothing retries
    a sweep, so one failed try would leave a stopped or overdue VM billing until the next one."""
    for tried in range(1, LIST_TRIES + 1):
        try:
            deps.compute.delete_instance(instance.zone, instance.name)
            return
        except Transient:
            if tried == LIST_TRIES:
                raise


def _listed(what: str, call: Callable[[], list], report: SweepReport) -> list | None:
    """`call()`, tried LIST_TRIES times while it meets transient errors; None (and an error) after."""
    for _ in range(LIST_TRIES):
        try:
            return call()
        except Transient as exc:
            error = exc
    report.errors.append(f"{what}: {error} ({LIST_TRIES} tries); the sweep works from what it has")
    return None


def _named_vms(deps: Deps, markers: dict[tuple[str, str], list[LiveEntry]], unknown: set[tuple[str, str]],
               report: SweepReport) -> dict[tuple[str, str], Instance]:
    """Without a listing: the VMs that running runs' markers name, one get each (a get is
    authoritative: absent means gone). A run whose VM could not be looked up joins `unknown`, to
    be left alone; a VM no marker names waits for a sweep that can list."""
    found: dict[tuple[str, str], Instance] = {}
    for key, entries in markers.items():
        for entry in entries:
            if entry.kind != RUNNING or entry.zone is None or entry.vm is None:
                continue
            try:
                instance = deps.compute.get_instance(entry.zone, entry.vm)
            except Exception as exc:  # noqa: BLE001 - one run never stops the pass
                unknown.add(key)
                _failed(report, f"looking up {entry.vm} (run {key[0]}/{key[1]})", exc)
                continue
            if instance is not None and instance.managed:
                found[(instance.zone, instance.name)] = instance
    return found


# A start writes a run's waiting marker before its record (engine/store.py): until a start handler
# can no longer be alive (start_job's function timeout, 120 s, with room to spare), a waiting
# marker without a record may be one whose record is about to be written.
RECORD_MAY_FOLLOW = timedelta(minutes=10)


def _record_may_follow(entry: LiveEntry, now: datetime) -> bool:
    return entry.kind == WAITING and entry.since is not None and now - entry.since < RECORD_MAY_FOLLOW


def stuck_after(deps: Deps) -> timedelta:
    return max(timedelta(minutes=10), timedelta(seconds=2 * deps.settings.sweep_interval))


def needs_attention(deps: Deps, entries: list[LiveEntry], instances: dict[tuple[str, str], Instance],
                    now: datetime) -> bool:
    """Whether a run's record must be read, from its live markers and the listed VMs alone."""
    if len(entries) != 1:
        return True  # several (a rename a crash cut short): the record says which is right
    entry = entries[0]
    if entry.kind == QUEUED:
        # The queue's, after the runs (see _start_queued): it reads the runs it may start and, in a
        # sweep, a bounded share of those held back, so one that ended while its marker said queued
        # is finished there (engine/queue.HELD_CHECKS).
        return False
    if entry.kind == OWED:
        # Its own handler finishes it at once; past the list lag nobody is (it crashed, or an
        # effect met an error).
        return entry.since is None or now - entry.since >= LIST_LAG
    if entry.kind == WAITING:
        # Past the list lag nobody may be driving it: a retry's insert that met a transient error
        # has no redelivery behind it (see _sweep_starting).
        return entry.since is None or now - entry.since >= LIST_LAG
    if entry.zone is None or entry.vm is None:
        return True
    instance = instances.get((entry.zone, entry.vm))
    if instance is None or instance.status in DEAD_STATUSES:
        return True  # gone (or going): find out how its run ended
    return entry.deadline is None or now > entry.deadline + DEADLINE_SLACK


class ReapWhy(enum.Enum):
    STOPPED = "stopped"
    PAST_DEADLINE = "past its deadline"
    RUN_ENDED = "run ended"
    RUN_PRUNED = "run pruned"


@dataclass(frozen=True)
class Reap:
    """Why the sweep deletes a VM: `why` for the code that branches on it, `reason` for people."""

    why: ReapWhy
    reason: str


def _reap_reason(deps: Deps, instance: Instance, record: RunRecord | None, entries: list[LiveEntry],
                 now: datetime, *, run_known: bool = True) -> Reap | None:
    if instance.status in DEAD_STATUSES:
        return Reap(ReapWhy.STOPPED, f"{instance.status}: a stopped VM still bills its disk")
    deadline = _deadline(deps, instance, record, entries)
    if deadline is not None and now > deadline + DEADLINE_SLACK:
        return Reap(ReapWhy.PAST_DEADLINE, f"past its deadline {deadline:%Y-%m-%d %H:%M:%S} UTC")
    if record is not None and record.terminal:
        # Its run has ended, yet a marker still stands (its ender died before renaming it): the
        # VM a run ended by another run still owes deleting, and nothing else would before its deadline.
        return Reap(ReapWhy.RUN_ENDED, "its run has already ended")
    if not run_known or entries:
        return None  # its run is live (or its record could not be read): only status and deadline count
    if now - instance.created_at <= LIST_LAG:
        return None
    job, run_id = instance.labels.get("job", ""), instance.labels.get("run", "")
    if deps.store.read(job, run_id):
        return Reap(ReapWhy.RUN_ENDED, "its run has already ended")
    # No record: an insert that hung until after its run ended and history_limit pruned it.
    floor = deps.store.pruned_through(job) if job and run_id else None
    if floor is not None and run_sort_key(run_id) <= run_sort_key(floor):
        return Reap(ReapWhy.RUN_PRUNED, "its run has ended and was pruned")
    return None


def _deadline(deps: Deps, instance: Instance, record: RunRecord | None, entries: list[LiveEntry]) -> datetime | None:
    # The record's deadline is that of its running attempt's VM (the live marker carries it). Any
    # other VM of the run (the next attempt's, still `starting`; an old attempt's) goes by its own
    # metadata.
    current = record.current_attempt if record is not None else None
    if (record is not None and record.deadline is not None and record.state == RunState.RUNNING and current is not None
            and (current.zone, current.vm_name) == (instance.zone, instance.name)):
        return record.deadline
    if record is None and len(entries) == 1:
        entry = entries[0]
        if entry.kind == RUNNING and (entry.zone, entry.vm) == (instance.zone, instance.name):
            return entry.deadline
    raw = instance.metadata.get(METADATA_KEY)
    if raw:
        try:
            descriptor = RunDescriptor.from_metadata(raw)
            return instance.created_at + timedelta(seconds=descriptor.timeout_s + deps.settings.grace)
        except ValueError:
            pass
    return None


def _sweep_run(deps: Deps, record: RunRecord, instances: dict, timed_out: set, now: datetime,
               report: SweepReport) -> None:
    attempt = record.current_attempt
    if record.state in (RunState.SCHEDULED, RunState.STARTING):
        _sweep_starting(deps, record, now, report)
        return
    if record.state != RunState.RUNNING or attempt is None or attempt.zone is None:
        return
    key = (attempt.zone, attempt.vm_name)
    if key in instances:
        return
    # A list can lag behind a create; a get cannot, so only a get decides that a VM is gone.
    if key not in timed_out and deps.compute.get_instance(attempt.zone, attempt.vm_name) is not None:
        return
    ended = _vm_gone(deps, record, now, past_deadline=key in timed_out)
    if ended.terminal:
        report.ended_runs.append((ended.job, ended.run_id, ended.state))
    elif ended.state in (RunState.STARTING, RunState.RUNNING):
        report.retried_runs.append((ended.job, ended.run_id))


def _sweep_starting(deps: Deps, record: RunRecord, now: datetime, report: SweepReport) -> None:
    """A run whose attempt has no VM yet. Only start_job has Pub/Sub redelivery behind it: when a
    retry's insert (from job_done or a sweep) met a transient error, nothing else would try again."""
    idle = now - record.updated_at
    if idle < LIST_LAG:
        return  # a delivery or a callback is working on it right now
    attempt = record.current_attempt
    if record.state == RunState.SCHEDULED:
        # Its start died before it began the run, and the redelivery that would go on was refused
        # or has not come: a job paused, removed or deployed again meanwhile ends the run here.
        gone = deployed_problem(deps, record)
        if gone:
            ended = step(deps, record.job, record.run_id,
                         transitions.Skip(f"{gone} (its start ended before the run began)")).record
            if ended is not None and ended.terminal:
                report.ended_runs.append((record.job, record.run_id, ended.state))
            return
    starting_since = record.history[-1].at if record.history else record.updated_at
    if (record.state == RunState.STARTING and attempt is not None
            and now - starting_since < max(CREATE_PATIENCE, timedelta(seconds=_starting_deadline(record)))):
        driven = create_attempt(deps, record, claimed=False)
        if driven.state == RunState.RUNNING:
            report.adopted_runs.append((record.job, record.run_id))
        elif driven.terminal:
            report.ended_runs.append((record.job, record.run_id, driven.state))
        return
    if idle < stuck_after(deps):
        return
    if attempt is not None and attempt.zone and deps.compute.get_instance(attempt.zone, attempt.vm_name):
        create_attempt(deps, record, claimed=False)  # the create landed; adopt it
        report.adopted_runs.append((record.job, record.run_id))
        return
    minutes = int((now - starting_since).total_seconds() // 60)
    reason = f"stuck in {record.state} for {minutes} minutes: no VM could be created"
    ended = step(deps, record.job, record.run_id, transitions.Stuck(seen_at=record.updated_at, reason=reason)).record
    if ended is not None and ended.terminal:
        report.ended_runs.append((record.job, record.run_id, ended.state))


def _starting_deadline(record: RunRecord) -> int:
    return int((record.spec or {}).get("starting_deadline") or 0)


def _vm_gone(deps: Deps, record: RunRecord, now: datetime, *, past_deadline: bool) -> RunRecord:
    """The current attempt's VM is gone and never called back: decide what that means."""
    attempt = record.current_attempt
    assert attempt is not None
    manifest, problem = manifest_document(deps, record.job, record.run_id, attempt.number)
    facts = _manifest_facts(manifest) if manifest is not None else None
    if problem is not None:
        # The upload finished (the manifest is there) but a job rewrote it: the exit code is unknown.
        facts = transitions.ManifestFacts(exit_code=None, timed_out=False)
    metrics = metrics_changes(deps, record.job, record.run_id, attempt.number, transitions.spec_of(record)) if facts else {}
    if problem is not None:
        metrics = {**metrics, "metrics_problem": problem}
    event = transitions.VmGone(number=attempt.number, manifest=facts, past_deadline=past_deadline, zones=deps.settings.zones,
                     metrics=tuple(metrics.items()))
    stepped = step(deps, record.job, record.run_id, event, now=now)
    if stepped.record is None or not stepped.changed:
        return stepped.record or record
    if stepped.record.state == RunState.STARTING:
        return create_attempt(deps, stepped.record)
    return stepped.record


def _manifest_facts(manifest: dict) -> transitions.ManifestFacts:
    """exit_code (int or None) and timed_out from a manifest the runner wrote."""
    code = manifest.get("exit_code")
    return transitions.ManifestFacts(exit_code=code if isinstance(code, int) and not isinstance(code, bool) else None,
                           timed_out=manifest.get("timed_out") is True)
