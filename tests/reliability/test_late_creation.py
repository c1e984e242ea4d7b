"""A VM created minutes after its admission counts on every day it runs into.

An insert can take minutes (Compute Engine's operation, zone fallbacks). Right before UTC
midnight the admission, timeout + grace from when it was written, ends today while the VM runs
into tomorrow: once the VM exists, its admission is written under tomorrow too
(limits.cover_late_creation), so tomorrow counts it while it runs and settles it at its end."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from spotcron.core.runs import RunState
from spotcron.core.settings import Limits
from spotcron.engine.day_hours import read_day
from spotcron.runtime import entrypoints
from spotcron.testing.harness import Harness, make_spec

RUN = "20261122-2340"
VM = f"sc-late-{RUN}-a1"


@pytest.fixture
def h():
    harness = Harness(datetime(2026, 11, 22, 23, 40, 5, tzinfo=UTC), limits=Limits(max_vm_hours_per_day=5))
    yield harness
    entrypoints.use(None)


def test_a_vm_created_late_counts_its_hours_on_the_day_it_runs_into(h):
    late = make_spec(name="late", schedule="40 23 * * *")  # 10m + 5m grace: admitted 23:40 to 23:55
    h.compute.create_delay_s = lambda request: 420  # the insert operation takes 7 minutes
    assert h.start(late).status_code == 200
    h.compute.create_delay_s = None
    record = h.record("late", RUN)
    assert record.state == RunState.RUNNING
    assert record.attempts[0].created_at == datetime(2026, 11, 22, 23, 47, 5, tzinfo=UTC)
    h.clock.set(datetime(2026, 11, 23, 0, 1, 5, tzinfo=UTC))  # still running 1 minute into the 23rd
    assert h.compute.peek_any(VM) is not None
    tomorrow = read_day(h.blobs, "2026-11-23")
    assert tomorrow.hours_of(VM) > 0, f"{VM} runs on 2026-11-23 but that day counts nothing of it"
    h.clock.set(datetime(2026, 11, 23, 0, 2, 5, tzinfo=UTC))
    assert h.finish_ok("late", RUN).status_code == 200
    tomorrow = read_day(h.blobs, "2026-11-23")
    assert tomorrow.used.get(VM, 0.0) > 0, f"{VM} ran 2 minutes on 2026-11-23; settled {tomorrow.used.get(VM)}"
