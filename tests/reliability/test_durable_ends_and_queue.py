"""Crash points and cut-ins against the durable ends and the queue: a function killed or overtaken
at one exact write, and what the next toucher must still do. Each test drives the real entry
points through the harness."""

from __future__ import annotations

import pytest

from spotcron.core import layout
from spotcron.core.layout import LIVE
from spotcron.core.runs import RunState
from spotcron.core.settings import Limits
from spotcron.runtime import entrypoints
from spotcron.testing.harness import Harness, make_spec
from tests.reliability.crashes import Crash, crash_after_write


@pytest.fixture
def make():
    made: list[Harness] = []

    def build(**settings) -> Harness:
        h = Harness(**settings)
        made.append(h)
        return h

    yield build
    entrypoints.use(None)


def finished(h, job: str, run_id: str) -> list:
    return [e for e in h.events.of_type("run.finished") if e.data["job"] == job and e.data["run_id"] == run_id]


def state(h, job: str, run_id: str) -> RunState:
    return h.record(job, run_id, count=False).state


def test_pruning_deletes_a_run_whose_end_still_owes_run_finished(make):
    """An ended run whose run.finished could not be published (Pub/Sub down for a couple of
    minutes) is owed, with an `owed` marker. The next run of the job ends meanwhile and its PRUNE
    effect deletes the older run's record (prune only spares runs that are not terminal, not runs
    whose end still owes effects). The sweep then finds the `owed` marker without a record and
    deletes it: run.finished is never published for that run (the same holds for its settlement
    and hooks)."""
    h = make()
    spec = make_spec(schedule="* * * * *", history_limit=1)
    down = [True]
    h.events.fault = lambda call, kind: down[0] and kind == "run.finished"
    h.start(spec)
    h.clock.advance(30)
    assert h.finish_ok("bot", "20261122-1200").status_code == 200
    assert h.record("bot", "20261122-1200").owed == ("finished_event",)
    h.clock.advance(35)  # 12:01:10
    h.start(spec)
    h.clock.advance(30)
    assert h.finish_ok("bot", "20261122-1201").status_code == 200
    down[0] = False  # Pub/Sub is back
    for _ in range(2):
        h.clock.advance(h.settings.sweep_interval)
        assert h.sweep().status_code == 200
    assert len(finished(h, "bot", "20261122-1201")) == 1
    assert len(finished(h, "bot", "20261122-1200")) == 1, "run 1200 ended without run.finished, ever"


def test_a_pruned_skipped_tick_is_started_again_by_a_late_redelivery(make):
    """`concurrency: forbid` skips the 12:01 tick while 12:00 runs. With history_limit 1 the
    12:02 tick's end prunes the skipped 12:01 run (a run that never had a VM raises no pruning
    mark for scheduled ticks). Pub/Sub then redelivers the 12:01 message, still inside its
    starting_deadline: launch finds no record and no mark, creates the run again and, since 12:00
    is over by now, starts a VM for it. Run 12:01 ends twice (skipped, then succeeded) and runs
    the job it had been skipped for."""
    h = make()
    spec = make_spec(schedule="* * * * *", history_limit=1, concurrency="forbid", starting_deadline="10m")
    h.start(spec)  # 12:00:05, runs
    h.clock.advance(60)
    published_1201 = h.clock.now()
    h.start(spec, message_id="t1201")  # skipped (forbid)
    assert state(h, "bot", "20261122-1201") == RunState.SKIPPED
    h.clock.advance(60)
    h.start(spec, message_id="t1202")  # skipped too; its end prunes 12:01
    assert state(h, "bot", "20261122-1202") == RunState.SKIPPED
    assert h.blobs.peek(layout.run_record("bot", "20261122-1201")) is None
    h.clock.advance(20)
    assert h.finish_ok("bot", "20261122-1200").status_code == 200
    h.clock.advance(30)
    h.start(spec, publish_time=published_1201, message_id="t1201")  # the late redelivery
    ends = finished(h, "bot", "20261122-1201")
    assert [e.data["state"] for e in ends] == ["skipped"], [e.data["state"] for e in ends]
    assert h.compute.peek_any("sc-bot-20261122-1201-a1") is None, "a VM for a tick that was skipped"


