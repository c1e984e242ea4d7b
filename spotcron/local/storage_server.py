"""The local storage server: the Cloud Storage JSON API, as documented, for what it serves.

One server for local mode, the runner tests and the storage contract suite. It persists on
disk across restarts (`objects.ObjectStore`), serves each connection on its own thread,
enforces generation preconditions on writes, patches and deletes, pages listings from an index
(`listing`), takes media, multipart and resumable uploads (checking any checksum the client
sends), streams downloads from disk, and requires a bearer token on every request (`grants`):
full access for the control plane, an access boundary for a VM, so that a VM's credential
reaching only its own objects is tested, not assumed.

    GET    /storage/v1/b?project=P                  list buckets            (full access only)
    GET    /storage/v1/b/B                          a bucket                (full access only)
    POST   /storage/v1/b?project=P                  create a bucket         (full access only)
    GET    /storage/v1/b/B/o                        list (prefix, delimiter, matchGlob, offsets)
    GET    /storage/v1/b/B/o/NAME[?alt=media]       metadata, or the bytes
    GET    /download/storage/v1/b/B/o/NAME          the bytes
    PATCH  /storage/v1/b/B/o/NAME                   change metadata
    DELETE /storage/v1/b/B/o/NAME                   delete
    POST   /storage/v1/b/B/o/NAME/compose           concatenate up to 32 objects
    POST   /storage/v1/b/B/o/NAME/copyTo/b/B2/o/N2  copy (rewriteTo: the same, in one call)
    POST   /upload/storage/v1/b/B/o?uploadType=media|multipart|resumable
    PUT    /upload/storage/v1/b/B/o?upload_id=ID    a resumable upload's chunks (see `resumable`)

Any other request answers 501 naming what it asked for.
"""

from __future__ import annotations

import base64
import contextlib
import json
import logging
import re
import socket
import sys
import threading
import time
import zlib
from collections.abc import Callable, Mapping
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import parse_qsl, quote, unquote, urlsplit

from spotcron.local.grants import Access, Grant, GrantError, Grants
from spotcron.local.listing import list_page
from spotcron.local.objects import (
    PRECONDITION_FAILED,
    WRITABLE,
    Conditions,
    ObjectStore,
    Spooled,
    StorageFault,
    check_name,
    not_found,
)
from spotcron.local.resumable import ContentRange, Sessions
from spotcron.local.wire import Request, read_body, read_multipart, reply_json

log = logging.getLogger("spotcron.local.storage")

