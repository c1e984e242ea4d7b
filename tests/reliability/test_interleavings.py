"""Interleavings and inputs the seeded month does not reach, each placed deterministically.

Every test drives the real start_job, job_done and sweep functions on the in-memory backends.
Each one failed before its fix; tests/RELIABILITY.md names them.
"""

from __future__ import annotations

import logging
import threading
from datetime import UTC, datetime, timedelta

import pytest

from spotcron.core.errors import Transient
from spotcron.core.runs import RunState
from spotcron.testing.harness import Harness, make_spec

RUN = "20261122-1200"
VM1 = "sc-bot-20261122-1200-a1"
VM2 = "sc-bot-20261122-1200-a2"
ZONE = "us-central1-a"


@pytest.fixture
def logged():
    """The messages the functions log, whatever handlers the functions' logging set up."""
    lines: list[str] = []

    class Keep(logging.Handler):
        def emit(self, record: logging.LogRecord) -> None:
            lines.append(record.getMessage())

    handler, logger = Keep(level=logging.INFO), logging.getLogger("spotcron")
    logger.addHandler(handler)
    yield lines
    logger.removeHandler(handler)


def manual_runs(h) -> list[str]:
    return [r.run_id for r in h.records("bot") if r.run_id.startswith("m")]


# --- the sweep and a redelivery ---------------------------------------------------------------------

def test_the_sweep_never_fails_a_run_that_a_redelivery_has_just_started(h):
    """Before: the sweep read `starting`, found no VM, and failed the run the redelivery had just started;
    the next sweep then deleted its working VM."""
    spec, published = make_spec(starting_deadline="20m"), h.clock.now()
    h.compute.fail_create(Transient("the insert timed out"), times=1)
    assert h.start(spec, publish_time=published, message_id="m1").status_code >= 500  # Pub/Sub redelivers
    h.clock.advance(11 * 60)
    redelivered: list[int] = []
    real = {"get": h.compute.get_instance, "create": h.compute.create_instance}

    def then_redeliver(call: str):
        def wrapped(*args):  # the sweep's first look at the VM returns; then the redelivery lands
            try:
                return real[call](*args)
            finally:
                if not redelivered:
                    redelivered.append(0)  # the redelivery's own calls come through here too
                    redelivered[0] = h.start(spec, publish_time=published, message_id="m1").status_code
        return wrapped

    h.compute.get_instance, h.compute.create_instance = then_redeliver("get"), then_redeliver("create")
    h.sweep()
    h.compute.get_instance, h.compute.create_instance = real["get"], real["create"]
    assert redelivered == [200]
    assert h.record("bot", RUN).state == RunState.RUNNING
    h.clock.advance(5 * 60)
    h.sweep()
    assert h.live_vms() == [VM1] and h.record("bot", RUN).state == RunState.RUNNING


def test_a_sweep_during_a_redeliverys_insert_leaves_the_run_to_it(h):
    """The redelivery claims the run before its insert, so a sweep meanwhile does not call it stuck."""
    spec, published = make_spec(starting_deadline="20m"), h.clock.now()
    h.compute.fail_create(Transient("the insert timed out"), times=1)
    assert h.start(spec, publish_time=published, message_id="m1").status_code >= 500
    h.clock.advance(11 * 60)
    swept: list[int] = []

    def slow_insert(request) -> float:
        if not swept:
            swept.append(h.sweep().status_code)
        return 5.0

    h.compute.create_delay_s = slow_insert
    assert h.start(spec, publish_time=published, message_id="m1").status_code == 200
    assert swept == [200]
    assert h.record("bot", RUN).state == RunState.RUNNING and h.live_vms() == [VM1]
    assert len(h.compute.created) == 1


# --- transient errors where no redelivery comes ------------------------------------------------------

