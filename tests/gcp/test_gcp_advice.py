"""GoogleAdvisor against a fake advice server: exact request bodies, checked against compute.v1."""

from __future__ import annotations

import pytest

from spotcron.core.errors import Transient
from spotcron.engine.ports import ZoneHistory
from spotcron.gcp.advisor import capacity_body, history_body, parse_capacity, parse_history
from tests.fakes.gcp.advice import FakeAdvice

PROJECT = "test-project"
TABLE = {("e2-small", "us-west4-a"): (0.0021, 0.04, 0.9), ("e2-small", "us-west4-b"): (0.0030, None, 0.2)}

EXPECTED_HISTORY = {
    "instanceProperties": {"machineType": "e2-small", "scheduling": {"provisioningModel": "SPOT"}},
    "locationPolicy": {"location": "zones/us-west4-a"},
    "types": ["PREEMPTION", "PRICE"],
}

EXPECTED_CAPACITY = {
    "instanceProperties": {"scheduling": {"provisioningModel": "SPOT"}},
    "instanceFlexibilityPolicy": {"instanceSelections": {"spotcron": {"machineTypes": ["e2-small"]}}},
    "size": 1,
    "distributionPolicy": {"zones": [{"zone": "zones/us-west4-a"}, {"zone": "zones/us-west4-b"}],
                           "targetShape": "ANY_SINGLE_ZONE"},
}


def test_the_bodies_are_exactly_these():
    assert history_body("e2-small", "us-west4-a") == EXPECTED_HISTORY
    assert capacity_body("e2-small", ["us-west4-a", "us-west4-b"]) == EXPECTED_CAPACITY


@pytest.mark.parametrize(("kind", "body"), [("CapacityHistoryRequest", EXPECTED_HISTORY),
                                            ("CapacityAdviceRequest", EXPECTED_CAPACITY)])
def test_the_bodies_use_only_fields_of_the_published_schema(kind, body):
    import json

    from google.cloud import compute_v1

    message_type = getattr(compute_v1, kind)
    # from_json refuses a field the compute.v1 schema does not have; the round trip keeps every value.
    message = message_type.from_json(json.dumps(body))
    assert json.loads(message_type.to_json(message, always_print_fields_with_no_presence=False)) == body


def test_a_misspelt_field_is_refused_by_the_schema_check():
    import json

    from google.cloud import compute_v1

    with pytest.raises(Exception, match="locationPolcy"):
        compute_v1.CapacityHistoryRequest.from_json(json.dumps({"locationPolcy": {"location": "zones/x"}}))


@pytest.fixture
def fake_advice():
    with FakeAdvice(TABLE) as fake:
        yield fake


@pytest.fixture
def advisor(fake_advice):
    from google.auth.credentials import AnonymousCredentials

    from spotcron.gcp.advisor import GoogleAdvisor

    return GoogleAdvisor(PROJECT, client_options={"api_endpoint": fake_advice.endpoint},
                         credentials=AnonymousCredentials(), timeout=10.0)


def test_capacity_history_sends_one_request_per_zone_and_reads_price_and_rate(fake_advice, advisor):
    found = advisor.capacity_history("us-west4", "e2-small", ["us-west4-a", "us-west4-b"])
    calls = fake_advice.calls("POST", r".*/advice/capacityHistory")
    assert [c.path for c in calls] == [f"/compute/v1/projects/{PROJECT}/regions/us-west4/advice/capacityHistory"] * 2
    assert calls[0].body == EXPECTED_HISTORY
    assert found["us-west4-a"] == ZoneHistory(spot_hourly=pytest.approx(0.0021), preemption_rate=pytest.approx(0.04))
    assert found["us-west4-b"].preemption_rate is None


def test_capacity_sends_the_zones_and_reads_obtainability(fake_advice, advisor):
    scores = advisor.capacity("us-west4", "e2-small", ["us-west4-a", "us-west4-b"])
    (call,) = fake_advice.calls("POST", r".*/advice/capacity")
    assert call.path == f"/compute/v1/projects/{PROJECT}/regions/us-west4/advice/capacity"
    assert call.body == EXPECTED_CAPACITY
    assert scores == {"us-west4-a": 0.9, "us-west4-b": 0.2}


def test_a_server_error_becomes_transient(fake_advice, advisor):
    fake_advice.fail_next("POST", r".*/advice/capacity", 503, "backend unavailable")
    with pytest.raises(Transient, match="advice.capacity for e2-small in us-west4"):
        advisor.capacity("us-west4", "e2-small", ["us-west4-a"])


def test_parsers_ignore_what_they_do_not_know():
    assert parse_history({}) is None
    assert parse_capacity({"recommendations": [{"shards": [{"zone": "zones/z-a"}]}]}) == {}
