"""The job images' build logs get a bucket of their own, where the job build account holds what
Google asks for a user-created logs bucket (Storage Admin), and nothing of that account's is on the
results bucket but reading the build contexts.

A build whose account holds only an Object Creator conditioned on a prefix of the results bucket
is refused at creation by the strict Cloud Build fake, as Google checks the logs bucket then. Since
a job's Dockerfile runs with Storage Admin on the logs bucket, every deploy compares that bucket's
whole IAM policy and settings and puts them back.
"""

from __future__ import annotations

import re
from collections.abc import Iterator

import pytest

from spotcron.core.build_logs import MAX_NAME, SUFFIX, build_logs_bucket
from spotcron.deploy.destroy import plan_destroy
from spotcron.deploy.naming import Names
from spotcron.deploy.resources import BUCKET as BUCKET_TYPE
from spotcron.deploy.resources import Resource
from tests.deploy.conftest import BUCKET, JOBS_DIR, PROJECT, Deployer, make_settings
from tests.fakes.cloudbuild import FakeCloudBuild
from tests.fakes.deploy.cloud import FakeCloud

JOB_BUILD = f"spotcron-job-build@{PROJECT}.iam.gserviceaccount.com"
LOGS = f"{BUCKET}-build-logs"
# Cloud Storage's rules for a bucket name without dots (https://cloud.google.com/storage/docs/buckets#naming).
VALID = re.compile(r"^[a-z0-9][a-z0-9_-]{1,61}[a-z0-9]$")
OLD_CONDITION = {"title": "spotcron-build-logs-only", "description": "spotcron: only the job images' build logs",
                 "expression": f'resource.name.startsWith("projects/_/buckets/{BUCKET}/objects/build-logs/")'}
OLD_RULE = {"action": {"type": "Delete"}, "condition": {"age": 1, "matchesPrefix": ["build-logs/"]}}


def _deployed(deployer: Deployer, cloud: FakeCloud) -> None:
    deployer.deploy(deployer.jobs(JOBS_DIR))
    cloud.clock.advance(cloud.access.grant_delay_s)


def _bindings(cloud: FakeCloud, bucket: str) -> list[dict]:
    """The bucket's bindings, but for the project's convenience ones Cloud Storage adds to a new bucket."""
    return [b for b in cloud.storage.policies.policy(f"projects/_/buckets/{bucket}")[1].get("bindings", [])
            if not all(m.startswith("project") for m in b["members"])]


@pytest.fixture
def fake(cloud: FakeCloud) -> Iterator[FakeCloudBuild]:
    yield cloud.cloud_build()


def test_the_logs_bucket_is_named_after_the_results_bucket_within_the_rules() -> None:
    assert build_logs_bucket(BUCKET) == LOGS
    assert Names.of(make_settings()).build_logs_bucket == LOGS
    longest_plain = "b" * (MAX_NAME - len(SUFFIX))
    assert build_logs_bucket(longest_plain) == longest_plain + SUFFIX
    for results in ("b" * (MAX_NAME - len(SUFFIX) + 1), "x" * 63, "results.example.com", "a" * 50 + "_" + "c" * 12):
        name = build_logs_bucket(results)
        assert VALID.match(name) and len(name) <= MAX_NAME and name.endswith(SUFFIX), name
        assert build_logs_bucket(results) == name  # the same every deploy
    # Two long names that share their first 44 characters still get two buckets.
    assert build_logs_bucket("x" * 63) != build_logs_bucket("x" * 62 + "y")


def test_deploy_creates_the_logs_bucket_with_its_settings(deployer: Deployer, cloud: FakeCloud) -> None:
    _deployed(deployer, cloud)
    bucket = cloud.storage.buckets[LOGS]
    results = cloud.storage.buckets[BUCKET]
    assert bucket["location"] == results["location"] == "US-CENTRAL1"
    assert bucket["iamConfiguration"]["uniformBucketLevelAccess"]["enabled"] is True
    assert bucket["iamConfiguration"]["publicAccessPrevention"] == "enforced"
    assert bucket["lifecycle"]["rule"] == [{"action": {"type": "Delete"}, "condition": {"age": 1}}]
    assert bucket["labels"] == {"spotcron": "1"}
    assert not (bucket.get("versioning") or {}).get("enabled")
    # The results bucket keeps no rule for build logs: none are written there.
    assert OLD_RULE not in results["lifecycle"]["rule"]


def test_storage_admin_sits_on_the_logs_bucket_only(deployer: Deployer, cloud: FakeCloud) -> None:
    _deployed(deployer, cloud)
    job_build = f"serviceAccount:{JOB_BUILD}"
    assert _bindings(cloud, LOGS) == [{"role": "roles/storage.admin", "members": [job_build]}]
    mine = [(b["role"], (b.get("condition") or {}).get("title")) for b in _bindings(cloud, BUCKET)
            if job_build in b["members"]]
    assert mine == [("roles/storage.objectViewer", "spotcron-build-contexts-only")]  # the contexts, read
    project = cloud.project_policies.policy(f"projects/{PROJECT}")[1]
    assert not [b for b in project.get("bindings", []) if job_build in b["members"]
                and b["role"].startswith("roles/storage.")]
    assert cloud.may_write_build_logs(JOB_BUILD, LOGS, "log-1.txt")
    assert not cloud.may_write_build_logs(JOB_BUILD, BUCKET, "build-logs/log-1.txt")


