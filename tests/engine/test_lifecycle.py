"""VM lifecycle and cost (RELIABILITY.md): callbacks, preemptions, timeouts, the sweep."""

from __future__ import annotations

from datetime import timedelta

from spotcron.core import layout
from spotcron.core.errors import CreateFailed
from spotcron.testing.harness import make_spec

RUN = "20261122-1200"
VM = "sc-bot-20261122-1200-a1"


def test_success_deletes_the_vm_and_keeps_results(h):
    h.start(make_spec())
    h.clock.advance(90)
    response = h.finish_ok("bot", RUN)
    assert response.status_code == 200 and response.get_json()["state"] == "succeeded"
    record = h.record("bot", RUN)
    assert record.state == "succeeded" and record.exit_code == 0
    assert record.results_prefix == "runs/bot/20261122-1200/attempt-1/"
    assert record.current_attempt.vm_seconds == 90
    assert h.live_vms() == []
    assert [p.data["type"] for p in h.events.published][-1] == "run.finished"


def test_nonzero_exit_fails_keeps_logs_and_deletes_the_vm(h):
    h.start(make_spec())
    h.upload("bot", RUN, exit_code=3)
    h.callback("bot", RUN, exit_code=3)
    record = h.record("bot", RUN)
    assert record.state == "failed" and record.reason == "the job exited with code 3"
    assert h.blobs.read(layout.logs("bot", RUN, 1)) is not None
    assert h.live_vms() == []


def test_a_job_that_did_not_start_fails_with_the_runners_reason(h):
    h.start(make_spec())
    h.upload("bot", RUN, manifest=False)
    body = {"job": "bot", "run_id": RUN, "attempt": 1, "status": "exited", "exit_code": None, "uploaded": True,
            "problem": "the configuration asks for nvidia-tesla-t4 x1, and this host has no NVIDIA GPU; "
                       "not run on the CPU"}
    assert h.callback("bot", RUN, body=body).status_code == 200
    record = h.record("bot", RUN)
    assert record.state == "failed"
    assert record.reason == ("the job did not start: the configuration asks for nvidia-tesla-t4 x1, and this "
                             "host has no NVIDIA GPU; not run on the CPU")
    over = {**body, "run_id": RUN, "problem": "x" * 501}
    assert h.callback("bot", RUN, body=over).status_code == 400  # the runner's words are bounded


def test_a_run_the_local_host_cannot_give_its_hardware_is_skipped_with_the_reason(h):
    """A GPU entry on a host without a GPU (local mode): the runner reports `unavailable` and the
    run is skipped, not failed, and not run on the CPU either; `up --once` does not fail for it."""
    h.start(make_spec(retries={"failure": 2}))
    body = {"job": "bot", "run_id": RUN, "attempt": 1, "status": "unavailable", "exit_code": None, "uploaded": True,
            "problem": "the configuration asks for nvidia-tesla-t4 x1, and this host has no NVIDIA GPU; "
                       "not run on the CPU"}
    assert h.callback("bot", RUN, body=body).status_code == 200
    record = h.record("bot", RUN)
    assert record.state == "skipped" and len(record.attempts) == 1  # no retry: the host will not change
    assert record.reason == ("not run on this host: the configuration asks for nvidia-tesla-t4 x1, and this "
                             "host has no NVIDIA GPU; not run on the CPU")
    assert record.attempts[0].outcome == "unavailable" and h.live_vms() == []


def test_failure_retries_when_the_spec_allows(h):
    h.start(make_spec(retries={"failure": 1}))
    h.upload("bot", RUN, exit_code=1)
    h.callback("bot", RUN, exit_code=1)
    assert h.record("bot", RUN).state == "running"
    h.upload("bot", RUN, 2, exit_code=1)
    h.callback("bot", RUN, 2, exit_code=1)
    record = h.record("bot", RUN)
    assert record.state == "failed" and len(record.attempts) == 2


def test_exit_zero_without_a_manifest_is_not_a_success(h):
    h.start(make_spec())
    h.upload("bot", RUN, manifest=False)
    h.callback("bot", RUN, uploaded=False)
    record = h.record("bot", RUN)
    assert record.state == "failed"
    assert record.reason == "the results upload did not complete (no manifest)"
    assert record.results_prefix is None


def test_preempted_mid_run_retries_in_the_next_zone(h):
    h.start(make_spec())
    h.clock.advance(60)
    h.callback("bot", RUN, status="preempted", exit_code=None, uploaded=False)
    record = h.record("bot", RUN)
    assert record.state == "running"
    assert [(a.number, a.zone, a.outcome) for a in record.attempts] == [
        (1, "us-central1-a", "preempted"), (2, "us-central1-b", None)]
    assert h.live_vms() == ["sc-bot-20261122-1200-a2"]
    descriptor = h.compute.created[-1].metadata["spotcron-run"]
    assert "\nattempt=2\n" in descriptor and "\nprefix=runs/bot/20261122-1200/\n" in descriptor


def test_preempted_during_upload_is_never_a_success(h):
    h.start(make_spec(retries={"preemption": 0}))
    h.upload("bot", RUN, manifest=True)  # everything landed, then the notice came
    h.callback("bot", RUN, status="preempted", exit_code=None, uploaded=False)
    record = h.record("bot", RUN)
    assert record.state == "preempted" and record.results_prefix is None


def test_preemptions_stop_at_the_retry_limit(h):
    h.start(make_spec(retries={"preemption": 2}))
    for attempt in (1, 2, 3):
        h.callback("bot", RUN, attempt, status="preempted", exit_code=None, uploaded=False)
    record = h.record("bot", RUN)
    assert record.state == "preempted"
    assert [a.outcome for a in record.attempts] == ["preempted"] * 3
    assert h.live_vms() == []


