"""Registry reads per account: a job's VM pulls the images of the jobs that run as its account, no others.

Artifact Registry grants roles per repository, not per image (https://cloud.google.com/artifact-registry/
docs/access-control). Jobs that run as spotcron's VM account keep their images in the jobs'
repository (`spotcron-jobs`), which that account alone reads; a job with its own account gets a
repository of that account (`spotcron-jobs-HASH`), which that account alone reads, and deploy
builds its image there. The strict fakes decide every pull by the repository's reader bindings
(FakeCloud.may_pull), through the real clients deploy wrote them with.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from click.testing import CliRunner
from google.auth.credentials import AnonymousCredentials

from spotcron.core import images
from spotcron.core.errors import ConfigError
from spotcron.core.job_repositories import account_hash, built_repository, jobs_repository
from spotcron.core.spec import JobSpec
from spotcron.deploy.builds import build_missing, look_up, pin, registries
from spotcron.deploy.validate import preflight
from spotcron.gcp.admin.cloudbuild import CloudBuilder, make_client
from spotcron.gcp.storage import GcsBlobs
from tests.deploy.conftest import BUCKET, PROJECT, Deployer, make_settings
from tests.deploy.test_job_accounts import create_account
from tests.fakes.cloudbuild import FakeCloudBuild
from tests.fakes.deploy.cloud import FakeCloud

ALICE = f"alice-runner@{PROJECT}.iam.gserviceaccount.com"
BOB = f"bob-runner@{PROJECT}.iam.gserviceaccount.com"
VM = f"spotcron-vm@{PROJECT}.iam.gserviceaccount.com"
JOB_BUILD = f"spotcron-job-build@{PROJECT}.iam.gserviceaccount.com"
HOST = f"us-central1-docker.pkg.dev/{PROJECT}"


def _job(name: str, account: str | None = None, context: str = "images/shared", image: str | None = None) -> JobSpec:
    fields = {"name": name, "schedule": "0 * * * *", "build": {"context": context}}
    if image:
        fields["image"] = image  # the built image's name
    if account:
        fields["service_account"] = account
    return JobSpec.model_validate(fields)


def _context(root: Path, folder: str = "images/shared") -> None:
    path = root / folder
    path.mkdir(parents=True, exist_ok=True)
    (path / "Dockerfile").write_text("FROM python:3.12-slim\n")


@pytest.fixture
def builder(cloud: FakeCloud) -> Iterator[tuple[FakeCloudBuild, CloudBuilder]]:
    server = cloud.cloud_build()
    endpoint = server.start()
    try:
        yield server, CloudBuilder(PROJECT, "us-central1", GcsBlobs(BUCKET, client=cloud.clients().storage),
                                   service_account=JOB_BUILD, wait_s=30,
                                   client=make_client(AnonymousCredentials(), endpoint=endpoint))
    finally:
        server.stop()


def _accounts(cloud: FakeCloud, *ids: str) -> None:
    for ident in ids:
        create_account(cloud, ident)


def _deploy_built(deployer: Deployer, cloud: FakeCloud, builder: CloudBuilder, jobs: list[JobSpec],
                  root: Path) -> list[JobSpec]:
    """What `spotcron deploy` does: the stack first (repositories, grants), then the builds, then
    the jobs pinned to what was pushed."""
    deployer.deploy(jobs)
    cloud.clock.advance(cloud.access.grant_delay_s)
    statuses = build_missing(look_up(images.plan_builds(jobs, root), builder, registries(make_settings(), jobs)),
                             builder)
    pinned = pin(jobs, statuses)
    deployer.deploy(pinned)
    cloud.clock.advance(cloud.access.grant_delay_s)
    return pinned


def test_one_jobs_account_cannot_pull_another_jobs_image(deployer: Deployer, cloud: FakeCloud, builder,
                                                         tmp_path: Path) -> None:
    _accounts(cloud, "alice-runner", "bob-runner")
    _context(tmp_path, "images/a")
    _context(tmp_path, "images/b")
    _context(tmp_path, "images/c")
    jobs = [_job("a", ALICE, "images/a"), _job("b", BOB, "images/b"), _job("c", None, "images/c")]
    a, b, c = _deploy_built(deployer, cloud, builder[1], jobs, tmp_path)
    assert a.image.startswith(f"{HOST}/spotcron-built-{account_hash(ALICE)}/a@sha256:")
    assert b.image.startswith(f"{HOST}/spotcron-built-{account_hash(BOB)}/b@sha256:")
    assert c.image.startswith(f"{HOST}/spotcron-built/c@sha256:")
    # Each pulls its own.
    assert cloud.may_pull(ALICE, a.image) and cloud.may_pull(BOB, b.image) and cloud.may_pull(VM, c.image)
    # Job a's account cannot pull job b's image, nor the shared account's jobs' images, and back.
    assert not cloud.may_pull(ALICE, b.image) and not cloud.may_pull(BOB, a.image)
    assert not cloud.may_pull(ALICE, c.image) and not cloud.may_pull(BOB, c.image)
    # The shared VM account cannot pull an own-account job's image.
    assert not cloud.may_pull(VM, a.image) and not cloud.may_pull(VM, b.image)


def test_a_folder_built_for_jobs_of_different_accounts_is_pushed_once_per_account(
        deployer: Deployer, cloud: FakeCloud, builder, tmp_path: Path) -> None:
    _accounts(cloud, "alice-runner")
    _context(tmp_path)
    server, build = builder
    jobs = [_job("x", ALICE, image="shared"), _job("y", ALICE, image="shared"), _job("z", None, image="shared")]
    x, y, z = _deploy_built(deployer, cloud, build, jobs, tmp_path)
    # Two builds, not three: jobs that share an account share its repository and its image.
    assert sorted(image for b in server.builds for image in b["images"]) == sorted([
        f"{HOST}/spotcron-built-{account_hash(ALICE)}/shared:{images.plan_builds(jobs, tmp_path)[0].tag}",
        f"{HOST}/spotcron-built/shared:{images.plan_builds(jobs, tmp_path)[0].tag}"])
    assert x.image == y.image != z.image
    assert cloud.may_pull(ALICE, x.image) and not cloud.may_pull(ALICE, z.image)
    assert cloud.may_pull(VM, z.image) and not cloud.may_pull(VM, x.image)


def test_a_job_moving_to_its_own_account_gets_its_image_pushed_into_its_new_repository(
        deployer: Deployer, cloud: FakeCloud, builder, tmp_path: Path) -> None:
    _accounts(cloud, "alice-runner")
    _context(tmp_path)
    server, build = builder
    [before] = _deploy_built(deployer, cloud, build, [_job("bot")], tmp_path)
    assert before.image.startswith(f"{HOST}/spotcron-built/bot@") and len(server.builds) == 1
    # Same folder, now its own account: no build of it exists in that account's repository, so it is built there.
    statuses = look_up(images.plan_builds([_job("bot", ALICE)], tmp_path), build,
                       registries(make_settings(), [_job("bot", ALICE)]))
    assert [s.digest for s in statuses] == [None]
    [after] = _deploy_built(deployer, cloud, build, [_job("bot", ALICE)], tmp_path)
    assert len(server.builds) == 2
    assert after.image.startswith(f"{HOST}/spotcron-built-{account_hash(ALICE)}/bot@")
    assert cloud.may_pull(ALICE, after.image)
    assert not cloud.may_pull(ALICE, before.image)  # the shared repository is no longer its to read
    assert not cloud.may_pull(VM, after.image)


def test_an_image_the_jobs_account_cannot_read_is_refused_before_any_call(tmp_path: Path) -> None:
    settings = make_settings()
    own = f"{HOST}/{jobs_repository('spotcron', ALICE)}"
    other = f"{HOST}/{jobs_repository('spotcron', BOB)}"
    fine = [JobSpec.model_validate({"name": "a", "schedule": "0 * * * *", "image": f"{own}/a:1",
                                    "service_account": ALICE}),
            JobSpec.model_validate({"name": "c", "schedule": "0 * * * *", "image": f"{HOST}/spotcron-jobs/c:1"})]
    preflight(settings, fine, None, {})
    wrong = [JobSpec.model_validate({"name": "a", "schedule": "0 * * * *", "image": f"{other}/b:1",
                                     "service_account": ALICE}),
             JobSpec.model_validate({"name": "c", "schedule": "0 * * * *", "image": f"{own}/a:1"}),
             JobSpec.model_validate({"name": "d", "schedule": "0 * * * *", "image": f"{HOST}/spotcron-jobs/c:1",
                                     "service_account": ALICE})]
    with pytest.raises(ConfigError) as caught:
        preflight(settings, wrong, None, {"a": Path("jobs/a.yaml"), "c": Path("jobs/c.yaml"), "d": Path("jobs/d.yaml")})
    problems = [str(p) for p in caught.value.problems]
    assert problems[0] == (
        f"jobs/a.yaml: image: '{other}/b:1' is in {other}, which this job's VM cannot read: it runs as its own "
        f"account {ALICE}, which reads only {own} (Artifact Registry grants per repository, so each account's "
        f"jobs get their own); push the image to {own}/IMAGE:TAG and name it here, or use build: so that deploy "
        f"builds it there")
    assert problems[1].startswith(f"jobs/c.yaml: image: '{own}/a:1' is in {own}, which this job's VM cannot read: "
                                  f"it runs as spotcron's VM account, which reads only {HOST}/spotcron-jobs ")
    assert problems[2].startswith(f"jobs/d.yaml: image: '{HOST}/spotcron-jobs/c:1' is in {HOST}/spotcron-jobs, ")
    assert len(problems) == 3


def test_two_accounts_whose_repositories_would_be_one_are_refused(monkeypatch: pytest.MonkeyPatch) -> None:
    from spotcron.core import job_repositories
    from spotcron.deploy.validate import repository_problems

    monkeypatch.setattr(job_repositories, "account_hash", lambda email: "collidingforce")  # a collision, forced
    jobs = [JobSpec.model_validate({"name": name, "schedule": "0 * * * *", "image": "python:3.12",
                                    "service_account": account}) for name, account in (("a", ALICE), ("b", BOB))]
    [problem] = repository_problems(make_settings(), jobs, {"b": Path("jobs/b.yaml")})
    assert str(problem) == (f"jobs/b.yaml: service_account: '{BOB}' and '{ALICE}' would share the image repository "
                            "spotcron-jobs-collidingforce (their emails' hashes agree), so each would read the other's "
                            "images; use another account id for one of them")
    monkeypatch.undo()
    assert repository_problems(make_settings(), jobs, {}) == []


def test_repository_leaves_room_for_the_account_repositories() -> None:
    from spotcron.deploy.validate import settings_problems

    assert settings_problems(make_settings(repository="r" * 42), None) == []
    [problem] = settings_problems(make_settings(repository="r" * 43), None)
    assert "at most 42 characters" in problem.message and "REPOSITORY-built[-HASH]" in problem.message
    assert len(built_repository("r" * 42, ALICE)) == 63 and len(jobs_repository("r" * 42, ALICE)) == 62


def test_the_offline_plan_lists_each_accounts_repository_and_its_grants(tmp_path: Path,
                                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    from spotcron.cli import SpotcronGroup
    from spotcron.cli.deploy import COMMANDS, DeployContext
    from tests.deploy.conftest import user_repository

    user_repository(tmp_path, monkeypatch, jobs=("bot.yaml",))
    bot = tmp_path / "jobs" / "bot.yaml"
    repository = jobs_repository("spotcron", ALICE)
    bot.write_text(bot.read_text().replace("/spotcron-jobs/bot:latest", f"/{repository}/bot:latest")
                   + f"service_account: {ALICE}\n")
    group = SpotcronGroup("spotcron")
    for command in COMMANDS:
        group.add_command(command)
    result = CliRunner().invoke(group, ["deploy", "--dry-run", "--offline"], env={"COLUMNS": "200"},
                                obj=DeployContext(credentials=None, source_root=lambda: None), catch_exceptions=False)
    assert result.exit_code == 0, result.output
    lines = result.output.splitlines()
    built = built_repository("spotcron", ALICE)
    assert f"+ create repository {repository}" in lines and "+ create repository spotcron-jobs" in lines
    assert f"+ create repository {built}" in lines and "+ create repository spotcron-built" in lines
    at = lines.index(f"~ update iam_policy repository:{repository}")
    assert f"    + roles/artifactregistry.reader serviceAccount:{ALICE}" in lines[at:at + 4]
    assert f"serviceAccount:{JOB_BUILD}" not in "\n".join(lines[at:at + 3])  # owners push there, no build
    at = lines.index(f"~ update iam_policy repository:{built}")
    assert f"    + roles/artifactregistry.reader serviceAccount:{ALICE}" in lines[at:at + 4]
    assert f"    + roles/artifactregistry.writer serviceAccount:{JOB_BUILD}" in lines[at:at + 4]
    at = lines.index("~ update iam_policy repository:spotcron-jobs")
    assert lines[at + 1:at + 2] == [f"    + roles/artifactregistry.reader serviceAccount:{VM}"]
    assert lines[at + 2].startswith("~ ")  # the VM account's reader only: no build, no other account


def test_destroy_revokes_the_account_repositorys_bindings_and_keeps_the_repository(
        deployer: Deployer, cloud: FakeCloud, jobs_dir) -> None:
    from spotcron.deploy.destroy import format_destroy, run_destroy
    from tests.deploy.conftest import quick_caller
    from tests.deploy.test_job_accounts import JOB_ACCOUNT, OWN_REPOSITORY, name_account

    create_account(cloud)
    name_account(jobs_dir)
    deployer.deploy(deployer.jobs(jobs_dir))
    shown: list[str] = []
    run_destroy(make_settings(), cloud.clients(), compute=None, confirm=lambda plan: True,
                show=lambda plan: shown.extend(format_destroy(plan)), delete_results=False, caller=quick_caller(),
                poll_initial=0.01)
    name = OWN_REPOSITORY.rsplit("/", 1)[-1]
    assert f"  keep repository {name} and the images in it (delete it by hand once no job needs them)" in shown
    assert OWN_REPOSITORY in cloud.registry.repositories
    assert cloud.registry.policies.policy(OWN_REPOSITORY)[1].get("bindings", []) == []
    assert not cloud.may_pull(JOB_ACCOUNT, f"{HOST}/{name}/bot@sha256:{'0' * 64}")


def test_an_accounts_repository_gets_the_jobs_repositorys_cleanup_policies_and_label() -> None:
    from spotcron.deploy.desired import desired_state

    settings = make_settings(image_versions_kept=4)
    desired = desired_state(settings, [JobSpec.model_validate({"name": "a", "schedule": "0 * * * *",
                                                               "image": "python:3.12", "service_account": ALICE})],
                            "deploy/source-x.zip", "")
    shared = desired[("repository", "spotcron-jobs")]
    own = desired[("repository", jobs_repository("spotcron", ALICE))]
    assert own.fields == shared.fields and own.fields["labels"] == {"spotcron": "1"} and own.fields["cleanup"]
