"""How the runner stores outputs: many files in parallel through failures, large files by the
resumable protocol (resumed where the session stopped), names the bucket can't take, live logs,
the checkpoint as one object, and storage tokens from the credentials broker."""

from __future__ import annotations

import hashlib
import json
import sys
import threading
from http.server import BaseHTTPRequestHandler
from typing import Any

import pytest

from spotcron.core.errors import InvalidToken
from spotcron.gcp.identity import GoogleIdentity
from tests.runner.harness import JOB, FaultProxy, RunnerHarness, _Serving, needs_runner_tools

PREFIX = "runs/hello/20260101-1000/"
ATTEMPT1 = PREFIX + "attempt-1/"

pytestmark = [pytest.mark.slow, needs_runner_tools]


def _manifest(harness: RunnerHarness) -> dict:
    data = harness.bucket.read(ATTEMPT1 + "manifest.json")
    assert data is not None, "no manifest"
    return json.loads(data)


def _many(harness: RunnerHarness, count: int) -> list[str]:
    script = ("import os, pathlib; r = pathlib.Path(os.environ['SPOTCRON_RESULTS_DIR']); "
              f"[(r / f'n{{i // 50}}' / f'f{{i}}.txt').parent.mkdir(exist_ok=True) or "
              f"(r / f'n{{i // 50}}' / f'f{{i}}.txt').write_text(str(i)) for i in range({count})]")
    return [sys.executable, "-c", script]


def test_many_files_are_stored_in_parallel_through_injected_failures(harness: RunnerHarness):
    # Every 7th upload request fails once with a 503, batched or retried alike.
    seen = {"n": 0}
    lock = threading.Lock()

    def every_seventh(method: str, path: str) -> bool:
        with lock:
            seen["n"] += 1
            return path.startswith("/upload/") and seen["n"] % 7 == 0

    proxy = FaultProxy(harness.bucket.url, fail_first=-1, match=every_seventh)
    proxy.start()
    harness.storage_url = proxy.base_url
    harness.extra_env.update(SPOTCRON_PARALLEL="4", SPOTCRON_BATCH_FILES="16")
    try:
        result = harness.run(harness.descriptor(local_command=_many(harness, 300)))
    finally:
        proxy.stop()

    assert result.rc == 0, result.stderr
    assert len(proxy.failed) >= 20
    manifest = _manifest(harness)
    names = {f["name"]: f for f in manifest["files"]}
    assert len(names) == 301  # logs.txt and every result
    for i in range(300):
        entry = names[f"results/n{i // 50}/f{i}.txt"]
        assert entry["sha256"] == hashlib.sha256(str(i).encode()).hexdigest()
        assert harness.bucket.read(f"{ATTEMPT1}results/n{i // 50}/f{i}.txt") == str(i).encode()
    assert manifest["skipped"] == []
    logs = harness.bucket.read(ATTEMPT1 + "logs.txt").decode()
    assert "spotcron: uploading 300 file(s)" in logs and "spotcron: uploaded 300 file(s) from results/" in logs
    assert harness.receiver.accepted[0].body["uploaded"] is True


def test_a_large_file_goes_by_the_resumable_protocol_and_resumes_where_the_session_stopped(harness):
    size = 3 * 256 * 1024 + 1234
    cut = 256 * 1024
    # The first PUT of data reaches the bucket only in part, then the connection "breaks" (503).
    state = {"cut": False}

    class Cutter(FaultProxy):
        pass

    proxy = Cutter(harness.bucket.url)
    original = proxy.handler._proxy

    def cutting(handler: BaseHTTPRequestHandler) -> None:
        length = int(handler.headers.get("Content-Length") or 0)
        if handler.command == "PUT" and length == size and not state["cut"]:
            state["cut"] = True
            data = handler.rfile.read(length)
            import http.client
            conn = http.client.HTTPConnection(proxy.target.hostname, proxy.target.port, timeout=10)
            conn.request("PUT", handler.path, body=data[:cut], headers={
                "Content-Range": f"bytes 0-{cut - 1}/{size}", "Authorization": handler.headers["Authorization"]})
            conn.getresponse().read()
            conn.close()
            handler.send_response(503)
            handler.send_header("Content-Length", "0")
            handler.end_headers()
            return
        original(handler)

    proxy.handler.do_PUT = cutting  # type: ignore[method-assign]
    proxy.start()
    harness.storage_url = proxy.base_url
    harness.extra_env["SPOTCRON_RESUMABLE_MIN"] = str(256 * 1024)
    try:
        result = harness.run(harness.descriptor(local_command=[sys.executable, str(JOB), "big", str(size)]))
    finally:
        proxy.stop()

    assert result.rc == 0, result.stderr
    assert state["cut"]
    stored = harness.bucket.read(ATTEMPT1 + "results/big.bin")
    local = (harness.workdir / "results" / "big.bin").read_bytes()
    assert stored == local and len(stored) == size
    puts = [p for p in proxy.forwarded if p.startswith("PUT ")]
    assert len(puts) == 2  # the status query, then only the rest
    rest = [b for b in proxy.bodies if len(b) == size - cut]
    assert rest and rest[0] == local[cut:]
    assert any("uploadType=resumable" in p for p in proxy.forwarded)
    entry = {f["name"]: f for f in _manifest(harness)["files"]}["results/big.bin"]
    assert (entry["size"], entry["sha256"]) == (size, hashlib.sha256(local).hexdigest())


