"""A tick whose first delivery failed before its record was written, redelivered within its
starting_deadline after younger ticks ran, ended and were pruned by history_limit: the pruning
mark is past it, so start_job drops it ("older than the runs kept by history_limit"). The tick
never ran; no run, no `missed` record."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from spotcron.engine.deployed import SpecStore, start_message
from spotcron.runtime import entrypoints
from spotcron.testing.harness import Harness, make_spec


@pytest.fixture
def h():
    harness = Harness(datetime(2026, 11, 22, 12, 0, 5, tzinfo=UTC))
    yield harness
    entrypoints.use(None)


def test_a_redelivered_tick_that_never_ran_is_not_dropped_by_pruning_of_younger_runs(h):
    job = make_spec(name="job", schedule="* * * * *", history_limit=1, starting_deadline="10m", timeout="5m")
    SpecStore(h.blobs).write(job)
    first = h.clock.now()
    failed = {"once": False}

    def fault(call: str, name: str) -> bool:  # one transient storage error before anything is written
        if not failed["once"] and call == "read":
            failed["once"] = True
            return True
        return False

    h.blobs.fault = fault
    assert h.functions.start(start_message(job), first, {}, "m0").status_code >= 500  # Pub/Sub redelivers later
    h.blobs.fault = None
    for minute in (1, 2, 3):
        h.clock.set(datetime(2026, 11, 22, 12, minute, 5, tzinfo=UTC))
        assert h.start(job).status_code == 200
        h.clock.advance(20)
        assert h.finish_ok("job", f"20261122-12{minute:02d}").status_code == 200
    h.clock.set(datetime(2026, 11, 22, 12, 4, 0, tzinfo=UTC))  # the 12:00 message comes back, 4 minutes late
    response = h.functions.start(start_message(job), first, {}, "m0")
    assert response.status_code == 200
    ids = sorted(r.run_id for r in h.records("job"))
    assert "20261122-1200" in ids, f"the 12:00 tick was dropped ({response.get_data(as_text=True)}); records {ids}"


def test_the_missed_pass_records_a_tick_that_never_ran_between_pruned_runs(h):
    job = make_spec(name="job", schedule="* * * * *", history_limit=1, starting_deadline="2m", timeout="5m")
    SpecStore(h.blobs).write(job)
    for minute in (1, 2, 3):  # 12:00's message never arrives
        h.clock.set(datetime(2026, 11, 22, 12, minute, 5, tzinfo=UTC))
        assert h.start(job).status_code == 200
        h.clock.advance(20)
        assert h.finish_ok("job", f"20261122-12{minute:02d}").status_code == 200
    assert h.deps.store.pruned_mark("job").covers("20261122-1201")
    h.clock.set(datetime(2026, 11, 22, 13, 0, 0, tzinfo=UTC))
    assert h.sweep().status_code == 200
    # Recorded (and, history_limit being 1, pruned in turn once the next streak was recorded).
    ended = [(p.data.get("run_id"), p.data.get("state")) for p in h.events.of_type("run.finished")]
    assert ("20261122-1200", "missed") in ended, ended
