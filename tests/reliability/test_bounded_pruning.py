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
