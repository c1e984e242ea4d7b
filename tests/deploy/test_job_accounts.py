"""Deploy with jobs that run as their own service accounts, and the one Artifact Registry repository,
on the fake Google Cloud through the real clients: the exact grants and request shapes."""

from __future__ import annotations

from pathlib import Path

import pytest
from google.cloud.iam_admin_v1 import types

from spotcron.core.errors import ConfigError
from spotcron.core.job_repositories import account_hash, jobs_repository
from spotcron.deploy.validate import preflight
from spotcron.gcp.admin.calls import DeployError
from tests.deploy.conftest import PROJECT, Deployer, make_settings
from tests.fakes.deploy.cloud import FakeCloud

LOCATION = f"projects/{PROJECT}/locations/us-central1"
REPOSITORY = f"{LOCATION}/repositories/spotcron"
JOBS_REPOSITORY = f"{LOCATION}/repositories/spotcron-jobs"
JOB_BUILD = f"serviceAccount:spotcron-job-build@{PROJECT}.iam.gserviceaccount.com"
JOB_ACCOUNT = f"bot-runner@{PROJECT}.iam.gserviceaccount.com"
VM = f"serviceAccount:spotcron-vm@{PROJECT}.iam.gserviceaccount.com"
FUNCTIONS = f"serviceAccount:spotcron-functions@{PROJECT}.iam.gserviceaccount.com"
BUILD = f"serviceAccount:spotcron-build@{PROJECT}.iam.gserviceaccount.com"
JOB = f"serviceAccount:{JOB_ACCOUNT}"
# The repository of the jobs that run as JOB_ACCOUNT: only it reads it (core/job_repositories.py).
OWN_REPOSITORY = f"{LOCATION}/repositories/spotcron-jobs-{account_hash(JOB_ACCOUNT)}"
# Where deploy's builds push the images of the jobs that run as JOB_ACCOUNT: only it reads it, only the
# job build account writes it.
OWN_BUILT_REPOSITORY = f"{LOCATION}/repositories/spotcron-built-{account_hash(JOB_ACCOUNT)}"
BUILT_REPOSITORY = f"{LOCATION}/repositories/spotcron-built"


def name_account(jobs_dir: Path, email: str = JOB_ACCOUNT) -> None:
    """The bot job runs as `email`, its image pushed to the repository that account reads."""
    bot = jobs_dir / "bot.yaml"
    text = bot.read_text().replace(f"{PROJECT}/spotcron-jobs/bot:latest",
                                   f"{PROJECT}/{jobs_repository('spotcron', email)}/bot:latest")
    bot.write_text(text + f"service_account: {email}\n")


def create_account(cloud: FakeCloud, account_id: str = "bot-runner") -> None:
    """What the job's owner does before deploying (deploy never creates a job's account)."""
    cloud.enable_apis()  # a project in use: its owner made the job's account
    cloud.clients().iam.create_service_account(request=types.CreateServiceAccountRequest(
        name=f"projects/{PROJECT}", account_id=account_id))


def every_binding_of(cloud: FakeCloud, who: str) -> set[tuple[str, str]]:
    stores = (cloud.project_policies, cloud.functions.run_policies, cloud.iam.policies, cloud.pubsub.policies,
              cloud.storage.policies, cloud.registry.policies)
    return {(resource, b["role"]) for store in stores for resource, policy in store.all().items()
            for b in policy["bindings"] if who in b.get("members", [])}


def test_a_jobs_account_gets_exactly_what_the_runner_needs(deployer: Deployer, cloud: FakeCloud, jobs_dir) -> None:
    create_account(cloud)
    name_account(jobs_dir)
    deployer.deploy(deployer.jobs(jobs_dir))
    assert every_binding_of(cloud, JOB) == {
        (OWN_REPOSITORY, "roles/artifactregistry.reader"),
        (OWN_BUILT_REPOSITORY, "roles/artifactregistry.reader"),
        (f"{LOCATION}/services/spotcron-job-done", "roles/run.invoker"),
        (f"{LOCATION}/services/spotcron-credentials", "roles/run.invoker"),
    }
    # The functions may create VMs as it: on that one account, never on the project.
    assert cloud.iam.policies.members(f"projects/{PROJECT}/serviceAccounts/{JOB_ACCOUNT}",
                                      "roles/iam.serviceAccountUser") == {FUNCTIONS}
    assert (f"projects/{PROJECT}", "roles/iam.serviceAccountUser") not in every_binding_of(cloud, FUNCTIONS)
    assert deployer.plan(deployer.jobs(jobs_dir)).actions == []


