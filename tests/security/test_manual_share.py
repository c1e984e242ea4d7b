"""A publisher of manual runs cannot switch scheduled work off through the stack's limits.

Before: manual runs were admitted under the same stack-wide limits with nothing kept for
scheduled ticks; a few manual runs of a long job filled max_live_vms (or the day's VM-hours) and
every other job's ticks queued and ended `skipped`. Now manual runs together hold at most
`limits.manual_share` of each limit, and a manual run waiting in the queue never holds a tick
behind it.
"""

from __future__ import annotations

import pytest

from spotcron.core.runs import RunState
from spotcron.core.settings import Limits
from spotcron.engine.deployed import SpecStore
from spotcron.runtime import entrypoints
from spotcron.testing.harness import Harness, make_spec

TICK = "20261122-1200"


@pytest.fixture
def limited():
    made: list[Harness] = []

    def make(**limits) -> Harness:
        made.append(Harness(limits=Limits(**limits)))
        return made[-1]

    yield make
    entrypoints.use(None)


def manual_runs(h: Harness, job: str, count: int) -> list:
    spec = make_spec(name=job, timeout="2h", concurrency="allow")
    SpecStore(h.blobs).write(spec)
    for i in range(count):
        h.run_now(spec, nonce=f"{i:04x}")
    return sorted(h.records(job), key=lambda r: r.run_id)


def test_manual_runs_hold_at_most_their_share_of_live_vms(limited):
    h = limited(max_live_vms=4)  # manual_share 0.5: two VMs for manual runs, two kept for ticks
    flood = manual_runs(h, "long", 4)
    assert sorted(r.state for r in flood) == ["queued", "queued", "running", "running"]
    queued = next(r for r in flood if r.state == RunState.QUEUED)
    assert "manual share" in queued.reason
    for name in ("a", "b"):
        h.start(make_spec(name=name))
        assert h.record(name, TICK).state == RunState.RUNNING


def test_manual_runs_hold_at_most_their_share_of_the_days_vm_hours(limited):
    h = limited(max_vm_hours_per_day=5)  # each run reserves 2h05m: two manual runs would take 4.2 of 5
    flood = manual_runs(h, "long", 3)
    assert [r.state for r in flood].count(RunState.RUNNING) == 1  # 2.08 fits in 2.5, a second does not
    h.start(make_spec(name="a", timeout="2h"))
    assert h.record("a", TICK).state == RunState.RUNNING


def test_a_manual_run_waiting_in_the_queue_never_holds_a_tick_behind_it(limited):
    h = limited(max_live_vms=2)  # one VM for manual runs
    first, second = manual_runs(h, "long", 2)
    assert (first.state, second.state) == (RunState.RUNNING, RunState.QUEUED)
    h.clock.advance(60)
    h.start(make_spec(name="a", schedule="1 12 * * *"))  # the last free slot
    h.start(make_spec(name="b", schedule="1 12 * * *"))  # queued for room, behind the manual run
    assert h.record("b", "20261122-1201").state == RunState.QUEUED
    h.clock.advance(60)
    assert h.finish_ok("a", "20261122-1201").status_code == 200  # a slot frees; the manual share is still full
    assert h.record("b", "20261122-1201").state == RunState.RUNNING
    assert h.record("long", second.run_id).state == RunState.QUEUED


def test_manual_share_one_lets_manual_runs_take_everything(limited):
    h = limited(max_live_vms=2, manual_share=1.0)
    assert [r.state for r in manual_runs(h, "long", 2)] == [RunState.RUNNING] * 2


def test_a_manual_run_that_could_never_fit_its_share_fails_at_once(limited):
    h = limited(max_live_vms=4, manual_share=0.0)
    [run] = manual_runs(h, "long", 1)
    assert run.state == RunState.FAILED and "manual share" in run.reason


def test_the_share_kept_for_ticks_rounds_in_their_favour():
    assert Limits(max_live_vms=1).manual_caps()[0] == 0
    assert Limits(max_live_vms=3, max_gpus=1).manual_caps()[:2] == (1, 0)
    assert Limits(max_live_vms=20, max_gpus=4, max_vm_hours_per_day=48).manual_caps() == (10, 2, 24.0)
