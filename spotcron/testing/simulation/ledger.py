"""The simulator's own books, kept beside the bucket, and the invariants checked against them.

Runs are counted from the events the engine publishes (`run.scheduled`, `run.finished`, ...)
plus a final scan of the bucket, never from the bucket alone: history pruning deletes old runs.
A run's record and results are checked the moment `run.finished` is published, which the engine
does after the terminal state is stored and before it prunes history, so pruning cannot hide a
missing result. (A few jobs keep only 5-20 runs on purpose, to prune while VMs keep failing.)
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Iterable, Mapping
from contextlib import AbstractContextManager
from typing import Any

from spotcron.core import layout
from spotcron.core.jobdata import JobDataProblem, load_job_json
from spotcron.core.runs import RunRecord, RunState
from spotcron.engine.ports import Blobs, InstanceRequest
from spotcron.engine.store import RunStore, run_sort_key

EXPECTED_ERRORS = frozenset({"Transient", "AdmissionBusy"})  # what injected faults and starts near a limit raise (redelivered)
MAX_DETAILS = 20


class Ledger:
    """The books. It reads the bucket through `blobs` only inside `quiet()`, so that the simulator's
    own reads never meet an injected fault (nor take a draw from the seeded stream)."""

    def __init__(self, blobs: Blobs, quiet: Callable[[], AbstractContextManager[object]]):
        self.blobs = blobs
        self.store = RunStore(blobs)
        self._quiet = quiet
        self.seen: dict[tuple[str, str], str] = {}  # run -> latest state seen in an event
        self.finished: dict[tuple[str, str], str] = {}
        self.expected: set[tuple[str, str]] = set()
        self.manual: list[tuple[str, str, int]] = []  # (job, nonce, runs it should start)
        self.manifests: dict[tuple[str, str, int], int] = {}  # attempt -> exit code the runner wrote
        self.counts: Counter[str] = Counter()
        self.errors: Counter[str] = Counter()
        self.problems: Counter[str] = Counter()
        self.details: list[str] = []
        self.paused: dict[str, list[tuple[object, object]]] = {}  # job → (from, until) it was paused

    # --- what happened --------------------------------------------------------------------------
    def on_event(self, data: Mapping[str, Any]) -> None:
        key = (str(data.get("job")), str(data.get("run_id")))
        self.seen[key] = str(data.get("state"))
        if data.get("type") == "run.finished":
            self._finished(key, str(data.get("state")), data.get("event_id"))

    def expect(self, job: str, run_id: str) -> None:
        self.expected.add((job, run_id))

    def expect_manual(self, job: str, nonce: str, runs: int) -> None:
        self.manual.append((job, nonce, runs))

    def manifest_written(self, key: tuple[str, str, int], exit_code: int) -> None:
        self.manifests[key] = exit_code

    def callback_answered(self, status: int, *, duplicate: bool = False) -> None:
        self.counts[f"callback {'duplicate ' if duplicate else ''}{status}"] += 1

    def forged_answered(self, how: str, status: int, victim: tuple[str, str, int]) -> None:
        self.counts[f"callback forged {status}"] += 1
        if 200 <= status < 300:
            job, run_id, attempt = victim
            self.problem("forged_accepted", f"{job}/{run_id} attempt {attempt}: a forged callback ({how}) "
                                            f"was answered {status}")

    def function_error(self, error: BaseException) -> None:
        self.errors[type(error).__name__] += 1
        if type(error).__name__ not in EXPECTED_ERRORS:
            self.problem("unexpected_errors", f"a function raised {type(error).__name__}: {error}")

    def vm_stopped(self) -> None:
        self.counts["vms stopped"] += 1

    def problem(self, kind: str, detail: str) -> None:
        self.problems[kind] += 1
        if len(self.details) < MAX_DETAILS:
            self.details.append(f"{kind}: {detail}")

    # --- checks -----------------------------------------------------------------------------------
    def _finished(self, key: tuple[str, str], state: str, event_id: object) -> None:
        if key in self.finished:
            # An end whose "done" was lost to a fault is published again, under the same id for
            # consumers to deduplicate on; a second end of another kind, or without the id, is wrong.
            if state == self.finished[key] and event_id == f"{key[0]}/{key[1]}/finished":
                self.counts["run.finished published again (same event id)"] += 1
                return
            self.problem("double_finished", f"{key[0]}/{key[1]} ended as {self.finished[key]}, then as {state}")
        self.finished[key] = state
        with self._quiet():
            record = self.store.read(*key)
        if record is None or record.state != state:
            self.problem("record_mismatch", f"{key[0]}/{key[1]}: event says {state}, record says "
                                            f"{record.state if record else 'nothing'}")
            return
        if state == RunState.SUCCEEDED:
            why = self._results_problem(record)
            if why:
                self.problem("missing_results", f"{key[0]}/{key[1]}: {why}")

    def _results_problem(self, record: RunRecord) -> str | None:
        job, run_id = record.job, record.run_id
        attempt = next((a.number for a in record.attempts
                        if layout.attempt_prefix(job, run_id, a.number) == record.results_prefix), None)
        if attempt is None:
            return f"results_prefix {record.results_prefix!r} names no attempt"
        blobs = self.blobs
        with self._quiet():
            manifest = blobs.read(layout.manifest(job, run_id, attempt))
            results = blobs.list(layout.results_prefix(job, run_id, attempt))
        if manifest is None:
            return f"no manifest for attempt {attempt}"
        try:
            stored = load_job_json(manifest.data, "manifest.json", max_bytes=1 << 20)
        except JobDataProblem:
            stored = None  # a hostile job rewrote it after the runner: what the runner wrote decides
        stored_code = stored.get("exit_code", 0) if isinstance(stored, dict) else 0
        if stored_code != 0 or self.manifests.get((job, run_id, attempt)) != 0:
            return f"attempt {attempt} did not exit 0"
        if len(results) < 2:
            return f"attempt {attempt} has {len(results)} of 2 result files"
        return None

    def close(self, created: Iterable[InstanceRequest]) -> dict[str, int]:
        """The end-of-run scan, given every insert Compute Engine accepted; returns counts by terminal state."""
        store = self.store
        with self._quiet():
            records = {(r.job, r.run_id): r for job in store.jobs() for r in store.records(job)}
            live = store.live_runs()
        for key, record in records.items():
            self.seen.setdefault(key, record.state)
            if not record.terminal:
                self.problem("non_terminal", f"{key[0]}/{key[1]} is still {record.state}")
        for key in self.seen:
            if key not in records and key not in self.finished:
                self.problem("non_terminal", f"{key[0]}/{key[1]} vanished without ending")
        for job, run_id in live:
            if (job, run_id) in records and records[(job, run_id)].terminal:
                self.counts["stale live markers"] += 1
        # A tick no start reached (the adversary dropped its delivery, or the day ended first) is
        # recorded as missed by the sweep: a record of a tick the schedule names, never a run.
        self.missed = {key for key, record in records.items() if record.state == "missed"}
        self.counts["missed records"] = len(self.missed)
        # Under `concurrency: forbid` or `replace` a tick ends the manual runs of its job it finds
        # live (engine/concurrency.py); nothing else here ends a run `cancelled`.
        self.counts["manual runs ended for a scheduled run"] = sum(
            1 for (_, run_id), state in self.finished.items() if state == "cancelled" and run_id.startswith("m"))
        self._check_runs_match_ticks()
        self.count_vms(created)
        return dict(Counter(self.finished.values()))

    def _check_runs_match_ticks(self) -> None:
        scheduled = {key for key in self.seen if not key[1].startswith("m")} - getattr(self, "missed", set())
        for job, run_id in sorted(self.expected - scheduled - getattr(self, "missed", set())):
            if self._paused_near(job, run_id):
                self.counts["ticks of a job paused before their delivery, dropped"] += 1  # by design
                continue
            floor = self.store.pruned_through(job)
            if floor is not None and run_sort_key(run_id) <= run_sort_key(floor):
                self.counts["ticks older than the kept history, dropped"] += 1  # by design
                continue
            self.problem("missing_runs", f"{job}/{run_id}: the tick was delivered but no run exists")
        for job, run_id in sorted(scheduled - self.expected):
            self.problem("unexpected_runs", f"{job}/{run_id}: no tick of the job's schedule names this run")
        manual = Counter((job, run_id.split("-")[2]) for job, run_id in self.seen if run_id.startswith("m"))
        for job, nonce, runs in self.manual:
            got = manual.pop((job, nonce), 0)
            if got != runs:
                kind = "missing_runs" if got < runs else "unexpected_runs"
                self.problem(kind, f"{job}: 'run now' {nonce} started {got} runs, not {runs}")
        for (job, nonce), got in manual.items():
            self.problem("unexpected_runs", f"{job}: {got} manual runs with nonce {nonce} nobody asked for")

    def _paused_near(self, job: str, run_id: str) -> bool:
        """Whether `job` was paused at some moment after this tick fired (within a day of it): a tick
        whose message is handled once its job is paused starts nothing, as it should."""
        from datetime import UTC, datetime, timedelta

        try:
            tick = datetime.strptime(run_id[:13], "%Y%m%d-%H%M").replace(tzinfo=UTC)
        except ValueError:
            return False
        return any(start <= tick + timedelta(days=1) and (end is None or end >= tick)
                   for start, end in self.paused.get(job, []))

    def check_day_hours(self, limit: float, attempts: Iterable[tuple[str, object, float | None]],
                        days: Iterable[str]) -> None:
        """Each UTC day's accounting within `limit`; each VM's settled hours, summed over the days,
        at most what it ran; a settlement on every day an ended attempt's VM was admitted.
        `attempts`: (VM name, when its run ended or None while it owes effects, seconds it ran)."""
        from spotcron.engine.day_hours import read_day

        with self._quiet():
            usages = {day: read_day(self.blobs, day) for day in days}
        for day, usage in usages.items():
            if usage.hours > limit + 1e-6:
                self.problem("days_over_limit", f"{day}: {usage.hours:.3f} VM-hours counted, the limit is {limit:g}")
        for vm, ended, seconds in attempts:
            settled = [usage.used[vm] for usage in usages.values() if vm in usage.used]
            if seconds is not None and sum(settled) > seconds / 3600 + 1e-4:
                self.problem("hours_counted_twice", f"{vm}: settled {sum(settled):.4f} h, ran {seconds / 3600:.4f} h")
            if ended is not None and seconds is not None:
                unsettled = [day for day, usage in usages.items() if vm in usage.admitted and vm not in usage.used]
                if unsettled:
                    self.problem("unsettled_hours", f"{vm}: admitted but never settled on {', '.join(unsettled)}")
        self.counts["days counted"] = len(usages)
        self.counts["most VM-hours counted in a day"] = round(max((u.hours for u in usages.values()), default=0.0))

    def vm_created(self, key: tuple[str, str, int], *, alive: int, before: int) -> None:
        """A VM of attempt `key` was created; `alive` of the attempt's VMs (it too) exist right now,
        `before` were created for it earlier. Two at once is a problem; a VM made again after the
        first was gone (a stalled insert) must be deleted at once, which the loop watches."""
        self.counts["max vms alive per attempt"] = max(self.counts["max vms alive per attempt"], alive)
        if before:
            self.counts["vms made again for an attempt"] += 1
        if alive > 1:
            job, run_id, attempt = key
            self.problem("duplicate_vms", f"{job}/{run_id} attempt {attempt} has {alive} VMs at once")

    def count_vms(self, created: Iterable[InstanceRequest]) -> None:
        per_attempt = Counter((r.labels["job"], r.labels["run"], r.labels["attempt"]) for r in created)
        self.counts["vms created"] = sum(per_attempt.values())
        self.counts["max vms created per attempt"] = max(per_attempt.values(), default=0)
