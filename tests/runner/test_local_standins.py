"""The local metadata server and the local bucket, on their own."""

from __future__ import annotations

import json
import socket
import threading
import urllib.error
import urllib.request
from datetime import UTC, datetime

import pytest

from spotcron.local.bucket import LocalBucket
from spotcron.local.metadata import LocalMetadataServer
from spotcron.testing.waiting import wait_until


def get(url: str, flavor: bool = True, timeout: float = 10) -> tuple[int, str, dict[str, str]]:
    request = urllib.request.Request(url, headers={"Metadata-Flavor": "Google"} if flavor else {})
    try:
        with urllib.request.urlopen(request, timeout=timeout) as response:
            return response.status, response.read().decode(), dict(response.headers)
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read().decode(), dict(exc.headers)


@pytest.fixture
def metadata(signer):
    with LocalMetadataServer(signer, project="proj-x", long_poll_s=5) as server:
        server.register("vm-a", "us-east1-b", {"spotcron-run": '{"job": "a"}', "user-data": "#cloud-config"},
                        instance_id="4242", created_at=datetime(2026, 1, 1, tzinfo=UTC))
        yield server


def test_answers_like_the_metadata_server(metadata):
    base = metadata.url_for("vm-a")
    assert get(f"{base}/instance/attributes/spotcron-run")[1] == '{"job": "a"}'
    assert get(f"{base}/instance/name")[1] == "vm-a"
    assert get(f"{base}/instance/id")[1] == "4242"
    assert get(f"{base}/instance/zone")[1].endswith("/zones/us-east1-b")
    assert get(f"{base}/instance/zone")[1].startswith("projects/")
    assert get(f"{base}/project/project-id")[1] == "proj-x"
    assert get(f"{base}/instance/preempted")[1] == "FALSE"
    assert get(f"{base}/instance/attributes/")[1] == "spotcron-run\nuser-data\n"
    assert json.loads(get(f"{base}/instance/attributes/?recursive=true")[1])["user-data"] == "#cloud-config"
    token = json.loads(get(f"{base}/instance/service-accounts/default/token")[1])
    assert token["token_type"] == "Bearer" and token["access_token"]
    status, _, headers = get(f"{base}/instance/name")
    assert headers["Metadata-Flavor"] == "Google" and headers["ETag"]


def test_refuses_requests_without_the_flavor_header(metadata):
    status, body, _ = get(f"{metadata.url_for('vm-a')}/instance/name", flavor=False)
    assert status == 403
    assert "Metadata-Flavor: Google" in body


def test_unknown_paths_vms_and_missing_audiences(metadata):
    assert get(f"{metadata.url_for('vm-a')}/instance/attributes/nope")[0] == 404
    assert get(f"{metadata.url_for('vm-b')}/instance/name")[0] == 404
    status, body, _ = get(f"{metadata.url_for('vm-a')}/instance/service-accounts/default/identity")
    assert (status, body.strip()) == (400, "non-empty audience parameter required")
    metadata.unregister("vm-a")
    assert get(f"{metadata.url_for('vm-a')}/instance/name")[0] == 404


def test_standard_identity_tokens_leave_out_the_instance(metadata, signer):
    from spotcron.gcp.id_tokens import GoogleIdentity

    url = f"{metadata.url_for('vm-a')}/instance/service-accounts/default/identity?audience=x"
    claims = GoogleIdentity(metadata.certs_url).verify(get(url)[1], "x")
    assert "google" not in claims and "email" not in claims


def test_wait_for_change_returns_when_the_vm_is_preempted(metadata):
    # The poll would last 60 s; only the change can answer it within the join.
    url = f"{metadata.url_for('vm-a')}/instance/preempted?wait_for_change=true&timeout_sec=60"
    answer = {}
    waiter = threading.Thread(target=lambda: answer.update(value=get(url, timeout=60)[1]), daemon=True)
    waiter.start()
    wait_until(lambda: metadata.long_polls == 1, "the long poll to park")
    assert waiter.is_alive()
    metadata.set_preempted("vm-a")
    waiter.join(20)
    assert not waiter.is_alive() and answer["value"] == "TRUE"


def test_wait_for_change_with_a_stale_etag_answers_at_once(metadata):
    base = f"{metadata.url_for('vm-a')}/instance/preempted"
    _, _, headers = get(base)
    metadata.set_preempted("vm-a")
    # A 60 s poll inside a 20 s client timeout: only an answer at once passes.
    status, value, _ = get(f"{base}?wait_for_change=true&last_etag={headers['ETag']}&timeout_sec=60", timeout=20)
    assert (status, value) == (200, "TRUE")


def test_wait_for_change_times_out_with_the_current_value(metadata):
    status, value, _ = get(f"{metadata.url_for('vm-a')}/instance/preempted?wait_for_change=true&timeout_sec=0.3",
                           timeout=20)
    assert (status, value) == (200, "FALSE")
    assert metadata.long_polls == 0


def test_stop_releases_long_polls_and_leaves_no_thread_or_port(signer):
    before = set(threading.enumerate())
    server = LocalMetadataServer(signer, long_poll_s=30).start()
    server.register("vm-a", "us-east1-b", {})
    port = int(server.base_url.rsplit(":", 1)[1])
    waiter = threading.Thread(target=lambda: get(
        f"{server.url_for('vm-a')}/instance/preempted?wait_for_change=true&timeout_sec=30", timeout=30))
    waiter.start()
    wait_until(lambda: server.long_polls == 1, "the long poll to park")
    server.stop()
    waiter.join(20)  # inside the poll's 30 s: only stop can have released it
    assert not waiter.is_alive()
    assert set(threading.enumerate()) == before
    with pytest.raises(OSError):
        socket.create_connection(("127.0.0.1", port), timeout=1)


def test_bucket_persists_objects_in_its_data_dir(tmp_path):
    with LocalBucket(tmp_path / "data", "b") as bucket:
        bucket.write("runs/a/manifest.json", b'{"ok": true}', "application/json")
        bucket.write("runs/a/empty.txt", b"")
    with LocalBucket(tmp_path / "data", "b") as bucket:
        assert bucket.names("runs/") == ["runs/a/empty.txt", "runs/a/manifest.json"]
        assert bucket.read("runs/a/manifest.json") == b'{"ok": true}'
        assert bucket.read("runs/a/empty.txt") == b""
        assert bucket.read("runs/a/missing") is None


def test_bucket_stop_leaves_no_thread_or_port(tmp_path):
    before = set(threading.enumerate())
    bucket = LocalBucket(None, "b").start()
    port = int(bucket.url.rsplit(":", 1)[1])
    assert port > 0
    bucket.stop()
    assert set(threading.enumerate()) == before
    with pytest.raises(OSError):
        socket.create_connection(("127.0.0.1", port), timeout=1)
