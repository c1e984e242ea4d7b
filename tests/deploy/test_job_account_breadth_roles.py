"""A job never runs as an account that can act as any account of the project, or that reaches
every repository (or bucket) of it, whatever the role's name.

docs/security.md ("A job's own service account") says deploy refuses a job whose account holds,
on the project, "a storage or registry role on the whole project" or "a role that acts as any
account, administers IAM or reads every secret". Each role below holds permissions that do exactly
that (Google's role reference, https://cloud.google.com/iam/docs/roles-permissions/iam and
https://cloud.google.com/iam/docs/roles-permissions/cloudbuild):

- roles/iam.serviceAccountKeyAdmin: iam.serviceAccountKeys.create on every account of the
  project, so a key for spotcron-functions (or any job's account) is one call away;
- roles/iam.serviceAccountAdmin: iam.serviceAccounts.setIamPolicy on every account, so it grants
  itself Token Creator on the functions account;
- roles/iam.workloadIdentityUser: iam.serviceAccounts.getAccessToken on every account;
- roles/cloudbuild.builds.builder: artifactregistry.repositories.uploadArtifacts on every
  repository of the project (every owners' repository's prebuilt tags, the functions' images).

A job's container holds its account's token (metadata access is implied), so each of these hands
the job's code the project, as Owner would.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from spotcron.gcp.admin.calls import DeployError
from tests.deploy.conftest import PROJECT, Deployer
from tests.deploy.test_job_accounts import create_account, name_account
from tests.fakes.deploy.cloud import FakeCloud

CI = f"ci-deployer@{PROJECT}.iam.gserviceaccount.com"
FUNCTIONS = f"serviceAccount:spotcron-functions@{PROJECT}.iam.gserviceaccount.com"


@pytest.mark.parametrize("role", ["roles/iam.serviceAccountKeyAdmin", "roles/iam.serviceAccountAdmin",
                                  "roles/iam.workloadIdentityUser", "roles/cloudbuild.builds.builder"])
def test_deploy_refuses_a_job_whose_account_can_act_as_any_account_or_push_to_every_repository(
        deployer: Deployer, cloud: FakeCloud, jobs_dir: Path, role: str) -> None:
    create_account(cloud, "ci-deployer")
    cloud.project_policies.grant(f"projects/{PROJECT}", role, f"serviceAccount:{CI}")
    name_account(jobs_dir, CI)
    refused, holders = _deploy_as_ci(deployer, cloud, jobs_dir)
    assert refused and FUNCTIONS not in holders, (
        f"deploy let job bot run as {CI}, which holds {role} on the project, and granted the functions "
        f"account iam.serviceAccountUser on it")


@pytest.mark.parametrize("target", ["spotcron-functions", "spotcron-job-build"])
def test_deploy_refuses_a_job_whose_account_can_act_as_one_of_spotcrons_own_accounts(
        deployer: Deployer, cloud: FakeCloud, jobs_dir: Path, target: str) -> None:
    """Token Creator granted on one account (a policy on the account, not the project) lets the
    holder mint that account's tokens. On spotcron's functions account it is the project's storage,
    VMs and every run record, for the job's code; docs/security.md: "The job gets exactly the roles
    its owner granted the account and never spotcron's"."""
    deployer.deploy(deployer.jobs(jobs_dir))  # spotcron's accounts exist
    create_account(cloud, "ci-deployer")
    cloud.iam.policies.grant(f"projects/{PROJECT}/serviceAccounts/{target}@{PROJECT}.iam.gserviceaccount.com",
                             "roles/iam.serviceAccountTokenCreator", f"serviceAccount:{CI}")
    name_account(jobs_dir, CI)
    refused, holders = _deploy_as_ci(deployer, cloud, jobs_dir)
    assert refused and FUNCTIONS not in holders, (
        f"deploy let job bot run as {CI}, which may mint tokens of {target}")


def _deploy_as_ci(deployer: Deployer, cloud: FakeCloud, jobs_dir: Path) -> tuple[bool, set]:
    """Whether deploy refused the job that runs as CI, and who may act as CI afterwards."""
    refused = False
    try:
        deployer.deploy(deployer.jobs(jobs_dir))
    except DeployError:
        refused = True
    return refused, set(cloud.iam.policies.members(f"projects/{PROJECT}/serviceAccounts/{CI}",
                                                   "roles/iam.serviceAccountUser"))