def test_names_the_bucket_cannot_take_are_skipped_listed_and_do_not_fail_the_run(harness: RunnerHarness):
    result = harness.run(harness.descriptor(local_command=[sys.executable, str(JOB), "names"]))

    assert result.rc == 0, result.stderr
    [call] = harness.receiver.accepted
    assert (call.body["exit_code"], call.body["uploaded"]) == (0, True)
    manifest = _manifest(harness)
    assert [f["name"] for f in manifest["files"] if f["name"].startswith("results/")] == ["results/good é.txt"]
    assert sorted(manifest["skipped"], key=lambda s: s["name"]) == [
        {"name": "results/bad%FF.txt", "reason": "it is not valid UTF-8"},
        {"name": "results/carriage%0Dreturn.txt", "reason": "it contains a carriage return"},
        {"name": "results/line%0Afeed.txt", "reason": "it contains a line feed"},
    ]
    logs = harness.bucket.read(ATTEMPT1 + "logs.txt").decode()
    assert "spotcron: skipped results/line%0Afeed.txt: it contains a line feed" in logs


def test_the_log_reaches_the_bucket_while_the_job_runs(harness: RunnerHarness):
    flag = harness.tmp / "go"
    script = (f"import pathlib, time\nprint('first line', flush=True)\n"
              f"while not pathlib.Path({str(flag)!r}).exists(): time.sleep(0.05)\nprint('last line', flush=True)\n")
    proc = harness.start(harness.descriptor(local_command=[sys.executable, "-c", script]))
    try:
        harness.wait_for(lambda: b"first line" in (harness.bucket.read(ATTEMPT1 + "logs.txt") or b""),
                         timeout=30, what="the first line in the bucket while the job runs")
        assert harness.receiver.calls == []  # the job is still running
    finally:
        flag.write_text("go")
    result = harness.wait(proc, 0)

    assert result.rc == 0, result.stderr
    assert b"last line" in harness.bucket.read(ATTEMPT1 + "logs.txt")


def test_the_checkpoint_is_one_object_restored_without_a_listing(harness: RunnerHarness):
    import io
    import tarfile

    data = io.BytesIO()
    with tarfile.open(fileobj=data, mode="w") as archive:
        payload = b"step-41"
        info = tarfile.TarInfo("./state/progress.txt")
        info.size = len(payload)
        archive.addfile(info, io.BytesIO(payload))
    harness.bucket.write(PREFIX + "checkpoint/checkpoint.tar", data.getvalue())
    proxy = FaultProxy(harness.bucket.url)
    proxy.start()
    harness.storage_url = proxy.base_url
    try:
        result = harness.run(harness.descriptor(checkpoint_path="/checkpoint",
                                                local_command=[sys.executable, str(JOB), "checkpoint"]))
    finally:
        proxy.stop()

    assert result.rc == 0, result.stderr
    assert harness.bucket.read(ATTEMPT1 + "results/restored.txt") == b"step-41"
    gets = [p for p in proxy.forwarded if p.startswith("GET ")]
    assert gets == [f"GET /storage/v1/b/test-bucket/o/{'runs%2Fhello%2F20260101-1000%2Fcheckpoint%2Fcheckpoint.tar'}"
                    "?alt=media"]
    assert harness.bucket.names(PREFIX + "checkpoint/") == [PREFIX + "checkpoint/checkpoint.tar"]


class Broker(_Serving):
    """A stand-in for the credentials endpoint: checks the instance identity token, hands out
    short-lived tokens (`mint`: access-boundary tokens the local bucket accepts) and remembers them."""

    def __init__(self, identity: GoogleIdentity, life: int, mint: Any):
        self.identity = identity
        self.life = life
        self.mint = mint
        self.issued: list[str] = []
        self.refused: list[str] = []
        broker = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args: Any) -> None:
                pass

            def do_POST(self) -> None:  # noqa: N802
                self.rfile.read(int(self.headers.get("Content-Length") or 0))
                token = self.headers.get("Authorization", "").removeprefix("Bearer ")
                try:
                    broker.identity.verify(token, broker.url)
                except InvalidToken as exc:
                    broker.refused.append(str(exc))
                    self.send_response(401)
                    self.send_header("Content-Length", "0")
                    self.end_headers()
                    return
                issued = broker.mint(broker.life)
                broker.issued.append(issued)
                body = json.dumps({"access_token": issued, "expires_in": broker.life}).encode()
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

        self.handler = Handler

    @property
    def url(self) -> str:
        return f"{self.base_url}/credentials"


def test_storage_calls_carry_the_brokers_token_refreshed_before_it_expires(harness: RunnerHarness):
    from spotcron.local.grants import vm_rules

    rules = vm_rules("test-bucket", PREFIX, 1)
    broker = Broker(GoogleIdentity(harness.metadata.certs_url), life=2,
                    mint=lambda life: harness.bucket.downscoped_token(rules, lifetime_s=life))
    broker.start()
    proxy = FaultProxy(harness.bucket.url)
    proxy.start()
    harness.storage_url = proxy.base_url
    try:
        result = harness.run(harness.descriptor(credentials_url=broker.url,
                                                local_command=[sys.executable, str(JOB), "talk", "3"]))
    finally:
        proxy.stop()
        broker.stop()

    assert result.rc == 0, result.stderr
    assert broker.refused == []
    assert len(broker.issued) >= 2  # a 2 s token is refreshed a second before it runs out
    used = {auth.removeprefix("Bearer ") for auth in proxy.authorizations}
    assert used and used <= set(broker.issued), used

