"""Objects on disk for the local storage server: generations, preconditions, listings, upload sessions.

The disk is the truth, not a cache: two processes on one state dir (a running `spotcron up`
and a `spotcron logs` beside it) see each other's writes at once. Each object is a small JSON
metadata file and a data file named by generation, in a flat folder keyed by the SHA-256 of the
object's name (`objects/3f/3f9a….m`, `objects/3f/3f9a….1764….o`): any legal name (1 to 1,024
bytes of UTF-8) fits, whatever its segments, and the metadata file holds the name itself, so
two names never share files. The bucket's listing index (`listing.Index`) keeps the names
sorted. A write streams its bytes to a temporary file first, then, under a lock shared by
threads and processes (flock), checks its preconditions, moves the data into place and
replaces the metadata file: readers see the old object or the new one, never a mix.
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
import shutil
import time
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, BinaryIO

from spotcron.local.listing import Index

_BUCKET_NAME = re.compile(r"[a-z0-9][a-z0-9._-]{0,221}")
# What a writer may set on an object (objects.insert metadata, objects.patch, compose's and
# copy's destination); everything else in the resource is the server's.
WRITABLE = ("contentType", "contentEncoding", "contentDisposition", "contentLanguage", "cacheControl", "customTime",
            "metadata", "temporaryHold", "eventBasedHold")


def refuse_if_held(bucket: str, current: Mapping[str, Any] | None) -> None:
    """Cloud Storage's 403 for deleting or replacing a held object, in its words
    (https://cloud.google.com/storage/docs/holding-objects)."""
    if current is None:
        return
    for field, kind in (("eventBasedHold", "Event-Based"), ("temporaryHold", "Temporary")):
        if current.get(field) is True:
            raise StorageFault(403, f"Object '{bucket}/{current['name']}' is under active {kind} hold and cannot be "
                                    f"deleted, overwritten or archived until hold is removed.", "forbidden")


class StorageFault(Exception):
    """A request the store refuses: `status` is the HTTP code, `reason` Google's reason word."""

    def __init__(self, status: int, message: str, reason: str):
        super().__init__(message)
        self.status, self.reason = status, reason


def not_found(bucket: str, name: str | None = None) -> StorageFault:
    if name is None:
        return StorageFault(404, f"The specified bucket does not exist: {bucket}", "notFound")
    return StorageFault(404, f"No such object: {bucket}/{name}", "notFound")


def check_name(name: str) -> None:
    """Cloud Storage's rules for object names (the ones that are not only advice)."""
    if not name or len(name.encode()) > 1024:
        raise StorageFault(400, f"object name {name[:60]!r} is {len(name.encode())} bytes: names are 1 to 1,024 "
                                "bytes of UTF-8", "invalid")
    if name in (".", ".."):
        raise StorageFault(400, f"object name {name!r} is not allowed: Cloud Storage refuses '.' and '..'", "invalid")
    if "\r" in name or "\n" in name:
        raise StorageFault(400, f"object name {name[:60]!r} holds a carriage return or line feed, which Cloud Storage "
                                "refuses: remove them", "invalid")
    if name.startswith(".well-known/acme-challenge/"):
        raise StorageFault(400, "object names cannot start with '.well-known/acme-challenge/'", "invalid")


def _key(name: str) -> str:
    return hashlib.sha256(name.encode()).hexdigest()


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
        self._indexes: dict[str, Index] = {}

    # --- buckets -----------------------------------------------------------------------------
    def create_bucket(self, bucket: str) -> bool:
        """True when it was created, False when it already existed."""
        if not _BUCKET_NAME.fullmatch(bucket):
            raise StorageFault(400, f"bucket name {bucket!r} is invalid: use 1-222 of a-z 0-9 . _ - starting with a "
                                    "letter or digit", "invalid")
        path = self._bucket_dir(bucket)
        if path.exists():
            return False
        (path / "objects").mkdir(parents=True, exist_ok=True)
        now = rfc3339(datetime.now(UTC))
        _write_atomically(path / "bucket.json", json.dumps({"timeCreated": now}).encode(), self.root / "tmp")
        return True

    def has_bucket(self, bucket: str) -> bool:
        return _BUCKET_NAME.fullmatch(bucket) is not None and (self._bucket_dir(bucket) / "objects").is_dir()

    def buckets(self) -> list[str]:
        return sorted(entry.name for entry in os.scandir(self.root / "buckets") if self.has_bucket(entry.name))

    def bucket_info(self, bucket: str) -> dict[str, str]:
        """When the bucket was made."""
        return json.loads((self._require(bucket).parent / "bucket.json").read_bytes())

    def _bucket_dir(self, bucket: str) -> Path:
        return self.root / "buckets" / bucket

    def _require(self, bucket: str) -> Path:
        if not self.has_bucket(bucket):
            raise not_found(bucket)
        return self._bucket_dir(bucket) / "objects"

    def index(self, bucket: str) -> Index:
        """The bucket's listing index, built from the stored objects on first use (a state dir whose
        index file was deleted gets it back)."""
        index = self._indexes.get(bucket)
        if index is None:
            self._require(bucket)
            index = Index(self._bucket_dir(bucket) / "index.sqlite")
            if not index.is_built():
                with self._locked(bucket):
                    if not index.is_built():
                        index.rebuild(self._stored_names(bucket))
            self._indexes[bucket] = index
        return index

    def _paths(self, bucket: str, name: str) -> tuple[Path, str]:
        """(folder holding the object's files, their common stem)."""
        check_name(name)
        key = _key(name)
        return self._require(bucket) / key[:2], key

    @contextlib.contextmanager
    def _locked(self, bucket: str) -> Iterator[None]:
        # One lock per bucket, shared by this process's threads and by other processes.
        with open(self._bucket_dir(bucket) / "lock", "a+b") as handle:
            fcntl.flock(handle, fcntl.LOCK_EX)
            try:
                yield
            finally:
                fcntl.flock(handle, fcntl.LOCK_UN)

    def _stored_names(self, bucket: str) -> Iterator[str]:
        top = self._require(bucket)
        for folder in os.scandir(top):
            if folder.is_dir():
                for entry in os.scandir(folder.path):
                    if entry.name.endswith(".m"):
                        with contextlib.suppress(FileNotFoundError, ValueError, KeyError):
                            yield json.loads(Path(entry.path).read_bytes())["name"]

    # --- reads ---------------------------------------------------------------------------------
    def metadata(self, bucket: str, name: str) -> dict[str, Any] | None:
        folder, stem = self._paths(bucket, name)
        try:
            meta = json.loads((folder / f"{stem}.m").read_bytes())
        except FileNotFoundError:
            return None
        return meta if meta.get("name") == name else None  # another name with the same hash: never seen

    def data_path(self, bucket: str, meta: Mapping[str, Any]) -> Path:
        folder, stem = self._paths(bucket, meta["name"])
        return folder / f"{stem}.{meta['generation']}.o"

    def open(self, bucket: str, name: str) -> tuple[dict[str, Any], BinaryIO] | None:
        """The object's metadata and its data, opened (the handle stays valid if it is replaced)."""
        for _ in range(5):
            meta = self.metadata(bucket, name)
            if meta is None:
                return None
            try:
                return meta, open(self.data_path(bucket, meta), "rb")  # noqa: SIM115 - the caller closes
            except FileNotFoundError:
                continue  # replaced between the two reads: read the new metadata
        raise StorageFault(503, f"{bucket}/{name} changed under five reads in a row; try again", "backendError")

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

    def linked(self, bucket: str, meta: Mapping[str, Any]) -> Spooled:
        """A copy of an object's data for a new object, as a hard link (data files never change)."""
        path = self.root / "tmp" / secrets.token_hex(12)
        try:
            os.link(self.data_path(bucket, meta), path)
        except FileNotFoundError:
            raise StorageFault(503, f"{bucket}/{meta['name']} was replaced while it was copied; try again",
                               "backendError") from None
        except OSError:  # a disk without hard links: copy the bytes
            shutil.copyfile(self.data_path(bucket, meta), path)
        md5 = base64.b64decode(meta["md5Hash"]) if "md5Hash" in meta else None
        crc = base64.b64decode(meta["crc32c"]) if "crc32c" in meta else None
        return Spooled(path, int(meta["size"]), md5, crc)

    def commit(self, bucket: str, name: str, spooled: Spooled, fields: Mapping[str, Any], conditions: Conditions,
               check: Any = None, extra: Mapping[str, Any] | None = None) -> dict[str, Any]:
        """Make `spooled` the object's new generation if `conditions` hold. `fields` are the
        writer's (WRITABLE), `extra` the server's (componentCount). `check(current)` runs under
        the lock first (the server's permission check for an overwrite)."""
        folder, stem = self._paths(bucket, name)
        index = self.index(bucket)
        with self._locked(bucket):
            current = self.metadata(bucket, name)
            if check is not None:
                check(current)
            if not conditions.holds(current):
                spooled.discard()
                raise StorageFault(412, PRECONDITION_FAILED, "conditionNotMet")
            try:
                refuse_if_held(bucket, current)
            except StorageFault:
                spooled.discard()
                raise
            now = datetime.now(UTC)
            generation = max(time.time_ns() // 1000, int(current["generation"]) + 1 if current else 0)
            meta: dict[str, Any] = {
                "name": name, "bucket": bucket, "generation": str(generation), "metageneration": "1",
                "contentType": "application/octet-stream", "size": str(spooled.size),
                "timeCreated": rfc3339(now), "updated": rfc3339(now),
            }
            meta.update({k: v for k, v in fields.items() if k in WRITABLE and v is not None})
            meta["contentType"] = meta["contentType"] or "application/octet-stream"
            meta.update(extra or {})
            if spooled.md5 is not None:
                meta["md5Hash"] = base64.b64encode(spooled.md5).decode()
            if spooled.crc32c is not None:
                meta["crc32c"] = base64.b64encode(spooled.crc32c).decode()
            folder.mkdir(parents=True, exist_ok=True)
            index.add(name)  # owed before it is done: the index may name a missing object, never miss one
            os.replace(spooled.path, folder / f"{stem}.{generation}.o")
            _write_atomically(folder / f"{stem}.m", json.dumps(meta).encode(), self.root / "tmp")
            if current is not None:
                with contextlib.suppress(FileNotFoundError):
                    os.unlink(folder / f"{stem}.{current['generation']}.o")
            return meta

    def patch(self, bucket: str, name: str, changes: Mapping[str, Any], conditions: Conditions,
              generation: str | None = None) -> dict[str, Any]:
        """objects.patch: set WRITABLE fields (`metadata` merges; a key set to null goes; a field
        set to null is cleared), bump the metageneration."""
        unknown = sorted(set(changes) - set(WRITABLE) - {"name", "bucket", "generation", "kind"})
        if unknown:
            raise StorageFault(400, f"objects.patch: the local storage server cannot change {', '.join(unknown)}; it "
                                    f"changes {', '.join(WRITABLE)}", "invalid")
        folder, stem = self._paths(bucket, name)
        with self._locked(bucket):
            current = self.metadata(bucket, name)
            if current is None or (generation and generation != current["generation"]):
                raise not_found(bucket, name)
            if not conditions.holds(current):
                raise StorageFault(412, PRECONDITION_FAILED, "conditionNotMet")
            meta = dict(current)
            for key in WRITABLE:
                if key not in changes:
                    continue
                value = changes[key]
                if key == "metadata" and isinstance(value, dict):
                    merged = {**meta.get("metadata", {}), **value}
                    value = {k: str(v) for k, v in merged.items() if v is not None} or None
                if value is None:
                    meta.pop(key, None)
                else:
                    meta[key] = value
            meta.setdefault("contentType", "application/octet-stream")
            meta["metageneration"] = str(int(current["metageneration"]) + 1)
            meta["updated"] = rfc3339(datetime.now(UTC))
            _write_atomically(folder / f"{stem}.m", json.dumps(meta).encode(), self.root / "tmp")
            return meta

    def delete(self, bucket: str, name: str, conditions: Conditions, generation: str | None = None) -> None:
        """Delete the live object; with `generation`, only if that is the live one (without
        versioning an older generation no longer exists: 404)."""
        folder, stem = self._paths(bucket, name)
        index = self.index(bucket)
        with self._locked(bucket):
            current = self.metadata(bucket, name)
            if current is None or (generation and generation != current["generation"]):
                raise not_found(bucket, name)
            if not conditions.holds(current):
                raise StorageFault(412, PRECONDITION_FAILED, "conditionNotMet")
            refuse_if_held(bucket, current)
            os.unlink(folder / f"{stem}.m")
            with contextlib.suppress(FileNotFoundError):
                os.unlink(folder / f"{stem}.{current['generation']}.o")
            index.remove(name)


@dataclass(frozen=True)
class Spooled:
    path: Path
    size: int
    md5: bytes | None  # None for a composed object: Cloud Storage gives those no md5Hash
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
