"""scheduling: shared — the dispatcher, through its entry point and as pure functions."""

from __future__ import annotations

import base64
import dataclasses
import threading
from collections import Counter
from datetime import UTC, datetime, timedelta

import pytest

from spotcron.core import layout
from spotcron.core.cron.schedule import load_time_zone, parse_schedule
from spotcron.core.errors import Transient
from spotcron.core.spec import JobSpec
from spotcron.engine.deployed import SpecStore, specs_version, write_deployed
from spotcron.engine.dispatch import (
    DispatchFailed,
    DispatchState,
    dispatch,
    due_ticks,
    read_cursor,
    sweep_due,
)
from spotcron.engine.dispatch_specs import BucketSpecs, FixedSpecs
from spotcron.engine.messages import TICK_ATTRIBUTE, format_tick
from spotcron.engine.start_job import launch
from spotcron.engine.tick_trust import vouch_late
from spotcron.testing.harness import Harness, make_spec
from spotcron.testing.memory import MemoryEvents


def starts(h: Harness) -> list[tuple[str, str]]:
    return [(p.data["job"], p.attributes[TICK_ATTRIBUTE]) for p in h.events.published
            if p.topic == h.settings.start_topic]


def test_the_dispatcher_starts_the_jobs_due_this_minute_with_their_exact_tick(h):
    h.deploy(make_spec(name="bot"),  # every 4 hours, UTC
             make_spec(name="berlin", schedule="0 13 * * *", time_zone="Europe/Berlin"),  # 12:00 UTC in November
             make_spec(name="later", schedule="30 12 * * *"),
             make_spec(name="paused", paused=True))
    assert h.dispatch().status_code == 200
    assert sorted(starts(h)) == [("berlin", "2026-11-22T12:00:00Z"), ("bot", "2026-11-22T12:00:00Z")]
    h.deliver_starts()
    assert h.record("bot", "20261122-1200").state == "running"
    assert h.record("berlin", "20261122-1200").state == "running"
    assert h.records("later") == [] and h.records("paused") == []


def test_start_job_takes_the_tick_from_the_message_not_from_its_publish_time(h):
    spec = make_spec(schedule="*/2 * * * *")
    # Published at 12:02:30 for the 12:00 tick (a dispatcher's catch-up, which vouches for it):
    # inferring from the publish time would say 12:02.
    vouch_late(h.deps, [("bot", datetime(2026, 11, 22, 12, 0, tzinfo=UTC))], datetime(2026, 11, 22, 12, 2, tzinfo=UTC))
    h.start(spec, publish_time=h.clock.now() + timedelta(seconds=145), attributes={TICK_ATTRIBUTE: "2026-11-22T12:00:00Z"})
    assert [r.run_id for r in h.records("bot")] == ["20261122-1200"]


def test_a_tick_that_is_not_a_fire_time_of_the_schedule_starts_nothing(h, caplog):
    response = h.start(make_spec(), attributes={TICK_ATTRIBUTE: "2026-11-22T12:01:00Z"})
    assert response.status_code == 200  # acknowledged: a retry would be refused the same way
    assert h.records("bot") == [] and h.compute.created == []
    assert ("job bot: tick 2026-11-22T12:01Z is not a fire time of schedule '0 */4 * * *' in Etc/UTC"
            in caplog.text)


def test_a_tick_that_is_not_a_whole_minute_is_refused(h, caplog):
    h.start(make_spec(), attributes={TICK_ATTRIBUTE: "noon"})
    assert h.records("bot") == []
    assert "the message's tick attribute 'noon' is not a whole UTC minute like 2026-11-22T10:00:00Z" in caplog.text


def test_minutes_in_which_nothing_fires_write_nothing(h):
    h.deploy(make_spec())
    h.dispatch()  # 12:00: the cursor moves
    cursor = h.blobs.read(layout.DISPATCH_CURSOR)
    writes = h.blobs.calls["write"]
    for _ in range(30):
        h.clock.advance(60)
        h.dispatch()
    assert h.blobs.calls["write"] == writes
    assert h.blobs.read(layout.DISPATCH_CURSOR).generation == cursor.generation
    assert len(starts(h)) == 1


