"""A managed role deploy revokes from its own accounts is revoked under any condition too.

docs/security.md ("Storage and registry roles sit on one resource each"): "Deploy revokes these
roles from its accounts on the project wherever they are granted there (they are managed roles; an
earlier deploy's `logging.logWriter` on `spotcron-job-build` goes too)". A binding with an IAM
condition (https://cloud.google.com/iam/docs/conditions-overview) grants its role whenever the
condition holds: `request.time < timestamp(...)` holds for years. Deploy reads only the conditional
bindings whose title is one it writes (policies.managed_view), so one under any other title, the
job build account's logWriter on the project or a project-wide Storage Admin for the VM account,
stays, and each job's Dockerfile (or a container with metadata access) holds it.
"""

from __future__ import annotations

import pytest

from tests.deploy.conftest import JOBS_DIR, PROJECT, Deployer
from tests.fakes.deploy.cloud import FakeCloud

JOB_BUILD = f"serviceAccount:spotcron-job-build@{PROJECT}.iam.gserviceaccount.com"
VM = f"serviceAccount:spotcron-vm@{PROJECT}.iam.gserviceaccount.com"
FOR_YEARS = {"title": "temporary", "expression": 'request.time < timestamp("2100-01-01T00:00:00Z")'}


@pytest.mark.parametrize(("role", "who"), [("roles/logging.logWriter", JOB_BUILD),
                                           ("roles/storage.admin", VM),
                                           ("roles/artifactregistry.writer", JOB_BUILD)])
def test_a_managed_role_granted_to_spotcrons_account_under_a_condition_is_revoked(
        deployer: Deployer, cloud: FakeCloud, role: str, who: str) -> None:
    jobs = deployer.jobs(JOBS_DIR)
    deployer.deploy(jobs)
    project = f"projects/{PROJECT}"
    _, policy = cloud.project_policies.policy(project)
    policy["bindings"].append({"role": role, "members": [who], "condition": dict(FOR_YEARS)})
    policy["version"] = 3
    cloud.project_policies.set(project, policy)
    deployer.deploy(jobs)
    _, policy = cloud.project_policies.policy(project)
    left = [b for b in policy["bindings"] if b["role"] == role and who in b.get("members", [])]
    assert left == [], f"{who} still holds {role} on project {PROJECT}: {left}"
