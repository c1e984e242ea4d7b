"""A job's VM writes anything under its attempt's folder (broker.boundary_rules), live log parts
included. Live parts are named `attempt-N/logs/OFFSET.txt` with OFFSET 15 ASCII digits, and a
reader takes a name for a part only when layout.log_part_offset parses it: `str.isdigit()` is also
true of digits `int()` refuses, such as the superscript '²' (U+00B2), a valid object name in Cloud
Storage (UTF-8). Such a name must neither stop `spotcron page` (present/page.absent_logs, for every
shown run that is not succeeded: one job's run would stop the results page of every job) nor
`spotcron logs --timestamps` (present/logs.timed_pieces). And the folder, which the attempt's token
may fill, is listed a page at a time, never whole.
"""

from __future__ import annotations

from spotcron.core import layout
from spotcron.engine.log_parts import PAGE
from spotcron.present.logs import timed_pieces
from spotcron.present.page import MAX_PART_LINKS, absent_logs, build_page
from spotcron.testing.harness import make_spec

HOSTILE_NAMES = ("\u00b2.txt", "00000000000000\u00b2.txt", "\u0661" * 15 + ".txt", "000000000000003.txt\n",
                 "000000000000009.txtx", "7.txt")


def _hostile_failed_run(h):
    good = make_spec(name="good")
    h.start(good)
    h.finish_ok("good", "20261122-1200")
    bad = make_spec(name="bad")
    h.start(bad)
    # The hostile container, with its attempt's token: "live parts" with names of its own.
    for name in HOSTILE_NAMES:
        h.blobs.write(layout.log_parts("bad", "20261122-1200", 1) + name, b"forged\n")
    h.blobs.write(layout.log_part("bad", "20261122-1200", 1, 0), b"real\n")
    h.callback("bad", "20261122-1200", exit_code=1, uploaded=False)  # failed, no logs.txt


def test_job_written_part_names_do_not_stop_the_results_page_of_every_job(h):
    _hostile_failed_run(h)
    assert h.record("bad", "20261122-1200").terminal
    html, _ = build_page(h.deps.store, h.clock.now(), "us-central1", charts=False)
    assert "good" in html
    missing = absent_logs(h.blobs, [h.record("bad", "20261122-1200")])
    assert missing == {layout.logs("bad", "20261122-1200", 1): [layout.log_part("bad", "20261122-1200", 1, 0)]}


def test_job_written_part_names_do_not_stop_logs_with_timestamps(h):
    _hostile_failed_run(h)
    pieces = list(timed_pieces(h.blobs, "bad", "20261122-1200", 1))
    assert b"".join(data for data, _ in pieces) == b"real\n"


def test_the_digit_parser_takes_only_the_runners_names():
    folder = layout.log_parts("bot", "r", 1)
    assert layout.log_part_offset(layout.log_part("bot", "r", 1, 123456), folder) == 123456
    for name in HOSTILE_NAMES:
        assert layout.log_part_offset(folder + name, folder) is None, name
    assert layout.log_part_offset(layout.log_part("bot", "r", 2, 0), folder) is None  # another attempt's


class _Counting:
    """The bucket as the page reads it, counting the names its listings return (Cloud Storage
    answers a listing 1,000 names a page: each thousand is a request)."""

    def __init__(self, blobs):
        self._blobs = blobs
        self.names = 0
        self.largest = 0

    def _count(self, found):
        self.names += len(found)
        self.largest = max(self.largest, len(found))
        return found

    def list(self, prefix, *args, **kwargs):
        return self._count(self._blobs.list(prefix, *args, **kwargs))

    def list_some(self, prefix, *args, **kwargs):
        return self._count(self._blobs.list_some(prefix, *args, **kwargs))

    def list_folders(self, prefix, *args, **kwargs):
        return self._count(self._blobs.list_folders(prefix, *args, **kwargs))

    def __getattr__(self, name):
        return getattr(self._blobs, name)


def test_one_jobs_log_parts_do_not_make_the_results_page_list_them_all(h):
    from spotcron.engine.store import RunStore

    good = make_spec(name="good")
    h.start(good)
    h.finish_ok("good", "20261122-1200")
    bad = make_spec(name="bad")
    h.start(bad)
    parts = 20_000  # the attempt's token may write as many as it likes under attempt-1/logs/
    for offset in range(parts):
        h.blobs.write(layout.log_part("bad", "20261122-1200", 1, offset), b"x")
    h.callback("bad", "20261122-1200", exit_code=1, uploaded=False)
    counting = _Counting(h.blobs)
    html, _ = build_page(RunStore(counting), h.clock.now(), "us-central1", charts=False)
    assert counting.names < 5_000 and counting.largest <= PAGE, (
        f"`spotcron page` listed {counting.names} names (at most {counting.largest} at once) to link the first "
        f"{MAX_PART_LINKS} live parts of one job's failed run: one job's objects make the page of every job slow")
    assert f'href="{layout.log_part("bad", "20261122-1200", 1, MAX_PART_LINKS - 1)}"' in html
    assert f'href="{layout.log_part("bad", "20261122-1200", 1, MAX_PART_LINKS)}"' not in html


def test_logs_with_timestamps_lists_the_parts_a_page_at_a_time(h):
    bot = make_spec(name="bot")
    h.start(bot)
    parts = 2 * PAGE + 17
    for offset in range(parts):
        h.blobs.write(layout.log_part("bot", "20261122-1200", 1, offset), b"x")
    counting = _Counting(h.blobs)
    pieces = list(timed_pieces(counting, "bot", "20261122-1200", 1))
    assert b"".join(data for data, _ in pieces) == b"x" * parts
    assert counting.largest <= PAGE
