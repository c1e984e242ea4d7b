"""Run records in the bucket, changed only through generation preconditions.

Every change is read → compute → write-if-generation-unchanged, retried on conflict. That makes
concurrent deliveries and callbacks safe without a database: the first writer wins and the
others re-read and see what it did.

The `live/` index of runs not yet ended is kept in step with every write (engine/live_index.py
spells its names).
"""

from __future__ import annotations

import contextlib
import json
import logging
from collections.abc import Callable

from spotcron.core import layout
from spotcron.core.errors import ObjectKept, PreconditionFailed, SpotcronError, Transient
from spotcron.core.layout import LIVE, pruned_marker
from spotcron.core.runs import RunRecord, tick_of
from spotcron.engine.live_index import OWED, LiveEntry, live_entry_name, parse_live_name, same_but_time
from spotcron.engine.ports import Blobs
from spotcron.engine.pruned_mark import PrunedMark, parse, run_sort_key

log = logging.getLogger("spotcron.engine")

MAX_CONFLICTS = 20


# History pruning is bounded per call: a job's run folders are listed in pages of PRUNE_PAGE names
# (at most PRUNE_PAGES of them), its objects in at most a page per run folder, and at most
# PRUNE_DELETES objects are deleted. A job that wrote more leaves
# its pruning owed (PruneIncomplete) for the next toucher, so no run end and no sweep pass waits on
# one job's backlog.
PRUNE_PAGE = 1000
PRUNE_PAGES = 50
PRUNE_DELETES = 1000


def kept_marker(job: str, run_id: str) -> str:
    """The note pruning leaves in a run it could not delete whole: an object of it is held or
    retained. Only the control plane writes here (a VM's token reaches attempt-N/ and checkpoint/
    alone), and the name sorts first in the run's folder, so the first listed page of it shows it."""
    return f"{layout.run_prefix(job, run_id)}.kept.json"


class PruneIncomplete(Transient):
    """History pruning did its share of the work for now; the rest is owed to a later pass."""


class TooManyFolders(SpotcronError):
    """A listing of run folders stopped at its bound (RunStore.folders)."""


class RecordConflict(SpotcronError):
    """A record kept changing under us; the caller should let the delivery be retried."""


