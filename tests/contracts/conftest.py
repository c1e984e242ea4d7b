"""One behaviour suite per port, run against every implementation of it.

Each fixture below is parametrized over the implementations: the in-memory ones
(spotcron.testing.memory) and the Google ones on local fakes or emulators (tests/gcp). Storage
runs against the local storage server AND fake-gcs-server, the field's emulator, so the local
server is held to the reference's behaviour; where the reference departs from Cloud Storage
(delete preconditions), the test says so.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

import pytest

from tests.contracts.storage_servers import (
    CLOUD_LOCATION,
    CLOUD_PROJECT,
    ServerMissing,
    StorageApi,
    cloud_storage,
    fake_gcs_server,
    local_server,
)
from tests.gcp.fixtures import *  # noqa: F401,F403
from tests.gcp.fixtures import BUCKET, PROJECT, make_google_compute


def _memory():
    from spotcron.testing import memory

    return memory


# --- Compute -----------------------------------------------------------------------------------


@pytest.fixture(params=["memory", "google-on-fake"])
def compute(request) -> Any:
    if request.param == "memory":
        memory = _memory()
        return memory.MemoryCompute(memory.FakeClock())
    fake = request.getfixturevalue("fake_compute")
    return make_google_compute(fake)


# --- Blobs and the Cloud Storage JSON API -----------------------------------------------------------


@pytest.fixture(scope="session")
def local_storage() -> Iterator[StorageApi]:
    with local_server() as api:
        yield api


@pytest.fixture(scope="session")
def fake_gcs_storage() -> Iterator[StorageApi]:
    try:
        with fake_gcs_server() as api:
            yield api
    except ServerMissing as exc:
        pytest.skip(f"fake-gcs-server unavailable: {exc}")


@pytest.fixture(scope="session")
def cloud_storage_api() -> Iterator[StorageApi]:
    with cloud_storage(os.environ[CLOUD_PROJECT], os.environ.get(CLOUD_LOCATION, "us-central1")) as api:
        yield api


_SERVERS = {"local-server": "local_storage", "fake-gcs-server": "fake_gcs_storage"}
if os.environ.get(CLOUD_PROJECT):  # `make e2e`: the same suite against Cloud Storage itself
    _SERVERS["cloud-storage"] = "cloud_storage_api"


@pytest.fixture(params=list(_SERVERS))
def storage_api(request) -> StorageApi:
    """A fresh bucket on each storage server (one server of each kind per test session)."""
    return request.getfixturevalue(_SERVERS[request.param]).new_bucket()


@pytest.fixture(params=["memory", *(f"google-on-{kind}" for kind in _SERVERS)])
def blobs(request) -> Any:
    """MemoryBlobs, and GcsBlobs on each storage server (every one enforces if_generation_match on writes)."""
    if request.param == "memory":
        return _memory().MemoryBlobs(BUCKET)
    server = request.getfixturevalue(_SERVERS[request.param.removeprefix("google-on-")])
    return server.new_bucket().gcs_blobs()


# --- Events ------------------------------------------------------------------------------------


@dataclass
class EventsImpl:
    events: Any
    topic: str  # a short topic name that exists
    received: Callable[[int], list[tuple[str, Any, dict[str, str]]]]  # (topic, data, attributes) of N messages
    kind: str


@pytest.fixture(params=["memory", "google-on-emulator"])
def events_impl(request) -> Iterator[EventsImpl]:
    if request.param == "memory":
        events = _memory().MemoryEvents()

        def received(count: int) -> list[tuple[str, Any, dict[str, str]]]:
            return [(p.topic, p.data, dict(p.attributes)) for p in events.published[:count]]

        yield EventsImpl(events, "spotcron-events", received, "memory")
        return
    from spotcron.gcp.pubsub import PubSubEvents

    topic = request.getfixturevalue("pubsub_topic")
    events = PubSubEvents.for_emulator(PROJECT, topic.host, timeout=10)

    def pulled(count: int) -> list[tuple[str, Any, dict[str, str]]]:
        return [(topic.topic, data, attributes) for _, data, attributes in topic.pull(count)]

    yield EventsImpl(events, topic.topic, pulled, "google-on-emulator")
