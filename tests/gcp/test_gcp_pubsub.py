"""PubSubEvents: topic names, the JSON body, and publishing to the Pub/Sub emulator."""

from __future__ import annotations

import os
from datetime import UTC, datetime

import pytest

from spotcron.core.errors import NotFound
from spotcron.gcp.pubsub import PubSubEvents, encode, topic_path
from tests.gcp.emulators import EmulatorMissing, start_pubsub_emulator
from tests.gcp.fixtures import PROJECT


def test_short_topic_names_become_full_paths():
    assert topic_path("proj", "spotcron-start") == "projects/proj/topics/spotcron-start"
    assert topic_path("proj", "projects/other/topics/t") == "projects/other/topics/t"


@pytest.mark.parametrize("bad", ["", "a/b", "topics/x"])
def test_a_topic_that_is_neither_short_nor_full_is_refused(bad):
    with pytest.raises(ValueError) as caught:
        topic_path("proj", bad)
    assert str(caught.value) == (f"topic {bad!r}: expected a short name like 'spotcron-start' or "
                                 "'projects/PROJECT/topics/NAME'")


def test_the_body_is_compact_sorted_json_with_iso_times():
    body = encode({"run": "20261122-1000", "at": datetime(2026, 11, 22, 10, 0, tzinfo=UTC), "attempt": 1})
    assert body == b'{"at":"2026-11-22T10:00:00+00:00","attempt":1,"run":"20261122-1000"}'


def test_data_that_is_not_json_is_refused_before_anything_is_sent():
    with pytest.raises(TypeError, match="object is not JSON-serialisable"):
        encode({"x": object()})


def test_publish_reaches_a_subscriber_with_data_and_attributes(pubsub_topic):
    events = PubSubEvents.for_emulator(PROJECT, pubsub_topic.host, timeout=10)

    message_id = events.publish(pubsub_topic.topic, {"job": "bot", "run": "20261122-1000"}, {"kind": "started"})

    [(received_id, data, attributes)] = pubsub_topic.pull(1)
    assert received_id == message_id
    assert data == {"job": "bot", "run": "20261122-1000"}
    assert attributes == {"kind": "started"}


def test_publishing_to_a_missing_topic_is_not_found(pubsub_host):
    events = PubSubEvents.for_emulator(PROJECT, pubsub_host, timeout=10)

    with pytest.raises(NotFound) as caught:
        events.publish("spotcron-no-such-topic", {"a": 1})

    assert str(caught.value).startswith(f"publish to projects/{PROJECT}/topics/spotcron-no-such-topic: not found")


def test_stopping_the_emulator_leaves_no_process_behind(pubsub_host):
    # pubsub_host first: skips (with its reason) where the emulator cannot run at all.
    try:
        emulator = start_pubsub_emulator()
    except EmulatorMissing as exc:  # pragma: no cover - the shared one started, so this one should too
        pytest.fail(f"a second emulator could not start: {exc}")
    group = emulator.process.pid

    emulator.stop()

    with pytest.raises(ProcessLookupError):
        os.killpg(group, 0)  # signal 0: "does any process of this group exist?"
