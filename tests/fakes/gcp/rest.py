"""A small recording HTTP server for faking Google REST APIs in tests.

Point a real Google client at it (`client_options={"api_endpoint": server.endpoint}` with
`AnonymousCredentials()`, REST transport) and it answers from handlers you register, records
every request (method, path, query, JSON body) and can be told to fail matching requests.
Subclasses (compute.FakeComputeEngine) add the API's routes and state.

Only 127.0.0.1 is bound; nothing leaves the machine.
"""

from __future__ import annotations

import json
import re
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from http import HTTPStatus
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qs, urlsplit


@dataclass(frozen=True)
class RecordedRequest:
    method: str
    path: str
    query: dict[str, list[str]]
    body: Any  # parsed JSON, raw text when it is not JSON, None when empty
    headers: dict[str, str] = field(default_factory=dict, compare=False)  # names in lower case
    raw: bytes = field(default=b"", compare=False, repr=False)

    def param(self, name: str, default: str | None = None) -> str | None:
        values = self.query.get(name)
        return values[0] if values else default


# (HTTP status, body) or (HTTP status, body, extra headers); a body of bytes is sent as it is,
# None as an empty body, anything else as JSON.
Reply = tuple[int, Any] | tuple[int, Any, dict[str, str]]
Handler = Callable[..., Reply]


def google_error(status: int, message: str, reason: str = "", domain: str = "global") -> Reply:
    """The error body Google's JSON APIs send; google.api_core turns it into an exception."""
    reason = reason or {400: "invalid", 401: "required", 403: "forbidden", 404: "notFound",
                        409: "alreadyExists", 412: "conditionNotMet", 429: "rateLimitExceeded"}.get(status, "backendError")
    return status, {"error": {"code": status, "message": message,
                              "errors": [{"message": message, "domain": domain, "reason": reason}]}}


@dataclass
class _Fault:
    method: str
    pattern: re.Pattern[str]
    reply: Reply
    times: int | None  # None: every matching request


class FakeRestServer:
    """Routes (method, path regex) to handlers on a threaded server; records every request.

    Handlers get the RecordedRequest plus the regex's named groups as keyword arguments and
    return (status, body). Use as a context manager, or call start() and stop().
    """

    def __init__(self) -> None:
        self.requests: list[RecordedRequest] = []
        self._routes: list[tuple[str, re.Pattern[str], Handler]] = []
        self._faults: list[_Fault] = []
        self._lock = threading.RLock()
        self._server: ThreadingHTTPServer | None = None
        self._thread: threading.Thread | None = None

    # --- wiring ----------------------------------------------------------------------------

    def route(self, method: str, pattern: str, handler: Handler) -> None:
        self._routes.append((method.upper(), re.compile(f"^{pattern}$"), handler))

    def fail_next(self, method: str, pattern: str, status: int, message: str = "injected failure",
                  reason: str = "", times: int | None = 1) -> None:
        """Answer the next `times` requests matching (method, path regex) with a Google error."""
        with self._lock:
            self._faults.append(_Fault(method.upper(), re.compile(f"^{pattern}$"),
                                       google_error(status, message, reason), times))

    @property
    def endpoint(self) -> str:
        if self._server is None:
            raise RuntimeError("the fake server is not started; use it as a context manager or call start()")
        host, port = self._server.server_address[:2]
        return f"http://{host}:{port}"

    def start(self) -> FakeRestServer:
        fake = self

        class _Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"  # keep-alive: the clients reuse one connection

            def _serve(self) -> None:
                fake._dispatch(self)

            do_GET = do_POST = do_PUT = do_PATCH = do_DELETE = _serve

            def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - quiet in tests
                pass

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), _Handler)
        self._server.daemon_threads = True
        # A short poll interval: shutdown() waits up to one interval, once per test.
        self._thread = threading.Thread(target=self._server.serve_forever, kwargs={"poll_interval": 0.02},
                                        name="fake-rest", daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
            self._server = None
        if self._thread is not None:
            self._thread.join(timeout=5)
            self._thread = None

    def __enter__(self) -> FakeRestServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    # --- inspection ------------------------------------------------------------------------

    def calls(self, method: str | None = None, path: str | None = None) -> list[RecordedRequest]:
        """Recorded requests, optionally only those with this method and whose path matches this regex."""
        with self._lock:
            found = list(self.requests)
        if method:
            found = [r for r in found if r.method == method.upper()]
        if path:
            pattern = re.compile(f"^{path}$")
            found = [r for r in found if pattern.match(r.path)]
        return found

    def clear_requests(self) -> None:
        with self._lock:
            self.requests.clear()

    # --- serving ---------------------------------------------------------------------------

    def _dispatch(self, http: BaseHTTPRequestHandler) -> None:
        parts = urlsplit(http.path)
        length = int(http.headers.get("Content-Length") or 0)
        raw = http.rfile.read(length) if length else b""
        body: Any = None
        if raw:
            try:
                body = json.loads(raw)
            except ValueError:
                body = raw.decode("utf-8", "replace")
        request = RecordedRequest(http.command, parts.path, parse_qs(parts.query), body,
                                  {k.lower(): v for k, v in http.headers.items()}, raw)
        with self._lock:
            self.requests.append(request)
            reply = self._answer(request)
        status, payload = reply[0], reply[1]
        headers = dict(reply[2]) if len(reply) > 2 else {}
        if isinstance(payload, bytes):
            data = payload
            headers.setdefault("Content-Type", "application/octet-stream")
        else:
            data = b"" if payload is None else json.dumps(payload).encode()
            headers.setdefault("Content-Type", "application/json; charset=UTF-8")
        http.send_response(status)
        for name, value in headers.items():
            http.send_header(name, value)
        http.send_header("Content-Length", str(len(data)))
        http.end_headers()
        http.wfile.write(data)

    def _answer(self, request: RecordedRequest) -> Reply:
        for fault in self._faults:
            if fault.method == request.method and fault.pattern.match(request.path):
                if fault.times is not None:
                    fault.times -= 1
                    if fault.times <= 0:
                        self._faults.remove(fault)
                return fault.reply
        for method, pattern, handler in self._routes:
            match = pattern.match(request.path)
            if method == request.method and match:
                try:
                    return handler(request, **match.groupdict())
                except Exception as exc:  # a bug in a handler shows up as a 500 with its text
                    return google_error(500, f"fake handler failed: {type(exc).__name__}: {exc}")
        return google_error(HTTPStatus.NOT_FOUND, f"no fake route for {request.method} {request.path}")
