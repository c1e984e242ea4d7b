"""A tiny threaded HTTP server that routes Google-style REST calls to fake API handlers.

Shared by every fake REST API: one server, one base URL (clients get it as api_endpoint),
a log of every call, a per-call latency, and injected faults:
- `fail_after=K`: after K calls every call answers 503 until `heal()` (an interrupted deploy);
- `lose_answers=N`: the next N changing calls take effect but answer 503 (a lost response).

With a `Gate` (FakeCloud's Access), every call must carry an identity (the bearer token
`fake:MEMBER` that FakeCloud's credentials send), its API must be enabled, and the caller must
hold a role on the project; the fake APIs then check the finer permissions themselves.
"""

from __future__ import annotations

import json
import re
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Protocol
from urllib.parse import parse_qs, unquote, urlsplit


class ApiError(Exception):
    """Raised by a handler: becomes a Google-style JSON error response."""

    STATUS = {400: "INVALID_ARGUMENT", 403: "PERMISSION_DENIED", 404: "NOT_FOUND", 409: "ALREADY_EXISTS",
              412: "FAILED_PRECONDITION", 429: "RESOURCE_EXHAUSTED", 503: "UNAVAILABLE"}

    def __init__(self, code: int, message: str, status: str | None = None,
                 details: list[dict[str, Any]] | None = None):
        super().__init__(message)
        self.code = code
        self.message = message
        self.status = status or self.STATUS.get(code, "UNKNOWN")
        self.details = details or []

    def body(self) -> dict[str, Any]:
        error = {"code": self.code, "message": self.message, "status": self.status,
                 "errors": [{"message": self.message, "reason": self.status.lower()}]}
        if self.details:
            error["details"] = self.details
        return {"error": error}


@dataclass
class Request:
    method: str
    path: str  # decoded
    query: dict[str, str]
    body: bytes
    headers: dict[str, str]
    match: re.Match[str] | None = None

    def json(self) -> Any:
        return json.loads(self.body) if self.body else {}


@dataclass
class Call:
    api: str
    method: str
    path: str
    query: dict[str, str]
    body: Any
    status: int = 0


Handler = Callable[[Request], tuple[int, Any]]
# The API each route group belongs to, as Service Usage names it.
SERVICES = {"iam": "iam.googleapis.com", "storage": "storage.googleapis.com", "pubsub": "pubsub.googleapis.com",
            "functions": "cloudfunctions.googleapis.com", "run": "run.googleapis.com",
            "artifactregistry": "artifactregistry.googleapis.com", "compute": "compute.googleapis.com",
            "resourcemanager": "cloudresourcemanager.googleapis.com", "scheduler": "cloudscheduler.googleapis.com",
            "serviceusage": "serviceusage.googleapis.com", "orgpolicy": "orgpolicy.googleapis.com",
            "secretmanager": "secretmanager.googleapis.com", "monitoring": "monitoring.googleapis.com"}
TOKEN_PREFIX = "fake:"


def caller(request: Request) -> str | None:
    """The member a request is made as (its bearer token), or None without one."""
    header = request.headers.get("authorization", "")
    token = header.removeprefix("Bearer ").strip()
    return token.removeprefix(TOKEN_PREFIX) if token.startswith(TOKEN_PREFIX) else None


class Gate(Protocol):
    def admit(self, api: str, member: str | None, *, project_role: bool = True) -> None:
        """Raise ApiError unless `member` may call `api` at all (`project_role`: and holds some role
        on the project, for the routes that do not check their own permission)."""

    def may_set_policy(self, api: str, member: str | None) -> None:
        """Raise ApiError unless `member` may write IAM policies through `api`."""


@dataclass
class Faults:
    fail_after: int | None = None
    lose_answers: int = 0
    served: int = 0
    lock: threading.Lock = field(default_factory=threading.Lock)

    def before(self) -> ApiError | None:
        """Counted once per call; the error to answer instead of serving, if any."""
        with self.lock:
            self.served += 1
            if self.fail_after is not None and self.served > self.fail_after:
                return ApiError(503, "The service is currently unavailable (injected).")
        return None

    def lose_answer(self) -> bool:
        with self.lock:
            if self.lose_answers > 0:
                self.lose_answers -= 1
                return True
        return False


