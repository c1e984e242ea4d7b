"""A local Cloud Storage bucket: gcp-storage-emulator running in-process on 127.0.0.1.

The emulator speaks the JSON API (uploads at /upload/storage/v1, objects at /storage/v1), so the
VM runner's curl calls and google-cloud-storage (`STORAGE_EMULATOR_HOST=bucket.url`) both work
against it. It ignores generation preconditions and pagination; see DESIGN.md section 5.
"""

from __future__ import annotations

import json
import logging
import socket
import threading
import urllib.error
import urllib.request
from pathlib import Path
from urllib.parse import quote


def _store_media_uploads_verbatim() -> None:
    """Make the emulator store `uploadType=media` bodies as bytes, as Cloud Storage does.

    gcp-storage-emulator parses any body sent as application/json into a dict (then fails to
    checksum it) and turns an empty body into None (then fails to measure it), so a manifest or
    an empty log could not be uploaded. Its other upload kinds need that parsing, so only media
    uploads are changed. Patched once, in the emulator's module, which only LocalBucket uses.
    """
    from gcp_storage_emulator import server

    original = server._read_data
    if getattr(original, "_spotcron_media_verbatim", False):
        return

    def read_data(request_handler, query):
        if query.get("uploadType") == ["media"]:
            return server._decode_raw_data(server._read_raw_data(request_handler), request_handler) or b""
        return original(request_handler, query)

    read_data._spotcron_media_verbatim = True  # type: ignore[attr-defined]
    server._read_data = read_data


def _listen_with_a_deep_backlog() -> None:
    """Let the emulator queue more than 5 connections.

    It serves one request at a time from a plain http.server.HTTPServer, whose listen backlog
    is 5: with dozens of runners uploading at once, connections were refused and start_job
    deliveries gave up. The emulator only uses `server.HTTPServer` after import, so it gets a
    view of http.server whose HTTPServer queues 128.
    """
    import http.server
    import types

    from gcp_storage_emulator import server

    if getattr(server.server, "_spotcron_deep_backlog", False):
        return

    class DeepBacklogHTTPServer(http.server.HTTPServer):
        request_queue_size = 128

    view = types.SimpleNamespace(**vars(http.server))
    view.HTTPServer = DeepBacklogHTTPServer
    view._spotcron_deep_backlog = True
    server.server = view


def _free_port(host: str) -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind((host, 0))
        return sock.getsockname()[1]


class LocalBucket:
    """One bucket served by gcp-storage-emulator; objects persist in `data_dir` when given."""

    def __init__(self, data_dir: Path | None, bucket: str, *, host: str = "127.0.0.1", port: int = 0,
                 quiet: bool = True):
        self.data_dir = Path(data_dir).resolve() if data_dir is not None else None
        self.bucket = bucket
        self._host = host
        self._port = port
        self._quiet = quiet
        self._server = None
        self._address: tuple[str, int] | None = None

    def start(self) -> LocalBucket:
        if self._server is not None:
            return self
        if self._quiet:
            logging.getLogger("gcp_storage_emulator").setLevel(logging.WARNING)
        if self.data_dir is not None:
            self.data_dir.mkdir(parents=True, exist_ok=True)
        server = self._serve(self._port)
        address = self._bound_address(server)
        if address is None:
            # Port 0 works, but only the emulator's private HTTPServer knows the port it got;
            # if that attribute ever moves, pick a free port ourselves and start again.
            server.stop()
            port = self._port or _free_port(self._host)
            server = self._serve(port)
            address = (self._host, port)
        self._server, self._address = server, address
        return self

    def _serve(self, port: int):
        # Imported here: the emulator is a local-mode dependency only.
        from gcp_storage_emulator.server import create_server

        _store_media_uploads_verbatim()
        _listen_with_a_deep_backlog()
        server = create_server(self._host, port, in_memory=self.data_dir is None,
                               default_bucket=self.bucket,
                               data_dir=str(self.data_dir) if self.data_dir else None)
        server.start()
        return server

    def _bound_address(self, server) -> tuple[str, int] | None:
        httpd = getattr(getattr(server, "_api", None), "_httpd", None)
        if httpd is None:
            return None if self._port == 0 else (self._host, self._port)
        host, port = httpd.server_address[:2]
        return host, port

    def stop(self) -> None:
        if self._server is None:
            return
        server, self._server = self._server, None
        server.stop()
        thread = getattr(server, "_api", None)
        if isinstance(thread, threading.Thread):
            threading.Thread.join(thread, timeout=5)  # its own join() only stops the server

    def __enter__(self) -> LocalBucket:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    @property
    def url(self) -> str:
        """Base URL, usable as SPOTCRON_STORAGE_URL and as STORAGE_EMULATOR_HOST."""
        if self._address is None:
            raise RuntimeError("the bucket is not started; call start() first")
        host, port = self._address
        return f"http://{host}:{port}"

    # --- small conveniences for tests and `spotcron` local commands ---------------------------

    def names(self, prefix: str = "") -> list[str]:
        """Every object name under `prefix`, sorted."""
        url = f"{self.url}/storage/v1/b/{quote(self.bucket, safe='')}/o?prefix={quote(prefix, safe='')}"
        with urllib.request.urlopen(url, timeout=10) as response:
            listing = json.load(response)
        return sorted(item["name"] for item in listing.get("items") or [])

    def read(self, name: str) -> bytes | None:
        """The object's bytes, or None when it does not exist."""
        url = f"{self.url}/storage/v1/b/{quote(self.bucket, safe='')}/o/{quote(name, safe='')}?alt=media"
        try:
            with urllib.request.urlopen(url, timeout=10) as response:
                return response.read()
        except urllib.error.HTTPError as exc:
            if exc.code == 404:
                return None
            raise

    def write(self, name: str, data: bytes, content_type: str = "application/octet-stream") -> None:
        url = (f"{self.url}/upload/storage/v1/b/{quote(self.bucket, safe='')}/o"
               f"?uploadType=media&name={quote(name, safe='')}")
        request = urllib.request.Request(url, data=data, method="POST", headers={"Content-Type": content_type})
        with urllib.request.urlopen(request, timeout=10):
            pass
