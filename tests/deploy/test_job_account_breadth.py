"""No job runs as an account that holds the project.

A job's `service_account:` makes its VM run as that account and hands its token to the container
(metadata access is implied), and deploy grants spotcron's functions `iam.serviceAccountUser` on
it so that start_job can create VMs as it (docs/security.md, "A job's own service account").
Validation refuses Google's default accounts because they "hold broad roles in most projects"
(core/spec.service_account_problem), and spotcron's own accounts; any other account of the project
is taken as named. An account that holds Owner or Editor on the project (the account a CI pipeline
deploys with, say) is the same hazard as a default account, only under another name: the job's
code runs with the whole project, and the functions account may act as a project owner. Deploy
reads the project's policy before it changes anything, so it can tell.
"""

from __future__ import annotations

import contextlib
from pathlib import Path

import pytest

from spotcron.gcp.admin.calls import DeployError
from tests.deploy.conftest import PROJECT, Deployer
from tests.deploy.test_job_accounts import create_account, name_account
from tests.fakes.deploy.cloud import FakeCloud

CI = f"ci-deployer@{PROJECT}.iam.gserviceaccount.com"
FUNCTIONS = f"serviceAccount:spotcron-functions@{PROJECT}.iam.gserviceaccount.com"


@pytest.mark.parametrize("role", ["roles/owner", "roles/editor"])
def test_deploy_refuses_a_job_that_runs_as_an_account_holding_a_primitive_role_on_the_project(
        deployer: Deployer, cloud: FakeCloud, jobs_dir: Path, role: str) -> None:
    create_account(cloud, "ci-deployer")
    cloud.project_policies.grant(f"projects/{PROJECT}", role, f"serviceAccount:{CI}")
    name_account(jobs_dir, CI)
    with contextlib.suppress(DeployError):  # refused, as a default account is
        deployer.deploy(deployer.jobs(jobs_dir))
    holders = cloud.iam.policies.members(f"projects/{PROJECT}/serviceAccounts/{CI}", "roles/iam.serviceAccountUser")
    assert FUNCTIONS not in holders, (
        f"deploy let job bot run as {CI}, which holds {role} on the project, and granted the functions "
        f"account iam.serviceAccountUser on it")


@pytest.mark.parametrize("role", ["roles/viewer", "roles/storage.admin", "roles/iam.serviceAccountTokenCreator",
                                  "roles/secretmanager.secretAccessor"])
def test_the_refusal_says_where_what_and_how_to_fix(deployer: Deployer, cloud: FakeCloud, jobs_dir: Path,
                                                     role: str) -> None:
    create_account(cloud, "ci-deployer")
    cloud.project_policies.grant(f"projects/{PROJECT}", role, f"serviceAccount:{CI}")
    name_account(jobs_dir, CI)
    with pytest.raises(DeployError) as refused:
        deployer.deploy(deployer.jobs(jobs_dir))
    text = str(refused.value)
    assert "nothing was changed" in text and "jobs/bot.yaml: service_account:" in text
    assert f"{CI} holds {role} on project {PROJECT}" in text
    assert f"gcloud projects remove-iam-policy-binding {PROJECT} --member serviceAccount:{CI} --role {role}" in text


def test_an_account_with_what_its_job_needs_on_the_project_is_taken(deployer: Deployer, cloud: FakeCloud,
                                                                     jobs_dir: Path) -> None:
    create_account(cloud, "ci-deployer")
    cloud.project_policies.grant(f"projects/{PROJECT}", "roles/bigquery.dataEditor", f"serviceAccount:{CI}")
    name_account(jobs_dir, CI)
    deployer.deploy(deployer.jobs(jobs_dir))
    assert FUNCTIONS in cloud.iam.policies.members(f"projects/{PROJECT}/serviceAccounts/{CI}",
                                                   "roles/iam.serviceAccountUser")
