"""A run end's notification lists a bounded number of names, however many objects the job wrote.

With a webhook configured (per job, or the stack's `notify:` default), every run end finds the
previous counted run of its job and the tail of its log. The job's run folders are listed with a
delimiter (never the result files inside them), and the attempt's logs/ folder, which the
attempt's own token may fill, is read a page and a few one-name probes at most.
"""

from __future__ import annotations

import pytest

from spotcron.core import layout
from spotcron.engine.log_parts import PAGE as LOG_PARTS_PAGE
from spotcron.engine.log_parts import PROBES as LOG_PART_PROBES
from spotcron.engine.notifications import log_tail
from spotcron.engine.store import PRUNE_PAGE
from spotcron.runtime import entrypoints
from spotcron.runtime.run_end import install
from spotcron.testing.harness import Harness, make_spec

FILES = 3 * PRUNE_PAGE
WEBHOOK = {"webhook": "http://hooks.example/x", "on": ["success", "failure"]}


@pytest.fixture
def h():
    harness = Harness()
    yield harness
    entrypoints.use(None)


def counting(blobs) -> list[tuple[str, str, int]]:
    """Every listing from now on: (method, prefix, names answered)."""
    listings: list[tuple[str, str, int]] = []
    for method in ("list", "list_some", "list_folders"):
        unbounded = getattr(blobs, method, None)
        if unbounded is None:
            continue

        def listed(prefix, *args, _method=method, _call=unbounded, **kwargs):
            names = _call(prefix, *args, **kwargs)
            listings.append((_method, prefix, len(names)))
            return names

        setattr(blobs, method, listed)
    return listings


def test_a_run_end_with_a_webhook_lists_no_more_than_a_page_of_the_jobs_objects(h):
    sent = []
    install(h.deps, post=lambda url, data, headers: sent.append(data) or 200, secrets=None)
    hog = make_spec(name="hog", schedule="0 * * * *", history_limit=5, notify=WEBHOOK)
    h.start(hog)
    first = "20261122-1200"
    for i in range(FILES):  # what the job's runner uploads: any number of result files
        h.blobs.write(f"{layout.attempt_prefix('hog', first, 1)}results/f{i:06d}", b"")
    h.finish_ok("hog", first)
    listings = counting(h.blobs)
    h.clock.advance(3600)
    h.start(hog)
    h.clock.advance(60)

    assert h.finish_ok("hog", "20261122-1300").status_code == 200

    assert len(sent) == 2  # both ends notified: the listing still finds the runs
    big = [listing for listing in listings if listing[2] > PRUNE_PAGE]
    assert not big, big
    assert ("list_folders", layout.job_prefix("hog"), 2) in listings


def test_the_notification_log_tail_lists_no_more_than_a_page_of_the_attempts_logs(h):
    install(h.deps, post=lambda url, data, headers: 200, secrets=None)
    hog = make_spec(name="hog", schedule="0 * * * *", notify=WEBHOOK)
    h.start(hog)
    run = "20261122-1200"
    for i in range(FILES):  # the attempt's token writes anything under its attempt folder
        h.blobs.write(f"{layout.attempt_prefix('hog', run, 1)}logs/{i:09d}.txt", b"")
    listings = counting(h.blobs)
    h.clock.advance(60)

    assert h.finish_ok("hog", run).status_code == 200

    big = [listing for listing in listings if listing[2] > PRUNE_PAGE]
    assert not big, big


def test_the_log_tail_finds_the_last_part_past_a_page_of_parts_with_few_listings(h):
    """A job that printed for hours has more live parts than one page: the tail is still its last part's."""
    hog = make_spec(name="hog", schedule="0 * * * *", notify=WEBHOOK)
    h.start(hog)
    run = "20261122-1200"
    parts = 2 * LOG_PARTS_PAGE + 345
    for i in range(parts):
        h.blobs.write(layout.log_part("hog", run, 1, i * 37), f"line {i}\n".encode())
    h.blobs.write(f"{layout.attempt_prefix('hog', run, 1)}logs/zz-not-a-part", b"ignored\n")
    record = h.deps.store.read("hog", run)
    listings = counting(h.blobs)

    assert log_tail(h.deps, record) == [f"line {parts - 1}"]

    assert len(listings) <= 1 + LOG_PART_PROBES
    assert all(n <= LOG_PARTS_PAGE for _, _, n in listings)



def test_past_its_bound_a_run_listing_says_so_and_the_notification_still_goes(h, monkeypatch):
    from spotcron.engine import store
    from spotcron.engine.notifications import previous_counted

    hog = make_spec(name="hog", schedule="0 * * * *", notify=WEBHOOK)
    h.start(hog)
    for hour in range(5, 10):  # older runs' folders
        h.blobs.write(layout.run_record("hog", f"20261122-{hour:02d}00"), b"{}")
    record = h.deps.store.read("hog", "20261122-1200")
    monkeypatch.setattr(store, "PRUNE_PAGE", 2)
    monkeypatch.setattr(store, "PRUNE_PAGES", 2)

    with pytest.raises(store.TooManyFolders, match="more than 4 folders under gs://.*/runs/hog/"):
        h.deps.store.run_ids("hog")
    assert previous_counted(h.deps, record) is None

    monkeypatch.setattr(store, "PRUNE_PAGES", 4)
    assert h.deps.store.run_ids("hog") == [f"20261122-{hour:02d}00" for hour in (5, 6, 7, 8, 9, 12)]
