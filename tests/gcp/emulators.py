"""Local stand-ins for Google services, started and stopped by tests.

- Pub/Sub: the emulator that ships with the gcloud CLI (`gcloud beta emulators pubsub start`),
  as a child process group that is always killed; absent gcloud or component → EmulatorMissing.

One Pub/Sub emulator is shared by every test directory of a pytest process (reference-counted).
"""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import tempfile
import threading
import time
from collections.abc import Callable
from contextlib import suppress
from dataclasses import dataclass
from pathlib import Path

PROJECT = "test-project"


class EmulatorMissing(Exception):
    """The emulator cannot run on this machine; the message says why (tests skip with it)."""


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def _wait_for_port(port: int, deadline: float, alive: Callable[[], bool] = lambda: True) -> bool:
    while time.monotonic() < deadline:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=0.2).close()
            return True
        except OSError:
            if not alive():
                return False
            time.sleep(0.05)
    return False


@dataclass
class PubSubEmulator:
    host: str  # 127.0.0.1:PORT, what PUBSUB_EMULATOR_HOST would hold
    process: subprocess.Popen
    config_dir: str

    def stop(self) -> None:
        """Stop gcloud and the emulator it started (java), leaving neither running nor unreaped.

        They share the process group of the new session started for gcloud. The emulator is
        stopped first, so gcloud (its parent) reaps it and exits; signalling the group at once
        would orphan java to a PID 1 that, in some containers, never reaps it.
        """
        group = self.process.pid
        for pid in _group_members(group):
            if pid != group:
                _signal(pid, signal.SIGTERM)
        try:
            self.process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            _signal_group(group, signal.SIGTERM)
            try:
                self.process.wait(timeout=5)
            except subprocess.TimeoutExpired:
                _signal_group(group, signal.SIGKILL)
                self.process.wait(timeout=5)
        _signal_group(group, signal.SIGKILL)  # anything still in the group
        shutil.rmtree(self.config_dir, ignore_errors=True)


def _signal(pid: int, sig: int) -> None:
    with suppress(ProcessLookupError):
        os.kill(pid, sig)


def _signal_group(group: int, sig: int) -> None:
    with suppress(ProcessLookupError, PermissionError):
        os.killpg(group, sig)


def _group_members(group: int) -> list[int]:
    """Pids in process group `group` (Linux /proc; elsewhere just the leader)."""
    proc = Path("/proc")
    if not proc.is_dir():
        return [group]
    members = []
    for entry in proc.iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
        except OSError:
            continue
        # pid (comm) state ppid pgrp ...; comm may hold spaces, so split after its ')'.
        fields = stat.rsplit(")", 1)[-1].split()
        if len(fields) > 2 and int(fields[2]) == group:
            members.append(int(entry.name))
    return members


def start_pubsub_emulator(project: str = PROJECT, startup_s: float = 60.0) -> PubSubEmulator:
    gcloud = shutil.which("gcloud")
    if gcloud is None:
        raise EmulatorMissing("the gcloud CLI is not installed (the Pub/Sub emulator ships with it)")
    port = free_port()
    config_dir = tempfile.mkdtemp(prefix="spotcron-gcloud-")
    log = Path(config_dir) / "emulator.log"
    env = dict(os.environ, CLOUDSDK_CONFIG=config_dir, CLOUDSDK_CORE_DISABLE_PROMPTS="1",
               CLOUDSDK_COMPONENT_MANAGER_DISABLE_UPDATE_CHECK="1")
    env.pop("PUBSUB_EMULATOR_HOST", None)
    with open(log, "wb") as out:
        process = subprocess.Popen(
            [gcloud, "beta", "emulators", "pubsub", "start", f"--host-port=127.0.0.1:{port}", f"--project={project}"],
            stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, env=env, start_new_session=True)
    emulator = PubSubEmulator(f"127.0.0.1:{port}", process, config_dir)
    if _wait_for_port(port, time.monotonic() + startup_s, alive=lambda: process.poll() is None):
        return emulator
    output = log.read_text(errors="replace")[-2000:]
    emulator.stop()
    lowered = output.lower()
    if any(hint in lowered for hint in ("component", "not installed", "java", "jre", "invalid choice")):
        raise EmulatorMissing(f"the Pub/Sub emulator could not start here: {output.strip()[-300:]}")
    raise RuntimeError(f"the Pub/Sub emulator did not open 127.0.0.1:{port} in {startup_s:.0f}s:\n{output}")


_shared_lock = threading.Lock()
_shared: dict[str, object] = {"emulator": None, "users": 0, "missing": None}


def acquire_pubsub_emulator() -> PubSubEmulator:
    """The process-wide emulator, started on first use; pair every call with release_pubsub_emulator()."""
    with _shared_lock:
        if _shared["missing"] is not None:
            raise EmulatorMissing(str(_shared["missing"]))
        if _shared["emulator"] is None:
            try:
                _shared["emulator"] = start_pubsub_emulator()
            except EmulatorMissing as exc:
                _shared["missing"] = str(exc)
                raise
        _shared["users"] = int(_shared["users"]) + 1
        return _shared["emulator"]  # type: ignore[return-value]


def release_pubsub_emulator() -> None:
    with _shared_lock:
        _shared["users"] = int(_shared["users"]) - 1
        emulator = _shared["emulator"]
        if _shared["users"] <= 0 and emulator is not None:
            emulator.stop()  # type: ignore[attr-defined]
            _shared["emulator"] = None


def grpc_clients(host: str):
    """(PublisherClient, SubscriberClient) talking plain gRPC to the emulator at `host`."""
    import grpc
    from google.cloud import pubsub_v1
    from google.pubsub_v1.services.publisher.transports import PublisherGrpcTransport
    from google.pubsub_v1.services.subscriber.transports import SubscriberGrpcTransport

    publisher = pubsub_v1.PublisherClient(transport=PublisherGrpcTransport(channel=grpc.insecure_channel(host)))
    subscriber = pubsub_v1.SubscriberClient(transport=SubscriberGrpcTransport(channel=grpc.insecure_channel(host)))
    return publisher, subscriber
