"""One behaviour suite per port, run against every implementation of it.

Each fixture below is parametrized over the implementations: the in-memory ones
(spotcron.testing.memory) and the Google ones on local fakes or emulators (tests/gcp). A test that
needs a property only some implementations have (storage preconditions: the emulator ignores
them) uses the narrower fixture, so nothing is skipped to look green.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

import pytest

from tests.gcp.fixtures import *  # noqa: F401,F403
from tests.gcp.fixtures import BUCKET, PROJECT, make_gcs_blobs, make_google_compute


def _memory():
    # The lead's in-memory ports; a clear skip (not an error) if the module is not there yet.
    return pytest.importorskip("spotcron.testing.memory", reason="spotcron/testing/memory.py (the in-memory ports) is missing")


# --- Compute -----------------------------------------------------------------------------------


@pytest.fixture(params=["memory", "google-on-fake"])
def compute(request) -> Any:
    if request.param == "memory":
        memory = _memory()
        return memory.MemoryCompute(memory.FakeClock())
    fake = request.getfixturevalue("fake_compute")
    return make_google_compute(fake)


# --- Blobs -------------------------------------------------------------------------------------


@dataclass
class BlobsImpl:
    blobs: Any
    enforces_preconditions: bool


def _blobs_impl(request, kind: str) -> BlobsImpl:
    if kind == "memory":
        return BlobsImpl(_memory().MemoryBlobs(BUCKET), True)
    if kind == "google-on-fake":
        fake = request.getfixturevalue("fake_gcs")  # enforces preconditions, pages listings by 3
        return BlobsImpl(make_gcs_blobs(fake.endpoint, BUCKET), True)
    # gcp-storage-emulator: a real server speaking the JSON API, but it IGNORES generation
    # preconditions and pagination (tests/gcp/test_gcp_storage.py pins that down).
    return BlobsImpl(request.getfixturevalue("gcs_blobs"), False)


@pytest.fixture(params=["memory", "google-on-fake", "google-on-emulator"])
def blobs(request) -> Any:
    return _blobs_impl(request, request.param).blobs


@pytest.fixture(params=["memory", "google-on-fake"])
def enforcing_blobs(request) -> Any:
    """Only the implementations that enforce if_generation_match (not the storage emulator)."""
    impl = _blobs_impl(request, request.param)
    assert impl.enforces_preconditions
    return impl.blobs


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
