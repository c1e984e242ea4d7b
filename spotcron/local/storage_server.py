"""The local storage server: the part of the Cloud Storage JSON API that spotcron and its runner use.

One server for local mode, the runner tests and the storage contract suite. It persists on
disk across restarts (`objects.ObjectStore`), serves each connection on its own thread,
enforces generation preconditions on writes and deletes, pages listings (prefix, delimiter,
startOffset/endOffset), takes media, multipart and resumable uploads, and requires a bearer
token on every request (`grants`): full access for the control plane, an access boundary for
a VM, so that a VM's credential reaching only its own objects is tested, not assumed.

    GET    /storage/v1/b/B                          bucket (full access only)
    POST   /storage/v1/b?project=P                  create a bucket (full access only)
    GET    /storage/v1/b/B/o                        list
    GET    /storage/v1/b/B/o/NAME[?alt=media]       metadata, or the bytes
    GET    /download/storage/v1/b/B/o/NAME          the bytes
    DELETE /storage/v1/b/B/o/NAME                   delete
    POST   /upload/storage/v1/b/B/o?uploadType=media|multipart|resumable
    PUT    /upload/storage/v1/b/B/o?upload_id=ID    a resumable upload's chunks (see `resumable`)
"""

from __future__ import annotations

import base64
import contextlib
import json
import logging
import re
import socket
import threading
import time
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import parse_qsl, quote, unquote, urlsplit

from spotcron.local.grants import Access, Grant, GrantError, Grants
from spotcron.local.objects import PRECONDITION_FAILED, Conditions, ObjectStore, StorageFault, not_found
from spotcron.local.resumable import ContentRange, Sessions
from spotcron.local.wire import Request, read_body, read_multipart, reply_json

log = logging.getLogger("spotcron.local.storage")

_BUCKET = r"(?P<bucket>[^/]+)"
_ROUTES: list[tuple[str, re.Pattern[str], str]] = [
    ("GET", re.compile(rf"/storage/v1/b/{_BUCKET}"), "get_bucket"),
    ("POST", re.compile(r"/storage/v1/b"), "create_bucket"),
    ("GET", re.compile(rf"/storage/v1/b/{_BUCKET}/o"), "list"),
    ("GET", re.compile(rf"/storage/v1/b/{_BUCKET}/o/(?P<name>.+)"), "get"),
    ("GET", re.compile(rf"/download/storage/v1/b/{_BUCKET}/o/(?P<name>.+)"), "download"),
    ("DELETE", re.compile(rf"/storage/v1/b/{_BUCKET}/o/(?P<name>.+)"), "delete"),
    ("POST", re.compile(rf"/upload/storage/v1/b/{_BUCKET}/o"), "upload"),
    ("PUT", re.compile(rf"/upload/storage/v1/b/{_BUCKET}/o"), "resume"),
    ("DELETE", re.compile(rf"/upload/storage/v1/b/{_BUCKET}/o"), "cancel"),
]
_PAGE = 1000


