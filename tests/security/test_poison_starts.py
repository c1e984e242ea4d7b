"""Start messages that fail the same way on every delivery.

Anything that goes wrong before a side effect (parsing, reading the tick, walking the schedule)
is acknowledged with one `security: true` line, so Pub/Sub does not redeliver it for a day;
only transient errors of Google's services are answered with a retry.
"""

from __future__ import annotations

import base64
import json

import pytest

from spotcron.engine.deployed import SpecStore, start_message
from spotcron.engine.messages import TICK_ATTRIBUTE
from spotcron.testing.harness import make_spec


@pytest.fixture
def deployed(h):
    spec = make_spec(schedule="0 * * * *")
    SpecStore(h.blobs).write(spec)
    return spec


def envelope_of(raw: bytes) -> dict:
    return {"message": {"data": base64.b64encode(raw).decode(), "messageId": "1",
                        "publishTime": "2026-11-22T12:00:05Z"}}


def test_deeply_nested_data_is_acknowledged_with_one_security_line(h, deployed, security_log):
    answer = h.post_event("start_job", envelope_of(b"[" * 3000))
    assert answer.status_code == 200
    [line] = security_log
    assert line["event"] == "bad_message"
    assert h.compute.created == []


@pytest.mark.parametrize("tick", ["0001-01-01T00:00:00Z", "1970-01-01T00:00:00Z", "2026-11-01T12:00:00Z"])
def test_a_tick_far_older_than_the_starting_deadline_is_acknowledged(h, deployed, security_log, tick):
    answer = h.start(json.loads(start_message(deployed)), attributes={TICK_ATTRIBUTE: tick})
    assert answer.status_code == 200
    [line] = security_log
    assert line["event"] == "bad_message" and "older than" in line["reason"]
    assert h.compute.created == [] and h.records("bot") == []


def test_a_tick_a_little_late_is_still_recorded_as_missed(h, deployed, security_log):
    published = h.clock.now()  # the dispatcher published it in its minute; its delivery comes late
    h.clock.advance(3600)  # 13:00:05; the 12:00 tick is past its 10 minute starting deadline
    h.start(json.loads(start_message(deployed)), attributes={TICK_ATTRIBUTE: "2026-11-22T12:00:00Z"},
            publish_time=published)
    [record] = h.records("bot")
    assert record.state == "skipped" and security_log == []


def test_a_transient_error_of_storage_is_still_retried(h, deployed):
    h.blobs.fail_reads = lambda name: True  # every read meets a Transient error
    answer = h.start(json.loads(start_message(deployed)))
    assert answer.status_code >= 500
