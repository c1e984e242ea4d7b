"""A run's end is durable: what its terminal write owes is done by whoever touches the run next.

Each test kills a handler (a BaseException, as a timeout, an OOM kill or a recycled instance
would) or makes an effect meet a transient error right after the terminal record is written, then
lets the real next toucher (the runner's retried callback, a redelivered start, the sweep) come.
Before: the record said `succeeded` (or skipped, timed out) but `run.finished` was published 0
times, the VM-hours admissions were never settled, history never pruned and the hooks never ran.
"""

from __future__ import annotations

import threading

import pytest

from spotcron.core import layout
from spotcron.core.layout import LIVE
from spotcron.core.runs import RunState
from spotcron.core.settings import Limits
from spotcron.engine.day_hours import read_day
from spotcron.runtime import entrypoints
from spotcron.testing.harness import Harness, make_spec
from tests.reliability.crashes import Crash, crash_after_write

RUN = "20261122-1200"
VM = f"sc-bot-{RUN}-a1"
DAY = "2026-11-22"


def crash_after_the_terminal_write(h, *, states=("succeeded", "failed", "timed_out", "skipped", "lost")):
    """Kill the handler at its first storage call after a run record was written in a terminal state."""
    return crash_after_write(h, lambda name, data: name.endswith("/run.json") and any(
        f'"state": "{s}"'.encode() in data for s in states))


@pytest.fixture
def hooked(h):
    ended: list[str] = []
    h.deps.on_run_end.append(lambda deps, record: ended.append(f"{record.run_id}:{record.state}"))
    return h, ended


def settled(h) -> dict[str, float]:
    return read_day(h.blobs, DAY).used


def assert_end_done_once(h, ended, state="succeeded"):
    finished = h.events.of_type("run.finished")
    assert [(e.data["state"], e.data["event_id"]) for e in finished] == [(state, f"bot/{RUN}/finished")]
    assert ended == [f"{RUN}:{state}"]
    assert VM in settled(h)
    record = h.record("bot", RUN)
    assert record.owed == ()
    # A marker the crash left behind is the sweep's to remove (it does not read the record again).
    h.clock.advance(h.settings.sweep_interval)
    assert h.sweep().status_code == 200
    assert h.blobs.list(LIVE) == []
    assert len(h.events.of_type("run.finished")) == 1 and len(ended) == 1


def test_job_done_killed_after_the_terminal_write_is_finished_by_the_runners_retry(hooked):
    h, ended = hooked
    h.start(make_spec())
    h.clock.advance(60)
    h.upload("bot", RUN)
    crash_after_the_terminal_write(h)
    token = h.token("bot", RUN)
    with pytest.raises(Crash):
        h.callback("bot", RUN, token=token)
    assert h.record("bot", RUN).state == "succeeded" and h.events.of_type("run.finished") == []
    assert h.record("bot", RUN).owed  # the effects are owed, in the record itself
    # The runner got no answer, so it calls again with the same token.
    assert h.callback("bot", RUN, token=token).status_code == 200
    assert_end_done_once(h, ended)


def test_job_done_killed_after_the_terminal_write_is_finished_by_the_sweep(hooked):
    h, ended = hooked
    h.start(make_spec())
    h.clock.advance(60)
    h.upload("bot", RUN)
    crash_after_the_terminal_write(h)
    with pytest.raises(Crash):
        h.callback("bot", RUN)
    h.clock.advance(h.settings.sweep_interval)
    assert h.sweep().status_code == 200
    assert_end_done_once(h, ended)


def test_the_sweep_killed_after_ending_a_run_from_its_manifest_is_finished_by_the_next_sweep(hooked):
    h, ended = hooked
    h.start(make_spec())
    h.clock.advance(60)
    h.upload("bot", RUN)
    h.compute.preempt("us-central1-a", VM)  # the VM went before its callback got through
    h.clock.advance(h.settings.sweep_interval)
    crash_after_the_terminal_write(h)
    with pytest.raises(Crash):
        h.sweep()
    assert h.record("bot", RUN).state == "succeeded" and h.events.of_type("run.finished") == []
    h.blobs.fault = None
    h.clock.advance(h.settings.sweep_interval)
    assert h.sweep().status_code == 200
    assert_end_done_once(h, ended)


def test_the_sweep_killed_after_timing_out_an_overdue_run_is_finished_by_the_next_sweep(hooked):
    h, ended = hooked
    h.start(make_spec())
    h.compute.delay_max_run_duration("us-central1-a", VM, 6 * 3600)  # Compute is late; the sweep is all there is
    h.clock.advance(20 * 60)
    crash_after_the_terminal_write(h)
    with pytest.raises(Crash):
        h.sweep()
    assert h.record("bot", RUN).state == "timed_out" and h.live_vms() == []
    h.clock.advance(h.settings.sweep_interval)
    assert h.sweep().status_code == 200
    assert_end_done_once(h, ended, state="timed_out")


def test_a_redelivered_start_finishes_the_end_of_a_missed_tick_whose_handler_died(hooked):
    h, ended = hooked
    spec = make_spec()
    h.clock.advance(15 * 60)  # past the 10-minute starting_deadline: recorded as missed
    crash_after_the_terminal_write(h, states=("skipped",))
    with pytest.raises(Crash):
        h.start(spec, message_id="m1")
    assert h.record("bot", RUN).state == "skipped" and h.events.of_type("run.finished") == []
    assert h.start(spec, message_id="m1").status_code == 200  # Pub/Sub redelivers the unanswered message
    finished = h.events.of_type("run.finished")
    assert [e.data["state"] for e in finished] == ["skipped"] and ended == [f"{RUN}:skipped"]
    assert h.record("bot", RUN).owed == () and h.blobs.list(LIVE) == []


