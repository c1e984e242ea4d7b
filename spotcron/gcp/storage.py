"""The Blobs port on Cloud Storage (google-cloud-storage).

The client library is imported on first use: functions cold-start on a schedule.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from typing import Any

from spotcron.core.errors import EncodedObject, ObjectKept, PreconditionFailed, Transient
from spotcron.engine.ports import Blob
from spotcron.gcp.error_map import kept_by_policy, translated

# A read is "metadata, then the bytes of exactly that generation"; if the object is replaced
# in between, the download's precondition fails and the read starts over.
_READ_ATTEMPTS = 3


def _stored_bytes(blob: Any, name: str, data: bytes) -> bytes:
    """`data` when the object was stored as is; EncodedObject when it carries a Content-Encoding.

    Every download asks for the stored bytes (`raw_download=True`, with the client's
    `Accept-Encoding: gzip`): Cloud Storage then serves a gzip object as stored, a Range counts
    stored bytes, and nothing is inflated here. Nothing spotcron writes is encoded, so an encoded
    object is one a job uploaded that way (a few KiB of gzip inflate to gigabytes): refused, not read.
    """
    encoding = (blob.content_encoding or "").strip().lower()
    if encoding and encoding != "identity":
        raise EncodedObject(f"{name}: stored compressed (Content-Encoding {encoding[:20]}); spotcron reads "
                            f"objects only as stored, uncompressed")
    return data


class GcsBlobs:
    """One bucket. `client` is a google.cloud.storage.Client; made with default credentials if None."""

    def __init__(self, bucket: str, *, client: Any = None, timeout: float = 30.0):
        self.bucket = bucket
        self.timeout = timeout
        self._client = client
        self._bucket: Any = None
        self._lock = threading.Lock()

    def _handle(self) -> Any:
        with self._lock:
            if self._bucket is None:
                if self._client is None:
                    from google.cloud import storage

                    with translated(f"open gs://{self.bucket}"):
                        self._client = storage.Client()
                self._bucket = self._client.bucket(self.bucket)
            return self._bucket

    def read(self, name: str) -> Blob | None:
        from google.api_core import exceptions as gexc

        bucket = self._handle()
        what = f"read gs://{self.bucket}/{name}"
        for _ in range(_READ_ATTEMPTS):
            with translated(what):
                meta = bucket.get_blob(name, timeout=self.timeout)
                if meta is None:
                    return None
                generation = int(meta.generation)
                try:
                    # A fresh handle builds the download URL from the client's endpoint, not the
                    # object's stored mediaLink. No `generation=` on it: once the object is
                    # replaced that generation is gone (404, read as "deleted"), while
                    # if_generation_match answers 412 and the read starts over.
                    handle = bucket.blob(name)
                    data = _stored_bytes(handle, name, handle.download_as_bytes(
                        if_generation_match=generation, timeout=self.timeout, raw_download=True))
                except gexc.NotFound:
                    return None  # deleted between the two calls
                except gexc.PreconditionFailed:
                    continue  # replaced between the two calls
            return Blob(name=name, data=data, generation=generation, updated=meta.updated,
                        content_type=meta.content_type or "application/octet-stream")
        raise Transient(f"{what}: the object changed under {_READ_ATTEMPTS} reads in a row; try again")

    def read_range(self, name: str, start: int, size: int) -> bytes | None:
        from google.api_core import exceptions as gexc

        what = f"read gs://{self.bucket}/{name} bytes {start}-{start + size - 1}"
        with translated(what):
            try:
                # One ranged GET (Range: bytes=start-end) of the stored bytes; no metadata call first.
                handle = self._handle().blob(name)
                return _stored_bytes(handle, name, handle.download_as_bytes(
                    start=start, end=start + size - 1, timeout=self.timeout, checksum=None, raw_download=True))
            except gexc.NotFound:
                return None
            except gexc.RequestRangeNotSatisfiable:
                return b""  # at or past the end of the object

    def write(self, name: str, data: bytes, *, if_generation_match: int | None = None,
              content_type: str = "application/octet-stream") -> int:
        from google.api_core import exceptions as gexc

        blob = self._handle().blob(name)
        what = f"write gs://{self.bucket}/{name}"
        with translated(what):
            try:
                blob.upload_from_string(data, content_type=content_type, if_generation_match=if_generation_match,
                                        timeout=self.timeout)
            except gexc.PreconditionFailed as exc:
                wanted = "absent" if if_generation_match == 0 else f"at generation {if_generation_match}"
                raise PreconditionFailed(f"{what}: the object is not {wanted} (if_generation_match="
                                         f"{if_generation_match})") from exc
        return int(blob.generation)

    def list(self, prefix: str) -> list[str]:
        bucket = self._handle()
        with translated(f"list gs://{self.bucket}/{prefix}"):
            # The iterator follows nextPageToken itself: every page, not just the first.
            # Only names are needed: `fields` keeps each page small on a bucket with years of runs.
            pages = bucket.client.list_blobs(bucket, prefix=prefix, fields="items(name),nextPageToken",
                                             timeout=self.timeout)
            names = [blob.name for blob in pages]
        return sorted(names)

    def list_some(self, prefix: str, limit: int, *, start: str = "") -> list[str]:
        bucket = self._handle()
        with translated(f"list gs://{self.bucket}/{prefix} (at most {limit}, from {start or 'the start'})"):
            # max_results stops the iterator after `limit` names; startOffset skips what sorts before.
            pages = bucket.client.list_blobs(bucket, prefix=prefix, max_results=limit, start_offset=start or None,
                                             fields="items(name),nextPageToken", timeout=self.timeout)
            names = [blob.name for blob in pages]
        return sorted(names)[:limit]

    def list_folders(self, prefix: str, limit: int, *, start: str = "") -> list[str]:
        bucket = self._handle()
        with translated(f"list the folders of gs://{self.bucket}/{prefix} (at most {limit}, from {start or 'the start'})"):
            # delimiter="/" answers each folder once in `prefixes`, never the objects inside it;
            # maxResults counts items and prefixes together, and a page may hold fewer than it
            # asks, so pages are followed until `limit` folders are in hand.
            pages = bucket.client.list_blobs(bucket, prefix=prefix, delimiter="/", page_size=min(limit, 1000),
                                             start_offset=start or None, fields="prefixes,nextPageToken",
                                             timeout=self.timeout)
            folders: list[str] = []
            for page in pages.pages:
                folders.extend(page.prefixes)
                if len(folders) >= limit:
                    break
        return sorted(folders)[:limit]

    def delete(self, name: str) -> bool:
        from google.api_core import exceptions as gexc

        blob = self._handle().blob(name)
        with translated(f"delete gs://{self.bucket}/{name}"):
            try:
                blob.delete(timeout=self.timeout)
            except gexc.NotFound:
                return False
            except gexc.Forbidden as exc:
                if kept_by_policy(str(exc)):
                    raise ObjectKept(f"gs://{self.bucket}/{name}: {exc}") from None
                raise
        return True



def client_at(url: str, credentials: Any, project: str) -> Any:
    """A google.cloud.storage.Client on the Cloud Storage server at `url` (local mode's own).

    The server is on this machine: a proxy named in the environment must never carry these
    requests (and looking the environment up again on every request costs more than the
    request itself under load).
    """
    from google.auth.transport.requests import AuthorizedSession
    from google.cloud import storage

    session = AuthorizedSession(credentials)
    session.trust_env = False
    return storage.Client(project=project, credentials=credentials, _http=session,
                          client_options={"api_endpoint": url})


def minted_credentials(mint: Callable[[], str], valid_s: float) -> Any:
    """google.auth credentials whose bearer token comes from `mint()`, renewed after `valid_s` seconds."""
    from google.auth import credentials

    class MintedCredentials(credentials.Credentials):
        def refresh(self, request: Any) -> None:
            self.token = mint()
            # google.auth compares expiry with a naive UTC clock.
            self.expiry = (datetime.now(UTC) + timedelta(seconds=valid_s)).replace(tzinfo=None)

    return MintedCredentials()
