"""The CLI's run listing reads run folders, never the result files inside them.

`spotcron runs`, `status`, `logs JOB` and `results JOB` resolve runs with cli/_bucket.all_run_ids
or RunStore.jobs()/run_ids(): delimiter listings of runs/ and of each job, so one job's thousands
of result files cost no command anything, whichever job it asks about.
"""

from __future__ import annotations

import pytest

from spotcron.cli._bucket import all_run_ids
from spotcron.core import layout
from spotcron.engine.store import PRUNE_PAGE
from spotcron.runtime import entrypoints
from spotcron.testing.harness import Harness, make_spec
from tests.engine.test_notify_listings_bounded import counting

FILES = 3 * PRUNE_PAGE


@pytest.fixture
def h():
    harness = Harness()
    yield harness
    entrypoints.use(None)


def test_the_clis_run_listing_does_not_read_every_result_file_of_every_job(h):
    hog, other = make_spec(name="hog", schedule="0 * * * *"), make_spec(name="other", schedule="0 * * * *")
    h.start(hog)
    h.start(other)
    for i in range(FILES):
        h.blobs.write(f"{layout.attempt_prefix('hog', '20261122-1200', 1)}results/f{i:06d}", b"")
    listings = counting(h.blobs)

    assert all_run_ids(h.deps.store) == [("hog", "20261122-1200"), ("other", "20261122-1200")]
    assert h.deps.store.jobs() == ["hog", "other"]

    big = [listing for listing in listings if listing[2] > PRUNE_PAGE]
    assert not big, big
    assert all(method == "list_folders" for method, _, _ in listings)
