"""A recording Cloud Storage JSON API: what google-cloud-storage sends for GcsBlobs, request by
request, with failures injected on demand (fail_next). Behaviour is checked elsewhere, against
the local storage server and fake-gcs-server (tests/contracts); this fake only records shapes.

Enough for google-cloud-storage's get_blob / download / multipart upload / list_blobs / delete
on one or more buckets. Objects live in memory; every request is recorded (rest.py).

    with FakeCloudStorage("bkt", page_size=2) as fake:
        client = storage.Client(project="p", credentials=AnonymousCredentials(),
                                client_options={"api_endpoint": fake.endpoint})
"""

from __future__ import annotations

import base64
import hashlib
import itertools
import json
from dataclasses import dataclass
from datetime import UTC, datetime
from email.parser import BytesParser
from email.policy import HTTP
from typing import Any
from urllib.parse import unquote

from tests.fakes.gcp.rest import FakeRestServer, RecordedRequest, Reply, google_error

_BUCKET = r"/b/(?P<bucket>[^/]+)"
OBJECTS_PATH = r"/storage/v1" + _BUCKET + r"/o"
OBJECT_PATH = OBJECTS_PATH + r"/(?P<name>.+)"
DOWNLOAD_PATH = r"/download/storage/v1" + _BUCKET + r"/o/(?P<name>.+)"
UPLOAD_PATH = r"/upload/storage/v1" + _BUCKET + r"/o"


@dataclass
class StoredObject:
    name: str
    data: bytes
    generation: int
    content_type: str
    updated: datetime
    temporary_hold: bool = False
    event_based_hold: bool = False


