"""GoogleCompute against the fake Compute Engine REST server: exact wire bodies and error mapping."""

from __future__ import annotations

import subprocess
import sys
from datetime import UTC, datetime

import pytest

from spotcron.core.errors import AlreadyExists, CreateFailed, Transient
from spotcron.gcp.compute import MANAGED_FILTER, instance_body
from spotcron.gcp.error_map import ApiError
from tests.fakes.gcp.compute import INSTANCES_PATH
from tests.gcp.fixtures import make_google_compute
from tests.gcp.samples import VM_ACCOUNT, ZONE, cpu_request, gpu_request

INSTANCES = f"/compute/v1/projects/test-project/zones/{ZONE}/instances"
AGGREGATED = "/compute/v1/projects/test-project/aggregated/instances"


EXPECTED_CPU_BODY = {
    "name": "sc-bot-20261122-1000-a1",
    "machineType": "zones/us-central1-a/machineTypes/e2-small",
    "labels": {"spotcron": "1", "job": "bot", "run": "20261122-1000", "attempt": "1"},
    "metadata": {"items": [
        {"key": "spotcron-run", "value": '{"version":1}'},
        {"key": "user-data", "value": "#cloud-config\nruncmd: []\n"},
        {"key": "block-project-ssh-keys", "value": "true"},
    ]},
    "disks": [{
        "boot": True,
        "autoDelete": True,
        "initializeParams": {
            "sourceImage": "projects/cos-cloud/global/images/family/cos-stable",
            "diskSizeGb": "10",
            "diskType": "zones/us-central1-a/diskTypes/pd-balanced",
        },
    }],
    "tags": {"items": ["spotcron-vm"]},
    "networkInterfaces": [{"network": "global/networks/default"}],
    "serviceAccounts": [{"email": VM_ACCOUNT, "scopes": ["https://www.googleapis.com/auth/cloud-platform"]}],
    "shieldedInstanceConfig": {"enableSecureBoot": True, "enableVtpm": True, "enableIntegrityMonitoring": True},
    "scheduling": {
        "provisioningModel": "SPOT",
        "instanceTerminationAction": "DELETE",
        "maxRunDuration": {"seconds": "900"},
        "onHostMaintenance": "TERMINATE",
        "automaticRestart": False,
    },
}

EXPECTED_GPU_BODY = {
    "name": "sc-bench-20261122-1000-t4-a1",
    "machineType": "zones/us-central1-a/machineTypes/n1-standard-8",
    "labels": {"spotcron": "1", "job": "bench", "run": "20261122-1000-t4", "attempt": "1"},
    "metadata": {"items": [
        {"key": "spotcron-run", "value": '{"version":1}'},
        {"key": "user-data", "value": "#cloud-config\nruncmd: []\n"},
        {"key": "block-project-ssh-keys", "value": "true"},
    ]},
    "disks": [{
        "boot": True,
        "autoDelete": True,
        "initializeParams": {
            "sourceImage": "projects/cos-cloud/global/images/family/cos-stable",
            "diskSizeGb": "50",
            "diskType": "zones/us-central1-a/diskTypes/pd-balanced",
        },
    }],
    "tags": {"items": ["spotcron-vm"]},
    "networkInterfaces": [{"network": "global/networks/default"}],
    "serviceAccounts": [{"email": VM_ACCOUNT, "scopes": ["https://www.googleapis.com/auth/cloud-platform"]}],
    "shieldedInstanceConfig": {"enableSecureBoot": False, "enableVtpm": True, "enableIntegrityMonitoring": True},
    "scheduling": {
        "provisioningModel": "STANDARD",
        "instanceTerminationAction": "DELETE",
        "maxRunDuration": {"seconds": "4200"},
        "onHostMaintenance": "TERMINATE",
        "automaticRestart": False,
    },
    "guestAccelerators": [{"acceleratorType": "zones/us-central1-a/acceleratorTypes/nvidia-tesla-t4",
                           "acceleratorCount": 1}],
}


# --- the body on the wire --------------------------------------------------------------------


