"""VM-hours per UTC day: each VM's hours count against each day exactly once.

Before: a start redelivered across midnight was admitted on both days, each reserving its whole
worst case on top of what the day before carried over, and its real hours were settled on both;
a VM whose reservation spanned more than two days stopped counting from its third day.
"""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from spotcron.core.errors import Transient
from spotcron.core.runs import RunState
from spotcron.core.settings import Limits
from spotcron.engine.day_hours import read_day
from spotcron.runtime import entrypoints
from spotcron.testing.harness import Harness, make_spec

DAY1, DAY2 = "2026-11-22", "2026-11-23"


@pytest.fixture
def harness():
    made: list[Harness] = []

    def make(now: datetime, **limits) -> Harness:
        made.append(Harness(now, limits=Limits(**limits)))
        return made[-1]

    yield make
    entrypoints.use(None)


def test_a_start_redelivered_across_midnight_counts_its_hours_once_per_day(harness):
    h = harness(datetime(2026, 11, 22, 23, 59, 0, tzinfo=UTC), max_vm_hours_per_day=0.55)
    a = make_spec(name="a", schedule="59 23 * * *")  # 10m timeout + 5m grace: 0.25 h reserved
    h.compute.fail_create(Transient("the insert timed out"))
    published = h.clock.now()
    assert h.start(a, publish_time=published).status_code >= 500  # redelivered
    h.clock.advance(120)  # 00:01 the next day
    assert h.start(a, publish_time=published).status_code == 200
    assert h.record("a", "20261122-2359").state == RunState.RUNNING
    # Day 2 counts a's reservations' union inside it, [23:59, 00:16), once: 16 minutes.
    assert read_day(h.blobs, DAY2).hours == pytest.approx(16 / 60, abs=1e-3)
    # So a run that fits next to it starts (0.27 + 0.25 <= 0.55) instead of queueing.
    b = make_spec(name="b", schedule="1 0 * * *")
    h.start(b)
    assert h.record("b", "20261123-0001").state == RunState.RUNNING
    # a's VM ran from 00:01 to 00:10: nothing on day 1, 9 minutes on day 2, settled once.
    h.clock.advance(9 * 60)
    assert h.finish_ok("a", "20261122-2359").status_code == 200
    assert read_day(h.blobs, DAY1).used["sc-a-20261122-2359-a1"] == 0.0
    assert read_day(h.blobs, DAY2).used["sc-a-20261122-2359-a1"] == pytest.approx(9 / 60, abs=1e-3)


def test_a_vm_whose_timeout_spans_three_days_counts_on_its_third_day(harness):
    h = harness(datetime(2026, 11, 22, 12, 0, 5, tzinfo=UTC), max_vm_hours_per_day=30)
    long = make_spec(name="long", schedule="0 12 * * *", timeout="60h", starting_deadline="1h")
    h.start(long)
    assert h.record("long", "20261122-1200").state == RunState.RUNNING  # 24 h a day at most: it fits
    third = datetime(2026, 11, 24, 12, 0, 5, tzinfo=UTC)
    h.clock.advance((third - h.clock.now()).total_seconds())
    # Day 3 still holds the VM for the whole day.
    assert read_day(h.blobs, "2026-11-24").hours_of("sc-long-20261122-1200-a1") == pytest.approx(24.0)
    short = make_spec(name="short", schedule="0 12 * * *", timeout="10h")
    h.start(short)
    record = h.record("short", "20261124-1200")
    assert record.state == RunState.QUEUED
    assert "24.00 VM-hours are used or admitted today (UTC)" in record.reason


def test_hours_a_reservation_reaches_into_tomorrow_are_held_to_tomorrows_limit(harness):
    h = harness(datetime(2026, 11, 22, 20, 0, 5, tzinfo=UTC), max_vm_hours_per_day=10)
    h.start(make_spec(name="a", schedule="0 20 * * *", timeout="9h"))  # 20:00 to 05:05: 4 h today, 5.1 tomorrow
    h.start(make_spec(name="b", schedule="0 20 * * *", timeout="9h"))  # another 4 today fits, 10.2 tomorrow do not
    record = h.record("b", "20261122-2000")
    assert record.state == RunState.QUEUED and f"admitted on {DAY2} (UTC)" in record.reason
    assert read_day(h.blobs, DAY2).hours == pytest.approx(5 + 5 / 60 + 1 / 720, abs=1e-2)


def test_a_callback_that_beats_the_record_of_its_vm_still_bills_and_settles_the_vm(harness):
    import dataclasses

    from spotcron.cost.billing import cost_function

    h = harness(datetime(2026, 11, 22, 12, 0, 5, tzinfo=UTC))
    h.deps = dataclasses.replace(h.deps, run_cost=cost_function(None, h.settings.region))
    entrypoints.use(h.deps)
    # The insert lands, but the delivery never hears back nor finds the VM: it dies before the
    # record says the VM was created (a redelivery would adopt it, after the callback below).
    h.compute.fail_create(Transient("the insert timed out"), succeed_anyway=True)
    h.compute.fault = lambda call, name: call == "get"
    assert h.start(make_spec(name="a")).status_code >= 500
    h.compute.fault = None
    assert h.record("a", "20261122-1200").current_attempt.created_at is None
    h.clock.advance(300)
    assert h.finish_ok("a", "20261122-1200").status_code == 200
    record = h.record("a", "20261122-1200")
    attempt = record.current_attempt
    assert record.state == RunState.SUCCEEDED
    assert attempt.created_at is not None and attempt.vm_seconds == pytest.approx(300, abs=1)
    assert record.cost_usd > 0 and any("vm" in item or "compute" in item for item in record.cost_items)
    assert read_day(h.blobs, DAY1).used["sc-a-20261122-1200-a1"] == pytest.approx(300 / 3600, abs=1e-3)