def test_the_sweep_rides_the_dispatch_entry_on_its_interval(h):
    h.dispatch()  # 12:00:05, a multiple of 5 minutes
    h.clock.advance(60)
    h.dispatch()
    h.clock.advance(4 * 60)
    h.dispatch()
    sweeps = [p for p in h.events.published if p.topic == h.settings.sweep_topic]
    assert len(sweeps) == 2
    assert [sweep_due(datetime(2026, 1, 1, 10, m, tzinfo=UTC), 300) for m in (0, 1, 5, 59)] == [True, False, True, False]
    assert [sweep_due(datetime(2026, 1, 1, h_, 0, tzinfo=UTC), 7200) for h_ in (0, 1, 2)] == [True, False, True]


def test_catch_up_after_a_30_minute_outage_starts_what_is_still_within_each_deadline(h):
    h.deploy(make_spec(name="tens", schedule="*/10 * * * *", starting_deadline="20m"),
             make_spec(name="minutely", schedule="* * * * *", starting_deadline="5m", concurrency="allow"),
             make_spec(name="noon", schedule="0 12 * * *", starting_deadline="10m"))
    h.dispatch()  # 12:00:05
    assert sorted(starts(h)) == [("minutely", "2026-11-22T12:00:00Z"), ("noon", "2026-11-22T12:00:00Z"),
                                 ("tens", "2026-11-22T12:00:00Z")]
    h.deliver_starts()
    h.clock.advance(31 * 60)  # nothing dispatched 12:01-12:30; now 12:31:05
    h.dispatch()
    caught_up = h.deliver_starts()
    # 12:10 is 21 min old (deadline 20m) and 12:26 is 305 s old (deadline 5m): left out.
    assert sorted(caught_up) == [("minutely", f"2026-11-22T12:{m}:00Z") for m in (27, 28, 29, 30, 31)] + [
        ("tens", "2026-11-22T12:20:00Z"), ("tens", "2026-11-22T12:30:00Z")]
    assert [r.run_id for r in h.records("tens")] == ["20261122-1200", "20261122-1220", "20261122-1230"]
    assert all(r.state == "running" for r in h.records("minutely"))
    assert read_cursor(h.deps).through == datetime(2026, 11, 22, 12, 31, tzinfo=UTC)
    h.clock.advance(60)
    h.dispatch()
    assert h.deliver_starts() == [("minutely", "2026-11-22T12:32:00Z")]


class _BothReadFirst:
    """Blobs on which the first cursor read of each of two dispatchers waits for the other's:
    both see the same cursor before either writes it, the race the precondition is for."""

    def __init__(self, blobs, parties: int = 2):
        self._blobs = blobs
        self._barrier = threading.Barrier(parties, timeout=10)
        self._seen: set[int] = set()

    def read(self, name):
        blob = self._blobs.read(name)
        me = threading.get_ident()
        if name == layout.DISPATCH_CURSOR and me not in self._seen:
            self._seen.add(me)
            self._barrier.wait()
        return blob

    def __getattr__(self, name):
        return getattr(self._blobs, name)