def test_the_grant_on_the_jobs_account_is_a_resource_level_policy(deployer: Deployer, cloud: FakeCloud,
                                                                  jobs_dir) -> None:
    create_account(cloud)
    name_account(jobs_dir)
    deployer.deploy(deployer.jobs(jobs_dir))
    [grant] = [c for c in cloud.calls() if c.path == "/google.iam.admin.v1.IAM/SetIamPolicy"
               and c.body["resource"].endswith(JOB_ACCOUNT) and c.status == 200]
    assert grant.body["resource"] == f"projects/{PROJECT}/serviceAccounts/{JOB_ACCOUNT}"
    assert grant.body["policy"]["bindings"] == [{"role": "roles/iam.serviceAccountUser", "members": [FUNCTIONS]}]
    # (Refused while IAM does not see the new accounts yet: the successful write is the one.)
    [repository_grant] = [c for c in cloud.calls() if c.method == "POST"
                          and c.path == f"/v1/{JOBS_REPOSITORY}:setIamPolicy" and c.status == 200]
    assert {b["role"]: sorted(b["members"]) for b in repository_grant.body["policy"]["bindings"]} == {
        "roles/artifactregistry.reader": [VM]}  # owners push prebuilt images here: no build writes it
    [built_grant] = [c for c in cloud.calls() if c.method == "POST"
                     and c.path == f"/v1/{BUILT_REPOSITORY}:setIamPolicy" and c.status == 200]
    assert {b["role"]: sorted(b["members"]) for b in built_grant.body["policy"]["bindings"]} == {
        "roles/artifactregistry.reader": [VM], "roles/artifactregistry.writer": [JOB_BUILD]}
    [own_grant] = [c for c in cloud.calls() if c.method == "POST"
                   and c.path == f"/v1/{OWN_REPOSITORY}:setIamPolicy" and c.status == 200]
    assert {b["role"]: sorted(b["members"]) for b in own_grant.body["policy"]["bindings"]} == {
        "roles/artifactregistry.reader": [JOB]}
    [own_built_grant] = [c for c in cloud.calls() if c.method == "POST"
                         and c.path == f"/v1/{OWN_BUILT_REPOSITORY}:setIamPolicy" and c.status == 200]
    assert {b["role"]: sorted(b["members"]) for b in own_built_grant.body["policy"]["bindings"]} == {
        "roles/artifactregistry.reader": [JOB], "roles/artifactregistry.writer": [JOB_BUILD]}
    [functions_grant] = [c for c in cloud.calls() if c.method == "POST"
                         and c.path == f"/v1/{REPOSITORY}:setIamPolicy" and c.status == 200]
    assert {b["role"]: sorted(b["members"]) for b in functions_grant.body["policy"]["bindings"]} == {
        "roles/artifactregistry.writer": [BUILD]}


def test_a_missing_job_account_stops_deploy_before_any_change(deployer: Deployer, cloud: FakeCloud, jobs_dir) -> None:
    name_account(jobs_dir)
    with pytest.raises(DeployError) as caught:
        deployer.deploy(deployer.jobs(jobs_dir))
    assert str(caught.value) == (
        f"job bot: service_account '{JOB_ACCOUNT}': no such service account in project {PROJECT}, so nothing was "
        f"changed. Create it (gcloud iam service-accounts create ACCOUNT_ID --project {PROJECT}) and grant it what "
        f"the job needs, or remove service_account from the job")
    assert not cloud.changing_calls()


