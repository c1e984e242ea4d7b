"""A local Compute Engine metadata server for many fake VMs at once.

Each VM gets its own base URL (`url_for(name)`, ending in /computeMetadata/v1) that the runner
uses in place of http://metadata.google.internal/computeMetadata/v1. A VM's metadata server
answers that VM alone, so the path holds a key derived from the name with this server's secret,
not the name: whoever reaches the server (a job on the host network) cannot ask for another
VM's identity tokens by guessing its name. It answers the paths the
runner needs, with the metadata server's rules: the `Metadata-Flavor: Google` request header is
required, every answer carries an ETag, and `?wait_for_change=true` (with optional `last_etag`
and `timeout_sec`) long-polls until the value differs. Identity tokens are signed by a
`LocalSigner`, whose certificates are served at `certs_url` in Google's oauth2/v1/certs format.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import secrets
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from http import HTTPStatus
from http.server import BaseHTTPRequestHandler, HTTPServer
from socketserver import ThreadingMixIn
from typing import Any
from urllib.parse import parse_qs, unquote, urlsplit

from spotcron.local.signer import LocalSigner, instance_claims

DEFAULT_PROJECT = "local-project"
DEFAULT_LONG_POLL_S = 60.0
_PREFIX = "/computeMetadata/v1/"


def _project_number(project: str) -> int:
    return 100000000000 + int(hashlib.sha256(project.encode()).hexdigest()[:10], 16) % 900000000000


def _etag(value: str) -> str:
    return hashlib.sha256(value.encode()).hexdigest()[:16]


@dataclass
class FakeVm:
    name: str
    zone: str
    metadata: dict[str, str]
    project: str
    project_number: int
    instance_id: str
    created_at: datetime
    service_account: str
    machine_type: str = "e2-small"
    preempted: bool = False
    requests: list[str] = field(default_factory=list)  # paths asked, for tests


class _Missing(Exception):
    """The path or the VM does not exist: 404."""


class _BadRequest(Exception):
    """A parameter is missing or wrong: 400."""


class _Server(ThreadingMixIn, HTTPServer):
    # Non-daemon request threads, joined by server_close(): stop() leaves no thread behind.
    daemon_threads = False
    block_on_close = True
    allow_reuse_address = True


class LocalMetadataServer:
    """Threaded HTTP server on 127.0.0.1 answering for every registered fake VM."""

    def __init__(self, signer: LocalSigner | None = None, *, host: str = "127.0.0.1", port: int = 0,
                 project: str = DEFAULT_PROJECT, service_account: str | None = None,
                 long_poll_s: float = DEFAULT_LONG_POLL_S,
                 clock: Callable[[], datetime] = lambda: datetime.now(UTC),
                 access_tokens: Callable[[Mapping[str, str]], str] | None = None):
        self.signer = signer or LocalSigner()
        # What a VM's own access token is, from its instance attributes. Local mode leaves it
        # unset: the VM account holds no storage role, and the placeholder reaches no storage.
        # (Benchmarks of runners that predate the broker set it.)
        self.access_tokens = access_tokens
        self.project = project
        self.service_account = service_account or f"spotcron-vm@{project}.iam.gserviceaccount.com"
        self.long_poll_s = long_poll_s
        self._clock = clock
        self._host, self._port = host, port
        self._vms: dict[str, FakeVm] = {}
        self._secret = secrets.token_bytes(32)
        self._changed = threading.Condition()
        self._parked = 0  # requests waiting for a change right now
        self._stopping = False
        self._httpd: _Server | None = None
        self._thread: threading.Thread | None = None
        self._next_id = 1000

    # --- lifecycle --------------------------------------------------------------------------

    def start(self) -> LocalMetadataServer:
        if self._httpd is not None:
            return self
        self._stopping = False
        self._httpd = _Server((self._host, self._port), _handler_for(self))
        self._thread = threading.Thread(target=self._httpd.serve_forever, kwargs={"poll_interval": 0.1},
                                        name="spotcron-metadata", daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        if self._httpd is None:
            return
        with self._changed:
            self._stopping = True
            self._changed.notify_all()  # releases long-polls so their threads can be joined
        self._httpd.shutdown()
        self._httpd.server_close()
        if self._thread is not None:
            self._thread.join()
        self._httpd = None
        self._thread = None

    def __enter__(self) -> LocalMetadataServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    @property
    def base_url(self) -> str:
        if self._httpd is None:
            raise RuntimeError("the metadata server is not started; call start() first")
        host, port = self._httpd.server_address[:2]
        return f"http://{host}:{port}"

    def url_for(self, name: str) -> str:
        """The base URL the runner of VM `name` uses as SPOTCRON_METADATA_URL."""
        return f"{self.base_url}/vm/{self._key(name)}/computeMetadata/v1"

    def _key(self, name: str) -> str:
        return hmac.new(self._secret, name.encode(), hashlib.sha256).hexdigest()[:32]

    def name_for(self, key: str) -> str | None:
        """The registered VM whose URL holds `key`."""
        with self._changed:
            return next((name for name in self._vms if hmac.compare_digest(self._key(name), key)), None)

    @property
    def certs_url(self) -> str:
        return f"{self.base_url}/oauth2/v1/certs"

    # --- the fake VMs -----------------------------------------------------------------------

    def register(self, name: str, zone: str, metadata: Mapping[str, str], project: str | None = None,
                 instance_id: str | None = None, created_at: datetime | None = None, *,
                 service_account: str | None = None, machine_type: str | None = None) -> FakeVm:
        project = project or self.project
        with self._changed:
            if instance_id is None:
                self._next_id += 1
                instance_id = str(self._next_id)
            vm = FakeVm(name=name, zone=zone, metadata=dict(metadata), project=project,
                        project_number=_project_number(project), instance_id=str(instance_id),
                        created_at=created_at or self._clock(),
                        service_account=service_account or self.service_account)
            if machine_type:
                vm.machine_type = machine_type
            self._vms[name] = vm
            self._changed.notify_all()
        return vm

    def unregister(self, name: str) -> None:
        with self._changed:
            self._vms.pop(name, None)
            self._changed.notify_all()

    def set_preempted(self, name: str) -> None:
        with self._changed:
            self._vm(name).preempted = True
            self._changed.notify_all()

    def set_attribute(self, name: str, key: str, value: str) -> None:
        with self._changed:
            self._vm(name).metadata[key] = value
            self._changed.notify_all()

    def vms(self) -> list[FakeVm]:
        """Every registered VM."""
        with self._changed:
            return list(self._vms.values())

    def vm(self, name: str) -> FakeVm | None:
        with self._changed:
            return self._vms.get(name)

    def _vm(self, name: str) -> FakeVm:
        vm = self._vms.get(name)
        if vm is None:
            raise KeyError(f"no fake VM named {name!r}; registered: {sorted(self._vms)}")
        return vm

    # --- answers ----------------------------------------------------------------------------

    def answer(self, vm_name: str, path: str, query: Mapping[str, str]) -> tuple[str, str]:
        """(content type, body) for one metadata path, or _Missing / _BadRequest."""
        with self._changed:
            vm = self._vms.get(vm_name)
            if vm is None:
                raise _Missing(f"no instance {vm_name!r}")
            vm.requests.append(path)
            return self._value(vm, path, query)

    def _value(self, vm: FakeVm, path: str, query: Mapping[str, str]) -> tuple[str, str]:
        text = "application/text"
        sa_prefix = "instance/service-accounts/default/"
        if path.startswith("instance/attributes/"):
            key = path.removeprefix("instance/attributes/")
            if key == "":
                if query.get("recursive", "").lower() == "true":
                    return "application/json", json.dumps(vm.metadata, sort_keys=True)
                return text, "".join(f"{k}\n" for k in sorted(vm.metadata))
            if key not in vm.metadata:
                raise _Missing(f"no attribute {key!r}")
            return text, vm.metadata[key]
        simple: dict[str, str] = {
            "instance/name": vm.name,
            "instance/hostname": f"{vm.name}.{vm.zone}.c.{vm.project}.internal",
            "instance/id": vm.instance_id,
            "instance/zone": f"projects/{vm.project_number}/zones/{vm.zone}",
            "instance/machine-type": f"projects/{vm.project_number}/machineTypes/{vm.machine_type}",
            "instance/preempted": "TRUE" if vm.preempted else "FALSE",
            "project/project-id": vm.project,
            "project/numeric-project-id": str(vm.project_number),
            sa_prefix + "email": vm.service_account,
        }
        if path in simple:
            return text, simple[path]
        if path == sa_prefix + "token":
            # The VM account's own access token. That account holds no storage role, so the local
            # storage server refuses this token; storage tokens come from the credentials broker.
            token = f"local-access-token.{vm.name}"
            if self.access_tokens is not None:
                try:
                    token = self.access_tokens(vm.metadata)
                except (KeyError, ValueError) as exc:
                    raise _Missing(f"no access token for {vm.name}: {exc}") from None
            body = {"access_token": token, "expires_in": 3599, "token_type": "Bearer"}
            return "application/json", json.dumps(body)
        if path == sa_prefix + "identity":
            audience = query.get("audience", "")
            if not audience:
                raise _BadRequest("non-empty audience parameter required")
            full = query.get("format", "standard") == "full"
            claims = instance_claims(service_account=vm.service_account, project_id=vm.project,
                                     project_number=vm.project_number, zone=vm.zone,
                                     instance_id=vm.instance_id, instance_name=vm.name,
                                     created_at=vm.created_at, full=full)
            if not full and query.get("include_email", "").lower() in ("true", "1"):
                claims.update(email=vm.service_account, email_verified=True)
            return text, self.signer.sign_identity(audience, claims)
        raise _Missing(f"no metadata path {path!r}")

    @property
    def long_polls(self) -> int:
        """How many `wait_for_change` requests are parked now: what a caller waits on before it
        changes a value, to know the change is what answers them."""
        with self._changed:
            return self._parked

    def wait_for_change(self, vm_name: str, path: str, query: Mapping[str, str],
                        last_etag: str | None, timeout_s: float) -> tuple[str, str]:
        """Block until the value's ETag differs from `last_etag` (or the current one), or timeout."""
        deadline = time.monotonic() + timeout_s
        with self._changed:
            current = self.answer(vm_name, path, query)
            watched = last_etag or _etag(current[1])
            self._parked += 1
            try:
                while _etag(current[1]) == watched and not self._stopping:
                    remaining = deadline - time.monotonic()
                    if remaining <= 0:
                        break
                    self._changed.wait(remaining)
                    current = self.answer(vm_name, path, query)
            finally:
                self._parked -= 1
            return current