_BUCKET = r"(?P<bucket>[^/]+)"
_OBJECT = rf"/storage/v1/b/{_BUCKET}/o/(?P<name>.+)"
_ROUTES: list[tuple[str, re.Pattern[str], str]] = [
    ("GET", re.compile(r"/storage/v1/b"), "list_buckets"),
    ("GET", re.compile(rf"/storage/v1/b/{_BUCKET}"), "get_bucket"),
    ("POST", re.compile(r"/storage/v1/b"), "create_bucket"),
    ("GET", re.compile(rf"/storage/v1/b/{_BUCKET}/o"), "list"),
    ("POST", re.compile(rf"{_OBJECT}/compose"), "compose"),
    ("POST", re.compile(rf"{_OBJECT}/(?P<verb>copyTo|rewriteTo)/b/(?P<to_bucket>[^/]+)/o/(?P<to_name>.+)"), "copy"),
    ("GET", re.compile(_OBJECT), "get"),
    ("GET", re.compile(rf"/download/storage/v1/b/{_BUCKET}/o/(?P<name>.+)"), "download"),
    ("PATCH", re.compile(_OBJECT), "patch"),
    ("DELETE", re.compile(_OBJECT), "delete"),
    ("POST", re.compile(rf"/upload/storage/v1/b/{_BUCKET}/o"), "upload"),
    ("PUT", re.compile(rf"/upload/storage/v1/b/{_BUCKET}/o"), "resume"),
    ("DELETE", re.compile(rf"/upload/storage/v1/b/{_BUCKET}/o"), "cancel"),
]
_PAGE = 1000
_MAX_COMPOSE = 32  # sources per compose request, as Cloud Storage allows
_SEND_BLOCK = 1 << 20


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
        raise StorageFault(501, f"{request.method} {request.path} is not served by the local storage server: it "
                                "serves objects (get, list, insert, patch, delete, compose, copy, rewrite) and "
                                "buckets (get, list, insert); see spotcron/local/storage_server.py", "notImplemented")

    def _need(self, grant: Grant, access: Access) -> None:
        if not grant.allows(access):
            what = "object" if access.object_name is not None else "bucket"
            raise StorageFault(403, f"the access-boundary token does not have {access.permission} access to the "
                                    f"Google Cloud Storage {what}. Permission '{access.permission}' denied on "
                                    f"resource (or it may not exist): {access.describe()}", "forbidden")

    # --- buckets -------------------------------------------------------------------------------
    def _bucket_resource(self, request: Request, bucket: str) -> dict[str, Any]:
        made = self.store.bucket_info(bucket)["timeCreated"]
        return {"kind": "storage#bucket", "id": bucket, "name": bucket, "selfLink": f"{request.base_url}/storage/v1/b/"
                f"{bucket}", "projectNumber": "0", "metageneration": "1", "location": "US", "locationType":
                "multi-region", "storageClass": "STANDARD", "etag": "CAE=", "timeCreated": made, "updated": made,
                "iamConfiguration": {"uniformBucketLevelAccess": {"enabled": True}}}

    def _list_buckets(self, request: Request, grant: Grant) -> None:
        if not grant.full:
            raise StorageFault(403, "storage.buckets.list: only the control plane's token lists buckets", "forbidden")
        prefix = request.query.get("prefix", "")
        items = [self._bucket_resource(request, b) for b in self.store.buckets() if b.startswith(prefix)]
        reply_json(request, 200, {"kind": "storage#buckets", **({"items": items} if items else {})})

    def _get_bucket(self, request: Request, grant: Grant, bucket: str) -> None:
        if not grant.full:
            raise StorageFault(403, f"storage.buckets.get on {bucket}: only the control plane's token reads "
                                    "bucket metadata", "forbidden")
        if not self.store.has_bucket(bucket):
            raise not_found(bucket)
        reply_json(request, 200, self._bucket_resource(request, bucket))

    def _create_bucket(self, request: Request, grant: Grant) -> None:
        if not grant.full:
            raise StorageFault(403, "storage.buckets.create: only the control plane's token creates buckets",
                               "forbidden")
        name = str(json.loads(read_body(request) or b"{}").get("name", ""))
        if not self.store.create_bucket(name):
            raise StorageFault(409, "Your previous request to create the named bucket succeeded and you already "
                                    "own it.", "conflict")
        reply_json(request, 200, self._bucket_resource(request, name))

    # --- listings and reads ------------------------------------------------------------------------
    def _list(self, request: Request, grant: Grant, bucket: str) -> None:
        query = request.query
        prefix = query.get("prefix", "")
        self._need(grant, Access("storage.objects.list", bucket, list_prefix=prefix))
        size = min(int(query.get("maxResults") or _PAGE), _PAGE)
        start = query.get("startOffset") or ""
        if token := query.get("pageToken"):
            start = max(start, base64.urlsafe_b64decode(token.encode()).decode())
        try:
            page = list_page(self.store.index(bucket), prefix=prefix, delimiter=query.get("delimiter") or None,
                             start=start, end=query.get("endOffset") or None, size=size,
                             glob=query.get("matchGlob") or None,
                             include_trailing_delimiter=query.get("includeTrailingDelimiter") == "true")
        except ValueError as exc:
            raise StorageFault(400, str(exc), "invalid") from None
        # The index may name an object deleted since (or lost in a crash): only what exists is listed.
        metas = (self.store.metadata(bucket, name) for name in page.names)
        found = [self._resource(request, meta) for meta in metas if meta is not None]
        body: dict[str, Any] = {"kind": "storage#objects"}
        if found:
            body["items"] = found
        if page.prefixes:
            body["prefixes"] = page.prefixes
        if page.next_key is not None:
            body["nextPageToken"] = base64.urlsafe_b64encode(page.next_key.encode()).decode()
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
        etag = _etag(meta)
        if_match, if_none_match = request.headers.get("If-Match"), request.headers.get("If-None-Match")
        if if_match is not None and not _etag_listed(if_match, etag):
            raise StorageFault(412, PRECONDITION_FAILED, "conditionNotMet")
        if if_none_match is not None and _etag_listed(if_none_match, etag):
            raise StorageFault(304, "Not Modified", "notModified")
        if not conditions.holds(meta):
            if conditions.if_generation_not_match is not None or conditions.if_metageneration_not_match is not None:
                raise StorageFault(304, "Not Modified", "notModified")
            raise StorageFault(412, PRECONDITION_FAILED, "conditionNotMet")

    def _download(self, request: Request, grant: Grant, bucket: str, name: str) -> None:
        self._need(grant, Access("storage.objects.get", bucket, name))
        opened = self.store.open(bucket, name)
        if opened is None:
            raise not_found(bucket, name)
        meta, data = opened
        with data:
            self._check_read(request, bucket, name, meta)
            size = int(meta["size"])
            encoding = meta.get("contentEncoding", "")
            headers = {"Content-Type": meta["contentType"], "X-Goog-Generation": meta["generation"],
                       "X-Goog-Metageneration": meta["metageneration"], "X-Goog-Stored-Content-Length": meta["size"],
                       "X-Goog-Stored-Content-Encoding": encoding or "identity",
                       "X-Goog-Hash": ",".join(f"{k}={meta[v]}" for k, v in (("crc32c", "crc32c"), ("md5", "md5Hash"))
                                               if v in meta),
                       "ETag": f'"{_etag(meta)}"', "Accept-Ranges": "bytes"}
            for field, header in (("cacheControl", "Cache-Control"), ("contentDisposition", "Content-Disposition"),
                                  ("contentLanguage", "Content-Language")):
                if field in meta:
                    headers[header] = meta[field]
            if encoding == "gzip" and not _accepts_gzip(request.headers.get("Accept-Encoding", "")):
                # Decompressive transcoding: the reader gets the plain bytes, whole (Range is ignored,
                # as Cloud Storage ignores it here), with no length known in advance.
                request.send_chunks(200, _gunzip(data), headers)
                return
            if encoding:
                headers["Content-Encoding"] = encoding
            span = _byte_range(request.headers.get("Range"), size)
            if span is None:
                request.send_file(200, data, 0, size, headers)
                return
            first, last = span
            headers["Content-Range"] = f"bytes {first}-{last}/{size}"
            # Only the range is read: a ranged reader of a large log holds one piece, and so do we.
            request.send_file(206, data, first, last - first + 1, headers)

    def _delete(self, request: Request, grant: Grant, bucket: str, name: str) -> None:
        self._need(grant, Access("storage.objects.delete", bucket, name))
        self.store.delete(bucket, name, Conditions.from_query(request.query), request.query.get("generation") or None)
        request.send(204, b"", {})

    def _patch(self, request: Request, grant: Grant, bucket: str, name: str) -> None:
        self._need(grant, Access("storage.objects.update", bucket, name))
        changes = _json_body(request)
        meta = self.store.patch(bucket, name, changes, Conditions.from_query(request.query),
                                request.query.get("generation") or None)
        reply_json(request, 200, self._resource(request, meta))

    # --- compose, copy, rewrite ----------------------------------------------------------------------
    def _compose(self, request: Request, grant: Grant, bucket: str, name: str) -> None:
        body = _json_body(request)
        sources = body.get("sourceObjects") or []
        if not 1 <= len(sources) <= _MAX_COMPOSE:
            raise StorageFault(400, f"compose takes 1 to {_MAX_COMPOSE} sourceObjects; got {len(sources)}", "invalid")
        self._need_create(grant, bucket, name)
        spool_path = self.store.root / "tmp" / f"compose-{time.time_ns()}-{threading.get_ident()}"
        crc = _crc32c_hasher()
        size, components = 0, 0
        try:
            with open(spool_path, "wb") as out:
                for source in sources:
                    source_name = str(source.get("name") or "")
                    self._need(grant, Access("storage.objects.get", bucket, source_name))
                    opened = self.store.open(bucket, source_name)
                    if opened is None:
                        raise not_found(bucket, source_name)
                    meta, data = opened
                    with data:
                        wanted = source.get("generation")
                        match = (source.get("objectPreconditions") or {}).get("ifGenerationMatch")
                        if wanted is not None and str(wanted) != meta["generation"]:
                            raise not_found(bucket, source_name)
                        if match is not None and str(match) != meta["generation"]:
                            raise StorageFault(412, PRECONDITION_FAILED, "conditionNotMet")
                        while chunk := data.read(_SEND_BLOCK):
                            out.write(chunk)
                            if crc is not None:
                                crc.update(chunk)
                            size += len(chunk)
                    components += int(meta.get("componentCount", 1))
        except BaseException:
            spool_path.unlink(missing_ok=True)
            raise
        spooled = Spooled(spool_path, size, None, crc.digest() if crc is not None else None)
        fields = {k: v for k, v in (body.get("destination") or {}).items() if k in WRITABLE}
        meta = self._commit(grant, bucket, name, spooled, fields, Conditions.from_query(request.query),
                            extra={"componentCount": components})
        reply_json(request, 200, self._resource(request, meta))

    def _copy(self, request: Request, grant: Grant, bucket: str, name: str, verb: str, to_bucket: str,
              to_name: str) -> None:
        self._need(grant, Access("storage.objects.get", bucket, name))
        self._need_create(grant, to_bucket, to_name)
        if not self.store.has_bucket(to_bucket):
            raise not_found(to_bucket)
        query = request.query
        source = self.store.metadata(bucket, name)
        wanted = query.get("sourceGeneration")
        if source is None or (wanted and wanted != source["generation"]):
            raise not_found(bucket, name)
        source_conditions = Conditions.from_query({"if" + key.removeprefix("ifSource"): value
                                                   for key, value in query.items() if key.startswith("ifSource")})
        if not source_conditions.holds(source):
            raise StorageFault(412, PRECONDITION_FAILED, "conditionNotMet")
        given = {k: v for k, v in _json_body(request).items() if k in WRITABLE}
        # With no destination metadata the copy keeps the source's; with some, only what is given.
        fields = given or {k: source[k] for k in WRITABLE if k in source}
        spooled = self.store.linked(bucket, source)
        extra = {"componentCount": source["componentCount"]} if "componentCount" in source else None
        meta = self._commit(grant, to_bucket, to_name, spooled, fields, Conditions.from_query(query), extra=extra)
        resource = self._resource(request, meta)
        if verb == "rewriteTo":
            resource = {"kind": "storage#rewriteResponse", "totalBytesRewritten": meta["size"],
                        "objectSize": meta["size"], "done": True, "resource": resource}
        reply_json(request, 200, resource)

    # --- uploads -------------------------------------------------------------------------------
    def _upload(self, request: Request, grant: Grant, bucket: str) -> None:
        kind = request.query.get("uploadType", "")
        conditions = Conditions.from_query(request.query)
        if kind == "media":
            name = request.query.get("name", "")
            self._need_create(grant, bucket, name)
            spooled = self.store.spool(request.body_stream(), request.body_length())
            _check_hashes(spooled, _header_hashes(request.headers.get("X-Goog-Hash")))
            fields = {"contentType": request.headers.get("Content-Type", ""),
                      "contentEncoding": request.query.get("contentEncoding")}
            meta = self._commit(grant, bucket, name, spooled, fields, conditions)
            reply_json(request, 200, self._resource(request, meta))
        elif kind == "multipart":
            metadata, media, media_type = read_multipart(request)
            name = str(metadata.get("name") or request.query.get("name", ""))
            self._need_create(grant, bucket, name)
            spooled = self.store.spool(_BytesStream(media), len(media))
            _check_hashes(spooled, {"md5": metadata.get("md5Hash"), "crc32c": metadata.get("crc32c")},
                          _header_hashes(request.headers.get("X-Goog-Hash")))
            fields = {**metadata, "contentType": metadata.get("contentType") or media_type}
            meta = self._commit(grant, bucket, name, spooled, fields, conditions)
            reply_json(request, 200, self._resource(request, meta))
        elif kind == "resumable":
            metadata = _json_body(request)
            name = str(metadata.get("name") or request.query.get("name", ""))
            self._need_create(grant, bucket, name)
            if not self.store.has_bucket(bucket):
                raise not_found(bucket)
            if not conditions.holds(self.store.metadata(bucket, name)):  # fail early; checked again at the end
                raise StorageFault(412, PRECONDITION_FAILED, "conditionNotMet")
            content_type = metadata.get("contentType") or request.headers.get("X-Upload-Content-Type") or ""
            fields = {k: v for k, v in metadata.items() if k in WRITABLE or k in ("md5Hash", "crc32c")}
            session = self.sessions.open(bucket, name, content_type, conditions, fields)
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
        fields = session.fields
        try:
            _check_hashes(spooled, {"md5": fields.get("md5Hash"), "crc32c": fields.get("crc32c")},
                          _header_hashes(request.headers.get("X-Goog-Hash")))
        except StorageFault:
            self.sessions.close(session)  # Cloud Storage ends a session whose bytes fail their checksum
            raise
        meta = self._commit(grant, bucket, session.name, spooled,
                            {**fields, "contentType": session.content_type}, session.conditions)
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
        check_name(name)
        self._need(grant, Access("storage.objects.create", bucket, name))

    def _commit(self, grant: Grant, bucket: str, name: str, spooled: Spooled, fields: Mapping[str, Any],
                conditions: Conditions, extra: Mapping[str, Any] | None = None) -> dict[str, Any]:
        def may_overwrite(current: dict[str, Any] | None) -> None:
            # Cloud Storage: replacing an object also needs storage.objects.delete on it.
            if current is not None and conditions.holds(current):
                self._need(grant, Access("storage.objects.delete", bucket, name))

        try:
            return self.store.commit(bucket, name, spooled, fields, conditions, check=may_overwrite, extra=extra)
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
                "storageClass": "STANDARD", "etag": _etag(meta), **meta}


