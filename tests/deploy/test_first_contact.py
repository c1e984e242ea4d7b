"""The first `spotcron deploy` on an empty project, against fakes that fail where Google does.

Each test names the Google behaviour it models (access.py, functions.py, serviceusage.py; the
pages are cited in docs/deploy.md). Delays run on the fake's virtual clock: deploy's waiting
policy sleeps on it, so minutes of propagation take no time here.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner, Result

from spotcron.cli import SpotcronGroup
from spotcron.cli.deploy import COMMANDS, DeployContext
from spotcron.core.errors import SpotcronError
from spotcron.deploy.iam import SOURCE_COPY, Binding, security_problems
from spotcron.gcp.admin.calls import REQUIRED_APIS, DeployError
from spotcron.gcp.admin.settling import EVENTARC_AGENT, GRANTS, NEW_ACCOUNT, Settling
from tests.deploy.conftest import (
    BUCKET,
    JOBS_DIR,
    PROJECT,
    STACK,
    Deployer,
    make_settings,
    make_source_root,
    quick_caller,
    user_repository,
)
from tests.fakes.deploy.access import OWNER, VirtualClock
from tests.fakes.deploy.cloud import FakeCloud

BUILD = f"spotcron-build@{PROJECT}.iam.gserviceaccount.com"
JOB_BUILD = f"spotcron-job-build@{PROJECT}.iam.gserviceaccount.com"
NUMBER = "123456789012"
COPY_BUCKET = f"gcf-v2-sources-{NUMBER}-us-central1"
URLS = ("SPOTCRON_JOB_DONE_URL", "SPOTCRON_CREDENTIALS_URL")


@contextmanager
def fake(**delays: float) -> Iterator[FakeCloud]:
    cloud = FakeCloud(PROJECT, **delays).start()
    try:
        yield cloud
    finally:
        cloud.stop()


def deployer_for(cloud: FakeCloud, source: Any) -> Deployer:
    return Deployer(cloud, make_settings(), source)


def all_active(cloud: FakeCloud) -> bool:
    return len(cloud.functions.functions) == 4 and \
        {f["state"] for f in cloud.functions.functions.values()} == {"ACTIVE"}


# --- 1. the function build reads Cloud Functions' copy of the source ------------------------------

def test_every_function_builds_from_the_source_copy_as_the_build_account(deployer: Deployer,
                                                                         cloud: FakeCloud) -> None:
    deployer.deploy(deployer.jobs(JOBS_DIR))
    assert all_active(cloud)
    # Each build fetched its source from Google's bucket (the fake copied it there) and succeeded.
    assert {(COPY_BUCKET, f"{name}/function-source.zip") for name, _ in cloud.functions.builds} \
        <= set(cloud.storage.google_objects)
    last = {name: error for name, error in cloud.functions.builds}  # each function's latest build
    assert sorted(last) == ["spotcron-credentials", "spotcron-job-done", "spotcron-start-job", "spotcron-sweep"]
    assert set(last.values()) == {None}
    # The grant behind it is the one narrow exception: Object Admin, on the project, only where
    # the resource is that bucket or one of its objects.
    [binding] = [b for b in cloud.project_policies.all()[f"projects/{PROJECT}"]["bindings"]
                 if b["role"].startswith("roles/storage.")]
    assert binding["members"] == [f"serviceAccount:{BUILD}"] and binding["condition"]["title"] == SOURCE_COPY
    assert not cloud.access.allowed(f"serviceAccount:{BUILD}", "storage.objects.get",
                                    f"projects/_/buckets/{BUCKET}/objects/runs/x/result.json",
                                    [cloud.project_policies.policy(f"projects/{PROJECT}")])
    assert not cloud.access.allowed(f"serviceAccount:{BUILD}", "storage.objects.get",
                                    f"projects/_/buckets/{COPY_BUCKET}-other/objects/x",
                                    [cloud.project_policies.policy(f"projects/{PROJECT}")])


def test_without_the_grant_the_fake_build_fails_as_google_reports_it(source: Any) -> None:
    """The fake's own check: a build account that may not read the copy ends the function FAILED."""
    with fake() as cloud:
        cloud.enable_apis()
        clients = cloud.clients()
        from google.cloud.iam_admin_v1 import types

        clients.iam.create_service_account(request=types.CreateServiceAccountRequest(
            name=f"projects/{PROJECT}", account_id="spotcron-build"))
        error = cloud.functions._build({"buildConfig": {
            "serviceAccount": f"projects/{PROJECT}/serviceAccounts/{BUILD}",
            "source": {"storageSource": {"bucket": BUCKET, "object": "deploy/source-x.zip"}}}},
            f"projects/{PROJECT}/locations/us-central1/functions/spotcron-sweep")
        assert error is not None and f"Access to bucket {COPY_BUCKET} denied. You must grant Storage Object " \
                                     f"Viewer permission to {BUILD}." in error


