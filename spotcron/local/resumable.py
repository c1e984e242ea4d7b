"""Resumable upload sessions, per the Cloud Storage JSON API.

    POST /upload/storage/v1/b/B/o?uploadType=resumable&name=N   → 200, Location: ...&upload_id=ID
    PUT  <Location>  Content-Range: bytes 0-262143/*             → 308, Range: bytes=0-262143
    PUT  <Location>  Content-Range: bytes */*                    → 308 (status; no Range: nothing yet)
    PUT  <Location>  Content-Range: bytes 262144-262153/262154   → 200 with the object
    DELETE <Location>                                            → 499, the session is gone

Sessions live on disk beside the objects (a `.json` and the bytes so far in a `.part`), so an
upload survives a restart of the server, as it survives a dropped connection. A chunk that
repeats bytes already stored is trimmed (a retry after a lost 308); a chunk that would leave a
gap is refused with 400 and the Range the client must resume from.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import secrets
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, BinaryIO

from spotcron.local.objects import Conditions, StorageFault, _chunks

_RANGE = re.compile(r"bytes (?:(\d+)-(\d+)|\*)/(\d+|\*)")


@dataclass
class Session:
    upload_id: str
    bucket: str
    name: str
    content_type: str
    conditions: Conditions
    total: int | None = None  # known once a request names it
    # The object's metadata sent when the session opened (metadata, cacheControl, md5Hash...):
    # stored, or checked, when the last byte arrives.
    fields: dict[str, Any] = field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        return {"upload_id": self.upload_id, "bucket": self.bucket, "name": self.name,
                "content_type": self.content_type, "conditions": self.conditions.to_query(), "total": self.total,
                "fields": self.fields}

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> Session:
        return cls(data["upload_id"], data["bucket"], data["name"], data["content_type"],
                   Conditions.from_query(data["conditions"]), data.get("total"), data["fields"])


@dataclass(frozen=True)
class ContentRange:
    first: int | None  # None: a status query ("bytes */TOTAL" or "bytes */*")
    last: int | None
    total: int | None

    @classmethod
    def parse(cls, header: str | None, body_length: int) -> ContentRange:
        if header is None:  # the whole object in one request
            return cls(0 if body_length else None, body_length - 1 if body_length else None, body_length)
        match = _RANGE.fullmatch(header.strip())
        if match is None:
            raise StorageFault(400, f"Content-Range {header!r} is not 'bytes FIRST-LAST/TOTAL', 'bytes */TOTAL' or "
                                    "'bytes */*'", "invalid")
        first, last, total = match.groups()
        total_n = None if total == "*" else int(total)
        if first is None:
            if body_length:
                raise StorageFault(400, f"Content-Range {header!r} names no bytes, but the body has {body_length}",
                                   "invalid")
            return cls(None, None, total_n)
        first_n, last_n = int(first), int(last)
        if last_n < first_n or last_n - first_n + 1 != body_length:
            raise StorageFault(400, f"Content-Range {header!r} covers {max(last_n - first_n + 1, 0)} bytes, but the "
                                    f"body has {body_length}", "invalid")
        if total_n is not None and last_n >= total_n:
            raise StorageFault(400, f"Content-Range {header!r} ends past the object's size {total_n}", "invalid")
        return cls(first_n, last_n, total_n)


class Sessions:
    """The open upload sessions under `folder`."""

    def __init__(self, folder: Path):
        self.folder = Path(folder)
        self.folder.mkdir(parents=True, exist_ok=True)

    def open(self, bucket: str, name: str, content_type: str, conditions: Conditions,
             fields: dict[str, Any] | None = None) -> Session:
        session = Session(secrets.token_urlsafe(24), bucket, name, content_type, conditions, fields=fields or {})
        self._part(session.upload_id).touch()
        self._save(session)
        return session

    def get(self, upload_id: str) -> Session:
        if not re.fullmatch(r"[A-Za-z0-9_-]{16,64}", upload_id or ""):
            raise StorageFault(400, f"upload_id {upload_id!r} is malformed", "invalid")
        try:
            return Session.from_json(json.loads((self.folder / f"{upload_id}.json").read_text()))
        except FileNotFoundError:
            raise StorageFault(404, f"upload session {upload_id} does not exist (finished, cancelled or never "
                                    "opened): start a new one with uploadType=resumable", "notFound") from None

    def received(self, session: Session) -> int:
        return self._part(session.upload_id).stat().st_size

    def append(self, session: Session, span: ContentRange, stream: BinaryIO) -> int:
        """Store a chunk's new bytes; returns how many bytes the session holds now."""
        have = self.received(session)
        if span.total is not None:
            if session.total is not None and span.total != session.total:
                raise StorageFault(400, f"the upload's size was {session.total}, this chunk says {span.total}",
                                   "invalid")
            session.total = span.total
            self._save(session)
        if span.first is None:
            return have
        length = span.last - span.first + 1
        if span.first > have:
            _drain(stream, length)
            raise StorageFault(400, f"the chunk starts at byte {span.first} but the session has {have} bytes; "
                                    f"resume from byte {have} (ask with Content-Range: bytes */*)", "invalid")
        skip = have - span.first
        with open(self._part(session.upload_id), "ab") as out:
            for chunk in _chunks(stream, length):
                if skip >= len(chunk):
                    skip -= len(chunk)
                    continue
                out.write(chunk[skip:])
                skip = 0
        return self.received(session)

    def part_stream(self, session: Session) -> BinaryIO:
        return open(self._part(session.upload_id), "rb")  # noqa: SIM115 - the caller closes

    def close(self, session: Session) -> None:
        for path in (self.folder / f"{session.upload_id}.json", self._part(session.upload_id)):
            with contextlib.suppress(FileNotFoundError):
                os.unlink(path)

    def _part(self, upload_id: str) -> Path:
        return self.folder / f"{upload_id}.part"

    def _save(self, session: Session) -> None:
        tmp = self.folder / f"{session.upload_id}.json.tmp"
        tmp.write_text(json.dumps(session.to_json()))
        os.replace(tmp, self.folder / f"{session.upload_id}.json")


def _drain(stream: BinaryIO, length: int) -> None:
    for _ in _chunks(stream, length):
        pass
