"""The fake Compute Engine server itself, since other suites build on it."""

from __future__ import annotations

import json
import urllib.error
import urllib.request

import pytest

from spotcron.core.errors import CreateFailed
from tests.fakes.gcp.compute import _parse_filter
from tests.gcp.samples import cpu_request


def _get(url: str) -> tuple[int, dict]:
    try:
        with urllib.request.urlopen(url, timeout=5) as response:
            return response.status, json.loads(response.read())
    except urllib.error.HTTPError as exc:
        return exc.code, json.loads(exc.read())


@pytest.mark.parametrize(("expression", "labels", "kept"), [
    ('labels.spotcron = "1"', {"spotcron": "1"}, True),
    ('labels.spotcron = "1"', {"spotcron": "0"}, False),
    ('labels.spotcron = "1"', {}, False),
    ("labels.spotcron:*", {"spotcron": "0"}, True),
    ('(labels.spotcron = "1") (labels.job = "bot")', {"spotcron": "1", "job": "bot"}, True),
    ('(labels.spotcron = "1") (labels.job = "bot")', {"spotcron": "1", "job": "other"}, False),
    ('labels.job != "bot"', {"job": "other"}, True),
    ("", {}, True),
])
def test_filter_subset(expression, labels, kept):
    assert _parse_filter(expression)({"labels": labels}) is kept


def test_an_unsupported_filter_is_a_400_not_silently_everything(fake_compute):
    status, body = _get(f"{fake_compute.endpoint}/compute/v1/projects/test-project/aggregated/instances"
                        "?filter=name%20eq%20%27.*%27%20AND")

    assert status == 400
    assert body["error"]["message"].startswith("Invalid value for field 'filter': unsupported filter expression")


def test_an_unknown_path_is_a_404_naming_it(fake_compute):
    status, body = _get(f"{fake_compute.endpoint}/compute/v1/projects/p/global/images")

    assert status == 404
    assert body["error"]["message"] == "no fake route for GET /compute/v1/projects/p/global/images"


def test_a_create_fault_with_times_runs_out(fake_compute, google_compute):
    fake_compute.fail_creates("us-central1-a", "ZONE_RESOURCE_POOL_EXHAUSTED", times=1)

    with pytest.raises(CreateFailed):
        google_compute.create_instance(cpu_request())
    instance = google_compute.create_instance(cpu_request())

    assert instance.name == cpu_request().name
    assert len(fake_compute.calls("POST")) == 2


def test_faults_are_per_zone(fake_compute, google_compute):
    fake_compute.fail_creates("us-central1-a", "ZONE_RESOURCE_POOL_EXHAUSTED")

    instance = google_compute.create_instance(cpu_request(zone="us-central1-b"))

    assert instance.zone == "us-central1-b"


def test_every_request_is_recorded_with_its_query(fake_compute, google_compute):
    google_compute.get_instance("us-central1-a", "sc-missing")
    google_compute.list_managed()

    recorded = [(r.method, r.path, r.param("filter")) for r in fake_compute.requests]
    assert recorded == [
        ("GET", "/compute/v1/projects/test-project/zones/us-central1-a/instances/sc-missing", None),
        ("GET", "/compute/v1/projects/test-project/aggregated/instances", 'labels.spotcron = "1"'),
    ]
