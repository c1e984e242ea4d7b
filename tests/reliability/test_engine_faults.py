"""Engine-level situations of RELIABILITY.md that tests/engine/ does not put the system in.

Each drives the real functions through functions-framework on the in-memory backends, with the
fault placed deterministically where the seeded simulation only places it by chance.
"""

from __future__ import annotations

import time

import pytest

from spotcron.core import layout
from spotcron.core.descriptor import RunDescriptor
from spotcron.core.errors import CreateFailed
from spotcron.testing.harness import make_spec

RUN = "20261122-1200"
VM = "sc-bot-20261122-1200-a1"
ZONE = "us-central1-a"
CLOUD_SCHEDULER_HTTP_ATTEMPT_DEADLINE_S = 180  # the default; Pub/Sub targets have none at all


def test_start_job_answers_quickly_even_when_every_zone_is_slow_and_out(h, monkeypatch):
    """The worst case is one insert per zone plus the on-demand fallback, with no polling."""
    h.compute.create_delay_s = lambda request: 30.0  # each insert takes 30 s
    h.compute.fail_create(CreateFailed(CreateFailed.STOCKOUT, "ZONE_RESOURCE_POOL_EXHAUSTED"), times=3)

    def no_real_sleep(seconds: float) -> None:
        raise AssertionError(f"slept {seconds} s for real: waits belong on the harness's clock")

    # The inserts' 30 s pass on the fake clock only; a real sleep would make the test slow, not
    # the engine, so it fails at once instead.
    monkeypatch.setattr(time, "sleep", no_real_sleep)
    started = h.clock.now()
    assert h.start(make_spec(on_demand_fallback=True)).status_code == 200
    elapsed = (h.clock.now() - started).total_seconds()
    assert h.compute.calls == {"create": 4, "get": 0, "list": 1, "delete": 0}  # the list: stack limits
    assert elapsed == 4 * 30  # inserts only: nothing waits for the VM to boot
    assert elapsed < CLOUD_SCHEDULER_HTTP_ATTEMPT_DEADLINE_S
    assert h.record("bot", RUN).state == "running"


@pytest.mark.parametrize("nth_write", [1, 2, 3])
def test_a_copy_delivered_in_the_middle_of_the_first_delivery_runs_once(h, nth_write):
    """The copy runs to the end between two storage writes of the first delivery."""
    spec, writes, copies = make_spec(), [], []

    def cut_in(name: str) -> bool:
        if name.endswith("run.json"):
            writes.append(name)
            if len(writes) == nth_write and not copies:
                copies.append(None)  # first, since the copy's own writes come through here too
                copies[0] = h.start(spec).status_code
        return False

    h.blobs.fail_writes = cut_in
    assert h.start(spec).status_code == 200
    assert copies == [200]
    assert len(h.compute.created) == 1 and h.live_vms() == [VM]
    assert [r.run_id for r in h.records("bot")] == [RUN]
    assert h.record("bot", RUN).state == "running"
    assert len(h.events.of_type("run.scheduled")) == 1 and len(h.events.of_type("run.started")) == 1


def test_a_copy_delivered_while_the_first_insert_is_in_flight_is_adopted(h):
    spec, copies = make_spec(), []

    def slow_insert(request) -> float:
        if not copies:
            copies.append(None)
            copies[0] = h.start(spec).status_code  # arrives while the first insert is in flight
        return 5.0

    h.compute.create_delay_s = slow_insert
    assert h.start(spec).status_code == 200
    assert copies == [200]
    assert h.compute.calls["create"] == 2 and len(h.compute.created) == 1
    assert h.live_vms() == [VM] and h.record("bot", RUN).state == "running"


def test_a_late_copy_of_a_tick_that_already_runs_changes_nothing(h):
    spec, published = make_spec(), h.clock.now()
    h.start(spec)
    h.clock.advance(20 * 60)  # far past starting_deadline (10 min)
    assert h.start(spec, publish_time=published).status_code == 200
    assert h.record("bot", RUN).state == "running"
    assert len(h.compute.created) == 1


def test_preempted_during_upload_without_a_callback_is_retried_and_never_a_success(h):
    h.start(make_spec(checkpoint="/checkpoint"))
    h.upload("bot", RUN, manifest=False)  # logs and part of the results landed, then the VM vanished
    h.blobs.write(layout.checkpoint_prefix("bot", RUN) + "state.json", b'{"step": 40}')
    h.compute.preempt(ZONE, VM)
    h.clock.advance(5 * 60)
    h.sweep()
    record = h.record("bot", RUN)
    assert record.state == "running" and record.results_prefix is None
    assert [(a.number, a.zone, a.outcome) for a in record.attempts] == [
        (1, ZONE, "lost"), (2, "us-central1-b", None)]
    descriptor = RunDescriptor.from_metadata(h.compute.created[-1].metadata["spotcron-run"])
    assert (descriptor.attempt, descriptor.prefix, descriptor.checkpoint_path) == (2, f"runs/bot/{RUN}/", "/checkpoint")
    assert h.blobs.read(layout.checkpoint_prefix("bot", RUN) + "state.json") is not None  # for attempt 2
    h.finish_ok("bot", RUN, 2)
    record = h.record("bot", RUN)
    assert record.state == "succeeded" and record.results_prefix == f"runs/bot/{RUN}/attempt-2/"
    assert h.blobs.list(layout.results_prefix("bot", RUN, 1)) == [f"runs/bot/{RUN}/attempt-1/results/out.json"]


