"""A held or retained object does not stop a job's history pruning.

A job's container could place a hold on one of its own files; Cloud Storage then refuses to
delete it (HTTP 403, "... is under active Temporary hold and cannot be deleted, overwritten or
archived until hold is removed."), to the functions, to `destroy` and to the lifecycle rule alike.
MemoryBlobs keeps holds and a retention policy as Cloud Storage does (its delete raises
ObjectKept, what gcp/storage.py raises for that 403). Pruning steps over the refused object,
deletes the rest of that run, keeps its record, marks it once and prunes the later runs.
"""

from __future__ import annotations

import logging

import pytest

from spotcron.core import layout
from spotcron.core.errors import ObjectKept
from spotcron.runtime import entrypoints
from spotcron.testing.harness import Harness, make_spec

RUNS = ["20261122-1200", "20261122-1300", "20261122-1400", "20261122-1500"]


@pytest.fixture
def h():
    harness = Harness()
    yield harness
    entrypoints.use(None)


def _run_hourly(h, hold_in_first=None, runs=RUNS):
    hog = make_spec(name="hog", schedule="0 * * * *", history_limit=1)
    for i, run in enumerate(runs):
        if i:
            h.clock.advance(3600 - 60)
        h.start(hog)
        if i == 0 and hold_in_first:
            for index in range(hold_in_first):  # the job's container, with its attempt's token, holds its files
                name = f"{layout.attempt_prefix('hog', run, 1)}results/keep-me-{index}"
                h.blobs.write(name, b"x")
                h.blobs.hold(name)
            h.blobs.write(f"{layout.attempt_prefix('hog', run, 1)}results/plain", b"y")
        h.clock.advance(60)
        h.finish_ok("hog", run)
        h.sweep()


def test_a_held_object_does_not_stop_the_pruning_of_the_jobs_later_runs(h):
    _run_hourly(h, hold_in_first=1)
    left = [run for run in RUNS[1:-1] if h.blobs.list_quietly(layout.run_prefix("hog", run))]
    assert not left, f"runs beyond history_limit never pruned behind the held object: {left}"


def test_the_held_run_keeps_its_record_and_the_held_object_and_loses_the_rest(h):
    from spotcron.engine.store import kept_marker

    _run_hourly(h, hold_in_first=1)
    first = RUNS[0]
    attempt = layout.attempt_prefix("hog", first, 1)
    assert sorted(h.blobs.list_quietly(layout.run_prefix("hog", first))) == sorted([
        kept_marker("hog", first), layout.run_record("hog", first), f"{attempt}results/keep-me-0"])
    note = h.blobs.peek(kept_marker("hog", first)).json()
    assert note["object"] == f"{attempt}results/keep-me-0"
    assert "Temporary hold" in note["reason"] and "--no-temporary-hold" in note["fix"]


def test_a_held_run_is_tried_once_and_said_once(h, caplog):
    caplog.set_level(logging.WARNING, logger="spotcron.engine")
    _run_hourly(h, hold_in_first=1)
    tries = []
    delete = h.blobs.delete

    def counting(name):
        tries.append(name)
        return delete(name)

    h.blobs.delete = counting
    hog = make_spec(name="hog", schedule="0 * * * *", history_limit=1)
    for run in ("20261122-1600", "20261122-1700"):
        h.clock.advance(3600 - 60)
        h.start(hog)
        h.clock.advance(60)
        h.finish_ok("hog", run)
        h.sweep()
    assert not [name for name in tries if name.startswith(layout.run_prefix("hog", RUNS[0]))]
    said = [r for r in caplog.records if "history pruning cannot delete" in r.getMessage()]
    assert len(said) == 1


def test_more_held_objects_than_one_pass_deletes_do_not_stall_pruning(h, monkeypatch):
    from spotcron.engine import store

    monkeypatch.setattr(store, "PRUNE_DELETES", 3)
    monkeypatch.setattr(store, "PRUNE_PAGE", 2)
    _run_hourly(h, hold_in_first=5)
    for _ in range(10):  # each pass deletes at most 3 objects: the backlog goes over passes, not never
        h.clock.advance(60)
        h.sweep()
    left = [run for run in RUNS[1:-1] if h.blobs.list_quietly(layout.run_prefix("hog", run))]
    assert not left


def test_a_retention_policy_refuses_deletes_until_it_ends(h):
    h.blobs.write("runs/a/x", b"1")
    h.blobs.retention_s = 3600
    with pytest.raises(ObjectKept, match="retention policy"):
        h.blobs.delete("runs/a/x")
    with pytest.raises(ObjectKept):
        h.blobs.write("runs/a/x", b"2")
    h.clock.advance(3601)
    assert h.blobs.delete("runs/a/x")


def test_the_lifecycle_rule_skips_held_objects(h):
    h.blobs.write("runs/a/held", b"1")
    h.blobs.write("runs/a/plain", b"1")
    h.blobs.hold("runs/a/held", "Event-Based")
    h.clock.advance(2 * 86400)
    assert h.blobs.expire("runs/", 1) == ["runs/a/plain"]
    assert h.blobs.list_quietly("runs/") == ["runs/a/held"]
    h.blobs.release("runs/a/held")
    assert h.blobs.expire("runs/", 1) == ["runs/a/held"]
