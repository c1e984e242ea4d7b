"""A job's image is built as its own account into its own repository, apart from the functions'.

A job's Dockerfile runs inside its Cloud Build with the token of the account the build runs as
(`serviceAccount`, https://cloud.google.com/build/docs/securing-builds/configure-user-specified-service-accounts).
These tests deploy against the strict fakes, whose IAM (tests/fakes/deploy/access.py) decides each
push (tests/fakes/cloudbuild.py) by the account the build names.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from google.auth.credentials import AnonymousCredentials

from spotcron.core import images
from spotcron.core.spec import JobSpec
from spotcron.gcp.admin.cloudbuild import BuildFailed, CloudBuilder, make_client
from spotcron.gcp.storage import GcsBlobs
from tests.deploy.conftest import BUCKET, JOBS_DIR, PROJECT, Deployer, make_settings
from tests.deploy.test_job_accounts import (
    JOB_ACCOUNT,
    OWN_BUILT_REPOSITORY,
    OWN_REPOSITORY,
    create_account,
    name_account,
)
from tests.fakes.cloudbuild import FakeCloudBuild
from tests.fakes.deploy.cloud import FakeCloud

LOCATION = f"projects/{PROJECT}/locations/us-central1"
FUNCTIONS_REPOSITORY = f"{LOCATION}/repositories/spotcron"
JOBS_REPOSITORY = f"{LOCATION}/repositories/spotcron-jobs"  # where owners push prebuilt images
BUILT_REPOSITORY = f"{LOCATION}/repositories/spotcron-built"  # where deploy's builds push
BUILD = f"spotcron-build@{PROJECT}.iam.gserviceaccount.com"
JOB_BUILD = f"spotcron-job-build@{PROJECT}.iam.gserviceaccount.com"
VM = f"spotcron-vm@{PROJECT}.iam.gserviceaccount.com"
DOWNLOAD = "artifactregistry.repositories.downloadArtifacts"


def _deployed(deployer: Deployer, cloud: FakeCloud, jobs: Path = JOBS_DIR) -> None:
    deployer.deploy(deployer.jobs(jobs))
    cloud.clock.advance(cloud.access.grant_delay_s)  # the last grants have propagated


def _may(cloud: FakeCloud, email: str, permission: str, repository: str) -> bool:
    return cloud.access.allowed(f"serviceAccount:{email}", permission, repository,
                                [cloud.registry.policies.policy(repository),
                                 cloud.project_policies.policy(f"projects/{PROJECT}")])


def _reads(cloud: FakeCloud, email: str, name: str) -> bool:
    bucket = f"projects/_/buckets/{BUCKET}"
    return cloud.access.allowed(f"serviceAccount:{email}", "storage.objects.get", f"{bucket}/objects/{name}",
                                [cloud.storage.policies.policy(bucket),
                                 cloud.project_policies.policy(f"projects/{PROJECT}")])


def test_the_job_build_account_writes_the_built_repository_and_never_the_functions_nor_the_owners(
        deployer: Deployer, cloud: FakeCloud) -> None:
    _deployed(deployer, cloud)
    assert {r.rsplit("/", 1)[-1] for r in cloud.registry.repositories} >= {"spotcron", "spotcron-jobs", "spotcron-built"}
    assert JOB_BUILD in cloud.iam.accounts
    assert cloud.may_push(JOB_BUILD, BUILT_REPOSITORY)
    assert not cloud.may_push(JOB_BUILD, JOBS_REPOSITORY)  # owners' prebuilt images: no Dockerfile moves their tags
    assert not cloud.may_push(JOB_BUILD, FUNCTIONS_REPOSITORY)  # the functions' images and build cache
    assert cloud.may_push(BUILD, FUNCTIONS_REPOSITORY)
    assert not cloud.may_push(BUILD, JOBS_REPOSITORY)  # the functions' builder has no business there
    assert not cloud.may_push(BUILD, BUILT_REPOSITORY)
    # It reads the build contexts and nothing else of the bucket: not the functions' sources, not runs.
    assert _reads(cloud, JOB_BUILD, "deploy/build-0123abcd.tar.gz")
    assert not _reads(cloud, JOB_BUILD, "deploy/functions-0123abcd.zip")
    assert not _reads(cloud, JOB_BUILD, "runs/bot/2026-01-01T00:00:00Z/record.json")


def test_the_vm_account_pulls_job_images_and_not_the_functions_images(deployer: Deployer, cloud: FakeCloud) -> None:
    _deployed(deployer, cloud)
    assert _may(cloud, VM, DOWNLOAD, JOBS_REPOSITORY) and _may(cloud, VM, DOWNLOAD, BUILT_REPOSITORY)
    assert not _may(cloud, VM, DOWNLOAD, FUNCTIONS_REPOSITORY)


def test_a_jobs_own_account_reads_only_its_own_jobs_repository(deployer: Deployer, cloud: FakeCloud,
                                                                jobs_dir) -> None:
    create_account(cloud)
    name_account(jobs_dir)
    _deployed(deployer, cloud, jobs_dir)
    assert _may(cloud, JOB_ACCOUNT, DOWNLOAD, OWN_REPOSITORY) and _may(cloud, JOB_ACCOUNT, DOWNLOAD, OWN_BUILT_REPOSITORY)
    assert not _may(cloud, JOB_ACCOUNT, DOWNLOAD, JOBS_REPOSITORY)  # the VM account's jobs' images
    assert not _may(cloud, JOB_ACCOUNT, DOWNLOAD, BUILT_REPOSITORY)
    assert not _may(cloud, JOB_ACCOUNT, DOWNLOAD, FUNCTIONS_REPOSITORY)
    assert not _may(cloud, JOB_ACCOUNT, "artifactregistry.repositories.uploadArtifacts", OWN_REPOSITORY)
    assert not _may(cloud, VM, DOWNLOAD, OWN_REPOSITORY) and not _may(cloud, VM, DOWNLOAD, OWN_BUILT_REPOSITORY)
    assert cloud.may_push(JOB_BUILD, OWN_BUILT_REPOSITORY) and not cloud.may_push(JOB_BUILD, OWN_REPOSITORY)


@pytest.fixture
def build_server(cloud: FakeCloud) -> Iterator[tuple[FakeCloudBuild, str]]:
    server = cloud.cloud_build()
    endpoint = server.start()
    try:
        yield server, endpoint
    finally:
        server.stop()


def test_a_build_runs_as_the_job_build_account_and_cannot_push_into_the_functions_repository(
        deployer: Deployer, cloud: FakeCloud, build_server, tmp_path: Path) -> None:
    from spotcron.cli.deploy import _default_builder

    _deployed(deployer, cloud)
    server, endpoint = build_server
    settings = make_settings()
    default = _default_builder(settings, AnonymousCredentials())
    assert default.service_account == JOB_BUILD  # what `spotcron deploy` builds with
    assert settings.registry.endswith(f"/{PROJECT}/spotcron-jobs")
    assert settings.built_registry_for(None).endswith(f"/{PROJECT}/spotcron-built")
    context = tmp_path / "images" / "bot"
    context.mkdir(parents=True)
    (context / "Dockerfile").write_text("FROM python:3.12-slim\n")
    job = JobSpec.model_validate({"name": "bot", "schedule": "0 * * * *", "build": {"context": "images/bot"}})
    [build] = images.plan_builds([job], tmp_path)
    builder = CloudBuilder(PROJECT, "us-central1", GcsBlobs(BUCKET, client=cloud.clients().storage),
                           service_account=default.service_account, wait_s=30,
                           client=make_client(AnonymousCredentials(), endpoint=endpoint))
    assert builder.build(build, build.image(settings.built_registry_for(None))).startswith("sha256:")
    assert server.requests[-1]["serviceAccount"] == f"projects/{PROJECT}/serviceAccounts/{JOB_BUILD}"
    with pytest.raises(BuildFailed, match="PUSH_FAILED"):
        builder._build_in_location(build, build.image(f"us-central1-docker.pkg.dev/{PROJECT}/spotcron"))
    with pytest.raises(BuildFailed, match="PUSH_FAILED"):  # nor where owners push prebuilt images
        builder._build_in_location(build, build.image(settings.registry))


def test_an_image_in_the_functions_repository_is_refused_before_any_call(deployer: Deployer, jobs_dir) -> None:
    from spotcron.core.errors import ConfigError
    from spotcron.deploy.validate import preflight

    bot = jobs_dir / "bot.yaml"
    bot.write_text(bot.read_text().replace(f"us-central1-docker.pkg.dev/{PROJECT}/spotcron-jobs/bot:latest",
                                           f"us-central1-docker.pkg.dev/{PROJECT}/spotcron/bot:latest"))
    with pytest.raises(ConfigError) as caught:
        preflight(make_settings(), deployer.jobs(jobs_dir), None, {"bot": Path("jobs/bot.yaml")})
    [problem] = [str(p) for p in caught.value.problems]
    assert "which reads only us-central1-docker.pkg.dev/demo-proj/spotcron-jobs " in problem
    assert f"push the image to us-central1-docker.pkg.dev/{PROJECT}/spotcron-jobs/IMAGE:TAG" in problem


def test_a_stack_deployed_before_loses_the_vm_readers_on_the_functions_repository(deployer: Deployer,
                                                                                 cloud: FakeCloud) -> None:
    jobs = deployer.jobs(JOBS_DIR)
    deployer.deploy(jobs)
    # What an earlier deploy granted: the VM account read the one repository the functions shared.
    policy = cloud.registry.policies.get(FUNCTIONS_REPOSITORY)
    policy["bindings"].append({"role": "roles/artifactregistry.reader", "members": [f"serviceAccount:{VM}"]})
    cloud.registry.policies.set(FUNCTIONS_REPOSITORY, policy)
    changes = {a.title: a.changes for a in deployer.plan(jobs).actions}
    assert changes == {"update iam_policy repository:spotcron": {
        "roles/artifactregistry.reader": ((f"serviceAccount:{VM}",), ())}}
    deployer.deploy(jobs)
    cloud.clock.advance(cloud.access.grant_delay_s)
    assert not _may(cloud, VM, DOWNLOAD, FUNCTIONS_REPOSITORY)
