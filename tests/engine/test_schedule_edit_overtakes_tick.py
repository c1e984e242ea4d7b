"""`scheduling: shared`: the dispatcher publishes the 12:00 tick; before start_job handles it, a
deploy edits the job's schedule (to 12:30). The start resolves the old digest to the spec
deployed now, whose schedule does not fire at 12:00, and drops the message as a bad one (logged
as a security event): the tick that fired leaves no run and no `missed` record."""

from __future__ import annotations

from datetime import UTC, datetime

from spotcron.core.runs import RunState
from spotcron.engine import transitions
from spotcron.engine.deployed import SpecStore, start_message
from spotcron.testing.harness import Harness, make_spec


def test_a_dispatched_tick_overtaken_by_a_schedule_edit_leaves_a_run_or_a_missed_record():
    h = Harness(scheduling="shared", now=datetime(2026, 11, 22, 11, 0, 0, tzinfo=UTC))
    try:
        job = make_spec(name="job", schedule="0 12 * * *", starting_deadline="10m")
        h.deploy(job)
        h.clock.set(datetime(2026, 11, 22, 12, 0, 5, tzinfo=UTC))
        h.dispatch()  # publishes job's 12:00 tick, naming the digest deployed now
        h.clock.set(datetime(2026, 11, 22, 12, 0, 20, tzinfo=UTC))
        SpecStore(h.blobs).write(job.model_copy(update={"schedule": "30 12 * * *"}))  # `spotcron deploy` of an edit
        started = h.deliver_starts()
        assert started == [("job", "2026-11-22T12:00:00Z")]
        for _ in range(14):  # the sweeps of the next 70 minutes (the missed-tick pass runs hourly)
            h.clock.advance(300)
            assert h.sweep().status_code == 200
        ids = [r.run_id for r in h.records("job") if r.run_id.startswith("20261122-1200")]
        assert ids, f"the 12:00 tick left nothing; records {[r.run_id for r in h.records('job')]}"
    finally:
        h.close()


def test_the_skipped_record_says_the_deploy_moved_the_schedule(caplog):
    h = Harness(scheduling="shared", now=datetime(2026, 11, 22, 11, 0, 0, tzinfo=UTC))
    try:
        job = make_spec(name="job", schedule="0 12 * * *", starting_deadline="10m")
        h.deploy(job)
        h.clock.set(datetime(2026, 11, 22, 12, 0, 5, tzinfo=UTC))
        h.dispatch()
        SpecStore(h.blobs).write(job.model_copy(update={"schedule": "30 12 * * *"}))
        h.deliver_starts()
        record = h.record("job", "20261122-1200")
        assert record.state == RunState.SKIPPED and "'30 12 * * *'" in (record.reason or "")
        assert not [r for r in caplog.records if getattr(r, "fields", {}).get("security")]  # no false alarm
    finally:
        h.close()


def test_per_job_mode_reads_an_overtaken_tick_by_the_schedule_that_fired_it():
    h = Harness(datetime(2026, 11, 22, 11, 0, 0, tzinfo=UTC))
    try:
        job = make_spec(name="job", schedule="0 12 * * *", starting_deadline="10m")
        SpecStore(h.blobs).write(job)
        published = datetime(2026, 11, 22, 12, 0, 0, tzinfo=UTC)  # the entry's message, naming the old digest
        SpecStore(h.blobs).write(job.model_copy(update={"schedule": "30 12 * * *"}))
        h.clock.set(datetime(2026, 11, 22, 12, 0, 30, tzinfo=UTC))
        assert h.functions.start(start_message(job), published, {}, "m1").status_code == 200
        ids = {r.run_id: r.state for r in h.records("job")}
        assert ids == {"20261122-1200": RunState.SKIPPED}, ids  # not yesterday's 12:30, missed
    finally:
        h.close()


def test_an_edit_that_keeps_the_schedule_runs_the_overtaken_tick():
    h = Harness(scheduling="shared", now=datetime(2026, 11, 22, 11, 0, 0, tzinfo=UTC))
    try:
        job = make_spec(name="job", schedule="0 12 * * *", starting_deadline="10m")
        h.deploy(job)
        h.clock.set(datetime(2026, 11, 22, 12, 0, 5, tzinfo=UTC))
        h.dispatch()
        SpecStore(h.blobs).write(job.model_copy(update={"image": "us-docker.pkg.dev/p/r/other:2"}))
        h.deliver_starts()
        record = h.record("job", "20261122-1200")
        assert record.state != RunState.SKIPPED and transitions.spec_of(record).image.endswith("other:2")
    finally:
        h.close()
