"""No job runs as an account that holds the project.

A job's `service_account:` is what its VM runs as; the container gets that account's token
(metadata access is implied), and deploy lets spotcron's functions act as it
(iam.serviceAccountUser). Validation refuses Google's default accounts, which hold broad roles in
most projects; an account of the project that holds Owner, Editor or Viewer on it (the account a
CI pipeline deploys with, say), a role deploy never grants on the whole project (storage and
registry roles reach every bucket and repository there: iam.PROJECT_WIDE_FORBIDDEN), or one of
BROAD_ROLES, is the same hazard under another name; so is an account that may act as one of
spotcron's own accounts (a role of BROAD_ROLES on that account's policy). Deploy reads the
project's policy and those accounts' before it changes anything (actual.Actual.project_roles,
account_roles), so it refuses such a job then.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from spotcron.core.spec import JobSpec
from spotcron.deploy.iam import PRIMITIVE_ROLES, PROJECT_WIDE_FORBIDDEN
from spotcron.deploy.naming import member

# Granted on the project, each of these breaks a wall spotcron keeps between jobs or around its own
# accounts: acting as (or minting tokens, ID tokens or keys for) any account of the project,
# spotcron's functions account included; taking over any account's policy; granting itself
# anything; reading every job's secrets; writing every repository (builds.builder holds
# artifactregistry.repositories.uploadArtifacts on the project, builds.editor runs builds as the
# project's Cloud Build account, which holds it). Google's role reference:
# https://cloud.google.com/iam/docs/roles-permissions/iam (serviceAccountKeyAdmin:
# iam.serviceAccountKeys.create; serviceAccountAdmin: iam.serviceAccounts.setIamPolicy;
# workloadIdentityUser: iam.serviceAccounts.getAccessToken; serviceAccountOpenIdTokenCreator:
# iam.serviceAccounts.getOpenIdToken) and https://cloud.google.com/iam/docs/roles-permissions/cloudbuild.
BROAD_ROLES = frozenset({
    "roles/iam.serviceAccountUser", "roles/iam.serviceAccountTokenCreator",
    "roles/iam.serviceAccountKeyAdmin", "roles/iam.serviceAccountAdmin", "roles/iam.workloadIdentityUser",
    "roles/iam.serviceAccountOpenIdTokenCreator",
    "roles/resourcemanager.projectIamAdmin", "roles/iam.securityAdmin",
    "roles/secretmanager.admin", "roles/secretmanager.secretAccessor",
    "roles/cloudbuild.builds.builder", "roles/cloudbuild.builds.editor",
})


def too_broad(role: str) -> bool:
    """Whether holding `role` on the project makes an account unfit to run a job as."""
    return role in PRIMITIVE_ROLES or role in BROAD_ROLES or role.startswith(PROJECT_WIDE_FORBIDDEN)


def breadth_problems(project: str, jobs: Iterable[JobSpec], project_roles: Mapping[str, frozenset[str]],
                     account_roles: Mapping[str, Mapping[str, frozenset[str]]] | None = None) -> list[str]:
    """One line per job whose account holds a role on the project that is too broad (too_broad),
    or one on a spotcron account's own policy that acts as that account (Token Creator or Service
    Account User on spotcron-functions is the functions' storage, VMs and run records): where (the
    job file's field), what, how to fix. `project_roles`: the roles each member holds on the
    project's own policy; `account_roles`: on each of spotcron's accounts' (email: member: roles)."""
    problems = []
    for job in jobs:
        if not job.service_account:
            continue
        who = member(job.service_account)
        field = "secrets (the account deploy makes for them)" if job.deploy_account else "service_account"
        broad = sorted(r for r in project_roles.get(who, ()) if too_broad(r))
        if broad:
            removal = "; ".join(f"gcloud projects remove-iam-policy-binding {project} --member "
                                f"serviceAccount:{job.service_account} --role {role}" for role in broad)
            problems.append(f"jobs/{job.name}.yaml: {field}: {job.service_account} holds {', '.join(broad)} on "
                            f"project {project}, and the job's VM would run as it (its container with the account's "
                            f"token, spotcron's functions allowed to act as it). Run the job as an account that holds "
                            f"only what the job needs, or take the role away ({removal})")
        for account, held in sorted((account_roles or {}).items()):
            acting = sorted(r for r in held.get(who, ()) if too_broad(r))
            if not acting:
                continue
            removal = "; ".join(f"gcloud iam service-accounts remove-iam-policy-binding {account} --project {project} "
                                f"--member serviceAccount:{job.service_account} --role {role}" for role in acting)
            problems.append(f"jobs/{job.name}.yaml: {field}: {job.service_account} holds {', '.join(acting)} on "
                            f"spotcron's service account {account}, so the job's container (with the account's token) "
                            f"could act as {account} and hold everything spotcron grants it. Run the job as an account "
                            f"that holds nothing on spotcron's accounts, or take the role away ({removal})")
    return problems
