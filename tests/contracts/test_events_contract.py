"""The Events port's contract, for MemoryEvents and PubSubEvents (on the Pub/Sub emulator)."""

from __future__ import annotations

import json

import pytest

from spotcron.engine.ports import Events


def test_implements_the_protocol(events_impl):
    assert isinstance(events_impl.events, Events)


def test_publish_returns_a_distinct_message_id_each_time(events_impl):
    first = events_impl.events.publish(events_impl.topic, {"n": 1})
    second = events_impl.events.publish(events_impl.topic, {"n": 2})

    assert isinstance(first, str) and first
    assert isinstance(second, str) and second
    assert first != second


def test_data_and_attributes_arrive_as_published(events_impl):
    data = {"type": "run.finished", "job": "bot", "run": "20261122-1000", "attempt": 2,
            "cost_usd": 0.0012, "ok": True, "zones": ["us-central1-a"], "note": "ünïcode ✓", "extra": None}

    events_impl.events.publish(events_impl.topic, data, {"type": "run.finished"})

    [(topic, received, attributes)] = events_impl.received(1)
    assert topic == events_impl.topic
    assert received == json.loads(json.dumps(data))
    assert attributes == {"type": "run.finished"}


def test_attributes_are_optional(events_impl):
    events_impl.events.publish(events_impl.topic, {"n": 1})

    [(_, received, attributes)] = events_impl.received(1)
    assert received == {"n": 1}
    assert attributes == {}


def test_data_that_is_not_json_is_refused(events_impl):
    with pytest.raises(TypeError):
        events_impl.events.publish(events_impl.topic, {"when": object()})
