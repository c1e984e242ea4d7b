"""A start refused by the limits writes no admission, so a handler that dies at any point of a
refusal leaves the day's accounting within its limit.

An admission is written only by a start that fits on the day's listing as it is: a start the
listing already refuses queues without writing (and so without a write to take back). A start
that fits on that listing writes its admission and counts again, so that two starts deciding at
once still see each other (engine/limits.py).
"""

from __future__ import annotations

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