def _etag(meta: Mapping[str, Any]) -> str:
    # Changes with the bytes (generation) and with the metadata (metageneration), as Google's does.
    return f"{meta['generation']}.{meta['metageneration']}"


def _etag_listed(header: str, etag: str) -> bool:
    tags = [tag.strip().removeprefix("W/").strip('"') for tag in header.split(",")]
    return "*" in tags or etag in tags


def _accepts_gzip(header: str) -> bool:
    for part in header.split(","):
        coding, _, params = part.strip().partition(";")
        if coding.strip().lower() in ("gzip", "*"):
            return params.replace(" ", "") not in ("q=0", "q=0.0")
    return False


class BodyCut(Exception):
    """The body could not be sent whole after its headers went out (a stored gzip that does not
    decode): the connection is closed without the body's end, so the reader sees an incomplete
    body, never a shorter one that looks complete."""


def _gunzip(data: Any) -> Any:
    inflate = zlib.decompressobj(16 + zlib.MAX_WBITS)
    try:
        while chunk := data.read(_SEND_BLOCK):
            if out := inflate.decompress(chunk):
                yield out
        if tail := inflate.flush():
            yield tail
    except zlib.error as exc:
        raise BodyCut(f"the stored gzip does not decode ({exc})") from None
    if not inflate.eof:
        raise BodyCut("the stored gzip ends before its end")


