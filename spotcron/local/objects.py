"""Objects on disk for the local storage server: generations, preconditions, listings, upload sessions.

The disk is the truth, not a cache: two processes on one state dir (a running `spotcron up`
and a `spotcron logs` beside it) see each other's writes at once. Each object is a small JSON
metadata file and a data file named by generation, under a path built from the object's name
(`runs/bot/1/run.json` → `runs.d/bot.d/1.d/run.json.m`), so a listing walks only the folders
under its prefix. A write streams its bytes to a temporary file first, then, under a lock
shared by threads and processes (flock), checks its preconditions, moves the data into place
and replaces the metadata file: readers see the old object or the new one, never a mix.

Names are encoded segment by segment: lower-case letters, digits, `-`, `_` and `.` stay; any
other byte (upper-case letters included, for case-insensitive disks) becomes `%xx`.
"""

from __future__ import annotations

import base64
import contextlib
import fcntl
import hashlib
import json
import os
import re
import secrets
import time
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, BinaryIO

_KEEP = frozenset(b"abcdefghijklmnopqrstuvwxyz0123456789-_.")
_MAX_SEGMENT = 240  # bytes of an encoded path segment: file names stop at 255
_BUCKET_NAME = re.compile(r"[a-z0-9][a-z0-9._-]{0,221}")


class StorageFault(Exception):
    """A request the store refuses: `status` is the HTTP code, `reason` Google's reason word."""

    def __init__(self, status: int, message: str, reason: str):
        super().__init__(message)
        self.status, self.reason = status, reason


def not_found(bucket: str, name: str | None = None) -> StorageFault:
    if name is None:
        return StorageFault(404, f"The specified bucket does not exist: {bucket}", "notFound")
    return StorageFault(404, f"No such object: {bucket}/{name}", "notFound")


def _encode(segment: str) -> str:
    raw = segment.encode()
    out = "".join(chr(b) if b in _KEEP else f"%{b:02x}" for b in raw)
    if out in ("", ".", ".."):
        out = "".join(f"%{b:02x}" for b in raw) or "%"
    if len(out) > _MAX_SEGMENT:
        raise StorageFault(400, f"object name segment {segment[:40]!r}... is {len(out)} bytes once stored on "
                                f"disk; the local server allows {_MAX_SEGMENT}: shorten it", "invalid")
    return out


def _unquote(encoded: str) -> str:
    if encoded == "%":
        return ""
    out = bytearray()
    i = 0
    while i < len(encoded):
        if encoded[i] == "%":
            out.append(int(encoded[i + 1:i + 3], 16))
            i += 3
        else:
            out.append(ord(encoded[i]))
            i += 1
    return out.decode()


