"""Deploy closes job VMs to the network: a deny-ingress firewall rule on
their tag, for IPv4 and IPv6, ahead of the default network's allow rules, and Private Google
Access on the region's subnet so that VMs without an external address still reach Google.

Request shapes are checked by the fake Compute Engine against the Firewall resource's fields
(tests/fakes/deploy/compute.py)."""

from __future__ import annotations

from spotcron.deploy.planner import UPDATE
from tests.deploy.conftest import JOBS_DIR, PROJECT, Deployer
from tests.fakes.deploy.cloud import FakeCloud


def test_deploy_denies_all_ingress_to_job_vms_and_turns_on_private_google_access(deployer: Deployer,
                                                                                 cloud: FakeCloud) -> None:
    deployer.deploy(deployer.jobs(JOBS_DIR))
    v4 = cloud.compute.firewalls["spotcron-deny-ingress"]
    assert v4["direction"] == "INGRESS" and v4["denied"] == [{"IPProtocol": "all"}]
    assert v4["sourceRanges"] == ["0.0.0.0/0"] and v4["targetTags"] == ["spotcron-vm"]
    assert v4["priority"] < 65534  # ahead of default-allow-ssh and default-allow-rdp
    assert v4["network"].endswith(f"projects/{PROJECT}/global/networks/default")
    assert cloud.compute.firewalls["spotcron-deny-ingress-v6"]["sourceRanges"] == ["::/0"]
    assert cloud.compute.private_google_access == {"us-central1": True}
    assert deployer.plan(deployer.jobs(JOBS_DIR)).actions == []


def test_a_rule_changed_by_hand_is_put_back(deployer: Deployer, cloud: FakeCloud) -> None:
    deployer.deploy(deployer.jobs(JOBS_DIR))
    cloud.compute.firewalls["spotcron-deny-ingress"]["sourceRanges"] = ["10.0.0.0/8"]
    [action] = [a for a in deployer.plan(deployer.jobs(JOBS_DIR)).actions if a.resource_type == "firewall"]
    assert action.kind == UPDATE and action.changes["source_ranges"] == (("10.0.0.0/8",), ("0.0.0.0/0",))
    deployer.deploy(deployer.jobs(JOBS_DIR))
    assert cloud.compute.firewalls["spotcron-deny-ingress"]["sourceRanges"] == ["0.0.0.0/0"]


def test_destroy_removes_the_rules_and_leaves_the_subnet_setting() -> None:
    from spotcron.deploy.destroy import plan_destroy
    from spotcron.deploy.naming import Names
    from spotcron.deploy.resources import FIREWALL, SUBNETWORK, Resource, index
    from tests.deploy.conftest import make_settings

    names = Names.of(make_settings())
    subnet = f"projects/{PROJECT}/regions/us-central1/subnetworks/default"
    actual = index([Resource(FIREWALL, "spotcron-deny-ingress", {"network": "global/networks/default"}, owned=True),
                    Resource(FIREWALL, "allow-office", {"network": "global/networks/default"}, owned=False),
                    Resource(SUBNETWORK, subnet, {"private_ip_google_access": True})])
    plan = plan_destroy(actual, names, delete_results=False)
    assert [(a.kind, a.name) for a in plan.actions] == [("delete", "spotcron-deny-ingress")]
    assert any("Private Google Access" in line for line in plan.kept)


def test_the_build_accounts_bucket_binding_is_conditional_on_the_deploy_prefix(deployer: Deployer,
                                                                                cloud: FakeCloud) -> None:
    from tests.deploy.conftest import BUCKET

    deployer.deploy(deployer.jobs(JOBS_DIR))
    policy = cloud.storage.policies.get(f"projects/_/buckets/{BUCKET}")
    build = f"serviceAccount:spotcron-build@{PROJECT}.iam.gserviceaccount.com"
    [binding] = [b for b in policy["bindings"] if build in b["members"]]
    assert binding["role"] == "roles/storage.objectViewer"
    assert binding["condition"]["expression"] == (
        f'resource.name.startsWith("projects/_/buckets/{BUCKET}/objects/deploy/")')
    assert policy["version"] == 3
    assert deployer.plan(deployer.jobs(JOBS_DIR)).actions == []


def test_a_named_network_and_subnet_are_used_for_the_rules_and_private_google_access(
        deployer: Deployer, cloud: FakeCloud) -> None:
    """An organisation without a `default` network (compute.skipDefaultNetworkCreation) names its own."""
    from tests.deploy.conftest import make_settings

    cloud.compute.networks = {"jobs-vpc": {"auto": False, "subnets": {"us-central1": ["jobs-us"]}}}
    settings = make_settings(network="jobs-vpc", subnetwork="jobs-us")
    deployer.deploy(deployer.jobs(JOBS_DIR), settings=settings)
    assert cloud.compute.firewalls["spotcron-deny-ingress"]["network"].endswith(
        f"projects/{PROJECT}/global/networks/jobs-vpc")
    assert cloud.compute.private_google_access == {"us-central1/jobs-us": True}
    assert deployer.plan(deployer.jobs(JOBS_DIR), settings=settings).actions == []


def test_without_the_subnet_deploy_stops_naming_the_settings(deployer: Deployer, cloud: FakeCloud) -> None:
    import pytest

    from spotcron.gcp.admin.calls import DeployError

    cloud.compute.networks = {}  # compute.skipDefaultNetworkCreation: no default network
    with pytest.raises(DeployError, match=r"subnetworks/default does not exist: job VMs join the stack's network "
                                          r"\(`network:` and `subnetwork:` in the stack file\)"):
        deployer.deploy(deployer.jobs(JOBS_DIR))
    # Enabling the APIs comes first; nothing else was made.
    assert [c for c in cloud.changing_calls() if not c.path.endswith(":enable")] == []


def test_the_default_network_google_makes_with_compute_engine_is_waited_for(source) -> None:
    """Google makes the `default` network when Compute Engine's API is enabled
    (https://cloud.google.com/vpc/docs/vpc#default-network); for a while after, its subnets read 404."""
    from spotcron.deploy.apply import DEFAULT_NETWORK
    from tests.deploy.conftest import Deployer, make_settings

    cloud = FakeCloud(PROJECT, network_delay_s=240.0).start()
    try:
        deployer = Deployer(cloud, make_settings(), source)
        deployer.deploy(deployer.jobs(JOBS_DIR))
        assert any(c.status == 404 and c.path.endswith("/subnetworks/default") for c in cloud.calls())
        assert cloud.compute.private_google_access == {"us-central1": True}
        assert any(f"waiting for {DEFAULT_NETWORK}" in note for note in deployer.reporter.notes)
    finally:
        cloud.stop()


def test_private_google_access_in_a_placement_region_waits_on_that_regions_operation(
        deployer: Deployer, cloud: FakeCloud) -> None:
    """setPrivateIpGoogleAccess answers an operation of the subnet's region, readable only there
    (https://cloud.google.com/compute/docs/reference/rest/v1/regionOperations/get)."""
    from tests.deploy.conftest import make_settings

    settings = make_settings(placement={"regions": ["us-west4", "us-east1"]})
    deployer.deploy(deployer.jobs(JOBS_DIR), settings=settings)
    assert cloud.compute.private_google_access == {"us-central1": True, "us-east1": True, "us-west4": True}