def test_a_build_account_that_may_only_read_the_copy_fails_and_the_wait_knows_googles_words(source: Any) -> None:
    """Google's page on the build account asks for Storage Object Admin on the source copy, not a
    read-only role (https://cloud.google.com/run/docs/configuring/services/build-service-account):
    the fake build needs to write there too, and deploy's grant is that role, narrowed."""
    from spotcron.deploy.iam import SOURCE_COPY_ROLE
    from spotcron.gcp.admin.settling import GRANTS, awaited

    assert SOURCE_COPY_ROLE == "roles/storage.objectAdmin"
    with fake() as cloud:
        cloud.enable_apis()
        clients = cloud.clients()
        from google.cloud.iam_admin_v1 import types

        clients.iam.create_service_account(request=types.CreateServiceAccountRequest(
            name=f"projects/{PROJECT}", account_id="spotcron-build"))
        copy = f"projects/_/buckets/{COPY_BUCKET}"
        cloud.clock.sleep(3600)  # the account is visible to IAM
        cloud.project_policies.set(f"projects/{PROJECT}", {"version": 3, "bindings": [
            {"role": "roles/storage.objectViewer", "members": [f"serviceAccount:{BUILD}"],
             "condition": {"title": SOURCE_COPY, "expression": f'resource.name == "{copy}" || '
                                                                f'resource.name.startsWith("{copy}/objects/")'}}]})
        cloud.clock.sleep(3600)  # and the read-only grant has applied
        error = cloud.functions._build({"buildConfig": {
            "serviceAccount": f"projects/{PROJECT}/serviceAccounts/{BUILD}",
            "source": {"storageSource": {"bucket": BUCKET, "object": "deploy/source-x.zip"}}}},
            f"projects/{PROJECT}/locations/us-central1/functions/spotcron-sweep")
    assert error is not None and "Could not build the function due to a missing permission on the build " \
                                 "service account" in error
    assert awaited(SpotcronError(error)) == GRANTS
    assert awaited(SpotcronError("Build failed: Error determining source provenance")) == GRANTS


def test_the_source_copy_grant_is_the_only_project_wide_storage_role_allowed() -> None:
    build = f"serviceAccount:{BUILD}"
    narrow = Binding(f"project:{PROJECT}", "roles/storage.objectAdmin", build, "", condition=SOURCE_COPY)
    assert security_problems([narrow]) == []
    assert security_problems([Binding(f"project:{PROJECT}", "roles/storage.objectAdmin", build, "")])
    assert security_problems([Binding(f"project:{PROJECT}", "roles/storage.objectViewer", build, "",
                                      condition=SOURCE_COPY)])


# --- 2. Eventarc's service agent, created on the first trigger, is waited for --------------------

def test_the_first_trigger_waits_for_eventarcs_service_agent(source: Any) -> None:
    with fake(agent_delay_s=300) as cloud:
        deployer = deployer_for(cloud, source)
        deployer.deploy(deployer.jobs(JOBS_DIR))
        assert all_active(cloud)
        refused = [c for c in cloud.calls() if c.api == "functions" and c.method == "POST" and c.status == 400]
        assert refused, "the fake refused the first triggers while the agent was new"
        assert cloud.clock.now() >= 300
        assert any(EVENTARC_AGENT in note for note in deployer.reporter.notes)


# --- 3. new accounts and grants take minutes; the wait is its own policy -----------------------------

