"""The listing index of the local storage server: every object name of a bucket, sorted, so a page
of a listing costs about the page, not every name under the prefix.

One SQLite table per bucket (`index.sqlite` beside its objects), names as UTF-8 bytes so they sort
as Cloud Storage sorts them. SQLite locks the file, so a second server process on the same state
dir reads the same index. The objects' metadata files stay the truth: a name is added before its
object is written and removed after its object is deleted, so the index may name an object that
is gone (a crash in between) but never misses one; the server drops names whose object is
missing. `rebuild` makes the index again from the metadata files.

`Page` walks the index for one listing request: prefix, delimiter (one query per folder: a
folder with a million names is skipped in one step), startOffset/endOffset, pageToken,
matchGlob and includeTrailingDelimiter, as the JSON API defines them.
"""

from __future__ import annotations

import contextlib
import re
import sqlite3
import threading
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

_BATCH = 256  # names fetched per query


class Index:
    """The sorted names of one bucket, in `path` (an SQLite file)."""

    def __init__(self, path: Path):
        self.path = Path(path)
        self.rows_read = 0  # names fetched by listings: what a page costs (tests read it)
        self._local = threading.local()
        # Held open for the index's life: SQLite checkpoints and deletes the write-ahead log when
        # its last connection closes, which cost ~15 ms a write when each call opened and closed one.
        self._anchor = self._open()
        self._anchor.execute("PRAGMA journal_mode=WAL")
        self._anchor.execute("CREATE TABLE IF NOT EXISTS names (name BLOB PRIMARY KEY) WITHOUT ROWID")
        self._anchor.execute("CREATE TABLE IF NOT EXISTS state (key TEXT PRIMARY KEY, value TEXT)")

    def _open(self) -> sqlite3.Connection:
        db = sqlite3.connect(self.path, timeout=60, isolation_level=None, check_same_thread=False)
        # The index can be rebuilt from the metadata files: a write need not reach the disk at once.
        db.execute("PRAGMA synchronous=NORMAL")
        return db

    @contextlib.contextmanager
    def _connect(self) -> Iterator[sqlite3.Connection]:
        # One connection per server thread (a connection must not be shared by two at once).
        db = getattr(self._local, "db", None)
        if db is None:
            db = self._local.db = self._open()
        yield db

    def add(self, name: str) -> None:
        with self._connect() as db:
            db.execute("INSERT OR IGNORE INTO names VALUES (?)", (name.encode(),))

    def remove(self, name: str) -> None:
        with self._connect() as db:
            db.execute("DELETE FROM names WHERE name = ?", (name.encode(),))

    def is_built(self) -> bool:
        with self._connect() as db:
            row = db.execute("SELECT value FROM state WHERE key = 'built'").fetchone()
        return row is not None

    def rebuild(self, names: Iterable[str]) -> None:
        with self._connect() as db:
            db.execute("BEGIN IMMEDIATE")
            db.execute("DELETE FROM names")
            db.executemany("INSERT OR IGNORE INTO names VALUES (?)", ((n.encode(),) for n in names))
            db.execute("INSERT OR REPLACE INTO state VALUES ('built', '1')")
            db.execute("COMMIT")

    def after(self, low: bytes, high: bytes | None, limit: int = _BATCH) -> list[bytes]:
        """Up to `limit` names n with low <= n < high, in order."""
        with self._connect() as db:
            if high is None:
                rows = db.execute("SELECT name FROM names WHERE name >= ? ORDER BY name LIMIT ?", (low, limit))
            else:
                rows = db.execute("SELECT name FROM names WHERE name >= ? AND name < ? ORDER BY name LIMIT ?",
                                  (low, high, limit))
            found = [bytes(row[0]) for row in rows]
        self.rows_read += len(found)
        return found


# --- one listing request --------------------------------------------------------------------------


