"""What a deployed job runs is what its own owner deployed: no other job's build changes or removes it.

Every job's Dockerfile runs inside its Cloud Build with the token of the job images' build account
(`spotcron-job-build`). These tests hold deploy to what that must not reach, on the strict fakes,
whose IAM decides each push (tests/fakes/deploy/access.py) and whose Artifact Registry runs the
repository's cleanup policies (tests/fakes/deploy/registry.py): a prebuilt image's tag (the build
account writes only the built repositories, never the owners' ones: core/job_repositories.py), a
pinned build's version (reused only while cleanup keeps it), and the images a retired account left
behind (deploy refuses to grant its repositories to another account whose hash agrees).
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from spotcron.core import images
from spotcron.core.job_repositories import account_hash
from spotcron.core.spec import JobSpec
from spotcron.deploy.builds import build_missing, look_up, pin, registries
from spotcron.gcp.admin.calls import DeployError
from tests.deploy.conftest import BUCKET, PROJECT, Deployer, make_settings
from tests.deploy.test_job_accounts import JOB_ACCOUNT, OWN_REPOSITORY, create_account, name_account
from tests.deploy.test_registry_per_account import builder  # noqa: F401  (the fake Cloud Build, as deploy builds)
from tests.fakes.deploy.cloud import FakeCloud

JOB_BUILD = f"spotcron-job-build@{PROJECT}.iam.gserviceaccount.com"
LOCATION = f"projects/{PROJECT}/locations/us-central1"
JOBS_REPOSITORY = f"{LOCATION}/repositories/spotcron-jobs"
BUILT_REPOSITORY = f"{LOCATION}/repositories/spotcron-built"  # where deploy's builds push (bot runs as the VM account)
DAY = 86400.0


def _deployed_image(cloud: FakeCloud, job: str) -> str:
    data, _ = cloud.storage.objects[(BUCKET, f"deployed/{job}.json")]
    return json.loads(data)["image"]


def test_no_other_jobs_build_can_change_the_image_a_job_with_its_own_account_runs(
        deployer: Deployer, cloud: FakeCloud, jobs_dir: Path) -> None:
    """A job with its own account runs a prebuilt image from its account's repository, pushed there
    by tag as docs/jobs.md and deploy's own refusal tell its owner to. Its VM pulls whatever that tag
    names at each run, as that account (with its roles, and its secrets in the container). Any
    job's Dockerfile holds a token that may push to that repository, so a tag the deployed spec
    names can be moved under it by another job's build: the next run of this job would run the
    other job's code as this job's account. The deployed spec must name what it runs by digest
    (or no other job's build may write where it pulls from)."""
    create_account(cloud)
    name_account(jobs_dir)  # bot runs as its own account, image .../spotcron-jobs-HASH/bot:latest
    deployer.deploy(deployer.jobs(jobs_dir))
    cloud.clock.advance(cloud.access.grant_delay_s)
    image = _deployed_image(cloud, "bot")
    assert image.startswith(f"us-central1-docker.pkg.dev/{PROJECT}/spotcron-jobs-{account_hash(JOB_ACCOUNT)}/bot")
    another_jobs_build_writes_it = cloud.may_push(JOB_BUILD, OWN_REPOSITORY)
    pinned = "@sha256:" in image
    assert pinned or not another_jobs_build_writes_it, (
        f"deployed/bot.json runs {image!r} by tag, and {JOB_BUILD} (every job's Dockerfile) may push to "
        f"{OWN_REPOSITORY}: another job's build can replace what bot runs as {JOB_ACCOUNT}")


def test_no_other_jobs_build_can_change_the_image_a_job_of_the_vm_account_runs(
        deployer: Deployer, cloud: FakeCloud, jobs_dir: Path) -> None:
    """The same for the jobs that run as spotcron's VM account: the example bot names
    .../spotcron-jobs/bot:latest, and another job's Dockerfile may push that tag."""
    deployer.deploy(deployer.jobs(jobs_dir))
    cloud.clock.advance(cloud.access.grant_delay_s)
    image = _deployed_image(cloud, "bot")
    assert image.startswith(f"us-central1-docker.pkg.dev/{PROJECT}/spotcron-jobs/bot")
    assert "@sha256:" in image or not cloud.may_push(JOB_BUILD, JOBS_REPOSITORY), (
        f"deployed/bot.json runs {image!r} by tag, and every job's Dockerfile may push to {JOBS_REPOSITORY}")


class _Pushing:
    """The fake Cloud Build, with each pushed image also a version in the fake Artifact Registry at
    the virtual time `now()`, as a real build's push is (so that the repository's cleanup sees it)."""

    def __init__(self, inner, cloud: FakeCloud, now):
        self.inner, self.cloud, self.now = inner, cloud, now

    def find(self, build, image):
        return self.inner.find(build, image)

    def build(self, build, image):
        digest = self.inner.build(build, image)
        host, _, path = image.partition("/")
        project, repository, rest = path.split("/", 2)
        name, _, tag = rest.partition(":")
        self.cloud.registry.push(f"projects/{project}/locations/{host.removesuffix('-docker.pkg.dev')}/"
                                 f"repositories/{repository}", name, digest, self.now(), (tag,))
        return digest


def _bot(root: Path, version: str) -> JobSpec:
    folder = root / "images" / "bot"
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "Dockerfile").write_text(f"FROM python:3.12-slim\nLABEL version={version}\n")
    return JobSpec.model_validate({"name": "bot", "schedule": "0 * * * *", "build": {"context": "images/bot"}})