@pytest.mark.parametrize("email, message", [
    (f"spotcron-functions@{PROJECT}.iam.gserviceaccount.com",
     f"jobs/bot.yaml: service_account: 'spotcron-functions@{PROJECT}.iam.gserviceaccount.com' is the functions' "
     "account; a job may not run as one of spotcron's own accounts: create an account for this job and name it here"),
    (f"spotcron-vm@{PROJECT}.iam.gserviceaccount.com",
     f"jobs/bot.yaml: service_account: 'spotcron-vm@{PROJECT}.iam.gserviceaccount.com' is spotcron's VM account; a "
     "job may not run as one of spotcron's own accounts: remove service_account to run as it"),
    ("bot-runner@other-proj.iam.gserviceaccount.com",
     f"jobs/bot.yaml: service_account: 'bot-runner@other-proj.iam.gserviceaccount.com' is not an account of project "
     f"{PROJECT}; deploy grants a job's account only in its own project: create the account there "
     f"(ACCOUNT_ID@{PROJECT}.iam.gserviceaccount.com)"),
], ids=["functions-account", "vm-account", "other-project"])
def test_preflight_refuses_spotcrons_own_accounts_and_other_projects(deployer: Deployer, jobs_dir, email,
                                                                     message) -> None:
    name_account(jobs_dir, email)
    with pytest.raises(ConfigError) as caught:
        preflight(make_settings(), deployer.jobs(jobs_dir), None, {"bot": Path("jobs/bot.yaml")})
    assert [str(p) for p in caught.value.problems] == [message]


def test_the_repository_is_created_and_the_functions_build_into_it(deployer: Deployer, cloud: FakeCloud,
                                                                  jobs_dir) -> None:
    deployer.deploy(deployer.jobs(jobs_dir))
    creates = [c for c in cloud.calls() if c.method == "POST" and c.path == f"/v1/{LOCATION}/repositories"]
    assert {c.query["repositoryId"]: {k: v for k, v in c.body.items() if not k.startswith("cleanupPolic")}
            for c in creates} == {
        "spotcron": {"format": "DOCKER", "labels": {"spotcron": "1"}, "description": "spotcron: the functions' images"},
        "spotcron-jobs": {"format": "DOCKER", "labels": {"spotcron": "1"},
                          "description": "spotcron: the images owners push for the jobs that run as the VM account"},
        "spotcron-built": {"format": "DOCKER", "labels": {"spotcron": "1"},
                           "description": "spotcron: the images deploy builds for the jobs that run as the VM account"}}
    for fn in cloud.functions.functions.values():
        assert fn["buildConfig"]["dockerRepository"] == REPOSITORY
    [read] = [c for c in cloud.calls() if c.method == "GET" and c.path == f"/v1/{REPOSITORY}:getIamPolicy"][:1]
    assert read.query == {"options.requestedPolicyVersion": "3"}


def test_project_wide_registry_roles_of_earlier_deploys_are_revoked(deployer: Deployer, cloud: FakeCloud,
                                                                   jobs_dir) -> None:
    jobs = deployer.jobs(jobs_dir)
    deployer.deploy(jobs)
    project = f"projects/{PROJECT}"
    policy = cloud.project_policies.get(project)
    policy["bindings"] += [{"role": "roles/artifactregistry.reader", "members": [VM, "user:someone@example.com"]},
                           {"role": "roles/artifactregistry.writer", "members": [BUILD]}]
    cloud.project_policies.set(project, policy)
    lines = [(a.title, a.changes) for a in deployer.plan(jobs).actions]
    assert lines == [(f"update iam_policy project:{PROJECT}", {
        "roles/artifactregistry.reader": ((VM,), ()), "roles/artifactregistry.writer": ((BUILD,), ())})]
    deployer.deploy(jobs)
    roles = {b["role"]: b["members"] for b in cloud.project_policies.get(project)["bindings"]}
    assert roles["roles/artifactregistry.reader"] == ["user:someone@example.com"]  # not ours: left alone
    assert "roles/artifactregistry.writer" not in roles


def test_a_repository_of_another_format_stops_the_plan(deployer: Deployer, cloud: FakeCloud, jobs_dir) -> None:
    cloud.enable_apis()
    cloud.registry.repositories[REPOSITORY] = {"name": REPOSITORY, "format": "MAVEN", "labels": {}}
    with pytest.raises(DeployError, match=f"repository {REPOSITORY} exists but holds MAVEN packages, not container "
                                          "images; set another `repository:` in the stack file"):
        deployer.plan(deployer.jobs(jobs_dir))


