"""Run records in the bucket, changed only through generation preconditions.

Every change is read → compute → write-if-generation-unchanged, retried on conflict. That makes
concurrent deliveries and callbacks safe without a database: the first writer wins and the
others re-read and see what it did. A small `live/` index keeps the sweep from listing every
object of every run.
"""

from __future__ import annotations

from collections.abc import Callable

from spotcron.core import layout
from spotcron.core.errors import PreconditionFailed, SpotcronError
from spotcron.core.runs import RunRecord
from spotcron.engine.ports import Blobs

LIVE = "live/"
PRUNED = "pruned/"
MAX_CONFLICTS = 20


class RecordConflict(SpotcronError):
    """A record kept changing under us; the caller should let the delivery be retried."""


def live_marker(job: str, run_id: str) -> str:
    return f"{LIVE}{job}/{run_id}"


def pruned_marker(job: str) -> str:
    return f"{PRUNED}{job}"


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
            if existing is not None and not existing.terminal:
                self.blobs.write(live_marker(record.job, record.run_id), b"", content_type="text/plain")
            return False
        if not record.terminal:
            self.blobs.write(live_marker(record.job, record.run_id), b"", content_type="text/plain")
        return True

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
            if updated.terminal and not current.terminal:
                self.blobs.delete(live_marker(job, run_id))
            return updated, True
        raise RecordConflict(f"run {job}/{run_id} kept changing; giving up after {MAX_CONFLICTS} tries")

    def live_runs(self) -> list[tuple[str, str]]:
        """(job, run_id) of every run not yet in a terminal state."""
        runs = []
        for name in self.blobs.list(LIVE):
            parts = name[len(LIVE):].split("/")
            if len(parts) == 2:
                runs.append((parts[0], parts[1]))
        return runs

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
        """Delete everything of the oldest terminal runs of `job` beyond the newest `keep`."""
        names = self.blobs.list(layout.job_prefix(job))
        by_run: dict[str, list[str]] = {}
        for name in names:
            parts = name.split("/")
            if len(parts) > 3:
                by_run.setdefault(parts[2], []).append(name)
        run_ids = sorted(by_run, key=run_sort_key)
        pruned = []
        for run_id in run_ids[: max(0, len(run_ids) - keep)]:
            record = self.read(job, run_id)
            if record is not None and not record.terminal:
                continue  # never prune a run still in flight
            pruned.append(run_id)
        if not pruned:
            return []
        # Remember how far history was cut before cutting it: a trigger for a pruned tick that
        # Pub/Sub redelivers later must not bring the run back (launch checks `pruned_through`).
        self._raise_pruned_mark(job, pruned[-1])
        for run_id in pruned:
            for name in by_run[run_id]:
                self.blobs.delete(name)
        return pruned

    def pruned_through(self, job: str) -> str | None:
        """The newest run id of `job` that history pruning deleted; None when nothing was pruned."""
        blob = self.blobs.read(pruned_marker(job))
        return blob.data.decode() if blob else None

    def _raise_pruned_mark(self, job: str, run_id: str) -> None:
        for _ in range(MAX_CONFLICTS):
            blob = self.blobs.read(pruned_marker(job))
            if blob is not None and run_sort_key(blob.data.decode()) >= run_sort_key(run_id):
                return
            try:
                self.blobs.write(pruned_marker(job), run_id.encode(), content_type="text/plain",
                                 if_generation_match=blob.generation if blob else 0)
                return
            except PreconditionFailed:
                continue
        raise RecordConflict(f"the pruning mark of {job} kept changing; giving up after {MAX_CONFLICTS} tries")


def run_sort_key(run_id: str) -> str:
    """Run ids sort by time whether scheduled (20261122-1000) or manual (m20261122-101530-ab12)."""
    return run_id.removeprefix("m")
