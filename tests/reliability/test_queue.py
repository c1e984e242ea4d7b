"""A start refused by a stack limit waits for room instead of failing.

Before: the run ended `failed` ("refused by the stack limit max_live_vms"), so one job added beside
the examples made `make run` fail, and a bot's tick that landed while a benchmark ran was dropped.
"""

from __future__ import annotations

import pytest

from spotcron.core.layout import LIVE
from spotcron.core.runs import RunState
from spotcron.core.settings import Limits
from spotcron.engine.day_hours import read_day
from spotcron.engine.live_index import parse_live_name
from spotcron.runtime import entrypoints
from spotcron.testing.harness import Harness, make_spec

RUN = "20261122-1200"


@pytest.fixture
def one_vm():
    h = Harness(limits=Limits(max_live_vms=1))
    yield h
    entrypoints.use(None)


def state(h, job: str, run_id: str = RUN) -> RunState:
    return h.record(job, run_id, count=False).state


def test_a_run_refused_by_a_limit_is_queued_with_the_limit_as_its_reason(one_vm):
    h = one_vm
    h.start(make_spec(name="a"))
    assert h.start(make_spec(name="b")).status_code == 200
    record = h.record("b", RUN)
    assert record.state == RunState.QUEUED and record.owed == ()
    assert record.reason == ("waiting for room: refused by the stack limit max_live_vms: 1 job VMs are live and "
                             "the limit is 1; raise it under `limits:` in infra/stack.yaml if this load is expected")
    assert h.live_vms() == ["sc-a-20261122-1200-a1"]
    [queued] = [parse_live_name(n) for n in h.blobs.list(LIVE) if "/b/" in n]
    assert queued.kind == "queued"
    assert [e.data["type"] for e in h.events.published if e.data.get("job") == "b"] == ["run.scheduled", "run.queued"]
    # It holds no admission while it waits: no admission of its VM stands for the day.
    assert "sc-b-20261122-1200-a1" not in read_day(h.blobs, "2026-11-22").admitted


def test_a_queued_run_starts_as_soon_as_a_callback_frees_room(one_vm):
    h = one_vm
    h.start(make_spec(name="a"))
    h.start(make_spec(name="b"))
    h.clock.advance(60)
    assert h.finish_ok("a", RUN).status_code == 200
    assert state(h, "b") == RunState.RUNNING and h.live_vms() == ["sc-b-20261122-1200-a1"]
    assert h.record("b", RUN).reason is None


def test_queued_runs_start_in_tick_order_one_per_free_slot(one_vm):
    h = one_vm
    h.start(make_spec(name="a"))
    h.start(make_spec(name="z"))  # queued first
    h.clock.advance(60)
    h.start(make_spec(name="b", schedule="* * * * *"))  # a later tick, queued second
    h.clock.advance(60)
    h.finish_ok("a", RUN)
    assert state(h, "z") == RunState.RUNNING and state(h, "b", "20261122-1201") == RunState.QUEUED
    h.clock.advance(60)
    h.finish_ok("z", RUN)
    assert state(h, "b", "20261122-1201") == RunState.RUNNING


def test_the_sweep_starts_a_queued_run_once_a_vm_is_gone_without_a_callback(one_vm):
    h = one_vm
    h.start(make_spec(name="a"))
    h.start(make_spec(name="b"))
    h.compute.preempt("us-central1-a", "sc-a-20261122-1200-a1")
    h.clock.advance(h.settings.sweep_interval)
    assert h.sweep().status_code == 200
    # a's retry takes the slot its own VM freed (the sweep retries before it runs the queue); b waits on.
    assert h.live_vms() == ["sc-a-20261122-1200-a2"] and state(h, "b") == RunState.QUEUED
    h.clock.advance(60)
    h.finish_ok("a", RUN, attempt=2)
    assert state(h, "b") == RunState.RUNNING


def test_a_queued_run_still_waiting_at_its_starting_deadline_is_skipped_with_the_limit_as_reason(one_vm):
    h = one_vm
    h.start(make_spec(name="a", timeout="2h"))
    h.start(make_spec(name="b", starting_deadline="15m"))
    h.clock.advance(10 * 60)
    h.sweep()
    assert state(h, "b") == RunState.QUEUED
    h.clock.advance(6 * 60)
    assert h.sweep().status_code == 200
    record = h.record("b", RUN)
    assert record.state == RunState.SKIPPED
    assert record.reason.startswith("no room before its starting_deadline passed: refused by the stack limit "
                                    "max_live_vms: 1 job VMs are live")
    assert [e.data["state"] for e in h.events.of_type("run.finished") if e.data["job"] == "b"] == ["skipped"]
    assert h.compute.calls["create"] == 1


def test_a_queue_of_many_costs_one_admission_per_pass_while_there_is_no_room(one_vm):
    h = one_vm
    h.start(make_spec(name="a", timeout="2h"))
    for i in range(20):
        h.start(make_spec(name=f"q{i:02d}", timeout="2h", starting_deadline="1h"))
    h.clock.advance(h.settings.sweep_interval)
    before = dict(h.compute.calls)
    h.sweep()
    assert h.compute.calls["list"] - before["list"] == 2  # the sweep's own listing, one admission


def test_catalog_refusals_still_fail_at_once(h):
    from spotcron.core import layout

    payload = make_spec().to_payload()
    payload["machine"]["type"] = "zz9-plural-z-alpha"
    import json

    data = json.dumps(payload, sort_keys=True, separators=(",", ":")).encode()
    h.blobs.write(layout.deployed_spec("bot"), data)
    from spotcron.engine.deployed import digest_of

    h.start({"job": "bot", "digest": digest_of(data)})
    assert state(h, "bot") == RunState.FAILED
