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

import contextlib
from datetime import UTC, datetime, timedelta

import pytest

from spotcron.core.errors import Transient
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


@pytest.fixture
def half_an_hour():
    h = Harness(datetime(2026, 11, 22, 12, 0, 5, tzinfo=UTC), limits=Limits(max_vm_hours_per_day=0.5))
    yield h
    entrypoints.use(None)


def test_a_redelivered_start_keeps_the_day_within_its_vm_hours(half_an_hour):
    h = half_an_hour
    # Each run reserves 10m timeout + 5m grace = 0.25 h; the day allows 0.5 h.
    b = make_spec(name="b", schedule="0 12 * * *")
    a = make_spec(name="a", schedule="0 12 * * *", starting_deadline="1h")
    assert h.start(b).status_code == 200
    assert h.record("b", "20261122-1200").state == RunState.RUNNING
    published = h.clock.now()
    h.compute.fail_create(Transient("the insert timed out"))  # a's first delivery: admitted, no VM, 500
    assert h.start(a, publish_time=published).status_code >= 500
    h.clock.advance(10 * 60)  # Pub/Sub redelivers ten minutes later
    assert h.start(a, publish_time=published).status_code == 200
    assert h.record("a", "20261122-1200").state == RunState.RUNNING
    usage = read_day(h.blobs, DAY)
    # The check admitted a for 0.25 h next to b's 0.25 h; the day counts a as the union of its two
    # admissions, [12:00, 12:25): 0.25 + 0.417 = 0.667 h against a limit of 0.5 h.
    assert usage.hours <= 0.5 + 1e-6, f"{usage.hours:.3f} VM-hours counted on {DAY}, limit 0.5"


def test_a_queue_pass_that_dies_after_its_admission_leaves_the_day_within_its_limit():
    """The same from the queue: a pass dies right after it writes a queued run's admission (if it
    writes one at all), and the pass that later admits the run counts its admissions' union."""
    h = Harness(datetime(2026, 11, 22, 12, 0, 5, tzinfo=UTC),
                limits=Limits(max_live_vms=1, max_vm_hours_per_day=0.5))
    try:
        a = make_spec(name="a", schedule="0 12 * * *")
        q = make_spec(name="q", schedule="0 12 * * *", starting_deadline="1h")
        assert h.start(a).status_code == 200
        assert h.start(q).status_code == 200
        assert h.record("q", "20261122-1200").state == RunState.QUEUED  # one live VM allowed
        h.clock.advance(300)
        dying = {"now": False}

        def fault(call: str, name: str) -> bool:
            if dying["now"]:
                dying["now"] = False
                h.blobs.fault = None
                raise Crash(f"killed before storage:{call} {name}")
            dying["now"] = call == "write" and "/admitted/sc-q-" in name
            return False

        h.blobs.fault = fault  # the sweep's queue pass dies right after writing q's admission
        with contextlib.suppress(Crash):
            h.sweep()
        h.blobs.fault = None
        assert h.record("q", "20261122-1200").state == RunState.QUEUED
        h.clock.advance(540)  # a ends at 12:14 (0.23 h): its callback frees the room and starts q
        # q is admitted for 0.25 h next to a's 0.23; the day counts q's two admissions' union,
        # [12:05, 12:29): 0.4 h, so 0.63 h against a limit of 0.5.
        assert h.finish_ok("a", "20261122-1200").status_code == 200
        assert h.record("q", "20261122-1200").state == RunState.RUNNING
        usage = read_day(h.blobs, DAY)
        assert usage.hours <= 0.5 + 1e-6, f"{usage.hours:.3f} VM-hours counted on {DAY}, limit 0.5: {usage}"
    finally:
        entrypoints.use(None)


def test_a_queue_pass_that_dies_after_admitting_a_run_it_refuses_leaves_the_day_within_its_limit():
    """The minimal sequence `make explore` finds for `usage.hours <= MAX_VM_HOURS`: four bench
    ticks (the last one's `big` entry queued for VM-hours), a crash armed after storage:write,
    a sweep. Admissions are written before the limits are checked; the queue pass that refuses a
    run dies between writing its admission and withdrawing it, and nothing but the run leaving the
    queue (admitted, or expired at its starting_deadline) takes that admission away."""
    h = Harness(datetime(2026, 11, 22, 12, 0, 5, tzinfo=UTC), limits=Limits(max_vm_hours_per_day=0.6))
    try:
        for name in ("a", "b"):
            assert h.start(make_spec(name=name, schedule="0 12 * * *")).status_code == 200
        q = make_spec(name="q", schedule="0 12 * * *", starting_deadline="1h")
        assert h.start(q).status_code == 200
        assert h.record("q", "20261122-1200").state == RunState.QUEUED  # 0.75 h > 0.6 h
        h.clock.advance(60)
        dying = {"now": False}

        def fault(call: str, name: str) -> bool:
            if dying["now"]:
                dying["now"] = False
                h.blobs.fault = None
                raise Crash(f"killed before storage:{call} {name}")
            dying["now"] = call == "write"  # the sweep's first write: q's admission in its queue pass
            return False

        h.blobs.fault = fault
        with contextlib.suppress(Crash):
            h.sweep()
        h.blobs.fault = None
        assert h.record("q", "20261122-1200").state == RunState.QUEUED
        for _ in range(2):  # clean sweeps do not take it back either
            h.clock.advance(60)
            assert h.sweep().status_code == 200
        usage = read_day(h.blobs, DAY)
        assert usage.hours <= 0.6 + 1e-6, f"{usage.hours:.3f} VM-hours counted on {DAY}, limit 0.6"
    finally:
        entrypoints.use(None)
