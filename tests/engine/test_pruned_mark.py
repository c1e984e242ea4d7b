"""The pruning mark names the runs history pruning deleted, not every id below its newest."""

from __future__ import annotations

from spotcron.engine import pruned_mark
from spotcron.engine.pruned_mark import PrunedMark, parse


def test_an_id_between_pruned_runs_that_never_had_a_record_is_not_covered():
    mark = PrunedMark().with_pruned(["20261122-1201", "20261122-1203"])
    assert mark.covers("20261122-1201") and mark.covers("20261122-1203")
    assert not mark.covers("20261122-1200") and not mark.covers("20261122-1202")
    assert not mark.covers("20261122-1204")
    assert parse(mark.encode()) == mark


def test_a_mark_of_one_line_covers_every_id_up_to_it():
    mark = parse(b"20261122-1205")
    assert mark.covers("20261122-1200") and mark.covers("20261122-1205")
    assert not mark.covers("20261122-1206")
    later = mark.with_pruned(["20261122-1207"])
    assert later.covers("20261122-1203") and later.covers("20261122-1207") and not later.covers("20261122-1206")


def test_ids_beyond_the_bound_fall_under_the_floor(monkeypatch):
    monkeypatch.setattr(pruned_mark, "RECENT", 2)
    mark = PrunedMark().with_pruned(["20261122-1201", "20261122-1203", "20261122-1205"])
    assert mark.recent == ("20261122-1203", "20261122-1205") and mark.floor == "20261122-1201"
    assert mark.covers("20261122-1200")  # at or before the floor: counted pruned
    assert not mark.covers("20261122-1204")
