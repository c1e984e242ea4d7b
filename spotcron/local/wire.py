"""HTTP plumbing for the local storage server: request bodies (sized or chunked), multipart
bodies, JSON replies and Google's error shape.

Connections are kept alive (HTTP/1.1), so a reply sent before the body was read closes the
connection: the unread bytes would otherwise be taken for the next request.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from http.server import BaseHTTPRequestHandler
from typing import Any, BinaryIO

from spotcron.local.objects import StorageFault


class _Chunked:
    """A `Transfer-Encoding: chunked` body as a plain stream (curl sends one for `-T -`)."""

    def __init__(self, raw: BinaryIO):
        self._raw, self._left, self._done = raw, 0, False

    def read(self, size: int = -1) -> bytes:
        out = bytearray()
        while not self._done and (size < 0 or len(out) < size):
            if self._left == 0:
                line = self._raw.readline(1024).split(b";", 1)[0].strip()
                self._left = int(line or b"0", 16)
                if self._left == 0:
                    while self._raw.readline(1024) not in (b"\r\n", b"\n", b""):
                        pass  # trailers
                    self._done = True
                    break
            want = self._left if size < 0 else min(self._left, size - len(out))
            chunk = self._raw.read(want)
            if not chunk:
                raise StorageFault(400, "the chunked request body ended early", "invalid")
            out += chunk
            self._left -= len(chunk)
            if self._left == 0:
                self._raw.readline(8)  # the CRLF after each chunk
        return bytes(out)


class Request:
    def __init__(self, handler: BaseHTTPRequestHandler, method: str, path: str, query: dict[str, str]):
        self.handler = handler
        self.method = method
        self.path = path
        self.query = query
        self.headers = handler.headers
        self._body_taken = False

    @property
    def base_url(self) -> str:
        if not (host := self.headers.get("Host")):
            address = self.handler.server.server_address
            host = f"{address[0]}:{address[1]}"
        return f"http://{host}"

    def body_length(self) -> int | None:
        if "chunked" in (self.headers.get("Transfer-Encoding") or "").lower():
            return None
        return int(self.headers.get("Content-Length") or 0)

    def body_stream(self) -> BinaryIO:
        self._body_taken = True
        if self.body_length() is None:
            return _Chunked(self.handler.rfile)  # type: ignore[return-value]
        return self.handler.rfile

    def send(self, status: int, body: bytes, headers: dict[str, str]) -> None:
        handler = self.handler
        handler.send_response(status)
        unread = not self._body_taken and (self.body_length() is None or self.body_length() > 0)
        for key, value in headers.items():
            handler.send_header(key, value)
        if status not in (204, 304):
            handler.send_header("Content-Length", str(len(body)))
        if unread:
            handler.send_header("Connection", "close")
            handler.close_connection = True
        handler.end_headers()
        if body and handler.command != "HEAD":
            handler.wfile.write(body)

    def _head(self, status: int, headers: dict[str, str], length: int | None) -> bool:
        """Send the status line and headers; True when a body follows."""
        handler = self.handler
        handler.send_response(status)
        unread = not self._body_taken and (self.body_length() is None or (self.body_length() or 0) > 0)
        for key, value in headers.items():
            handler.send_header(key, value)
        if length is None:
            handler.send_header("Transfer-Encoding", "chunked")
        else:
            handler.send_header("Content-Length", str(length))
        if unread:
            handler.send_header("Connection", "close")
            handler.close_connection = True
        handler.end_headers()
        return handler.command != "HEAD"

    def send_file(self, status: int, data: BinaryIO, offset: int, count: int, headers: dict[str, str]) -> None:
        """Send `count` bytes of an open file from `offset`, straight from the disk to the socket
        (sendfile): a download holds no more of the object in memory than the kernel's buffers."""
        if not self._head(status, headers, count) or count == 0:
            return
        self.handler.wfile.flush()
        self.handler.connection.sendfile(data, offset, count)

    def send_chunks(self, status: int, chunks: Iterable[bytes], headers: dict[str, str]) -> None:
        """Send a body of unknown length, piece by piece (chunked transfer encoding)."""
        if not self._head(status, headers, None):
            return
        out = self.handler.wfile
        for chunk in chunks:
            if chunk:
                out.write(b"%x\r\n%b\r\n" % (len(chunk), chunk))
        out.write(b"0\r\n\r\n")

    def fail(self, status: int, message: str, reason: str) -> None:
        if status == 304:
            self.send(304, b"", {})
            return
        reply_json(self, status, {"error": {"code": status, "message": message,
                                            "errors": [{"message": message, "domain": "global", "reason": reason}]}})


def read_body(request: Request, limit: int = 64 << 20) -> bytes:
    """The whole body, refused (413) before it is read when it is over `limit` bytes: a declared
    length is checked first, a chunked body is read no further than the limit."""
    length = request.body_length()
    too_big = StorageFault(413, f"the request body is over {limit} bytes: send it as a resumable upload "
                                "(uploadType=resumable)", "uploadTooLarge")
    if length is not None and length > limit:
        raise too_big  # unread: the reply closes the connection
    stream = request.body_stream()
    data = stream.read(length) if length is not None else stream.read(limit + 1)
    if length is not None and len(data) != length:
        raise StorageFault(400, f"the request body ended {length - len(data)} bytes short", "invalid")
    if len(data) > limit:
        request.handler.close_connection = True  # the rest of a chunked body is never read
        raise too_big
    return data


def read_multipart(request: Request) -> tuple[dict[str, Any], bytes, str]:
    """(metadata, media bytes, media part's Content-Type) of a multipart/related upload."""
    content_type = request.headers.get("Content-Type", "")
    if "boundary=" not in content_type:
        raise StorageFault(400, f"Content-Type {content_type!r} has no boundary: a multipart upload is "
                                "multipart/related; boundary=...", "invalid")
    boundary = content_type.split("boundary=", 1)[1].split(";")[0].strip().strip('"').encode()
    body = read_body(request)
    parts = body.split(b"--" + boundary)
    # [preamble, part 1, part 2, "--" epilogue]
    if len(parts) < 4 or not parts[-1].startswith(b"--"):
        raise StorageFault(400, f"a multipart upload has a metadata part and a media part; got {len(parts) - 2}",
                           "invalid")
    sections = []
    for part in parts[1:-1]:
        head, sep, payload = part.removeprefix(b"\r\n").partition(b"\r\n\r\n")
        if not sep:
            raise StorageFault(400, "a multipart part has no blank line after its headers", "invalid")
        headers = {line.split(b":", 1)[0].strip().lower(): line.split(b":", 1)[1].strip().decode()
                   for line in head.split(b"\r\n") if b":" in line}
        sections.append((headers, payload.removesuffix(b"\r\n")))
    (_, meta_bytes), (media_headers, media) = sections[0], sections[-1]
    try:
        metadata = json.loads(meta_bytes or b"{}")
    except json.JSONDecodeError as exc:
        raise StorageFault(400, f"the multipart metadata part is not JSON: {exc}", "invalid") from None
    return metadata, media, media_headers.get(b"content-type", "application/octet-stream")


def reply_json(request: Request, status: int, body: Any) -> None:
    request.send(status, json.dumps(body).encode(), {"Content-Type": "application/json; charset=UTF-8"})
