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


def _raw_get(bucket: LocalBucket, path: str, headers: dict[str, str] | None = None) -> tuple[int, int]:
    """(status, bytes received) of a GET whose body is read in small pieces and dropped."""
    import http.client

    connection = http.client.HTTPConnection(bucket.url.removeprefix("http://"), timeout=60)
    try:
        connection.request("GET", path, headers={"Authorization": f"Bearer {bucket.full_token()}", **(headers or {})})
        response = connection.getresponse()
        received = 0
        while piece := response.read(64 * 1024):
            received += len(piece)
        return response.status, received
    finally:
        connection.close()


def test_downloads_stream_from_disk_in_constant_memory(bucket):
    """A 48 MiB object (and a ranged read of most of it) is sent without holding it in memory.
    Before, the server read the whole object (or range) into one bytes object first."""
    import tracemalloc

    size = 48 << 20
    control = _api(bucket, bucket.full_token())
    assert _put(control, "big.bin", b"\x01" * size).status == 200
    path = f"/storage/v1/b/{BUCKET}/o/big.bin?alt=media"

    tracemalloc.start()
    try:
        whole = _raw_get(bucket, path)
        ranged = _raw_get(bucket, path, {"Range": f"bytes=1-{size - 2}"})
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()

    assert whole == (200, size)
    assert ranged == (206, size - 2)
    assert peak < 8 << 20, f"peak {peak / 2**20:.1f} MiB traced while sending {size >> 20} MiB"


def test_a_multipart_body_over_the_limit_is_refused_before_it_is_read(bucket):
    """The 413 comes back while the client has sent only its headers. Before, the server waited
    for all 64 MiB first, and this client (which sends nothing more) got no answer at all."""
    import socket
    from urllib.parse import urlsplit

    address = urlsplit(bucket.url)
    client = socket.create_connection((address.hostname, address.port), timeout=30)
    try:
        client.sendall((f"POST /upload/storage/v1/b/{BUCKET}/o?uploadType=multipart HTTP/1.1\r\nHost: x\r\n"
                        f"Authorization: Bearer {bucket.full_token()}\r\nContent-Type: multipart/related; boundary=b"
                        f"\r\nContent-Length: {(64 << 20) + 1}\r\n\r\n--b\r\n").encode())
        answer = b""
        while piece := client.recv(4096):
            answer += piece
        answer = answer.decode(errors="replace")
    finally:
        client.close()

    assert answer.startswith("HTTP/1.1 413"), answer[:200]
    assert "resumable" in answer


def test_an_endpoint_not_served_answers_501_naming_it(bucket):
    control = _api(bucket, bucket.full_token())
    _put(control, "a", b"1")

    moved = control.call("POST", f"/storage/v1/b/{BUCKET}/o/a/moveTo/o/b")
    deleted = control.call("DELETE", f"/storage/v1/b/{BUCKET}")

    assert moved.status == 501
    assert f"POST /storage/v1/b/{BUCKET}/o/a/moveTo/o/b is not served" in _error(moved)
    assert deleted.status == 501
    assert f"DELETE /storage/v1/b/{BUCKET} is not served" in _error(deleted)


def test_a_listing_page_reads_about_the_page_from_the_index(bucket):
    """Before, every page walked and sorted every name under the prefix."""
    store = bucket._server.store
    for n in range(300):
        store.commit(BUCKET, f"runs/flat/{n:04d}", store.spool(_Bytes(b""), 0), {}, _NO_CONDITIONS)
        store.commit(BUCKET, f"runs/tree/{n:04d}/a", store.spool(_Bytes(b""), 0), {}, _NO_CONDITIONS)
        store.commit(BUCKET, f"runs/tree/{n:04d}/b", store.spool(_Bytes(b""), 0), {}, _NO_CONDITIONS)
    control = _api(bucket, bucket.full_token())
    index = store.index(BUCKET)

    index.rows_read = 0
    page = control.call("GET", f"/storage/v1/b/{BUCKET}/o", {"prefix": "runs/flat/", "startOffset": "runs/flat/0150",
                                                              "maxResults": "10"}).json()
    flat_rows = index.rows_read
    index.rows_read = 0
    folders = control.call("GET", f"/storage/v1/b/{BUCKET}/o", {"prefix": "runs/tree/", "delimiter": "/",
                                                                 "maxResults": "10"}).json()
    tree_rows = index.rows_read

    assert [item["name"] for item in page["items"]] == [f"runs/flat/{n:04d}" for n in range(150, 160)]
    assert folders["prefixes"] == [f"runs/tree/{n:04d}/" for n in range(10)]
    assert flat_rows <= 11
    assert tree_rows <= 11 * 16  # one small query per folder, never the 600 names under the prefix


