"""A retry is counted against what its run's earlier attempts really ran, not their worst case.

Before a retry is admitted, the run's attempts whose VMs have ended are settled (engine/day_hours.py),
so on an otherwise empty stack a run preempted twice, a minute into each attempt, gets room for
its third attempt (3 x 0.25 h admitted would cross 0.6 h; its VMs ran 2 minutes)."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from spotcron.core.runs import RunState
from spotcron.core.settings import Limits
from spotcron.engine.day_hours import read_day
from spotcron.runtime import entrypoints
from spotcron.testing.harness import Harness, make_spec

RUN = "20261122-1200"


@pytest.fixture
def h():
    harness = Harness(datetime(2026, 11, 22, 12, 0, 5, tzinfo=UTC), limits=Limits(max_vm_hours_per_day=0.6))
    yield harness
    entrypoints.use(None)


def test_a_retry_is_not_refused_room_by_its_own_preempted_attempts(h):
    job = make_spec(name="job", schedule="0 12 * * *", retries={"preemption": 2}, starting_deadline="30m")
    assert h.start(job).status_code == 200
    for attempt in (1, 2):
        h.clock.advance(60)  # each VM is preempted a minute after it started
        assert h.callback("job", RUN, attempt, status="preempted", exit_code=None).status_code == 200
    record = h.record("job", RUN)
    day = read_day(h.blobs, "2026-11-22")
    ran = sum(a.vm_seconds or 0 for a in record.attempts) / 3600
    assert record.state == RunState.RUNNING, (
        f"attempt 3 is {record.state}: {record.reason}; the day holds {day.hours:.2f} VM-hours though this run's "
        f"VMs ran {ran:.3f} h and nothing else runs")
    for _ in range(7):  # and it does not get room later either: it fails at its deadline
        h.clock.advance(300)
        h.sweep()
    assert h.record("job", RUN).state != RunState.FAILED
