"""One job's object count never stalls anyone: pruning lists in bounded pages and deletes a
budget per pass, and the sweep does owed ends after its reaping, runs and queue.

Before: every run end's pruning listed all of the job's objects in one unpaged listing and deleted
them one call each, and the sweep did owed pruning first, so a job with 120,000 result files kept
every pass from reaping, settling or starting anything.
"""

from __future__ import annotations

import pytest

from spotcron.core import layout
from spotcron.core.runs import Effect, RunState
from spotcron.engine.store import PRUNE_DELETES, PRUNE_PAGE
from spotcron.engine.sweep import LIST_LAG
from spotcron.runtime import entrypoints
from spotcron.testing.harness import Harness, make_spec

FILES = 2 * PRUNE_DELETES + 500


@pytest.fixture
def h():
    harness = Harness()
    yield harness
    entrypoints.use(None)


def test_a_run_with_thousands_of_files_is_pruned_in_bounded_steps_while_the_sweep_goes_on(h):
    hog = make_spec(name="hog", schedule="0 * * * *", history_limit=1)
    h.start(hog)
    first = "20261122-1200"
    for i in range(FILES):
        h.blobs.write(f"{layout.attempt_prefix('hog', first, 1)}results/f{i:06d}", b"")
    h.finish_ok("hog", first)
    before = len(h.blobs.list(layout.run_prefix("hog", first)))
    listings: list[tuple[str, int | None]] = []
    unbounded, bounded = h.blobs.list, h.blobs.list_some

    def listed(prefix: str) -> list[str]:
        listings.append((prefix, None))
        return unbounded(prefix)

    def listed_some(prefix: str, limit: int, *, start: str = "") -> list[str]:
        listings.append((prefix, limit))
        return bounded(prefix, limit, start=start)

    h.blobs.list, h.blobs.list_some = listed, listed_some
    h.clock.advance(3600)
    h.start(hog)
    second = "20261122-1300"
    h.clock.advance(60)
    assert h.finish_ok("hog", second).status_code == 200  # its end prunes the first run, within budget
    assert not [p for p, limit in listings if limit is None and p.startswith("runs/hog")]
    assert all(limit <= PRUNE_PAGE for p, limit in listings if limit is not None)
    left = h.blobs.list(layout.run_prefix("hog", first))
    assert len(left) == before - PRUNE_DELETES  # the rest is owed
    assert Effect.PRUNE in h.record("hog", second).owed

    # Meanwhile another job's VM stops: the sweep reaps it and ends its run despite the backlog.
    other = make_spec(name="other", schedule="0 13 * * *", retries={"preemption": 0})
    h.start(other)
    vm = h.record("other", second).current_attempt
    h.compute.delete_instance(vm.zone, vm.vm_name)  # preempted, no callback
    for _ in range(4):
        h.clock.advance(LIST_LAG.total_seconds() + 1)
        h.sweep()
    assert h.record("other", second).terminal
    assert h.blobs.list(layout.run_prefix("hog", first)) == []  # finished over a few passes
    assert Effect.PRUNE not in h.record("hog", second).owed
    assert h.record("hog", second).state == RunState.SUCCEEDED


def test_runs_of_a_thousand_files_each_never_stop_history_pruning(h):
    """A run of PRUNE_PAGE or more objects (a job writing a thousand result files per run) fills a
    page of objects by itself; pruning counts a job's runs from its run folders (one name per run,
    whatever it holds), so a job past PRUNE_PAGES such runs is pruned like any other."""
    from spotcron.engine.store import PRUNE_PAGES

    spec = make_spec(name="wide", schedule="* * * * *", timeout="10m")  # history_limit left at 50
    assert spec.history_limit == PRUNE_PAGES
    runs = PRUNE_PAGES + 6
    for _ in range(runs):
        h.clock.advance(60)
        h.start(spec)
        run_id = h.clock.now().strftime("%Y%m%d-%H%M")
        for i in range(PRUNE_PAGE):  # what the runner uploads: the job's result files
            h.blobs.write(layout.results_prefix("wide", run_id, 1) + f"part-{i:05d}.json", b"{}")
        h.finish_ok("wide", run_id)
    for _ in range(3):
        h.clock.advance(300)
        h.sweep()
    kept = h.deps.store.run_ids("wide")
    assert len(kept) <= spec.history_limit, (
        f"history_limit {spec.history_limit}, yet {len(kept)} runs of the job are still in the bucket after "
        f"{runs} runs and three sweeps: pruning stops at its {PRUNE_PAGES}-page listing bound")


def test_past_the_run_folder_bound_pruning_says_what_holds_and_how_to_fix_it(h, monkeypatch):
    from spotcron.engine import store

    for hour in range(5, 10):
        h.blobs.write(layout.run_record("hog", f"20261122-{hour:02d}00"), b"{}")
    monkeypatch.setattr(store, "PRUNE_PAGE", 2)
    monkeypatch.setattr(store, "PRUNE_PAGES", 2)
    with pytest.raises(store.PruneIncomplete) as raised:
        h.deps.store.prune("hog", 1)
    said = str(raised.value)
    assert "more than 4 folders under gs://proj-results/runs/hog/" in said and "deletes none" in said
    assert "gcloud storage rm --recursive gs://proj-results/runs/hog/RUN_ID/" in said
    assert len(h.blobs.list("runs/hog/")) == 5  # nothing deleted