class Router:
    def __init__(self, latency_s: float, faults: Faults, log: list[Call], log_lock: threading.Lock):
        self.routes: list[tuple[str, re.Pattern[str], str, Handler]] = []
        self.checking: set[Handler] = set()  # handlers that check the caller's permission themselves
        self.latency_s = latency_s
        self.faults = faults
        self.log = log
        self.log_lock = log_lock
        self.gate: Gate | None = None

    def add(self, method: str, pattern: str, api: str, handler: Handler, *, checks_permission: bool = False) -> None:
        self.routes.append((method, re.compile(f"^{pattern}$"), api, handler))
        if checks_permission:
            self.checking.add(handler)

    def dispatch(self, request: Request) -> tuple[int, Any]:
        for method, pattern, api, handler in self.routes:
            match = pattern.match(request.path)
            if match and method == request.method:
                request.match = match
                return self._serve(api, handler, request)
        return self._record("?", request, 404, ApiError(404, f"no fake route for {request.method} {request.path}"))

    def _serve(self, api: str, handler: Handler, request: Request) -> tuple[int, Any]:
        if self.latency_s:
            time.sleep(self.latency_s)
        injected = self.faults.before()
        if injected:
            return self._record(api, request, injected.code, injected)
        try:
            if self.gate is not None:
                self.gate.admit(api, caller(request), project_role=handler not in self.checking)
                if request.path.endswith(":setIamPolicy") or (request.method == "PUT" and request.path.endswith("/iam")):
                    self.gate.may_set_policy(api, caller(request))
            status, body = handler(request)
        except ApiError as error:
            return self._record(api, request, error.code, error)
        if request.method != "GET" and not request.path.endswith(":getIamPolicy") and self.faults.lose_answer():
            lost = ApiError(503, "The answer was lost (injected); the change was made.")
            return self._record(api, request, 503, lost)
        return self._record(api, request, status, body)

    def _record(self, api: str, request: Request, status: int, body: Any) -> tuple[int, Any]:
        try:
            logged = request.json() if request.body and not request.path.startswith("/upload/") else None
        except ValueError:
            logged = None
        with self.log_lock:
            self.log.append(Call(api, request.method, request.path, request.query, logged, status))
        return status, (body.body() if isinstance(body, ApiError) else body)


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    # Headers and body go out in two writes; with Nagle on, keep-alive clients wait for a
    # delayed ACK (~40 ms) on every response, which would swamp the latency being simulated.
    disable_nagle_algorithm = True
    router: Router

    def _handle(self) -> None:
        split = urlsplit(self.path)
        length = int(self.headers.get("content-length") or 0)
        body = self.rfile.read(length) if length else b""
        query = {k: v[-1] for k, v in parse_qs(split.query, keep_blank_values=True).items()}
        request = Request(self.command, unquote(split.path), query, body,
                          {k.lower(): v for k, v in self.headers.items()})
        status, payload = self.router.dispatch(request)
        raw = isinstance(payload, bytes)  # an object's media, served as stored
        data = payload if raw else b"" if payload is None else json.dumps(payload).encode()
        self.send_response(status)
        self.send_header("content-type", "application/octet-stream" if raw else "application/json")
        self.send_header("content-length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    do_GET = do_POST = do_PUT = do_PATCH = do_DELETE = _handle

    def log_message(self, *args: Any) -> None:
        pass


class HttpServer:
    def __init__(self, router: Router):
        handler = type("BoundHandler", (_Handler,), {"router": router})
        self.server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
        self.server.daemon_threads = True
        self.server.request_queue_size = 128
        self.thread = threading.Thread(target=self.server.serve_forever, kwargs={"poll_interval": 0.05},
                                       name="fake-google", daemon=True)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server.server_port}"

    def start(self) -> None:
        self.thread.start()

    def stop(self) -> None:
        self.server.shutdown()
        self.server.server_close()
