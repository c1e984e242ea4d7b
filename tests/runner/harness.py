"""What the runner tests stand up around vm_images/runner/runner.sh.

A job_done receiver that verifies identity tokens like the real function does, a credentials
broker minting the broker's rules for the VM's own attempt, a proxy in front
of the bucket that fails chosen requests, and `RunnerHarness`, which registers a fake VM with
the local metadata server and runs the real script as a process in its own process group.
"""

from __future__ import annotations

import http.client
import json
import os
import shutil
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from http.server import BaseHTTPRequestHandler, HTTPServer
from pathlib import Path
from socketserver import ThreadingMixIn
from typing import Any
from urllib.parse import urlsplit

import pytest

from spotcron.core.descriptor import RunDescriptor
from spotcron.core.errors import InvalidToken
from spotcron.gcp.id_tokens import GoogleIdentity
from spotcron.local.bucket import LocalBucket
from spotcron.local.metadata import LocalMetadataServer

REPO = Path(__file__).resolve().parents[2]
RUNNER = REPO / "vm_images" / "runner" / "runner.sh"
HERE = Path(__file__).resolve().parent
FAKE_DOCKER = REPO / "tests" / "fakes" / "docker.py"
JOB = HERE / "job.py"
BUCKET = "test-bucket"

# What the runner needs from the machine, as on Container-Optimized OS.
MISSING_TOOLS = [tool for tool in ("bash", "curl", "sha256sum", "date") if shutil.which(tool) is None]
needs_runner_tools = pytest.mark.skipif(bool(MISSING_TOOLS), reason=f"the runner needs {MISSING_TOOLS} on PATH")


class _Server(ThreadingMixIn, HTTPServer):
    daemon_threads = False
    block_on_close = True


class _Serving:
    """Start/stop for a small threaded HTTP server on 127.0.0.1."""

    handler: type[BaseHTTPRequestHandler]

    def start(self) -> None:
        self._httpd = _Server(("127.0.0.1", 0), self.handler)
        self._thread = threading.Thread(target=self._httpd.serve_forever, kwargs={"poll_interval": 0.05},
                                        daemon=True)
        self._thread.start()

    def stop(self) -> None:
        self._httpd.shutdown()
        self._httpd.server_close()
        self._thread.join()

    @property
    def base_url(self) -> str:
        host, port = self._httpd.server_address[:2]
        return f"http://{host}:{port}"


@dataclass
class Callback:
    status: int
    body: dict[str, Any] | None
    claims: dict[str, Any] | None
    error: str | None
    token: str | None


class Receiver(_Serving):
    """Stands in for job_done: verifies the bearer token, records every call, may fail on purpose.

    `deny_first` answers 403 to that many verified calls, as Cloud Run does to a caller whose
    invoker grant has not propagated yet (https://cloud.google.com/iam/docs/access-change-propagation)."""

    def __init__(self, identity: GoogleIdentity, fail_first: int = 0, deny_first: int = 0):
        self.identity = identity
        self.fail_first = fail_first
        self.deny_first = deny_first
        self.calls: list[Callback] = []
        self._lock = threading.Lock()
        receiver = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args: Any) -> None:
                pass

            def do_POST(self) -> None:  # noqa: N802
                data = self.rfile.read(int(self.headers.get("Content-Length") or 0))
                status, call = receiver._handle(self.headers.get("Authorization", ""), data)
                with receiver._lock:
                    receiver.calls.append(call)
                self.send_response(status)
                self.send_header("Content-Length", "2")
                self.end_headers()
                self.wfile.write(b"{}")

        self.handler = Handler

    @property
    def url(self) -> str:
        return f"{self.base_url}/job_done"

    def _handle(self, authorization: str, data: bytes) -> tuple[int, Callback]:
        token = authorization.removeprefix("Bearer ") if authorization.startswith("Bearer ") else None
        try:
            body = json.loads(data)
        except ValueError:
            body = None
        try:
            claims = self.identity.verify(token or "", self.url)
        except InvalidToken as exc:
            return 401, Callback(401, body, None, str(exc), token)
        with self._lock:
            denied = self.deny_first > 0
            failing = not denied and self.fail_first > 0
            if denied:
                self.deny_first -= 1
            if failing:
                self.fail_first -= 1
        status = 403 if denied else 503 if failing else 200
        return status, Callback(status, body, claims, None, token)

    @property
    def accepted(self) -> list[Callback]:
        return [c for c in self.calls if c.status == 200]