def _byte_range(header: str | None, size: int) -> tuple[int, int] | None:
    """(first, last) of a `Range: bytes=…` header, None for the whole object; 416 if it cannot be
    met (an empty object meets no range, as Cloud Storage answers)."""
    span = re.fullmatch(r"bytes=(\d*)-(\d*)", (header or "").strip())
    if not span or not (span.group(1) or span.group(2)):
        return None
    if span.group(1):
        first = int(span.group(1))
        last = min(int(span.group(2)), size - 1) if span.group(2) else size - 1
    else:  # the last N bytes
        first, last = max(size - int(span.group(2)), 0), size - 1
    if first >= size or last < first:
        raise StorageFault(416, f"Range {header!r} does not fit the object's {size} bytes",
                           "requestedRangeNotSatisfiable")
    return first, last


def _json_body(request: Request) -> dict[str, Any]:
    body = read_body(request)
    if not body.strip():
        return {}
    try:
        parsed = json.loads(body)
    except json.JSONDecodeError as exc:
        raise StorageFault(400, f"the request body is not JSON: {exc}", "parseError") from None
    if not isinstance(parsed, dict):
        raise StorageFault(400, "the request body is not a JSON object", "invalid")
    return parsed


def _header_hashes(header: str | None) -> dict[str, str]:
    """`X-Goog-Hash: crc32c=…,md5=…` as {"crc32c": …, "md5": …}."""
    hashes: dict[str, str] = {}
    for part in (header or "").split(","):
        kind, sep, value = part.strip().partition("=")
        if sep:
            hashes[kind.strip().lower()] = value.strip()
    return hashes


