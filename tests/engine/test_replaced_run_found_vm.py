"""A `replace` job's run whose start died right after its insert, replaced by the next tick before
anyone adopted its VM: the replacing run asks Compute Engine for the VM first, so the record learns
it existed, the VM is deleted, and the hours it ran are settled as such (not as 0)."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from spotcron.core.runs import RunState
from spotcron.core.settings import Limits
from spotcron.engine.day_hours import read_day
from spotcron.runtime import entrypoints
from spotcron.testing.harness import Harness, make_spec
from tests.engine.crash_helpers import call_dying, die_after, disarm

DAY = "2026-11-22"
VM = "sc-swap-20261122-1200-a1"


@pytest.fixture
def h():
    harness = Harness(datetime(2026, 11, 22, 12, 0, 5, tzinfo=UTC), limits=Limits(max_vm_hours_per_day=5))
    yield harness
    entrypoints.use(None)


def test_a_replaced_runs_vm_that_ran_has_its_hours_counted(h):
    swap = make_spec(name="swap", schedule="* * * * *", timeout="50m", concurrency="replace")
    published = h.clock.now()
    die_after(h, "compute", "create")  # the insert lands; the handler dies before recording it
    assert call_dying(lambda: h.start(swap, publish_time=published)) is None
    disarm(h)
    assert VM in h.live_vms()
    assert h.record("swap", "20261122-1200").state == RunState.STARTING
    h.clock.advance(100)  # within the sweep's LIST_LAG nothing adopts it; the 12:01 tick comes first
    assert h.start(swap).status_code == 200
    assert h.record("swap", "20261122-1201").state == RunState.RUNNING
    old = h.record("swap", "20261122-1200")
    assert old.state == RunState.FAILED and "replaced" in old.reason
    assert VM not in [n for n in h.live_vms() if h.compute.peek_any(n) and h.compute.peek_any(n).status == "RUNNING"]
    # The VM ran from 12:00:05 to 12:01:45; its hours were admitted and must be settled as such.
    usage = read_day(h.blobs, DAY)
    assert VM in usage.used
    assert usage.used[VM] > 0, "the replaced run's VM ran 100 s but its hours settled as 0"
    attempt = old.attempts[0]
    assert attempt.created_at is not None, "the record never learnt that its VM existed"


def test_a_manual_run_a_tick_cancels_has_its_vms_hours_counted(h):
    """Scheduled ticks go before manual runs: the tick cancels a manual run whose start died right
    after its insert. The VM is found by name first, so it is deleted and its hours settled."""
    job = make_spec(name="swap", schedule="* * * * *", timeout="50m", concurrency="forbid")
    die_after(h, "compute", "create")
    assert call_dying(lambda: h.run_now(job)) is None
    disarm(h)
    manual = next(r for r in h.records("swap") if r.trigger == "manual")
    vm = manual.attempts[0].vm_name
    assert vm in h.live_vms() and manual.state == RunState.STARTING
    h.clock.advance(100)
    assert h.start(job).status_code == 200  # the 12:01 tick
    ended = h.record("swap", manual.run_id)
    assert ended.state == RunState.CANCELLED
    assert ended.attempts[0].created_at is not None, "the record never learnt that its VM existed"
    assert h.compute.peek_any(vm) is None or h.compute.peek_any(vm).status != "RUNNING"
    assert read_day(h.blobs, DAY).used.get(vm, 0.0) > 0, "the cancelled run's VM ran 100 s but settled as 0"
