"""Runs waiting for room under the stack's limits, started oldest tick first.

A start whose VM would cross a stack limit (live VMs, GPUs, VM-hours per day) is not a failure:
the run is `queued`, with the limit in its reason, and keeps a `queued` live marker saying since
when. Room frees when a run's VM goes, so `start_queued` runs after a callback ends a run
(engine/job_done.py) and in every sweep pass: it lists the queued markers, and in tick order (the
run ids sort by tick) admits each run against the limits again. One that fits goes back to
`starting` (`Dequeue`, a conditional write, so of two queue passes only one creates the VM) and
its attempt's VM is created as any start's is; one that does not stays queued, holding no admission.
A run still queued when its starting_deadline has passed ends `skipped` with the limit as its
reason (`failed` for a retry, whose run did work before). On Google Cloud this needs nothing
beyond what is deployed: job_done and the sweep (every sweep_interval) drive it; locally the same
code runs in the local functions. The order is first in, first out per limit
(engine/queue_order.py): a run waiting for GPUs holds back only runs that need GPUs.
"""

from __future__ import annotations

import logging
import zlib
from collections.abc import Callable
from datetime import datetime

from spotcron.core.errors import Transient
from spotcron.core.runs import RunRecord, RunState
from spotcron.engine import transitions
from spotcron.engine.attempts import create_attempt, withdraw
from spotcron.engine.deps import Deps
from spotcron.engine.limits import admit
from spotcron.engine.live_index import QUEUED, LiveEntry, queue_deadline, waits_for_gpus
from spotcron.engine.queue_order import GPUS, ROOM, Waiting, waits_of
from spotcron.engine.still_deployed import deployed_problem
from spotcron.engine.store import run_sort_key
from spotcron.engine.writer import do_owed_effects, step

log = logging.getLogger("spotcron.engine")


def in_tick_order(entries: list[LiveEntry]) -> list[LiveEntry]:
    """The queued runs among `entries`, oldest tick first (run ids sort by tick across jobs)."""
    return sorted((e for e in entries if e.kind == QUEUED), key=lambda e: (run_sort_key(e.run_id), e.job))


# A sweep pass reads at most about this many records of runs held back behind a waiting run
# (rotating through them when more wait), to finish one that ended while its marker still says
# queued (a handler that ended it died before the rename): the rest of the pass reads none of them.
HELD_CHECKS = 25


def start_queued(deps: Deps, entries: list[LiveEntry] | None = None,
                 errors: list[str] | None = None, *, check_held: bool = False) -> list[RunRecord]:
    """Start the queued runs that fit now, oldest tick first; end those past their deadline.
    Returns the records of the runs it moved on. `entries`: the live index, when the caller has it;
    `errors` collects what failed (a run's failure never stops the queue); `check_held` (the sweep):
    also read a bounded share of the runs held back, to finish those that have ended."""
    if entries is None:
        entries = deps.store.live_index()
    moved: list[RunRecord] = []
    waiting = Waiting.none()
    now = deps.clock.now()
    queued = in_tick_order(entries)
    due = _held_check(deps, len(queued), now) if check_held else None
    for entry in queued:
        # First in, first out per limit (engine/queue_order.py): a younger run does not take the
        # room an older one waits for, and a long queue costs one admission per limit and pass,
        # not one per run. Behind a run that waits, only runs whose deadline has passed are read,
        # to end them, and in a sweep a bounded share of the others, to finish those that ended.
        held = waiting.holds(entry.run_id, entry.needs_gpus)
        if held and entry.deadline is not None and entry.deadline > now and not (due and due(entry)):
            continue
        try:
            record, waits = _start_one(deps, entry, admit_it=not held)
        except Transient as exc:
            # It waits (a start being decided near a limit, an error worth trying again), and the
            # runs behind it wait as behind any run that waits for room: a manual run's wait never
            # stops the ticks behind it, nor the ending of runs past their deadline.
            log.warning("queue: %s/%s stays queued for now: %s", entry.job, entry.run_id, exc)
            if errors is not None:
                errors.append(f"queued run {entry.job}/{entry.run_id}: {exc}")
            record, waits = None, ROOM
        except Exception as exc:  # noqa: BLE001 - one run never stops the others
            log.error("queue: %s/%s could not be handled; the queue goes on", entry.job, entry.run_id, exc_info=exc)
            if errors is not None:
                errors.append(f"queued run {entry.job}/{entry.run_id}: {type(exc).__name__}: {exc}")
            continue
        if record is not None:
            moved.append(record)
        if waits is not None and not held:
            # A run held back adds nothing: what holds it back holds back whatever it would.
            waiting.add(entry.run_id, waits)
    return moved


def _held_check(deps: Deps, queued: int, now: datetime) -> Callable[[LiveEntry], bool]:
    """Which held-back runs this sweep pass reads: all while there are few, else the HELD_CHECKS
    share whose turn it is, the turn moving on each sweep interval, so each is read every
    ceil(queued / HELD_CHECKS) passes."""
    turns = max(1, -(-queued // HELD_CHECKS))
    turn = int(now.timestamp() // max(1, deps.settings.sweep_interval)) % turns
    return lambda entry: zlib.crc32(f"{entry.job}/{entry.run_id}".encode()) % turns == turn


def _start_one(deps: Deps, entry: LiveEntry, *, admit_it: bool = True) -> tuple[RunRecord | None, str | None]:
    """(the record if the run moved on, what it still waits for: ROOM, GPUS or None when it no
    longer waits). `admit_it`: False only ends a run past its deadline or one that has ended."""
    record = deps.store.read(entry.job, entry.run_id)
    if record is None:
        deps.blobs.delete(entry.name)  # its run was pruned: a marker alone would be read every pass
        return None, None
    if record.state != RunState.QUEUED:
        # It moved on while its marker still said queued (a crash before the rename): an end that
        # owes effects is finished here, not a sweep later.
        record = do_owed_effects(deps, record)
        deps.store.fix_markers(record, [entry.name])
        return None, None
    now = deps.clock.now()
    attempt = record.current_attempt
    if attempt is None:
        return None, None
    if now >= queue_deadline(record):
        limit = (record.reason or "a stack limit").removeprefix("waiting for room: ")
        reason = f"no room before its starting_deadline passed: {limit}"
        return step(deps, record.job, record.run_id, transitions.QueueExpired(reason)).record, None
    if not admit_it:
        return None, waits_of(entry)
    gone = deployed_problem(deps, record)
    if gone:
        # Its job was paused, removed or deployed again while it waited: it ends, with no VM.
        return step(deps, record.job, record.run_id, transitions.Withdrawn(attempt, gone)).record, None
    admitted: list[str] = []
    refused = admit(deps, record, transitions.spec_of(record), attempt, written=admitted)
    if refused:
        return None, GPUS if waits_for_gpus(refused) else ROOM  # still no room (the limit refusing it now)
    try:
        stepped = step(deps, record.job, record.run_id, transitions.Dequeue(attempt))
    except BaseException:
        withdraw(deps, admitted)  # a failed dequeue (a conflict, a crash) leaves no admission behind
        raise
    if not stepped.changed or stepped.record is None:
        # Another pass took it, or it ended meanwhile (expired, its job withdrawn): this pass's
        # admission would hold its hours all day for a VM nobody creates.
        withdraw(deps, admitted)
        return None, None
    log.info("queue: room for %s/%s after %ss", record.job, record.run_id,
             int((now - (entry.since or now)).total_seconds()))
    return create_attempt(deps, stepped.record, claimed=True), None
