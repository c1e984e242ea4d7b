"""Where start_job puts a job VM: the stack's network and subnet, Shielded VM on.

A project without a `default` network (compute.skipDefaultNetworkCreation) names its own in the
stack file; a project enforcing compute.requireShieldedVm refuses a VM without Secure Boot, vTPM and
integrity monitoring. Secure Boot stays off only for a GPU job (docs/deploy.md, "Shielded VM").
"""

from __future__ import annotations

import pytest

from spotcron.core.errors import ConfigError
from spotcron.core.settings import Settings, load_settings
from spotcron.gcp.compute import instance_body
from spotcron.testing.harness import Harness, make_spec


def test_a_cpu_job_joins_the_stacks_subnet_in_its_zones_region_with_secure_boot(h):
    h.start(make_spec())
    request = h.compute.created[0]
    assert request.network == "global/networks/default"
    assert request.subnetwork == f"regions/{request.zone.rsplit('-', 1)[0]}/subnetworks/default"
    assert instance_body(request)["shieldedInstanceConfig"] == {
        "enableSecureBoot": True, "enableVtpm": True, "enableIntegrityMonitoring": True}


def test_a_named_network_and_subnet_reach_the_instance_body():
    h = Harness(network="jobs-vpc", subnetwork="jobs-sub")
    h.start(make_spec())
    interface = instance_body(h.compute.created[0])["networkInterfaces"][0]
    assert interface["network"] == "global/networks/jobs-vpc"
    assert interface["subnetwork"].endswith("/subnetworks/jobs-sub")


@pytest.mark.parametrize("machine", [{"type": "n1-standard-4", "gpu": {"type": "nvidia-tesla-t4", "count": 1}},
                                     {"type": "g2-standard-4", "gpu": {"type": "nvidia-l4", "count": 1}}],
                         ids=["n1-with-t4", "g2-bundled-l4"])
def test_a_gpu_job_keeps_vtpm_and_integrity_monitoring_without_secure_boot(h, machine):
    h.start(make_spec(machine=machine))
    shielded = instance_body(h.compute.created[0])["shieldedInstanceConfig"]
    assert shielded == {"enableSecureBoot": False, "enableVtpm": True, "enableIntegrityMonitoring": True}


def test_network_names_are_checked(tmp_path):
    stack = tmp_path / "stack.yaml"
    stack.write_text("network: projects/host/global/networks/shared\nsubnetwork: Sub_1\n")
    with pytest.raises(ConfigError) as caught:
        load_settings(stack, {})
    fields = {p.field: p.message for p in caught.value.problems}
    assert fields["network"].startswith("'projects/host/global/networks/shared' is not a network name")
    assert fields["subnetwork"].startswith("'Sub_1' is not a subnetwork name")
    assert Settings().subnetwork_path("europe-west1") == "regions/europe-west1/subnetworks/default"
    assert Settings(network="vpc").subnetwork_path("us-east1") == "regions/us-east1/subnetworks/vpc"
