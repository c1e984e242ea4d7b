"""Delivery, duplicates and concurrency (RELIABILITY.md), through the start_job entry point."""

from __future__ import annotations

import threading
from datetime import timedelta

import pytest

from spotcron.core.errors import CreateFailed, Transient
from spotcron.engine.deployed import SpecStore
from spotcron.engine.ports import Instance
from spotcron.runtime import entrypoints
from spotcron.testing.harness import Harness, make_spec

RUN = "20261122-1200"
VM = "sc-bot-20261122-1200-a1"


@pytest.fixture(params=["per-job", "shared"])
def h(request):
    """Every situation twice: messages as a job's own scheduler entry sends them (the tick inferred
    from the publish time) and as the dispatcher of `scheduling: shared` sends them (the exact tick)."""
    harness = Harness(scheduling=request.param)
    yield harness
    entrypoints.use(None)


def test_a_tick_starts_one_spot_vm_and_one_record(h):
    response = h.start(make_spec())
    assert response.status_code == 200
    record = h.record("bot", RUN)
    assert record.state == "running"
    assert [a.vm_name for a in record.attempts] == [VM]
    assert h.live_vms() == [VM]
    request = h.compute.created[0]
    assert request.spot and request.zone == "us-central1-a"
    assert request.max_run_duration_s == 600 + h.settings.grace
    assert dict(request.labels) == {"spotcron": "1", "job": "bot", "run": RUN, "attempt": "1"}
    assert set(request.metadata) == {"spotcron-run", "user-data"}
    # start_job makes one insert and waits for nothing: no polling of the VM; one listing of the
    # managed VMs counts them (and their GPUs) against the stack's limits before the insert.
    assert h.compute.calls == {"create": 1, "get": 0, "list": 1, "delete": 0}
    assert [p.data["type"] for p in h.events.published] == ["run.scheduled", "run.started"]


def test_the_same_tick_delivered_twice_in_sequence_runs_once(h):
    h.start(make_spec())
    h.clock.advance(30)
    h.start(make_spec(), publish_time=h.clock.now())
    assert len(h.compute.created) == 1
    assert [r.run_id for r in h.records("bot")] == [RUN]
    assert h.record("bot", RUN).attempts[0].vm_name == VM