def test_cpu_spot_job_sends_exactly_this_instance_body(fake_compute, google_compute):
    google_compute.create_instance(cpu_request())

    inserts = fake_compute.calls("POST", INSTANCES)
    assert [r.body for r in inserts] == [EXPECTED_CPU_BODY]
    assert instance_body(cpu_request()) == EXPECTED_CPU_BODY


def test_gpu_job_sends_exactly_this_instance_body(fake_compute, google_compute):
    google_compute.create_instance(gpu_request())

    assert fake_compute.inserted_bodies() == [EXPECTED_GPU_BODY]
    assert instance_body(gpu_request()) == EXPECTED_GPU_BODY


def test_no_request_can_let_project_ssh_keys_in():
    body = instance_body(cpu_request(metadata={"block-project-ssh-keys": "false"}))
    assert body["metadata"] == {"items": [{"key": "block-project-ssh-keys", "value": "true"}]}


def test_an_external_address_only_for_a_job_that_asks_for_one(fake_compute, google_compute):
    """A one-to-one NAT address on the default network lets SSH in from anywhere (its default
    rule), so only a job with `external_ip: true` gets one."""
    google_compute.create_instance(cpu_request(external_ip=True))
    [body] = fake_compute.inserted_bodies()
    assert body["networkInterfaces"] == [{"network": "global/networks/default",
                                          "accessConfigs": [{"name": "External NAT", "type": "ONE_TO_ONE_NAT"}]}]
    assert body["tags"] == {"items": ["spotcron-vm"]}
    assert "accessConfigs" not in instance_body(cpu_request())["networkInterfaces"][0]


def test_create_returns_the_instance_from_the_operation(fake_compute, google_compute):
    fake_compute.clock = lambda: datetime(2026, 11, 22, 10, 0, 5, tzinfo=UTC)
    instance = google_compute.create_instance(cpu_request())

    assert instance.name == "sc-bot-20261122-1000-a1"
    assert instance.zone == ZONE
    assert instance.provisioning_model == "SPOT"
    assert instance.machine_type == "e2-small"
    assert instance.created_at == datetime(2026, 11, 22, 10, 0, 5, tzinfo=UTC)
    assert instance.managed
    assert instance.metadata["spotcron-run"] == '{"version":1}'
    assert instance.instance_id == fake_compute.instances[("test-project", ZONE, instance.name)]["id"]


def test_create_waits_on_the_zone_operation_until_done(fake_compute, google_compute):
    fake_compute.pending_waits = 2

    google_compute.create_instance(cpu_request())

    waits = fake_compute.calls("POST", r"/compute/v1/projects/test-project/zones/us-central1-a/operations/[^/]+/wait")
    assert len(waits) == 2


def test_an_operation_still_running_after_every_wait_is_transient(fake_compute):
    fake_compute.pending_waits = 5
    compute = make_google_compute(fake_compute, max_waits=2)

    with pytest.raises(Transient) as caught:
        compute.create_instance(cpu_request())

    assert str(caught.value).startswith("create instance sc-bot-20261122-1000-a1 in us-central1-a: operation ")
    assert "is still RUNNING after 2 waits; the instance may still appear" in str(caught.value)


# --- create errors ----------------------------------------------------------------------------


@pytest.mark.parametrize("code", ["ZONE_RESOURCE_POOL_EXHAUSTED", "ZONE_RESOURCE_POOL_EXHAUSTED_WITH_DETAILS"])
def test_a_stockout_in_the_operation_says_try_another_zone(fake_compute, google_compute, code):
    fake_compute.fail_creates(ZONE, code)

    with pytest.raises(CreateFailed) as caught:
        google_compute.create_instance(cpu_request())

    assert caught.value.kind == CreateFailed.STOCKOUT
    assert caught.value.try_another_zone
    assert caught.value.reason == (
        f"create instance sc-bot-20261122-1000-a1 in us-central1-a: {code}: The zone "
        "'projects/test-project/zones/us-central1-a' does not have enough resources available to fulfill "
        "the request.  Try a different zone, or try again later.")
    assert fake_compute.instances == {}


