"""Secret Manager's `versions.access`, locally: what a local VM's runner reads its job's secrets from.

The runner calls `GET {SECRETS_URL}/projects/P/secrets/S/versions/V:access` with its VM's own
access token, as it does on Google Cloud, and gets Google's answer shape: `{"name":
".../versions/N", "payload": {"data": BASE64, "dataCrc32c": "INT64"}}`, errors as
`{"error": {"code", "message", "status"}}`. `SecretAccessServer` is that HTTP surface; what a
request may read is its `resolver`'s call.

`LocalSecrets` is local mode's resolver. A value comes from `SPOTCRON_SECRET_<ID>` in the
environment `spotcron up` started with, else from `.spotcron/secrets.env` (dotenv). A token is
a local VM's own (an HMAC of its descriptor, minted through the metadata server) and reads only
the secrets that VM's descriptor names: one job's VM cannot read another job's secret.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
import re
import secrets as random
import threading
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, HTTPServer
from pathlib import Path
from socketserver import ThreadingMixIn
from typing import Any

from spotcron.core.secret_refs import LOCAL_PREFIX, crc32c, local_variable

ACCESS_PATH = re.compile(r"^/v1/projects/([^/]+)/secrets/([^/]+)/versions/([^/:]+):access$")
DOTENV_NAME = "secrets.env"
MAX_VALUE_BYTES = 64 << 10  # Secret Manager's limit on a version's payload


@dataclass(frozen=True)
class Answer:
    status: int
    body: dict[str, Any]


def error(code: int, status: str, message: str) -> Answer:
    return Answer(code, {"error": {"code": code, "message": message, "status": status}})


def payload(name: str, data: bytes) -> Answer:
    # int64 fields are JSON strings in Google's REST mapping.
    return Answer(200, {"name": name, "payload": {"data": base64.b64encode(data).decode(),
                                                  "dataCrc32c": str(crc32c(data))}})


Resolver = Callable[[str, str, str, str], Answer]  # (bearer token, project, secret, version) -> answer


class _Server(ThreadingMixIn, HTTPServer):
    daemon_threads = False
    block_on_close = True


class SecretAccessServer:
    """`versions.access` on 127.0.0.1; `resolver` decides each answer. `requests` records
    (method, path, headers, body) of every request, for tests that check their shape."""

    def __init__(self, resolver: Resolver, *, host: str = "127.0.0.1", port: int = 0):
        self.resolver = resolver
        self.requests: list[tuple[str, str, dict[str, str], bytes]] = []
        self._address = (host, port)
        self._httpd: _Server | None = None
        self._thread: threading.Thread | None = None
        self._lock = threading.Lock()

    def start(self) -> SecretAccessServer:
        server = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args: Any) -> None:
                pass

            def _answer(self) -> None:
                size = min(int(self.headers.get("Content-Length") or 0), 1 << 16)
                body = self.rfile.read(size) if size > 0 else b""
                with server._lock:
                    server.requests.append((self.command, self.path, dict(self.headers.items()), body))
                answer = server.answer(self.command, self.path, self.headers.get("Authorization", ""), body)
                data = json.dumps(answer.body).encode()
                self.send_response(answer.status)
                self.send_header("Content-Type", "application/json; charset=UTF-8")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            do_GET = do_POST = do_PUT = do_DELETE = _answer  # noqa: N815

        self._httpd = _Server(self._address, Handler)
        self._thread = threading.Thread(target=self._httpd.serve_forever, kwargs={"poll_interval": 0.1},
                                        name="spotcron-secrets", daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        if self._httpd is None:
            return
        self._httpd.shutdown()
        self._httpd.server_close()
        if self._thread is not None:
            self._thread.join()
        self._httpd = None

    def __enter__(self) -> SecretAccessServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    @property
    def url(self) -> str:
        """The runner's SPOTCRON_SECRETS_URL (Google's is https://secretmanager.googleapis.com/v1)."""
        assert self._httpd is not None
        host, port = self._httpd.server_address[:2]
        return f"http://{host}:{port}/v1"

    def answer(self, method: str, path: str, authorization: str, body: bytes) -> Answer:
        match = ACCESS_PATH.match(path.split("?", 1)[0])
        if method != "GET" or match is None:
            return error(404, "NOT_FOUND", f"no method {method} {path.split('?', 1)[0]}")
        if body:
            return error(400, "INVALID_ARGUMENT", "the request body must be empty")
        if not authorization.startswith("Bearer ") or len(authorization) <= 7:
            return error(401, "UNAUTHENTICATED", "Request is missing required authentication credential.")
        return self.resolver(authorization[7:], *match.groups())