def test_the_google_client_helpers_work_on_the_local_server(bucket):
    """What a job's own code calls: compose, copy_blob, rewrite, patch, list_blobs(match_glob),
    delete at a generation."""
    client = bucket.client()
    store = client.bucket(BUCKET)
    one, two = store.blob("parts/1.txt"), store.blob("parts/2.txt")
    one.upload_from_string(b"ab")
    two.upload_from_string(b"cd")

    whole = store.blob("whole.txt")
    whole.compose([one, two])
    copied = store.copy_blob(whole, store, "copy.txt")
    rewritten = store.blob("rewritten.txt")
    token, done, total = rewritten.rewrite(whole)
    copied.metadata = {"owner": "bot"}
    copied.patch()
    listed = [blob.name for blob in client.list_blobs(BUCKET, match_glob="parts/*.txt")]
    old = store.get_blob("parts/1.txt")
    one.upload_from_string(b"new")

    assert whole.download_as_bytes() == b"abcd"
    assert whole.component_count == 2
    assert copied.download_as_bytes() == b"abcd"
    assert (token, done, total) == (None, 4, 4)
    assert rewritten.download_as_bytes() == b"abcd"
    assert store.get_blob("copy.txt").metadata == {"owner": "bot"}
    assert listed == ["parts/1.txt", "parts/2.txt"]
    from google.api_core.exceptions import NotFound

    with pytest.raises(NotFound):
        old.delete()  # the client sends generation=OLD: the newer object stays
    assert store.blob("parts/1.txt").download_as_bytes() == b"new"
    assert client.get_bucket(BUCKET).name == BUCKET
    assert BUCKET in [b.name for b in client.list_buckets()]


class _Bytes:
    def __init__(self, data: bytes):
        self._data = data

    def read(self, size: int = -1) -> bytes:
        data, self._data = self._data, b""
        return data


def _no_conditions():
    from spotcron.local.objects import Conditions

    return Conditions()


_NO_CONDITIONS = _no_conditions()


def test_a_client_that_hangs_up_early_ends_its_connection_quietly(bucket, capfd, caplog):
    """`spotcron status` and a runner may close a connection while a reply is still being written (a
    read cut short, a process ending): the server drops that connection and prints no traceback."""
    import socket
    import struct
    from urllib.parse import urlsplit

    from spotcron.testing.waiting import wait_until

    bucket.write("big.bin", b"x" * (8 << 20))  # more than the socket buffers hold: the write must block
    server = bucket._server._httpd
    address = urlsplit(bucket.url)
    for _ in range(3):
        client = socket.create_connection((address.hostname, address.port))
        client.sendall(f"GET /storage/v1/b/{BUCKET}/o/big.bin?alt=media HTTP/1.1\r\nHost: x\r\n"
                       f"Authorization: Bearer {bucket.full_token()}\r\n\r\n".encode())
        client.recv(1024)  # the reply has started
        client.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))  # hang up: a reset
        client.close()
    # A keep-alive connection reset between requests (a short-lived command that exits) too.
    client = socket.create_connection((address.hostname, address.port))
    client.sendall(f"GET /storage/v1/b/{BUCKET}/o HTTP/1.1\r\nHost: x\r\n"
                   f"Authorization: Bearer {bucket.full_token()}\r\n\r\n".encode())
    client.recv(1024)
    client.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
    client.close()
    wait_until(lambda: not server._open, "the server dropped the connections the client reset")
    assert bucket.read("big.bin") is not None  # still serving
    err = capfd.readouterr().err
    assert "Traceback" not in err and "BrokenPipeError" not in err and "ConnectionResetError" not in err, err
    assert not [r for r in caplog.records if r.levelname in ("ERROR", "WARNING")], caplog.text


def test_a_held_object_is_kept_from_every_delete_and_the_vms_token_cannot_hold_one(bucket):
    from spotcron.core.errors import ObjectKept

    control = _api(bucket, bucket.full_token())
    vm = _api(bucket, bucket.downscoped_token(boundary_rules(BUCKET, "bot", "20261122-1000", 1)))
    name = f"{PREFIX}attempt-1/results/out.json"
    path = f"/storage/v1/b/{BUCKET}/o/{name.replace('/', '%2F')}"
    assert _put(vm, name).status == 200

    refused = vm.call("PATCH", path, None, json.dumps({"temporaryHold": True}).encode(),
                      {"Content-Type": "application/json"})
    assert refused.status == 403 and _error(refused).endswith(f"storage.objects.update on gs://{BUCKET}/{name}")

    assert control.call("PATCH", path, None, json.dumps({"temporaryHold": True}).encode(),
                        {"Content-Type": "application/json"}).status == 200
    for reply in (vm.call("DELETE", path), control.call("DELETE", path), _put(control, name, b"again")):
        assert reply.status == 403
        assert _error(reply) == (f"Object '{BUCKET}/{name}' is under active Temporary hold and cannot be deleted, "
                                 f"overwritten or archived until hold is removed.")
    with pytest.raises(ObjectKept):
        bucket.blobs().delete(name)

    assert control.call("PATCH", path, None, json.dumps({"temporaryHold": False}).encode(),
                        {"Content-Type": "application/json"}).status == 200
    assert bucket.blobs().delete(name)
