"""Run records in the bucket, changed only through generation preconditions.

Every change is read → compute → write-if-generation-unchanged, retried on conflict. That makes
concurrent deliveries and callbacks safe without a database: the first writer wins and the
others re-read and see what it did.

The `live/` index holds one empty object per run not yet ended, and its name carries what the
sweep needs to decide whether the run needs attention: for a running run its attempt, zone, VM
and deadline; for one still waiting for its VM (scheduled or starting) only since when, because
the sweep looks at such a run only once it may be stuck. One listing then replaces a read per run
(engine/sweep.py). The marker is renamed when the run starts or stops running, so a run costs
two marker writes (deletes are free). A run waiting for room under the stack's limits has a
`queued` marker (since when), which the queue reads in tick order (engine/queue.py). An ended run
keeps an `ending` marker while its end still owes effects (engine/writer.py), so the sweep finds
them without reading every record. It is a hint, never the truth: a marker left behind by a
crash or a race makes the sweep read the record and put the markers right. Markers named
`live/JOB/RUN` (before the index carried anything) still count.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

from spotcron.core import layout
from spotcron.core.errors import PreconditionFailed, SpotcronError, Transient
from spotcron.core.layout import LIVE, PRUNED
from spotcron.core.runs import RunRecord, RunState, tick_of
from spotcron.engine.ports import Blobs

log = logging.getLogger("spotcron.engine")

MAX_CONFLICTS = 20
_SEP = "~"  # in no job name, run id, zone or VM name
_NONE = "-"


class RecordConflict(SpotcronError):
    """A record kept changing under us; the caller should let the delivery be retried."""


def live_marker(job: str, run_id: str) -> str:
    """The marker name before the index carried anything (still read, and removed when seen)."""
    return f"{LIVE}{job}/{run_id}"


WAITING, RUNNING, QUEUED, ENDING = "waiting", "running", "queued", "ending"
KINDS = (WAITING, RUNNING, QUEUED, ENDING)


@dataclass(frozen=True)
class LiveEntry:
    """One run not yet ended, as its marker's name describes it. `kind` None: a marker of the old
    form, which says nothing more."""

    job: str
    run_id: str
    name: str  # the marker's object name
    kind: str | None = None  # WAITING (scheduled or starting), RUNNING, QUEUED or ENDING (effects owed)
    attempt: int = 0
    zone: str | None = None
    vm: str | None = None
    deadline: datetime | None = None  # of the running attempt's VM; of a queued run's wait
    since: datetime | None = None  # when the run began waiting for a VM, was queued, or ended


def live_entry_name(record: RunRecord, since: datetime | None = None) -> str | None:
    """The marker name for `record` (None once it has ended and owes nothing); a waiting run's
    says `since`, by default the record's last change."""
    attempt = record.current_attempt
    if record.terminal:
        if not record.owed:
            return None
        fields = [ENDING, _NONE, _NONE, _NONE, _NONE, _epoch(record.updated_at)]
    elif record.state == RunState.QUEUED:
        # Its deadline (engine/queue.py) rides in the name, so a queue pass expires runs without reading them.
        fields = [QUEUED, _NONE, _NONE, _NONE, _epoch(queue_deadline(record)),
                  _epoch(record.history[-1].at if record.history else record.updated_at)]
    elif record.state == RunState.RUNNING and attempt is not None:
        fields = [RUNNING, str(attempt.number), attempt.zone or _NONE, attempt.vm_name, _epoch(record.deadline), _NONE]
    else:
        fields = [WAITING, _NONE, _NONE, _NONE, _NONE, _epoch(since or _began_waiting(record))]
    return f"{LIVE}{record.job}/{record.run_id}/{_SEP.join(fields)}"


