"""Buckets deploy refuses to use: one of another project (results or build logs), and a bucket of
build logs whose locked retention policy keeps every log past deploy's delete."""

from __future__ import annotations

import pytest

from spotcron.gcp.admin.calls import DeployError
from tests.deploy.conftest import BUCKET, JOBS_DIR, Deployer
from tests.fakes.deploy.cloud import FakeCloud

LOGS = f"{BUCKET}-build-logs"


def test_a_results_bucket_of_another_project_is_refused(deployer: Deployer, cloud: FakeCloud) -> None:
    jobs = deployer.jobs(JOBS_DIR)
    deployer.deploy(jobs)
    cloud.storage.buckets[BUCKET]["projectNumber"] = "999999999999"
    with pytest.raises(DeployError, match=r"belongs to project number 999999999999.*set another `bucket:`"):
        deployer.deploy(jobs)


def test_the_stacks_own_buckets_carry_its_project_number(deployer: Deployer, cloud: FakeCloud) -> None:
    deployer.deploy(deployer.jobs(JOBS_DIR))
    assert cloud.storage.buckets[BUCKET]["projectNumber"] == cloud.storage.buckets[LOGS]["projectNumber"] \
        == str(cloud.access.number)


def test_a_locked_retention_policy_on_the_logs_bucket_stops_deploy_with_a_clear_message(
        deployer: Deployer, cloud: FakeCloud) -> None:
    """A locked retention policy cannot be removed or shortened
    (https://cloud.google.com/storage/docs/bucket-lock): no log could be deleted for its period."""
    jobs = deployer.jobs(JOBS_DIR)
    deployer.deploy(jobs)
    cloud.storage.buckets[LOGS]["retentionPolicy"] = {"retentionPeriod": "31536000", "isLocked": True}
    with pytest.raises(DeployError, match=r"locked retention policy of 31536000s.*set another `bucket:`"):
        deployer.deploy(jobs)
    assert cloud.storage.buckets[LOGS]["retentionPolicy"]["isLocked"] is True
