"""Local mode end to end: the real runner script as processes, the emulator bucket, the functions."""

from __future__ import annotations

import os
import socket
from pathlib import Path

import pytest

from spotcron.local.stack import LocalStack


def no_container_runtime(image: str) -> None:
    return None  # force local.command: the tests must not depend on docker or podman


def spotcron_processes(state_dir: Path) -> list[int]:
    """Processes whose environment points into `state_dir`: runners and what they started."""
    marker = f"SPOTCRON_WORKDIR={state_dir}".encode()
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


def port_open(url: str) -> bool:
    host, port = url.removeprefix("http://").rstrip("/").split("/")[0].split(":")
    with socket.socket() as sock:
        sock.settimeout(0.5)
        return sock.connect_ex((host, int(port))) == 0


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
        assert [u for u in urls if port_open(u)] == [], "ports left open"


def write_job(jobs: Path, name: str, body: str) -> Path:
    jobs.mkdir(parents=True, exist_ok=True)
    path = jobs / f"{name}.yaml"
    path.write_text(body)
    return path
