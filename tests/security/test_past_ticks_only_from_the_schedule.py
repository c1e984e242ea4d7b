"""A publisher on the start topic names a *past* fire time of the deployed schedule, in the `tick`
attribute or by the time it publishes: one from before the job was deployed as it is (or while it
was paused), or one published long after it. start_job trusts a tick only from what no publisher
writes, the deploy's time and Pub/Sub's publish time (engine/tick_trust.py), so none of these
plants a run, a missed record or a "fail" ping, ends or holds back the job's real tick, or takes
VMs past the manual share; the dispatcher's own late ticks (a catch-up it vouches for) and a
start published before a deploy replaced its spec still run.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from spotcron.core.runs import RunState
from spotcron.engine.deployed import SpecStore, start_body
from spotcron.engine.messages import TICK_ATTRIBUTE
from spotcron.engine.tick_trust import LATE_PREFIX, late_marker, vouch_late
from spotcron.runtime.run_end import install
from spotcron.testing.harness import make_spec

NOW = datetime(2026, 11, 22, 12, 0, 5, tzinfo=UTC)


class Receiver:
    def __init__(self):
        self.posts: list[tuple[str, bytes]] = []

    def __call__(self, url, data, headers):
        self.posts.append((url, data))
        return 200


def test_a_publisher_naming_a_tick_from_before_the_deploy_raises_a_false_fail_ping(h):
    receiver = Receiver()
    install(h.deps, post=receiver, secrets=None)
    spec = make_spec(name="nightly", schedule="0 12 * * *",
                     notify={"webhook": "http://hooks.example/spotcron", "ping": "https://hc-ping.com/abc"})
    h.start(spec)  # deployed today; its first tick, 12:00, runs
    h.finish_ok("nightly", "20261122-1200")
    h.sweep()
    before = list(receiver.posts)
    # Yesterday's 12:00, a day before the job was deployed: nothing was ever due then.
    yesterday = (NOW - timedelta(days=1)).replace(second=0)
    h.start(start_body(spec), attributes={TICK_ATTRIBUTE: yesterday.strftime("%Y-%m-%dT%H:%M:%SZ")})
    h.sweep()
    planted = [r for r in h.records("nightly") if r.run_id != "20261122-1200"]
    new_posts = receiver.posts[len(before):]
    assert planted == [] and new_posts == [], (
        f"one start message naming a tick from before the deploy recorded {[(r.run_id, str(r.state)) for r in planted]} "
        f"and sent {[(u, d[:120]) for u, d in new_posts]}: a false 'fail' ping to the health check, at will")


def test_an_older_unrun_tick_named_by_a_publisher_ends_the_jobs_running_tick_under_replace(h):
    # Deployed at 12:00:05 (just after the 12:00 fire time, which it never received), every 30 min,
    # a starting_deadline of an hour.
    spec = make_spec(name="half", schedule="*/30 * * * *", timeout="6h", concurrency="replace",
                     starting_deadline="1h")
    SpecStore(h.blobs).write(spec)
    h.clock.set(NOW.replace(minute=30))
    h.start(spec)  # the 12:30 tick, the first the scheduler sends
    assert h.record("half", "20261122-1230").state == RunState.RUNNING
    h.clock.advance(60)
    # The publisher names 12:00, a fire time before the deploy and within starting_deadline.
    h.start(start_body(spec), attributes={TICK_ATTRIBUTE: "2026-11-22T12:00:00Z"})
    real = h.record("half", "20261122-1230")
    assert real.state == RunState.RUNNING, (
        f"a start naming the older tick 12:00 ended the job's real 12:30 run: {real.state} ({real.reason}); "
        f"live VMs now {h.live_vms()}")


def test_an_older_unrun_tick_named_just_before_the_real_one_skips_it_under_forbid(h):
    spec = make_spec(name="half", schedule="*/30 * * * *", timeout="6h", concurrency="forbid",
                     starting_deadline="1h")
    SpecStore(h.blobs).write(spec)  # deployed at 12:00:05; the 12:00 fire time never reached it
    h.clock.set(NOW.replace(minute=29, second=50))
    # Ten seconds before the 12:30 tick, the publisher names 12:00 (29 min late, within the hour).
    h.start(start_body(spec), attributes={TICK_ATTRIBUTE: "2026-11-22T12:00:00Z"})
    h.clock.set(NOW.replace(minute=30))
    h.start(spec)  # the scheduler's own 12:30 tick
    real = h.record("half", "20261122-1230")
    assert real.state == RunState.RUNNING, (
        f"the job's real 12:30 tick was {real.state} ({real.reason}): held back by a run the publisher "
        f"started for a fire time before the deploy")


def test_replayed_past_ticks_do_not_take_more_than_the_manual_share_from_other_jobs_ticks():
    from spotcron.core.settings import Limits
    from spotcron.runtime import entrypoints
    from spotcron.testing.harness import Harness

    h = Harness(limits=Limits(max_live_vms=4))  # manual runs may hold 2; 2 are kept for ticks
    try:
        # Deployed at 12:00:05: every minute, `allow`, a starting_deadline of an hour.
        spec = make_spec(name="minutely", schedule="* * * * *", timeout="2h", concurrency="allow",
                         starting_deadline="1h")
        SpecStore(h.blobs).write(spec)
        for minute in range(56, 60):  # the publisher names four fire times from before the deploy
            h.start(start_body(spec), attributes={TICK_ATTRIBUTE: f"2026-11-22T11:{minute:02d}:00Z"})
        taken = [r.run_id for r in h.records("minutely") if r.state == RunState.RUNNING]
        other = make_spec(name="other", schedule="0 12 * * *")
        h.start(other)  # another job's own 12:00 tick
        state = h.record("other", "20261122-1200")
        assert state.state == RunState.RUNNING, (
            f"another job's tick is {state.state} ({state.reason}): the publisher's replayed past ticks "
            f"{taken} hold every VM of max_live_vms 4, past the manual share of 2")
    finally:
        entrypoints.use(None)


def test_a_publisher_without_a_tick_attribute_cannot_name_a_tick_from_before_the_deploy(h, caplog):
    # Per-job mode: the tick is the latest fire time at or before the publish time. Deployed at
    # 12:30, a daily 12:00 job's latest fire time an hour later is today's 12:00, before the deploy.
    spec = make_spec(name="daily", schedule="0 12 * * *")
    h.clock.set(NOW.replace(minute=30))
    SpecStore(h.blobs).write(spec)
    h.clock.advance(3600)
    h.start(start_body(spec))
    assert h.records("daily") == []
    assert "refused tick 2026-11-22T12:00Z: it falls before 2026-11-22T12:30:05Z" in caplog.text


def test_a_start_published_before_a_deploy_replaced_its_spec_still_runs_its_tick(h):
    spec = make_spec(name="half", schedule="*/30 * * * *", starting_deadline="1h")
    SpecStore(h.blobs).write(spec)
    published = h.clock.now()  # 12:00:05, the 12:00 tick's message
    h.clock.advance(120)
    SpecStore(h.blobs).write(make_spec(name="half", schedule="*/30 * * * *", starting_deadline="1h", timeout="3h"))
    # Its first delivery failed; Pub/Sub delivers it again after the deploy, with its own publish time.
    h.start(start_body(spec), attributes={TICK_ATTRIBUTE: "2026-11-22T12:00:00Z"}, publish_time=published)
    assert h.record("half", "20261122-1200").state == RunState.RUNNING


def test_a_late_tick_the_dispatcher_vouched_for_runs_and_one_it_did_not_is_refused(h, caplog):
    spec = make_spec(name="tens", schedule="*/10 * * * *", starting_deadline="20m")
    SpecStore(h.blobs).write(spec)
    h.clock.set(NOW.replace(minute=15))
    # A dispatcher's catch-up at 12:15 publishes 12:10, five minutes after its minute, and vouches for it.
    vouch_late(h.deps, [("tens", NOW.replace(minute=10, second=0))], NOW.replace(minute=15, second=0))
    h.start(start_body(spec), attributes={TICK_ATTRIBUTE: "2026-11-22T12:10:00Z"})
    assert h.record("tens", "20261122-1210").state == RunState.RUNNING
    # The same lag for 12:00, which no dispatcher published late: refused, no record.
    h.start(start_body(spec), attributes={TICK_ATTRIBUTE: "2026-11-22T12:00:00Z"})
    assert [r.run_id for r in h.records("tens")] == ["20261122-1210"]
    assert ("refused tick 2026-11-22T12:00Z: the message was published at 2026-11-22T12:15:05Z, 905s after it"
            in caplog.text)


def test_a_catch_up_deletes_the_markers_no_start_can_use_any_more(h):
    old = NOW.replace(second=0) - timedelta(days=9)
    vouch_late(h.deps, [("tens", old)], old + timedelta(minutes=5))
    recent = NOW.replace(second=0)
    vouch_late(h.deps, [("tens", recent)], recent + timedelta(minutes=5))
    assert h.blobs.list(LATE_PREFIX) == [late_marker("tens", recent)]
