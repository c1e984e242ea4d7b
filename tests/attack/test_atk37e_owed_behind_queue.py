"""A queued run ended by someone else (here: replaced by its job's next tick) whose handler died
between the terminal write and the rename of its live marker: the marker still says `queued`.
The sweep leaves queued markers to the queue, and the queue skips every run behind a run that
waits for room until that run's own deadline. So the ended run's run.finished, settlement and
pruning wait, after any number of clean sweeps, until its starting_deadline has passed."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from spotcron.core.runs import RunState
from spotcron.core.settings import Limits
from spotcron.engine.sweep import LIST_LAG
from spotcron.engine.writer import finished_event_id
from spotcron.runtime import entrypoints
from spotcron.testing.harness import Harness, make_spec
from tests.attack.crash_helpers import Crash


@pytest.fixture
def h():
    harness = Harness(datetime(2026, 11, 22, 12, 0, 5, tzinfo=UTC), limits=Limits(max_live_vms=1))
    yield harness
    entrypoints.use(None)


def test_an_ended_run_with_a_queued_marker_finishes_its_end_at_the_next_clean_sweep(h):
    a = make_spec(name="a", schedule="0 12 * * *", timeout="3h")
    b = make_spec(name="b", schedule="0 12 * * *", starting_deadline="3h")
    swap = make_spec(name="swap", schedule="*/10 * * * *", concurrency="replace", starting_deadline="3h")
    assert h.start(a).status_code == 200  # holds the one live VM for hours
    assert h.start(b).status_code == 200
    assert h.start(swap).status_code == 200
    assert h.record("b", "20261122-1200").state == RunState.QUEUED
    assert h.record("swap", "20261122-1200").state == RunState.QUEUED  # behind b (same tick, job order)
    h.clock.set(datetime(2026, 11, 22, 12, 10, 5, tzinfo=UTC))
    dying = {"now": False}

    def fault(call: str, name: str) -> bool:
        if dying["now"]:
            dying["now"] = False
            h.blobs.fault = None
            raise Crash(f"killed before storage:{call} {name}")
        dying["now"] = call == "write" and name == "runs/swap/20261122-1200/run.json"
        return False

    h.blobs.fault = fault  # the 12:10 tick replaces the queued 12:00 run and dies right after that write
    with pytest.raises(Crash):
        h.start(swap)
    h.blobs.fault = None
    replaced = h.record("swap", "20261122-1200")
    assert replaced.terminal and replaced.owed
    for _ in range(3):  # clean sweeps, well past the list lag
        h.clock.advance(300)
        assert h.sweep().status_code == 200
    replaced = h.record("swap", "20261122-1200")
    assert h.clock.now() - replaced.updated_at > LIST_LAG
    published = {p.data.get("event_id") for p in h.events.of_type("run.finished")}
    assert not replaced.owed, f"still owes {replaced.owed} {h.clock.now() - replaced.updated_at} after it ended"
    assert finished_event_id(replaced) in published
    assert h.clock.now() < replaced.created_at + timedelta(hours=3)  # (its deadline is far off)