def test_a_stockout_known_only_by_its_error_info_reason_is_a_stockout(fake_compute, google_compute):
    # Codes come and go; Compute Engine tags every resource-availability error with this reason.
    fake_compute.fail_creates(ZONE, "SOME_NEW_CODE", "no room", details=[
        {"errorInfo": {"reason": "resource_availability", "domain": "compute.googleapis.com"}}])

    with pytest.raises(CreateFailed) as caught:
        google_compute.create_instance(cpu_request())

    assert caught.value.kind == CreateFailed.STOCKOUT
    assert caught.value.reason.endswith("SOME_NEW_CODE: no room")


def test_an_unknown_operation_error_is_invalid_not_a_stockout(fake_compute, google_compute):
    fake_compute.fail_creates(ZONE, "SOME_NEW_CODE", "bad shape", details=[])

    with pytest.raises(CreateFailed) as caught:
        google_compute.create_instance(cpu_request())

    assert caught.value.kind == CreateFailed.INVALID
    assert not caught.value.try_another_zone


def test_quota_exceeded_fails_at_once_with_the_reason(fake_compute, google_compute):
    fake_compute.fail_creates(ZONE, "QUOTA_EXCEEDED")

    with pytest.raises(CreateFailed) as caught:
        google_compute.create_instance(cpu_request())

    assert caught.value.kind == CreateFailed.QUOTA
    assert not caught.value.try_another_zone
    assert caught.value.reason.endswith("QUOTA_EXCEEDED: Quota 'CPUS' exceeded.  Limit: 8.0 in region us-central1.")


def test_permission_denied_on_insert_is_a_permission_failure(fake_compute, google_compute):
    fake_compute.fail_creates(ZONE, "forbidden", "Required 'compute.instances.create' permission for "
                              "'projects/test-project/zones/us-central1-a/instances/sc-bot-20261122-1000-a1'",
                              http_status=403, sync=True)

    with pytest.raises(CreateFailed) as caught:
        google_compute.create_instance(cpu_request())

    assert caught.value.kind == CreateFailed.PERMISSION
    assert "Required 'compute.instances.create' permission" in caught.value.reason


def test_a_missing_image_is_an_image_failure(fake_compute, google_compute):
    image = "projects/cos-cloud/global/images/family/cos-nope"
    fake_compute.missing_images.add(image)

    with pytest.raises(CreateFailed) as caught:
        google_compute.create_instance(cpu_request(image=image))

    assert caught.value.kind == CreateFailed.IMAGE
    assert f"The resource '{image}' was not found" in caught.value.reason


def test_an_invalid_request_is_an_invalid_failure(fake_compute, google_compute):
    with pytest.raises(CreateFailed) as caught:
        google_compute.create_instance(cpu_request(name="Not_A_Valid_Name"))

    assert caught.value.kind == CreateFailed.INVALID
    assert "Invalid value for field 'resource.name': 'Not_A_Valid_Name'" in caught.value.reason


def test_the_same_name_twice_is_already_exists(fake_compute, google_compute):
    google_compute.create_instance(cpu_request())

    with pytest.raises(AlreadyExists) as caught:
        google_compute.create_instance(cpu_request())

    assert "instances/sc-bot-20261122-1000-a1' already exists" in str(caught.value)
    assert len(fake_compute.instances) == 1


@pytest.mark.parametrize("status", [500, 503, 429])
def test_server_trouble_on_insert_is_transient(fake_compute, google_compute, status):
    fake_compute.fail_next("POST", INSTANCES, status, "backend trouble")

    with pytest.raises(Transient) as caught:
        google_compute.create_instance(cpu_request())

    assert str(caught.value).startswith("create instance sc-bot-20261122-1000-a1 in us-central1-a: ")
    assert "backend trouble" in str(caught.value)


def test_no_server_at_all_is_transient(fake_compute):
    compute = make_google_compute(fake_compute)
    fake_compute.stop()

    with pytest.raises(Transient, match="create instance sc-bot-20261122-1000-a1 in us-central1-a: ConnectionError"):
        compute.create_instance(cpu_request())