def test_the_same_tick_delivered_concurrently_runs_once(h):
    spec = make_spec()
    barrier = threading.Barrier(8)
    statuses = []

    def deliver():
        barrier.wait()
        statuses.append(h.start(spec).status_code)

    threads = [threading.Thread(target=deliver) for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert statuses == [200] * 8
    assert len(h.compute.created) == 1
    assert h.live_vms() == [VM]
    assert [r.run_id for r in h.records("bot")] == [RUN]
    assert h.record("bot", RUN).state == "running"


def test_a_create_that_timed_out_but_succeeded_is_adopted(h):
    h.compute.fail_create(Transient("deadline exceeded"), succeed_anyway=True)
    assert h.start(make_spec()).status_code == 200
    assert h.record("bot", RUN).state == "running"
    assert h.live_vms() == [VM]


def test_a_create_that_timed_out_and_failed_is_retried_by_redelivery(h):
    h.compute.fail_create(Transient("deadline exceeded"))
    first = h.start(make_spec())
    assert first.status_code == 500  # Pub/Sub redelivers
    assert h.record("bot", RUN).state == "starting"
    assert h.start(make_spec()).status_code == 200
    assert h.record("bot", RUN).state == "running"
    assert len(h.compute.created) == 1


def test_a_vm_with_our_name_but_not_our_label_is_never_touched(h):
    foreign = Instance(name=VM, zone="us-central1-a", status="RUNNING", labels={"team": "data"},
                       machine_type="e2-small", provisioning_model="STANDARD", created_at=h.clock.now())
    h.compute.add_foreign(foreign)
    h.start(make_spec())
    record = h.record("bot", RUN)
    assert record.state == "failed"
    assert f"a VM named {VM} exists in us-central1-a without the spotcron label; it was left alone" == record.reason
    h.clock.advance(3 * 3600)
    h.sweep()
    assert h.compute.all_instances() == [foreign]
    assert h.compute.calls["delete"] == 0


def test_a_trigger_after_the_starting_deadline_is_recorded_as_missed(h):
    spec = make_spec(starting_deadline="5m")
    SpecStore(h.blobs).write(spec)  # deployed at 12:00:05
    published = h.clock.now()  # the tick's message, published in its minute, is delivered late
    h.clock.advance(10 * 60)  # 12:10:05, the 12:00 tick is 605 s old
    h.start(spec, publish_time=published)
    record = h.record("bot", RUN)
    assert record.state == "skipped"
    assert record.reason == "missed: the trigger arrived 605s after its 12:00 UTC tick (starting_deadline 300s)"
    assert h.compute.created == []


def test_forbid_skips_a_tick_while_the_previous_run_is_alive(h):
    spec = make_spec(schedule="*/5 * * * *", concurrency="forbid")
    h.start(spec)
    h.clock.advance(5 * 60)
    h.start(spec)
    later = h.record("bot", "20261122-1205")
    assert later.state == "skipped"
    assert later.reason == "previous run 20261122-1200 is still running (concurrency: forbid)"
    assert len(h.compute.created) == 1


def test_allow_runs_both(h):
    spec = make_spec(schedule="*/5 * * * *", concurrency="allow")
    h.start(spec)
    h.clock.advance(5 * 60)
    h.start(spec)
    assert h.record("bot", "20261122-1205").state == "running"
    assert len(h.live_vms()) == 2


def test_replace_deletes_the_old_vm_and_starts_the_new_one(h):
    spec = make_spec(schedule="*/5 * * * *", concurrency="replace")
    h.start(spec)
    h.clock.advance(5 * 60)
    h.start(spec)
    old = h.record("bot", RUN)
    assert old.state == "failed" and old.reason == "replaced by run 20261122-1205 (concurrency: replace)"
    assert h.live_vms() == ["sc-bot-20261122-1205-a1"]


def test_a_manual_run_does_not_swallow_the_next_scheduled_run(h):
    spec = make_spec()
    h.start(spec, attributes={"trigger": "manual", "nonce": "ab12"})
    manual = [r for r in h.records("bot") if r.trigger == "manual"]
    assert [r.run_id for r in manual] == ["m20261122-120005-ab12"]
    h.finish_ok("bot", "m20261122-120005-ab12")
    h.clock.advance(4 * 3600)  # the 16:00 tick
    h.start(spec)
    assert h.record("bot", "20261122-1600").state == "running"
    assert h.record("bot", "m20261122-120005-ab12").state == "succeeded"


def test_a_paused_job_does_not_run(h):
    h.start(make_spec(paused=True))
    assert h.records("bot") == [] and h.compute.created == []


def test_a_paused_job_still_runs_when_asked_by_hand(h):
    """docs/jobs.md: `spotcron run JOB` is how a paused job is tried."""
    h.run_now(make_spec(paused=True))
    [record] = h.records("bot")
    assert record.run_id.startswith("m") and len(h.compute.created) == 1


def test_every_matrix_entry_is_its_own_run(h):
    spec = make_spec(matrix=[{"name": "small", "machine": {"type": "e2-standard-2"}},
                             {"name": "big", "machine": {"type": "n1-highcpu-16"}, "env": {"SIZE": "big"}}])
    h.start(spec)
    runs = {r.run_id: r for r in h.records("bot")}
    assert set(runs) == {"20261122-1200-small", "20261122-1200-big"}
    assert sorted(r.machine_type for r in h.compute.created) == ["e2-standard-2", "n1-highcpu-16"]
    assert runs["20261122-1200-big"].current_attempt.machine_type == "n1-highcpu-16"


def test_a_matrix_entry_runs_its_own_image_and_local_command(h):
    from spotcron.core.descriptor import METADATA_KEY, RunDescriptor

    spec = make_spec(local={"command": "python3 cpu.py"},
                     matrix=[{"name": "cpu"},
                             {"name": "t4", "image": "spotcron/bot:cuda", "local": {"command": "python3 gpu.py"},
                              "machine": {"type": "n1-standard-8", "gpu": {"type": "nvidia-tesla-t4"}}}])
    h.start(spec)
    descriptors = {r.labels["run"]: RunDescriptor.from_metadata(r.metadata[METADATA_KEY]) for r in h.compute.created}
    cpu, t4 = descriptors["20261122-1200-cpu"], descriptors["20261122-1200-t4"]
    assert (cpu.image, cpu.local_command) == (spec.image, ["python3", "cpu.py"])
    assert (t4.image, t4.local_command) == ("spotcron/bot:cuda", ["python3", "gpu.py"])


def test_stockout_moves_to_the_next_zone(h):
    h.compute.fail_create(CreateFailed(CreateFailed.STOCKOUT, "ZONE_RESOURCE_POOL_EXHAUSTED"), zone="us-central1-a")
    h.compute.fail_create(CreateFailed(CreateFailed.STOCKOUT, "ZONE_RESOURCE_POOL_EXHAUSTED_WITH_DETAILS"),
                          zone="us-central1-b")
    h.start(make_spec())
    record = h.record("bot", RUN)
    assert record.state == "running" and record.current_attempt.zone == "us-central1-c"
    assert [r.zone for r in h.compute.created] == ["us-central1-c"]


def test_all_zones_out_falls_back_to_on_demand_when_allowed(h):
    h.compute.fail_create(CreateFailed(CreateFailed.STOCKOUT, "ZONE_RESOURCE_POOL_EXHAUSTED"), times=3)
    h.start(make_spec(on_demand_fallback=True))
    record = h.record("bot", RUN)
    assert record.state == "running"
    assert record.current_attempt.provisioning_model == "STANDARD"
    assert not h.compute.created[0].spot


def test_all_zones_out_without_fallback_is_a_visible_failure(h):
    h.compute.fail_create(CreateFailed(CreateFailed.STOCKOUT, "ZONE_RESOURCE_POOL_EXHAUSTED"), times=3)
    h.start(make_spec())
    record = h.record("bot", RUN)
    assert record.state == "failed"
    assert record.reason == ("no Spot capacity for e2-small in us-central1-a, us-central1-b, us-central1-c "
                             "(ZONE_RESOURCE_POOL_EXHAUSTED); set on_demand_fallback: true to fall back to "
                             "on-demand VMs")
    assert h.compute.calls["create"] == 3


def test_quota_permission_and_image_errors_fail_at_once(h):
    for kind, reason in [(CreateFailed.QUOTA, "QUOTA_EXCEEDED: CPUS"), (CreateFailed.PERMISSION, "403 forbidden"),
                         (CreateFailed.IMAGE, "image family cos-stable not found")]:
        h.compute.fail_create(CreateFailed(kind, reason))
        before = h.compute.calls["create"]
        h.clock.advance(4 * 3600)
        h.start(make_spec())
        tick = (h.clock.now() - timedelta(seconds=5)).strftime("%Y%m%d-%H%M")
        record = h.record("bot", tick)
        assert record.state == "failed"
        assert record.reason == f"Compute Engine refused the VM ({kind}): {reason}"
        assert record.current_attempt.outcome == "create_failed"
        assert h.compute.calls["create"] == before + 1


def test_an_n1_gpu_job_asks_for_accelerators_and_tells_the_runner(h):
    from spotcron.core.descriptor import RunDescriptor
    from spotcron.engine.ports import GpuRequest

    h.start(make_spec(machine={"type": "n1-standard-8", "gpu": {"type": "nvidia-tesla-t4", "count": 1}}))
    request = h.compute.created[0]
    assert request.gpu == GpuRequest(type="nvidia-tesla-t4", count=1)
    assert RunDescriptor.from_metadata(request.metadata["spotcron-run"]).gpu.type == "nvidia-tesla-t4"
    assert h.record("bot", RUN).current_attempt.gpu == "nvidia-tesla-t4 x1"


def test_a_g2_machine_brings_its_own_gpu(h):
    from spotcron.core.descriptor import RunDescriptor

    h.start(make_spec(machine={"type": "g2-standard-4"}))
    request = h.compute.created[0]
    assert request.gpu is None  # G2 types come with their L4; guestAccelerators would be refused
    descriptor = RunDescriptor.from_metadata(request.metadata["spotcron-run"])
    assert (descriptor.gpu.type, descriptor.gpu.count) == ("nvidia-l4", 1)  # the runner installs the driver


def test_the_boot_disk_is_the_cheapest_the_machine_family_can_boot_from(h):
    h.start(make_spec(machine={"type": "e2-small"}))
    h.start(make_spec(machine={"type": "g2-standard-4"}).model_copy(update={"name": "gpu"}))
    assert {r.machine_type: r.disk_type for r in h.compute.created} == {
        "e2-small": "pd-standard", "g2-standard-4": "pd-balanced"}
