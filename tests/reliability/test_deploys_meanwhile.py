"""A run that waits while its job changes, and ticks that a deploy overtakes.

A queued run copied its spec when it was triggered; if its job was paused, removed or deployed
again meanwhile, it ends without a VM (engine/still_deployed.py). A tick whose message names the
digest deployed when it fired still runs after a deploy replaced that spec (engine/deployed.py),
and a queue pass that loses its dequeue to another leaves no admission behind.
"""

from __future__ import annotations

import pytest

from spotcron.core import layout
from spotcron.core.runs import RunState
from spotcron.core.settings import Limits
from spotcron.engine import transitions
from spotcron.engine.day_hours import read_day
from spotcron.engine.deployed import SpecStore, start_message
from spotcron.engine.writer import step
from spotcron.runtime import entrypoints
from spotcron.testing.harness import Harness, make_spec

RUN = "20261122-1200"


@pytest.fixture
def one_vm():
    h = Harness(limits=Limits(max_live_vms=1))
    yield h
    entrypoints.use(None)


def _queued_b(h: Harness):
    h.start(make_spec(name="a"))
    h.start(make_spec(name="b"))
    assert h.record("b", RUN, count=False).state == RunState.QUEUED


@pytest.mark.parametrize("change", ["paused", "removed", "redeployed"])
def test_a_queued_run_whose_job_changed_ends_and_never_gets_a_vm(one_vm, change):
    h = one_vm
    _queued_b(h)
    if change == "paused":
        SpecStore(h.blobs).write(make_spec(name="b", paused=True))
    elif change == "removed":
        h.blobs.delete(layout.deployed_spec("b"))
    else:
        SpecStore(h.blobs).write(make_spec(name="b", image="europe-docker.pkg.dev/p/r/bot:2"))
    h.clock.advance(60)
    assert h.finish_ok("a", RUN).status_code == 200  # room frees: the queue takes b up
    record = h.record("b", RUN, count=False)
    assert record.state == RunState.SKIPPED and record.terminal
    assert "gets no VM" in record.reason and not record.had_vm
    assert h.compute.peek(h.settings.zones[0], "sc-b-20261122-1200-a1") is None
    assert not [name for name in h.compute.created if name.name.startswith("sc-b-")]
    # Nothing stays reserved for it.
    day = read_day(h.blobs, "2026-11-22")
    assert day.hours_of("sc-b-20261122-1200-a1") == 0.0


def test_a_queued_run_of_an_unchanged_job_still_starts(one_vm):
    h = one_vm
    _queued_b(h)
    SpecStore(h.blobs).write(make_spec(name="b"))  # deployed again as it was
    h.clock.advance(60)
    h.finish_ok("a", RUN)
    assert h.record("b", RUN, count=False).state == RunState.RUNNING


def test_a_retry_of_a_removed_job_gets_no_vm(one_vm):
    h = one_vm
    h.start(make_spec(name="a"))
    h.blobs.delete(layout.deployed_spec("a"))
    h.clock.advance(60)
    h.callback("a", RUN, status="preempted", exit_code=None)
    record = h.record("a", RUN, count=False)
    assert record.state == RunState.CANCELLED and "no longer deployed" in record.reason
    assert [r.name for r in h.compute.created if r.name.startswith("sc-a-")] == ["sc-a-20261122-1200-a1"]


def test_a_tick_overtaken_by_a_deploy_still_runs_the_deployed_spec():
    h = Harness()
    try:
        old = make_spec(name="a")
        new = make_spec(name="a", image="europe-docker.pkg.dev/p/r/bot:2")
        SpecStore(h.blobs).write(old)
        message = start_message(old)  # what the entry published at 12:00
        SpecStore(h.blobs).write(new)  # a deploy lands before the message is handled
        assert h.start(message).status_code == 200
        record = h.record("a", RUN)
        assert record.state == RunState.RUNNING
        assert record.spec["image"] == new.image  # what is deployed now, never the replaced image
    finally:
        h.close()


