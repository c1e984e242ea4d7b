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
# Soft delete is on for every bucket by default, seven days ("Soft delete is enabled by default on all
# buckets and has a retention duration of seven days", https://cloud.google.com/storage/docs/soft-delete):
# a deleted log stays listable and restorable by whoever holds Storage Admin there.
SOFT_DELETE_90_DAYS = {"retentionDurationSeconds": "7776000"}


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


@pytest.mark.parametrize(("field", "value"), [
    # Deleted logs kept 90 days as soft-deleted objects, each restorable and readable by the next
    # build's Dockerfile: every other job's build log, not only one an interrupted deploy left.
    ("softDeletePolicy", SOFT_DELETE_90_DAYS),
    # Objects the build writes can no longer be deleted, by the lifecycle rule or anyone, for a year.
    ("retentionPolicy", {"retentionPeriod": "31536000"}),
    # Every new object (each later build's log) held: the lifecycle rule skips it and deploy's
    # delete of the log is refused, so logs pile up and stay there to read.
    ("defaultEventBasedHold", True),
    # Every later build's log encrypted with a key the job's author holds in a project of theirs.
    ("encryption", {"defaultKmsKeyName": "projects/attacker/locations/us/keyRings/r/cryptoKeys/k"}),
    # The bucket's usage logs delivered to a bucket of the job's author.
    ("logging", {"logBucket": "attacker-bucket", "logObjectPrefix": "spotcron"}),
    # Requests without a billing project refused: Cloud Build writing the next log among them.
    ("billing", {"requesterPays": True}),
])
def test_a_setting_a_build_changed_on_the_logs_bucket_is_put_back(
        deployer: Deployer, cloud: FakeCloud, field: str, value: Any) -> None:
    jobs = _deployed(deployer, cloud)
    cloud.storage.buckets[LOGS][field] = value  # storage.buckets.update, with the build's token
    titles = {a.title for a in deployer.plan(jobs).actions}
    assert f"update bucket {LOGS}" in titles, f"the plan does not show the logs bucket's {field} changed"
    deployer.deploy(jobs)
    # Requester pays is turned off by writing `billing.requesterPays: false`, which the bucket keeps.
    assert cloud.storage.buckets[LOGS].get(field) in (None, {}, False, {"retentionDurationSeconds": "0"},
                                                      {"requesterPays": False}), \
        f"{field} is still {cloud.storage.buckets[LOGS].get(field)!r} after deploy"


def test_the_logs_bucket_keeps_no_deleted_log(deployer: Deployer, cloud: FakeCloud) -> None:
    """Deploy deletes each log once its build ended so that the next build's Dockerfile, holding
    Storage Admin there, has none to read. With Cloud Storage's default soft delete (seven days) a
    deleted log stays restorable for a week, so the bucket is made, and kept, without it."""
    _deployed(deployer, cloud)
    policy = cloud.storage.buckets[LOGS].get("softDeletePolicy") or {}
    assert str(policy.get("retentionDurationSeconds")) == "0", \
        f"the logs bucket keeps deleted logs: softDeletePolicy {policy!r} (Google's default is seven days)"


def test_a_logs_bucket_of_another_project_is_never_taken_for_the_stacks(deployer: Deployer, cloud: FakeCloud) -> None:
    """Storage Admin holds storage.buckets.delete: a Dockerfile step empties the bucket of build logs
    and deletes it, and its author creates a bucket of that name in a project of theirs (bucket
    names are global, https://cloud.google.com/storage/docs/buckets#naming), with the same settings
    and labels, Storage Admin for spotcron-job-build and read access for the deployer. Every later
    build would write its log there (`logsBucket` names the bucket only), every job's build output
    in a stranger's project. A bucket carries the number of the project that owns it
    (`projectNumber`, https://cloud.google.com/storage/docs/json_api/v1/buckets): deploy must not
    take a logs bucket of another project as the stack's."""
    from spotcron.gcp.admin.calls import DeployError

    jobs = _deployed(deployer, cloud)
    taken = dict(cloud.storage.buckets[LOGS])
    taken["projectNumber"] = "999999999999"  # the job's author's project
    assert str(cloud.access.number) != taken["projectNumber"]
    cloud.storage.buckets[LOGS] = taken
    with pytest.raises(DeployError):
        deployer.deploy(jobs)
