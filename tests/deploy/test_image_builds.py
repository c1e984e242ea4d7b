"""Images built from a job's build: folder: the Cloud Build request, the content tag, the digest pin, deploy's plan.

The real google-cloud-build client talks REST to a fake Cloud Build server (tests/fakes/cloudbuild.py)
that checks every request body against Cloud Build v1's published schema.
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner, Result

from spotcron.cli import SpotcronGroup
from spotcron.cli.deploy import COMMANDS, DeployContext
from spotcron.core import images
from spotcron.core.errors import ConfigError
from spotcron.core.layout import deployed_spec
from spotcron.core.loader import check_job_file
from spotcron.core.spec import JobSpec
from spotcron.deploy.builds import build_missing, format_builds, look_up, pin
from spotcron.gcp.admin.cloudbuild import BuildFailed, CloudBuilder, make_client
from spotcron.testing.memory import MemoryBlobs
from tests.deploy.conftest import BUCKET, PROJECT, make_source_root, quick_caller, user_repository
from tests.fakes import cloudbuild_schema
from tests.fakes.cloudbuild import FakeCloudBuild
from tests.fakes.deploy.cloud import FakeCloud

REGISTRY = f"us-central1-docker.pkg.dev/{PROJECT}/spotcron-built"  # the built repository, apart from the functions' and the owners'
BUILD_ACCOUNT = f"spotcron-build@{PROJECT}.iam.gserviceaccount.com"
DOCKERFILE = "FROM python:3.12-slim\nCOPY bot.py /bot.py\nENTRYPOINT [\"python3\", \"/bot.py\"]\n"


def _context(root: Path, folder: str = "images/bot", text: str = "print('hello')\n") -> Path:
    path = root / folder
    path.mkdir(parents=True, exist_ok=True)
    (path / "Dockerfile").write_text(DOCKERFILE)
    (path / "bot.py").write_text(text)
    return path


def _job(**fields: Any) -> JobSpec:
    return JobSpec.model_validate({"name": "bot", "schedule": "0 * * * *", **fields})


@pytest.fixture
def blobs() -> MemoryBlobs:
    return MemoryBlobs(BUCKET)


@pytest.fixture
def fake(blobs: MemoryBlobs) -> Iterator[FakeCloudBuild]:
    def source(bucket: str, name: str) -> bytes | None:
        found = blobs.read(name) if bucket == blobs.bucket else None
        return found.data if found is not None else None

    server = FakeCloudBuild(PROJECT, source, write_log=lambda bucket, name, data: blobs.write(name, data))
    server.endpoint = server.start()  # type: ignore[attr-defined]
    yield server
    server.stop()


@pytest.fixture
def builder(fake: FakeCloudBuild, blobs: MemoryBlobs) -> CloudBuilder:
    from google.auth.credentials import AnonymousCredentials

    client = make_client(AnonymousCredentials(), endpoint=fake.endpoint)  # type: ignore[attr-defined]
    return CloudBuilder(PROJECT, "us-central1", blobs, client=client, service_account=BUILD_ACCOUNT, wait_s=30)


# --- the request ---------------------------------------------------------------------------------

def test_the_build_request_is_what_gcloud_builds_submit_sends(tmp_path, builder, fake, blobs) -> None:
    _context(tmp_path)
    [build] = images.plan_builds([_job(build={"context": "images/bot", "args": {"PY": "3.12"}})], tmp_path)
    image = build.image(REGISTRY)
    digest = builder.build(build, image)

    [body] = fake.requests
    assert cloudbuild_schema.problems(body) == []  # what the fake also checked before answering
    storage = body["source"]["storageSource"]
    assert storage["bucket"] == BUCKET and storage["object"] == build.source_object
    assert storage["object"].startswith("deploy/build-")  # the only part of the bucket the build account reads
    assert int(storage["generation"]) >= 1
    assert blobs.read(build.source_object) is None  # the context stays only while the build may read it
    assert body["steps"] == [{"name": "gcr.io/cloud-builders/docker",
                              "args": ["build", "--network", "cloudbuild", "-t", image, "-f", "Dockerfile",
                                       "--build-arg", "PY=3.12", "."]}]
    assert body["images"] == [image]
    assert body["serviceAccount"] == f"projects/{PROJECT}/serviceAccounts/{BUILD_ACCOUNT}"
    assert body["tags"] == ["spotcron", f"spotcron-{build.tag}"]
    assert image == f"{REGISTRY}/bot:{build.tag}"
    assert digest == fake.builds[0]["results"]["images"][0]["digest"]


def test_a_failed_build_leaves_no_context_behind_either(tmp_path, builder, fake, blobs) -> None:
    _context(tmp_path)
    [build] = images.plan_builds([_job(build={"context": "images/bot"})], tmp_path)
    fake.fail_next = True
    with pytest.raises(BuildFailed):
        builder.build(build, build.image(REGISTRY))
    assert blobs.list("deploy/") == []


def _names(tar: bytes) -> list[str]:
    import io
    import tarfile

    with tarfile.open(fileobj=io.BytesIO(tar)) as archive:
        return sorted(archive.getnames())


def test_the_context_leaves_out_what_dockerignore_excludes_as_docker_does(tmp_path) -> None:
    folder = _context(tmp_path)
    for name, text in {".env": "TOKEN=secret", "key.pem": "-----", "certs/a.pem": "x", "certs/keep.pem": "k",
                       "notes/x.md": "x", "deep/a/b/c.log": "x", "src/app.py": "x", "src/app.log": "x"}.items():
        (folder / name).parent.mkdir(parents=True, exist_ok=True)
        (folder / name).write_text(text)
    (folder / ".dockerignore").write_text("# secrets\n.env\n*.pem\ncerts\n!certs/keep.pem\n/notes/\n"
                                          "**/*.log\n  Dockerfile  \n")
    names = _names(images.context_tar(folder))
    assert ".env" not in names and "key.pem" not in names and "certs/a.pem" not in names
    assert "notes/x.md" not in names and "notes" not in names
    assert "deep/a/b/c.log" not in names and "src/app.log" not in names
    assert {"certs/keep.pem", "certs", "src/app.py", "bot.py", "Dockerfile", ".dockerignore"} <= set(names)
    # The tag follows what is sent: an excluded file changing changes nothing.
    before = images.context_tar(folder)
    (folder / ".env").write_text("TOKEN=other")
    assert images.context_tar(folder) == before


def test_the_schema_check_refuses_a_misspelt_or_mistyped_field() -> None:
    body = {"steps": [{"name": "gcr.io/cloud-builders/docker", "args": "build ."}], "image": ["x"],
            "source": {"storageSource": {"bucket": "b", "object": "o", "generation": 3}}}
    assert cloudbuild_schema.problems(body) == [
        "build.steps[0].args: expected array, got str",
        "build.image: no such field in Build",
        "build.source.storageSource.generation: expected string, got int",
    ]


def test_a_failed_build_says_so(tmp_path, builder, fake) -> None:
    _context(tmp_path)
    [build] = images.plan_builds([_job(build="images/bot")], tmp_path)
    fake.fail_next = True
    with pytest.raises(BuildFailed, match=r"the build of .*/bot:ctx-\w+ from images/bot/ failed: Build failed"):
        builder.build(build, build.image(REGISTRY))


def test_a_project_cloud_build_restricts_builds_in_the_global_location_and_says_so(tmp_path, builder, fake) -> None:
    """Some projects may use Cloud Build only in six regions (https://cloud.google.com/build/docs/locations)."""
    _context(tmp_path)
    [build] = images.plan_builds([_job(build="images/bot")], tmp_path)
    builder.region = builder.location = "europe-west3"
    fake.restricted_to = frozenset({"us-central1", "us-west2", "europe-west1", "asia-east1", "australia-southeast1",
                                    "southamerica-east1"})
    said: list[str] = []
    builder.say = said.append
    digest = builder.build(build, build.image(REGISTRY))
    assert digest.startswith("sha256:")
    assert [b["name"].split("/builds/")[0] for b in fake.builds] == [f"projects/{PROJECT}/locations/global"]
    assert said == [f"Cloud Build refuses builds in europe-west3 for project {PROJECT} (\"cannot run builds in this "
                    "region\": a quota restriction, https://cloud.google.com/build/docs/locations); building in its "
                    "global location instead"]
    # A later deploy (a new builder) finds that build where it was made.
    builder.location = "europe-west3"
    assert builder.find(build, build.image(REGISTRY)) == digest


# --- the content tag ----------------------------------------------------------------------------

def test_the_tag_depends_on_the_contents_only(tmp_path) -> None:
    a, b = _context(tmp_path, "a/bot"), _context(tmp_path, "b/bot")
    os.utime(b / "bot.py", (1, 1))  # another time, another folder: the same image
    (b / "__pycache__").mkdir()
    (b / "__pycache__" / "bot.cpython-312.pyc").write_bytes(b"cache")
    tags = [images.plan_builds([_job(build=f"{x}/bot")], tmp_path)[0] for x in ("a", "b")]
    assert tags[0].tag == tags[1].tag and tags[0].tarball == tags[1].tarball
    (a / "bot.py").write_text("print('changed')\n")
    assert images.plan_builds([_job(build="a/bot")], tmp_path)[0].tag != tags[0].tag


def test_an_unchanged_context_is_not_built_again(tmp_path, builder, fake) -> None:
    _context(tmp_path)
    builds = images.plan_builds([_job(build="images/bot")], tmp_path)
    [first] = look_up(builds, builder, REGISTRY)
    assert first.digest is None
    [built] = build_missing([first], builder)
    [again] = look_up(images.plan_builds([_job(build="images/bot")], tmp_path), builder, REGISTRY)
    assert again.digest == built.digest and build_missing([again], builder) == [again]
    assert len(fake.builds) == 1
    assert format_builds([again]) == [f"= image {REGISTRY}/bot@{built.digest}: images/bot/ is unchanged since it "
                                      f"was built, for bot"]


# --- pinning --------------------------------------------------------------------------------------

def test_the_deployed_spec_runs_the_pushed_digest(tmp_path, builder) -> None:
    _context(tmp_path)
    _context(tmp_path, "images/cuda")
    job = _job(build="images/bot", matrix=[{"name": "cpu"}, {"name": "gpu", "build": "images/cuda"},
                                           {"name": "pinned", "image": "us-docker.pkg.dev/x/y/z:1"}])
    statuses = build_missing(look_up(images.plan_builds([job], tmp_path), builder, REGISTRY), builder)
    [pinned] = pin([job], statuses)
    digests = {s.build.name: s.digest for s in statuses}
    assert set(digests) == {"bot", "bot-gpu"}
    runs = {c.variant: c.image for c in JobSpec.from_payload(pinned.to_payload()).configurations()}
    assert runs == {"cpu": f"{REGISTRY}/bot@{digests['bot']}", "gpu": f"{REGISTRY}/bot-gpu@{digests['bot-gpu']}",
                    "pinned": "us-docker.pkg.dev/x/y/z:1"}


def test_a_spec_without_build_keeps_its_payload() -> None:
    payload = _job(image="spotcron/bot:1", matrix=[{"name": "a"}]).to_payload()
    assert "build" not in payload and "build" not in payload["matrix"][0]  # deployed digests stay valid


def test_a_missing_context_or_dockerfile_is_reported_with_file_and_field(tmp_path) -> None:
    (tmp_path / "jobs").mkdir()
    (tmp_path / "images" / "empty").mkdir(parents=True)
    path = tmp_path / "jobs" / "bot.yaml"
    path.write_text('schedule: "0 * * * *"\nbuild: images/nope\nmatrix:\n  - name: a\n    build: images/empty\n')
    _, problems = check_job_file(path)
    assert [(p.line, p.field) for p in problems] == [(2, "build.context"), (5, "matrix[0].build.dockerfile")]
    assert "'images/nope': no such folder in" in problems[0].message
    assert "relative to the folder that holds jobs/" in problems[0].message
    assert "'Dockerfile': no such file in images/empty/" in problems[1].message
    with pytest.raises(ConfigError, match=r"jobs/bot.yaml: build.context: 'images/nope'"):
        images.plan_builds([_job(build="images/nope")], tmp_path)


# --- deploy -------------------------------------------------------------------------------------

class _Watched:
    """The Cloud Build builder, noting whether the stack's repository existed when a build ran."""

    def __init__(self, inner: CloudBuilder, cloud: FakeCloud):
        self.inner, self.cloud, self.repository_at_build = inner, cloud, []

    def find(self, build, image):
        return self.inner.find(build, image)

    def build(self, build, image):
        self.repository_at_build.append(bool(self.cloud.registry.repositories))
        return self.inner.build(build, image)


@pytest.fixture
def workdir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    user_repository(tmp_path, monkeypatch, jobs=("bot.yaml",))
    text = (tmp_path / "jobs" / "bot.yaml").read_text().replace(
        "image: us-central1-docker.pkg.dev/demo-proj/spotcron-jobs/bot:latest", "build: images/bot")
    (tmp_path / "jobs" / "bot.yaml").write_text(text)
    _context(tmp_path)
    make_source_root(tmp_path / "src")
    return tmp_path


@pytest.fixture
def invoke(cloud: FakeCloud, workdir: Path, builder: CloudBuilder) -> Callable[..., Result]:
    from google.auth.credentials import AnonymousCredentials

    watched = _Watched(builder, cloud)
    context = DeployContext(credentials=lambda project: AnonymousCredentials(),
                            clients=lambda project, credentials, concurrency: cloud.clients(concurrency),
                            source_root=lambda: workdir / "src", caller=lambda project: quick_caller(),
                            interactive=lambda: False, poll_initial=0.01, sleep=cloud.clock.sleep,
                            builder=lambda settings, creds: watched)
    group = SpotcronGroup("spotcron")
    for command in COMMANDS:
        group.add_command(command)

    def run(*args: str) -> Result:
        return CliRunner().invoke(group, list(args), obj=context, env={"COLUMNS": "250"}, catch_exceptions=False)

    run.watched = watched  # type: ignore[attr-defined]
    return run


def test_deploy_plans_the_build_then_builds_into_its_repository_and_pins_the_digest(invoke, cloud, fake,
                                                                                     workdir) -> None:
    plan = invoke("deploy", "--dry-run")
    assert plan.exit_code == 0, plan.output
    tag = images.plan_builds([check_job_file(workdir / "jobs" / "bot.yaml")[0]], workdir)[0].tag
    assert f"+ build {REGISTRY}/bot:{tag} from images/bot/ with Cloud Build, for bot" in plan.output.splitlines()
    assert not fake.builds and not cloud.changing_calls()

    applied = invoke("deploy", "--yes")
    assert applied.exit_code == 0, applied.output
    [built] = fake.builds
    digest = built["results"]["images"][0]["digest"]
    assert invoke.watched.repository_at_build == [True]  # type: ignore[attr-defined]
    data, _ = cloud.storage.objects[(BUCKET, deployed_spec("bot"))]
    assert json.loads(data)["image"] == f"{REGISTRY}/bot@{digest}"

    again = invoke("deploy", "--dry-run")
    assert f"= image {REGISTRY}/bot@{digest}: images/bot/ is unchanged since it was built, for bot" in again.output
    assert "No changes" in again.output and len(fake.builds) == 1


def test_spotcron_build_builds_one_job_and_then_finds_it(invoke, fake) -> None:
    first = invoke("build", "bot")
    assert first.exit_code == 0, first.output
    assert "building " in first.output and "✓ built " in first.output
    second = invoke("build")
    assert "is unchanged since it was built" in second.output and len(fake.builds) == 1
    assert invoke("build", "nope").exit_code == 2


def test_a_dockerignore_linked_outside_the_context_is_a_clear_config_error(tmp_path) -> None:
    folder = _context(tmp_path)
    (tmp_path / "shared-ignore").write_text(".env\n")
    (folder / ".dockerignore").symlink_to(tmp_path / "shared-ignore")
    with pytest.raises(ConfigError) as raised:
        images.plan_builds([_job(build={"context": "images/bot"})], tmp_path)
    [problem] = raised.value.problems
    assert problem.field == "build.context" and "outside the build context" in problem.message


def test_what_the_dockerfiles_own_ignore_file_excludes_never_reaches_cloud_build(tmp_path, builder, fake) -> None:
    import gzip

    folder = _context(tmp_path)
    (folder / "Dockerfile.dockerignore").write_text(".env\n")
    (folder / ".dockerignore").write_text("bot.py\n")  # not read: the Dockerfile's own file wins
    (folder / ".env").write_text("API_TOKEN=not-for-the-bucket\n")
    fetched: list[bytes] = []
    read = fake.sources
    fake.sources = lambda bucket, name: fetched.append(read(bucket, name)) or fetched[-1]
    [build] = images.plan_builds([_job(build={"context": "images/bot"})], tmp_path)
    builder.build(build, build.image(REGISTRY))
    [uploaded] = fetched  # the archive Cloud Build fetched from the bucket
    names = _names(gzip.decompress(uploaded))
    assert ".env" not in names
    assert {"bot.py", "Dockerfile", "Dockerfile.dockerignore", ".dockerignore"} <= set(names)
