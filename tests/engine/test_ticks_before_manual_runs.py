"""Under `concurrency: forbid` and `replace`, scheduled ticks go before manual runs: a manual run
(anyone who may publish on the start topic can ask for one) never ends or holds back a tick, and
a job still never has two runs at once where its policy forbids it."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from spotcron.core.runs import RunState
from spotcron.engine import transitions
from spotcron.engine.attempts import create_attempt
from spotcron.engine.deployed import SpecStore
from spotcron.engine.limits import Limits
from spotcron.engine.start_job import advance
from spotcron.engine.writer import create, step
from spotcron.runtime.run_end import install
from spotcron.testing.harness import Harness, make_spec

MANUAL = "m20261122-120005-beef"


class Receiver:
    """Webhook and ping receiver in memory: every POST is taken (200) and kept."""

    def __init__(self):
        self.urls: list[str] = []

    def __call__(self, url, data, headers):
        self.urls.append(url)
        return 200


def test_a_manual_run_does_not_end_a_running_scheduled_run_under_replace(h):
    spec = make_spec(name="nightly", schedule="0 12 * * *", timeout="2h", concurrency="replace")
    h.start(spec)  # the 12:00 tick, delivered at 12:00:05
    h.clock.advance(60)
    h.run_now(spec, nonce="beef")
    tick = h.record("nightly", "20261122-1200")
    assert tick.state == RunState.RUNNING, f"the scheduled run was ended by a manual run: {tick.state} ({tick.reason})"
    manual = h.record("nightly", "m20261122-120105-beef")
    assert manual.state == RunState.SKIPPED
    assert "scheduled run 20261122-1200 is live" in manual.reason and "concurrency: replace" in manual.reason
    assert h.live_vms() == ["sc-nightly-20261122-1200-a1"]


@pytest.mark.parametrize("policy", ["forbid", "replace"])
def test_a_scheduled_tick_ends_a_live_manual_run_as_cancelled_and_runs(h, policy):
    spec = make_spec(name="hourly", schedule="0 * * * *", timeout="6h", concurrency=policy)
    h.run_now(spec, nonce="beef")  # at 12:00:05, after the 12:00 tick's minute: nothing scheduled is live
    assert h.record("hourly", MANUAL).state == RunState.RUNNING
    h.clock.advance(3600)
    h.start(spec)  # the 13:00 tick
    tick = h.record("hourly", "20261122-1300")
    assert tick.state == RunState.RUNNING, f"the scheduled run was held back by a manual run: {tick.state} ({tick.reason})"
    manual = h.record("hourly", MANUAL)
    assert manual.state == RunState.CANCELLED, manual.reason
    assert manual.reason == (f"ended for scheduled run 20261122-1300: scheduled runs go before manual runs "
                             f"(concurrency: {policy})")
    assert h.live_vms() == ["sc-hourly-20261122-1300-a1"]  # never two VMs of the job at once


def test_a_manual_run_ended_for_a_tick_sends_no_failure_notice_nor_a_fail_ping(h):
    receiver = Receiver()
    install(h.deps, post=receiver, secrets=None)
    spec = make_spec(name="hourly", schedule="0 * * * *", timeout="6h", concurrency="forbid",
                     notify={"webhook": "http://hooks.example/spotcron", "ping": "https://hc-ping.com/abc"})
    h.run_now(spec, nonce="beef")
    h.clock.advance(3600)
    h.start(spec)  # the 13:00 tick ends the manual run
    h.clock.advance(60)
    h.run_now(spec, nonce="cafe")  # skipped: the tick is live
    h.sweep()  # whatever is still owed is done
    assert h.record("hourly", MANUAL).state == RunState.CANCELLED
    assert h.record("hourly", "m20261122-130105-cafe").state == RunState.SKIPPED
    # The starts pinged; nothing was POSTed to the webhook and no ping says "fail".
    assert receiver.urls == ["https://hc-ping.com/abc/start", "https://hc-ping.com/abc/start"]


def test_manual_runs_among_themselves_keep_the_policy(h):
    forbid = make_spec(name="f", schedule="0 0 1 1 *", timeout="6h", concurrency="forbid")
    h.run_now(forbid, nonce="aaaa")
    h.clock.advance(60)
    h.run_now(forbid, nonce="bbbb")
    assert h.record("f", "m20261122-120005-aaaa").state == RunState.RUNNING
    younger = h.record("f", "m20261122-120105-bbbb")
    assert younger.state == RunState.SKIPPED and "concurrency: forbid" in younger.reason
    replace = make_spec(name="r", schedule="0 0 1 1 *", timeout="6h", concurrency="replace")
    h.run_now(replace, nonce="cccc")
    h.clock.advance(60)
    h.run_now(replace, nonce="dddd")
    older = h.record("r", "m20261122-120105-cccc")
    assert older.state == RunState.FAILED and older.reason.startswith("replaced by run m20261122-120205-dddd")
    assert h.record("r", "m20261122-120205-dddd").state == RunState.RUNNING


def test_ticks_among_themselves_keep_forbid(h):
    spec = make_spec(name="hourly", schedule="0 * * * *", timeout="6h", concurrency="forbid")
    h.start(spec)  # 12:00
    h.clock.advance(3600)
    h.start(spec)  # 13:00
    later = h.record("hourly", "20261122-1300")
    assert later.state == RunState.SKIPPED
    assert later.reason == "previous run 20261122-1200 is still running (concurrency: forbid)"


def test_allow_runs_a_manual_run_beside_a_tick():
    h = Harness()
    try:
        spec = make_spec(name="both", schedule="0 * * * *", timeout="6h", concurrency="allow")
        h.start(spec)
        h.run_now(spec, nonce="beef")
        assert h.record("both", "20261122-1200").state == RunState.RUNNING
        assert h.record("both", MANUAL).state == RunState.RUNNING
    finally:
        h.close()


def test_a_dispatched_tick_ends_a_manual_run_too():
    """scheduling: shared: the dispatcher's start names its tick; the tick still goes first."""
    h = Harness(scheduling="shared")
    try:
        spec = make_spec(name="hourly", schedule="0 * * * *", timeout="6h", concurrency="forbid")
        h.deploy(spec)
        h.run_now(spec, nonce="beef")
        h.clock.advance(3600 - 5)  # 13:00:00
        h.dispatch()
        assert ("hourly", "2026-11-22T13:00:00Z") in h.deliver_starts()
        assert h.record("hourly", "20261122-1300").state == RunState.RUNNING
        assert h.record("hourly", MANUAL).state == RunState.CANCELLED
    finally:
        h.close()


