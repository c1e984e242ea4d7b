"""The local storage server beyond the shared contract: the access rule on the wire, many clients at
once, and what survives a restart."""

from __future__ import annotations

import json
import threading
from concurrent.futures import ThreadPoolExecutor

import pytest

from spotcron.core.errors import PreconditionFailed, Transient
from spotcron.engine.broker import boundary_rules
from spotcron.local.bucket import LocalBucket
from tests.contracts.storage_servers import StorageApi

BUCKET = "spotcron-local"
PREFIX = "runs/bot/20261122-1000/"


@pytest.fixture
def bucket(tmp_path):
    with LocalBucket(tmp_path / "data", BUCKET) as served:
        yield served


def _api(bucket: LocalBucket, token: str | None) -> StorageApi:
    return StorageApi("local-server", bucket.url, BUCKET, token)


def _put(api: StorageApi, name: str, data: bytes = b"x", **query):
    return api.call("POST", f"/upload/storage/v1/b/{BUCKET}/o", {"uploadType": "media", "name": name, **query}, data)


def _error(reply) -> str:
    return reply.json()["error"]["message"]


def test_every_request_needs_a_token(bucket):
    anonymous = _api(bucket, None)

    for reply in (_put(anonymous, "x"), anonymous.call("GET", f"/storage/v1/b/{BUCKET}/o"),
                  anonymous.call("GET", f"/storage/v1/b/{BUCKET}/o/x", {"alt": "media"}),
                  anonymous.call("DELETE", f"/storage/v1/b/{BUCKET}/o/x")):
        assert reply.status == 401
        assert _error(reply).startswith("no Authorization header: send `Authorization: Bearer TOKEN`")
    assert _put(_api(bucket, "local-access-token.vm-1"), "x").status == 401


def test_a_vm_token_writes_its_attempt_and_nothing_of_the_control_plane(bucket):
    control = _api(bucket, bucket.full_token())
    _put(control, f"{PREFIX}run.json", b'{"state":"running"}')
    vm = _api(bucket, bucket.downscoped_token(boundary_rules(BUCKET, "bot", "20261122-1000", 1)))

    assert _put(vm, f"{PREFIX}attempt-1/results/out.json").status == 200
    assert _put(vm, f"{PREFIX}attempt-1/logs.txt", b"1").status == 200
    assert _put(vm, f"{PREFIX}attempt-1/logs.txt", b"2").status == 200  # its own logs, replaced
    assert _put(vm, f"{PREFIX}checkpoint/step").status == 200
    assert vm.call("DELETE", f"/storage/v1/b/{BUCKET}/o/{PREFIX.replace('/', '%2F')}checkpoint%2Fstep").status == 204

    denied = _put(vm, f"{PREFIX}run.json", b'{"state":"succeeded"}')
    assert denied.status == 403
    assert _error(denied).endswith(f"storage.objects.create on gs://{BUCKET}/{PREFIX}run.json")
    for name in (f"{PREFIX}attempt-2/manifest.json", "runs/bot/20261122-1100/attempt-1/x", "deployed/bot.json",
                 "index.html", "live/bot/20261122-1000"):
        assert _put(vm, name).status == 403, name
    assert vm.call("GET", f"/storage/v1/b/{BUCKET}/o/{PREFIX.replace('/', '%2F')}run.json").status == 403
    assert vm.call("DELETE", f"/storage/v1/b/{BUCKET}/o/{PREFIX.replace('/', '%2F')}run.json").status == 403
    assert vm.call("GET", f"/storage/v1/b/{BUCKET}/o", {"prefix": "runs/"}).status == 403
    assert vm.call("GET", f"/storage/v1/b/{BUCKET}/o", {"prefix": f"{PREFIX}checkpoint/"}).status == 200
    assert bucket.read(f"{PREFIX}run.json") == b'{"state":"running"}'