# --- get / list / delete ----------------------------------------------------------------------


def test_get_missing_is_none(google_compute):
    assert google_compute.get_instance(ZONE, "sc-nothing-a1") is None


def test_get_reads_status_labels_and_model(fake_compute, google_compute):
    google_compute.create_instance(gpu_request())
    fake_compute.set_status(ZONE, "sc-bench-20261122-1000-t4-a1", "STOPPED")

    instance = google_compute.get_instance(ZONE, "sc-bench-20261122-1000-t4-a1")

    assert instance is not None
    assert (instance.status, instance.provisioning_model, instance.machine_type, instance.zone) == (
        "STOPPED", "STANDARD", "n1-standard-8", ZONE)
    assert instance.labels["job"] == "bench"
    assert instance.created_at.tzinfo is not None


def test_get_permission_denied_is_an_api_error(fake_compute, google_compute):
    fake_compute.fail_next("GET", INSTANCES + "/.*", 403, "Required 'compute.instances.get' permission")

    with pytest.raises(ApiError) as caught:
        google_compute.get_instance(ZONE, "sc-x-a1")

    assert caught.value.status == 403
    assert str(caught.value).startswith("get instance sc-x-a1 in us-central1-a: HTTP 403: ")


def test_list_managed_is_one_filtered_aggregated_call_and_skips_unlabelled(fake_compute, google_compute):
    google_compute.create_instance(cpu_request())
    google_compute.create_instance(cpu_request(name="sc-bot-b", zone="us-central1-b"))
    fake_compute.add_instance(ZONE, "someone-elses-vm", labels={"team": "x"})
    fake_compute.add_instance(ZONE, "almost-ours", labels={"spotcron": "0"})
    fake_compute.clear_requests()

    names = [(i.zone, i.name) for i in google_compute.list_managed()]

    assert names == [(ZONE, "sc-bot-20261122-1000-a1"), ("us-central1-b", "sc-bot-b")]
    calls = fake_compute.calls()
    assert [(c.method, c.path) for c in calls] == [("GET", AGGREGATED)]
    assert calls[0].param("filter") == MANAGED_FILTER == 'labels.spotcron = "1"'


def test_list_managed_follows_every_page(fake_compute, google_compute):
    fake_compute.page_size = 2
    for n in range(5):
        fake_compute.add_instance(ZONE if n % 2 else "us-central1-c", f"sc-vm-{n}", labels={"spotcron": "1"})
    fake_compute.clear_requests()

    names = sorted(i.name for i in google_compute.list_managed())

    assert names == [f"sc-vm-{n}" for n in range(5)]
    assert [c.param("pageToken") for c in fake_compute.calls("GET", AGGREGATED)] == [None, "2", "4"]


def test_list_managed_keeps_nothing_the_filter_lets_through_without_our_label(fake_compute, google_compute):
    # A server that ignored the filter must still not hand us someone else's VM to delete.
    fake_compute.add_instance(ZONE, "someone-elses-vm", labels={"team": "x"})
    fake_compute.add_instance(ZONE, "sc-ours", labels={"spotcron": "1"})
    fake_compute.ignore_filter = True

    assert [i.name for i in google_compute.list_managed()] == ["sc-ours"]


def test_list_managed_with_an_unreachable_zone_is_transient(fake_compute, google_compute):
    fake_compute.unreachable_zones.add("us-central1-b")

    with pytest.raises(Transient, match="list managed instances: zones/us-central1-b is unreachable"):
        google_compute.list_managed()


def test_delete_twice_is_true_then_false(fake_compute, google_compute):
    google_compute.create_instance(cpu_request())

    assert google_compute.delete_instance(ZONE, "sc-bot-20261122-1000-a1") is True
    assert google_compute.delete_instance(ZONE, "sc-bot-20261122-1000-a1") is False
    assert [c.method for c in fake_compute.calls(path=INSTANCES + "/sc-bot-20261122-1000-a1")] == ["DELETE", "DELETE"]