class FakeCloudStorage(FakeRestServer):
    def __init__(self, *buckets: str, page_size: int = 1000):
        super().__init__()
        self.buckets: dict[str, dict[str, StoredObject]] = {bucket: {} for bucket in buckets}
        self.page_size = page_size  # objects per list page (maxResults overrides it)
        self._generations = itertools.count(1_700_000_000_000_001)
        self.retention_s: dict[str, int] = {}  # bucket -> retention policy's period
        # google-cloud-storage fetches bucket metadata once, in the background, for its telemetry.
        self.route("GET", r"/storage/v1" + _BUCKET, self._bucket)
        self.route("GET", OBJECT_PATH, self._metadata)
        self.route("GET", DOWNLOAD_PATH, self._download)
        self.route("POST", UPLOAD_PATH, self._upload)
        self.route("GET", OBJECTS_PATH, self._list)
        self.route("DELETE", OBJECT_PATH, self._delete)
        self.route("PATCH", OBJECT_PATH, self._patch)

    def put(self, bucket: str, name: str, data: bytes, content_type: str = "application/octet-stream") -> int:
        """Store an object directly (as another writer would); returns its generation."""
        with self._lock:
            generation = next(self._generations)
            self.buckets[bucket][name] = StoredObject(name, data, generation, content_type, datetime.now(UTC))
            return generation

    def hold(self, bucket: str, name: str, *, temporary: bool = True, event_based: bool = False) -> None:
        """Place holds on a stored object (what objects.patch with temporaryHold/eventBasedHold does)."""
        with self._lock:
            obj = self.buckets[bucket][name]
            obj.temporary_hold, obj.event_based_hold = temporary, event_based

    # --- helpers ---------------------------------------------------------------------------

    def _kept(self, bucket: str, obj: StoredObject | None) -> Reply | None:
        """Cloud Storage's 403 for deleting or replacing a held or retained object (reason `forbidden`,
        the reason a missing permission has too: only the message tells them apart)."""
        if obj is None:
            return None
        for held, kind in ((obj.event_based_hold, "Event-Based"), (obj.temporary_hold, "Temporary")):
            if held:
                return google_error(403, f"Object '{bucket}/{obj.name}' is under active {kind} hold and cannot be "
                                         f"deleted, overwritten or archived until hold is removed.")
        period = self.retention_s.get(bucket)
        if period and (datetime.now(UTC) - obj.updated).total_seconds() < period:
            return google_error(403, f"Object '{bucket}/{obj.name}' is subject to bucket's retention policy or "
                                     f"object retention and cannot be deleted or overwritten")
        return None

    def _resource(self, bucket: str, obj: StoredObject) -> dict[str, Any]:
        return {
            "kind": "storage#object", "bucket": bucket, "name": obj.name, "id": f"{bucket}/{obj.name}/{obj.generation}",
            "generation": str(obj.generation), "metageneration": "1", "contentType": obj.content_type,
            "size": str(len(obj.data)), "updated": obj.updated.isoformat().replace("+00:00", "Z"),
            "timeCreated": obj.updated.isoformat().replace("+00:00", "Z"), "md5Hash": _md5(obj.data),
            "temporaryHold": obj.temporary_hold, "eventBasedHold": obj.event_based_hold,
        }

    def _lookup(self, bucket: str, name: str) -> tuple[dict[str, StoredObject] | None, StoredObject | None]:
        objects = self.buckets.get(bucket)
        return objects, (objects or {}).get(unquote(name))

    @staticmethod
    def _precondition(request: RecordedRequest, current: StoredObject | None) -> Reply | None:
        wanted = request.param("ifGenerationMatch")
        if wanted is None:
            return None
        actual = current.generation if current else 0
        if int(wanted) != actual:
            return google_error(412, "At least one of the pre-conditions you specified did not hold.",
                                "conditionNotMet")
        return None

    # --- routes ----------------------------------------------------------------------------

    def _bucket(self, request: RecordedRequest, bucket: str) -> Reply:
        if bucket not in self.buckets:
            return google_error(404, "The specified bucket does not exist.")
        return 200, {"kind": "storage#bucket", "name": bucket, "id": bucket, "projectNumber": "123456789",
                     "location": "US-CENTRAL1", "metageneration": "1"}

    def _metadata(self, request: RecordedRequest, bucket: str, name: str) -> Reply:
        objects, obj = self._lookup(bucket, name)
        if objects is None:
            return google_error(404, "The specified bucket does not exist.")
        if obj is None:
            return google_error(404, f"No such object: {bucket}/{unquote(name)}")
        return 200, self._resource(bucket, obj)

    def _download(self, request: RecordedRequest, bucket: str, name: str) -> Reply:
        objects, obj = self._lookup(bucket, name)
        if obj is None:
            return google_error(404, f"No such object: {bucket}/{unquote(name)}")
        failed = self._precondition(request, obj)
        if failed:
            return failed
        headers = {"Content-Type": obj.content_type, "X-Goog-Generation": str(obj.generation)}
        wanted = request.headers.get("range", "")
        if wanted.startswith("bytes="):  # a ranged download, as Cloud Storage answers it
            first, _, last = wanted[len("bytes="):].partition("-")
            start, end = int(first), min(int(last) if last else len(obj.data) - 1, len(obj.data) - 1)
            if start >= len(obj.data):
                return google_error(416, "Requested range not satisfiable")
            return 206, obj.data[start:end + 1], {**headers,
                                                  "Content-Range": f"bytes {start}-{end}/{len(obj.data)}"}
        return 200, obj.data, {**headers, "X-Goog-Hash": f"md5={_md5(obj.data)}"}

    def _upload(self, request: RecordedRequest, bucket: str) -> Reply:
        if request.param("uploadType") != "multipart":
            return google_error(400, f"the fake supports multipart uploads only, not {request.param('uploadType')}")
        objects = self.buckets.get(bucket)
        if objects is None:
            return google_error(404, "The specified bucket does not exist.")
        message = BytesParser(policy=HTTP).parsebytes(
            f"Content-Type: {request.headers['content-type']}\r\n\r\n".encode() + request.raw)
        parts = list(message.iter_parts())
        metadata = json.loads(parts[0].get_payload(decode=True))
        data = parts[1].get_payload(decode=True)
        name = metadata.get("name") or request.param("name")
        failed = self._precondition(request, objects.get(name)) or self._kept(bucket, objects.get(name))
        if failed:
            return failed
        content_type = metadata.get("contentType") or parts[1].get_content_type()
        obj = StoredObject(name, data, next(self._generations), content_type, datetime.now(UTC),
                           bool(metadata.get("temporaryHold")), bool(metadata.get("eventBasedHold")))
        objects[name] = obj
        return 200, self._resource(bucket, obj)

    def _list(self, request: RecordedRequest, bucket: str) -> Reply:
        objects = self.buckets.get(bucket)
        if objects is None:
            return google_error(404, "The specified bucket does not exist.")
        prefix = request.param("prefix", "") or ""
        size = int(request.param("maxResults") or self.page_size)
        start = int(request.param("pageToken") or 0)
        offset = request.param("startOffset", "") or ""
        delimiter = request.param("delimiter", "") or ""
        # objects.list: names at or after startOffset; with a delimiter, a name holding it after the
        # prefix is answered once as its truncated prefix in `prefixes` (duplicates omitted), and
        # maxResults counts items and prefixes together.
        entries: list[str] = []
        for name in sorted(name for name in objects if name.startswith(prefix) and name >= offset):
            rest = name[len(prefix):]
            entry = prefix + rest[:rest.index(delimiter) + len(delimiter)] if delimiter and delimiter in rest else name
            if not entries or entries[-1] != entry:
                entries.append(entry)
        page = entries[start:start + size]
        reply: dict[str, Any] = {"kind": "storage#objects",
                                 "items": [self._resource(bucket, objects[n]) for n in page if n in objects]}
        folders = [entry for entry in page if entry not in objects]
        if folders:
            reply["prefixes"] = folders
        if start + size < len(entries):
            reply["nextPageToken"] = str(start + size)
        return 200, reply

    def _delete(self, request: RecordedRequest, bucket: str, name: str) -> Reply:
        objects, obj = self._lookup(bucket, name)
        if obj is None:
            return google_error(404, f"No such object: {bucket}/{unquote(name)}")
        failed = self._precondition(request, obj) or self._kept(bucket, obj)
        if failed:
            return failed
        del objects[obj.name]
        return 204, None

    def _patch(self, request: RecordedRequest, bucket: str, name: str) -> Reply:
        objects, obj = self._lookup(bucket, name)
        if obj is None:
            return google_error(404, f"No such object: {bucket}/{unquote(name)}")
        body = json.loads(request.raw or b"{}")
        if "temporaryHold" in body:
            obj.temporary_hold = bool(body["temporaryHold"])
        if "eventBasedHold" in body:
            obj.event_based_hold = bool(body["eventBasedHold"])
        return 200, self._resource(bucket, obj)


def _md5(data: bytes) -> str:
    return base64.b64encode(hashlib.md5(data).digest()).decode()