def queue_deadline(record: RunRecord) -> datetime:
    """Until when a queued run may still start: its starting_deadline after its tick (or its
    request), or, for a retry, after it was queued."""
    deadline = timedelta(seconds=int((record.spec or {}).get("starting_deadline") or 0))
    if record.had_vm:
        queued_at = next((c.at for c in reversed(record.history) if c.state == RunState.QUEUED), record.updated_at)
        return queued_at + deadline
    return (record.tick or record.created_at) + deadline


def _began_waiting(record: RunRecord) -> datetime:
    """When the run's current wait for a VM began. Not `updated_at`: a delivery claiming the attempt
    (or Begin) changes that while the run keeps waiting, and the next rename must find the name."""
    began = record.updated_at
    for change in reversed(record.history):
        if change.state not in (RunState.SCHEDULED, RunState.STARTING):
            break
        began = change.at
    return began


def parse_live_name(name: str) -> LiveEntry | None:
    parts = name[len(LIVE):].split("/") if name.startswith(LIVE) else []
    if len(parts) == 2 and all(parts):
        return LiveEntry(parts[0], parts[1], name)
    if len(parts) != 3 or not parts[0] or not parts[1]:
        return None
    try:
        kind, attempt, zone, vm, deadline, since = parts[2].split(_SEP)
        if kind not in KINDS:
            raise ValueError(kind)
        return LiveEntry(parts[0], parts[1], name, kind=kind, attempt=0 if attempt == _NONE else int(attempt),
                         zone=None if zone == _NONE else zone, vm=None if vm == _NONE else vm,
                         deadline=_from_epoch(deadline), since=_from_epoch(since))
    except ValueError:
        return LiveEntry(parts[0], parts[1], name)  # unreadable: the record says what it is


def _same_but_time(a: str, b: str) -> bool:
    return a.rsplit(_SEP, 1)[0] == b.rsplit(_SEP, 1)[0]


def _epoch(at: datetime | None) -> str:
    return _NONE if at is None else str(int(at.timestamp()))


def _from_epoch(text: str) -> datetime | None:
    return None if text == _NONE else datetime.fromtimestamp(int(text), UTC)


def pruned_marker(job: str, *, manual: bool = False) -> str:
    return f"{PRUNED}{job}{_SEP}manual" if manual else f"{PRUNED}{job}"