# Every character str.splitlines() ends a line at: written escaped, so a value stays on its line.
_LINE_BREAKS = "\n\r\v\f\x1c\x1d\x1e\x85\u2028\u2029"
_ESCAPE = re.compile(r'\\(["\\nrtvf]|x[0-9a-fA-F]{2}|u[0-9a-fA-F]{4})')
_NAMED = {"n": "\n", "r": "\r", "t": "\t", "v": "\v", "f": "\f", '"': '"', "\\": "\\"}


def dotenv_escape(text: str) -> str:
    """`text` for a double-quoted secrets.env value: one line, read back whole by read_dotenv."""
    out = []
    for char in text:
        if char in '"\\':
            out.append("\\" + char)
        elif char in _LINE_BREAKS:
            named = {"\n": "n", "\r": "r", "\v": "v", "\f": "f"}.get(char)
            out.append("\\" + named if named else f"\\u{ord(char):04x}")
        else:
            out.append(char)
    return "".join(out)


def dotenv_unescape(text: str) -> str:
    """One left-to-right pass: `C:\\\\new` is `C:\\new`, never a newline."""
    return _ESCAPE.sub(lambda m: _NAMED.get(m.group(1)) or chr(int(m.group(1)[1:], 16)), text)


def read_dotenv(path: Path) -> dict[str, str]:
    """KEY=VALUE lines; '#' comments, `export ` prefixes and one level of quotes allowed. Unreadable: empty."""
    try:
        text = path.read_bytes().decode("utf-8")  # no newline translation: a value's '\r' is its own
    except (OSError, UnicodeDecodeError):
        return {}
    values: dict[str, str] = {}
    for line in text.split("\n"):
        line = line.strip()
        if not line or line.startswith("#") or "=" not in line:
            continue
        key, _, value = line.removeprefix("export ").partition("=")
        value = value.strip()
        if len(value) >= 2 and value[0] == value[-1] and value[0] in "'\"":
            value = value[1:-1]
            if line.partition("=")[2].strip()[0] == '"':
                value = dotenv_unescape(value)
        values[key.strip()] = value
    return values


class LocalSecrets:
    """Local mode's values and rules (module doc). `descriptors(token)` returns the descriptor
    text of the local VM whose token it is, or None."""

    def __init__(self, environ: Mapping[str, str], state_dir: Path):
        self.environ = {k: v for k, v in environ.items() if k.startswith(LOCAL_PREFIX)}
        self.dotenv = Path(state_dir) / DOTENV_NAME
        self._key = random.token_bytes(32)
        self.vm_descriptor: Callable[[str], str | None] = lambda token: None

    def token_for(self, attributes: Mapping[str, str]) -> str:
        """A local VM's own access token: unguessable, and tied to its descriptor."""
        descriptor = attributes.get("spotcron-run", "")
        return "local-vm." + hmac.new(self._key, descriptor.encode(), hashlib.sha256).hexdigest()

    def value(self, secret: str) -> tuple[str, bytes] | None:
        """(where it came from, the value) for a secret id, or None."""
        name = local_variable(secret)
        if name in self.environ:
            return "env", self.environ[name].encode()
        found = read_dotenv(self.dotenv)
        for key in (name, name.removeprefix(LOCAL_PREFIX), secret):
            if key in found:
                return "dotenv", found[key].encode()
        return None

    def __call__(self, token: str, project: str, secret: str, version: str) -> Answer:
        from spotcron.core.descriptor import RunDescriptor

        descriptor = self.vm_descriptor(token)
        if descriptor is None:
            return error(401, "UNAUTHENTICATED", "the token is no local VM's")
        wanted = f"projects/{project}/secrets/{secret}/versions/{version}"
        if wanted not in {item.version for item in RunDescriptor.from_metadata(descriptor).secrets}:
            return error(403, "PERMISSION_DENIED", f"Permission 'secretmanager.versions.access' denied for "
                                                   f"resource '{wanted}': the job does not name this secret")
        found = self.value(secret)
        if found is None:
            return error(404, "NOT_FOUND", f"Secret [{wanted.rsplit('/versions/', 1)[0]}] not found locally: set "
                                           f"{local_variable(secret)} or add it to .spotcron/{DOTENV_NAME}")
        source, data = found
        if len(data) > MAX_VALUE_BYTES:
            return error(400, "INVALID_ARGUMENT", f"the value of {secret} is over 64 KiB, Secret Manager's limit")
        # A local value has no version history: its version says where it came from.
        return payload(f"projects/{project}/secrets/{secret}/versions/local-{source}", data)
