"""How the runner stores outputs: many files in parallel through failures, large files by the
resumable protocol (resumed where the session stopped), names the bucket can't take, live logs,
the checkpoint as one object, and storage tokens from the credentials broker."""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
import threading
from datetime import timedelta
from http.server import BaseHTTPRequestHandler
from pathlib import Path
from urllib.parse import unquote

import pytest

from spotcron.gcp.id_tokens import GoogleIdentity
from tests.runner.harness import (
    JOB,
    CredentialsBroker,
    FaultProxy,
    RunnerHarness,
    needs_runner_tools,
)

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


def test_spotcron_logs_follow_shows_a_running_jobs_lines_and_live_logs_ship_only_new_bytes(
        tmp_path, metadata, receiver):
    """The real runner and the real `spotcron logs --follow` (its own process, on the same local
    bucket): each line is printed while the job runs (the job waits until the test has seen it),
    and what the runner uploads while the job runs adds up to the new bytes, not the whole log
    each time."""
    from datetime import UTC, datetime

    from spotcron.core.runs import Attempt, RunRecord, RunState
    from spotcron.engine.store import RunStore
    from spotcron.local.blobs import LOCAL_BUCKET
    from spotcron.local.bucket import LocalBucket

    state = tmp_path / "state"
    with LocalBucket(state / "bucket", LOCAL_BUCKET) as bucket:
        broker = CredentialsBroker(GoogleIdentity(metadata.certs_url), metadata, bucket)
        broker.start()
        harness = RunnerHarness(tmp_path, metadata, bucket, receiver, broker)
        store = RunStore(bucket.blobs())
        now = datetime.now(UTC)
        attempt = Attempt(number=1, vm_name=harness.vm_name, zone="us-central1-a", machine_type="e2-small",
                          created_at=now, started_at=now)
        assert store.create(RunRecord(job="hello", run_id="20260101-1000", state=RunState.RUNNING, created_at=now,
                                      updated_at=now, attempts=(attempt,)))
        script = ("import pathlib, time\n"
                  "for i in range(3):\n"
                  "    print(f'line {i} ' + 'x' * 2000, flush=True)\n"
                  f"    flag = pathlib.Path({str(tmp_path)!r}) / f'go-{{i}}'\n"
                  "    while not flag.exists(): time.sleep(0.02)\n"
                  "print('last line', flush=True)\n")
        proxy = FaultProxy(bucket.url, match=lambda method, path: False)  # records, fails nothing
        proxy.start()
        harness.storage_url = proxy.base_url
        env = {k: v for k, v in os.environ.items() if not k.startswith("SPOTCRON_")}
        err_file = (tmp_path / "follow.err").open("w")
        follow = subprocess.Popen([str(Path(sys.executable).parent / "spotcron"), "logs", "hello/20260101-1000",
                                   "--follow", "--interval", "0.2", "--state-dir", str(state)],
                                  stdout=subprocess.PIPE, stderr=err_file, text=True,
                                  env=env)
        printed: list[str] = []
        reader = threading.Thread(target=lambda: printed.extend(follow.stdout), daemon=True)
        reader.start()
        try:
            proc = harness.start(harness.descriptor(bucket=LOCAL_BUCKET, local_command=[sys.executable, "-c", script],
                                                    deadline=now + timedelta(seconds=120), timeout_s=120))
            for i in range(3):
                harness.wait_for(lambda i=i: any(line.startswith(f"line {i} ") for line in printed), timeout=30,
                                 what=f"line {i} from spotcron logs --follow")
                assert harness.receiver.calls == []  # the job is still running
                (tmp_path / f"go-{i}").write_text("go")
            result = harness.wait(proc, 0)
            store.update("hello", "20260101-1000", lambda r: r.with_state(RunState.SUCCEEDED, datetime.now(UTC)))
            follow.wait(timeout=30)
        finally:
            proxy.stop()
            broker.stop()
            if follow.poll() is None:
                follow.kill()
            err_file.close()
        reader.join(timeout=5)
        err = (tmp_path / "follow.err").read_text()

        assert result.rc == 0, result.stderr
        assert follow.returncode == 0, err
        log = bucket.read(ATTEMPT1 + "logs.txt")
        assert "".join(printed) == log.decode()
        assert "hello/20260101-1000 ended succeeded" in err
        # While the job ran, each stretch of new output went up once, as its own part.
        parts = bucket.names(ATTEMPT1 + "logs/")
        shipped = b"".join(bucket.read(name) for name in parts)
        assert len(parts) >= 3
        assert [int(name.rsplit("/", 1)[1].removesuffix(".txt")) for name in parts] == [
            sum(len(bucket.read(name)) for name in parts[:k]) for k in range(len(parts))]
        assert log.startswith(shipped)
        uploads = [(path, body) for path, body in zip(proxy.forwarded, proxy.bodies, strict=True)
                   if path.startswith("POST /upload/")]
        names = [unquote(path.split("name=", 1)[1]) for path, _ in uploads]
        assert names.count(ATTEMPT1 + "logs.txt") == 1  # the whole log once, at the end
        live = sum(len(body) for (path, body), name in zip(uploads, names, strict=True)
                   if name.startswith(ATTEMPT1 + "logs/"))
        assert live == len(shipped) <= len(log)


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


def test_one_broker_token_serves_every_upload_until_it_nears_expiry(harness: RunnerHarness):
    # Live log parts, then 25 batches, 4 at a time: each background upload reads the token the
    # first one got (a live log part, in the background), instead of asking the broker again.
    broker = CredentialsBroker(GoogleIdentity(harness.metadata.certs_url), harness.metadata, harness.bucket,
                               life=3600)
    broker.start()
    flag = harness.tmp / "go"
    script = ("import os, pathlib, time\nprint('hello', flush=True)\n"
              "r = pathlib.Path(os.environ['SPOTCRON_RESULTS_DIR'])\n"
              "[(r / f'f{i}.txt').write_text(str(i)) for i in range(200)]\n"
              f"while not pathlib.Path({str(flag)!r}).exists(): time.sleep(0.05)\n")
    harness.extra_env.update(SPOTCRON_PARALLEL="4", SPOTCRON_BATCH_FILES="8")
    try:
        proc = harness.start(harness.descriptor(credentials_url=broker.url,
                                                local_command=[sys.executable, "-c", script]))
        harness.wait_for(lambda: harness.bucket.names(ATTEMPT1 + "logs/"), timeout=30, what="a live log part")
        flag.write_text("go")
        result = harness.wait(proc, 0)
    finally:
        broker.stop()

    assert result.rc == 0, result.stderr
    assert len(_manifest(harness)["files"]) == 201
    assert len(broker.issued) == 1


def test_storage_calls_carry_the_brokers_token_refreshed_before_it_expires(harness: RunnerHarness):
    broker = CredentialsBroker(GoogleIdentity(harness.metadata.certs_url), harness.metadata, harness.bucket,
                               life=2)
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

