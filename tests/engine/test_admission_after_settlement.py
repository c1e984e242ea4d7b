"""A redelivery that looks for the attempt's VM (a get, or the admission's list) while the run's
callback ends it: the VM is gone by then, so the delivery writes a new admission after the run's
settlement read its days. Written at 23:50 it reaches the next UTC day, where the settlement found
nothing to settle. The delivery re-reads the record after writing its admission, finds the run
ended, and withdraws it, so no admission outlives its run's settlement (the VM's own hours are on
the admission its creator wrote before the insert)."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from spotcron.core.runs import RunState
from spotcron.core.settings import Limits
from spotcron.engine.day_hours import read_day
from spotcron.engine.deployed import start_message
from spotcron.runtime import entrypoints
from spotcron.testing.harness import Harness, make_spec
from tests.engine.crash_helpers import call_dying, die_after, disarm

RUN = "20261122-2340"
VM = f"sc-job-{RUN}-a1"


@pytest.fixture
def h():
    harness = Harness(datetime(2026, 11, 22, 23, 40, 5, tzinfo=UTC), limits=Limits(max_vm_hours_per_day=5))
    yield harness
    entrypoints.use(None)


def test_no_admission_outlives_its_runs_settlement(h):
    job = make_spec(name="job", schedule="40 23 * * *", starting_deadline="30m")  # 0.25 h: 23:40 to 23:55
    published = h.clock.now()
    die_after(h, "compute", "create")  # the VM is made; the delivery dies before recording it
    assert call_dying(lambda: h.start(job, publish_time=published)) is None
    disarm(h)
    h.clock.set(datetime(2026, 11, 22, 23, 50, 5, tzinfo=UTC))
    done = []

    def fault(call: str, name: str) -> bool:
        if call in ("get", "list") and not done:  # while the redelivery looks for the VM, the container ends
            done.append(0)
            done[0] = h.finish_ok("job", RUN).status_code
        return False

    h.compute.fault = fault
    assert h.functions.start(start_message(job), published, {}, None).status_code == 200
    h.compute.fault = None
    assert done == [200] and h.record("job", RUN).state == RunState.SUCCEEDED
    for _ in range(3):
        h.clock.advance(300)
        assert h.sweep().status_code == 200
    tomorrow = read_day(h.blobs, "2026-11-23")
    assert tomorrow.hours_of(VM) == 0.0, (
        f"2026-11-23 holds {tomorrow.hours_of(VM) * 60:.1f} minutes for {VM}, gone since 23:50: {tomorrow}")