def test_a_digest_never_deployed_is_still_refused():
    h = Harness()
    try:
        SpecStore(h.blobs).write(make_spec(name="a"))
        forged = start_message(make_spec(name="a", image="evil.example/x:1"))
        h.start(forged)
        assert h.records("a") == []
    finally:
        h.close()


def test_a_manual_run_must_name_the_current_digest():
    h = Harness()
    try:
        old = make_spec(name="a")
        SpecStore(h.blobs).write(old)
        SpecStore(h.blobs).write(make_spec(name="a", image="europe-docker.pkg.dev/p/r/bot:2"))
        h.start(start_message(old), attributes={"trigger": "manual", "nonce": "ab12"})
        assert h.records("a") == []
    finally:
        h.close()


def test_an_admission_written_by_a_pass_that_loses_the_dequeue_is_withdrawn(one_vm, monkeypatch):
    h = one_vm
    _queued_b(h)
    h.clock.advance(60)
    real_step = step

    def racing_step(deps, job, run_id, event, **kwargs):
        if isinstance(event, transitions.Dequeue):
            real_step(deps, job, run_id, transitions.QueueExpired("ended by another pass"))
        return real_step(deps, job, run_id, event, **kwargs)

    monkeypatch.setattr("spotcron.engine.queue.step", racing_step)
    # Room frees (a ends) and the callback's queue pass admits b, but before its dequeue lands
    # another pass ends b.
    assert h.finish_ok("a", RUN).status_code == 200
    assert h.record("b", RUN, count=False).state == RunState.SKIPPED
    assert "sc-b-20261122-1200-a1" not in read_day(h.blobs, "2026-11-22").admitted


def test_a_fresh_start_a_deploy_overtakes_before_its_insert_withdraws_its_admission():
    """The deploy lands after the start wrote its admission: the run ends without a VM, and the
    admission is taken back (left standing it would hold its hours all day)."""
    h = Harness(limits=Limits(max_live_vms=5, max_vm_hours_per_day=10))
    try:
        spec = make_spec(name="a", timeout="1h")
        write, landed = h.blobs.write, []

        def deploy_after_the_admission(name, data, **kwargs):
            written = write(name, data, **kwargs)
            if name.startswith(layout.LIMITS) and not landed:
                landed.append(name)
                SpecStore(h.blobs).write(make_spec(name="a", timeout="1h", paused=True))
            return written

        h.blobs.write = deploy_after_the_admission
        h.start(spec)
        h.blobs.write = write
        assert landed, "the start wrote no admission"
        record = h.record("a", RUN, count=False)
        assert record.state == RunState.SKIPPED and "paused" in (record.reason or ""), (record.state, record.reason)
        assert not [r for r in h.compute.created if r.name.startswith("sc-a-")]
        assert h.blobs.peek(landed[0]) is None, "the admission of a run that got no VM was left standing"
        assert read_day(h.blobs, "2026-11-22").hours == 0
    finally:
        entrypoints.use(None)


def test_the_simulation_counts_no_vm_for_a_spec_a_deploy_replaced_while_its_start_listed_vms():
    """The month simulation's invariant, where it bites: starts hang while listing the live VMs
    for their admission (a slow listing, a cold start) and their own job is paused or deployed
    again meanwhile; every VM that lands is checked against what is deployed then."""
    from spotcron.testing.simulation.loop import simulate
    from spotcron.testing.simulation.world import FaultRates, SimConfig

    report = simulate(SimConfig(days=1, jobs=12, seed=11, drain_hours=3, deploy_every_h=0.25,
                                faults=FaultRates(stalled_delivery=0.3)))
    assert report.counts["stalled admissions"] > 0 and report.counts["stalled inserts"] > 0
    assert report.invariant("vm_for_undeployed_spec") == 0, report.details
    assert report.ok, report.details