def test_importing_the_adapters_does_not_import_the_google_clients():
    code = ("import sys, spotcron.gcp.compute, spotcron.gcp.storage, spotcron.gcp.pubsub, spotcron.gcp.error_map; "
            "heavy = [m for m in ('google.cloud.compute_v1', 'google.cloud.storage', 'google.cloud.pubsub_v1', "
            "'grpc', 'google.api_core.exceptions') if m in sys.modules]; print(heavy)")
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert result.stdout.strip() == "[]"


def test_losing_sight_of_an_accepted_insert_is_transient(fake_compute, google_compute):
    fake_compute.pending_waits = 1
    fake_compute.fail_next("POST", r"/compute/v1/projects/test-project/zones/us-central1-a/operations/[^/]+/wait",
                           404, "The resource 'operation-x' was not found")

    with pytest.raises(Transient) as caught:
        google_compute.create_instance(cpu_request())

    assert "create instance sc-bot-20261122-1000-a1 in us-central1-a: wait for operation operation-" in str(caught.value)
    assert "not found" in str(caught.value)


def test_the_vm_joins_the_named_subnet_and_is_shielded():
    """The stack's `network`/`subnetwork` reach the body; Shielded VM is on (compute.requireShieldedVm),
    Secure Boot off only where a GPU driver must load."""
    body = instance_body(cpu_request(network="global/networks/jobs-vpc",
                                     subnetwork="regions/us-central1/subnetworks/jobs-us"))
    assert body["networkInterfaces"] == [{"network": "global/networks/jobs-vpc",
                                          "subnetwork": "regions/us-central1/subnetworks/jobs-us"}]
    assert body["shieldedInstanceConfig"] == {"enableSecureBoot": True, "enableVtpm": True,
                                              "enableIntegrityMonitoring": True}
    assert instance_body(cpu_request(secure_boot=False))["shieldedInstanceConfig"]["enableSecureBoot"] is False


# --- requestId: one insert per attempt ---------------------------------------------------------

REQUEST_ID = "0d6f3f0e-2a7c-5c54-9a8e-3b1d2c4e5f60"


def test_the_insert_carries_the_attempts_request_id(fake_compute, google_compute):
    import dataclasses

    google_compute.create_instance(dataclasses.replace(cpu_request(), request_id=REQUEST_ID))
    [insert] = fake_compute.calls("POST", INSTANCES_PATH)
    assert insert.param("requestId") == REQUEST_ID


def test_an_insert_repeated_with_its_request_id_after_the_vm_was_deleted_creates_nothing(fake_compute,
                                                                                          google_compute):
    import dataclasses

    request = dataclasses.replace(cpu_request(), request_id=REQUEST_ID)
    first = google_compute.create_instance(request)
    assert google_compute.delete_instance(ZONE, request.name)
    # A delivery held inside its insert call lands after the attempt ran and its VM was deleted.
    again = google_compute.create_instance(request)
    assert again.instance_id == first.instance_id
    assert google_compute.get_instance(ZONE, request.name) is None and not fake_compute.instances


def test_a_request_id_is_forgotten_after_sixty_minutes(fake_compute, google_compute):
    import dataclasses
    from datetime import timedelta

    now = [datetime(2026, 11, 22, 10, 0, tzinfo=UTC)]
    fake_compute.clock = lambda: now[0]
    request = dataclasses.replace(cpu_request(), request_id=REQUEST_ID)
    google_compute.create_instance(request)
    google_compute.delete_instance(ZONE, request.name)
    now[0] += timedelta(minutes=61)
    google_compute.create_instance(request)
    assert len(fake_compute.instances) == 1


def test_the_zero_uuid_is_refused_as_compute_engine_does(fake_compute, google_compute):
    import dataclasses

    with pytest.raises(CreateFailed):
        google_compute.create_instance(dataclasses.replace(cpu_request(),
                                                           request_id="00000000-0000-0000-0000-000000000000"))
