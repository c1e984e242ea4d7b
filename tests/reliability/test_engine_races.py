"""Races and error paths between launch, job_done and the sweep, each placed deterministically.

Each test names what went wrong before its fix ("Before: ...").
"""

from __future__ import annotations

from datetime import timedelta

from spotcron.core import layout
from spotcron.core.errors import CreateFailed, Transient
from spotcron.core.runs import vm_labels
from spotcron.engine.ports import Instance
from spotcron.testing.harness import make_spec

RUN = "20261122-1200"
VM = "sc-bot-20261122-1200-a1"
VM2 = "sc-bot-20261122-1200-a2"
ZONE = "us-central1-a"


def test_a_callback_after_the_run_ended_keeps_its_facts_and_ends_nothing_twice(h):
    """job_done: run_ended (run.finished, history pruning, hooks) once per run.

    Before: the sweep failed a run stuck in `starting`; the create had landed after all and its
    VM called back. The late report was stored as facts, and the run "ended" a second time:
    a second run.finished event and a second call of every run-end hook.
    """
    ended: list[str] = []
    h.deps.on_run_end.append(lambda deps, record: ended.append(record.state))
    h.compute.fail_create(Transient("timeout"), times=1000)  # every insert times out, the sweep's too
    assert h.start(make_spec()).status_code == 500
    for _ in range(10):  # past the sweep's patience with inserts, then stuck
        h.clock.advance(5 * 60)
        h.sweep()
    assert h.record("bot", RUN).state == "failed" and ended == ["failed"]
    h.compute.add_foreign(Instance(name=VM, zone=ZONE, status="RUNNING", labels=vm_labels("bot", RUN, 1),
                                   machine_type="e2-small", provisioning_model="SPOT", created_at=h.clock.now()))
    response = h.finish_ok("bot", RUN)
    assert response.status_code == 200 and response.get_json()["state"] == "failed"
    record = h.record("bot", RUN)
    assert record.state == "failed" and record.current_attempt.outcome == "exited"  # the facts are kept
    assert h.live_vms() == []
    assert ended == ["failed"] and len(h.events.of_type("run.finished")) == 1


def test_a_create_failure_never_fails_a_run_that_a_concurrent_delivery_started(h):
    """attempts.fail_run: only while the failed attempt is still the one being created.

    Before: while one delivery's insert in the last zone was refused (stockout), a copy of the
    tick created the VM in that zone and marked the run running; the first delivery then wrote
    "no capacity" over it, leaving a VM that ran for a run recorded as failed.
    """
    spec, copies = make_spec(), []
    for zone in ("us-central1-a", "us-central1-b"):
        h.compute.fail_create(CreateFailed(CreateFailed.STOCKOUT, "ZONE_RESOURCE_POOL_EXHAUSTED"), zone=zone)

    def copy_wins_the_last_zone(request) -> float:
        if request.zone == "us-central1-c" and not copies:
            copies.append(None)  # first: the copy's own insert comes through here too
            copies[0] = h.start(spec).status_code  # creates the VM in zone c
            h.compute.fail_create(CreateFailed(CreateFailed.STOCKOUT, "ZONE_RESOURCE_POOL_EXHAUSTED"),
                                  zone="us-central1-c")  # ... and the first delivery's insert is refused
        return 0.0

    h.compute.create_delay_s = copy_wins_the_last_zone
    assert h.start(spec).status_code == 200
    assert copies == [200]
    record = h.record("bot", RUN)
    assert record.state == "running", record.reason
    assert record.current_attempt.zone == "us-central1-c" and record.current_attempt.outcome is None
    assert h.live_vms() == [VM]


def test_the_next_attempts_vm_is_not_reaped_by_the_previous_attempts_deadline(h):
    """sweep: the record's deadline belongs to its running attempt's VM only.

    Before: attempt 1 was preempted near its deadline; job_done created attempt 2's VM, but the
    record update after the insert failed, leaving the run `starting` with attempt 1's deadline.
    The next sweep deleted the brand-new VM as "past its deadline" and the run later failed as
    stuck, although attempt 2 had its whole timeout ahead of it.
    """
    h.start(make_spec(timeout="10m"))
    first_deadline = h.record("bot", RUN).deadline
    h.clock.set(first_deadline - timedelta(minutes=2))
    h.upload("bot", RUN, manifest=False)
    writes: list[str] = []

    def fail_marking_attempt_2_running(name: str) -> bool:
        if name == layout.run_record("bot", RUN):
            writes.append(name)
            return len(writes) == 2  # 1: preempted, retrying (starting); 2: running <- fails
        return False

    h.blobs.fail_writes = fail_marking_attempt_2_running
    # The report is recorded (answered 200, so the runner does not retry it); the sweep finishes
    # what the failed write left.
    assert h.callback("bot", RUN, status="preempted", exit_code=None, uploaded=False).status_code == 200
    h.blobs.fail_writes = None
    assert h.record("bot", RUN).state == "starting" and h.live_vms() == [VM2]
    h.clock.set(first_deadline + timedelta(seconds=30))
    h.sweep()
    assert h.live_vms() == [VM2]  # its own deadline is 10 minutes away
    h.clock.set(first_deadline + timedelta(minutes=9))  # stuck in starting for 11 minutes
    h.sweep()
    record = h.record("bot", RUN)
    assert record.state == "running"  # its VM is adopted, not failed as stuck
    assert record.deadline == first_deadline + timedelta(minutes=13)  # its own: created 2 min before + 15
    assert h.live_vms() == [VM2]


def test_a_record_that_does_not_parse_does_not_stop_the_sweep(h):
    """sweep: a ValueError (a corrupt or no longer valid record) is reported, and the sweep goes on.

    Before: the first record that failed to parse ended the whole sweep with a 500, every
    sweep, so no stopped VM was ever deleted and no vanished run ever ended again.
    """
    h.start(make_spec())
    h.start(make_spec(name="other"))
    h.blobs.write(layout.run_record("other", RUN), b'{"job": "other", "state": "runn')
    h.compute.set_status(ZONE, VM, "TERMINATED")
    h.clock.advance(5 * 60)
    assert h.sweep().status_code == 200
    assert (ZONE, VM) in h.compute.deleted
    assert h.record("bot", RUN).current_attempt.number == 2  # retried like a preemption
    assert "sc-other-20261122-1200-a1" in h.live_vms()  # maybe live: judged by its deadline only


def test_a_lost_callback_after_a_failed_exit_spends_a_failure_retry(h):
    """sweep: the same retry budgets as job_done.

    Before: with `retries.failure: 1`, a container that exited 1 was retried when its callback
    got through, but failed for good when only its manifest told the sweep.
    """
    h.start(make_spec(retries={"failure": 1}))
    h.upload("bot", RUN, exit_code=1)
    h.compute.preempt(ZONE, VM)  # the VM is gone without a callback
    h.clock.advance(3 * 60)
    h.sweep()
    record = h.record("bot", RUN)
    assert record.state == "running", record.reason
    assert [(a.number, a.outcome, a.exit_code) for a in record.attempts] == [(1, "exited", 1), (2, None, None)]
    assert record.attempts[1].zone == ZONE  # a failure is not a zone's fault
    h.upload("bot", RUN, 2, exit_code=1)
    h.compute.preempt(ZONE, VM2)
    h.clock.advance(3 * 60)
    h.sweep()
    record = h.record("bot", RUN)
    assert record.state == "failed" and record.reason == "the job exited with code 1 (callback lost)"
    assert len(record.attempts) == 2
