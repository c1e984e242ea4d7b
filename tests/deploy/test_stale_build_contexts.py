"""Deploy deletes the build contexts an interrupted deploy left in the results bucket before it
builds, keeping its own and one young enough to serve a build still under way."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from spotcron.core import images
from spotcron.core.spec import JobSpec
from spotcron.deploy.builds import build_missing, look_up
from spotcron.gcp.admin.cloudbuild import STALE_CONTEXT_S, CloudBuilder, make_client
from spotcron.testing.memory import FakeClock, MemoryBlobs
from tests.deploy.conftest import BUCKET, PROJECT
from tests.fakes.cloudbuild import FakeCloudBuild

REGISTRY = f"us-central1-docker.pkg.dev/{PROJECT}/spotcron-built"
BUILD_ACCOUNT = f"spotcron-job-build@{PROJECT}.iam.gserviceaccount.com"
OLD = "deploy/build-0123456789abcdef0123456789abcdef.tar.gz"
YOUNG = "deploy/build-fedcba9876543210fedcba9876543210.tar.gz"
SOURCE = "deploy/source-0123456789abcdef.zip"  # the functions' source: never a build context


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock()


@pytest.fixture
def blobs(clock: FakeClock) -> MemoryBlobs:
    return MemoryBlobs(BUCKET, clock=clock)


@pytest.fixture
def fake(blobs: MemoryBlobs) -> Iterator[FakeCloudBuild]:
    def source(bucket: str, name: str) -> bytes | None:
        found = blobs.read(name) if bucket == blobs.bucket else None
        return found.data if found is not None else None

    server = FakeCloudBuild(PROJECT, source, write_log=lambda bucket, name, data: blobs.write(name, data))
    server.endpoint = server.start()  # type: ignore[attr-defined]
    yield server
    server.stop()


def test_a_context_left_behind_is_deleted_before_the_next_build(tmp_path: Path, fake: FakeCloudBuild,
                                                                blobs: MemoryBlobs, clock: FakeClock) -> None:
    from google.auth.credentials import AnonymousCredentials

    blobs.write(OLD, b"another job's folder, private files and all")
    blobs.write(SOURCE, b"the functions' source")
    clock.advance(STALE_CONTEXT_S + 1)
    blobs.write(YOUNG, b"a build another deploy runs now")
    client = make_client(AnonymousCredentials(), endpoint=fake.endpoint)  # type: ignore[attr-defined]
    builder = CloudBuilder(PROJECT, "us-central1", blobs, client=client, service_account=BUILD_ACCOUNT, wait_s=30)
    builder.now = clock.now
    folder = tmp_path / "images" / "bot"
    folder.mkdir(parents=True)
    (folder / "Dockerfile").write_text("FROM python:3.12-slim\n")
    job = JobSpec.model_validate({"name": "bot", "schedule": "0 * * * *", "build": "images/bot",
                                  "image": "bot"})
    [status] = look_up(images.plan_builds([job], tmp_path), builder, REGISTRY)
    build_missing([status], builder)
    assert blobs.peek(OLD) is None, f"{OLD} stays for every later build's Dockerfile to read"
    assert blobs.peek(YOUNG) is not None and blobs.peek(SOURCE) is not None