class CredentialsBroker(_Serving):
    """Stands in for the credentials endpoint (no run records here): verifies the instance
    identity token (audience = this URL), and mints, with the bucket's grants, the broker's own
    rules (engine/broker.boundary_rules) for the descriptor of the VM the token names, each
    token living `life` seconds. `deny_first` answers 403 to that many calls, as Cloud Run does
    while the VM account's invoker grant propagates."""

    def __init__(self, identity: GoogleIdentity, metadata: LocalMetadataServer, bucket: LocalBucket, *,
                 life: int = 3600, deny_first: int = 0):
        self.identity = identity
        self.life = life
        self.deny_first = deny_first
        self.denied = 0
        self.issued: list[str] = []
        self.refused: list[str] = []
        broker = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args: Any) -> None:
                pass

            def do_POST(self) -> None:  # noqa: N802
                from spotcron.engine.broker import boundary_rules

                self.rfile.read(int(self.headers.get("Content-Length") or 0))
                token = self.headers.get("Authorization", "").removeprefix("Bearer ")
                if broker.deny_first > 0:
                    broker.deny_first -= 1
                    broker.denied += 1
                    self.send_response(403)
                    self.send_header("Content-Length", "0")
                    self.end_headers()
                    return
                try:
                    claims = broker.identity.verify(token, broker.url)
                    vm = metadata.vm(claims["google"]["compute_engine"]["instance_name"])
                    if vm is None:
                        raise InvalidToken("no such VM")
                except (InvalidToken, KeyError) as exc:
                    broker.refused.append(str(exc))
                    self.send_response(403)
                    self.send_header("Content-Length", "0")
                    self.end_headers()
                    return
                d = RunDescriptor.from_metadata(vm.metadata["spotcron-run"])
                issued = bucket.downscoped_token(boundary_rules(d.bucket, d.job, d.run_id, d.attempt),
                                                 lifetime_s=broker.life)
                broker.issued.append(issued)
                body = json.dumps({"access_token": issued, "expires_in": broker.life}).encode()
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

        self.handler = Handler

    @property
    def url(self) -> str:
        return f"{self.base_url}/credentials"


class FaultProxy(_Serving):
    """Forwards to the bucket; answers 503 to the first `fail_first` requests that `match`
    (every one when it is -1), and holds each matching request `delay` seconds first."""

    def __init__(self, target: str, fail_first: int = 0,
                 match: Callable[[str, str], bool] = lambda method, path: path.startswith("/upload/"),
                 delay: float = 0.0):
        self.target = urlsplit(target)
        target = target.rstrip("/")
        self.fail_first = fail_first
        self.delay = delay
        self.seen = threading.Event()  # set at the first matching request
        self.match = match
        self.failed: list[str] = []
        self.forwarded: list[str] = []
        self.bodies: list[bytes] = []  # every request body that reached the bucket
        self.authorizations: list[str] = []  # the Authorization header of every request
        self._lock = threading.Lock()
        proxy = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args: Any) -> None:
                pass

            def _proxy(self) -> None:
                data = self.rfile.read(int(self.headers.get("Content-Length") or 0))
                matched = proxy.match(self.command, self.path)
                if matched:
                    proxy.seen.set()
                    time.sleep(proxy.delay)
                with proxy._lock:
                    fail = matched and proxy.fail_first != 0
                    if fail:
                        proxy.fail_first -= 1
                        proxy.failed.append(f"{self.command} {self.path}")
                    else:
                        proxy.forwarded.append(f"{self.command} {self.path}")
                        proxy.bodies.append(data)
                    proxy.authorizations.append(self.headers.get("Authorization", ""))
                if fail:
                    self.send_response(503)
                    self.send_header("Content-Length", "0")
                    self.end_headers()
                    return
                conn = http.client.HTTPConnection(proxy.target.hostname, proxy.target.port, timeout=10)
                headers = {k: v for k, v in self.headers.items() if k.lower() not in ("host", "connection")}
                conn.request(self.command, self.path, body=data, headers=headers)
                response = conn.getresponse()
                payload = response.read()
                conn.close()
                self.send_response(response.status)
                for key, value in response.getheaders():
                    if key.lower() == "location":  # a resumable session goes through the proxy too
                        value = value.replace(target, proxy.base_url)
                    if key.lower() not in ("content-length", "connection", "transfer-encoding"):
                        self.send_header(key, value)
                self.send_header("Content-Length", str(len(payload)))
                self.end_headers()
                self.wfile.write(payload)

            do_GET = do_POST = do_DELETE = do_PUT = _proxy  # noqa: N815

        self.handler = Handler