class StorageServer:
    """Threaded HTTP server on `host` serving the buckets under `root`."""

    def __init__(self, root: Path, grants: Grants, *, host: str = "127.0.0.1", port: int = 0,
                 clock: Callable[[], float] = time.time):
        self.store = ObjectStore(root)
        self.sessions = Sessions(Path(root) / "uploads")
        self.grants = grants
        self.clock = clock
        self._address = (host, port)
        self._httpd: _Server | None = None
        self._thread: threading.Thread | None = None

    def start(self) -> StorageServer:
        if self._httpd is None:
            self._httpd = _Server(self._address, _handler_for(self))
            self._thread = threading.Thread(target=self._httpd.serve_forever, kwargs={"poll_interval": 0.1},
                                            name="spotcron-storage", daemon=True)
            self._thread.start()
        return self

    def stop(self) -> None:
        if self._httpd is None:
            return
        httpd, self._httpd = self._httpd, None
        httpd.shutdown()
        httpd.close_connections()
        httpd.server_close()
        if self._thread is not None:
            self._thread.join(timeout=10)

    @property
    def url(self) -> str:
        if self._httpd is None:
            raise RuntimeError("the storage server is not started; call start() first")
        host, port = self._httpd.server_address[:2]
        return f"http://{host}:{port}"

    # --- requests ------------------------------------------------------------------------------
    def handle(self, request: Request) -> None:
        for method, pattern, action in _ROUTES:
            if method == request.method and (match := pattern.fullmatch(request.path)):
                args = {k: unquote(v) for k, v in match.groupdict().items()}
                try:
                    grant = self.grants.check(request.headers.get("Authorization"), now=self.clock())
                except GrantError as exc:
                    raise StorageFault(401, f"{exc}", "required") from None
                getattr(self, f"_{action}")(request, grant, **args)
                return
        raise StorageFault(404, f"{request.method} {request.path} is not served by the local storage server",
                           "notFound")

    def _need(self, grant: Grant, access: Access) -> None:
        if not grant.allows(access):
            what = "object" if access.object_name is not None else "bucket"
            raise StorageFault(403, f"the access-boundary token does not have {access.permission} access to the "
                                    f"Google Cloud Storage {what}. Permission '{access.permission}' denied on "
                                    f"resource (or it may not exist): {access.describe()}", "forbidden")

    def _get_bucket(self, request: Request, grant: Grant, bucket: str) -> None:
        if not grant.full:
            raise StorageFault(403, f"storage.buckets.get on {bucket}: only the control plane's token reads "
                                    "bucket metadata", "forbidden")
        if not self.store.has_bucket(bucket):
            raise not_found(bucket)
        reply_json(request, 200, {"kind": "storage#bucket", "id": bucket, "name": bucket, "location": "US",
                                  "storageClass": "STANDARD", "metageneration": "1", "projectNumber": "0"})

    def _create_bucket(self, request: Request, grant: Grant) -> None:
        if not grant.full:
            raise StorageFault(403, "storage.buckets.create: only the control plane's token creates buckets",
                               "forbidden")
        name = str(json.loads(read_body(request) or b"{}").get("name", ""))
        if not self.store.create_bucket(name):
            raise StorageFault(409, "Your previous request to create the named bucket succeeded and you already "
                                    "own it.", "conflict")
        reply_json(request, 200, {"kind": "storage#bucket", "id": name, "name": name, "location": "US"})

    def _list(self, request: Request, grant: Grant, bucket: str) -> None:
        query = request.query
        prefix = query.get("prefix", "")
        self._need(grant, Access("storage.objects.list", bucket, list_prefix=prefix))
        delimiter = query.get("delimiter") or None
        size = min(int(query.get("maxResults") or _PAGE), _PAGE)
        names = self.store.names(bucket, prefix)
        start_key = query.get("startOffset") or ""
        token = query.get("pageToken")
        if token:
            start_key = max(start_key, base64.urlsafe_b64decode(token.encode()).decode())
        end = query.get("endOffset")
        items: list[str] = []
        prefixes: list[str] = []
        next_key = None
        for name in names:
            if name < start_key:
                continue
            if end and name >= end:
                break
            if delimiter and delimiter in name[len(prefix):]:
                cut = name[len(prefix):].index(delimiter) + len(prefix) + len(delimiter)
                group = name[:cut]
                if prefixes and prefixes[-1] == group:
                    continue
                if len(items) + len(prefixes) == size:
                    next_key = group
                    break
                prefixes.append(group)
                continue
            if len(items) + len(prefixes) == size:
                next_key = name
                break
            items.append(name)
        body: dict[str, Any] = {"kind": "storage#objects"}
        only_names = re.fullmatch(r"\s*(items\(name\)|nextPageToken|prefixes)(\s*,\s*(items\(name\)|nextPageToken|"
                                  r"prefixes))*\s*", query.get("fields", "")) is not None
        if only_names:
            found = [{"name": name} for name in items]
        else:  # an object deleted since the walk is left out
            metas = (self.store.metadata(bucket, name) for name in items)
            found = [self._resource(request, meta) for meta in metas if meta is not None]
        if found:
            body["items"] = found
        if prefixes:
            body["prefixes"] = prefixes
        if next_key is not None:
            body["nextPageToken"] = base64.urlsafe_b64encode(next_key.encode()).decode()
        reply_json(request, 200, body)

    def _get(self, request: Request, grant: Grant, bucket: str, name: str) -> None:
        if request.query.get("alt") == "media":
            self._download(request, grant, bucket, name)
            return
        self._need(grant, Access("storage.objects.get", bucket, name))
        meta = self.store.metadata(bucket, name)
        self._check_read(request, bucket, name, meta)
        reply_json(request, 200, self._resource(request, meta))

    def _check_read(self, request: Request, bucket: str, name: str, meta: dict[str, Any] | None) -> None:
        wanted = request.query.get("generation")
        if meta is None or (wanted and wanted != meta["generation"]):
            raise not_found(bucket, name)
        conditions = Conditions.from_query(request.query)
        if not conditions.holds(meta):
            if conditions.if_generation_not_match is not None or conditions.if_metageneration_not_match is not None:
                raise StorageFault(304, "Not Modified", "notModified")
            raise StorageFault(412, PRECONDITION_FAILED, "conditionNotMet")

    def _download(self, request: Request, grant: Grant, bucket: str, name: str) -> None:
        self._need(grant, Access("storage.objects.get", bucket, name))
        opened = self.store.open(bucket, name)
        meta = opened[0] if opened else None
        span = re.fullmatch(r"bytes=(\d*)-(\d*)", request.headers.get("Range", "").strip())
        status, content_range = 200, ""
        try:
            self._check_read(request, bucket, name, meta)
            size = int(meta["size"])
            if span and (span.group(1) or span.group(2)) and size:  # an empty object is sent whole
                first = int(span.group(1)) if span.group(1) else max(size - int(span.group(2)), 0)
                last = int(span.group(2)) if span.group(1) and span.group(2) else size - 1
                if first >= size:
                    raise StorageFault(416, f"Range {request.headers['Range']!r} starts past the object's {size} "
                                            "bytes", "requestedRangeNotSatisfiable")
                last = min(last, size - 1)
                # Only the range is read: a ranged reader of a large log holds one piece, and so do we.
                opened[1].seek(first)
                data = opened[1].read(last - first + 1)
                status, content_range = 206, f"bytes {first}-{last}/{size}"
            else:
                data = opened[1].read()
        finally:
            if opened:
                opened[1].close()
        headers = {"Content-Type": meta["contentType"], "X-Goog-Generation": meta["generation"],
                   "X-Goog-Metageneration": meta["metageneration"], "X-Goog-Stored-Content-Length": meta["size"],
                   "X-Goog-Hash": ",".join(f"{k}={meta[v]}" for k, v in (("crc32c", "crc32c"), ("md5", "md5Hash"))
                                           if v in meta),
                   "ETag": f'"{meta["generation"]}"'}
        if content_range:
            headers["Content-Range"] = content_range
        request.send(status, data, headers)

    def _delete(self, request: Request, grant: Grant, bucket: str, name: str) -> None:
        self._need(grant, Access("storage.objects.delete", bucket, name))
        self.store.delete(bucket, name, Conditions.from_query(request.query))
        request.send(204, b"", {})

    # --- uploads -------------------------------------------------------------------------------
    def _upload(self, request: Request, grant: Grant, bucket: str) -> None:
        kind = request.query.get("uploadType", "")
        conditions = Conditions.from_query(request.query)
        if kind == "media":
            name = request.query.get("name", "")
            self._need_create(grant, bucket, name)
            spooled = self.store.spool(request.body_stream(), request.body_length())
            meta = self._commit(grant, bucket, name, spooled, request.headers.get("Content-Type", ""), conditions)
            reply_json(request, 200, self._resource(request, meta))
        elif kind == "multipart":
            metadata, media, media_type = read_multipart(request)
            name = str(metadata.get("name") or request.query.get("name", ""))
            self._need_create(grant, bucket, name)
            spooled = self.store.spool(_BytesStream(media), len(media))
            meta = self._commit(grant, bucket, name, spooled, metadata.get("contentType") or media_type, conditions)
            reply_json(request, 200, self._resource(request, meta))
        elif kind == "resumable":
            body = read_body(request)
            metadata = json.loads(body) if body.strip() else {}
            name = str(metadata.get("name") or request.query.get("name", ""))
            self._need_create(grant, bucket, name)
            if not self.store.has_bucket(bucket):
                raise not_found(bucket)
            if not conditions.holds(self.store.metadata(bucket, name)):  # fail early; checked again at the end
                raise StorageFault(412, PRECONDITION_FAILED, "conditionNotMet")
            content_type = metadata.get("contentType") or request.headers.get("X-Upload-Content-Type") or ""
            session = self.sessions.open(bucket, name, content_type, conditions)
            location = (f"{request.base_url}/upload/storage/v1/b/{quote(bucket, safe='')}/o?uploadType=resumable"
                        f"&name={quote(name, safe='')}&upload_id={session.upload_id}")
            request.send(200, b"", {"Location": location, "X-GUploader-UploadID": session.upload_id})
        else:
            raise StorageFault(400, f"uploadType={kind!r}: use media, multipart or resumable", "invalid")

    def _resume(self, request: Request, grant: Grant, bucket: str) -> None:
        session = self.sessions.get(request.query.get("upload_id", ""))
        if session.bucket != bucket:
            raise StorageFault(400, f"upload session {session.upload_id} is for bucket {session.bucket}, not {bucket}",
                               "invalid")
        self._need_create(grant, bucket, session.name)
        length = request.body_length() or 0
        span = ContentRange.parse(request.headers.get("Content-Range"), length)
        received = self.sessions.append(session, span, request.body_stream())
        if session.total is not None and received > session.total:
            raise StorageFault(400, f"the session holds {received} bytes, more than the declared {session.total}",
                               "invalid")
        if session.total is None or received < session.total:
            headers = {"Range": f"bytes=0-{received - 1}"} if received else {}
            request.send(308, b"", headers)
            return
        with self.sessions.part_stream(session) as stream:
            spooled = self.store.spool(stream, received)
        meta = self._commit(grant, bucket, session.name, spooled, session.content_type, session.conditions)
        self.sessions.close(session)
        reply_json(request, 200, self._resource(request, meta))

    def _cancel(self, request: Request, grant: Grant, bucket: str) -> None:
        session = self.sessions.get(request.query.get("upload_id", ""))
        self._need_create(grant, bucket, session.name)
        self.sessions.close(session)
        request.send(499, b"", {})

    def _need_create(self, grant: Grant, bucket: str, name: str) -> None:
        if not name:
            raise StorageFault(400, "the upload names no object: pass ?name=NAME or a \"name\" in its metadata",
                               "required")
        self._need(grant, Access("storage.objects.create", bucket, name))

    def _commit(self, grant: Grant, bucket: str, name: str, spooled: Any, content_type: str,
                conditions: Conditions) -> dict[str, Any]:
        def may_overwrite(current: dict[str, Any] | None) -> None:
            # Cloud Storage: replacing an object also needs storage.objects.delete on it.
            if current is not None and conditions.holds(current):
                self._need(grant, Access("storage.objects.delete", bucket, name))

        try:
            return self.store.commit(bucket, name, spooled, content_type, conditions, check=may_overwrite)
        except BaseException:
            spooled.discard()
            raise

    def _resource(self, request: Request, meta: dict[str, Any]) -> dict[str, Any]:
        bucket, name, generation = meta["bucket"], meta["name"], meta["generation"]
        quoted = quote(name, safe="")
        return {"kind": "storage#object", "id": f"{bucket}/{name}/{generation}",
                "selfLink": f"{request.base_url}/storage/v1/b/{bucket}/o/{quoted}",
                "mediaLink": f"{request.base_url}/download/storage/v1/b/{bucket}/o/{quoted}?generation={generation}"
                             "&alt=media",
                "storageClass": "STANDARD", "etag": generation, **meta}


