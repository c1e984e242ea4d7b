"""`concurrency: replace` replaces only older runs: a late delivery of an older tick (its first
delivery failed before its record was written, and Pub/Sub redelivers it within its
`starting_deadline`) that finds a newer run live is skipped, naming it, and the newer run goes on.
The same holds among manual runs (by their request time), and two ticks starting at once leave
the newer running whichever goes first."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from spotcron.core.runs import RunState
from spotcron.engine import transitions
from spotcron.engine.deployed import SpecStore, start_message
from spotcron.engine.start_job import advance
from spotcron.engine.writer import create
from spotcron.runtime import entrypoints
from spotcron.testing.harness import Harness, make_spec

OLDER, NEWER = "20261122-1200", "20261122-1210"


@pytest.fixture
def h():
    harness = Harness(datetime(2026, 11, 22, 12, 0, 5, tzinfo=UTC))
    yield harness
    entrypoints.use(None)


def test_a_late_older_tick_does_not_replace_a_newer_running_run(h):
    swap = make_spec(name="swap", schedule="*/10 * * * *", concurrency="replace", starting_deadline="20m")
    SpecStore(h.blobs).write(swap)
    first = h.clock.now()
    failed = {"once": False}

    def fault(call: str, name: str) -> bool:  # one transient storage error before anything is written
        if not failed["once"] and call == "read":
            failed["once"] = True
            return True
        return False

    h.blobs.fault = fault
    assert h.functions.start(start_message(swap), first, {}, "m1").status_code >= 500  # redelivered later
    h.blobs.fault = None
    assert h.records("swap") == []
    h.clock.set(datetime(2026, 11, 22, 12, 10, 5, tzinfo=UTC))
    assert h.start(swap).status_code == 200
    assert h.record("swap", NEWER).state == RunState.RUNNING
    h.clock.advance(60)  # Pub/Sub's backoff: the 12:00 message comes back, 11 minutes late (deadline 20m)
    assert h.functions.start(start_message(swap), first, {}, "m1").status_code == 200
    newer = h.record("swap", NEWER)
    assert newer.state == RunState.RUNNING, f"the 12:10 run was ended by the older 12:00 tick: {newer.reason}"
    older = h.record("swap", OLDER)
    assert older.state == RunState.SKIPPED
    assert older.reason.startswith(f"newer scheduled run {NEWER} is live") and "concurrency: replace" in older.reason
    assert h.live_vms() == [f"sc-swap-{NEWER}-a1"]


def test_a_newer_tick_still_replaces_an_older_running_one(h):
    swap = make_spec(name="swap", schedule="*/10 * * * *", timeout="40m", concurrency="replace")
    h.start(swap)
    h.clock.set(datetime(2026, 11, 22, 12, 10, 5, tzinfo=UTC))
    h.start(swap)
    assert h.record("swap", OLDER).reason.startswith(f"replaced by run {NEWER}")
    assert h.live_vms() == [f"sc-swap-{NEWER}-a1"]


@pytest.mark.parametrize("first", ["older", "newer"])
def test_two_ticks_starting_at_once_leave_the_newer_running(h, first):
    swap = make_spec(name="swap", schedule="*/10 * * * *", concurrency="replace", starting_deadline="20m")
    SpecStore(h.blobs).write(swap)
    h.clock.set(datetime(2026, 11, 22, 12, 10, 5, tzinfo=UTC))
    now = h.clock.now()
    older = transitions.scheduled(swap, OLDER, datetime(2026, 11, 22, 12, 0, tzinfo=UTC), now)
    newer = transitions.scheduled(swap, NEWER, datetime(2026, 11, 22, 12, 10, tzinfo=UTC), now)
    assert create(h.deps, older) and create(h.deps, newer)
    for record in ([older, newer] if first == "older" else [newer, older]):
        advance(h.deps, record.job, record.run_id)
    assert h.record("swap", NEWER).state == RunState.RUNNING
    assert h.record("swap", OLDER).terminal
    assert h.live_vms() == [f"sc-swap-{NEWER}-a1"]


def test_a_late_older_manual_request_does_not_replace_a_newer_manual_run(h):
    spec = make_spec(name="r", schedule="0 0 1 1 *", timeout="6h", concurrency="replace")
    asked = h.clock.now()
    h.clock.advance(60)
    h.run_now(spec, nonce="dddd")  # requested at 12:01:05
    h.run_now(spec, nonce="cccc", publish_time=asked)  # requested at 12:00:05, delivered after it
    assert h.record("r", "m20261122-120105-dddd").state == RunState.RUNNING
    late = h.record("r", "m20261122-120005-cccc")
    assert late.state == RunState.SKIPPED and late.reason.startswith("newer manual run m20261122-120105-dddd is live")