def test_new_accounts_and_grants_are_waited_out(source: Any) -> None:
    with fake(account_delay_s=90, grant_delay_s=180) as cloud:
        deployer = deployer_for(cloud, source)
        deployer.deploy(deployer.jobs(JOBS_DIR))
        assert all_active(cloud)
        # A new account's own policy read 404 and policies naming it were refused, for a while.
        assert any(c.status == 404 and c.path.endswith("GetIamPolicy") for c in cloud.calls())
        assert any(c.status == 400 and c.path.endswith(("SetIamPolicy", "setIamPolicy", "/iam"))
                   for c in cloud.calls())
        # The first builds ran before the build account's grants had propagated, and failed.
        assert any(error for _, error in cloud.functions.builds)
        notes = deployer.reporter.notes
        assert any(NEW_ACCOUNT in n for n in notes) and any(GRANTS in n for n in notes)
        assert deployer.plan(deployer.jobs(JOBS_DIR)).actions == []


def test_the_wait_is_minutes_long_and_separate_from_the_short_retry() -> None:
    clock = VirtualClock()
    said: list[str] = []
    settling = Settling(sleep=clock.sleep, say=said.append)
    ready_at = 420.0  # Google: "typically 2 minutes, potentially 7 minutes or longer"

    def grant_in_effect() -> str:
        if clock.now() < ready_at:
            raise SpotcronError("Permission \"artifactregistry.repositories.uploadArtifacts\" denied on resource")
        return "pushed"

    assert settling.run("build bot", grant_in_effect) == "pushed"
    assert said == [f"waiting for {GRANTS}; deploy goes on by itself"]  # one line per thing awaited
    assert clock.now() >= ready_at


def test_the_wait_gives_up_after_its_budget_and_says_so() -> None:
    clock = VirtualClock()
    settling = Settling(sleep=clock.sleep, budget_s=120)

    def never() -> None:
        raise SpotcronError("Service account x@p.iam.gserviceaccount.com does not exist.")

    with pytest.raises(DeployError, match=r"waited 1[2-9]\ds for IAM to see the new service accounts.*run deploy "
                                          r"again in a few minutes"):
        settling.run("write the IAM policy of service_account:x", never)


def test_an_error_that_is_not_a_propagation_delay_is_not_waited_for() -> None:
    clock = VirtualClock()
    settling = Settling(sleep=clock.sleep)
    with pytest.raises(SpotcronError, match="quota"):
        settling.run("create bucket", lambda: (_ for _ in ()).throw(SpotcronError("quota exceeded")))
    assert clock.now() == 0


def test_a_cloud_build_push_right_after_the_writer_grant_is_run_again(tmp_path: Path) -> None:
    from google.auth.credentials import AnonymousCredentials

    from spotcron.core import images
    from spotcron.core.spec import JobSpec
    from spotcron.gcp.admin.cloudbuild import CloudBuilder, make_client
    from spotcron.testing.memory import MemoryBlobs
    from tests.fakes.cloudbuild import FakeCloudBuild

    clock = VirtualClock()
    granted_at, propagation = 0.0, 150.0  # the writer grant was just made
    blobs = MemoryBlobs(BUCKET)

    def source(bucket: str, name: str) -> bytes | None:
        found = blobs.read(name) if bucket == blobs.bucket else None
        return found.data if found is not None else None

    server = FakeCloudBuild(PROJECT, source, may_push=lambda account, repository: clock.now() >= granted_at + propagation)
    endpoint = server.start()
    try:
        context = tmp_path / "images" / "bot"
        context.mkdir(parents=True)
        (context / "Dockerfile").write_text("FROM python:3.12-slim\n")
        job = JobSpec.model_validate({"name": "bot", "schedule": "0 * * * *", "build": {"context": "images/bot"}})
        [build] = images.plan_builds([job], tmp_path)
        builder = CloudBuilder(PROJECT, "us-central1", blobs, client=make_client(AnonymousCredentials(), endpoint=endpoint),
                               service_account=JOB_BUILD, wait_s=30, settling=Settling(sleep=clock.sleep))
        digest = builder.build(build, build.image(f"us-central1-docker.pkg.dev/{PROJECT}/spotcron-built"))
    finally:
        server.stop()
    assert digest.startswith("sha256:")
    assert [b["status"] for b in server.builds][0] == "FAILURE" and server.builds[-1]["status"] == "SUCCESS"
    assert server.builds[0]["failureInfo"]["type"] == "PUSH_FAILED"
    assert clock.now() >= propagation