def _pinned(job: JobSpec, root: Path, cloud_build) -> str:
    """The image deploy pins `job` to: an earlier build of the same folder, or a new build."""
    statuses = build_missing(look_up(images.plan_builds([job], root), cloud_build,
                                     registries(make_settings(), [job])), cloud_build)
    [pinned_job] = pin([job], statuses)
    return pinned_job.image


def test_a_job_rolled_back_to_an_earlier_folder_keeps_its_image_through_the_repositorys_cleanup(
        deployer: Deployer, cloud: FakeCloud, builder, tmp_path: Path) -> None:  # noqa: F811
    """Deploy does not build a folder again when an earlier build of it exists (Cloud Build's
    history, by the context's tag), and pins that build's digest, however old. The repository's
    cleanup deletes versions older than 30 days except the `image_versions_kept` (10) most recent
    of each image. So a job rolled back to a folder it ran more than ten builds ago is pinned to
    a version that cleanup deletes: every run then fails at its pull, and every later deploy pins
    the same deleted digest again. The same happens to any job whose image gets ten newer versions
    under its name, and every job's Dockerfile may push those (the job build account writes every
    jobs' repository): what the deployed spec pins must outlive the cleanup."""
    deployer.deploy([])
    cloud.clock.advance(cloud.access.grant_delay_s)
    start = cloud.clock.now()
    day = [0.0]
    build = _Pushing(builder[1], cloud, lambda: start + day[0] * DAY)
    first = _pinned(_bot(tmp_path, "1"), tmp_path, build)  # day 0: what bot runs
    for n in range(2, 13):  # eleven changes of the folder, one a day
        day[0] = float(n)
        _pinned(_bot(tmp_path, str(n)), tmp_path, build)
    day[0] = 40.0  # a rollback to the first folder, 40 days on: deploy pins what it runs from then on
    rolled_back = _pinned(_bot(tmp_path, "1"), tmp_path, build)
    assert rolled_back.rsplit("/", 1)[-1].startswith("bot@sha256:")
    cloud.registry.cleanup(now_s=start + 41 * DAY)  # Artifact Registry's cleanup, within a day
    stored = {version for version, _, _ in cloud.registry.versions[BUILT_REPOSITORY]["bot"]}
    digest = rolled_back.rsplit("@", 1)[1]
    assert digest in stored, (
        f"deploy pins bot to {digest} (the build of {first.rsplit('@', 1)[1][:19]}… from day 0, found again), "
        f"which the repository's cleanup deleted: every run of bot fails at its pull")


