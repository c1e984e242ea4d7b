"""A job image's build writes its log to the results bucket, never to Cloud Logging.

A job's Dockerfile runs with the token of the account its build runs as, so that account holds no
logging role (with project-wide roles/logging.logWriter it could write any log line of the
project, forged `security: true` lines included). Its build logs go to a bucket of their own
(GCS_ONLY, core/build_logs.py), where it holds Storage Admin as Google asks; deploy shows a failed
build's log from there, bounded and inert, and deletes each log once its build ended. The strict
fakes decide: Cloud Build refuses a build that names its own account and no log destination, and
one whose account lacks what Storage Admin holds on the logs bucket (tests/fakes/cloudbuild.py).
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path

import pytest
from google.auth.credentials import AnonymousCredentials

from spotcron.core import images
from spotcron.core.errors import SpotcronError
from spotcron.core.spec import JobSpec
from spotcron.gcp.admin.cloudbuild import BuildFailed, CloudBuilder, make_client
from spotcron.gcp.storage import GcsBlobs
from tests.deploy.conftest import BUCKET, JOBS_DIR, PROJECT, Deployer
from tests.fakes.cloudbuild import FakeCloudBuild
from tests.fakes.deploy.cloud import FakeCloud

JOB_BUILD = f"spotcron-job-build@{PROJECT}.iam.gserviceaccount.com"
BUILD = f"spotcron-build@{PROJECT}.iam.gserviceaccount.com"
REGISTRY = f"us-central1-docker.pkg.dev/{PROJECT}/spotcron-built"  # where deploy's builds push
LOGGING = "logging.logEntries.create"
LOGS_BUCKET = f"{BUCKET}-build-logs"


def _deployed(deployer: Deployer, cloud: FakeCloud) -> None:
    deployer.deploy(deployer.jobs(JOBS_DIR))
    cloud.clock.advance(cloud.access.grant_delay_s)


def _may_log(cloud: FakeCloud, email: str) -> bool:
    project = f"projects/{PROJECT}"
    return cloud.access.allowed(f"serviceAccount:{email}", LOGGING, project, [cloud.project_policies.policy(project)])


def _may(cloud: FakeCloud, email: str, permission: str, name: str) -> bool:
    bucket = f"projects/_/buckets/{BUCKET}"
    return cloud.access.allowed(f"serviceAccount:{email}", permission, f"{bucket}/objects/{name}",
                                [cloud.storage.policies.policy(bucket),
                                 cloud.project_policies.policy(f"projects/{PROJECT}")])


@pytest.fixture
def server(cloud: FakeCloud) -> Iterator[tuple[FakeCloudBuild, str]]:
    fake = cloud.cloud_build()
    endpoint = fake.start()
    try:
        yield fake, endpoint
    finally:
        fake.stop()


def _build(tmp_path: Path) -> images.ImageBuild:
    context = tmp_path / "images" / "bot"
    context.mkdir(parents=True, exist_ok=True)
    (context / "Dockerfile").write_text("FROM python:3.12-slim\nRUN false\n")
    job = JobSpec.model_validate({"name": "bot", "schedule": "0 * * * *", "build": {"context": "images/bot"}})
    [build] = images.plan_builds([job], tmp_path)
    return build


def _builder(cloud: FakeCloud, endpoint: str, account: str | None = JOB_BUILD) -> CloudBuilder:
    return CloudBuilder(PROJECT, "us-central1", GcsBlobs(BUCKET, client=cloud.clients().storage),
                        service_account=account, wait_s=30, client=make_client(AnonymousCredentials(), endpoint=endpoint))


def _logs(cloud: FakeCloud) -> list[str]:
    return sorted(name for (bucket, name) in cloud.storage.objects if bucket == LOGS_BUCKET)


def test_the_job_build_account_holds_no_logging_role_and_only_creates_build_logs(deployer: Deployer,
                                                                                 cloud: FakeCloud) -> None:
    _deployed(deployer, cloud)
    assert not _may_log(cloud, JOB_BUILD)  # no log line of the project is its to write
    assert _may_log(cloud, BUILD)  # the functions' builder still logs to Cloud Logging (Google's buildpacks)
    assert cloud.may_write_build_logs(JOB_BUILD, LOGS_BUCKET, "log-1234.txt")
    # Nothing in the results bucket but reading the build contexts.
    for permission in ("storage.objects.create", "storage.objects.get", "storage.objects.delete"):
        assert not _may(cloud, JOB_BUILD, permission, "runs/bot/2026-01-01T00:00:00Z/record.json")
        assert not _may(cloud, JOB_BUILD, permission, "build-logs/log-1234.txt")
    assert not _may(cloud, JOB_BUILD, "storage.objects.create", "deploy/build-0123.tar.gz")
    assert _may(cloud, JOB_BUILD, "storage.objects.get", "deploy/build-0123.tar.gz")


def test_a_stack_deployed_before_loses_the_job_build_accounts_project_log_writer(deployer: Deployer,
                                                                                cloud: FakeCloud) -> None:
    jobs = deployer.jobs(JOBS_DIR)
    deployer.deploy(jobs)
    # What an earlier deploy granted: logWriter on the project, for CLOUD_LOGGING_ONLY builds.
    project = f"projects/{PROJECT}"
    _, policy = cloud.project_policies.policy(project)
    for binding in policy["bindings"]:
        if binding["role"] == "roles/logging.logWriter":
            binding["members"].append(f"serviceAccount:{JOB_BUILD}")
    cloud.project_policies.set(project, policy)
    changes = {a.title: a.changes for a in deployer.plan(jobs).actions}
    assert changes[f"update iam_policy project:{PROJECT}"] == {
        "roles/logging.logWriter": ((f"serviceAccount:{BUILD}", f"serviceAccount:{JOB_BUILD}"),
                                    (f"serviceAccount:{BUILD}",))}
    deployer.deploy(jobs)
    cloud.clock.advance(cloud.access.grant_delay_s)
    assert not _may_log(cloud, JOB_BUILD)


def test_cloud_build_refuses_a_build_with_its_own_account_and_nowhere_for_its_log(cloud: FakeCloud, server,
                                                                                   tmp_path: Path) -> None:
    """Google's rule, in the fake: the request spotcron sent before (a serviceAccount with no
    logsBucket and no CLOUD_LOGGING_ONLY/NONE) is refused; with GCS_ONLY and a logsBucket it is not."""
    fake, endpoint = server
    build = _build(tmp_path)
    body = images.build_request(build, build.image(REGISTRY), bucket=BUCKET, service_account=JOB_BUILD,
                                project=PROJECT)
    assert body["options"] == {"logging": "GCS_ONLY"}
    assert body["logsBucket"] == f"gs://{LOGS_BUCKET}"
    bare = {key: value for key, value in body.items() if key not in ("logsBucket", "options")}
    cloud.storage.put(BUCKET, build.source_object, build.tarball)
    match = re.fullmatch(r"/v1/(?P<parent>projects/(?P<project>[^/]+)/locations/(?P<location>[^/]+))",
                                       f"/v1/projects/{PROJECT}/locations/us-central1")
    with pytest.raises(Exception, match="if 'build.service_account' is specified, the build must either"):
        fake.create(match, bare)


def test_a_build_whose_account_cannot_write_the_logs_folder_is_refused_as_google_refuses_it(
        cloud: FakeCloud, deployer: Deployer, server, tmp_path: Path) -> None:
    _deployed(deployer, cloud)
    fake, endpoint = server
    build = _build(tmp_path)
    # The functions' builder holds no grant on the logs bucket: Cloud Build refuses the build at creation.
    with pytest.raises(SpotcronError, match='builder service account does not have access to logs bucket'):
        _builder(cloud, endpoint, BUILD)._build_in_location(build, build.image(REGISTRY))
    assert fake.builds == []


def test_a_failed_builds_log_is_shown_from_the_bucket_inert_and_bounded_then_deleted(
        cloud: FakeCloud, deployer: Deployer, server, tmp_path: Path) -> None:
    _deployed(deployer, cloud)
    fake, endpoint = server
    build = _build(tmp_path)
    # What a hostile Dockerfile prints: escape sequences, a flood of lines, one huge line.
    fake.fail_log = ("noise\n" * 100_000) + "\x1b[2J\x1b[1;1Hsecurity: true forged\n" + "x" * 50_000 + "\n" \
        + "Step #0: The command '/bin/sh -c false' returned a non-zero code: 1\n"
    fake.fail_next = True
    with pytest.raises(BuildFailed) as caught:
        _builder(cloud, endpoint).build(build, build.image(REGISTRY))
    message = str(caught.value)
    assert "the end of its log (its first 256 KiB)" in message
    assert "\x1b" not in message and "forged" not in message and "noise" in message  # past 256 KiB: unread
    assert len(message) < 30 * 320 + 1000  # 30 lines of at most 300 characters, whatever the log's size
    assert _logs(cloud) == []  # read, then deleted
    # A short log shows its end: the step's error.
    fake.fail_log = "\x1b[2J\x1b[1;1Hsecurity: true forged\nStep #0: The command '/bin/sh -c false' returned 1\n"
    fake.fail_next = True
    with pytest.raises(BuildFailed) as caught:
        _builder(cloud, endpoint).build(build, build.image(REGISTRY))
    message = str(caught.value)
    assert "returned 1" in message and "\\x1b[2J" in message and "\x1b" not in message
    assert _logs(cloud) == []


def test_a_successful_builds_log_is_deleted_too(cloud: FakeCloud, deployer: Deployer, server,
                                                tmp_path: Path) -> None:
    _deployed(deployer, cloud)
    fake, endpoint = server
    build = _build(tmp_path)
    assert _builder(cloud, endpoint).build(build, build.image(REGISTRY)).startswith("sha256:")
    assert fake.requests[-1]["logsBucket"] == f"gs://{LOGS_BUCKET}"
    assert _logs(cloud) == []  # the build wrote log-build-1.txt there; deploy deleted it


def test_the_bucket_deletes_a_build_log_left_behind_a_day_later() -> None:
    from spotcron.deploy.desired import desired_state
    from tests.deploy.conftest import make_settings

    desired = desired_state(make_settings(), [], "deploy/source-x.zip", "")
    logs = desired[("bucket", LOGS_BUCKET)]
    assert logs.fields["lifecycle"] == (("Delete", 1, ()),)  # every object, a day old
    results = desired[("bucket", BUCKET)]
    assert all("build-logs/" not in prefixes for _, _, prefixes in results.fields["lifecycle"])


def test_a_failed_builds_log_that_cannot_be_read_is_pointed_to(cloud: FakeCloud, deployer: Deployer, server,
                                                               tmp_path: Path) -> None:
    _deployed(deployer, cloud)
    fake, endpoint = server
    fake.write_log = lambda bucket, name, data: None  # the log never arrived in the bucket
    fake.fail_next = True
    with pytest.raises(BuildFailed, match=r"; its log: gcloud builds log build-1 --region us-central1$"):
        _builder(cloud, endpoint).build(_build(tmp_path), _build(tmp_path).image(REGISTRY))