def test_a_transient_insert_error_after_a_preemption_is_retried(h):
    """Before: job_done's insert of the next attempt got a 503, nothing retried it, and eleven minutes later
    the sweep failed the run."""
    h.start(make_spec())
    h.clock.advance(60)
    h.compute.fail_create(Transient("503 Service Unavailable"), times=1)
    assert h.callback("bot", RUN, 1, status="preempted", exit_code=None).status_code == 200
    assert h.record("bot", RUN).state == RunState.STARTING
    h.clock.advance(h.settings.sweep_interval)
    h.sweep()
    record = h.record("bot", RUN)
    assert record.state == RunState.RUNNING and h.live_vms() == [VM2]
    assert h.finish_ok("bot", RUN, 2).status_code == 200
    assert h.record("bot", RUN).state == RunState.SUCCEEDED


def test_a_transient_insert_error_on_the_sweeps_retry_is_retried_at_the_next_sweep(h):
    h.start(make_spec())
    h.clock.advance(60)
    h.compute.preempt(ZONE, VM1)
    h.clock.advance(5 * 60)
    h.compute.fail_create(Transient("503 Service Unavailable"), times=1)
    h.sweep()
    assert h.record("bot", RUN).state == RunState.STARTING and h.live_vms() == []
    h.clock.advance(h.settings.sweep_interval)
    h.sweep()
    assert h.record("bot", RUN).state == RunState.RUNNING and h.live_vms() == [VM2]


# --- messages the function cannot act on -------------------------------------------------------------

@pytest.mark.parametrize(("field", "value", "says"), [
    ("schedule", "every day at nine", "schedule"),
    ("schedule", "0 0 9 * * *", "schedule"),
    ("time_zone", "Mars/Olympus_Mons", "time zone"),
])
def test_a_schedule_or_zone_the_function_cannot_read_is_acknowledged(logged, field, value, says):
    """Before: HTTP 500, so Pub/Sub redelivered the message until its retention ran out. (Per-job
    scheduling: the dispatcher of shared scheduling reads the schedule before any message exists.)"""
    h = Harness()
    response = h.start(make_spec(**{field: value}))
    assert response.status_code == 200
    assert h.records("bot") == [] and h.live_vms() == []
    assert any(says in line and value in line and "fix the job file" in line for line in logged)


@pytest.mark.parametrize("nonce", ["zzzz", "AB12", "ab/cd", "../x", "", "a" * 65])
def test_a_hostile_nonce_is_acknowledged_and_starts_nothing(h, logged, nonce):
    """Before: a non-hex nonce crashed start_job after writing the record (500, redelivered for ever);
    one with '/' left a record `scheduled` for ever."""
    response = h.run_now(make_spec(), nonce=nonce)
    assert response.status_code == 200
    assert h.records("bot") == [] and h.live_vms() == [] and h.blobs.list("live/") == []
    assert any("nonce" in line and "lowercase hex" in line for line in logged)


def test_a_manual_message_without_a_nonce_runs_once_when_redelivered(h):
    """Before: each delivery drew a random nonce, so a redelivery started a second run."""
    spec, published = make_spec(), h.clock.now()
    for _ in range(2):
        assert h.run_now(spec, nonce=None, publish_time=published, message_id="4711").status_code == 200
        h.clock.advance(10)
    assert len(manual_runs(h)) == 1 and len(h.compute.created) == 1


def test_two_manual_messages_without_a_nonce_in_the_same_second_are_two_runs(h):
    spec, published = make_spec(), h.clock.now()
    h.run_now(spec, nonce=None, publish_time=published, message_id="4711")
    h.run_now(spec, nonce=None, publish_time=published, message_id="4712")
    assert len(manual_runs(h)) == 2


# --- concurrency: forbid -----------------------------------------------------------------------------