def test_a_queued_run_behind_a_waiting_one_is_not_skipped_at_its_deadline(make):
    """The queue pass stops at the first run that still waits (first in, first out), so the runs
    behind it are never looked at: one whose starting_deadline passed stays `queued` for as long as
    the head waits (here an hour past its 15-minute deadline), instead of ending skipped."""
    h = make(limits=Limits(max_live_vms=1))
    h.start(make_spec(name="a", timeout="3h"))
    h.start(make_spec(name="q1", starting_deadline="2h"))  # head of the queue
    h.start(make_spec(name="q2", starting_deadline="15m"))  # behind it
    assert state(h, "q1", "20261122-1200") == state(h, "q2", "20261122-1200") == RunState.QUEUED
    for _ in range(12):  # an hour of sweeps
        h.clock.advance(h.settings.sweep_interval)
        assert h.sweep().status_code == 200
    assert state(h, "q2", "20261122-1200") == RunState.SKIPPED, "still queued 45 minutes past its deadline"


def test_a_crash_right_after_a_queued_runs_expiry_leaves_its_end_owed_past_the_next_sweep(make):
    """The sweep's queue pass ends a queued run at its deadline (QueueExpired) and is killed right
    after the terminal record write, before the marker rename: the run keeps its `queued` marker.
    The next sweep does not read queued markers (they are the queue's); its queue pass sees the run
    is no longer queued and only puts its marker right (`owed`) without doing the owed effects.
    So run.finished and the hooks wait for a second sweep: the end's effects are not done by the
    next sweep."""
    h = make(limits=Limits(max_live_vms=1))
    ended: list[str] = []
    h.deps.on_run_end.append(lambda deps, record: ended.append(f"{record.job}/{record.run_id}:{record.state}"))
    h.start(make_spec(name="a", timeout="3h"))
    h.start(make_spec(name="b", starting_deadline="15m"))
    h.clock.advance(16 * 60)
    restore = crash_after_write(h, lambda name, data: name == layout.run_record("b", "20261122-1200")
                                and b'"skipped"' in data)
    with pytest.raises(Crash):
        h.sweep()
    restore()
    assert state(h, "b", "20261122-1200") == RunState.SKIPPED and finished(h, "b", "20261122-1200") == []
    h.clock.advance(h.settings.sweep_interval)
    assert h.sweep().status_code == 200
    assert len(finished(h, "b", "20261122-1200")) == 1, "run.finished still owed after the next clean sweep"
    assert ended == ["b/20261122-1200:skipped"]


def test_a_fresh_start_takes_the_room_an_older_queued_run_waits_for(make):
    """max_live_vms 1: run a (12:00) runs, b (12:00) is queued for room. a's callback deletes a's
    VM and records its end; before job_done's queue pass runs, the 12:01 tick of every-minute job c
    is delivered. Its start never looks at the queue: it sees a free slot and takes it, and the
    queue pass that follows finds no room for b. A younger run started ahead of an older queued one
    (the queue is first in, first out only among queued runs); a stream of fresh ticks can keep b
    waiting until its starting_deadline skips it."""
    h = make(limits=Limits(max_live_vms=1))
    h.start(make_spec(name="a"))
    h.start(make_spec(name="b"))
    assert state(h, "b", "20261122-1200") == RunState.QUEUED
    h.clock.advance(60)  # 12:01:05
    c = make_spec(name="c", schedule="* * * * *")
    cut: list[bool] = []

    def fault(call: str, name: str) -> bool:
        if call == "write" and name.startswith(layout.accepted_token("")[:-1]) and not cut:
            cut.append(True)  # a's end is recorded; job_done has not run the queue yet
            h.start(c)
        return False

    h.blobs.fault = fault
    assert h.finish_ok("a", "20261122-1200").status_code == 200
    h.blobs.fault = None
    assert cut
    assert state(h, "b", "20261122-1200") == RunState.RUNNING, \
        f"b still {state(h, 'b', '20261122-1200')} while the younger c runs: {h.live_vms()}"


