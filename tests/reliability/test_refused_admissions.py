"""The day's accounting stays within its limit whatever a start dies after.

A start refused by the limits writes no admission, so a handler that dies at any point of a
refusal leaves nothing standing; and a start admitted again after its first delivery died is
counted as the day will count it, the union of its admissions.

An admission is written only by a start that fits on the day's listing as it is: a start the
listing already refuses queues without writing (and so without a write to take back). A start
that fits on that listing writes its admission and counts again, so that two starts deciding at
once still see each other (engine/limits.py).
"""

from __future__ import annotations

from datetime import timedelta

import pytest

from spotcron.core.runs import RunState
from spotcron.core.settings import Limits
from spotcron.engine.day_hours import read_day
from spotcron.runtime import entrypoints
from spotcron.testing.harness import Harness, make_spec
from tests.reliability.crashes import Crash, crash_after_write

DAY = "2026-11-22"
HOURS = (600 + 300) / 3600  # timeout + grace: what one attempt is admitted for
LIMIT = 1.5 * HOURS  # room for one run's attempt, not two


@pytest.fixture
def room_for_one():
    h = Harness(limits=Limits(max_vm_hours_per_day=LIMIT))
    yield h
    entrypoints.use(None)


def _nth_write(n: int):
    seen: list[str] = []

    def matches(name: str, _data: bytes) -> bool:
        seen.append(name)
        return len(seen) == n
    return matches


@pytest.mark.parametrize("n", range(1, 9))
def test_a_start_that_dies_while_refused_leaves_the_day_within_its_limit(room_for_one, n):
    """The refused start dies right after its nth write, whichever write that is."""
    h = room_for_one
    assert h.start(make_spec(name="bot")).status_code == 200
    restore = crash_after_write(h, _nth_write(n))
    try:
        h.start(make_spec(name="other"))
    except Crash:
        pass
    finally:
        restore()
    day = read_day(h.blobs, DAY)
    assert day.hours <= LIMIT + 1e-9, f"{day.hours:.3f} VM-hours counted of {LIMIT:.3f}: {sorted(day.admitted)}"


def test_a_refused_start_writes_and_deletes_nothing_under_the_limits(room_for_one):
    h = room_for_one
    h.start(make_spec(name="bot"))
    writes: list[str] = []
    real_write = h.blobs.write

    def write(name, data, **kwargs):
        writes.append(name)
        return real_write(name, data, **kwargs)

    h.blobs.write = write
    try:
        assert h.start(make_spec(name="other")).status_code == 200
    finally:
        h.blobs.write = real_write
    [record] = h.records("other")
    assert record.state == RunState.QUEUED and "max_vm_hours_per_day" in record.reason
    assert not [name for name in writes if name.startswith("limits/")], writes


@pytest.fixture
def room_for_two():
    h = Harness(limits=Limits(max_vm_hours_per_day=2 * HOURS + 0.05))
    yield h
    entrypoints.use(None)


def test_a_start_admitted_again_counts_the_union_of_its_admissions(room_for_two):
    """The first delivery dies right after writing its admission; the redelivery, minutes later,
    is admitted only if the day still holds its VM's admissions together."""
    h = room_for_two
    bot = make_spec(name="bot")
    restore = crash_after_write(h, lambda name, _: "/admitted/" in name)
    try:
        h.start(bot, message_id="first")
    except Crash:
        pass
    finally:
        restore()
    assert h.start(make_spec(name="other")).status_code == 200  # counts bot's admission as pending
    assert h.live_vms() == ["sc-other-20261122-1200-a1"]
    h.clock.advance(240)
    h.start(bot, message_id="first", publish_time=h.clock.now() - timedelta(seconds=240))  # the redelivery
    day = read_day(h.blobs, DAY)
    assert day.hours <= 2 * HOURS + 0.05 + 1e-9, f"{day.hours:.3f} VM-hours counted: {sorted(day.admitted)}"
