"""History pruning that only runs which did work drive, by whole ticks (a benchmark keeps at least
12 ticks by default).

A publisher may send manual-run messages for any deployed job. Under `concurrency: forbid` with a
live run each is skipped at once, with no VM: such records must never evict a run that had a VM
(its record, logs, results and checkpoint), nor raise the pruning mark over a genuine tick.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from spotcron.core import layout
from spotcron.core.runs import RunRecord, RunState, scheduled_run_id
from spotcron.engine.store import RunStore
from spotcron.testing.harness import make_spec
from spotcron.testing.memory import MemoryBlobs

T0 = datetime(2026, 11, 22, 12, 0, 5, tzinfo=UTC)


def genuine_runs(h, spec, count: int) -> list[str]:
    """`count` ticks of `spec` that ran on a VM and succeeded, four hours apart."""
    ids = []
    for _ in range(count):
        h.start(spec)
        [run] = [r for r in h.records(spec.name) if r.state == "running"]
        h.finish_ok(spec.name, run.run_id)
        ids.append(run.run_id)
        h.clock.advance(4 * 3600)
    return ids


def test_a_flood_of_skipped_manual_runs_prunes_no_genuine_run(h):
    """Manual messages under forbid end skipped; pruning by them would delete the genuine runs."""
    spec = make_spec(history_limit=4)
    kept = genuine_runs(h, spec, 3)
    h.start(spec)  # a fourth tick, still running (4 runs that had a VM: all within history_limit)
    for nonce in ("aa01", "aa02", "aa03", "aa04", "aa05"):
        h.run_now(spec, nonce=nonce)
        h.clock.advance(1)
    ids = {r.run_id for r in h.records("bot")}
    assert set(kept) <= ids, f"genuine runs pruned: {sorted(set(kept) - ids)}"
    for run_id in kept:
        assert h.blobs.peek(layout.logs("bot", run_id, 1)) is not None
    skipped = [r for r in h.records("bot") if r.state == "skipped"]
    assert len(skipped) <= 4  # skipped records are kept apart, up to history_limit of them


def test_skipped_runs_never_raise_the_pruning_mark_over_a_genuine_tick(h):
    """A held-back delivery of a genuine tick must still start after a flood of skipped runs."""
    spec = make_spec(history_limit=2, schedule="0 * * * *")
    genuine_runs(h, spec, 2)
    h.start(spec)  # live: manual messages are skipped
    for index in range(6):
        h.run_now(spec, nonce=f"bb{index:02d}")
        h.clock.advance(1)
    floor = h.deps.store.pruned_through("bot")
    assert floor is None or not floor.startswith("m"), floor


def record(job: str, run_id: str, state: str, *, vm: bool, at: datetime) -> RunRecord:
    from spotcron.core.runs import Attempt

    attempts = (Attempt(number=1, vm_name=f"sc-{job}-{run_id}-a1", machine_type="e2-small", zone="us-central1-a",
                        created_at=at if vm else None),)
    return RunRecord(job=job, run_id=run_id, state=RunState(state), created_at=at, updated_at=at,
                     attempts=attempts if vm else ())


def test_pruning_removes_whole_ticks_never_part_of_one():
    blobs = MemoryBlobs("b")
    store = RunStore(blobs)
    entries = ("a", "b", "c")
    ticks = [T0 + timedelta(hours=i) for i in range(6)]
    for tick in ticks:
        for entry in entries:
            run_id = scheduled_run_id(tick, entry)
            blobs.write(layout.run_record("bench", run_id), record("bench", run_id, "succeeded", vm=True, at=tick).to_json())
            blobs.write(layout.logs("bench", run_id, 1), b"log")
    store.prune("bench", 5)
    left = sorted({store_id.split("/")[2] for store_id in blobs.list("runs/bench/")})
    by_tick: dict[str, int] = {}
    for run_id in left:
        by_tick[run_id[:13]] = by_tick.get(run_id[:13], 0) + 1
    assert set(by_tick.values()) == {3}, by_tick  # whole ticks only
    assert len(left) >= 5  # at least history_limit runs kept


def test_a_matrix_job_keeps_at_least_twelve_ticks_by_default():
    nine = make_spec(matrix=[{"name": f"e{i}"} for i in range(9)])
    assert nine.history_limit >= 12 * 9
    assert make_spec().history_limit == 50  # a plain job keeps what it always kept
    assert make_spec(history_limit=20).history_limit == 20  # a limit written down is the limit


def test_manual_runs_that_ran_prune_only_manual_runs_and_never_move_the_mark(h):
    """Manual runs are anyone's who may publish a start: those that ran are kept up to history_limit
    among themselves, the scheduled ticks' history stays whole, and the pruning mark stays where only
    scheduled ticks put it (a held-back delivery of a genuine tick still starts)."""
    spec = make_spec(history_limit=2, concurrency="forbid")
    scheduled = genuine_runs(h, spec, 2)
    h.clock.set(h.clock.now().replace(minute=30))  # between two ticks: nothing live, each manual run gets a VM
    manual = []
    for index in range(5):
        h.run_now(spec, nonce=f"cc{index:02d}")
        [run] = [r for r in h.records("bot") if r.state == "running"]
        h.finish_ok("bot", run.run_id)
        manual.append(run.run_id)
        h.clock.advance(60)
    left = sorted(r.run_id for r in h.records("bot"))
    assert left == sorted([*scheduled, *manual[-2:]]), left
    assert all(h.blobs.peek(layout.results_prefix("bot", run_id, 1) + "out.json") for run_id in scheduled)
    assert h.deps.store.pruned_through("bot") is None


def test_scheduled_ticks_past_history_still_prune_and_raise_the_mark(h):
    """The other side: scheduled ticks beyond history_limit go, manual runs or not, and the mark
    follows the newest scheduled tick pruned."""
    spec = make_spec(history_limit=2, schedule="0 * * * *")
    h.run_now(spec, nonce="dd01")
    [run] = [r for r in h.records("bot") if r.state == "running"]
    h.finish_ok("bot", run.run_id)
    h.clock.advance(3600)
    scheduled = genuine_runs(h, spec, 4)
    left = sorted(r.run_id for r in h.records("bot"))
    assert left == sorted([run.run_id, *scheduled[-2:]]), left
    assert h.deps.store.pruned_through("bot") == scheduled[1]


def test_a_redelivered_skipped_tick_that_was_pruned_does_not_come_back(h):
    """Skipped scheduled ticks are genuine ticks: pruning one raises the mark, so Pub/Sub's late
    redelivery of it is dropped instead of making a new run of a tick that already ended (a tick
    ended `skipped` twice)."""
    spec = make_spec(history_limit=1, schedule="0 * * * *", concurrency="forbid", timeout="6h")
    h.start(spec)  # 12:00, running through the next ticks
    for _ in range(3):
        h.clock.advance(3600)
        h.start(spec)  # 13:00, 14:00, 15:00: skipped
    assert h.deps.store.read("bot", "20261122-1300") is None  # pruned: one skipped tick is kept
    written, write = [], h.blobs.write

    def recording(name, *args, **kwargs):
        written.append(name)
        return write(name, *args, **kwargs)

    h.blobs.write = recording
    h.start(spec, publish_time=datetime(2026, 11, 22, 13, 0, 5, tzinfo=UTC))  # its delivery, again
    assert layout.run_record("bot", "20261122-1300") not in written, "the pruned tick was recorded again"