def test_preempted_after_the_manifest_without_a_callback_succeeds_from_the_manifest(h):
    h.start(make_spec())
    h.upload("bot", RUN)
    h.compute.preempt(ZONE, VM)
    h.clock.advance(3 * 60)
    h.sweep()
    record = h.record("bot", RUN)
    assert record.state == "succeeded" and record.results_prefix == f"runs/bot/{RUN}/attempt-1/"
    assert record.current_attempt.outcome == "exited"


def test_callback_lost_and_vm_powered_off_is_deleted_and_finished_from_its_manifest(h):
    h.start(make_spec())
    h.upload("bot", RUN, exit_code=4)
    h.compute.set_status(ZONE, VM, "TERMINATED")  # the runner gave up calling back and powered off
    h.clock.advance(3 * 60)
    h.sweep()
    assert h.live_vms() == [] and h.compute.deleted == [(ZONE, VM)]
    record = h.record("bot", RUN)
    assert record.state == "failed"
    assert record.reason == "the job exited with code 4 (callback lost)"


def test_a_storage_error_after_job_done_deleted_the_vm_is_finished_by_the_sweep(h):
    h.start(make_spec())
    h.upload("bot", RUN)
    record_name = layout.run_record("bot", RUN)
    failed: list[str] = []

    def once_on_the_record(name: str) -> bool:
        if name == record_name and not failed:
            failed.append(name)
            return True
        return False

    h.blobs.fail_writes = once_on_the_record
    response = h.callback("bot", RUN)
    assert response.status_code == 503 and response.get_json()["retry"] is True
    assert h.live_vms() == []  # deleted before the record could be written; the runner cannot retry
    assert h.record("bot", RUN).state == "running"
    h.clock.advance(3 * 60)
    h.sweep()
    record = h.record("bot", RUN)
    assert record.state == "succeeded" and record.results_prefix == f"runs/bot/{RUN}/attempt-1/"


def test_a_vm_recreated_for_an_attempt_is_never_alive_twice(h):
    """The insert landed, the record update after it failed, and the VM vanished before the
    redelivery: the redelivery's insert (same requestId) creates nothing, the run is retried.
    Never two VMs of one attempt at the same time, and the run still ends once."""
    writes: list[str] = []

    def third_record_write(name: str) -> bool:
        if name.endswith("run.json"):
            writes.append(name)
            return len(writes) == 3  # created, starting, running <- this one fails
        return False

    h.blobs.fail_writes = third_record_write
    assert h.start(make_spec()).status_code == 500
    assert h.live_vms() == [VM] and h.record("bot", RUN).state == "starting"
    h.blobs.fail_writes = None
    h.compute.preempt(ZONE, VM)
    h.clock.advance(10)
    assert h.start(make_spec()).status_code == 200
    # The redelivery's insert carries the attempt's requestId: Compute Engine answers it with the
    # first insert's operation and creates nothing. The run records the VM that insert made,
    # which is gone, and the sweep finds it so and retries.
    assert h.live_vms() == [] and [r.name for r in h.compute.created] == [VM]
    h.clock.advance(3 * 60)
    assert h.sweep().status_code == 200
    record = h.record("bot", RUN)
    assert record.current_attempt.number == 2 and h.live_vms() == [record.current_attempt.vm_name]
    h.finish_ok("bot", RUN, 2)
    assert h.record("bot", RUN).state == "succeeded" and h.live_vms() == []
    assert len(h.events.of_type("run.finished")) == 1


def test_history_is_pruned_while_vms_keep_vanishing(h):
    spec = make_spec(schedule="*/5 * * * *", history_limit=2, retries={"preemption": 0})
    for _ in range(5):
        h.start(spec)
        h.compute.preempt(ZONE, h.compute.all_instances()[0].name)
        h.clock.advance(5 * 60)
        h.sweep()
    assert [(r.run_id, r.state) for r in h.records("bot")] == [("20261122-1215", "lost"), ("20261122-1220", "lost")]
    assert sorted({name.split("/")[2] for name in h.blobs.list("runs/bot/")}) == ["20261122-1215", "20261122-1220"]
    assert h.deps.store.pruned_through("bot") == "20261122-1210"
    assert h.live_vms() == [] and h.deps.store.live_runs() == []