def test_a_tick_and_a_run_now_together_under_forbid_run_exactly_one(h):
    """Before: each saw the other `scheduled` and both were skipped."""
    spec = make_spec(concurrency="forbid")
    both_listed, both_decided = threading.Barrier(2, timeout=30), threading.Barrier(2, timeout=30)
    seen = threading.local()

    def fault(call: str, name: str) -> bool:
        if call == "list" and name == "live/" and not getattr(seen, "decided", False):
            both_listed.wait()  # both records exist before either looks at the other
            seen.listed = seen.decided = True  # (the start that goes on lists the queue later: no wait)
        elif call == "write" and name.endswith("run.json") and getattr(seen, "listed", False):
            seen.listed = False
            both_decided.wait()  # each has read the other before either writes its decision
        return False

    h.blobs.fault = fault
    answers: list[int] = []
    manual = threading.Thread(target=lambda: answers.append(h.run_now(spec).status_code))
    manual.start()
    answers.append(h.start(spec).status_code)
    manual.join()
    h.blobs.fault = None
    assert answers == [200, 200]
    states = {r.trigger: r.state for r in h.records("bot")}
    # The tick runs; the manual run gives way to it (engine/concurrency.py), skipped or cancelled.
    assert states["schedule"] == RunState.RUNNING and states["manual"] in (RunState.SKIPPED, RunState.CANCELLED)
    assert len(h.compute.created) == 1


# --- a stalled delivery ------------------------------------------------------------------------------

def test_a_stalled_delivery_does_not_bring_back_a_finished_attempts_vm(h):
    """Before: a copy that stalled before its insert re-created the VM after the run had succeeded; that VM
    ran the job again, overwrote the results, and job_done took its callback."""
    spec, published = make_spec(), h.clock.now()
    reached, resume = threading.Event(), threading.Event()
    stalled_answer: list[int] = []

    def create_delay(request) -> float:
        if threading.current_thread() is not threading.main_thread() and not resume.is_set():
            reached.set()
            assert resume.wait(30)
        return 0.0

    first_insert: list[bool] = []

    def fault(call: str, name: str) -> bool:
        if call == "create" and not first_insert:
            first_insert.append(True)
            copy.start()  # the copy reads the run as `starting` and stalls just before its insert
            assert reached.wait(30)
        return False

    copy = threading.Thread(target=lambda: stalled_answer.append(
        h.start(spec, publish_time=published, message_id="m1").status_code))
    h.compute.create_delay_s = create_delay
    h.compute.fault = fault
    assert h.start(spec, publish_time=published, message_id="m1").status_code == 200
    first_id = h.record("bot", RUN).attempts[0].instance_id
    h.clock.advance(60)
    assert h.finish_ok("bot", RUN).status_code == 200
    assert h.record("bot", RUN).state == RunState.SUCCEEDED and h.live_vms() == []
    resume.set()
    copy.join()
    assert stalled_answer == [200]
    assert h.live_vms() == []  # the copy's insert made a VM; the copy deleted it at once
    assert h.record("bot", RUN).attempts[0].instance_id == first_id


def test_job_done_refuses_a_vm_that_is_not_the_attempts_own(h):
    """Same name, other instance id (a re-created VM), or other zone: refused, nothing recorded."""
    h.start(make_spec())
    h.clock.advance(60)
    h.upload("bot", RUN)
    impostor = h.callback("bot", RUN, token=h.token("bot", RUN, instance_id="999999"))
    assert impostor.status_code == 403 and "instance" in impostor.json["error"]
    other_zone = h.callback("bot", RUN, token=h.token("bot", RUN, zone="us-central1-c"))
    assert other_zone.status_code == 403 and "zone" in other_zone.json["error"]
    assert h.record("bot", RUN).state == RunState.RUNNING and h.live_vms() == [VM1]
    assert h.callback("bot", RUN).status_code == 200
    assert h.record("bot", RUN).state == RunState.SUCCEEDED


# --- matrix history ---------------------------------------------------------------------------------