def test_preempted_before_the_container_starts_is_retried_by_the_sweep(h):
    h.start(make_spec())
    h.compute.preempt("us-central1-a", VM)  # gone, no callback
    h.clock.advance(5 * 60)
    h.sweep()
    record = h.record("bot", RUN)
    assert [a.outcome for a in record.attempts] == ["lost", None]
    assert record.state == "running" and h.live_vms() == ["sc-bot-20261122-1200-a2"]


def test_a_vanished_vm_with_no_retries_left_is_lost(h):
    h.start(make_spec(retries={"preemption": 0}))
    h.compute.preempt("us-central1-a", VM)
    h.clock.advance(5 * 60)
    h.sweep()
    record = h.record("bot", RUN)
    assert record.state == "lost"
    assert record.reason == "the VM vanished without calling back (preempted or crashed)"


def test_a_lost_callback_after_a_complete_upload_still_succeeds(h):
    h.start(make_spec())
    h.upload("bot", RUN)
    h.compute.preempt("us-central1-a", VM)
    h.clock.advance(5 * 60)
    h.sweep()
    assert h.record("bot", RUN).state == "succeeded"


def test_callback_never_arrives_the_sweep_deletes_the_vm_and_times_out_the_run(h):
    h.start(make_spec(timeout="10m"))
    h.clock.advance(5 * 60)
    h.sweep()
    assert h.live_vms() == [VM]  # inside its deadline: never reaped
    h.clock.advance(12 * 60)  # past timeout + grace + slack
    h.sweep()
    record = h.record("bot", RUN)
    assert h.live_vms() == []
    assert record.state == "timed_out"


def test_max_run_duration_deletes_the_vm_and_the_sweep_ends_the_run(h):
    h.start(make_spec(timeout="10m"))
    h.clock.advance(10 * 60 + h.settings.grace)
    assert [i.name for i in h.compute.enforce_max_run_duration()] == [VM]
    h.sweep()
    assert h.record("bot", RUN).state == "timed_out"


def test_runner_reports_a_timeout(h):
    h.start(make_spec(timeout="1m"))
    h.upload("bot", RUN, exit_code=137)
    h.callback("bot", RUN, exit_code=137, timed_out=True)
    record = h.record("bot", RUN)
    assert record.state == "timed_out" and record.current_attempt.outcome == "timed_out"


def test_a_callback_delivered_twice_is_idempotent(h):
    h.start(make_spec())
    h.upload("bot", RUN)
    token = h.token("bot", RUN)
    assert h.callback("bot", RUN, token=token).status_code == 200
    replay = h.callback("bot", RUN, token=token)
    assert replay.status_code == 409 and replay.get_json()["replay"] is True
    # A fresh token for the same VM (the runner retrying) finds the VM gone and the run ended.
    h.clock.advance(1)
    again = h.callback("bot", RUN)
    assert again.status_code == 200 and again.get_json() == {
        "job": "bot", "run_id": RUN, "state": "succeeded", "vm_deleted": False}
    assert len(h.events.of_type("run.finished")) == 1


def test_a_stopped_managed_vm_is_deleted_with_its_disk(h):
    h.start(make_spec())
    h.compute.set_status("us-central1-a", VM, "TERMINATED")
    h.sweep()
    assert h.compute.deleted == [("us-central1-a", VM)]
    # It never called back, so the run is retried like a preemption, one zone further.
    record = h.record("bot", RUN)
    assert [(a.zone, a.outcome) for a in record.attempts] == [("us-central1-a", "lost"), ("us-central1-b", None)]
    assert h.live_vms() == ["sc-bot-20261122-1200-a2"]


def test_a_run_stuck_in_starting_fails(h):
    from spotcron.core.errors import Transient

    h.compute.fail_create(Transient("timeout"), times=1000)  # the sweep's own inserts time out too
    assert h.start(make_spec()).status_code == 500
    for _ in range(6):  # 5..30 minutes: the sweep keeps trying the insert (its patience is 30 minutes)
        h.clock.advance(5 * 60)
        h.sweep()
        assert h.record("bot", RUN).state == "starting"
    h.clock.advance(5 * 60)  # 10 minutes after the sweep's last try: stuck
    h.sweep()
    record = h.record("bot", RUN)
    assert record.state == "failed"
    assert record.reason == "stuck in starting for 35 minutes: no VM could be created"


def test_history_retention_prunes_old_runs_even_while_creation_fails(h):
    spec = make_spec(history_limit=3)
    for _ in range(6):
        h.compute.fail_create(CreateFailed(CreateFailed.QUOTA, "QUOTA_EXCEEDED"))
        h.start(spec)
        h.clock.advance(4 * 3600)
    ids = [r.run_id for r in h.records("bot")]
    assert ids == ["20261123-0000", "20261123-0400", "20261123-0800"]
    assert all(not name.startswith("runs/bot/20261122") for name in h.blobs.list("runs/"))


def test_every_run_ends_with_its_vm_gone_and_its_history_written_once(h):
    h.start(make_spec())
    h.finish_ok("bot", RUN)
    record = h.record("bot", RUN)
    assert [c.state for c in record.history] == ["scheduled", "starting", "running", "succeeded"]
    assert h.deps.store.live_runs() == []
    assert h.clock.now() - timedelta(seconds=10) < record.updated_at <= h.clock.now()


def test_a_lost_callback_after_a_timeout_is_a_timeout(h):
    import json

    h.start(make_spec())
    h.blobs.write(layout.manifest("bot", RUN, 1), json.dumps({"exit_code": 137, "timed_out": True}).encode())
    h.compute.preempt("us-central1-a", VM)
    h.sweep()
    record = h.record("bot", RUN)
    assert record.state == "timed_out"
    assert record.reason == "the container ran past its timeout and was killed (callback lost)"