def test_deploy_builds_a_jobs_image_once_the_build_accounts_push_grant_has_propagated(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The image build deploy makes right after granting artifactregistry.writer, against the
    strict fake's IAM: refused while the grant propagates, then built, in one `spotcron deploy`."""
    from google.auth.credentials import AnonymousCredentials

    from spotcron.gcp.admin.cloudbuild import CloudBuilder, make_client
    from spotcron.gcp.storage import GcsBlobs

    with fake(grant_delay_s=200) as cloud:
        user_repository(tmp_path, monkeypatch, jobs=("bot.yaml",))
        bot = tmp_path / "jobs" / "bot.yaml"
        bot.write_text(bot.read_text().replace("image: us-central1-docker.pkg.dev/demo-proj/spotcron-jobs/bot:latest",
                                               "build: images/bot"))
        (tmp_path / "images" / "bot").mkdir(parents=True)
        (tmp_path / "images" / "bot" / "Dockerfile").write_text("FROM python:3.12-slim\n")
        make_source_root(tmp_path / "src")

        server = cloud.cloud_build()
        endpoint = server.start()
        try:
            blobs = GcsBlobs(BUCKET, client=cloud.clients().storage)
            builder = CloudBuilder(PROJECT, "us-central1", blobs, service_account=JOB_BUILD, wait_s=30,
                                   client=make_client(AnonymousCredentials(), endpoint=endpoint))
            context = DeployContext(credentials=lambda project: AnonymousCredentials(),
                                    clients=lambda project, credentials, concurrency: cloud.clients(concurrency),
                                    source_root=lambda: tmp_path / "src", caller=lambda project: quick_caller(),
                                    interactive=lambda: False, poll_initial=0.01, sleep=cloud.clock.sleep,
                                    builder=lambda settings, credentials: builder)
            group = SpotcronGroup("spotcron")
            for command in COMMANDS:
                group.add_command(command)
            result = CliRunner().invoke(group, ["deploy", "--yes"], obj=context, env={"COLUMNS": "200"},
                                        catch_exceptions=False)
        finally:
            server.stop()
        assert result.exit_code == 0, result.output
        # Refused while the grants propagate (its log's folder, at creation, then its push), then built.
        assert server.builds[-1]["status"] == "SUCCESS"
        assert any("does not have access to logs bucket" in r for r in server.refused)
        assert f"waiting for {GRANTS}; deploy goes on by itself" in result.output
        assert all_active(cloud)


# --- 4. the APIs: deploy enables them, STS among them ---------------------------------------------

def test_deploy_enables_every_api_it_needs_first_sts_included(deployer: Deployer, cloud: FakeCloud) -> None:
    assert "sts.googleapis.com" in REQUIRED_APIS  # the broker mints upload tokens with STS
    assert "sts.googleapis.com" not in cloud.access.enabled()  # an empty project
    result = deployer.deploy(deployer.jobs(JOBS_DIR))
    assert set(REQUIRED_APIS) <= set(cloud.access.enabled())
    # The plan's first step, applied in a pass of its own before anything that needs them.
    first = result.plan[0]
    assert (first.kind, first.resource_type) == ("create", "api")
    assert {a.resource_type for a in result.passes[0].done} == {"api"}
    assert "sts.googleapis.com" in cloud.serviceusage.enables


def test_a_dry_run_enables_nothing(deployer: Deployer, cloud: FakeCloud) -> None:
    deployer.deploy(deployer.jobs(JOBS_DIR), dry_run=True)
    assert cloud.serviceusage.enables == []


def test_docs_list_every_required_api() -> None:
    text = (Path(__file__).parents[2] / "docs" / "deploy.md").read_text()
    assert [api for api in REQUIRED_APIS if api not in text] == []


def test_a_caller_without_a_role_on_the_project_is_refused(deployer: Deployer, cloud: FakeCloud,
                                                            source: Any) -> None:
    from concurrent.futures import ThreadPoolExecutor

    from spotcron.deploy.apply import compute_plan

    with ThreadPoolExecutor(4) as pool, pytest.raises(SpotcronError, match="permission"):
        compute_plan(make_settings(), deployer.jobs(JOBS_DIR), source.object_name,
                     cloud.clients(member="user:stranger@example.com"), quick_caller(), pool)


def test_every_call_carries_who_makes_it_rest_and_grpc(cloud: FakeCloud) -> None:
    from google.api_core import exceptions

    cloud.enable_apis()
    stranger = cloud.clients(member="user:stranger@example.com")
    with pytest.raises(exceptions.PermissionDenied, match="stranger@example.com does not have permission"):
        list(stranger.iam.list_service_accounts(name=f"projects/{PROJECT}"))
    with pytest.raises(exceptions.Forbidden, match="stranger@example.com does not have permission"):
        stranger.storage.get_bucket(BUCKET)
    import requests

    assert requests.get(f"{cloud.endpoints.rest}/storage/v1/b/{BUCKET}", timeout=30).status_code == 401  # no identity
    assert list(cloud.clients().iam.list_service_accounts(name=f"projects/{PROJECT}")) == []  # the Owner may


# --- 5. no scheduler entry before the functions know their URLs --------------------------------------

def test_scheduler_entries_are_created_only_once_the_functions_know_their_urls(deployer: Deployer,
                                                                                cloud: FakeCloud) -> None:
    seen: dict[str, list[dict[str, str]]] = {}

    def observe(entry: str) -> None:
        seen[entry] = [dict(f["serviceConfig"].get("environmentVariables", {}))
                       for f in cloud.functions.functions.values()]

    cloud.scheduler.on_create.append(observe)
    deployer.deploy(deployer.jobs(JOBS_DIR))
    assert len(seen) == 4
    for entry, environments in seen.items():
        assert len(environments) == 4, entry
        assert all(env.get(name) for env in environments for name in URLS), entry


# --- acceptance: an empty project, realistic delays, one run of `spotcron deploy` ------------------

@pytest.fixture
def slow_cloud() -> Iterator[FakeCloud]:
    # Minutes, as Google documents them: accounts, grants (up to 7), Eventarc's agent, API enablement.
    with fake(account_delay_s=120, grant_delay_s=420, agent_delay_s=300, api_delay_s=60) as cloud:
        yield cloud


def invoke(cloud: FakeCloud, workdir: Path, *args: str) -> Result:
    from google.auth.credentials import AnonymousCredentials

    context = DeployContext(credentials=lambda project: AnonymousCredentials(),
                            clients=lambda project, credentials, concurrency: cloud.clients(concurrency),
                            source_root=lambda: workdir / "src", caller=lambda project: quick_caller(),
                            interactive=lambda: False, poll_initial=0.01, sleep=cloud.clock.sleep)
    group = SpotcronGroup("spotcron")
    for command in COMMANDS:
        group.add_command(command)
    return CliRunner().invoke(group, ["deploy", *args], obj=context, env={"COLUMNS": "200"}, catch_exceptions=False)


def test_spotcron_deploy_on_an_empty_project_succeeds_in_one_run(slow_cloud: FakeCloud, tmp_path: Path,
                                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    cloud = slow_cloud
    user_repository(tmp_path, monkeypatch, STACK)
    make_source_root(tmp_path / "src")
    result = invoke(cloud, tmp_path, "--yes")
    assert result.exit_code == 0, result.output
    assert all_active(cloud)
    assert sorted(cloud.scheduler.entries()) == ["spotcron-benchmark", "spotcron-bot", "spotcron-nightly",
                                                 "spotcron-sweep"]
    assert cloud.clock.now() >= 420  # the longest delay really was waited out, on the virtual clock
    # What it waited for, said once each.
    said = [line for line in result.output.splitlines() if line.startswith("waiting for ")]
    assert len(said) == len(set(said)) and len(said) >= 3, result.output
    again = invoke(cloud, tmp_path, "--dry-run")
    assert again.exit_code == 0 and "No changes" in again.output, again.output
    assert re.search(r"Deployed: \d+ changes", result.output)
    assert OWNER in cloud.project_policies.members(f"projects/{PROJECT}", "roles/owner")