class RunStore:
    def __init__(self, blobs: Blobs):
        self.blobs = blobs

    def create(self, record: RunRecord) -> bool:
        """Write a new record; False when one already exists (a duplicate delivery).

        The live marker is written before the record, never after: a delivery that dies between the
        two leaves a marker with no record (the sweep deletes it once no handler can still be at it,
        engine/sweep.py), never a record the sweep cannot find. A record without its marker would
        wait forever when the redelivery that should repair it is refused (its job paused, removed
        or deployed again before it comes back)."""
        marker = live_entry_name(record)
        if marker is not None:
            self.blobs.write(marker, b"", content_type="text/plain")
        try:
            self.blobs.write(layout.run_record(record.job, record.run_id), record.to_json(),
                             if_generation_match=0, content_type="application/json")
        except PreconditionFailed:
            # A duplicate: the marker just written may not be the one the stored record calls for.
            existing = self.read(record.job, record.run_id)
            wanted = live_entry_name(existing) if existing is not None else None
            if existing is not None:
                self._mark(None, existing)
            if marker is not None and marker != wanted:
                self.blobs.delete(marker)
            return False
        return True

    def _drop_early(self, early: set[str], stored: RunRecord) -> None:
        """Delete the markers written ahead of a record write that `stored` (what won) does not call for."""
        want = live_entry_name(stored)
        for marker in early - {want}:
            self.blobs.delete(marker)

    def _mark(self, before: RunRecord | None, after: RunRecord, *, written: set[str] = frozenset()) -> None:
        """Rename the run's live marker from what `before` was to what `after` is (`written`: the
        new name is written already). A waiting run that stays waiting keeps its name (when it
        began waiting): a sweep that finds that old reads the record, whose `updated_at` says
        whether a delivery is still at work."""
        old = live_entry_name(before) if before is not None else None
        new = live_entry_name(after)
        if old is not None and new is not None and same_but_time(old, new):
            return
        if new is not None and new != old and new not in written:
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
            want = next((name for name in markers if same_but_time(name, want)), want)
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
        early: set[str] = set()  # markers written ahead of the record
        for _ in range(MAX_CONFLICTS):
            blob = self.blobs.read(name)
            if blob is None:
                return None, False
            current = RunRecord.from_json(blob.data)
            updated = change(current)
            if updated is None:
                with contextlib.suppress(Transient):  # a stray marker is the sweep's to delete
                    self._drop_early(early, current)
                return current, False
            ending = live_entry_name(updated) if updated.terminal and not current.terminal else None
            if ending is not None and ending not in early:
                # The end's `owed` marker goes ahead of the record: a crash right after the record
                # leaves two markers, which make the sweep read the record and finish the end. A
                # stale `running` marker alone, its VM alive inside its deadline, would not (a run
                # ended by another run still has its VM, engine/concurrency.py).
                self.blobs.write(ending, b"", content_type="text/plain")
                early.add(ending)
            try:
                self.blobs.write(name, updated.to_json(), if_generation_match=blob.generation,
                                 content_type="application/json")
            except PreconditionFailed:
                continue
            try:
                self._drop_early(early, updated)
                self._mark(current, updated, written=early)
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
        return list(dict.fromkeys((entry.job, entry.run_id) for entry in self.live_index() if entry.kind != OWED))

    def run_ids(self, job: str) -> list[str]:
        """Every run id of `job`, oldest first: its run folders, never the objects inside them (a
        run with a hundred thousand result files costs what a run with one does). A run's record
        is the first object written in its folder and the last one pruning deletes."""
        prefix = layout.job_prefix(job)
        return sorted((folder[len(prefix):-1] for folder in self.folders(prefix)), key=run_sort_key)

    def records(self, job: str) -> list[RunRecord]:
        return [r for r in (self.read(job, run_id) for run_id in self.run_ids(job)) if r is not None]

    def jobs(self) -> list[str]:
        """Every job with at least one object in a run folder under runs/."""
        return [folder[len(layout.RUNS):-1] for folder in self.folders(layout.RUNS)]

    def folders(self, prefix: str) -> list[str]:
        """The folders directly under `prefix`, sorted, from delimiter listings of PRUNE_PAGE at
        most PRUNE_PAGES times; TooManyFolders past that (pruning holds a job's runs well below)."""
        folders: list[str] = []
        start = ""
        for _ in range(PRUNE_PAGES):
            page = self.blobs.list_folders(prefix, PRUNE_PAGE, start=start)
            folders.extend(page)
            if len(page) < PRUNE_PAGE:
                return folders
            start = page[-1][:-1] + "0"  # '0' follows '/': just past every object of the last folder
        raise TooManyFolders(f"more than {PRUNE_PAGES * PRUNE_PAGE} folders under gs://{self.blobs.bucket}/{prefix}, "
                             f"more than one listing reads ({PRUNE_PAGES} pages of {PRUNE_PAGE} names)")

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
        by_run = self._runs_listed(job, keep)
        # A run with an object Cloud Storage will not delete (a hold, a retention policy) was tried
        # once and marked: it is left to whoever releases the hold, and it neither stops the
        # pruning of later runs nor counts as one of the `keep` runs.
        by_run = {run_id: names for run_id, names in by_run.items()
                  if kept_marker(job, run_id) not in names}
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
            self._raise_pruned_mark(job, marking)
        # Manual runs have a mark of their own: a late redelivery of a pruned manual run's message
        # must not start it again, and no flood of manual runs can make a scheduled tick look pruned.
        manual = [run_id for run_id in doomed if run_id.startswith("m")]
        if manual:
            self._raise_pruned_mark(job, manual, manual=True)
        budget = PRUNE_DELETES
        for run_id in sorted(doomed, key=run_sort_key):
            budget = self._delete_run(job, run_id, budget)
        return sorted(doomed, key=run_sort_key)

    def _runs_listed(self, job: str, keep: int) -> dict[str, list[str]]:
        """run id → the names of its objects seen; {} when the job has `keep` runs or fewer.

        The runs are the job's run folders (run_ids: a delimiter listing, one name per run however
        many objects it holds, PruneIncomplete past its PRUNE_PAGES pages). Only a job with more
        runs than `keep` is read further: pages of its objects, where a page that ends inside one
        run skips the rest of that run's objects (`startOffset` just past its folder). A run's
        first objects say what pruning asks of it (the kept marker sorts first, `attempt-N/`
        before `run.json`), and every full page passes at least one run, so the walk ends within
        a page per run: a thousand runs of a thousand result files each cost a thousand pages,
        never a refusal to prune."""
        try:
            run_ids = self.run_ids(job)
        except TooManyFolders as exc:
            # history_limit keeps at most 10000 runs of each of four kinds: only runs written past
            # pruning (a bucket copied in, a job renamed back) get here, and they are not read.
            raise PruneIncomplete(f"job {job}: {exc}, so history pruning cannot tell its newest runs and deletes "
                                  f"none; delete its oldest run folders by hand (gcloud storage rm --recursive "
                                  f"gs://{self.blobs.bucket}/{layout.job_prefix(job)}RUN_ID/)") from None
        if len(run_ids) <= keep:
            return {}  # kept markers only lower the count: nothing to prune, nothing more to list
        prefix = layout.job_prefix(job)
        by_run: dict[str, list[str]] = {run_id: [] for run_id in run_ids}
        start = ""
        # One page per run folder listed, and PRUNE_PAGES more for runs that began meanwhile and
        # the few objects directly under the job's folder.
        for _ in range(len(run_ids) + PRUNE_PAGES):
            names = self.blobs.list_some(prefix, PRUNE_PAGE, start=start)
            for name in names:
                parts = name.split("/")
                if len(parts) > 3:
                    by_run.setdefault(parts[2], []).append(name)
            if len(names) < PRUNE_PAGE:
                return by_run
            last = names[-1].split("/")
            # '0' follows '/': past every object of the last run seen, before anything after it.
            start = f"{prefix}{last[2]}0" if len(last) > 3 else names[-1] + "\x00"
        raise PruneIncomplete(f"job {job}: the listing of its objects did not end within {len(run_ids) + PRUNE_PAGES} "
                              f"pages for its {len(run_ids)} run folders (runs are being added faster than they are "
                              f"listed); history is pruned on a later pass")

    def _delete_run(self, job: str, run_id: str, budget: int) -> int:
        """Delete the objects of one pruned run, at most `budget` of them; the budget left.
        PruneIncomplete when the budget ran out first: the rest goes on a later pass.

        An object Cloud Storage refuses to delete (ObjectKept: a hold or a retention policy) is
        stepped over: the rest of the run goes, its record stays, and the run is marked
        (kept_marker) at the first refusal, so no later pass spends deletes on it again. What it
        leaves unheld the bucket's lifecycle rule deletes by age."""
        prefix, record = layout.run_prefix(job, run_id), layout.run_record(job, run_id)
        start, refused = "", False
        while True:
            if budget <= 0:
                raise PruneIncomplete(f"job {job}: pruning {run_id} goes on later (at most {PRUNE_DELETES} deletes "
                                      f"each time)")
            names = self.blobs.list_some(prefix, min(budget, PRUNE_PAGE), start=start)
            if not names:
                return budget
            start = names[-1] + "\x00"  # past what this page held: a refused object is listed once
            # The record last: while any object of the run is left its record says what the run was.
            for name in sorted(names, key=lambda n: n == record):
                if name == record and refused:
                    continue
                budget -= 1
                try:
                    self.blobs.delete(name)
                except ObjectKept as exc:
                    if not refused:
                        refused = True
                        self._mark_kept(job, run_id, name, exc)

    def _mark_kept(self, job: str, run_id: str, name: str, exc: ObjectKept) -> None:
        folder = f"gs://{self.blobs.bucket}/{layout.run_prefix(job, run_id)}"
        note = {"object": name, "reason": str(exc)[:500],
                "fix": f"release the hold (gcloud storage objects update gs://{self.blobs.bucket}/{name} "
                       f"--no-temporary-hold --no-event-based-hold), then delete the run "
                       f"(gcloud storage rm --recursive {folder}) or leave it to the bucket's lifecycle rule"}
        try:
            self.blobs.write(kept_marker(job, run_id), json.dumps(note).encode(), content_type="application/json",
                             if_generation_match=0)
        except PreconditionFailed:
            return  # marked already: said once
        log.warning("%s/%s: history pruning cannot delete %s (%s); the run's record and that object stay, "
                    "and later runs are pruned as usual", job, run_id, name, str(exc)[:300],
                    extra={"fields": {"event": "prune_kept", "job": job, "run_id": run_id, "object": name}})

    def pruned_through(self, job: str, *, manual: bool = False) -> str | None:
        """The newest run id of `job` that history pruning deleted (`manual`: of its manual runs);
        None when nothing was pruned."""
        return self.pruned_mark(job, manual=manual).through

    def pruned_mark(self, job: str, *, manual: bool = False) -> PrunedMark:
        """Which runs of `job` history pruning deleted (engine/pruned_mark.py)."""
        blob = self.blobs.read(pruned_marker(job, manual=manual))
        return parse(blob.data if blob else None)

    def _raise_pruned_mark(self, job: str, run_ids: list[str], *, manual: bool = False) -> None:
        name = pruned_marker(job, manual=manual)
        for _ in range(MAX_CONFLICTS):
            blob = self.blobs.read(name)
            mark = parse(blob.data if blob else None)
            if mark.holds(run_ids):
                return
            try:
                self.blobs.write(name, mark.with_pruned(run_ids).encode(), content_type="text/plain",
                                 if_generation_match=blob.generation if blob else 0)
                return
            except PreconditionFailed:
                continue
        raise RecordConflict(f"the pruning mark of {job} kept changing; giving up after {MAX_CONFLICTS} tries")
