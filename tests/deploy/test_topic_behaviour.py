"""One behaviour suite for the topic calls deploy makes, run against the fake Pub/Sub admin API
and, when the gcloud Pub/Sub emulator is on this machine, against the emulator too, so the
fake stays honest where the emulator can judge it (the emulator keeps no labels and no IAM).
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from typing import Any

import pytest

from spotcron.core.errors import AlreadyExists, NotFound
from spotcron.gcp.admin.calls import Caller
from tests.fakes.deploy.cloud import FakeCloud

PROJECT = "test-project"


@pytest.fixture(params=["fake", "emulator"])
def publisher(request: pytest.FixtureRequest) -> Iterator[Any]:
    from google import pubsub_v1
    from google.auth.credentials import AnonymousCredentials

    if request.param == "fake":
        cloud = FakeCloud(PROJECT).start()
        cloud.enable_apis()
        try:
            yield cloud.clients().publisher
        finally:
            cloud.stop()
        return
    host = request.getfixturevalue("pubsub_host")  # skips with the reason when gcloud's emulator is missing
    yield pubsub_v1.PublisherClient(transport="rest", credentials=AnonymousCredentials(),
                                    client_options={"api_endpoint": f"http://{host}"})


def test_topic_lifecycle(publisher: Any) -> None:
    call = Caller(PROJECT, attempts=1)
    path = f"projects/{PROJECT}/topics/spotcron-t-{uuid.uuid4().hex[:8]}"
    call("create", publisher.create_topic, request={"name": path}, retry=None)
    with pytest.raises(AlreadyExists, match="^create again: already exists: "):
        call("create again", publisher.create_topic, request={"name": path}, retry=None)
    listed = call("list", lambda: [t.name for t in publisher.list_topics(project=f"projects/{PROJECT}", retry=None)])
    assert path in listed
    call("delete", publisher.delete_topic, topic=path, retry=None)
    with pytest.raises(NotFound, match="^delete again: not found: "):
        call("delete again", publisher.delete_topic, topic=path, retry=None)
    listed = call("list", lambda: [t.name for t in publisher.list_topics(project=f"projects/{PROJECT}", retry=None)])
    assert path not in listed
