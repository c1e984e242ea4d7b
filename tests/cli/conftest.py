"""Fixtures for the results commands: an in-memory bucket filled with run records, and an invoker.

The Pub/Sub emulator fixtures are the shared ones of tests/gcp (one emulator per pytest process).
"""

from __future__ import annotations

import contextlib
import hashlib
import json
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner, Result

from spotcron.cli import SpotcronGroup
from spotcron.cli.run_commands import COMMANDS, RunsContext
from spotcron.core import layout
from spotcron.core.runs import Attempt, RunRecord, vm_name
from spotcron.engine.store import RunStore
from spotcron.testing.memory import MemoryBlobs
from tests.gcp.fixtures import PubSubTopic, pubsub_host, pubsub_topic  # noqa: F401

NOW = datetime(2026, 3, 2, 12, 0, tzinfo=UTC)
ROOT = Path(__file__).resolve().parents[2]


def make_attempt(job: str, run_id: str, number: int = 1, *, start: datetime, seconds: float | None = 60,
                 zone: str = "us-central1-a", machine_type: str = "e2-small", spot: bool = True,
                 outcome: str | None = "exited", exit_code: int | None = 0, gpu: str | None = None) -> Attempt:
    ended = start + timedelta(seconds=seconds) if seconds is not None else None
    return Attempt(number=number, vm_name=vm_name(job, run_id, number), zone=zone, machine_type=machine_type,
                   provisioning_model="SPOT" if spot else "STANDARD", gpu=gpu,
                   created_at=start - timedelta(seconds=30), started_at=start, finished_at=ended,
                   deleted_at=ended + timedelta(seconds=10) if ended else None,
                   outcome=outcome if ended else None, exit_code=exit_code if ended else None)


def make_record(job: str, run_id: str, state: str = "succeeded", *, created: datetime,
                attempts: tuple[Attempt, ...] | None = None, cost: float | None = None,
                exit_code: int | None = None, reason: str | None = None, variant: str | None = None,
                deadline: datetime | None = None) -> RunRecord:
    if attempts is None:
        attempts = (make_attempt(job, run_id, start=created + timedelta(seconds=40),
                                 seconds=60 if state not in ("running", "starting", "scheduled") else None,
                                 exit_code=exit_code),)
    results_prefix = layout.attempt_prefix(job, run_id, attempts[-1].number) if state == "succeeded" else None
    return RunRecord(job=job, run_id=run_id, variant=variant, state=state, reason=reason, created_at=created,
                     updated_at=created, attempts=attempts, exit_code=exit_code, cost_usd=cost,
                     results_prefix=results_prefix, deadline=deadline)


def manifest_bytes(files: dict[str, bytes], *, exit_code: int = 0, logs: bytes = b"") -> bytes:
    """A manifest as the runner writes it: every object of the attempt, relative to the attempt folder."""
    def entry(name: str, data: bytes) -> dict[str, Any]:
        return {"name": name, "size": len(data), "sha256": hashlib.sha256(data).hexdigest()}

    listed = [entry("logs.txt", logs)] + [entry(f"results/{name}", data) for name, data in files.items()]
    return json.dumps({"version": 1, "status": "exited", "exit_code": exit_code, "files": listed}).encode()


@dataclass
class Bucket:
    """A MemoryBlobs with helpers to put runs, logs and results where the runner would."""

    blobs: MemoryBlobs = field(default_factory=lambda: MemoryBlobs("spotcron-test"))

    @property
    def store(self) -> RunStore:
        return RunStore(self.blobs)

    def add(self, record: RunRecord) -> RunRecord:
        assert self.store.create(record)
        return record

    def logs(self, job: str, run_id: str, attempt: int, text: str) -> None:
        self.blobs.write(layout.logs(job, run_id, attempt), text.encode(), content_type="text/plain")

    def part(self, job: str, run_id: str, attempt: int, offset: int, text: str) -> None:
        """A piece of the log the runner ships while the job runs, starting at byte `offset`."""
        self.blobs.write(layout.log_part(job, run_id, attempt, offset), text.encode(), content_type="text/plain")

    def results(self, job: str, run_id: str, attempt: int, files: dict[str, bytes], *, manifest: bool = True) -> None:
        for name, data in files.items():
            self.blobs.write(layout.results_prefix(job, run_id, attempt) + name, data)
        if manifest:
            self.blobs.write(layout.manifest(job, run_id, attempt), manifest_bytes(files))


@pytest.fixture
def bucket() -> Bucket:
    return Bucket()


@dataclass
class Sleeps:
    """A sleep that runs the next scripted change to the bucket instead of waiting."""

    steps: list[Callable[[], None]] = field(default_factory=list)
    calls: list[float] = field(default_factory=list)

    def __call__(self, seconds: float) -> None:
        self.calls.append(seconds)
        if len(self.calls) > 50:
            raise AssertionError("--follow did not stop")
        if self.steps:
            self.steps.pop(0)()


@pytest.fixture
def sleeps() -> Sleeps:
    return Sleeps()


@pytest.fixture
def context(bucket: Bucket, sleeps: Sleeps) -> RunsContext:
    return RunsContext(open_blobs=lambda name, state_dir: contextlib.nullcontext(bucket.blobs),
                       now=lambda: NOW, sleep=sleeps)


def make_cli() -> SpotcronGroup:
    """The commands on a root group of their own: the real error rendering, nothing else."""
    group = SpotcronGroup("spotcron")
    for command in COMMANDS:
        group.add_command(command)
    return group


@pytest.fixture
def invoke(context: RunsContext, tmp_path, monkeypatch) -> Callable[..., Result]:
    """Run `spotcron ARGS` from an empty directory with a wide terminal and no SPOTCRON_* leaking in."""
    monkeypatch.chdir(tmp_path)
    for name in ("SPOTCRON_BUCKET", "SPOTCRON_STATE_DIR", "SPOTCRON_PROJECT", "SPOTCRON_JOBS", "SPOTCRON_STACK",
                 "SPOTCRON_START_TOPIC", "PUBSUB_EMULATOR_HOST"):
        monkeypatch.delenv(name, raising=False)
    cli = make_cli()

    def run(*args: str, obj: Any = None, env: dict[str, str] | None = None, input: str | None = None) -> Result:
        return CliRunner().invoke(cli, list(args), obj=obj or context, env={"COLUMNS": "220", **(env or {})},
                                  input=input, catch_exceptions=False)

    return run