def test_a_matrix_with_a_history_limit_below_its_entries_is_refused(tmp_path):
    """Before: validate accepted it, and each entry's results were pruned the moment the entry succeeded."""
    from spotcron.core.errors import ConfigError
    from spotcron.core.loader import load_job_file

    path = tmp_path / "bench.yaml"
    path.write_text('schedule: "0 3 * * *"\nimage: us-docker.pkg.dev/p/r/b:1\nhistory_limit: 2\n'
                    "matrix:\n  - {name: a}\n  - {name: b}\n  - {name: c}\n")
    with pytest.raises(ConfigError) as caught:
        load_job_file(path)
    message = str(caught.value)
    assert "bench.yaml:3: history_limit: history_limit 2 is below" in message
    assert "3 matrix entries" in message and "at least 3" in message


def test_repeats_count_as_runs_of_a_tick_too():
    from pydantic import ValidationError

    with pytest.raises(ValidationError, match="history_limit 5 is below the job's repeat 6: every tick makes 6 runs"):
        make_spec(history_limit=5, repeat=6)
    with pytest.raises(ValidationError, match="2 matrix entries with their repeats: every tick makes 6 runs"):
        make_spec(history_limit=5, repeat=3, matrix=[{"name": "a"}, {"name": "b"}])
    assert make_spec(history_limit=6, repeat=3, matrix=[{"name": "a"}, {"name": "b"}]).history_limit == 6


def test_a_start_message_with_such_a_matrix_prunes_nothing(h):
    h.start(make_spec(name="other"))
    payload = make_spec(history_limit=30, matrix=[{"name": "a"}, {"name": "b"}, {"name": "c"}]).to_payload()
    assert h.start({**payload, "history_limit": 2}).status_code == 200
    assert h.records("bot") == [] and [r.job for r in h.records("other")] == ["other"]


# --- DST readings of a tick -------------------------------------------------------------------------

SPRING = datetime(2026, 3, 29, 1, 0, tzinfo=UTC)  # Berlin 02:00 CET -> 03:00 CEST
FALL = datetime(2026, 10, 25, 1, 0, tzinfo=UTC)  # Berlin 03:00 CEST -> 02:00 CET


@pytest.mark.parametrize(("readings", "run_id"), [
    ([SPRING], "20260329-0100"),  # Vixie: at the jump
    ([SPRING + timedelta(minutes=30)], "20260329-0100"),  # 02:30 shifted by the gap: 03:30 CEST
    ([SPRING, SPRING + timedelta(minutes=30)], "20260329-0100"),  # both
    ([FALL - timedelta(minutes=30)], "20261025-0030"),  # first pass of 02:30
    ([FALL + timedelta(minutes=30)], "20261025-0030"),  # second pass only
    ([FALL - timedelta(minutes=30), FALL + timedelta(minutes=30)], "20261025-0030"),  # both passes
], ids=["spring-vixie", "spring-shifted", "spring-both", "fall-first", "fall-second", "fall-both"])
def test_a_message_at_any_dst_reading_of_its_tick_starts_exactly_one_run(readings, run_id):
    """Before: a 02:30 Europe/Berlin job fired at 03:30 on the spring-forward day, or only on the second pass
    of the repeated hour, was recorded as missed (1,805 s and 3,605 s late against 600 s)."""
    h = Harness(now=readings[0] + timedelta(seconds=5))
    try:
        spec = make_spec(schedule="30 2 * * *", time_zone="Europe/Berlin")
        for published in readings:
            h.clock.set(published + timedelta(seconds=5))
            assert h.start(spec, publish_time=published).status_code == 200
        records = h.records("bot")
        assert [r.run_id for r in records] == [run_id]
        assert records[0].state == RunState.RUNNING, records[0].reason
        assert len(h.compute.created) == 1
    finally:
        h.close()


def test_a_dst_reading_does_not_excuse_a_really_late_trigger():
    h = Harness(now=SPRING + timedelta(hours=2))
    try:
        spec = make_spec(schedule="30 2 * * *", time_zone="Europe/Berlin")
        h.start(spec, publish_time=SPRING + timedelta(hours=2))
        assert h.record("bot", "20260329-0100").state == RunState.SKIPPED
    finally:
        h.close()
