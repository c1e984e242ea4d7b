"""`concurrency: replace`: the start that replaces a run dies right after writing the old run's
end (`Replaced`), before the old run's live marker is renamed and before its VM is deleted. The
VM's deletion is owed by that end, so it is not lost: the redelivered start deletes it, and
without a redelivery (the job paused meanwhile) the sweep does, at its next pass. Two VMs of a
replace job never run the job side by side until the old one's deadline."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from spotcron.core.layout import LIVE
from spotcron.core.runs import Effect, RunState
from spotcron.engine.deployed import SpecStore, start_message
from spotcron.engine.live_index import live_entry_name
from spotcron.engine.ports import ALIVE_STATUSES
from spotcron.runtime import entrypoints
from spotcron.testing.harness import Harness, make_spec
from tests.reliability.crashes import Crash, crash_after_write

OLD, NEW = "20261122-1200", "20261122-1210"


@pytest.fixture
def h():
    harness = Harness(datetime(2026, 11, 22, 12, 0, 5, tzinfo=UTC))
    yield harness
    entrypoints.use(None)


def _alive(h) -> list[str]:
    return sorted(i.name for i in h.compute.all_instances() if i.status in ALIVE_STATUSES)


def _replace_dies_after_the_old_end(h):
    swap = make_spec(name="swap", schedule="*/10 * * * *", timeout="40m", concurrency="replace")
    assert h.start(swap).status_code == 200
    assert h.record("swap", OLD).state == RunState.RUNNING
    h.clock.set(datetime(2026, 11, 22, 12, 10, 5, tzinfo=UTC))
    published = h.clock.now()
    restore = crash_after_write(h, lambda name, data: name == f"runs/swap/{OLD}/run.json")
    with pytest.raises(Crash):
        h.start(swap, publish_time=published)
    restore()
    old = h.record("swap", OLD)
    assert old.state == RunState.FAILED and "replaced by run" in (old.reason or "")
    assert old.owed[0] == Effect.DELETE_VM  # owed, in the write that ended it
    assert f"sc-swap-{OLD}-a1" in _alive(h)
    return swap, published


def test_the_redelivered_start_deletes_the_vm_of_the_run_its_first_delivery_ended(h):
    swap, published = _replace_dies_after_the_old_end(h)
    h.clock.advance(30)  # Pub/Sub redelivers the 12:10 start
    assert h.functions.start(start_message(swap), published, {}, None).status_code == 200
    assert h.record("swap", NEW).state == RunState.RUNNING
    assert _alive(h) == [f"sc-swap-{NEW}-a1"]  # at once, not at the next sweep
    assert not h.record("swap", OLD).owed
    assert [e for e in h.deps.store.live_index() if e.run_id == OLD] == []  # its stale marker is gone too
    for _ in range(2):  # two clean sweeps
        h.clock.advance(300)
        assert h.sweep().status_code == 200
    assert _alive(h) == [f"sc-swap-{NEW}-a1"]


def test_without_a_redelivery_the_sweep_deletes_the_vm_of_the_replaced_run(h):
    swap, _ = _replace_dies_after_the_old_end(h)
    # The redelivery never starts anything: the job was paused before it came back.
    SpecStore(h.blobs).write(swap.model_copy(update={"paused": True}))
    h.clock.advance(300)
    assert h.sweep().status_code == 200
    assert f"sc-swap-{OLD}-a1" not in _alive(h), f"the replaced run's VM is alive at {h.clock.now():%H:%M}"
    old = h.record("swap", OLD)
    assert not old.owed, f"the replaced run still owes {old.owed}"
    assert [e for e in h.deps.store.live_index() if e.run_id == OLD] == []


def test_an_ends_owed_marker_is_written_before_its_record_and_taken_back_when_the_end_loses(h):
    """The store writes an end's `owed` marker ahead of the terminal record; when another write
    wins meanwhile and the end no longer applies, the marker written ahead goes again."""
    h.start(make_spec(name="bot", timeout="1h"))
    store, now = h.deps.store, h.clock.now()
    seen: list[list[str]] = []
    real_write = h.blobs.write

    def write(name, data, **kwargs):
        if name == f"runs/bot/{OLD}/run.json" and b'"cancelled"' in bytes(data):
            seen.append(h.blobs.list(LIVE))  # what the record's write finds already there
        return real_write(name, data, **kwargs)

    h.blobs.write = write
    ended, changed = store.update("bot", OLD, lambda r: r.with_state(RunState.CANCELLED, now, "test"))
    h.blobs.write = real_write
    assert changed and live_entry_name(ended) in seen[0] and len(seen[0]) == 2
    assert h.blobs.list(LIVE) == [live_entry_name(ended)]

    h.start(make_spec(name="two", timeout="1h"))
    raced: list[bool] = []

    def end_unless_moved(record):
        if not raced:  # another writer changes the record between our read and our write
            raced.append(True)
            store.update("two", OLD, lambda r: r.model_copy(update={"reason": "moved"}))
            return record.with_state(RunState.CANCELLED, now, "lost")
        return None  # seen again: the end no longer applies

    record, changed = store.update("two", OLD, end_unless_moved)
    assert not changed and record.state == RunState.RUNNING
    assert [n for n in h.blobs.list(LIVE) if "/two/" in n] == [live_entry_name(record)]
