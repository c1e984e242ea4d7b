"""No job runs as an account that holds the project.

A job's `service_account:` is what its VM runs as; the container gets that account's token
(metadata access is implied), and deploy lets spotcron's functions act as it
(iam.serviceAccountUser). Validation refuses Google's default accounts, which hold broad roles in
most projects; an account of the project that holds Owner, Editor or Viewer on it (the account a
CI pipeline deploys with, say), a role deploy never grants on the whole project (storage and
registry roles reach every bucket and repository there: iam.PROJECT_WIDE_FORBIDDEN), or one of
BROAD_ROLES, is the same hazard under another name. Deploy reads the project's policy before it changes anything
(actual.Actual.project_roles), so it refuses such a job then.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from spotcron.core.spec import JobSpec
from spotcron.deploy.iam import PRIMITIVE_ROLES, PROJECT_WIDE_FORBIDDEN
from spotcron.deploy.naming import member

# Granted on the project, each of these breaks a wall spotcron keeps between jobs or around its own
# accounts: acting as (or minting tokens for) any account of the project, spotcron's functions
# account included; granting itself anything; reading every job's secrets.
BROAD_ROLES = frozenset({
    "roles/iam.serviceAccountUser", "roles/iam.serviceAccountTokenCreator",
    "roles/resourcemanager.projectIamAdmin", "roles/iam.securityAdmin",
    "roles/secretmanager.admin", "roles/secretmanager.secretAccessor",
})


def too_broad(role: str) -> bool:
    """Whether holding `role` on the project makes an account unfit to run a job as."""
    return role in PRIMITIVE_ROLES or role in BROAD_ROLES or role.startswith(PROJECT_WIDE_FORBIDDEN)


def breadth_problems(project: str, jobs: Iterable[JobSpec], project_roles: Mapping[str, frozenset[str]]) -> list[str]:
    """One line per job whose account holds a role on the project that is too broad (too_broad):
    where (the job file's field), what, how to fix. `project_roles`: the roles each member holds
    on the project's own policy."""
    problems = []
    for job in jobs:
        if not job.service_account:
            continue
        broad = sorted(r for r in project_roles.get(member(job.service_account), ()) if too_broad(r))
        if not broad:
            continue
        field = "secrets (the account deploy makes for them)" if job.deploy_account else "service_account"
        removal = "; ".join(f"gcloud projects remove-iam-policy-binding {project} --member "
                            f"serviceAccount:{job.service_account} --role {role}" for role in broad)
        problems.append(f"jobs/{job.name}.yaml: {field}: {job.service_account} holds {', '.join(broad)} on project "
                        f"{project}, and the job's VM would run as it (its container with the account's token, "
                        f"spotcron's functions allowed to act as it). Run the job as an account that holds only "
                        f"what the job needs, or take the role away ({removal})")
    return problems