def _check_hashes(spooled: Spooled, *given: Mapping[str, str | None]) -> None:
    """Refuse an upload whose bytes do not match a checksum the client sent (400, as Cloud Storage)."""
    computed = {"md5": base64.b64encode(spooled.md5).decode() if spooled.md5 is not None else None,
                "crc32c": base64.b64encode(spooled.crc32c).decode() if spooled.crc32c is not None else None}
    label = {"md5": "MD5 hash", "crc32c": "CRC32C"}
    for hashes in given:
        for kind in ("md5", "crc32c"):
            sent, actual = hashes.get(kind), computed[kind]
            if sent and actual is not None and sent != actual:
                spooled.discard()
                raise StorageFault(400, f"Provided {label[kind]} \"{sent}\" doesn't match calculated {label[kind]} "
                                        f"\"{actual}\".", "invalid")


def _crc32c_hasher() -> Any:
    try:
        import google_crc32c
    except ImportError:  # the checksum is optional: clients fall back to md5Hash
        return None
    return google_crc32c.Checksum()


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

    def handle_error(self, request: Any, client_address: Any) -> None:
        """A client that hangs up while its request is read or answered is routine: no traceback."""
        if isinstance(sys.exc_info()[1], ConnectionError):
            log.debug("storage connection from %s closed by the client", client_address)
            return
        super().handle_error(request, client_address)

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
            except ConnectionError as gone:  # the client hung up mid-reply (a read cut short, a process
                # that ended): nobody is left to answer, and that is no fault of the server's
                log.debug("storage request %s %s: the client closed the connection (%s)", self.command,
                          self.path, gone)
                self.close_connection = True
            except BodyCut as cut:  # headers are out: another reply would be read as body
                log.warning("storage request %s %s: %s; connection closed", self.command, self.path, cut)
                self.close_connection = True
            except StorageFault as fault:
                request.fail(fault.status, str(fault), fault.reason)
            except (ValueError, KeyError) as exc:
                request.fail(400, f"bad request: {exc}", "invalid")
            except Exception as exc:  # noqa: BLE001 - answer 500 rather than drop the connection
                log.exception("storage request %s %s failed", self.command, self.path)
                request.fail(500, f"{type(exc).__name__}: {exc}", "backendError")

        do_GET = do_POST = do_PUT = do_DELETE = do_PATCH = do_HEAD = _serve  # noqa: N815 - http.server's naming

    return Handler