def test_an_insert_held_past_the_admission_window_crosses_max_live_vms(make):
    """An admission counts for others only ADMISSION_WINDOW (then 5 minutes) while its VM is not
    listed. A start admitted, then held before its insert for longer (a slow insert, zone
    fallbacks, a stalled instance) no longer counts: another job's start is admitted into the same
    slot, and then the held insert lands. The re-read right before the insert checks the attempt,
    not the admission: two VMs are live under max_live_vms 1."""
    h = make(limits=Limits(max_live_vms=1))
    held: list[bool] = []

    def fault(call: str, name: str) -> bool:
        if call == "create" and name == "sc-a-20261122-1200-a1" and not held:
            held.append(True)
            h.clock.advance(6 * 60)
            assert h.start(make_spec(name="b", schedule="* * * * *")).status_code == 200
        return False

    h.compute.fault = fault
    assert h.start(make_spec(name="a")).status_code == 200
    h.compute.fault = None
    assert held
    alive = [i.name for i in h.compute.all_instances() if i.managed]
    assert len(alive) <= 1, f"{len(alive)} VMs live under max_live_vms 1: {alive}"


def test_replace_deletes_the_old_vm_before_ending_its_run_so_a_landing_insert_outlives_it(make):
    """`concurrency: replace` deletes the older run's VM and only then writes `Replaced`. The
    12:00 run's first insert met a transient error (its start is redelivered); the redelivery
    lands between the 12:01 start's delete and its Replaced write: it creates 12:00's VM and
    records it running, then Replaced ends the run `failed` with its VM alive. That VM runs the
    job beside its replacement, for a run that has ended, until its callback or a sweep finds it."""
    h = make()
    spec = make_spec(name="r", schedule="* * * * *", concurrency="replace")
    published = h.clock.now()
    h.compute.fault = lambda call, name: call in ("create", "get") and name == "sc-r-20261122-1200-a1"
    assert h.start(spec, message_id="m1200").status_code >= 500  # Pub/Sub redelivers it
    h.compute.fault = None
    assert state(h, "r", "20261122-1200") == RunState.STARTING
    h.clock.advance(60)
    real_delete = h.compute.delete_instance
    cut: list[bool] = []

    def delete(zone, name):
        gone = real_delete(zone, name)
        if name == "sc-r-20261122-1200-a1" and not cut:
            cut.append(True)
            h.start(spec, publish_time=published, message_id="m1200")  # the redelivery lands here
        return gone

    h.compute.delete_instance = delete
    assert h.start(spec, message_id="m1201").status_code == 200
    h.compute.delete_instance = real_delete
    assert cut
    assert state(h, "r", "20261122-1200") == RunState.FAILED
    assert h.compute.peek_any("sc-r-20261122-1200-a1") is None, \
        f"the replaced (ended) run's VM is alive beside its replacement: {h.live_vms()}"


def test_a_redelivery_racing_the_prune_of_its_tick_runs_the_tick_again(make):
    """launch reads the pruning mark first and creates the record later. A redelivery of the 12:00
    tick (inside its starting_deadline) reads no mark; before it creates the record, the 12:01
    run's end prunes 12:00 (mark raised, record deleted). The redelivery's create-if-absent then
    succeeds: run 12:00, which had succeeded, is created again and gets a second VM."""
    h = make()
    spec = make_spec(schedule="* * * * *", history_limit=1)
    published = h.clock.now()
    h.start(spec, message_id="m1200")
    h.clock.advance(30)
    assert h.finish_ok("bot", "20261122-1200").status_code == 200
    h.clock.advance(35)
    h.start(spec, message_id="m1201")
    h.clock.advance(30)
    cut: list[bool] = []
    real_read = h.blobs.read

    def read(name):
        blob = real_read(name)
        if name.startswith(layout.PRUNED) and not cut:
            cut.append(True)  # the redelivery has read no mark: the 12:01 run ends now
            assert h.finish_ok("bot", "20261122-1201").status_code == 200
        return blob

    h.blobs.read = read
    h.start(spec, publish_time=published, message_id="m1200")  # Pub/Sub delivers 12:00 again
    h.blobs.read = real_read
    assert cut
    assert h.compute.calls["create"] == 2, f"{h.compute.calls['create']} inserts for two runs: {h.live_vms()}"
    assert h.compute.peek_any("sc-bot-20261122-1200-a1") is None, "the succeeded 12:00 run got a VM again"