def test_an_account_no_job_names_any_more_loses_what_deploy_granted(deployer: Deployer, cloud: FakeCloud,
                                                                   jobs_dir) -> None:
    create_account(cloud)
    name_account(jobs_dir)
    deployer.deploy(deployer.jobs(jobs_dir))
    bot = jobs_dir / "bot.yaml"
    bot.write_text(bot.read_text().replace(f"service_account: {JOB_ACCOUNT}\n", ""))
    jobs = deployer.jobs(jobs_dir)
    planned = {a.title: a.changes for a in deployer.plan(jobs).actions if a.resource_type == "iam_policy"}
    assert planned == {
        f"update iam_policy service_account:{JOB_ACCOUNT}": {"roles/iam.serviceAccountUser": ((FUNCTIONS,), ())},
        # Its repositories stay, read and written by nobody.
        f"update iam_policy repository:{OWN_REPOSITORY.rsplit('/', 1)[-1]}": {
            "roles/artifactregistry.reader": ((JOB,), ())},
        f"update iam_policy repository:{OWN_BUILT_REPOSITORY.rsplit('/', 1)[-1]}": {
            "roles/artifactregistry.reader": ((JOB,), ()), "roles/artifactregistry.writer": ((JOB_BUILD,), ())},
        "update iam_policy function:spotcron-job-done": {"roles/run.invoker": ((JOB, VM), (VM,))},
        "update iam_policy function:spotcron-credentials": {"roles/run.invoker": ((JOB, VM), (VM,))},
    }
    deployer.deploy(jobs)
    assert every_binding_of(cloud, JOB) == set()
    assert cloud.iam.policies.members(f"projects/{PROJECT}/serviceAccounts/{JOB_ACCOUNT}",
                                      "roles/iam.serviceAccountUser") == set()
    assert deployer.plan(jobs).actions == []
    assert JOB_ACCOUNT in cloud.iam.accounts  # the account itself is its owner's: never deleted


def test_destroy_revokes_what_deploy_granted_a_jobs_account(deployer: Deployer, cloud: FakeCloud, jobs_dir) -> None:
    from spotcron.deploy.destroy import run_destroy
    from tests.deploy.conftest import quick_caller

    create_account(cloud)
    name_account(jobs_dir)
    deployer.deploy(deployer.jobs(jobs_dir))
    run_destroy(make_settings(), cloud.clients(), compute=None, confirm=lambda plan: True, show=lambda plan: None,
                delete_results=False, caller=quick_caller(), poll_initial=0.01)
    assert every_binding_of(cloud, JOB) == set()
    assert cloud.iam.policies.members(f"projects/{PROJECT}/serviceAccounts/{JOB_ACCOUNT}",
                                      "roles/iam.serviceAccountUser") == set()
    assert JOB_ACCOUNT in cloud.iam.accounts


def test_preflight_refuses_an_image_in_another_repository_of_the_project(deployer: Deployer, jobs_dir) -> None:
    bot = jobs_dir / "bot.yaml"
    bot.write_text(bot.read_text().replace("us-central1-docker.pkg.dev/demo-proj/spotcron-jobs/bot:latest",
                                           "us-docker.pkg.dev/demo-proj/images/bot:latest"))
    with pytest.raises(ConfigError) as caught:
        preflight(make_settings(), deployer.jobs(jobs_dir), None, {"bot": Path("jobs/bot.yaml")})
    assert [str(p) for p in caught.value.problems] == [
        "jobs/bot.yaml: image: 'us-docker.pkg.dev/demo-proj/images/bot:latest' is in us-docker.pkg.dev/demo-proj/"
        "images, which this job's VM cannot read: it runs as spotcron's VM account, which reads only "
        "us-central1-docker.pkg.dev/demo-proj/spotcron-jobs (Artifact Registry grants per repository, so each "
        "account's jobs get their own); push the image to us-central1-docker.pkg.dev/demo-proj/spotcron-jobs/"
        "IMAGE:TAG and name it here, or use build: so that deploy builds it there"]
    # Images of other projects and other registries are not the stack's business (one the VM cannot
    # reach at all is: tests/core/test_egress.py).
    for image in ("us-docker.pkg.dev/someone-else/images/bot:1", "mirror.gcr.io/library/busybox:1"):
        bot.write_text(bot.read_text().replace("us-docker.pkg.dev/demo-proj/images/bot:latest", image))
        preflight(make_settings(), deployer.jobs(jobs_dir), None, {"bot": Path("jobs/bot.yaml")})
        bot.write_text(bot.read_text().replace(image, "us-docker.pkg.dev/demo-proj/images/bot:latest"))
