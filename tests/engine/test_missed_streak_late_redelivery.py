"""A tick inside a `missed` streak (recorded under the streak's first tick) whose start message
Pub/Sub still redelivers after the missed pass: start_job finds no record of that tick's own run
id and records it missed again, a second record and a second run.finished for one tick."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from spotcron.core.runs import RunState
from spotcron.engine.deployed import SpecStore, start_message
from spotcron.runtime import entrypoints
from spotcron.testing.harness import Harness, make_spec


@pytest.fixture
def h():
    harness = Harness(datetime(2026, 11, 22, 11, 0, 0, tzinfo=UTC))
    yield harness
    entrypoints.use(None)


def test_a_tick_of_a_missed_streak_redelivered_late_is_not_recorded_twice(h):
    job = make_spec(name="job", schedule="*/10 * * * *", starting_deadline="5m")
    SpecStore(h.blobs).write(job)
    h.clock.set(datetime(2026, 11, 22, 12, 0, 0, tzinfo=UTC))
    # From 11:00 every start fails (the function is down); Pub/Sub keeps the messages.
    for _ in range(16):  # the sweeps up to 13:20; the missed pass (hourly) records the streak
        h.clock.advance(300)
        assert h.sweep().status_code == 200
    before = [(r.run_id, r.state, r.missed_ticks) for r in h.records("job")]
    streak = [r for r in h.records("job") if r.state == RunState.MISSED and (r.missed_ticks or 1) > 1]
    assert streak, f"no missed streak recorded: {before}"
    published = datetime(2026, 11, 22, 12, 20, 0, tzinfo=UTC)  # a tick inside the streak
    assert h.functions.start(start_message(job), published, {}, "late").status_code == 200
    ids = [r.run_id for r in h.records("job")]
    finished = [p.data.get("run_id") for p in h.events.of_type("run.finished")]
    assert "20261122-1220" not in ids, f"12:20 recorded twice: streak {before}, now {ids}; run.finished {finished}"
