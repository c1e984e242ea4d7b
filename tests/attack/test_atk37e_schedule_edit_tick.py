"""`scheduling: shared`: the dispatcher publishes the 12:00 tick; before start_job handles it, a
deploy edits the job's schedule (to 12:30). The start resolves the old digest to the spec
deployed now, whose schedule does not fire at 12:00, and drops the message as a bad one (logged
as a security event): the tick that fired leaves no run and no `missed` record."""

from __future__ import annotations

from datetime import UTC, datetime

from spotcron.engine.deployed import SpecStore
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