def test_a_queued_manual_run_gives_way_and_a_queued_tick_holds_back_a_manual_run():
    """The queue starts runs later without asking the policy again: a run queued for room is live,
    and the rule holds for it as for a running one."""
    h = Harness(limits=Limits(max_live_vms=1, manual_share=1.0))
    try:
        filler = make_spec(name="filler", schedule="0 0 1 1 *", timeout="6h", concurrency="allow")
        spec = make_spec(name="hourly", schedule="0 * * * *", timeout="6h", concurrency="forbid")
        h.run_now(filler, nonce="f111")  # holds the one VM
        h.run_now(spec, nonce="beef")
        assert h.record("hourly", MANUAL).state == RunState.QUEUED
        h.clock.advance(3600)
        h.start(spec)  # 13:00: no room either, but the queued manual run is ended, not the tick skipped
        assert h.record("hourly", MANUAL).state == RunState.CANCELLED
        assert h.record("hourly", "20261122-1300").state == RunState.QUEUED
        h.clock.advance(60)
        h.run_now(spec, nonce="cafe")  # behind the queued tick: skipped, never queued beside it
        assert h.record("hourly", "m20261122-130105-cafe").state == RunState.SKIPPED
        h.finish_ok("filler", "m20261122-120005-f111")  # room frees: the tick starts
        assert h.record("hourly", "20261122-1300").state == RunState.RUNNING
    finally:
        h.close()


def _both_scheduled(h, policy: str):
    """A tick and a manual run of one job, both written and neither begun: two deliveries at once."""
    spec = make_spec(name="hourly", schedule="0 * * * *", timeout="6h", concurrency=policy)
    SpecStore(h.blobs).write(spec)  # deployed
    now = h.clock.now()
    tick = transitions.scheduled(spec, "20261122-1200", datetime(2026, 11, 22, 12, 0, tzinfo=UTC), now)
    manual = transitions.scheduled(spec, MANUAL, None, now)
    assert create(h.deps, manual) and create(h.deps, tick)
    return tick, manual


@pytest.mark.parametrize("policy", ["forbid", "replace"])
@pytest.mark.parametrize("first", ["tick", "manual"])
def test_a_tick_and_a_manual_run_starting_at_once_leave_the_tick_running(h, policy, first):
    tick, manual = _both_scheduled(h, policy)
    order = [tick, manual] if first == "tick" else [manual, tick]
    for record in order:
        advance(h.deps, record.job, record.run_id)
    assert h.record("hourly", tick.run_id).state == RunState.RUNNING
    assert h.record("hourly", MANUAL).state in (RunState.SKIPPED, RunState.CANCELLED)
    assert h.live_vms() == ["sc-hourly-20261122-1200-a1"]


def test_a_manual_run_that_began_before_the_tick_was_written_gives_way_and_makes_no_vm_after(h):
    """The manual run's delivery read the live runs before the tick existed and began; the tick
    ends it before its VM is made, and the manual delivery, going on, makes none."""
    tick, manual = _both_scheduled(h, "forbid")
    spec = transitions.spec_of(manual)
    first = transitions.new_attempt(manual, spec, h.settings.zones)
    begun = step(h.deps, "hourly", MANUAL, transitions.Begin(first)).record  # past its concurrency check
    advance(h.deps, "hourly", tick.run_id)
    assert h.record("hourly", MANUAL).state == RunState.CANCELLED
    create_attempt(h.deps, begun, claimed=True)  # the manual delivery goes on to its insert
    assert h.record("hourly", MANUAL).state == RunState.CANCELLED
    assert h.record("hourly", tick.run_id).state == RunState.RUNNING
    assert h.live_vms() == ["sc-hourly-20261122-1200-a1"]