class _BytesStream:
    def __init__(self, data: bytes):
        self._data, self._at = data, 0

    def read(self, size: int = -1) -> bytes:
        end = len(self._data) if size < 0 else self._at + size
        chunk, self._at = self._data[self._at:end], min(end, len(self._data))
        return chunk


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    request_queue_size = 256  # a burst of runners connects at once
    allow_reuse_address = True

    def __init__(self, *args: Any):
        super().__init__(*args)
        self._open: set[socket.socket] = set()
        self._open_lock = threading.Lock()

    def process_request_thread(self, request: Any, client_address: Any) -> None:
        with self._open_lock:
            self._open.add(request)
        try:
            super().process_request_thread(request, client_address)
        finally:
            with self._open_lock:
                self._open.discard(request)

    def close_connections(self) -> None:
        """End idle keep-alive connections, so no handler thread outlives the server."""
        with self._open_lock:
            for sock in self._open:
                with contextlib.suppress(OSError):
                    sock.shutdown(socket.SHUT_RDWR)


def _handler_for(server: StorageServer) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"
        timeout = 120  # an idle keep-alive connection ends after this
        # Headers and body go out in separate writes; with Nagle's algorithm on, each reply on a
        # keep-alive connection waits for the client's delayed ACK (~40 ms): a runner's batch of
        # uploads on one connection took 45 ms a file instead of 3.
        disable_nagle_algorithm = True
        server_version = "spotcron-storage"

        def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - the base's name
            log.debug("%s " + format, self.address_string(), *args)

        def _serve(self) -> None:
            split = urlsplit(self.path)
            request = Request(self, self.command, split.path, dict(parse_qsl(split.query, keep_blank_values=True)))
            try:
                server.handle(request)
            except StorageFault as fault:
                request.fail(fault.status, str(fault), fault.reason)
            except (ValueError, KeyError) as exc:
                request.fail(400, f"bad request: {exc}", "invalid")
            except Exception as exc:  # noqa: BLE001 - answer 500 rather than drop the connection
                log.exception("storage request %s %s failed", self.command, self.path)
                request.fail(500, f"{type(exc).__name__}: {exc}", "backendError")

        do_GET = do_POST = do_PUT = do_DELETE = _serve  # noqa: N815 - http.server's naming

    return Handler
