"""`scheduling: shared`: the dispatcher of minute 12:00 fails to publish (the next minute's retries
it, by design), and the job is edited and deployed at 12:01:10. The next dispatcher counts the
job's ticks only from the minute its spec was deployed in (12:01), so the 12:00 tick, well within
its starting_deadline, is never published, and the sweep's missed-tick pass, which also counts
only from the spec's deploy, never records it: no run and no `missed` record."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from spotcron.core import layout
from spotcron.engine.dispatch import DispatchFailed, DispatchState, dispatch
from spotcron.engine.dispatch_specs import BucketSpecs
from spotcron.testing.harness import Harness, make_spec

BEFORE = b'{"through": "2026-11-22T11:59:00Z"}'


def test_a_tick_whose_dispatch_failed_is_not_dropped_by_an_edit_deployed_the_next_minute():
    h = Harness(scheduling="shared", now=datetime(2026, 11, 22, 12, 0, 5, tzinfo=UTC))
    try:
        job = make_spec(name="job", schedule="0 12 * * *", starting_deadline="10m")
        h.clock.set(datetime(2026, 11, 22, 11, 0, 0, tzinfo=UTC))
        h.deploy(job)  # deployed an hour before
        h.blobs.write(layout.DISPATCH_CURSOR, BEFORE)
        h.clock.set(datetime(2026, 11, 22, 12, 0, 5, tzinfo=UTC))
        calls = []
        # The sweep's message (12:00 is a sweep minute) goes out; the job's start message is refused.
        h.events.fault = lambda call, kind: calls.append(call) or len(calls) > 1
        with pytest.raises(DispatchFailed):
            dispatch(h.deps, BucketSpecs(h.blobs), state=DispatchState())
        h.events.fault = None
        h.clock.set(datetime(2026, 11, 22, 12, 1, 10, tzinfo=UTC))
        h.deploy(job.model_copy(update={"image": "us-docker.pkg.dev/p/r/other:2"}))  # `spotcron deploy` of an edit
        h.clock.set(datetime(2026, 11, 22, 12, 1, 20, tzinfo=UTC))  # the 12:01 dispatcher
        dispatch(h.deps, BucketSpecs(h.blobs), state=DispatchState())
        published = h.deliver_starts()
        for _ in range(14):  # the sweeps of the next 70 minutes (the missed-tick pass runs hourly)
            h.clock.advance(300)
            assert h.sweep().status_code == 200
        records = [(r.run_id, r.state) for r in h.records("job")]
        assert records, f"the 12:00 tick left nothing (published {published}); 7 of its 10 minutes were left"
    finally:
        h.close()


def test_the_missed_pass_counts_ticks_from_the_schedules_deploy_not_an_image_edit():
    h = Harness(now=datetime(2026, 11, 22, 11, 0, 0, tzinfo=UTC))
    try:
        job = make_spec(name="job", schedule="0 12 * * *", starting_deadline="10m")
        h.deploy(job)
        # 12:00's start never reaches start_job; an image edit is deployed at 12:01:10.
        h.clock.set(datetime(2026, 11, 22, 12, 1, 10, tzinfo=UTC))
        h.deploy(job.model_copy(update={"image": "us-docker.pkg.dev/p/r/other:2"}))
        h.clock.set(datetime(2026, 11, 22, 13, 0, 0, tzinfo=UTC))
        assert h.sweep().status_code == 200
        assert [(r.run_id, r.state) for r in h.records("job")] == [("20261122-1200", "missed")]
    finally:
        h.close()


def test_a_schedule_edit_after_a_failed_dispatch_leaves_the_old_schedules_tick_a_record():
    h = Harness(scheduling="shared", now=datetime(2026, 11, 22, 11, 0, 0, tzinfo=UTC))
    try:
        job = make_spec(name="job", schedule="0 12 * * *", starting_deadline="10m")
        h.deploy(job)
        h.blobs.write(layout.DISPATCH_CURSOR, BEFORE)
        h.clock.set(datetime(2026, 11, 22, 12, 0, 5, tzinfo=UTC))
        calls = []
        h.events.fault = lambda call, kind: calls.append(call) or len(calls) > 1
        with pytest.raises(DispatchFailed):
            dispatch(h.deps, BucketSpecs(h.blobs), state=DispatchState())
        h.events.fault = None
        h.clock.set(datetime(2026, 11, 22, 12, 1, 10, tzinfo=UTC))
        h.deploy(job.model_copy(update={"schedule": "30 12 * * *"}))
        h.clock.set(datetime(2026, 11, 22, 12, 1, 20, tzinfo=UTC))
        dispatch(h.deps, BucketSpecs(h.blobs), state=DispatchState())
        assert h.deliver_starts() == [("job", "2026-11-22T12:00:00Z")]  # naming the spec that fired it
        record = h.record("job", "20261122-1200")
        assert record.state == "skipped" and "'30 12 * * *'" in (record.reason or "")
    finally:
        h.close()


def test_the_missed_pass_records_the_replaced_schedules_tick():
    h = Harness(now=datetime(2026, 11, 22, 11, 0, 0, tzinfo=UTC))
    try:
        job = make_spec(name="job", schedule="0 12 * * *", starting_deadline="10m")
        h.deploy(job)
        h.clock.set(datetime(2026, 11, 22, 12, 1, 10, tzinfo=UTC))  # 12:00 never reached start_job
        h.deploy(job.model_copy(update={"schedule": "30 12 * * *"}))
        h.clock.set(datetime(2026, 11, 22, 13, 0, 0, tzinfo=UTC))
        assert h.sweep().status_code == 200
        assert [(r.run_id, r.state, r.missed_ticks) for r in h.records("job")] == [("20261122-1200", "missed", 2)]
    finally:
        h.close()


def test_a_job_created_or_unpaused_during_an_outage_starts_with_its_first_tick_after():
    h = Harness(now=datetime(2026, 11, 22, 11, 0, 0, tzinfo=UTC))
    try:
        paused = make_spec(name="paused", schedule="0 12 * * *", starting_deadline="10m", paused=True)
        h.deploy(paused)
        h.clock.set(datetime(2026, 11, 22, 12, 1, 10, tzinfo=UTC))
        h.deploy(paused.model_copy(update={"paused": False}),
                 make_spec(name="new", schedule="0 12 * * *", starting_deadline="10m"))
        h.clock.set(datetime(2026, 11, 22, 13, 0, 0, tzinfo=UTC))
        assert h.sweep().status_code == 200
        assert h.records("paused") == [] and h.records("new") == []
    finally:
        h.close()
