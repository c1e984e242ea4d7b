"""Head-of-line blocking across limits: a GPU run waiting for max_gpus (held by a long GPU run)
holds every younger run behind it, fresh ticks too (`queued_ahead`), though they need no GPU and
live VMs and VM-hours have room: a CPU job's tick waits and ends `skipped` at its deadline, and
so does every other scheduled run of the stack until the GPU run's own starting_deadline."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from spotcron.core.runs import RunState
from spotcron.core.settings import Limits
from spotcron.runtime import entrypoints
from spotcron.testing.harness import Harness, make_spec

GPU = {"type": "n1-standard-4", "gpu": {"type": "nvidia-tesla-t4", "count": 1}}


@pytest.fixture
def h():
    harness = Harness(datetime(2026, 11, 22, 12, 0, 5, tzinfo=UTC),
                      limits=Limits(max_live_vms=5, max_gpus=1, max_vm_hours_per_day=100))
    yield harness
    entrypoints.use(None)


def test_a_run_waiting_for_gpus_does_not_hold_back_runs_that_need_none(h):
    train = make_spec(name="train", schedule="0 12 * * *", timeout="3h", machine=GPU)
    infer = make_spec(name="infer", schedule="0 12 * * *", timeout="1h", machine=GPU, starting_deadline="3h")
    report = make_spec(name="report", schedule="5 12 * * *", timeout="10m", starting_deadline="10m")
    assert h.start(train).status_code == 200
    assert h.record("train", "20261122-1200").state == RunState.RUNNING  # holds the one GPU for hours
    assert h.start(infer).status_code == 200
    assert h.record("infer", "20261122-1200").state == RunState.QUEUED  # waits for the GPU: fair
    h.clock.set(datetime(2026, 11, 22, 12, 5, 5, tzinfo=UTC))
    assert h.start(report).status_code == 200  # no GPU; 1 of 5 live VMs; hours to spare
    for _ in range(3):
        h.clock.advance(300)
        assert h.sweep().status_code == 200
    record = h.record("report", "20261122-1205")
    assert record.state in (RunState.RUNNING, RunState.SUCCEEDED), f"report is {record.state}: {record.reason}"
