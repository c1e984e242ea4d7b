"""First in, first out per limit: a run waiting for GPUs holds back only runs that need GPUs.

Before: one order across every limit kind. A GPU run waiting for max_gpus (held by a long GPU
run) held every younger run behind it, fresh ticks too (`queued_ahead`), though they needed no
GPU and live VMs and VM-hours had room: a CPU job's tick waited and ended `skipped` at its
deadline, as did every other scheduled run of the stack until the GPU run's own starting_deadline.
A run waiting for live VMs or VM-hours still holds back every run: they all use those.
"""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from spotcron.core.layout import LIVE
from spotcron.core.runs import RunState
from spotcron.core.settings import Limits
from spotcron.engine.live_index import parse_live_name
from spotcron.engine.queue_order import Waiting, holds_back
from spotcron.runtime import entrypoints
from spotcron.testing.harness import Harness, make_spec

GPU = {"type": "n1-standard-4", "gpu": {"type": "nvidia-tesla-t4", "count": 1}}
RUN = "20261122-1200"


def harness(**limits) -> Harness:
    return Harness(datetime(2026, 11, 22, 12, 0, 5, tzinfo=UTC), limits=Limits(max_vm_hours_per_day=100, **limits))


@pytest.fixture(autouse=True)
def _reset():
    yield
    entrypoints.use(None)


def marker(h: Harness, job: str, run_id: str = RUN):
    [entry] = [parse_live_name(n) for n in h.blobs.list(f"{LIVE}{job}/{run_id}/")]
    return entry


def test_a_run_waiting_for_gpus_does_not_hold_back_runs_that_need_none():
    h = harness(max_live_vms=5, max_gpus=1)
    train = make_spec(name="train", schedule="0 12 * * *", timeout="3h", machine=GPU)
    infer = make_spec(name="infer", schedule="0 12 * * *", timeout="1h", machine=GPU, starting_deadline="3h")
    report = make_spec(name="report", schedule="5 12 * * *", timeout="10m", starting_deadline="10m")
    assert h.start(train).status_code == 200
    assert h.record("train", RUN).state == RunState.RUNNING  # holds the one GPU for hours
    assert h.start(infer).status_code == 200
    assert h.record("infer", RUN).state == RunState.QUEUED  # waits for the GPU: fair
    assert marker(h, "infer").waits_for_gpus and marker(h, "infer").needs_gpus
    h.clock.set(datetime(2026, 11, 22, 12, 5, 5, tzinfo=UTC))
    assert h.start(report).status_code == 200  # no GPU; 1 of 5 live VMs; hours to spare
    for _ in range(3):
        h.clock.advance(300)
        assert h.sweep().status_code == 200
    record = h.record("report", "20261122-1205")
    assert record.state in (RunState.RUNNING, RunState.SUCCEEDED), f"report is {record.state}: {record.reason}"
    assert h.record("infer", RUN).state == RunState.QUEUED


def test_the_queue_pass_starts_a_queued_run_that_needs_no_gpu_past_one_waiting_for_gpus():
    h = harness(max_live_vms=2, max_gpus=1)
    assert h.start(make_spec(name="train", schedule="0 12 * * *", timeout="3h", machine=GPU)).status_code == 200
    assert h.start(make_spec(name="etl", schedule="0 12 * * *", timeout="1h")).status_code == 200
    assert sorted(h.live_vms()) == [f"sc-etl-{RUN}-a1", f"sc-train-{RUN}-a1"]  # both live VMs taken
    assert h.start(make_spec(name="infer", schedule="0 12 * * *", machine=GPU, starting_deadline="3h")).status_code == 200
    assert h.start(make_spec(name="report", schedule="0 12 * * *", starting_deadline="3h")).status_code == 200
    assert h.record("infer", RUN).state == RunState.QUEUED  # for a live VM, first
    assert not marker(h, "infer").waits_for_gpus
    assert h.record("report", RUN).state == RunState.QUEUED
    h.clock.advance(60)
    assert h.finish_ok("etl", RUN).status_code == 200  # a live VM frees; the GPU does not
    # The queue pass tries infer first: the GPU refuses it now. report needs none and takes the VM.
    assert h.record("infer", RUN).state == RunState.QUEUED
    assert h.record("report", RUN).state == RunState.RUNNING


def test_runs_that_need_gpus_still_wait_their_turn_behind_a_run_waiting_for_gpus():
    h = harness(max_live_vms=5, max_gpus=1)
    assert h.start(make_spec(name="train", schedule="0 12 * * *", timeout="3h", machine=GPU)).status_code == 200
    assert h.start(make_spec(name="infer", schedule="0 12 * * *", machine=GPU, starting_deadline="3h")).status_code == 200
    h.clock.set(datetime(2026, 11, 22, 12, 5, 5, tzinfo=UTC))
    assert h.start(make_spec(name="render", schedule="5 12 * * *", machine=GPU,
                             starting_deadline="3h")).status_code == 200
    render = h.record("render", "20261122-1205")
    assert render.state == RunState.QUEUED and "infer/20261122-1200 first" in render.reason
    assert marker(h, "render", "20261122-1205").waits_for_gpus  # behind a run waiting for GPUs: it waits for GPUs
    # So it holds back no run that needs none either.
    assert h.start(make_spec(name="report", schedule="5 12 * * *", starting_deadline="3h")).status_code == 200
    assert h.record("report", "20261122-1205").state == RunState.RUNNING
    h.clock.advance(60)
    assert h.finish_ok("train", RUN).status_code == 200  # the GPU frees: the older run gets it
    assert h.record("infer", RUN).state == RunState.RUNNING
    assert h.record("render", "20261122-1205").state == RunState.QUEUED


def test_a_run_waiting_for_a_live_vm_holds_back_every_run():
    h = harness(max_live_vms=1, max_gpus=4)
    assert h.start(make_spec(name="a", schedule="0 12 * * *", timeout="3h")).status_code == 200
    assert h.start(make_spec(name="infer", schedule="0 12 * * *", machine=GPU, starting_deadline="3h")).status_code == 200
    h.clock.set(datetime(2026, 11, 22, 12, 5, 5, tzinfo=UTC))
    assert h.start(make_spec(name="report", schedule="5 12 * * *", starting_deadline="3h")).status_code == 200
    assert "infer/20261122-1200 first" in h.record("report", "20261122-1205").reason
    h.clock.advance(60)
    assert h.finish_ok("a", RUN).status_code == 200
    assert h.record("infer", RUN).state == RunState.RUNNING  # the older run takes the freed VM
    assert h.record("report", "20261122-1205").state == RunState.QUEUED


def test_a_queued_marker_that_does_not_say_what_it_waits_for_holds_back_every_run():
    old = parse_live_name(f"{LIVE}infer/{RUN}/queued~-~-~-~1795350000~1795340000")  # written before markers said it
    assert old is not None and old.waits is None and old.needs_gpus is None and old.zone is None
    assert holds_back(old, manual=False, needs_gpus=False)
    waiting = Waiting.none()
    waiting.add(old.run_id, "gpus")
    assert waiting.holds("20261122-1300", needs_gpus=None)  # a run whose marker does not say may need GPUs
    assert not waiting.holds("20261122-1300", needs_gpus=False)
    manual = parse_live_name(f"{LIVE}infer/m20261122-115900-ab12/queued~-~-~-~1795350000~1795340000")
    assert not holds_back(manual, manual=False, needs_gpus=True)  # manual runs never hold back ticks
    assert holds_back(manual, manual=True, needs_gpus=False)
