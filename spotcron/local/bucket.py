"""A local Cloud Storage bucket: the local storage server, on 127.0.0.1, with its grants.

The server speaks the JSON API (uploads at /upload/storage/v1, objects at /storage/v1), so the
VM runner's curl calls and google-cloud-storage (`api_endpoint=bucket.url`) both work against
it, with a bearer token on every request. `data_dir` keeps the objects, the upload sessions and
the key the tokens are signed with, so a restarted bucket has the same objects and accepts the
tokens handed out before.
"""

from __future__ import annotations

import json
import os
import shutil
import tempfile
import time
import urllib.error
import urllib.request
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any
from urllib.parse import quote

from spotcron.local.grants import Grants
from spotcron.local.storage_server import StorageServer

TOKEN_LIFETIME_S = 3600


def _load_key(data_dir: Path) -> bytes:
    """The signing key, made once per data dir, readable by its owner only."""
    path = data_dir / "grants.key"
    try:
        return path.read_bytes()
    except FileNotFoundError:
        pass
    key = os.urandom(32)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(fd, "wb") as out:
        out.write(key)
    return key


class LocalBucket:
    """One bucket (and any others asked for) on a local storage server."""

    def __init__(self, data_dir: Path | None, bucket: str, *, host: str = "127.0.0.1", port: int = 0,
                 quiet: bool = True, also: Sequence[str] = ()):
        self.data_dir = Path(data_dir).resolve() if data_dir is not None else None
        self.bucket = bucket
        self.buckets = (bucket, *also)
        self._host, self._port = host, port
        self._server: StorageServer | None = None
        self._scratch: Path | None = None
        self.grants: Grants | None = None

    def start(self) -> LocalBucket:
        if self._server is not None:
            return self
        root = self.data_dir
        if root is None:
            root = self._scratch = Path(tempfile.mkdtemp(prefix="spotcron-bucket-"))
        root.mkdir(parents=True, exist_ok=True)
        self.grants = Grants(_load_key(root))
        server = StorageServer(root, self.grants, host=self._host, port=self._port)
        for name in self.buckets:
            server.store.create_bucket(name)
        self._server = server.start()
        return self

    def stop(self) -> None:
        if self._server is None:
            return
        server, self._server = self._server, None
        server.stop()
        if self._scratch is not None:
            shutil.rmtree(self._scratch, ignore_errors=True)
            self._scratch = None

    def __enter__(self) -> LocalBucket:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    @property
    def url(self) -> str:
        """Base URL, usable as SPOTCRON_STORAGE_URL and as a client's api_endpoint."""
        if self._server is None:
            raise RuntimeError("the bucket is not started; call start() first")
        return self._server.url

    # --- credentials ---------------------------------------------------------------------------
    def full_token(self, lifetime_s: int = TOKEN_LIFETIME_S) -> str:
        """A control-plane token (the functions in local mode, the CLI, tests)."""
        return self._started_grants().mint_full(now=time.time(), lifetime_s=lifetime_s)

    def downscoped_token(self, rules: Sequence[Mapping[str, Any]], lifetime_s: int = TOKEN_LIFETIME_S) -> str:
        """A token limited to Credential Access Boundary `rules` (what a VM gets)."""
        return self._started_grants().mint_downscoped(rules, now=time.time(), lifetime_s=lifetime_s)

    def credentials(self) -> Any:
        """google.auth credentials that mint a fresh full-access token whenever theirs runs out."""
        return _local_credentials(self.full_token)

    def client(self) -> Any:
        """A google.cloud.storage.Client on this server, with full access."""
        from spotcron.gcp.storage import client_at

        return client_at(self.url, self.credentials(), project="spotcron-local")

    def blobs(self, bucket: str | None = None) -> Any:
        """The Blobs port (GcsBlobs, as on Google Cloud) on one of this server's buckets."""
        from spotcron.gcp.storage import GcsBlobs

        return GcsBlobs(bucket or self.bucket, client=self.client())

    def _started_grants(self) -> Grants:
        if self.grants is None:
            raise RuntimeError("the bucket is not started; call start() first")
        return self.grants

    # --- small conveniences for tests and `spotcron` local commands ---------------------------
    def _request(self, url: str, *, data: bytes | None = None, method: str = "GET",
                 headers: Mapping[str, str] | None = None) -> Any:
        request = urllib.request.Request(url, data=data, method=method,
                                         headers={"Authorization": f"Bearer {self.full_token()}", **(headers or {})})
        return urllib.request.urlopen(request, timeout=10)  # noqa: S310 - our own http:// server

    def names(self, prefix: str = "") -> list[str]:
        """Every object name under `prefix`, sorted (follows every page)."""
        found: list[str] = []
        token = ""
        while True:
            url = (f"{self.url}/storage/v1/b/{quote(self.bucket, safe='')}/o?prefix={quote(prefix, safe='')}"
                   f"&pageToken={quote(token, safe='')}")
            with self._request(url) as response:
                listing = json.load(response)
            found += [item["name"] for item in listing.get("items") or []]
            token = listing.get("nextPageToken") or ""
            if not token:
                return sorted(found)

    def read(self, name: str) -> bytes | None:
        """The object's bytes, or None when it does not exist."""
        url = f"{self.url}/storage/v1/b/{quote(self.bucket, safe='')}/o/{quote(name, safe='')}?alt=media"
        try:
            with self._request(url) as response:
                return response.read()
        except urllib.error.HTTPError as exc:
            if exc.code == 404:
                return None
            raise

    def write(self, name: str, data: bytes, content_type: str = "application/octet-stream") -> None:
        url = (f"{self.url}/upload/storage/v1/b/{quote(self.bucket, safe='')}/o"
               f"?uploadType=media&name={quote(name, safe='')}")
        with self._request(url, data=data, method="POST", headers={"Content-Type": content_type}):
            pass


class LocalMinter:
    """engine/ports.Minter on the local storage server's grants: the credentials broker's rules
    (engine/broker.boundary_rules) minted as a local access-boundary token instead of by Google's STS."""

    def __init__(self, bucket: LocalBucket, lifetime_s: int = TOKEN_LIFETIME_S):
        self.bucket = bucket
        self.lifetime_s = lifetime_s

    def mint(self, rules: Sequence[Mapping[str, Any]]) -> tuple[str, int]:
        return self.bucket.downscoped_token(rules, lifetime_s=self.lifetime_s), self.lifetime_s


def _local_credentials(mint: Any) -> Any:
    """Bearer tokens from the local grants, renewed a minute before they expire."""
    from spotcron.gcp.storage import minted_credentials

    return minted_credentials(mint, TOKEN_LIFETIME_S - 60)
