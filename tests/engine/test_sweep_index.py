"""The sweep works only on runs that need attention: the live index carries what it needs."""

from __future__ import annotations

from spotcron.core import layout
from spotcron.core.layout import LIVE
from spotcron.core.runs import RunState
from spotcron.engine.live_index import live_entry_name, parse_live_name
from spotcron.testing.harness import Harness, make_spec

RUN = "20261122-1200"
ZONE = "us-central1-a"


def start_many(h, n: int) -> list[str]:
    jobs = [f"job-{i:03d}" for i in range(n)]
    for job in jobs:
        h.start(make_spec(name=job, timeout="1h"))
    return jobs


def calls(h) -> dict[str, int]:
    return {**{f"compute.{k}": v for k, v in h.compute.calls.items()},
            **{f"storage.{k}": v for k, v in h.blobs.calls.items()}}


def delta(before: dict[str, int], after: dict[str, int]) -> dict[str, int]:
    return {k: v - before.get(k, 0) for k, v in after.items() if v != before.get(k, 0)}


def test_a_running_runs_marker_names_its_state_attempt_zone_vm_and_deadline(h):
    h.start(make_spec())
    [name] = h.blobs.list(LIVE)
    entry = parse_live_name(name)
    record = h.record("bot", RUN)
    assert (entry.job, entry.run_id, entry.kind, entry.attempt, entry.zone, entry.vm) == (
        "bot", RUN, "running", 1, ZONE, "sc-bot-20261122-1200-a1")
    assert entry.deadline == record.deadline.replace(microsecond=0)
    assert name == live_entry_name(record)
    h.finish_ok("bot", RUN)
    assert h.blobs.list(LIVE) == []


def test_a_sweep_over_healthy_runs_makes_one_compute_call_and_one_storage_call():
    h = Harness(limits={"max_live_vms": 100})
    start_many(h, 40)
    h.clock.advance(5 * 60)
    before = calls(h)
    assert h.sweep().status_code == 200
    # Before: one read of every live run's record on top of the two listings (41 Storage calls).
    assert delta(before, calls(h)) == {"compute.list": 1, "storage.list": 1}


def test_only_the_run_whose_vm_vanished_is_read():
    h = Harness(limits={"max_live_vms": 100})
    start_many(h, 20)
    vanished = "sc-job-007-20261122-1200-a1"
    h.compute.preempt(ZONE, vanished)
    h.clock.advance(5 * 60)
    before = calls(h)
    h.sweep()
    used = delta(before, calls(h))
    # One list each; then for job-007 alone: a get (lists lag), its record, its manifest, the
    # lost run's update (read + write), the retry's marker rename and its new VM, whose insert
    # the stack limits check first (one more listing of the VMs, and the day's admissions listed
    # before and after its own is written).
    assert used["compute.list"] == 2 and used["storage.list"] <= 4
    assert used["storage.read"] <= 9, used
    assert h.record("job-007", RUN).current_attempt.number == 2
    assert all(h.record(f"job-{i:03d}", RUN).attempts[-1].number == 1 for i in range(20) if i != 7)


def test_a_run_waiting_for_its_vm_is_read_only_once_nobody_may_be_driving_it(h):
    """Past the list lag the sweep reads it and tries the insert again (a retry's insert has no
    redelivery behind it); before that, nothing is read."""
    from spotcron.core.errors import Transient

    h.compute.fail_create(Transient("deadline exceeded"))
    assert h.start(make_spec()).status_code == 500  # left in `starting`
    [waiting] = [parse_live_name(name) for name in h.blobs.list(LIVE)]
    assert (waiting.kind, waiting.since) == ("waiting", h.record("bot", RUN).created_at.replace(microsecond=0))
    h.clock.advance(60)
    reads = h.blobs.calls["read"]
    h.sweep()
    assert h.blobs.calls["read"] == reads  # a minute: a delivery may still be at it, nothing read
    h.clock.advance(2 * 60)
    h.sweep()
    record = h.record("bot", RUN)
    assert record.state == RunState.RUNNING and h.live_vms() == ["sc-bot-20261122-1200-a1"]
    assert [parse_live_name(name).kind for name in h.blobs.list(LIVE)] == ["running"]


def test_markers_left_by_a_crash_are_put_right_by_the_sweep(h):
    h.start(make_spec())
    record = h.record("bot", RUN)
    right = live_entry_name(record)
    stale = f"live/bot/{RUN}/waiting~-~-~-~-~1795348805"
    h.blobs.write(stale, b"")  # a rename that wrote the new name but never deleted the old one
    h.clock.advance(60)
    h.sweep()
    assert h.blobs.list(LIVE) == [right]
    assert h.record("bot", RUN).state == RunState.RUNNING and h.live_vms() == ["sc-bot-20261122-1200-a1"]


def test_a_marker_of_an_ended_run_is_removed(h):
    h.start(make_spec())
    marker = h.blobs.list(LIVE)[0]
    h.finish_ok("bot", RUN)
    h.blobs.write(marker, b"")  # as if the delete after the final update had been lost
    h.clock.advance(60)
    h.sweep()
    assert h.blobs.list(LIVE) == []
    assert h.record("bot", RUN).state == RunState.SUCCEEDED


def test_an_overdue_vm_is_reaped_by_the_deadline_in_its_marker(h):
    h.start(make_spec(timeout="1m"))
    h.clock.advance(h.settings.grace + 61 + 1)
    h.sweep()
    record = h.record("bot", RUN)
    assert record.state == RunState.TIMED_OUT and h.live_vms() == []
    assert h.blobs.read(layout.run_record("bot", RUN)) is not None and h.blobs.list(LIVE) == []


def test_only_names_the_index_writes_are_read_as_markers():
    assert parse_live_name(f"live/bot/{RUN}") is None  # no kind, no fields
    assert parse_live_name(f"live/bot/{RUN}/paused~-~-~-~-~1795348805") is None  # no such kind
    assert parse_live_name(f"live/bot/{RUN}/running~x~{ZONE}~vm~-~-") is None  # an attempt that is no number
    assert parse_live_name(f"live/bot/{RUN}/waiting~-~-~-~-~1795348805").kind == "waiting"
