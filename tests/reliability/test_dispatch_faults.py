"""scheduling: shared — the dispatcher killed or failing at each point, and dispatchers interleaved.

The dispatcher is at-least-once: a minute is recorded in the cursor only after every start
message of it was published, so a dispatcher that dies anywhere leaves its minutes to the next
one. start_job is exactly-once: the run id comes from the tick, so a minute published twice
starts each (job, tick) once. Faults are injected by the publisher and the bucket, never by timing.
"""

from __future__ import annotations

import dataclasses
from collections import Counter
from datetime import UTC, datetime

import pytest

from spotcron.core import layout
from spotcron.core.errors import Transient
from spotcron.engine.dispatch import DispatchFailed, DispatchState, dispatch
from spotcron.engine.dispatch_specs import BucketSpecs
from spotcron.engine.messages import TICK_ATTRIBUTE
from spotcron.runtime import entrypoints
from spotcron.testing.harness import Harness, make_spec
from spotcron.testing.memory import FakeClock

JOBS = ("a", "b", "c")
BEFORE = b'{"through": "2026-11-22T11:59:00Z"}'  # the minute before: 12:00 is this dispatch's


class Killed(BaseException):
    """The dispatcher's process ends here (an instance torn down, a timeout): nothing after it runs."""


class Dying:
    """The dispatcher's outside world, dead from its `at`-th call on (`after`: that call still happens).

    Counts cursor reads and writes and start-message publishes, the points where dying matters.
    Once dead, every call dies, in every thread: nothing the dead process does lands.
    """

    def __init__(self, h: Harness, at: int | None, *, after: bool):
        self.h, self.at, self.after = h, at, after
        self.calls: list[str] = []
        self.dead = False

    def _point(self, what: str, do):
        if self.dead:
            raise Killed(what)
        index = len(self.calls)
        self.calls.append(what)
        if index == self.at and not self.after:
            self.dead = True
            raise Killed(what)
        result = do()
        if index == self.at:
            self.dead = True
            raise Killed(what)
        return result

    # Events
    def publish(self, topic, data, attributes=None):
        if topic != self.h.settings.start_topic:
            return self.h.events.publish(topic, data, attributes)
        return self._point(f"publish {data['job']}", lambda: self.h.events.publish(topic, data, attributes))

    # Blobs
    def read(self, name):
        if name != layout.DISPATCH_CURSOR:
            return self.h.blobs.read(name)
        return self._point("read cursor", lambda: self.h.blobs.read(name))

    def write(self, name, data, **kwargs):
        if name != layout.DISPATCH_CURSOR:
            return self.h.blobs.write(name, data, **kwargs)
        return self._point("write cursor", lambda: self.h.blobs.write(name, data, **kwargs))

    def __getattr__(self, name):
        return getattr(self.h.blobs, name)


def _world(at: int | None, after: bool) -> tuple[Harness, Dying]:
    h = Harness(scheduling="shared")
    h.deploy(*[make_spec(name=n, schedule="* * * * *", concurrency="allow") for n in JOBS])
    h.blobs.write(layout.DISPATCH_CURSOR, BEFORE)
    return h, Dying(h, at, after=after)


def _points() -> list[tuple[int, bool]]:
    h, dying = _world(None, after=False)
    try:
        dispatch(dataclasses.replace(h.deps, blobs=dying, events=dying), BucketSpecs(h.blobs))
    finally:
        entrypoints.use(None)
    assert "write cursor" in dying.calls and sum(c.startswith("publish") for c in dying.calls) == len(JOBS)
    return [(at, after) for at in range(len(dying.calls)) for after in (False, True)]


POINTS = _points()


