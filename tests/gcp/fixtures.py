"""Pytest fixtures for the Google adapters on local fakes and emulators.

Imported by tests/gcp/conftest.py and tests/contracts/conftest.py (`from tests.gcp.fixtures import *`).
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import pytest

from tests.fakes.gcp.compute import FakeComputeEngine
from tests.fakes.gcp.storage import FakeCloudStorage
from tests.gcp.emulators import (
    PROJECT,
    EmulatorMissing,
    acquire_pubsub_emulator,
    grpc_clients,
    release_pubsub_emulator,
)

ZONES = ("us-central1-a", "us-central1-b", "us-central1-c")

BUCKET = "spotcron-test"

__all__ = ["PROJECT", "ZONES", "BUCKET", "fake_compute", "google_compute", "fake_gcs", "fake_gcs_blobs", "pubsub_host", "pubsub_topic", "PubSubTopic", "make_google_compute",
           "make_gcs_blobs"]


def make_google_compute(fake: FakeComputeEngine, **kwargs: Any):
    from google.auth.credentials import AnonymousCredentials

    from spotcron.gcp.compute import GoogleCompute

    kwargs.setdefault("timeout", 10.0)
    return GoogleCompute(PROJECT, fake.zones, client_options={"api_endpoint": fake.endpoint},
                         credentials=AnonymousCredentials(), **kwargs)


@pytest.fixture
def fake_compute() -> Iterator[FakeComputeEngine]:
    with FakeComputeEngine(zones=ZONES, project=PROJECT) as fake:
        yield fake


@pytest.fixture
def google_compute(fake_compute: FakeComputeEngine):
    return make_google_compute(fake_compute)


def make_gcs_blobs(endpoint: str, bucket: str):
    from google.auth.credentials import AnonymousCredentials
    from google.cloud import storage

    from spotcron.gcp.storage import GcsBlobs

    client = storage.Client(project=PROJECT, credentials=AnonymousCredentials(),
                            client_options={"api_endpoint": endpoint})
    return GcsBlobs(bucket, client=client, timeout=10.0)


@pytest.fixture
def fake_gcs() -> Iterator[FakeCloudStorage]:
    """The recording Cloud Storage fake: what google-cloud-storage sends for GcsBlobs (pages of 3)."""
    with FakeCloudStorage(BUCKET, page_size=3) as fake:
        yield fake


@pytest.fixture
def fake_gcs_blobs(fake_gcs: FakeCloudStorage):
    return make_gcs_blobs(fake_gcs.endpoint, BUCKET)


@pytest.fixture(scope="session")
def pubsub_host() -> Iterator[str]:
    try:
        emulator = acquire_pubsub_emulator()
    except EmulatorMissing as exc:
        pytest.skip(f"Pub/Sub emulator unavailable: {exc}")
    try:
        yield emulator.host
    finally:
        release_pubsub_emulator()


@dataclass
class PubSubTopic:
    """A fresh topic with one subscription on the emulator; pull() returns what was published."""

    host: str
    topic: str  # short name
    path: str
    subscription: str
    subscriber: Any

    def pull(self, expected: int, timeout_s: float = 10.0) -> list[tuple[str, Any, dict[str, str]]]:
        """(message id, decoded JSON data, attributes) of `expected` messages, acknowledged."""
        import time

        got: list[tuple[str, Any, dict[str, str]]] = []
        deadline = time.monotonic() + timeout_s
        while len(got) < expected and time.monotonic() < deadline:
            response = self.subscriber.pull(subscription=self.subscription, max_messages=expected - len(got),
                                            timeout=timeout_s)
            ids = []
            for received in response.received_messages:
                message = received.message
                got.append((message.message_id, json.loads(message.data), dict(message.attributes)))
                ids.append(received.ack_id)
            if ids:
                self.subscriber.acknowledge(subscription=self.subscription, ack_ids=ids)
        return got


@pytest.fixture
def pubsub_topic(pubsub_host: str) -> Iterator[PubSubTopic]:
    publisher, subscriber = grpc_clients(pubsub_host)
    name = f"spotcron-test-{uuid.uuid4().hex[:10]}"
    path = f"projects/{PROJECT}/topics/{name}"
    subscription = f"projects/{PROJECT}/subscriptions/{name}-sub"
    publisher.create_topic(name=path)
    subscriber.create_subscription(name=subscription, topic=path)
    try:
        yield PubSubTopic(pubsub_host, name, path, subscription, subscriber)
    finally:
        subscriber.delete_subscription(subscription=subscription)
        publisher.delete_topic(topic=path)
        subscriber.close()
