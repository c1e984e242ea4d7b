"""A publisher's burst of manual starts never holds back scheduled ticks (docs/security.md).

Pending manual admissions (starts being decided at this moment) count against the stack limits
only up to what the manual share leaves them, since no more of them can be admitted; and a
manual run at the head of the queue that must wait for the others being decided stops only the
manual runs behind it, never the ticks. The interleavings are forced: a burst's admission is
written as its start writes it, before that start has counted the share.
"""

from __future__ import annotations

import pytest

from spotcron.core import layout
from spotcron.core.runs import RunState
from spotcron.core.settings import Limits
from spotcron.engine.deployed import SpecStore
from spotcron.runtime import entrypoints
from spotcron.testing.harness import Harness, make_spec


@pytest.fixture
def four_vms():
    harness = Harness(limits=Limits(max_live_vms=4))  # manual_share 0.5: two VMs for manual runs
    yield harness
    entrypoints.use(None)


@pytest.fixture
def ten_vms():
    harness = Harness(limits=Limits(max_live_vms=10))  # manual_share 0.5: five VMs for manual runs
    yield harness
    entrypoints.use(None)


def test_a_tick_is_not_held_back_by_manual_starts_that_cannot_fit_their_share(four_vms):
    h = four_vms
    long = make_spec(name="long", timeout="2h", concurrency="allow")
    SpecStore(h.blobs).write(long)
    for nonce in ("0001", "0002"):
        h.run_now(long, nonce=nonce)
    assert len(h.live_vms()) == 2  # the manual share is full
    h.clock.advance(30)
    now = h.clock.now()
    # Two more manual starts of the publisher's burst, each with its admission written and its
    # share check not yet made (both will be refused by the share).
    for i in range(2):
        h.blobs.write(layout.usage_admitted(now.strftime("%Y-%m-%d"), f"sc-long-m20261122-120035-{i:04x}-a1",
                                            int(now.timestamp()), 0, 2 + 5 / 60, manual=True), b"")
    reply = h.start(make_spec(name="tick", schedule="0 12 * * *"))
    record = h.record("tick", "20261122-1200")
    assert record.state == RunState.RUNNING, (reply.status_code, record.state, record.reason)


def test_a_tick_behind_a_crowded_manual_run_takes_the_room_it_fits(ten_vms):
    h = ten_vms
    long = make_spec(name="long", timeout="2h", concurrency="allow")
    SpecStore(h.blobs).write(long)
    for i in range(4):
        h.run_now(long, nonce=f"{i:04x}")
    for i in range(6):
        h.start(make_spec(name=f"s{i}", schedule="0 12 * * *"))
    assert len(h.live_vms()) == 10
    h.run_now(long, nonce="0004")  # the publisher's fifth: fits its share, not the stack: queued
    [waiting] = [r for r in h.records("long") if r.state == RunState.QUEUED]
    h.clock.advance(60)
    h.start(make_spec(name="tick", schedule="1 12 * * *"))
    assert h.record("tick", "20261122-1201").state == RunState.QUEUED
    now = h.clock.now()
    # One more manual start of the burst, its admission written, its share check not made yet.
    h.blobs.write(layout.usage_admitted(now.strftime("%Y-%m-%d"), "sc-long-m20261122-120105-0009-a1",
                                        int(now.timestamp()), 0, 2 + 5 / 60, manual=True), b"")
    for i in (0, 1):  # two scheduled runs end: room for two VMs
        assert h.finish_ok(f"s{i}", "20261122-1200").status_code == 200
    h.sweep()
    # 8 live + the burst's pending start + the tick = 10: the tick fits, whatever the manual run does.
    tick = h.record("tick", "20261122-1201")
    assert tick.state == RunState.RUNNING, (tick.state, tick.reason, h.record("long", waiting.run_id).state)