def test_a_vm_token_cannot_open_a_resumable_upload_outside_its_attempt(bucket):
    vm = _api(bucket, bucket.downscoped_token(boundary_rules(BUCKET, "bot", "20261122-1000", 1)))

    reply = vm.call("POST", f"/upload/storage/v1/b/{BUCKET}/o", {"uploadType": "resumable", "name": f"{PREFIX}run.json"})

    assert reply.status == 403


def test_the_vms_own_token_from_the_metadata_server_reaches_no_storage(bucket):
    """The VM account holds no storage role: what the metadata server hands a VM as its access
    token is refused by the storage server; a runner's storage token comes from the broker."""
    from spotcron.core.descriptor import RunDescriptor
    from spotcron.local.metadata import LocalMetadataServer

    descriptor = RunDescriptor(job="bot", run_id="20261122-1000", attempt=1, image="i", bucket=BUCKET, prefix=PREFIX,
                               job_done_url="http://127.0.0.1:9/", deadline="2026-11-22T11:00:00Z", timeout_s=60)
    with LocalMetadataServer() as metadata:
        metadata.register("vm-1", "local-zone1-a", {"spotcron-run": descriptor.to_metadata()})
        _, body = metadata.answer("vm-1", "instance/service-accounts/default/token", {})
    vm = _api(bucket, json.loads(body)["access_token"])

    assert _put(vm, f"{PREFIX}attempt-1/logs.txt").status == 401
    assert vm.call("GET", f"/storage/v1/b/{BUCKET}/o", {"prefix": f"{PREFIX}attempt-1/"}).status == 401
    assert bucket.names() == []


def test_concurrent_create_only_writes_make_exactly_one_object(bucket):
    blobs = bucket.blobs()

    def create(n: int) -> bool:
        try:
            blobs.write(f"{PREFIX}run.json", str(n).encode(), if_generation_match=0)
            return True
        except PreconditionFailed:
            return False

    with ThreadPoolExecutor(16) as pool:
        won = list(pool.map(create, range(32)))

    assert won.count(True) == 1
    assert bucket.read(f"{PREFIX}run.json") == str(won.index(True)).encode()


def test_concurrent_read_modify_writes_lose_no_update(bucket):
    blobs = bucket.blobs()
    blobs.write("counter", b"0")

    def increment(_: int) -> None:
        while True:
            try:
                current = blobs.read("counter")
                blobs.write("counter", str(int(current.data) + 1).encode(), if_generation_match=current.generation)
                return
            except (PreconditionFailed, Transient):  # Transient: replaced under three reads in a row
                continue

    with ThreadPoolExecutor(8) as pool:
        list(pool.map(increment, range(40)))

    assert blobs.read("counter").data == b"40"


def test_a_slow_client_does_not_hold_up_the_others(bucket):
    """Each connection has its own thread: a half-sent upload blocks nobody."""
    import socket
    from urllib.parse import urlsplit

    address = urlsplit(bucket.url)
    slow = socket.create_connection((address.hostname, address.port))
    slow.sendall((f"POST /upload/storage/v1/b/{BUCKET}/o?uploadType=media&name=slow HTTP/1.1\r\n"
                  f"Host: x\r\nAuthorization: Bearer {bucket.full_token()}\r\nContent-Length: 100\r\n\r\nhalf").encode())
    try:
        bucket.write("quick", b"1")
        assert bucket.read("quick") == b"1"
    finally:
        slow.close()


def test_objects_sessions_and_tokens_survive_a_restart(tmp_path):
    data = tmp_path / "data"
    with LocalBucket(data, BUCKET) as first:
        token = first.full_token()
        generation = first.blobs().write("runs/a/run.json", b"1")
        location = _api(first, token).call(
            "POST", f"/upload/storage/v1/b/{BUCKET}/o", {"uploadType": "resumable", "name": "big"}).headers["location"]
        port = first.url.rsplit(":", 1)[1]
        assert _api(first, token).call("PUT", "", body=b"a" * 10, headers={"Content-Range": "bytes 0-9/*"},
                                       url=location).status == 308
    with LocalBucket(data, BUCKET) as second:
        api = _api(second, token)  # a token handed out before the restart
        location = location.replace(f":{port}/", f":{second.url.rsplit(':', 1)[1]}/")
        status = api.call("PUT", "", headers={"Content-Range": "bytes */*"}, url=location)
        done = api.call("PUT", "", body=b"b" * 5, headers={"Content-Range": "bytes 10-14/15"}, url=location)

        assert second.blobs().read("runs/a/run.json").generation == generation
        assert (status.status, status.headers["range"]) == (308, "bytes=0-9")
        assert done.status == 200
        assert second.read("big") == b"a" * 10 + b"b" * 5