def test_a_transient_error_while_settling_is_retried_until_the_admission_is_what_was_used():
    """Before: one listing error after a one-minute run left 3.08 VM-hours admitted for the day, and
    the next run that day was refused by max_vm_hours_per_day."""
    h = Harness(limits=Limits(max_vm_hours_per_day=4))
    try:
        spec = make_spec(timeout="3h")
        h.start(spec)
        h.clock.advance(60)
        h.upload("bot", RUN)
        usage = layout.usage_day(DAY)
        h.blobs.fault = lambda call, name: call == "list" and name.startswith(usage) and h.record(
            "bot", RUN, count=False).terminal
        assert h.callback("bot", RUN).status_code == 200
        h.blobs.fault = None
        assert read_day(h.blobs, DAY).hours == pytest.approx(3 + 300 / 3600)  # still the worst case
        assert h.record("bot", RUN).owed == ("settle",)
        h.clock.advance(h.settings.sweep_interval)
        assert h.sweep().status_code == 200
        assert read_day(h.blobs, DAY).hours == pytest.approx(60 / 3600, abs=1e-5)
        assert h.record("bot", RUN).owed == ()
        h.clock.set(h.clock.now().replace(hour=16, minute=0, second=5))
        h.start(spec)  # 3h05m reserved again: fits under 4 only if the first run was settled
        assert h.record("bot", "20261122-1600").state == RunState.RUNNING
    finally:
        entrypoints.use(None)


def test_a_publish_that_fails_keeps_run_finished_owed_until_it_goes_out(hooked):
    h, ended = hooked
    h.start(make_spec())
    h.clock.advance(60)
    real = h.events.publish
    down: list[bool] = [True]

    def publish(topic, data, attributes=None):
        if down[0] and data.get("type") == "run.finished":
            raise ConnectionError("Pub/Sub unavailable")
        return real(topic, data, attributes)

    h.events.publish = publish
    assert h.finish_ok("bot", RUN).status_code == 200
    assert h.record("bot", RUN).owed == ("finished_event",) and ended == [f"{RUN}:succeeded"]
    down[0] = False
    h.clock.advance(h.settings.sweep_interval)
    h.sweep()
    assert_end_done_once(h, ended)


def test_a_delivery_held_between_its_claim_and_its_insert_makes_no_vm_for_a_run_that_ended(h):
    """Before: the held copy inserted the VM of an attempt that had already succeeded (a second VM
    of one attempt, running the job again), deleted a moment later."""
    spec = make_spec()
    published = h.clock.now()
    claimed, resume = threading.Event(), threading.Event()
    real_write = h.blobs.write
    copy_answer: list[int] = []

    def write(name, data, **kwargs):
        generation = real_write(name, data, **kwargs)
        if threading.current_thread() is copy and name.endswith("/run.json") and not resume.is_set():
            claimed.set()  # the copy has just claimed the attempt: hold it before anything else
            assert resume.wait(30)
        return generation

    copy = threading.Thread(target=lambda: copy_answer.append(
        h.start(spec, publish_time=published, message_id="m1").status_code))
    first_insert: list[bool] = []

    def fault(call: str, name: str) -> bool:
        if call == "create" and not first_insert:
            first_insert.append(True)
            copy.start()  # the copy reads the run as `starting`, claims it and is held
            assert claimed.wait(30)
        return False

    h.blobs.write = write
    h.compute.fault = fault
    assert h.start(spec, publish_time=published, message_id="m1").status_code == 200
    h.clock.advance(60)
    assert h.finish_ok("bot", RUN).status_code == 200
    results = h.blobs.peek(layout.results_prefix("bot", RUN, 1) + "out.json")
    resume.set()
    copy.join()
    assert copy_answer == [200]
    assert h.compute.calls["create"] == 1 and h.live_vms() == []
    assert h.record("bot", RUN).state == "succeeded"
    assert h.blobs.peek(layout.results_prefix("bot", RUN, 1) + "out.json") == results


def test_a_callback_with_another_instance_id_is_refused_while_the_record_has_none_yet(h):
    """Found by the exploration's crash after an insert: start_job died right after the VM was
    made, so the record holds no instance id yet; a token naming the VM but another instance id (a
    VM made again under the same name) was accepted and ended the run."""
    armed: list[bool] = []

    def fault(call: str, name: str) -> bool:
        if call == "create" and not armed:
            armed.append(True)
        elif armed and armed[0] is True:
            armed[0] = False
            raise Crash(f"killed before {call} {name}")
        return False

    h.compute.fault = fault
    h.blobs.fault = fault
    with pytest.raises(Crash):
        h.start(make_spec())
    h.compute.fault = h.blobs.fault = None
    assert h.record("bot", RUN).attempts[0].instance_id is None and h.live_vms() == [VM]
    forged = h.callback("bot", RUN, token=h.token("bot", RUN, instance_id="31337"))
    assert forged.status_code == 403 and "instance id" in forged.json["error"]
    assert h.record("bot", RUN).state == "starting" and h.live_vms() == [VM]