@dataclass
class RunResult:
    rc: int
    stderr: str
    seconds: float
    pgid: int


@dataclass
class RunnerHarness:
    tmp: Path
    metadata: LocalMetadataServer
    bucket: LocalBucket
    receiver: Receiver
    broker: CredentialsBroker | None = None  # the runner's storage tokens, as on Google Cloud
    storage_url: str | None = None
    vm_name: str = "sc-hello-20260101-1000-a1"
    extra_env: dict[str, str] = field(default_factory=dict)

    def descriptor(self, **overrides: Any) -> RunDescriptor:
        fields: dict[str, Any] = {
            "job": "hello",
            "run_id": "20260101-1000",
            "attempt": 1,
            "image": "example/job:1",
            "command": [sys.executable, str(JOB)],
            "args": ["ok"],
            "bucket": BUCKET,
            "prefix": "runs/hello/20260101-1000/",
            "job_done_url": self.receiver.url,
            "credentials_url": self.broker.url if self.broker is not None else "",
            "deadline": datetime.now(UTC) + timedelta(seconds=60),
            "timeout_s": 60,
            "local_command": [sys.executable, str(JOB), "ok"],
        }
        fields.update(overrides)
        return RunDescriptor(**fields)

    @property
    def fake_docker(self) -> str:
        """A `docker` for SPOTCRON_DOCKER: tests/fakes/docker.py run by this Python, whatever its file mode."""
        wrapper = self.tmp / "docker"
        if not wrapper.exists():
            wrapper.write_text(f'#!/bin/sh\nexec "{sys.executable}" "{FAKE_DOCKER}" "$@"\n')
            wrapper.chmod(0o755)
        return str(wrapper)

    @property
    def fake_iptables(self) -> str:
        """An `iptables` that records each call as a line of iptables.log and has no rule yet (-C fails)."""
        return self._recording_firewall("iptables")

    @property
    def fake_ip6tables(self) -> str:
        """The same for `ip6tables`, logging to ip6tables.log; docker made its DOCKER-USER chain there."""
        return self._recording_firewall("ip6tables")

    @property
    def fake_mount(self) -> str:
        """A `mount` that records each call as a line of mount.log and succeeds (root is not needed)."""
        wrapper = self.tmp / "mount"
        if not wrapper.exists():
            wrapper.write_text(f'#!/bin/sh\necho "$*" >> "{self.tmp}/mount.log"\nexit 0\n')
            wrapper.chmod(0o755)
        return str(wrapper)

    def mount_calls(self) -> list[str]:
        log = self.tmp / "mount.log"
        return log.read_text().splitlines() if log.exists() else []

    def _recording_firewall(self, name: str) -> str:
        wrapper = self.tmp / name
        if not wrapper.exists():
            wrapper.write_text(f'#!/bin/sh\necho "$*" >> "{self.tmp}/{name}.log"\n'
                               'for a in "$@"; do [ "$a" = -C ] && exit 1; done\nexit 0\n')
            wrapper.chmod(0o755)
        return str(wrapper)

    def iptables_calls(self, tool: str = "iptables") -> list[str]:
        log = self.tmp / f"{tool}.log"
        return log.read_text().splitlines() if log.exists() else []

    @property
    def workdir(self) -> Path:
        return self.tmp / f"work-{self.vm_name}"

    def env(self, docker: str) -> dict[str, str]:
        env = {
            "PATH": f"{Path(sys.executable).parent}:{os.environ.get('PATH', '/usr/bin:/bin')}",
            "HOME": str(self.tmp),
            "SPOTCRON_METADATA_URL": self.metadata.url_for(self.vm_name),
            "SPOTCRON_STORAGE_URL": self.storage_url or self.bucket.url,
            "SPOTCRON_DOCKER": docker,
            "SPOTCRON_IPTABLES": self.fake_iptables,
            "SPOTCRON_IP6TABLES": self.fake_ip6tables,
            "SPOTCRON_MOUNT": self.fake_mount,
            "SPOTCRON_LOG_INTERVAL": "1",
            "SPOTCRON_WORKDIR": str(self.workdir),
            "SPOTCRON_CHECKPOINT_INTERVAL": "1",
            "SPOTCRON_RETRIES": "3",
            "SPOTCRON_CALLBACK_RETRIES": "3",
            "SPOTCRON_BACKOFF_MS": "50",
            "SPOTCRON_BACKOFF_MAX_MS": "200",
            "SPOTCRON_STOP_GRACE": "3",
            "SPOTCRON_POLL": "0.1",
            "SPOTCRON_PREEMPT_WAIT": "5",
            "SPOTCRON_HTTP_TIMEOUT": "10",
            "FAKE_DOCKER_LOG": str(self.tmp / "docker.jsonl"),
            "FAKE_DOCKER_STATE": str(self.tmp / "docker-state"),
        }
        env.update(self.extra_env)
        return env

    def start(self, descriptor: RunDescriptor, *, docker: str = "none",
              preempted: bool = False) -> subprocess.Popen[str]:
        return self.start_with({"spotcron-run": descriptor.to_metadata()}, docker=docker, preempted=preempted)

    def start_with(self, attributes: dict[str, str], *, docker: str = "none",
                   preempted: bool = False) -> subprocess.Popen[str]:
        """Register the VM with these instance attributes and start the runner for it."""
        self.metadata.register(self.vm_name, "us-central1-a", attributes)
        if preempted:
            self.metadata.set_preempted(self.vm_name)
        return subprocess.Popen(["bash", str(RUNNER)], env=self.env(docker), cwd=str(self.tmp),
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                                start_new_session=True)

    def wait(self, proc: subprocess.Popen[str], started: float, timeout: float = 40) -> RunResult:
        try:
            _, stderr = proc.communicate(timeout=timeout)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            _, stderr = proc.communicate()
            raise AssertionError(f"runner did not finish in {timeout}s; its log:\n{stderr}") from None
        return RunResult(proc.returncode, stderr, time.monotonic() - started, proc.pid)

    def run(self, descriptor: RunDescriptor, *, docker: str = "none", timeout: float = 40) -> RunResult:
        started = time.monotonic()
        return self.wait(self.start(descriptor, docker=docker), started, timeout)

    def wait_for(self, predicate: Callable[[], bool], timeout: float = 15, what: str = "condition") -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if predicate():
                return
            time.sleep(0.05)
        raise AssertionError(f"timed out waiting for {what}")

    def docker_calls(self) -> list[list[str]]:
        log = self.tmp / "docker.jsonl"
        if not log.exists():
            return []
        return [json.loads(line)["argv"] for line in log.read_text().splitlines()]

    def objects(self, prefix: str = "runs/hello/20260101-1000/") -> dict[str, bytes]:
        return {name: self.bucket.read(name) or b"" for name in self.bucket.names(prefix)}


def live_group_members(pgid: int) -> list[str]:
    """Processes (not zombies) still in process group `pgid`."""
    found = []
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            text = stat.read_text()
        except OSError:
            continue
        comm_end = text.rfind(")")
        fields = text[comm_end + 2:].split()
        if fields[0] != "Z" and int(fields[2]) == pgid:
            found.append(text[: comm_end + 1])
    return found
