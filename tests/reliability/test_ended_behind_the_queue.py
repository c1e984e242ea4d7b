"""A queued run ended by someone else (here: replaced by its job's next tick) whose handler died
between the terminal write and the rename of its live marker: the marker still says `queued`.

Before: the sweep left queued markers to the queue, and the queue skipped every run behind a run
waiting for room until that run's own deadline, so the ended run's run.finished, settlement and
pruning waited, after any number of clean sweeps, until its starting_deadline had passed. Now a
sweep pass also reads the runs held back (all of them while few wait, a turning share of
HELD_CHECKS when many do) and finishes those that have ended."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from types import SimpleNamespace

import pytest

from spotcron.core.runs import RunState
from spotcron.core.settings import Limits
from spotcron.engine.live_index import QUEUED, LiveEntry
from spotcron.engine.queue import HELD_CHECKS, _held_check
from spotcron.engine.sweep import LIST_LAG
from spotcron.engine.writer import finished_event_id
from spotcron.runtime import entrypoints
from spotcron.testing.harness import Harness, make_spec
from tests.reliability.crashes import Crash


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
    h.clock.advance(300)
    assert h.sweep().status_code == 200  # the next sweep, with b still waiting ahead of it
    replaced = h.record("swap", "20261122-1200")
    published = {p.data.get("event_id") for p in h.events.of_type("run.finished")}
    assert not replaced.owed, f"still owes {replaced.owed} {h.clock.now() - replaced.updated_at} after it ended"
    assert finished_event_id(replaced) in published
    assert not [n for n in h.blobs.list("live/swap/20261122-1200/")]  # its marker is gone
    assert h.record("b", "20261122-1200").state == RunState.QUEUED  # still waiting for the one VM
    assert h.clock.now() - replaced.updated_at <= LIST_LAG * 3
    assert h.clock.now() < replaced.created_at + timedelta(hours=3)  # (its deadline is far off)


def _entries(n: int) -> list[LiveEntry]:
    return [LiveEntry(f"job{i}", "20261122-1200", f"live/job{i}/20261122-1200/x", kind=QUEUED) for i in range(n)]


@pytest.mark.parametrize("queued", [1, HELD_CHECKS, HELD_CHECKS + 1, 10 * HELD_CHECKS])
def test_a_sweep_reads_a_bounded_share_of_the_runs_held_back_and_each_in_turn(queued):
    deps = SimpleNamespace(settings=SimpleNamespace(sweep_interval=300))
    entries = _entries(queued)
    start = datetime(2026, 11, 22, 12, 0, tzinfo=UTC)
    turns = -(-queued // HELD_CHECKS)
    seen: dict[str, int] = {}
    for n in range(turns):  # one sweep pass each sweep interval
        due = _held_check(deps, queued, start + timedelta(seconds=300 * n))
        picked = [e.name for e in entries if due(e)]
        assert len(picked) <= 2 * HELD_CHECKS  # a share, not the whole queue
        for name in picked:
            seen[name] = seen.get(name, 0) + 1
    assert seen == {e.name: 1 for e in entries}  # every run held back is read once in `turns` passes