def glob_pattern(glob: str) -> re.Pattern[str]:
    """matchGlob as Cloud Storage reads it: `*` any characters but `/`, `**` any characters, `?`
    one character but `/`, `[abc]`/`[a-z]`/`[!a]` a set, `{a,b}` alternatives, `\\` escapes."""
    out, i, depth = [], 0, 0
    while i < len(glob):
        c = glob[i]
        if c == "*":
            if glob.startswith("**", i):
                # `a/**/b` also matches `a/b`: the folder part may be empty
                if glob.startswith("**/", i):
                    out.append("(?:.*/)?")
                    i += 3
                    continue
                out.append(".*")
                i += 2
                continue
            out.append("[^/]*")
        elif c == "?":
            out.append("[^/]")
        elif c == "[":
            end = glob.find("]", i + 2)
            if end < 0:
                raise ValueError(f"matchGlob {glob!r}: '[' at {i} has no closing ']'")
            body = glob[i + 1:end]
            negate = body[:1] in ("!", "^")
            body = body[1:] if negate else body
            out.append("[" + ("^" if negate else "") + body.replace("\\", "\\\\") + "]")
            i = end
        elif c == "{":
            out.append("(?:")
            depth += 1
        elif c == "}" and depth:
            out.append(")")
            depth -= 1
        elif c == "," and depth:
            out.append("|")
        elif c == "\\" and i + 1 < len(glob):
            i += 1
            out.append(re.escape(glob[i]))
        else:
            out.append(re.escape(c))
        i += 1
    if depth:
        raise ValueError(f"matchGlob {glob!r}: a '{{' has no closing '}}'")
    return re.compile("".join(out), re.DOTALL)


def literal_head(glob: str) -> str:
    """The part of a glob before its first special character: every match starts with it."""
    cut = re.search(r"[*?\[{\\]", glob)
    return glob if cut is None else glob[:cut.start()]


@dataclass
class Page:
    """One page of a listing: object names, folder prefixes, and where the next page starts."""

    names: list[str] = field(default_factory=list)
    prefixes: list[str] = field(default_factory=list)
    next_key: str | None = None


def list_page(index: Index, *, prefix: str = "", delimiter: str | None = None, start: str = "",
              end: str | None = None, size: int = 1000, glob: str | None = None,
              include_trailing_delimiter: bool = False) -> Page:
    """One page of names from `index`, starting at the name `start` (inclusive)."""
    pattern = glob_pattern(glob) if glob else None
    head = prefix
    if glob and literal_head(glob).startswith(prefix):
        head = literal_head(glob)
    elif glob and not prefix.startswith(literal_head(glob)):
        return Page()  # no name can have both
    low = max(head.encode(), start.encode())
    high = head.encode() + b"\xff"  # no UTF-8 byte is 0xff: every name under `head` sorts below
    if end is not None:
        high = min(high, end.encode())
    page = Page()
    while True:
        # Fetch about what the page still needs: a folder (delimiter) is skipped after its first
        # name, and a glob may drop names, so those read in small or full batches.
        wanted = size - len(page.names) - len(page.prefixes) + 1
        limit = _BATCH if pattern is not None else min(wanted, 16 if delimiter else _BATCH)
        batch = index.after(low, high, limit)
        if not batch:
            return page
        jumped = False
        for raw in batch:
            name = raw.decode()
            if pattern is not None and not pattern.fullmatch(name):
                continue
            rest = name[len(prefix):]
            if delimiter and delimiter in rest:
                group = name[:len(prefix) + rest.index(delimiter) + len(delimiter)]
                trailing = include_trailing_delimiter and name == group
                if len(page.names) + len(page.prefixes) >= size:
                    page.next_key = group
                    return page
                page.prefixes.append(group)
                if trailing:
                    page.names.append(name)
                # skip the rest of the folder in one query
                low = group.encode() + b"\xff"
                jumped = True
                break
            if len(page.names) + len(page.prefixes) >= size:
                page.next_key = name
                return page
            page.names.append(name)
        if not jumped:
            if len(batch) < limit:
                return page  # nothing left in the range
            low = batch[-1] + b"\x00"