class RunStore:
    def __init__(self, blobs: Blobs):
        self.blobs = blobs

    def create(self, record: RunRecord) -> bool:
        """Write a new record; False when one already exists (a duplicate delivery)."""
        try:
            self.blobs.write(layout.run_record(record.job, record.run_id), record.to_json(),
                             if_generation_match=0, content_type="application/json")
        except PreconditionFailed:
            # The delivery that created it may have died before writing the live marker; without
            # the marker the sweep never sees the run, so a redelivery writes it again.
            existing = self.read(record.job, record.run_id)
            if existing is not None:
                self._mark(None, existing)
            return False
        self._mark(None, record)
        return True

    def _mark(self, before: RunRecord | None, after: RunRecord) -> None:
        """Rename the run's live marker from what `before` was to what `after` is. A waiting run
        that stays waiting keeps its name (when it began waiting): a sweep that finds that old
        reads the record, whose `updated_at` says whether a delivery is still at work."""
        old = live_entry_name(before) if before is not None else None
        new = live_entry_name(after)
        if old is not None and new is not None and _same_but_time(old, new):
            return
        if new is not None and new != old:
            self.blobs.write(new, b"", content_type="text/plain")
        if old is not None and old != new:
            self.blobs.delete(old)

    def remove(self, record: RunRecord) -> None:
        """Take back a record this handler has just created, and its marker (a run that must not
        be, found right after its create-only write: engine/start_job.py)."""
        name = live_entry_name(record)
        if name is not None:
            self.blobs.delete(name)
        self.blobs.delete(layout.run_record(record.job, record.run_id))

    def fix_markers(self, record: RunRecord, markers: list[str]) -> None:
        """Leave exactly the marker `record` calls for (none once it has ended), whatever `markers`
        a crash or a race left behind."""
        want = live_entry_name(record)
        if want is not None:
            # A waiting run's marker that differs only in since-when is as good as a new one.
            want = next((name for name in markers if _same_but_time(name, want)), want)
            if want not in markers:
                self.blobs.write(want, b"", content_type="text/plain")
        for name in markers:
            if name != want:
                self.blobs.delete(name)

    def read(self, job: str, run_id: str) -> RunRecord | None:
        blob = self.blobs.read(layout.run_record(job, run_id))
        return RunRecord.from_json(blob.data) if blob else None

    def update(self, job: str, run_id: str,
               change: Callable[[RunRecord], RunRecord | None]) -> tuple[RunRecord | None, bool]:
        """Apply `change` until it sticks. Returns (record as stored, whether this call changed it).

        `change` returns None to leave the record as it is; it may be called several times, so it
        must not have side effects.
        """
        name = layout.run_record(job, run_id)
        for _ in range(MAX_CONFLICTS):
            blob = self.blobs.read(name)
            if blob is None:
                return None, False
            current = RunRecord.from_json(blob.data)
            updated = change(current)
            if updated is None:
                return current, False
            try:
                self.blobs.write(name, updated.to_json(), if_generation_match=blob.generation,
                                 content_type="application/json")
            except PreconditionFailed:
                continue
            try:
                self._mark(current, updated)
            except Transient as exc:
                # The record is written, so the change happened: raising now would lose what follows
                # it for good (a retry finds nothing to change), such as the end of a run. A marker
                # left behind or missing is the sweep's to fix (fix_markers): one always remains.
                log.warning("run %s/%s is %s; its live marker was not updated (%s): the sweep fixes it",
                            job, run_id, updated.state, exc)
            return updated, True
        raise RecordConflict(f"run {job}/{run_id} kept changing; giving up after {MAX_CONFLICTS} tries")

    def live_index(self) -> list[LiveEntry]:
        """Every live marker, in one listing."""
        return [entry for entry in map(parse_live_name, self.blobs.list(LIVE)) if entry is not None]

    def live_runs(self) -> list[tuple[str, str]]:
        """(job, run_id) of every run not yet in a terminal state."""
        return list(dict.fromkeys((entry.job, entry.run_id) for entry in self.live_index() if entry.kind != ENDING))

    def run_ids(self, job: str) -> list[str]:
        """Every run id of `job` that has a record, oldest first."""
        ids = []
        for name in self.blobs.list(layout.job_prefix(job)):
            parsed = layout.parse_record_name(name)
            if parsed:
                ids.append(parsed[1])
        return sorted(ids, key=run_sort_key)

    def records(self, job: str) -> list[RunRecord]:
        return [r for r in (self.read(job, run_id) for run_id in self.run_ids(job)) if r is not None]

    def jobs(self) -> list[str]:
        """Every job with at least one object under runs/."""
        seen: dict[str, None] = {}
        for name in self.blobs.list(layout.RUNS):
            parts = name.split("/")
            if len(parts) > 2:
                seen.setdefault(parts[1], None)
        return list(seen)

    def prune(self, job: str, keep: int) -> list[str]:
        """Delete everything of `job`'s oldest ended ticks beyond the newest `keep` runs.

        Whole ticks only (every matrix entry and repeat of a tick goes, or none), and at least
        `keep` runs stay. Runs are counted in four kinds apart, each kept up to `keep`: scheduled
        or manual (a manual run's id starts with `m`), and did work (had a VM) or never had one
        (skipped, refused by a limit). Anyone who may publish a start can ask for manual runs, so
        a flood of them, skipped or run, prunes only other manual runs, never a scheduled tick's
        record, logs, results or checkpoint; and skipped runs never evict runs that did work.
        Only pruning scheduled ticks raises the pruning mark (a skipped tick too: a redelivery of
        it must not come back as a new run), so no manual run can make a genuine tick look older
        than history; pruned manual runs raise a mark of their own, which only manual requests
        are held to. A run whose end still owes effects is never pruned.
        """
        by_run: dict[str, list[str]] = {}
        for name in self.blobs.list(layout.job_prefix(job)):
            parts = name.split("/")
            if len(parts) > 3:
                by_run.setdefault(parts[2], []).append(name)
        if len(by_run) <= keep:
            return []  # fewer runs than either count keeps: nothing to read
        ticks: dict[str, list[str]] = {}
        for run_id in sorted(by_run, key=run_sort_key, reverse=True):
            ticks.setdefault(tick_of(run_id), []).append(run_id)
        records: dict[str, RunRecord | None] = {}

        def record_of(run_id: str) -> RunRecord | None:
            if run_id not in records:
                records[run_id] = self.read(job, run_id)
            return records[run_id]

        def had_a_vm(run_id: str) -> bool:
            # Only a VM writes under attempt-N/ or checkpoint/; a record alone must be read.
            if any(len(name.split("/")) > 4 for name in by_run[run_id]):
                return True
            record = record_of(run_id)
            return record is not None and record.had_vm

        kept: dict[tuple[bool, bool], int] = {}  # (manual, did work) → runs kept
        doomed: list[str] = []
        marking: list[str] = []  # scheduled ticks: only they move the pruning mark
        for tick, runs in ticks.items():  # newest tick first
            kind = (tick.startswith("m"), any(had_a_vm(run_id) for run_id in runs))
            # A tick is kept whole while it is within history, in flight, or its end still owes effects.
            if kept.get(kind, 0) < keep or any((r := record_of(run_id)) is not None and (not r.terminal or r.owed)
                                               for run_id in runs):
                kept[kind] = kept.get(kind, 0) + len(runs)  # within history, or in flight: never part of it
                continue
            doomed.extend(runs)
            if not kind[0]:
                marking.extend(runs)
        if not doomed:
            return []
        # Remember how far history was cut before cutting it: a trigger for a pruned tick that
        # Pub/Sub redelivers later must not bring the run back (launch checks `pruned_through`).
        if marking:
            self._raise_pruned_mark(job, max(marking, key=run_sort_key))
        # Manual runs have a mark of their own: a late redelivery of a pruned manual run's message
        # must not start it again, and no flood of manual runs can make a scheduled tick look pruned.
        manual = [run_id for run_id in doomed if run_id.startswith("m")]
        if manual:
            self._raise_pruned_mark(job, max(manual, key=run_sort_key), manual=True)
        for run_id in sorted(doomed, key=run_sort_key):
            for name in by_run[run_id]:
                self.blobs.delete(name)
        return sorted(doomed, key=run_sort_key)

    def pruned_through(self, job: str, *, manual: bool = False) -> str | None:
        """The newest run id of `job` that history pruning deleted (`manual`: of its manual runs);
        None when nothing was pruned."""
        blob = self.blobs.read(pruned_marker(job, manual=manual))
        return blob.data.decode() if blob else None

    def _raise_pruned_mark(self, job: str, run_id: str, *, manual: bool = False) -> None:
        name = pruned_marker(job, manual=manual)
        for _ in range(MAX_CONFLICTS):
            blob = self.blobs.read(name)
            if blob is not None and run_sort_key(blob.data.decode()) >= run_sort_key(run_id):
                return
            try:
                self.blobs.write(name, run_id.encode(), content_type="text/plain",
                                 if_generation_match=blob.generation if blob else 0)
                return
            except PreconditionFailed:
                continue
        raise RecordConflict(f"the pruning mark of {job} kept changing; giving up after {MAX_CONFLICTS} tries")


def run_sort_key(run_id: str) -> str:
    """Run ids sort by time whether scheduled (20261122-1000) or manual (m20261122-101530-ab12)."""
    return run_id.removeprefix("m")
