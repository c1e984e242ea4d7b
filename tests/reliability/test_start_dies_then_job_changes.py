"""A start that dies right after writing its run record, and a job that changes before the redelivery.

The redelivery of such a start is refused before it reaches the record (a paused job's tick
starts nothing; a removed job's or an old manual digest is not deployed), so nothing but the
sweep can end the run: the start writes the run's live marker before its record, and the sweep
ends a run whose job no longer runs it, with the reason.
"""

from __future__ import annotations

from datetime import timedelta

import pytest

from spotcron.core import layout
from spotcron.core.layout import LIVE
from spotcron.core.runs import RunState
from spotcron.engine.deployed import SpecStore, start_message
from spotcron.engine.sweep import RECORD_MAY_FOLLOW
from spotcron.runtime import entrypoints
from spotcron.testing.harness import Harness, make_spec
from tests.reliability.crashes import Crash, crash_after_write

RUN = "20261122-1200"


@pytest.fixture
def h():
    harness = Harness()
    yield harness
    entrypoints.use(None)


def _dies_after_its_record(h: Harness, spec, published):
    restore = crash_after_write(h, lambda name, data: name == layout.run_record(spec.name, RUN))
    try:
        with pytest.raises(Crash):
            h.functions.start(start_message(spec), published, None, "m-1")
    finally:
        restore()
    assert h.record(spec.name, RUN, count=False).state == RunState.SCHEDULED


@pytest.mark.parametrize("change", ["paused", "removed"])
def test_a_run_whose_start_died_after_its_record_ends_when_its_job_changes_before_the_redelivery(h, change):
    spec = make_spec(name="bot")
    SpecStore(h.blobs).write(spec)
    published = h.clock.now()
    _dies_after_its_record(h, spec, published)
    if change == "paused":
        SpecStore(h.blobs).write(make_spec(name="bot", paused=True))
    else:
        h.blobs.delete(layout.deployed_spec("bot"))
    # Pub/Sub delivers the message again: refused before it reaches the record.
    h.clock.advance(30)
    assert h.functions.start(start_message(spec), published, None, "m-1").status_code < 500
    for _ in range(3):
        h.clock.advance(h.settings.sweep_interval)
        assert h.sweep().status_code == 200
    record = h.record("bot", RUN, count=False)
    assert record.state == RunState.SKIPPED, record.state
    assert "gets no VM" in record.reason and "its start ended before the run began" in record.reason
    assert not h.compute.created
    assert h.blobs.list(LIVE) == []
    assert [e.data["state"] for e in h.events.of_type("run.finished")] == ["skipped"]


def test_a_marker_whose_record_was_never_written_goes_once_no_start_can_write_it(h):
    spec = make_spec(name="bot")
    SpecStore(h.blobs).write(spec)
    # The start dies right after its marker, before its record.
    restore = crash_after_write(h, lambda name, data: name.startswith(LIVE))
    try:
        with pytest.raises(Crash):
            h.functions.start(start_message(spec), h.clock.now(), None, "m-1")
    finally:
        restore()
    assert h.blobs.peek(layout.run_record("bot", RUN)) is None
    [marker] = h.blobs.list(LIVE)
    h.clock.advance(h.settings.sweep_interval)
    assert h.sweep().status_code == 200
    assert h.blobs.list(LIVE) == [marker]  # its start may still be writing the record
    h.clock.advance((RECORD_MAY_FOLLOW + timedelta(seconds=1)).total_seconds())
    assert h.sweep().status_code == 200
    assert h.blobs.list(LIVE) == []