def test_a_build_whose_account_holds_only_the_prefix_grant_is_refused(deployer: Deployer, cloud: FakeCloud,
                                                                      fake: FakeCloudBuild) -> None:
    """What an Object Creator on the results bucket's build-logs/ prefix gives: no bucket permission,
    so Cloud Build refuses a build logging to gs://BUCKET/build-logs at creation."""
    _deployed(deployer, cloud)
    resource = f"projects/_/buckets/{BUCKET}"
    _, policy = cloud.storage.policies.policy(resource)
    policy["bindings"].append({"role": "roles/storage.objectCreator", "members": [f"serviceAccount:{JOB_BUILD}"],
                               "condition": OLD_CONDITION})
    policy["version"] = 3
    cloud.storage.policies.set(resource, policy)
    cloud.clock.advance(cloud.access.grant_delay_s)
    assert cloud.may_create_object(JOB_BUILD, BUCKET, "build-logs/log-probe.txt")  # the grant holds...
    cloud.storage.put(BUCKET, "deploy/build-x.tar.gz", b"context")
    body = {"source": {"storageSource": {"bucket": BUCKET, "object": "deploy/build-x.tar.gz"}},
            "steps": [{"name": "gcr.io/cloud-builders/docker", "args": ["build", "."]}],
            "serviceAccount": f"projects/{PROJECT}/serviceAccounts/{JOB_BUILD}",
            "logsBucket": f"gs://{BUCKET}/build-logs", "options": {"logging": "GCS_ONLY"}}
    match = re.fullmatch(r"/v1/(?P<parent>projects/(?P<project>[^/]+)/locations/(?P<location>[^/]+))",
                         f"/v1/projects/{PROJECT}/locations/us-central1")
    with pytest.raises(Exception, match="builder service account does not have access to logs bucket"):
        fake.create(match, body)  # ...and is not what the logs bucket takes
    assert fake.builds == []
    # The bucket deploy made, with Storage Admin there, is.
    fake.create(match, {**body, "logsBucket": f"gs://{LOGS}"})
    assert len(fake.builds) == 1


def test_a_stack_deployed_before_loses_the_prefix_grant_and_its_rule(deployer: Deployer, cloud: FakeCloud) -> None:
    jobs = deployer.jobs(JOBS_DIR)
    _deployed(deployer, cloud)
    resource = f"projects/_/buckets/{BUCKET}"
    _, policy = cloud.storage.policies.policy(resource)
    policy["bindings"].append({"role": "roles/storage.objectCreator", "members": [f"serviceAccount:{JOB_BUILD}"],
                               "condition": OLD_CONDITION})
    policy["version"] = 3
    cloud.storage.policies.set(resource, policy)
    cloud.storage.buckets[BUCKET]["lifecycle"]["rule"].append(OLD_RULE)
    titles = {a.title for a in deployer.plan(jobs).actions}
    assert {f"update iam_policy bucket:{BUCKET}", f"update bucket {BUCKET}"} <= titles
    deployer.deploy(jobs)
    assert OLD_RULE not in cloud.storage.buckets[BUCKET]["lifecycle"]["rule"]
    assert not [b for b in _bindings(cloud, BUCKET) if b["role"] == "roles/storage.objectCreator"]


def test_a_build_that_changed_the_logs_bucket_is_put_back_by_the_next_deploy(deployer: Deployer,
                                                                               cloud: FakeCloud) -> None:
    """Storage Admin lets a Dockerfile step change the logs bucket's IAM and settings: deploy
    compares all of them and restores its own."""
    jobs = deployer.jobs(JOBS_DIR)
    _deployed(deployer, cloud)
    resource = f"projects/_/buckets/{LOGS}"
    _, policy = cloud.storage.policies.policy(resource)
    policy["bindings"] += [{"role": "roles/storage.objectViewer", "members": ["user:attacker@example.com"]},
                           {"role": "roles/storage.admin", "members": ["user:attacker@example.com"]}]
    cloud.storage.policies.set(resource, policy)
    bucket = cloud.storage.buckets[LOGS]
    bucket["iamConfiguration"]["publicAccessPrevention"] = "inherited"
    bucket["lifecycle"]["rule"] = [{"action": {"type": "SetStorageClass", "storageClass": "ARCHIVE"},
                                    "condition": {"age": 1}}]
    bucket["versioning"] = {"enabled": True}
    titles = {a.title for a in deployer.plan(jobs).actions}
    assert {f"update iam_policy bucket:{LOGS}", f"update bucket {LOGS}"} <= titles
    deployer.deploy(jobs)
    assert _bindings(cloud, LOGS) == [{"role": "roles/storage.admin", "members": [f"serviceAccount:{JOB_BUILD}"]}]
    bucket = cloud.storage.buckets[LOGS]
    assert bucket["iamConfiguration"]["publicAccessPrevention"] == "enforced"
    assert bucket["lifecycle"]["rule"] == [{"action": {"type": "Delete"}, "condition": {"age": 1}}]
    assert not bucket["versioning"]["enabled"]
    assert {a.title for a in deployer.plan(jobs).actions} == set()  # nothing left to change


def test_destroy_deletes_the_logs_bucket_and_keeps_the_results_bucket() -> None:
    actual = {(BUCKET_TYPE, BUCKET): Resource(BUCKET_TYPE, BUCKET, {}, owned=True),
              (BUCKET_TYPE, LOGS): Resource(BUCKET_TYPE, LOGS, {}, owned=True)}
    plan = plan_destroy(actual, Names.of(make_settings()), delete_results=False)
    assert [a.title for a in plan.actions] == [f"delete bucket {LOGS}"]
    assert plan.kept == [f"bucket {BUCKET} and every run's results in it (--delete-results deletes them)"]
    unlabelled = {(BUCKET_TYPE, LOGS): Resource(BUCKET_TYPE, LOGS, {}, owned=False)}
    plan = plan_destroy(unlabelled, Names.of(make_settings()), delete_results=True)
    assert plan.actions == [] and plan.kept == [
        f"bucket {LOGS}: it does not carry the label spotcron=1, so it is not ours to delete"]
