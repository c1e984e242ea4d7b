"""Malformed Pub/Sub payloads are logged and acknowledged: no retry storm, nothing created."""

from __future__ import annotations

import base64

import pytest

from spotcron.testing.harness import make_spec


@pytest.mark.parametrize("data", [
    {"message": {"data": base64.b64encode(b"not json").decode(), "publishTime": "2026-11-22T12:00:05Z"}},
    {"message": {"data": base64.b64encode(b"[1, 2]").decode(), "publishTime": "2026-11-22T12:00:05Z"}},
    {"message": {"data": base64.b64encode(b'{"name": "bot"}').decode(), "publishTime": "2026-11-22T12:00:05Z"}},
    {"message": {"data": "%%% not base64 %%%", "publishTime": "2026-11-22T12:00:05Z"}},
    {"message": {"data": base64.b64encode(b"x" * 200_000).decode(), "publishTime": "2026-11-22T12:00:05Z"}},
    {"message": {}},
    {"no": "message"},
    "a string",
])
def test_bad_start_messages_are_acknowledged_and_change_nothing(h, data, caplog):
    response = h.post_event("start_job", data)
    assert response.status_code == 200
    assert h.compute.created == [] and h.blobs.list("") == []


def test_hostile_values_reach_the_vm_as_data(h):
    hostile = "$(rm -rf /); `reboot` && echo 'x' | sh"
    spec = make_spec(env={"PAYLOAD": hostile}, command=["python3", "-c", "print(1)"], args=[hostile])
    h.start(spec)
    from spotcron.core.descriptor import RunDescriptor

    descriptor = RunDescriptor.from_metadata(h.compute.created[0].metadata["spotcron-run"])
    assert descriptor.env["PAYLOAD"] == hostile
    assert descriptor.args == [hostile]
