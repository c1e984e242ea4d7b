"""One job's object count still makes its run ends list every object it ever wrote.

docs/security.md ("One job's objects cannot stall the others") and issue 37 item 4 say pruning
lists in pages of PRUNE_PAGE. But with a webhook configured (per job, or the stack's `notify:`
default), every run end's `notify` hook calls notifications.previous_counted, which calls
RunStore.run_ids(job): `blobs.list("runs/JOB/")` in one unpaged listing of every object of the
job (each result file of every kept run), only to pick out the run.json names. And log_tail
lists the attempt's `logs/` folder unpaged, a folder the job's own attempt token may fill.
So a job that writes 120,000 result files makes job_done, and each sweep pass that finishes
its owed ends, hold 120,000+ names in memory (120+ sequential list pages on Cloud Storage).
"""

from __future__ import annotations

import pytest

from spotcron.core import layout
from spotcron.engine.store import PRUNE_PAGE
from spotcron.runtime import entrypoints
from spotcron.runtime.run_end import install
from spotcron.testing.harness import Harness, make_spec

FILES = 3 * PRUNE_PAGE


@pytest.fixture
def h():
    harness = Harness()
    yield harness
    entrypoints.use(None)


def _counting(h):
    listings: list[tuple[str, int]] = []
    unbounded = h.blobs.list

    def listed(prefix: str) -> list[str]:
        names = unbounded(prefix)
        listings.append((prefix, len(names)))
        return names

    h.blobs.list = listed
    return listings


def test_a_run_end_with_a_webhook_lists_no_more_than_a_page_of_the_jobs_objects(h):
    install(h.deps, post=lambda url, data, headers: 200, secrets=None)
    hog = make_spec(name="hog", schedule="0 * * * *", history_limit=5,
                    notify={"webhook": "http://hooks.example/x", "on": ["success", "failure"]})
    h.start(hog)
    first = "20261122-1200"
    for i in range(FILES):  # what the job's runner uploads: any number of result files
        h.blobs.write(f"{layout.attempt_prefix('hog', first, 1)}results/f{i:06d}", b"")
    h.finish_ok("hog", first)
    listings = _counting(h)
    h.clock.advance(3600)
    h.start(hog)
    h.clock.advance(60)
    assert h.finish_ok("hog", "20261122-1300").status_code == 200
    big = [(prefix, n) for prefix, n in listings if n > PRUNE_PAGE]
    assert not big, big


def test_the_notification_log_tail_lists_no_more_than_a_page_of_the_attempts_logs(h):
    install(h.deps, post=lambda url, data, headers: 200, secrets=None)
    hog = make_spec(name="hog", schedule="0 * * * *",
                    notify={"webhook": "http://hooks.example/x", "on": ["success", "failure"]})
    h.start(hog)
    run = "20261122-1200"
    for i in range(FILES):  # the attempt's token writes anything under its attempt folder
        h.blobs.write(f"{layout.attempt_prefix('hog', run, 1)}logs/{i:09d}.txt", b"")
    listings = _counting(h)
    h.clock.advance(60)
    assert h.finish_ok("hog", run).status_code == 200
    big = [(prefix, n) for prefix, n in listings if n > PRUNE_PAGE]
    assert not big, big


def test_the_clis_run_listing_does_not_read_every_result_file_of_every_job(h):
    """`spotcron runs`, `status`, `logs JOB`, `results JOB` resolve runs with cli/_bucket.all_run_ids
    or RunStore.jobs(): one listing of all of `runs/`, every object of every job, to find run.json
    names. One job's 3,000 result files make every operator command list 3,000 names more, whichever
    job it asks about (120,000 files: 120 list pages before any command answers)."""
    from spotcron.cli._bucket import all_run_ids

    hog, other = make_spec(name="hog", schedule="0 * * * *"), make_spec(name="other", schedule="0 * * * *")
    h.start(hog)
    h.start(other)
    for i in range(FILES):
        h.blobs.write(f"{layout.attempt_prefix('hog', '20261122-1200', 1)}results/f{i:06d}", b"")
    listings = _counting(h)
    assert ("other", "20261122-1200") in all_run_ids(h.deps.store)
    big = [(prefix, n) for prefix, n in listings if n > PRUNE_PAGE]
    assert not big, big
