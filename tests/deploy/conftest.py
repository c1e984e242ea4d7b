"""Fixtures for deploy tests: the fake Google Cloud, settings, a source tree, and a deployer."""

from __future__ import annotations

import os
import shutil
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from spotcron.core.loader import load_jobs
from spotcron.core.settings import Settings
from spotcron.core.spec import JobSpec
from spotcron.deploy.apply import DeployResult, PlanResult, SilentReporter, compute_plan, run_deploy
from spotcron.deploy.planner import Action
from spotcron.deploy.source import SourceBundle, build_source
from spotcron.gcp.admin.calls import Caller
from spotcron.gcp.admin.settling import Settling
from tests.fakes.deploy.cloud import FakeCloud
from tests.gcp.fixtures import pubsub_host  # noqa: F401  (the shared Pub/Sub emulator, for test_topic_behaviour)

PROJECT = "demo-proj"
BUCKET = "demo-proj-spotcron"
JOBS_DIR = Path(__file__).parent / "jobs"
STACK = f"project: {PROJECT}\nregion: us-central1\nbucket: {BUCKET}\n"


def user_repository(root: Path, monkeypatch: pytest.MonkeyPatch, stack: str = STACK, *,
                    jobs: tuple[str, ...] | None = None) -> Path:
    """`root` as a user's repository the CLI runs in: infra/stack.yaml and jobs/ (the example jobs
    here, or only the named files), with no SPOTCRON_* setting leaking in from this shell."""
    monkeypatch.chdir(root)
    for name in [n for n in os.environ if n.startswith("SPOTCRON_")]:
        monkeypatch.delenv(name)
    (root / "infra").mkdir()
    (root / "infra" / "stack.yaml").write_text(stack)
    if jobs is None:
        shutil.copytree(JOBS_DIR, root / "jobs")
    else:
        (root / "jobs").mkdir()
        for name in jobs:
            shutil.copy(JOBS_DIR / name, root / "jobs" / name)
    return root


def make_settings(**changes: Any) -> Settings:
    return Settings(project=PROJECT, bucket=BUCKET, **changes)


def quick_caller(attempts: int = 3) -> Caller:
    """Retries without sleeping, so injected failures fail fast."""
    return Caller(PROJECT, attempts=attempts, sleep=lambda seconds: None)


def make_source_root(root: Path, main: str = "def start_job(event):\n    pass\n") -> Path:
    (root / "functions").mkdir(parents=True, exist_ok=True)
    (root / "functions" / "main.py").write_text(main)
    (root / "functions" / "requirements.txt").write_text("functions-framework>=3.8,<4\n")
    (root / "spotcron").mkdir(exist_ok=True)
    (root / "spotcron" / "__init__.py").write_text("")
    (root / "vm_images" / "runner").mkdir(parents=True, exist_ok=True)
    (root / "vm_images" / "runner" / "runner.sh").write_text("#!/bin/sh\n")
    return root


@pytest.fixture
def cloud() -> Iterator[FakeCloud]:
    fake = FakeCloud(PROJECT).start()
    try:
        yield fake
    finally:
        fake.stop()


@pytest.fixture
def settings() -> Settings:
    return make_settings()


@pytest.fixture
def source(tmp_path: Path) -> SourceBundle:
    return build_source(make_source_root(tmp_path / "src"))


@pytest.fixture
def jobs_dir(tmp_path: Path) -> Path:
    """A private copy of tests/deploy/jobs that a test may edit."""
    target = tmp_path / "jobs"
    shutil.copytree(JOBS_DIR, target)
    return target


class RecordingReporter(SilentReporter):
    def __init__(self) -> None:
        self.plans: list[list[Action]] = []
        self.notes: list[str] = []
        self.advanced: list[tuple[str, str | None]] = []

    def show_plan(self, actions: list[Action]) -> None:
        self.plans.append(actions)

    def advance(self, action: Action, error: str | None) -> None:
        self.advanced.append((action.title, error))

    def note(self, text: str) -> None:
        self.notes.append(text)


@dataclass
class Deployer:
    """run_deploy and compute_plan against the fake, with test-friendly knobs."""

    cloud: FakeCloud
    settings: Settings
    source: SourceBundle
    concurrency: int = 8
    reporter: RecordingReporter = field(default_factory=RecordingReporter)

    def jobs(self, directory: Path) -> list[JobSpec]:
        return load_jobs([directory])

    def deploy(self, jobs: list[JobSpec], *, caller: Caller | None = None, dry_run: bool = False,
               settings: Settings | None = None) -> DeployResult:
        return run_deploy(settings or self.settings, jobs, self.source, self.cloud.clients(), confirm=lambda a: True,
                          reporter=self.reporter, dry_run=dry_run, concurrency=self.concurrency,
                          caller=caller or quick_caller(), poll_initial=0.01,
                          settling=Settling(sleep=self.cloud.clock.sleep))

    def plan(self, jobs: list[JobSpec], settings: Settings | None = None) -> PlanResult:
        with ThreadPoolExecutor(self.concurrency) as pool:
            return compute_plan(settings or self.settings, jobs, self.source.object_name, self.cloud.clients(),
                                quick_caller(), pool)


@pytest.fixture
def deployer(cloud: FakeCloud, settings: Settings, source: SourceBundle) -> Deployer:
    return Deployer(cloud, settings, source)
