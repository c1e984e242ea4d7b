"""The image repository does not grow for ever: every job build and every function build pushes a
version, and Artifact Registry keeps them all unless the repository has cleanup policies
(https://cloud.google.com/artifact-registry/docs/repositories/cleanup-policy). Deploy sets two:
delete versions older than 30 days, keep the `image_versions_kept` most recent of each image.
A keep policy alone deletes nothing ("A keep policy only exempts matching artifacts from
deletion", https://cloud.google.com/artifact-registry/docs/repositories/cleanup-policy-overview)."""

from __future__ import annotations

from spotcron.deploy.planner import UPDATE
from tests.deploy.conftest import JOBS_DIR, PROJECT, Deployer, make_settings
from tests.fakes.deploy.cloud import FakeCloud

REPOSITORY = f"projects/{PROJECT}/locations/us-central1/repositories/spotcron"
DAY = 86400.0


def test_deploy_gives_the_repository_a_delete_and_a_keep_policy(deployer: Deployer, cloud: FakeCloud) -> None:
    deployer.deploy(deployer.jobs(JOBS_DIR))
    repo = cloud.registry.repositories[REPOSITORY]
    assert repo["cleanupPolicies"] == {
        "spotcron-delete-old": {"id": "spotcron-delete-old", "action": "DELETE",
                                "condition": {"olderThan": "2592000s", "tagState": "ANY"}},
        "spotcron-keep-recent": {"id": "spotcron-keep-recent", "action": "KEEP",
                                 "mostRecentVersions": {"keepCount": 10}},
    }
    assert repo["cleanupPolicyDryRun"] is False
    assert deployer.plan(deployer.jobs(JOBS_DIR)).actions == []


def test_the_policies_keep_the_recent_versions_of_each_image(deployer: Deployer, cloud: FakeCloud) -> None:
    deployer.deploy(deployer.jobs(JOBS_DIR))
    for day in range(40):  # one build a day for 40 days
        cloud.registry.push(REPOSITORY, "bot", f"sha256:{day:02d}", day * DAY, (f"ctx-{day}",))
    cloud.registry.push(REPOSITORY, "other", "sha256:old", 0.0)
    cloud.registry.cleanup(now_s=40 * DAY)
    kept = [version for version, _, _ in cloud.registry.versions[REPOSITORY]["bot"]]
    # Younger than 30 days: kept by age; the 10 most recent are among them.
    assert kept == [f"sha256:{day:02d}" for day in range(11, 40)]
    # An image with one old version keeps it: it is its most recent.
    assert [v for v, _, _ in cloud.registry.versions[REPOSITORY]["other"]] == ["sha256:old"]


def test_the_count_comes_from_the_stack_file_and_hand_made_policies_stay(deployer: Deployer,
                                                                          cloud: FakeCloud) -> None:
    deployer.deploy(deployer.jobs(JOBS_DIR))
    repo = cloud.registry.repositories[REPOSITORY]
    repo["cleanupPolicies"]["keep-prod"] = {"id": "keep-prod", "action": "KEEP",
                                            "condition": {"tagState": "TAGGED", "tagPrefixes": ["prod"]}}
    settings = make_settings(image_versions_kept=3)
    actions = [a for a in deployer.plan(deployer.jobs(JOBS_DIR), settings=settings).actions
               if a.resource_type == "repository"]
    assert [a.name for a in actions] == ["spotcron", "spotcron-built", "spotcron-jobs"]  # the functions', the jobs' two
    assert all(a.kind == UPDATE and set(a.changes) == {"cleanup"} for a in actions)
    deployer.deploy(deployer.jobs(JOBS_DIR), settings=settings)
    policies = cloud.registry.repositories[REPOSITORY]["cleanupPolicies"]
    assert policies["spotcron-keep-recent"]["mostRecentVersions"] == {"keepCount": 3}
    assert policies["keep-prod"]["condition"]["tagPrefixes"] == ["prod"]
    assert deployer.plan(deployer.jobs(JOBS_DIR), settings=settings).actions == []


def test_a_repository_without_policies_gets_them(deployer: Deployer, cloud: FakeCloud) -> None:
    deployer.deploy(deployer.jobs(JOBS_DIR))
    repo = cloud.registry.repositories[REPOSITORY]
    del repo["cleanupPolicies"]
    repo["cleanupPolicyDryRun"] = True  # policies evaluated, nothing deleted
    [action] = [a for a in deployer.plan(deployer.jobs(JOBS_DIR)).actions if a.resource_type == "repository"]
    assert set(action.changes) == {"cleanup", "cleanup_dry_run"}
    deployer.deploy(deployer.jobs(JOBS_DIR))
    assert set(cloud.registry.repositories[REPOSITORY]["cleanupPolicies"]) == {"spotcron-delete-old",
                                                                              "spotcron-keep-recent"}
    assert cloud.registry.repositories[REPOSITORY]["cleanupPolicyDryRun"] is False


def test_the_fake_refuses_what_artifact_registry_refuses() -> None:
    import pytest

    from tests.fakes.deploy.http import ApiError
    from tests.fakes.deploy.registry import FakeRegistry

    check = FakeRegistry._check_cleanup
    with pytest.raises(ApiError, match="exactly one of condition and mostRecentVersions"):
        check({"a": {"id": "a", "action": "KEEP", "condition": {"tagState": "ANY"},
                     "mostRecentVersions": {"keepCount": 1}}})
    with pytest.raises(ApiError, match="a duration in seconds"):
        check({"a": {"id": "a", "action": "DELETE", "condition": {"olderThan": "30d"}}})
    with pytest.raises(ApiError, match="KEEP policy's positive keepCount"):
        check({"a": {"id": "a", "action": "DELETE", "mostRecentVersions": {"keepCount": 1}}})
    with pytest.raises(ApiError, match="at most 10"):
        check({str(i): {"id": str(i), "action": "DELETE", "condition": {}} for i in range(11)})