def test_two_dispatchers_racing_on_one_minute_start_each_tick_once(h):
    h.deploy(*[make_spec(name=f"job-{i}", schedule="*/5 * * * *") for i in range(5)])
    deps = dataclasses.replace(h.deps, blobs=_BothReadFirst(h.blobs))
    reports = []
    threads = [threading.Thread(target=lambda: reports.append(dispatch(deps, BucketSpecs(h.blobs)))) for _ in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    # Both read the cursor before either wrote it, so both publish the minute (the dispatcher is
    # at-least-once); start_job starts each (job, tick) once.
    assert Counter(starts(h)) == Counter({(f"job-{i}", "2026-11-22T12:00:00Z"): 2 for i in range(5)})
    assert sorted(r.lost_race for r in reports) == [0, 1]
    h.deliver_starts()
    assert all([r.run_id for r in h.records(f"job-{i}")] == ["20261122-1200"] for i in range(5))
    assert len(h.compute.created) == 5
    assert read_cursor(h.deps).through == datetime(2026, 11, 22, 12, tzinfo=UTC)


def test_many_dispatchers_at_once_never_double_a_run(h):
    h.deploy(*[make_spec(name=f"job-{i}", schedule="* * * * *", concurrency="allow") for i in range(3)])
    for _ in range(3):
        barrier = threading.Barrier(6)

        def one(barrier=barrier):
            barrier.wait()
            dispatch(h.deps, BucketSpecs(h.blobs))  # six instances, each cold

        threads = [threading.Thread(target=one) for _ in range(6)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        h.clock.advance(60)
    counts = Counter(starts(h))
    assert len(counts) == 9 and all(1 <= n <= 6 for n in counts.values())
    h.deliver_starts()
    assert all([r.run_id for r in h.records(f"job-{i}")] == [f"20261122-120{m}" for m in range(3)] for i in range(3))
    assert len(h.compute.created) == 9


def test_a_failed_publish_gives_the_minute_back_and_the_next_minute_starts_it_once(h):
    class Flaky(MemoryEvents):
        failing = {"b"}

        def publish(self, topic, data, attributes=None):
            if topic == "spotcron-start" and data.get("job") in self.failing:
                raise Transient("Pub/Sub did not answer")
            return super().publish(topic, data, attributes)

    events = Flaky()
    deps = dataclasses.replace(h.deps, events=events)
    specs = FixedSpecs([make_spec(name="a"), make_spec(name="b")])
    for spec in specs.specs:
        SpecStore(h.blobs).write(spec)  # start_job runs only what deploy left, from when it left it
    with pytest.raises(DispatchFailed, match=r"1 of 2 start messages were not published \(the next minute tries "
                                             r"them again\): b at 2026-11-22T12:00:00Z: Pub/Sub did not answer"):
        dispatch(deps, specs)
    assert read_cursor(deps).through == datetime(2026, 11, 22, 11, 59, tzinfo=UTC)  # where the window began
    events.failing = set()
    h.clock.advance(60)
    dispatch(deps, specs)
    ticks = [(p.data["job"], p.attributes[TICK_ATTRIBUTE]) for p in events.published if p.topic == "spotcron-start"]
    assert sorted(ticks) == [("a", "2026-11-22T12:00:00Z"), ("a", "2026-11-22T12:00:00Z"), ("b", "2026-11-22T12:00:00Z")]
    for name, tick in ticks:  # a's second message is a duplicate delivery: still one run
        launch(h.deps, make_spec(name=name), requested_at=h.clock.now(),
               tick=datetime.fromisoformat(tick.replace("Z", "+00:00")))
    assert [r.run_id for r in h.records("a")] == ["20261122-1200"] and len(h.compute.created) == 2


# --- across DST days, in several zones ------------------------------------------------------------

DST_DAYS = [
    ("Europe/Berlin", "2026-03-29"), ("Europe/Berlin", "2026-10-25"),  # 02:00 -> 03:00, 03:00 -> 02:00
    ("America/New_York", "2026-03-08"), ("America/New_York", "2026-11-01"),
    ("Australia/Lord_Howe", "2026-04-05"), ("Australia/Lord_Howe", "2026-10-04"),  # half-hour changes
    ("Africa/Cairo", "2026-04-24"), ("Africa/Cairo", "2026-10-29"),  # changes at midnight
]
DST_SCHEDULES = ["30 2 * * *", "0 0 * * *", "30 1 * * *", "*/30 * * * *", "15 */2 * * *", "45 23 * * *"]


@pytest.mark.parametrize(("zone", "day"), DST_DAYS, ids=[f"{z}-{d}" for z, d in DST_DAYS])
def test_the_dispatcher_across_a_dst_day_starts_every_fire_time_once(zone, day):
    tz = load_time_zone(zone)
    local_midnight = datetime.fromisoformat(day).replace(tzinfo=tz)
    start, end = local_midnight - timedelta(hours=3), local_midnight + timedelta(hours=27)
    assert (start + timedelta(hours=1)).utcoffset() != (end - timedelta(hours=1)).utcoffset(), "no DST change"
    specs = [make_spec(name=f"j{i}", schedule=s, time_zone=zone, concurrency="allow", history_limit=1000)
             for i, s in enumerate(DST_SCHEDULES)]
    h = Harness(now=start.astimezone(UTC).replace(second=5))
    try:
        version = write_deployed(h.blobs, specs)
        deployed, state = BucketSpecs(h.blobs), DispatchState()
        while h.clock.now() < end:
            dispatch(h.deps, deployed, version=version, state=state)
            h.clock.advance(60)
        first = start.astimezone(UTC).replace(second=0) - timedelta(seconds=1)
        for spec in specs:
            cron = parse_schedule(spec.schedule)
            expected = []
            for tick in cron.upcoming(first, tz, 200):
                if tick > h.clock.now() - timedelta(seconds=60):
                    break
                expected.append(format_tick(tick))
            got = [t for name, t in starts(h) if name == spec.name]
            assert got == expected, spec.schedule
            for tick in got:
                at = datetime.fromisoformat(tick.replace("Z", "+00:00"))
                launch(h.deps, spec, requested_at=at, tick=at)  # published in its minute, handled now
            assert len({r.run_id for r in h.records(spec.name)}) == len(got)
        if (zone, day) == ("Europe/Berlin", "2026-03-29"):
            assert [t for n, t in starts(h) if n == "j0" and t < "2026-03-30"] == ["2026-03-29T01:00:00Z"]  # at the jump
        if (zone, day) == ("Europe/Berlin", "2026-10-25"):
            assert [t for n, t in starts(h) if n == "j0" and t < "2026-10-26"] == ["2026-10-25T00:30:00Z"]  # once
            real = end.astimezone(UTC) - start.astimezone(UTC)  # 31 hours: aware arithmetic is wall time
            assert len([t for n, t in starts(h) if n == "j3"]) == real // timedelta(minutes=30)  # both passes
    finally:
        from spotcron.runtime import entrypoints

        entrypoints.use(None)


# --- pure parts ------------------------------------------------------------------------------------

def test_due_ticks_leaves_out_paused_jobs_and_bad_schedules_and_says_which():
    now = datetime(2026, 11, 22, 12, 0, 5, tzinfo=UTC)
    good = make_spec(name="good")
    broken = good.model_copy(update={"name": "broken", "schedule": "0 0 31 2 *"})  # a spec built by hand
    skipped: list[str] = []
    due = due_ticks([good, broken, make_spec(name="off", paused=True)], after=now - timedelta(minutes=1), now=now,
                    skipped=skipped)
    assert [(d.spec.name, d.tick) for d in due] == [("good", datetime(2026, 11, 22, 12, tzinfo=UTC))]
    assert skipped == ["broken"]


def test_a_warm_dispatcher_reads_nothing_in_a_minute_where_nothing_fires(h):
    version = write_deployed(h.blobs, [make_spec(), make_spec(name="other", schedule="30 12 * * *")])
    assert h.dispatch(version).status_code == 200  # 12:00: reads the specs and the cursor, writes it
    assert starts(h) == [("bot", "2026-11-22T12:00:00Z")]
    before = dict(h.blobs.calls)
    for _ in range(29):
        h.clock.advance(60)
        h.dispatch(version)
    assert h.blobs.calls == before  # 12:01-12:29: not one Storage call
    h.clock.advance(60)
    h.dispatch(version)  # 12:30: a tick, so the cursor read (another instance may have moved it) and written
    assert {k: v - before[k] for k, v in h.blobs.calls.items() if v != before[k]} == {"read": 1, "write": 1}
    assert starts(h)[-1] == ("other", "2026-11-22T12:30:00Z")


def test_a_new_deploy_is_read_at_the_next_minute(h):
    version = write_deployed(h.blobs, [make_spec()])
    h.dispatch(version)
    changed = make_spec(schedule="1 12 * * *")
    new_version = write_deployed(h.blobs, [changed, make_spec(name="added", schedule="1 12 * * *")])
    assert new_version != version
    h.clock.advance(60)
    h.dispatch(new_version)
    assert sorted(starts(h)) == [("added", "2026-11-22T12:01:00Z"), ("bot", "2026-11-22T12:00:00Z"),
                                 ("bot", "2026-11-22T12:01:00Z")]
    write_deployed(h.blobs, [])
    h.clock.advance(60 * 59)
    h.dispatch(specs_version([]))  # 13:00: bot would fire, but nothing is deployed any more
    assert len(starts(h)) == 3


def test_a_stale_cursor_in_a_warm_dispatcher_costs_a_read_not_a_double_tick(h):
    specs = FixedSpecs([make_spec(schedule="* * * * *", concurrency="allow")], deployed_at={"bot": h.clock.now()})
    mine, theirs = DispatchState(), DispatchState()
    dispatch(h.deps, specs, state=mine)  # 12:00 by this instance
    h.clock.advance(60)
    dispatch(h.deps, specs, state=theirs)  # 12:01 by another instance
    h.clock.advance(60)
    report = dispatch(h.deps, specs, state=mine)  # 12:02: its cursor says 12:00, so it reads it again
    assert report.lost_race == 0 and report.started == [("bot", datetime(2026, 11, 22, 12, 2, tzinfo=UTC))]
    assert Counter(starts(h)) == Counter({("bot", f"2026-11-22T12:0{m}:00Z"): 1 for m in range(3)})


def test_the_dispatch_message_version_is_what_deploy_puts_in_the_entry():
    from spotcron.deploy.desired import dispatch_data
    from spotcron.runtime.entrypoints import dispatch_version

    jobs = [make_spec(), make_spec(name="other")]
    data = {"message": {"data": base64.b64encode(dispatch_data(jobs).encode()).decode()}}
    assert dispatch_version(data) == specs_version(reversed(jobs)) == specs_version(jobs)
    assert dispatch_version({"message": {"data": ""}}) is None


def test_a_stale_or_broken_cursor_does_not_stop_the_dispatcher(h):
    h.deploy(make_spec())
    h.blobs.write(layout.DISPATCH_CURSOR, b"not json")
    h.dispatch()
    assert starts(h) == [("bot", "2026-11-22T12:00:00Z")]
    assert read_cursor(h.deps).through == datetime(2026, 11, 22, 12, tzinfo=UTC)


def test_a_job_spec_round_trips_through_the_deployed_objects():
    spec = JobSpec.model_validate({"name": "m", "schedule": "0 1 * * *", "image": "x/y:1",
                                   "matrix": [{"name": "a"}, {"name": "b", "env": {"K": "v"}}]})
    h = Harness()
    try:
        version = write_deployed(h.blobs, [spec])
        reader = BucketSpecs(h.blobs)
        assert reader.current() == [spec]
        reads = h.blobs.calls["read"]
        assert reader.current(version) == [spec] and h.blobs.calls["read"] == reads  # held: nothing read
        h.blobs.write(layout.deployed_spec("broken"), b"{}")
        assert reader.current() == [spec]  # read again; the one that does not load is left out (and logged)
        assert h.blobs.calls["read"] == reads + 3  # both specs, and the since object of the one that loads
    finally:
        from spotcron.runtime import entrypoints

        entrypoints.use(None)


# --- a cursor in the future, ticks from before a deploy, future ticks ------------------------------

def test_a_cursor_in_the_future_is_damaged_and_the_dispatcher_recovers_without_losing_or_doubling_ticks(h, caplog):
    h.deploy(make_spec(name="minutely", schedule="* * * * *", starting_deadline="5m", concurrency="allow"))
    h.dispatch()  # 12:00
    h.deliver_starts()
    # A clock jump, a bad write or a restored object: every minute would look dispatched already.
    h.blobs.write(layout.DISPATCH_CURSOR, b'{"through": "2027-01-01T00:00:00Z"}')
    h.clock.advance(3 * 60)  # 12:03:05
    assert h.dispatch().status_code == 200
    h.deliver_starts()
    assert ("dispatch: dispatch/cursor.json says 2027-01-01T00:00:00Z, after now (2026-11-22T12:03:05Z) by more "
            "than 60s: damaged (a clock jump, a bad write or a restored object); starting again from every "
            "job's starting_deadline (start_job starts a tick already started only once)") in caplog.text
    assert [r.run_id for r in h.records("minutely")] == [f"20261122-120{m}" for m in range(4)]
    assert len(h.compute.created) == 4  # 12:00 went out twice, and started once
    assert read_cursor(h.deps).through == datetime(2026, 11, 22, 12, 3, tzinfo=UTC)  # rewritten
    h.clock.advance(60)
    h.dispatch()
    assert h.deliver_starts() == [("minutely", "2026-11-22T12:04:00Z")]


def test_a_cursor_a_little_ahead_is_a_clock_skew_not_damage(h, caplog):
    h.deploy(make_spec(name="minutely", schedule="* * * * *", concurrency="allow"))
    h.blobs.write(layout.DISPATCH_CURSOR, b'{"through": "2026-11-22T12:01:00Z"}')  # 55 s ahead
    h.dispatch()
    assert starts(h) == [] and "damaged" not in caplog.text
    h.clock.advance(60)
    h.dispatch()
    h.clock.advance(60)
    h.dispatch()
    assert starts(h) == [("minutely", "2026-11-22T12:02:00Z")]


def test_catch_up_never_starts_a_job_at_ticks_from_before_its_spec_was_deployed(h):
    hours = {"starting_deadline": "6h", "concurrency": "allow", "history_limit": 1000}
    h.deploy(make_spec(name="old", schedule="0 * * * *"),
             make_spec(name="woken", schedule="*/10 * * * *", paused=True, **hours),
             make_spec(name="moved", schedule="0 0 * * *", **hours))
    h.dispatch()  # 12:00:05; then the dispatcher is down for three and a half hours
    assert h.deliver_starts() == [("old", "2026-11-22T12:00:00Z")]
    h.clock.advance(3 * 3600 + 10 * 60)  # 15:10:05: one new job, one unpaused, one rescheduled
    h.deploy(make_spec(name="old", schedule="0 * * * *"),
             make_spec(name="woken", schedule="*/10 * * * *", **hours),
             make_spec(name="moved", schedule="*/15 * * * *", **hours),
             make_spec(name="fresh", schedule="* * * * *", **hours))
    h.clock.advance(20 * 60)  # 15:30:05
    h.dispatch()
    caught_up = Counter(name for name, _ in h.deliver_starts())
    # From the minute each spec was deployed in (15:10), not from the cursor (12:00): a deploy and
    # the dispatch of its minute race, so that minute counts whichever finished first.
    assert caught_up == {"fresh": 21, "woken": 3, "moved": 2}
    assert [r.run_id for r in h.records("woken")] == ["20261122-1510", "20261122-1520", "20261122-1530"]
    assert [r.run_id for r in h.records("moved")] == ["20261122-1515", "20261122-1530"]
    assert h.records("fresh")[0].run_id == "20261122-1510"


def test_deploying_unchanged_specs_again_keeps_the_time_they_were_deployed(h):
    spec = make_spec(name="fresh", schedule="* * * * *", starting_deadline="1h", concurrency="allow")
    h.deploy(spec)
    deployed = h.blobs.read(layout.deployed_spec("fresh"))
    h.clock.advance(30 * 60)
    h.deploy(spec)  # e.g. `spotcron deploy` with another job changed, or `spotcron up` again
    assert h.blobs.read(layout.deployed_spec("fresh")).generation == deployed.generation
    h.dispatch()  # 12:30:05, the first dispatch: no cursor, so this minute only
    h.blobs.write(layout.DISPATCH_CURSOR, b'{"through": "2026-11-22T12:10:00Z"}')  # as if it had been behind
    h.clock.advance(60)
    h.dispatch()
    assert [t for _, t in starts(h)][-1:] == ["2026-11-22T12:31:00Z"]
    assert ("fresh", "2026-11-22T12:11:00Z") in starts(h)  # deployed at 12:00, so 12:11 is its own


def test_a_tick_in_the_future_starts_nothing_before_it_is_due(h, caplog):
    spec = make_spec()  # every 4 hours: 16:00 is a real fire time, four hours away
    response = h.start(spec, attributes={TICK_ATTRIBUTE: "2026-11-22T16:00:00Z"})
    assert response.status_code == 200  # acknowledged: it is refused the same way until 16:00
    assert h.records("bot") == [] and h.compute.created == []
    assert ("job bot: tick 2026-11-22T16:00Z is 3h59m after now (2026-11-22T12:00:05Z), more than the 60s "
            "a clock may be off: a dispatcher publishes a tick only once it is due, so this message is refused; "
            "check the clock of whatever published it") in caplog.text
    h.clock.advance(4 * 3600)  # 16:00:05: the dispatcher's message for it
    h.start(spec, attributes={TICK_ATTRIBUTE: "2026-11-22T16:00:00Z"})
    assert [r.run_id for r in h.records("bot")] == ["20261122-1600"] and len(h.compute.created) == 1


def test_a_tick_a_few_seconds_ahead_is_clock_skew_and_starts(h):
    h.clock.advance(-10 * 60 + 55 - 5)  # 11:50:55: the 11:51 tick is 5 s ahead of this clock
    h.start(make_spec(schedule="* * * * *"), attributes={TICK_ATTRIBUTE: "2026-11-22T11:51:00Z"})
    assert [r.run_id for r in h.records("bot")] == ["20261122-1151"]
