"""What a job's Dockerfile may change on the bucket of build logs, where its build account holds
Storage Admin, lasts no longer than the next deploy, and deploy's plan shows it.

docs/security.md ("Limits of what is built", (3)) says the worst a Dockerfile step can do there is
read logs an interrupted deploy left behind, fill the bucket for a day, or change the bucket's
settings and IAM policy "until the next deploy, which compares that bucket's whole policy and its
settings and puts them back". Storage Admin on a bucket holds storage.buckets.update and
storage.buckets.setIamPolicy (https://cloud.google.com/iam/docs/roles-permissions/storage), so a
build can set any field of the Bucket resource
(https://cloud.google.com/storage/docs/json_api/v1/buckets) and any binding of its policy.
"""

from __future__ import annotations

from typing import Any

import pytest

from tests.deploy.conftest import BUCKET, JOBS_DIR, PROJECT, Deployer
from tests.fakes.deploy.cloud import FakeCloud

JOB_BUILD = f"serviceAccount:spotcron-job-build@{PROJECT}.iam.gserviceaccount.com"
LOGS = f"{BUCKET}-build-logs"
RESOURCE = f"projects/_/buckets/{LOGS}"


def _deployed(deployer: Deployer, cloud: FakeCloud) -> list[Any]:
    jobs = deployer.jobs(JOBS_DIR)
    deployer.deploy(jobs)
    cloud.clock.advance(cloud.access.grant_delay_s)
    return jobs


def _foreign_bindings(cloud: FakeCloud) -> list[dict[str, Any]]:
    """The logs bucket's bindings other than the job build account's Storage Admin and the
    legacy bucket owner Cloud Storage gives the project's own owners on a new bucket."""
    _, policy = cloud.storage.policies.policy(RESOURCE)
    own = ({"role": "roles/storage.admin", "members": [JOB_BUILD]},
           {"role": "roles/storage.legacyBucketOwner", "members": [f"projectOwner:{PROJECT}"]})
    return [b for b in policy.get("bindings", []) if b not in own]


def _grant(cloud: FakeCloud, binding: dict[str, Any]) -> None:
    """What a Dockerfile step does with the build's token: storage.buckets.setIamPolicy."""
    _, policy = cloud.storage.policies.policy(RESOURCE)
    policy["bindings"].append(binding)
    if binding.get("condition"):
        policy["version"] = 3
    cloud.storage.policies.set(RESOURCE, policy)


@pytest.mark.parametrize("member", [
    "projectViewer:attacker-project",  # every viewer of a project the job's author owns
    f"projectViewer:{PROJECT}",  # every viewer of this project, who reads no build log otherwise
    "projectEditor:attacker-project",
])
def test_a_grant_a_build_made_to_a_project_role_on_the_logs_bucket_is_revoked(
        deployer: Deployer, cloud: FakeCloud, member: str) -> None:
    """Cloud Storage's convenience members (projectOwner:, projectEditor:, projectViewer: and a
    project id) are members like any other: a build may grant Storage Admin to the viewers of any
    project, and deploy must take that away as it does a user's grant."""
    jobs = _deployed(deployer, cloud)
    _grant(cloud, {"role": "roles/storage.admin", "members": [member]})
    titles = {a.title for a in deployer.plan(jobs).actions}
    assert f"update iam_policy bucket:{LOGS}" in titles, "the plan shows no change of the logs bucket's policy"
    deployer.deploy(jobs)
    assert _foreign_bindings(cloud) == []


@pytest.mark.parametrize("title", ["keep|me", "spotcron-build-contexts-only|outdated", "a|b|c"])
def test_a_conditional_grant_a_build_made_on_the_logs_bucket_is_revoked_whatever_its_title(
        deployer: Deployer, cloud: FakeCloud, title: str) -> None:
    """A condition's title is free text chosen by whoever writes the binding (Expr.title,
    https://cloud.google.com/iam/docs/reference/rest/v1/Expr), here the Dockerfile's step: a
    title holding the separator deploy keys its bindings with must not make the grant stick."""
    jobs = _deployed(deployer, cloud)
    _grant(cloud, {"role": "roles/storage.admin", "members": ["user:attacker@example.com"],
                   "condition": {"title": title, "expression":
                                 'request.time < timestamp("2100-01-01T00:00:00Z")'}})
    titles = {a.title for a in deployer.plan(jobs).actions}
    assert f"update iam_policy bucket:{LOGS}" in titles
    deployer.deploy(jobs)
    assert _foreign_bindings(cloud) == []
    assert {a.title for a in deployer.plan(jobs).actions} == set()
