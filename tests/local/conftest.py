"""Local mode end to end: the real runner script as processes, the emulator bucket, the functions."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from spotcron.local.stack import LocalStack

TCP_LISTEN = "0A"  # the state column of /proc/net/tcp


def no_container_runtime(image: str) -> None:
    return None  # force local.command: the tests must not depend on docker or podman


def spotcron_processes(state_dir: Path) -> list[int]:
    """Processes whose environment points into `state_dir`: runners and what they started."""
    marker = f"SPOTCRON_LOCAL_VM={state_dir}".encode()
    found = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/environ", "rb") as handle:
                if marker in handle.read():
                    with open(f"/proc/{entry}/stat") as stat:
                        if stat.read().split()[2] != "Z":  # zombies are already dead
                            found.append(int(entry))
        except OSError:
            continue
    return found


def listening_here(url: str) -> bool:
    """Whether this process still holds a listening socket on `url`'s port.

    Not "can something be reached there": once our server closes its port, any process on the
    machine may listen on it again, which says nothing about our stack. Our own sockets are
    the file descriptors of this process; the kernel's TCP tables say which of them listen where.
    """
    port = int(url.removeprefix("http://").rstrip("/").split("/")[0].rsplit(":", 1)[1])
    ours = set()
    for fd in os.listdir("/proc/self/fd"):
        try:
            target = os.readlink(f"/proc/self/fd/{fd}")
        except OSError:
            continue  # closed since the listing
        if target.startswith("socket:["):
            ours.add(target[len("socket:["):-1])
    for table in ("/proc/self/net/tcp", "/proc/self/net/tcp6"):
        try:
            with open(table) as rows:
                next(rows)  # the header
                for row in rows:
                    fields = row.split()
                    local, state, inode = fields[1], fields[3], fields[9]
                    if state == TCP_LISTEN and int(local.rsplit(":", 1)[1], 16) == port and inode in ours:
                        return True
        except FileNotFoundError:
            continue  # no IPv6 here
    return False


@pytest.fixture
def make_stack(tmp_path):
    """Start a LocalStack on tmp state; on teardown assert nothing was left behind."""
    stacks = []

    def make(**kwargs) -> LocalStack:
        kwargs.setdefault("sweep_interval", 2)
        kwargs.setdefault("grace", 4)
        stack = LocalStack(tmp_path / "state", environ=dict(os.environ), cwd=tmp_path,
                           runtime_for=no_container_runtime, **kwargs).start()
        stacks.append((stack, [stack.bucket.url, stack.settings.job_done_url, stack.metadata.base_url]))
        return stack

    yield make
    for stack, urls in stacks:
        stack.stop()
        assert spotcron_processes(tmp_path / "state") == [], "runner processes left behind"
        assert [u for u in urls if listening_here(u)] == [], "ports left open"


def python_job(code: str, *, timeout: str = "2m", extra: str = "") -> str:
    """A job file whose local command runs `code` with python3 (no container); `extra`: more
    top-level lines of the spec."""
    return (f'schedule: "0 3 * * *"\nimage: spotcron/test:latest\ntimeout: {timeout}\nmachine: {{type: e2-small}}\n'
            f"{extra}local:\n  command: {json.dumps(['python3', '-c', code])}\n")


def write_job(jobs: Path, name: str, body: str) -> Path:
    jobs.mkdir(parents=True, exist_ok=True)
    path = jobs / f"{name}.yaml"
    path.write_text(body)
    return path