@pytest.mark.parametrize(("at", "after"), POINTS, ids=[f"{'after' if a else 'before'}-call-{i}" for i, a in POINTS])
def test_a_dispatcher_killed_at_any_point_loses_no_tick_and_doubles_no_run(at, after):
    h, dying = _world(at, after)
    try:
        with pytest.raises(Killed):
            dispatch(dataclasses.replace(h.deps, blobs=dying, events=dying), BucketSpecs(h.blobs))
        h.clock.advance(60)  # the next minute's dispatcher, on another instance
        dispatch(h.deps, BucketSpecs(h.blobs), state=DispatchState())
        published = Counter(h.deliver_starts())
        for job in JOBS:
            assert published[(job, "2026-11-22T12:00:00Z")] >= 1, (dying.calls, job)
            assert published[(job, "2026-11-22T12:01:00Z")] == 1
            assert [r.run_id for r in h.records(job)] == ["20261122-1200", "20261122-1201"]
        assert len(h.compute.created) == 2 * len(JOBS)  # a minute published twice still starts once
    finally:
        h.close()


def test_the_very_first_dispatcher_killed_before_any_cursor_exists_loses_nothing():
    # The first minute after deploying `scheduling: shared`: there is no cursor yet.
    h = Harness(scheduling="shared")
    h.deploy(*[make_spec(name=n, schedule="* * * * *", concurrency="allow") for n in JOBS])
    dying = Dying(h, 1, after=False)  # reads that there is no cursor, then dies at its first publish
    try:
        with pytest.raises(Killed):
            dispatch(dataclasses.replace(h.deps, blobs=dying, events=dying), BucketSpecs(h.blobs))
        assert h.blobs.read(layout.DISPATCH_CURSOR) is None
        h.clock.advance(60)
        dispatch(h.deps, BucketSpecs(h.blobs), state=DispatchState())
        h.deliver_starts()
        for job in JOBS:
            assert [r.run_id for r in h.records(job)] == ["20261122-1200", "20261122-1201"]
    finally:
        h.close()


def test_a_replayed_minute_starts_nothing_twice():
    h, _ = _world(None, after=False)
    try:
        h.dispatch()
        h.deliver_starts()
        h.blobs.write(layout.DISPATCH_CURSOR, BEFORE)  # the minute handed out again, as after a kill
        h.clock.advance(20)
        dispatch(h.deps, BucketSpecs(h.blobs), state=DispatchState())  # another instance, which reads it
        replayed = h.deliver_starts()
        assert sorted(replayed) == [(job, "2026-11-22T12:00:00Z") for job in JOBS]
        for job in JOBS:
            assert [r.run_id for r in h.records(job)] == ["20261122-1200"]
            assert h.record(job, "20261122-1200").state == "running"
        assert len(h.compute.created) == len(JOBS)
    finally:
        h.close()


def test_a_failed_publish_is_not_lost_when_another_dispatcher_moves_the_cursor_meanwhile():
    h, _ = _world(None, after=False)
    later = FakeClock(datetime(2026, 11, 22, 12, 1, 5, tzinfo=UTC))
    other = dataclasses.replace(h.deps, clock=later)  # the 12:01 dispatcher, on another instance

    class FailsB:
        """Publishing b@12:00 fails; while it fails, the 12:01 dispatcher runs to its end."""

        def __init__(self):
            self.interleaved = False

        def publish(self, topic, data, attributes=None):
            if topic == h.settings.start_topic and data["job"] == "b" and attributes[TICK_ATTRIBUTE].endswith("12:00:00Z"):
                if not self.interleaved:
                    self.interleaved = True
                    dispatch(other, BucketSpecs(h.blobs), state=DispatchState())
                raise Transient("Pub/Sub did not answer")
            return h.events.publish(topic, data, attributes)

    failing = FailsB()
    try:
        with pytest.raises(DispatchFailed):
            dispatch(dataclasses.replace(h.deps, events=failing), BucketSpecs(h.blobs), state=DispatchState())
        assert failing.interleaved
        h.clock.advance(2 * 60)  # 12:02:05
        dispatch(h.deps, BucketSpecs(h.blobs), state=DispatchState())
        h.deliver_starts()
        for job in JOBS:
            assert [r.run_id for r in h.records(job)] == ["20261122-1200", "20261122-1201", "20261122-1202"], job
        assert len(h.compute.created) == 3 * len(JOBS)
    finally:
        h.close()
