"""An attempt's live log parts, found with bounded listings.

The runner ships the log while the job runs as `attempt-N/logs/OFFSET.txt` (layout.log_part). The
attempt's own token may write anything in that folder, as many names as it likes, so every reader
lists it a page at a time (never the whole folder at once), and takes a name for a part only when
layout.log_part_offset parses it. Whatever else the job wrote there is passed over, and can at
worst hide parts of its own log: it never stops a reader or costs a listing per object it wrote.
"""

from __future__ import annotations

from collections.abc import Iterator

from spotcron.core import layout

PAGE = 1000  # names per listing of a logs/ folder (one Cloud Storage list page)
PROBES = 64  # one-name listings at most to find the last part past the first page


def first_parts(blobs, folder: str, limit: int) -> list[str]:
    """The first `limit` parts in `folder`, in log order, from one listing of at most PAGE names.

    Part names sort in log order (fixed-width offsets), so the first page holds the first parts;
    names a job added among them take room in that page, never more listings."""
    found = sorted((offset, name) for name in blobs.list_some(folder, PAGE)
                   if (offset := layout.log_part_offset(name, folder)) is not None)
    return [name for _, name in found[:limit]]


def all_parts(blobs, folder: str) -> Iterator[tuple[int, str]]:
    """(offset, name) of each part in `folder`, in log order, listed a page at a time as the
    caller reads on (no listing past where it stops). A page without a part ends it: what
    follows is not the runner's."""
    start = folder
    while True:
        names = blobs.list_some(folder, PAGE, start=start)
        parts = [(at, name) for name in names if (at := layout.log_part_offset(name, folder)) is not None]
        if not parts:
            return
        yield from parts
        if len(names) < PAGE:
            return
        start = names[-1] + "\0"  # the first name after this page's last


def last_part(blobs, folder: str) -> str | None:
    """The last name in `folder` (an attempt's logs/ folder), from a bounded number of names. One
    page of PAGE names holds the parts of a job that printed for over an hour (one part each 5 s at
    most); past that, parts are OFFSET.txt with OFFSET 15 digits, so the last one is sought by its
    offset in at most PROBES listings of one name each."""
    def offset(name: str) -> int | None:
        return layout.log_part_offset(name, folder)

    names = blobs.list_some(folder, PAGE)
    if len(names) < PAGE:
        parts = [name for name in names if offset(name) is not None]
        return (parts or names or [None])[-1]

    def first_from(at: int) -> int | None:  # the offset of the first part named at `at` or after
        found = blobs.list_some(folder, 1, start=f"{folder}{at:015d}")
        return offset(found[0]) if found else None

    low = offset(names[-1])
    if low is None:
        return names[-1]
    # No part at `high` or after; steps double (from the offset reached: a log grows about evenly)
    # until one overshoots, then halve between what is known.
    high, step = 10**15, max(1, low)
    for _ in range(PROBES):
        if high - low <= 1:
            break
        at = min(low + step, high - 1) if step else (low + high) // 2
        found = first_from(at)
        if found is None or found < at or found >= high:
            high, step = at, 0
        else:
            low, step = found, step * 2 if step else 0
    return f"{folder}{low:015d}.txt"
