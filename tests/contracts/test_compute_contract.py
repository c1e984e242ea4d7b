"""The Compute port's contract, for MemoryCompute and GoogleCompute (on the fake Compute Engine)."""

from __future__ import annotations

import pytest

from spotcron.core.errors import AlreadyExists
from spotcron.engine.ports import ALIVE_STATUSES, Compute
from tests.gcp.samples import ZONE, cpu_request, gpu_request

OTHER_ZONE = "us-central1-b"


def _names(instances):
    return sorted((i.zone, i.name) for i in instances)


def test_implements_the_protocol(compute):
    assert isinstance(compute, Compute)


def test_create_returns_what_was_asked_for(compute):
    request = cpu_request()

    instance = compute.create_instance(request)

    assert (instance.name, instance.zone, instance.machine_type) == (request.name, ZONE, "e2-small")
    assert instance.provisioning_model == "SPOT"
    assert dict(instance.labels) == dict(request.labels)
    assert dict(request.metadata).items() <= dict(instance.metadata).items()
    assert instance.status in ALIVE_STATUSES
    assert instance.managed
    assert instance.created_at.tzinfo is not None


def test_on_demand_is_standard(compute):
    assert compute.create_instance(gpu_request()).provisioning_model == "STANDARD"


def test_get_after_create_shows_the_same_instance(compute):
    created = compute.create_instance(gpu_request())

    found = compute.get_instance(ZONE, created.name)

    assert found is not None
    assert (found.name, found.zone, found.machine_type, found.provisioning_model, found.instance_id) == (
        created.name, created.zone, created.machine_type, created.provisioning_model, created.instance_id)
    assert dict(found.labels) == dict(created.labels)
    assert found.status in ALIVE_STATUSES
    assert abs((found.created_at - created.created_at).total_seconds()) < 5


def test_get_missing_is_none(compute):
    assert compute.get_instance(ZONE, "sc-never-created-a1") is None


def test_the_same_name_in_the_same_zone_is_already_exists(compute):
    compute.create_instance(cpu_request())

    with pytest.raises(AlreadyExists) as caught:
        compute.create_instance(cpu_request(machine_type="e2-medium"))

    assert "sc-bot-20261122-1000-a1" in str(caught.value)
    assert compute.get_instance(ZONE, "sc-bot-20261122-1000-a1").machine_type == "e2-small"


def test_the_same_name_in_another_zone_is_another_instance(compute):
    compute.create_instance(cpu_request())
    compute.create_instance(cpu_request(zone=OTHER_ZONE))

    assert _names(compute.list_managed()) == [(ZONE, "sc-bot-20261122-1000-a1"),
                                              (OTHER_ZONE, "sc-bot-20261122-1000-a1")]


def test_list_managed_shows_only_labelled_instances_across_zones(compute):
    compute.create_instance(cpu_request())
    compute.create_instance(gpu_request(zone=OTHER_ZONE))
    compute.create_instance(cpu_request(name="not-ours", labels={"team": "data"}))
    compute.create_instance(cpu_request(name="almost-ours", labels={"spotcron": "0"}))

    assert _names(compute.list_managed()) == [(ZONE, "sc-bot-20261122-1000-a1"),
                                              (OTHER_ZONE, "sc-bench-20261122-1000-t4-a1")]
    assert compute.get_instance(ZONE, "not-ours") is not None


def test_list_managed_when_there_is_nothing(compute):
    assert compute.list_managed() == []


def test_delete_twice_is_true_then_false(compute):
    compute.create_instance(cpu_request())

    assert compute.delete_instance(ZONE, "sc-bot-20261122-1000-a1") is True
    assert compute.delete_instance(ZONE, "sc-bot-20261122-1000-a1") is False
    assert compute.get_instance(ZONE, "sc-bot-20261122-1000-a1") is None
    assert compute.list_managed() == []


def test_delete_missing_is_false(compute):
    assert compute.delete_instance(ZONE, "sc-never-created-a1") is False


def test_delete_touches_only_the_named_zone(compute):
    compute.create_instance(cpu_request())
    compute.create_instance(cpu_request(zone=OTHER_ZONE))

    assert compute.delete_instance(OTHER_ZONE, "sc-bot-20261122-1000-a1") is True

    assert _names(compute.list_managed()) == [(ZONE, "sc-bot-20261122-1000-a1")]


def test_a_name_can_be_reused_after_delete(compute):
    compute.create_instance(cpu_request())
    compute.delete_instance(ZONE, "sc-bot-20261122-1000-a1")

    again = compute.create_instance(cpu_request())

    assert again.name == "sc-bot-20261122-1000-a1"
