"""Defects the seeded fault simulation found, each pinned by the smallest run that shows it.

Every test here failed before its fix (named in the test's docstring) and passes after it.
"""

from __future__ import annotations

from datetime import timedelta

import pytest

from spotcron.core import layout
from spotcron.testing.harness import make_spec

RUN = "20261122-1200"
VM = "sc-bot-20261122-1200-a1"
ZONE = "us-central1-a"


def test_a_live_marker_lost_to_a_storage_error_is_written_by_the_redelivery(h):
    """store.create: a duplicate delivery re-writes the live marker of a live run.

    Before: the first delivery wrote the record, failed on the marker (500), and every
    redelivery found the record and skipped the marker, so the sweep never saw the run again:
    it stayed `running` forever once its VM vanished.
    """
    failed: list[str] = []

    def once_on_the_marker(name: str) -> bool:
        if name.startswith("live/") and not failed:
            failed.append(name)
            return True
        return False

    h.blobs.fail_writes = once_on_the_marker
    assert h.start(make_spec(retries={"preemption": 0})).status_code == 500
    assert len(failed) == 1 and failed[0].startswith(f"live/bot/{RUN}/waiting~")
    assert h.deps.store.live_runs() == []
    h.clock.advance(10)  # Pub/Sub redelivers after its minimum backoff
    assert h.start(make_spec(retries={"preemption": 0})).status_code == 200
    assert h.deps.store.live_runs() == [("bot", RUN)]
    h.compute.preempt(ZONE, VM)
    h.clock.advance(5 * 60)
    h.sweep()
    assert h.record("bot", RUN).state == "lost"
    assert h.deps.store.live_runs() == []


def test_a_redelivered_run_now_starts_one_run(h):
    """launch: a manual run's id comes from the message's publish time, not the handling time.

    Before: a "run now" message delivered twice (at-least-once) started two runs and two VMs.
    """
    spec, published = make_spec(), h.clock.now()
    manual = {"trigger": "manual", "nonce": "ab12"}
    assert h.start(spec, publish_time=published, attributes=manual).status_code == 200
    h.clock.advance(45)
    assert h.start(spec, publish_time=published, attributes=manual).status_code == 200
    assert [r.run_id for r in h.records("bot")] == ["m20261122-120005-ab12"]
    assert len(h.compute.created) == 1 and h.live_vms() == ["sc-bot-m20261122-120005-ab12-a1"]


def test_a_vm_past_its_deadline_goes_at_the_first_sweep_after_it(h):
    """sweep: DEADLINE_SLACK is 0.

    Before: a VM whose maxRunDuration Compute Engine enforced late was reaped only once the
    sweep saw it a minute past its deadline, so it could live up to deadline + 1 min + one
    sweep interval, beyond the bound RELIABILITY.md sets (deadline + one sweep interval).
    """
    h.start(make_spec(timeout="10m"))
    h.compute.delay_max_run_duration(ZONE, VM, 3600)  # Compute Engine is late; the runner hangs
    deadline = h.record("bot", RUN).deadline
    h.clock.set(deadline - timedelta(seconds=1))
    assert h.compute.enforce_max_run_duration() == []
    h.sweep()
    assert h.live_vms() == [VM]  # inside its deadline: never reaped
    h.clock.set(deadline + timedelta(seconds=1))
    assert h.compute.enforce_max_run_duration() == []
    assert h.sweep().status_code == 200
    assert h.live_vms() == []
    assert h.record("bot", RUN).state == "timed_out"


def test_one_unreadable_record_does_not_stop_the_sweep(h):
    """sweep: a storage error on one run is recorded in the report and the sweep goes on.

    Before: the first failed read ended the whole sweep with a 500, so a stopped VM of another
    run kept billing its disk until a later sweep (beyond one sweep interval). The VM of the run
    whose record could not be read is judged by its status and metadata deadline only.
    """
    h.start(make_spec())
    h.start(make_spec(name="other"))
    other_vm = "sc-other-20261122-1200-a1"
    h.compute.set_status(ZONE, VM, "TERMINATED")
    unreadable = layout.run_record("other", RUN)
    h.blobs.fail_reads = lambda name: name == unreadable
    h.clock.advance(5 * 60)  # past the list lag, so "its run has already ended" could be considered
    assert h.sweep().status_code == 200
    assert ("us-central1-a", VM) in h.compute.deleted
    assert other_vm in h.live_vms()  # maybe live: left alone
    deadline = h.compute.all_instances()[0].created_at + timedelta(seconds=600 + h.settings.grace)
    h.clock.set(deadline + timedelta(seconds=1))
    h.compute.delay_max_run_duration(ZONE, other_vm, 3600)
    assert h.sweep().status_code == 200
    assert other_vm not in h.live_vms()  # past the deadline in its own metadata: reaped anyway
    h.blobs.fail_reads = None
    h.sweep()
    assert h.record("other", RUN).state == "timed_out"