def test_a_second_server_on_the_same_folder_sees_writes_at_once(tmp_path):
    """`spotcron logs` beside a running `spotcron up`: two servers, one copy on disk."""
    with LocalBucket(tmp_path / "data", BUCKET) as up, LocalBucket(tmp_path / "data", BUCKET) as cli:
        up.write("runs/a/attempt-1/logs.txt", b"line 1\n")
        assert cli.read("runs/a/attempt-1/logs.txt") == b"line 1\n"
        up.write("runs/a/attempt-1/logs.txt", b"line 1\nline 2\n")
        assert cli.read("runs/a/attempt-1/logs.txt") == b"line 1\nline 2\n"
        assert cli.names("runs/") == ["runs/a/attempt-1/logs.txt"]


def test_stop_ends_idle_keep_alive_connections(tmp_path):
    before = set(threading.enumerate())
    bucket = LocalBucket(tmp_path / "data", BUCKET).start()
    blobs = bucket.blobs()
    blobs.write("x", b"1")  # leaves a pooled keep-alive connection open
    bucket.stop()

    lingering = [t for t in set(threading.enumerate()) - before if t.is_alive() and "storage" in t.name]
    assert lingering == []


def test_replies_are_not_held_back_by_nagles_algorithm(bucket):
    import http.client
    import socket

    connection = http.client.HTTPConnection(bucket.url.removeprefix("http://"), timeout=10)
    try:  # one keep-alive connection, as a runner's batch of uploads uses
        connection.request("GET", f"/storage/v1/b/{BUCKET}/o", headers={"Authorization": f"Bearer {bucket.full_token()}"})
        assert connection.getresponse().read()
        [served] = bucket._server._httpd._open  # the server's end of it
        assert served.getsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY)
    finally:
        connection.close()


def test_ranged_downloads_send_only_the_range(bucket):
    control = _api(bucket, bucket.full_token())
    data = bytes(range(256)) * 64
    assert _put(control, "logs.txt", data).status == 200
    path = f"/download/storage/v1/b/{BUCKET}/o/logs.txt"

    def get(spec: str):
        return control.call("GET", path, {"alt": "media"}, headers={"Range": spec})

    first = get("bytes=100-199")
    assert (first.status, first.headers["content-range"], first.body) == (206, "bytes 100-199/16384", data[100:200])
    tail = get("bytes=-10")
    assert (tail.status, tail.body) == (206, data[-10:])
    rest = get("bytes=16000-")
    assert (rest.status, rest.body) == (206, data[16000:])
    assert get("bytes=16384-16400").status == 416
    assert control.call("GET", path, {"alt": "media"}).body == data


def test_the_local_client_never_goes_through_a_proxy_named_in_the_environment(bucket, monkeypatch):
    """The server is on this machine: a user's HTTP_PROXY (with no NO_PROXY for it) must not
    carry the functions' storage calls. Before, requests sent them to the proxy and local mode
    failed on any machine with a proxy set."""
    for name in ("HTTP_PROXY", "http_proxy", "HTTPS_PROXY", "https_proxy", "ALL_PROXY", "all_proxy"):
        monkeypatch.setenv(name, "http://127.0.0.1:9")  # nothing listens there
    for name in ("NO_PROXY", "no_proxy"):
        monkeypatch.delenv(name, raising=False)
    blobs = bucket.blobs()
    blobs.write("proxied", b"no")
    assert blobs.read("proxied").data == b"no"