def rfc3339(moment: datetime) -> str:
    return moment.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%S.") + f"{moment.microsecond // 1000:03d}Z"


@dataclass(frozen=True)
class Conditions:
    """The JSON API's preconditions, as google-cloud-storage sends them (query parameters)."""

    if_generation_match: int | None = None
    if_generation_not_match: int | None = None
    if_metageneration_match: int | None = None
    if_metageneration_not_match: int | None = None

    @classmethod
    def from_query(cls, query: Mapping[str, str]) -> Conditions:
        def number(key: str) -> int | None:
            value = query.get(key)
            if value is None or value == "":
                return None
            try:
                return int(value)
            except ValueError:
                raise StorageFault(400, f"{key}={value!r} is not a number", "invalid") from None

        return cls(number("ifGenerationMatch"), number("ifGenerationNotMatch"), number("ifMetagenerationMatch"),
                   number("ifMetagenerationNotMatch"))

    def holds(self, current: Mapping[str, Any] | None) -> bool:
        generation = int(current["generation"]) if current else 0
        if self.if_generation_match is not None and self.if_generation_match != generation:
            return False
        if self.if_generation_not_match is not None and self.if_generation_not_match == generation:
            return False
        metageneration = int(current["metageneration"]) if current else None
        if self.if_metageneration_match is not None and self.if_metageneration_match != metageneration:
            return False
        return not (self.if_metageneration_not_match is not None and current is not None
                    and self.if_metageneration_not_match == metageneration)

    def to_query(self) -> dict[str, str]:
        keys = ("ifGenerationMatch", "ifGenerationNotMatch", "ifMetagenerationMatch", "ifMetagenerationNotMatch")
        values = (self.if_generation_match, self.if_generation_not_match, self.if_metageneration_match,
                  self.if_metageneration_not_match)
        return {key: str(value) for key, value in zip(keys, values, strict=True) if value is not None}


PRECONDITION_FAILED = "At least one of the pre-conditions you specified did not hold."


class ObjectStore:
    """Buckets of objects under `root` (a folder that outlives the server)."""

    def __init__(self, root: Path):
        self.root = Path(root)
        (self.root / "buckets").mkdir(parents=True, exist_ok=True)
        (self.root / "tmp").mkdir(exist_ok=True)

    # --- buckets -----------------------------------------------------------------------------
    def create_bucket(self, bucket: str) -> bool:
        """True when it was created, False when it already existed."""
        if not _BUCKET_NAME.fullmatch(bucket):
            raise StorageFault(400, f"bucket name {bucket!r} is invalid: use 1-222 of a-z 0-9 . _ - starting with a letter or digit", "invalid")
        path = self._bucket_dir(bucket)
        if path.exists():
            return False
        (path / "objects").mkdir(parents=True, exist_ok=True)
        return True

    def has_bucket(self, bucket: str) -> bool:
        return _BUCKET_NAME.fullmatch(bucket) is not None and (self._bucket_dir(bucket) / "objects").is_dir()

    def _bucket_dir(self, bucket: str) -> Path:
        return self.root / "buckets" / bucket

    def _require(self, bucket: str) -> Path:
        if not self.has_bucket(bucket):
            raise not_found(bucket)
        return self._bucket_dir(bucket) / "objects"

    def _paths(self, bucket: str, name: str) -> tuple[Path, str]:
        """(folder holding the object's files, the last segment's encoding)."""
        if not name or len(name.encode()) > 1024:
            raise StorageFault(400, f"object name {name[:60]!r} must be 1 to 1024 bytes", "invalid")
        *folders, last = name.split("/")
        base = self._require(bucket)
        for folder in folders:
            base = base / (_encode(folder) + ".d")
        return base, _encode(last)

    @contextlib.contextmanager
    def _locked(self, bucket: str) -> Iterator[None]:
        # One lock per bucket, shared by this process's threads and by other processes.
        with open(self._bucket_dir(bucket) / "lock", "a+b") as handle:
            fcntl.flock(handle, fcntl.LOCK_EX)
            try:
                yield
            finally:
                fcntl.flock(handle, fcntl.LOCK_UN)

    # --- reads ---------------------------------------------------------------------------------
    def metadata(self, bucket: str, name: str) -> dict[str, Any] | None:
        folder, leaf = self._paths(bucket, name)
        try:
            return json.loads((folder / f"{leaf}.m").read_bytes())
        except FileNotFoundError:
            return None

    def open(self, bucket: str, name: str) -> tuple[dict[str, Any], BinaryIO] | None:
        """The object's metadata and its data, opened (the handle stays valid if it is replaced)."""
        folder, leaf = self._paths(bucket, name)
        for _ in range(5):
            meta = self.metadata(bucket, name)
            if meta is None:
                return None
            try:
                return meta, open(folder / f"{leaf}.{meta['generation']}.o", "rb")  # noqa: SIM115 - the caller closes
            except FileNotFoundError:
                continue  # replaced between the two reads: read the new metadata
        raise StorageFault(503, f"{bucket}/{name} changed under five reads in a row; try again", "backendError")

    def names(self, bucket: str, prefix: str = "") -> list[str]:
        """Every object name that starts with `prefix`, sorted (by UTF-8 bytes, as Cloud Storage sorts)."""
        base = self._require(bucket)
        *folders, partial = prefix.split("/")
        for folder in folders:
            base = base / (_encode(folder) + ".d")
        head = "".join(f + "/" for f in folders)
        found: list[str] = []
        if not base.is_dir():
            return found
        for entry in os.scandir(base):
            if entry.name.endswith(".m"):
                segment = _unquote(entry.name[:-2])
                if segment.startswith(partial):
                    found.append(head + segment)
            elif entry.name.endswith(".d") and entry.is_dir():
                segment = _unquote(entry.name[:-2])
                if segment.startswith(partial):
                    found += self._walk(Path(entry.path), head + segment + "/")
        return sorted(found, key=lambda n: n.encode())

    def _walk(self, folder: Path, head: str) -> list[str]:
        found: list[str] = []
        for entry in os.scandir(folder):
            if entry.name.endswith(".m"):
                found.append(head + _unquote(entry.name[:-2]))
            elif entry.name.endswith(".d") and entry.is_dir():
                found += self._walk(Path(entry.path), head + _unquote(entry.name[:-2]) + "/")
        return found

    # --- writes --------------------------------------------------------------------------------
    def spool(self, stream: BinaryIO, length: int | None) -> Spooled:
        """Copy a request body to a temporary file, hashing it on the way (outside any lock)."""
        path = self.root / "tmp" / secrets.token_hex(12)
        md5 = hashlib.md5()  # noqa: S324 - Cloud Storage's md5Hash, not security
        crc = _crc32c()
        size = 0
        with open(path, "wb") as out:
            for chunk in _chunks(stream, length):
                out.write(chunk)
                md5.update(chunk)
                if crc is not None:
                    crc.update(chunk)
                size += len(chunk)
        return Spooled(path, size, md5.digest(), crc.digest() if crc is not None else None)

    def commit(self, bucket: str, name: str, spooled: Spooled, content_type: str, conditions: Conditions,
               check: Any = None) -> dict[str, Any]:
        """Make `spooled` the object's new generation if `conditions` hold. `check(current)` runs
        under the lock first (the server's permission check for an overwrite)."""
        folder, leaf = self._paths(bucket, name)
        with self._locked(bucket):
            current = self.metadata(bucket, name)
            if check is not None:
                check(current)
            if not conditions.holds(current):
                spooled.discard()
                raise StorageFault(412, PRECONDITION_FAILED, "conditionNotMet")
            now = datetime.now(UTC)
            generation = max(time.time_ns() // 1000, int(current["generation"]) + 1 if current else 0)
            meta = {
                "name": name, "bucket": bucket, "generation": str(generation), "metageneration": "1",
                "contentType": content_type or "application/octet-stream", "size": str(spooled.size),
                "md5Hash": base64.b64encode(spooled.md5).decode(), "timeCreated": rfc3339(now),
                "updated": rfc3339(now),
            }
            if spooled.crc32c is not None:
                meta["crc32c"] = base64.b64encode(spooled.crc32c).decode()
            folder.mkdir(parents=True, exist_ok=True)
            os.replace(spooled.path, folder / f"{leaf}.{generation}.o")
            _write_atomically(folder / f"{leaf}.m", json.dumps(meta).encode(), self.root / "tmp")
            if current is not None:
                with contextlib.suppress(FileNotFoundError):
                    os.unlink(folder / f"{leaf}.{current['generation']}.o")
            return meta

    def delete(self, bucket: str, name: str, conditions: Conditions) -> None:
        folder, leaf = self._paths(bucket, name)
        with self._locked(bucket):
            current = self.metadata(bucket, name)
            if current is None:
                raise not_found(bucket, name)
            if not conditions.holds(current):
                raise StorageFault(412, PRECONDITION_FAILED, "conditionNotMet")
            os.unlink(folder / f"{leaf}.m")
            with contextlib.suppress(FileNotFoundError):
                os.unlink(folder / f"{leaf}.{current['generation']}.o")
            self._prune(folder)

    def _prune(self, folder: Path) -> None:
        """Remove folders left empty, so a listing with a delimiter shows no phantom prefixes."""
        top = self._bucket_dir(folder.relative_to(self.root / "buckets").parts[0]) / "objects"
        while folder != top:
            try:
                folder.rmdir()
            except OSError:
                return
            folder = folder.parent


@dataclass(frozen=True)
class Spooled:
    path: Path
    size: int
    md5: bytes
    crc32c: bytes | None

    def discard(self) -> None:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(self.path)


def _chunks(stream: BinaryIO, length: int | None, block: int = 1 << 20) -> Iterator[bytes]:
    if length is None:
        while chunk := stream.read(block):
            yield chunk
        return
    left = length
    while left > 0:
        chunk = stream.read(min(block, left))
        if not chunk:
            raise StorageFault(400, f"the request body ended {left} bytes short of its Content-Length", "invalid")
        left -= len(chunk)
        yield chunk


def _crc32c() -> Any:
    try:
        import google_crc32c
    except ImportError:  # the checksum is optional: clients fall back to md5Hash
        return None
    return google_crc32c.Checksum()


def _write_atomically(path: Path, data: bytes, tmp_dir: Path) -> None:
    tmp = tmp_dir / secrets.token_hex(12)
    tmp.write_bytes(data)
    os.replace(tmp, path)