def test_a_delivery_held_before_its_admission_leaves_an_admission_no_one_settles(make):
    """A start delivery of b is held right before its admission (its first Compute list). A copy
    of the message queues b (a holds the only slot); b's starting_deadline passes and the sweep
    ends it skipped; its settlement finds no admission (a queued run holds no admission) and writes
    nothing. a ends, then the held delivery goes on: its admission fits, is written, and stays
    (its Claim is refused because b has ended, and nothing withdraws it). b's worst case (timeout +
    grace) is admitted for the day for good, and counts as a start in progress for 5 minutes."""
    from spotcron.engine.day_hours import read_day

    h = make(limits=Limits(max_live_vms=1, max_vm_hours_per_day=10))
    h.start(make_spec(name="a", timeout="30m"))
    b = make_spec(name="b", timeout="3h")
    published = h.clock.now()
    held: list[bool] = []

    def fault(call: str, name: str) -> bool:
        if call == "list" and not held:
            held.append(True)  # the first delivery is about to admit b: it stalls here
            h.compute.fault = None
            h.start(b, publish_time=published, message_id="mb")  # the copy: b is queued
            assert state(h, "b", "20261122-1200") == RunState.QUEUED
            h.clock.advance(11 * 60)
            assert h.sweep().status_code == 200
            assert state(h, "b", "20261122-1200") == RunState.SKIPPED
            assert h.finish_ok("a", "20261122-1200").status_code == 200
        return False

    h.compute.fault = fault
    h.start(b, publish_time=published, message_id="mb")
    assert held and state(h, "b", "20261122-1200") == RunState.SKIPPED and h.live_vms() == []
    h.clock.advance(h.settings.sweep_interval)
    assert h.sweep().status_code == 200
    day = read_day(h.blobs, "2026-11-22")
    assert day.hours_of("sc-b-20261122-1200-a1") == 0, \
        f"a skipped run holds {day.hours_of('sc-b-20261122-1200-a1'):.2f} VM-hours of the day for good"


def test_a_queued_marker_whose_record_is_gone_stays_in_the_live_index_for_good(make):
    """A crash right after a queued run's expiry (QueueExpired written, marker not yet renamed)
    leaves a `queued` marker. Before any queue pass sees it, a late-delivered (missed) tick of the
    same job ends and its pruning deletes the expired run's record. From then on every queue pass
    (each sweep, each callback) reads the record, finds none and leaves the marker (the queue only
    fixes markers of records it can read; the sweep never reads queued markers itself): a phantom
    queued run in the live index for good, and the expired run's run.finished is lost with it."""
    h = make(limits=Limits(max_live_vms=1))
    h.start(make_spec(name="a", timeout="3h"))
    b = make_spec(name="b", schedule="* * * * *", starting_deadline="15m", history_limit=1)
    h.start(b)  # 12:00 tick: queued
    h.clock.advance(16 * 60)
    restore = crash_after_write(h, lambda name, data: name == layout.run_record("b", "20261122-1200")
                                and b'"skipped"' in data)
    with pytest.raises(Crash):
        h.sweep()
    restore()
    # The 12:01 tick's message comes late: missed, skipped at once; its end prunes 12:00.
    h.start(b, publish_time=h.clock.now().replace(hour=12, minute=1, second=0))
    # (Pruning now spares a run whose end still owes effects, so the record stays until it is done.)
    for _ in range(3):
        h.clock.advance(h.settings.sweep_interval)
        assert h.sweep().status_code == 200
    left = [n for n in h.blobs.list_quietly(LIVE) if "/b/20261122-1200/" in n]
    assert left == [], f"a marker of a run that no longer exists, read by every queue pass: {left}"
    assert [e.data["state"] for e in finished(h, "b", "20261122-1200")] == ["skipped"]
