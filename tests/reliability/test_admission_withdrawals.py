"""Admissions withdrawn exactly when they must be: never lost to a transient error, never taken
from a VM that a copy of the same delivery created.

A retry refused for the day's VM-hours is queued and holds no admission, even when a delete of
its admission meets a transient error (tried again at once) or keeps failing (the next toucher
queues the run and withdraws every admission of its VM). A retry the day's first count refuses
writes nothing, so these tests refuse it on the second count: another start's admission lands
between the two. A delivery that finds its attempt moved
on because a concurrent copy created the VM (under the admission both wrote in the same second)
leaves that admission standing: the VM counts on it.
"""

from __future__ import annotations

import pytest

from spotcron.core import layout
from spotcron.core.runs import RunState
from spotcron.core.settings import Limits
from spotcron.engine.day_hours import read_day
from spotcron.engine.deployed import SpecStore, start_message
from spotcron.engine.limits import ADMISSION_WINDOW, WITHDRAW_TRIES
from spotcron.runtime import entrypoints
from spotcron.testing.harness import Harness, make_spec

RUN = "20261122-1200"
DAY = "2026-11-22"
SPEC = make_spec(name="bot", retries={"preemption": 3})
HOURS = (600 + 300) / 3600  # timeout + grace: what one attempt is admitted for
LIMIT = 1.5 * HOURS  # a third attempt fits beside what a1 and a2 ran; with another start's admission, it does not


def _vm(n: int) -> str:
    return f"sc-bot-{RUN}-a{n}"


@pytest.fixture
def two_attempts_a_day():
    h = Harness(limits=Limits(max_vm_hours_per_day=LIMIT))
    yield h
    entrypoints.use(None)


def _preempt(h: Harness, n: int) -> None:
    record = h.record("bot", RUN, count=False)
    assert record.state == RunState.RUNNING and record.current_attempt.vm_name == _vm(n)
    h.compute.preempt(record.current_attempt.zone, _vm(n))


def _another_start_lands_between_the_counts(h: Harness) -> None:
    """Right after a3's admission is written, another start's admission of the day becomes visible
    (admitted a while ago, so no longer a start being decided): a3's second count refuses it."""
    real_write = h.blobs.write

    def write(name, data, **kwargs):
        generation = real_write(name, data, **kwargs)
        if f"/admitted/{_vm(3)}~" in name:
            h.blobs.write = real_write
            at = int((h.clock.now() - 2 * ADMISSION_WINDOW).timestamp())
            real_write(layout.usage_admitted(DAY, "sc-other-20261122-1200-a1", at, 0, HOURS), b"")
        return generation

    h.blobs.write = write


def _fail_deletes_of_admissions(h: Harness, times: int) -> list[str]:
    _another_start_lands_between_the_counts(h)
    failed: list[str] = []

    def fault(call: str, name: str) -> bool:
        if call == "delete" and "/admitted/" in name and len(failed) < times:
            failed.append(name)
            return True
        return False

    h.blobs.fault = fault
    return failed


def _a_third_attempt_is_refused(h: Harness) -> None:
    h.start(SPEC)
    _preempt(h, 1)
    assert h.sweep().status_code == 200  # the retry: a2, admitted
    _preempt(h, 2)


def _assert_queued_holding_nothing(h: Harness) -> None:
    record = h.record("bot", RUN, count=False)
    assert record.state == RunState.QUEUED, (record.state, record.reason)
    assert "max_vm_hours_per_day" in record.reason
    day = read_day(h.blobs, DAY)
    assert _vm(3) not in day.admitted
    assert day.hours <= LIMIT + 1e-9, f"{day.hours:.3f} VM-hours counted"


def test_a_transient_error_on_a_refused_retrys_withdrawal_loses_nothing(two_attempts_a_day):
    h = two_attempts_a_day
    _a_third_attempt_is_refused(h)
    failed = _fail_deletes_of_admissions(h, 1)
    assert h.sweep().status_code == 200  # a3 is refused for the day's VM-hours
    h.blobs.fault = None
    assert failed and _vm(3) in failed[0]
    _assert_queued_holding_nothing(h)


def test_a_withdrawal_that_keeps_failing_is_done_by_the_next_toucher(two_attempts_a_day):
    h = two_attempts_a_day
    _a_third_attempt_is_refused(h)
    failed = _fail_deletes_of_admissions(h, WITHDRAW_TRIES)
    assert h.sweep().status_code == 200  # the pass records the error and goes on
    h.blobs.fault = None
    assert failed and all(_vm(3) in name for name in failed)
    assert h.record("bot", RUN, count=False).state == RunState.STARTING
    h.clock.advance(h.settings.sweep_interval)
    assert h.sweep().status_code == 200
    _assert_queued_holding_nothing(h)


def test_a_delivery_whose_copy_created_the_vm_keeps_the_admission_it_counts_on():
    h = Harness()
    try:
        SpecStore(h.blobs).write(make_spec(name="bot"))
        run = RUN
        raw, published = start_message(make_spec(name="bot")), h.clock.now()
        admitted: list[str] = []
        copied: list[bool] = []

        def fault(call: str, name: str) -> bool:
            if call == "write" and f"/admitted/sc-bot-{run}-a1" in name:
                admitted.append(name)
            elif call == "read" and name == layout.run_record("bot", run) and admitted and not copied:
                # The first delivery holds right after its admission, before its last look; a copy
                # (admitted in the same second, under the same name) creates the VM meanwhile.
                copied.append(True)
                h.blobs.fault = None
                assert h.functions.start(raw, published, None, "m-1").status_code == 200
                h.blobs.fault = fault
            return False

        h.blobs.fault = fault
        assert h.functions.start(raw, published, None, "m-1").status_code == 200
        h.blobs.fault = None
        assert copied
        record = h.record("bot", run, count=False)
        assert record.state == RunState.RUNNING
        vm = f"sc-bot-{run}-a1"
        assert h.compute.peek(record.current_attempt.zone, vm) is not None
        assert read_day(h.blobs, DAY).hours_of(vm) == pytest.approx(HOURS)
    finally:
        entrypoints.use(None)