def _handler_for(server: LocalMetadataServer) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        server_version = "spotcron-metadata"

        def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - the base's name
            pass

        def do_GET(self) -> None:  # noqa: N802 - http.server's naming
            parts = urlsplit(self.path)
            query = {k: v[-1] for k, v in parse_qs(parts.query, keep_blank_values=True).items()}
            if parts.path == "/oauth2/v1/certs":
                self._send(HTTPStatus.OK, "application/json", json.dumps(server.signer.certs()), flavor=False)
                return
            if self.headers.get("Metadata-Flavor") != "Google":
                self._send(HTTPStatus.FORBIDDEN, "text/plain",
                           "Missing required header: Metadata-Flavor: Google\n")
                return
            segments = parts.path.split("/", 3)  # "", "vm", KEY, "computeMetadata/v1/..."
            if len(segments) < 4 or segments[1] != "vm" or not ("/" + segments[3]).startswith(_PREFIX):
                self._send(HTTPStatus.NOT_FOUND, "text/plain", f"no such path {parts.path}\n")
                return
            vm_name = server.name_for(unquote(segments[2]))
            if vm_name is None:
                self._send(HTTPStatus.NOT_FOUND, "text/plain", "no such instance\n")
                return
            path = ("/" + segments[3]).removeprefix(_PREFIX)
            try:
                if query.get("wait_for_change", "").lower() == "true":
                    timeout = min(float(query.get("timeout_sec") or server.long_poll_s), server.long_poll_s)
                    ctype, body = server.wait_for_change(vm_name, path, query, query.get("last_etag"), timeout)
                else:
                    ctype, body = server.answer(vm_name, path, query)
            except _Missing as exc:
                self._send(HTTPStatus.NOT_FOUND, "text/plain", f"{exc}\n")
            except (_BadRequest, ValueError) as exc:
                self._send(HTTPStatus.BAD_REQUEST, "text/plain", f"{exc}\n")
            else:
                self._send(HTTPStatus.OK, ctype, body)

        def _send(self, status: HTTPStatus, ctype: str, body: str, *, flavor: bool = True) -> None:
            data = body.encode()
            try:
                self.send_response(status)
                if flavor:
                    self.send_header("Metadata-Flavor", "Google")
                self.send_header("Content-Type", ctype)
                self.send_header("ETag", _etag(body))
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)
            except (BrokenPipeError, ConnectionResetError):
                pass  # the client gave up on a long-poll; nothing to tell it

    return Handler