@pytest.mark.parametrize(("starting_deadline", "before"), [
    ("1h", "a second run of the pruned tick, with a second VM of the same name"),
    ("5m", "a ghost 'skipped (missed)' record and run.finished event for a tick that had run"),
])
def test_a_trigger_redelivered_after_its_run_was_pruned_creates_nothing(h, starting_deadline, before):
    """store.prune keeps a per-job mark (pruned/JOB) of how far history was cut; launch drops
    triggers at or below it when their record is gone.

    Before: Pub/Sub redelivering a tick (retention is 24 h) after history_limit had pruned its
    run brought the run back (`before` says how).
    """
    spec = make_spec(schedule="*/5 * * * *", history_limit=2, starting_deadline=starting_deadline)
    first_published = h.clock.now()
    for minute in ("1200", "1205", "1210", "1215"):
        assert h.start(spec).status_code == 200
        h.finish_ok("bot", f"20261122-{minute}")
        h.clock.advance(5 * 60)
    assert [r.run_id for r in h.records("bot")] == ["20261122-1210", "20261122-1215"]
    assert h.deps.store.pruned_through("bot") == "20261122-1205"
    created, finished = len(h.compute.created), len(h.events.of_type("run.finished"))
    assert h.start(spec, publish_time=first_published).status_code == 200
    assert [r.run_id for r in h.records("bot")] == ["20261122-1210", "20261122-1215"]
    assert len(h.compute.created) == created
    assert len(h.events.of_type("run.finished")) == finished


def test_a_tick_newer_than_the_pruned_history_still_runs(h):
    spec = make_spec(schedule="*/5 * * * *", history_limit=1)
    for minute in ("1200", "1205"):
        h.start(spec)
        h.finish_ok("bot", f"20261122-{minute}")
        h.clock.advance(5 * 60)
    assert h.deps.store.pruned_through("bot") == RUN
    h.start(spec)
    assert h.record("bot", "20261122-1210").state == "running"


def test_a_storage_error_on_the_live_marker_after_the_end_keeps_the_end_of_run_work(h):
    """store.update: the record is written, so its change happened, whatever the marker does.

    Before: job_done stored `succeeded`, then deleting the live marker met a transient error and
    the whole update raised. The callback answered 503, its retry found the run already ended,
    and nobody ever published `run.finished`, settled the VM-hours or ran the end-of-run hooks.
    """
    assert h.start(make_spec()).status_code == 200
    h.upload("bot", RUN)
    failed: list[str] = []

    def once_on_the_marker(call: str, name: str) -> bool:
        if call == "delete" and name.startswith(f"live/bot/{RUN}/") and not failed:
            failed.append(name)
            return True
        return False

    h.blobs.fault = once_on_the_marker
    assert h.callback("bot", RUN).status_code == 200
    h.blobs.fault = None
    assert len(failed) == 1
    assert h.record("bot", RUN).state == "succeeded"
    assert [e.data["state"] for e in h.events.of_type("run.finished")] == ["succeeded"]
    assert h.deps.store.live_runs() == [("bot", RUN)]  # the stale marker: the sweep's to remove
    h.clock.advance(h.settings.sweep_interval)
    assert h.sweep().status_code == 200
    assert h.deps.store.live_runs() == []
    assert len(h.events.of_type("run.finished")) == 1


def _stalled_insert_landing_after_the_run_was_pruned(h, while_stalled=None):
    """The first delivery's insert hangs; meanwhile the sweep makes the VM, the run succeeds, the
    next tick's run ends and history_limit 1 prunes this one. Then the hung insert lands."""
    spec = make_spec(schedule="*/5 * * * *", history_limit=1)
    stalled: list[bool] = []

    def stall(call: str, name: str) -> bool:
        if call == "create" and name == VM and not stalled:
            stalled.append(True)
            h.clock.advance(3 * 60)  # past the list lag: nobody seems to be driving the run
            assert h.sweep().status_code == 200
            assert h.record("bot", RUN).state == "running"
            h.finish_ok("bot", RUN)
            h.clock.advance(2 * 60)
            assert h.start(spec).status_code == 200
            h.finish_ok("bot", "20261122-1205")
            assert h.deps.store.pruned_through("bot") == RUN
            if while_stalled:
                while_stalled()
            # It hangs past the hour Compute Engine remembers its requestId for (within it the
            # insert would be answered with the first one's operation and create nothing).
            h.clock.advance(61 * 60)
        return False

    h.compute.fault = stall
    h.start(spec)
    h.compute.fault = None
    assert stalled and len([r for r in h.compute.created if r.name == VM]) == 2


def test_a_stalled_insert_that_lands_after_its_run_was_pruned_is_deleted_at_once(h):
    """attempts.create_attempt: a VM made for a run whose record is gone is deleted at once.

    Before: the check that deletes a VM made after its run moved on needed the record; a run
    pruned meanwhile left the VM running the job again until its deadline (maxRunDuration).
    """
    _stalled_insert_landing_after_the_run_was_pruned(h)
    assert VM not in h.live_vms()


def test_the_sweep_deletes_a_vm_whose_run_was_pruned(h):
    """sweep: a VM with no live marker whose run is at or below the job's pruned mark has ended.

    Before: "its run has already ended" needed the run's record, so when the delete above met a
    transient error the VM outlived every sweep until its own deadline.
    """
    def delete_fails(call: str, name: str) -> bool:
        return call == "delete" and name == VM

    _stalled_insert_landing_after_the_run_was_pruned(h, lambda: setattr(h.compute, "fault", delete_fails))
    assert VM in h.live_vms()
    h.compute.fault = None
    h.clock.advance(3 * 60)  # past the list lag
    assert h.sweep().status_code == 200
    assert VM not in h.live_vms()