def test_an_account_never_reads_the_repository_a_retired_account_left_behind(
        deployer: Deployer, cloud: FakeCloud, builder, tmp_path: Path, monkeypatch) -> None:  # noqa: F811
    """Each account's repository is named by 8 hex digits (32 bits) of its email's SHA-256, and a
    repository outlives the account that no job names any more, with its images ("Limits of what
    is built"). deploy/validate.repository_problems refuses two accounts whose repositories would
    be one only among the jobs deployed now: a new account whose hash agrees with a retired one's
    (a 2**32 search over account ids, minutes on one GPU) is granted the reader role on the old
    repository and pulls the images of the jobs that ran as the retired account. The collision is
    forced here, as tests/deploy/test_registry_per_account.py forces one. Deploy refuses it: each
    account repository records its account in its description (deploy/repository_owners.py)."""
    from spotcron.core import job_repositories
    from tests.deploy.test_job_accounts import create_account as make
    from tests.deploy.test_registry_per_account import ALICE, BOB, _context, _deploy_built, _job

    monkeypatch.setattr(job_repositories, "account_hash", lambda email: "0badc0de")
    make(cloud, "alice-runner")
    make(cloud, "bob-runner")
    _context(tmp_path, "images/a")
    _context(tmp_path, "images/b")
    [a] = _deploy_built(deployer, cloud, builder[1], [_job("a", ALICE, "images/a")], tmp_path)
    assert cloud.may_pull(ALICE, a.image)
    # Job a goes; job b comes, with an account of its own whose repository name is a's. Deploy
    # refuses it (the repository records alice as its account), and grants bob nothing there.
    # (Adapted by design: the attack's premise, that deploy grants bob the old repository, is
    # what deploy now refuses, with a message saying what to do.)
    with pytest.raises(DeployError, match=r"spotcron-(jobs|built)-0badc0de belongs to alice-runner@.*another account id"):
        _deploy_built(deployer, cloud, builder[1], [_job("b", BOB, "images/b")], tmp_path)
    cloud.clock.advance(cloud.access.grant_delay_s)
    assert not cloud.may_pull(BOB, a.image), (
        f"{BOB} pulls {a.image}, the image of removed job a that ran as {ALICE}: their repositories are one")
    assert not cloud.may_pull(BOB, a.image.replace("spotcron-built-", "spotcron-jobs-").split("@")[0] + ":latest")


def test_an_earlier_build_is_reused_while_cleanup_keeps_it_and_built_again_once_it_may_not(
        deployer: Deployer, cloud: FakeCloud, builder, tmp_path: Path) -> None:  # noqa: F811
    """The boundary of reuse: with `keep` = 2 versions kept at any age, a folder's earlier build is
    found again while fewer than 2 other versions of its image were built since (Cloud Build's
    history, newest first); from 2 on, the repository's cleanup may delete it once it is 30 days
    old, so the folder is built again."""
    deployer.deploy([])
    cloud.clock.advance(cloud.access.grant_delay_s)
    server, build = builder
    build.keep = 2
    first = _pinned(_bot(tmp_path, "1"), tmp_path, build)
    _pinned(_bot(tmp_path, "2"), tmp_path, build)
    built = len(server.builds)
    assert _pinned(_bot(tmp_path, "1"), tmp_path, build) == first and len(server.builds) == built  # reused
    _pinned(_bot(tmp_path, "3"), tmp_path, build)
    built = len(server.builds)
    assert _pinned(_bot(tmp_path, "1"), tmp_path, build).startswith(first.split("@")[0] + "@sha256:")
    assert len(server.builds) == built + 1  # two newer versions since: built again, a version cleanup keeps


def test_each_account_repository_records_its_account(deployer: Deployer, cloud: FakeCloud, jobs_dir: Path) -> None:
    """What the refusal above reads: the description deploy creates an account's repositories with."""
    create_account(cloud)
    name_account(jobs_dir)
    deployer.deploy(deployer.jobs(jobs_dir))
    for prefix in ("spotcron-jobs", "spotcron-built"):
        repository = cloud.registry.repositories[f"{LOCATION}/repositories/{prefix}-{account_hash(JOB_ACCOUNT)}"]
        assert repository["description"].endswith(f"for the jobs that run as {JOB_ACCOUNT}")
    assert deployer.plan(deployer.jobs(jobs_dir)).actions == []  # its own account: nothing refused, nothing to do
