"""Uploads: seconds from the job's exit to the manifest, and the runner's peak memory.

Runs the real runner (vm_images/runner/) as a process against the local metadata server and the
local storage server, with a job (a local command) that writes either 2,000 files of 4 KB or one
1 GiB file (sparse: the disk is not the subject) into its results directory. The time is the
manifest's `uploaded_at` minus its `finished_at` (both stamped by the runner: the job's end, and
the moment every upload succeeded). Peak RSS is the largest resident size of any process the
runner started (getrusage of a wrapper's children), curl included.

Baseline: the sequential runner this one replaced, kept as bench/baseline/runner_sequential.sh
(one curl per file, `--data-binary @file`, which reads the whole file into memory), on the same
servers in the same run.
"""

from __future__ import annotations

import json
import math
import os
import subprocess
import sys
import tempfile
import threading
from datetime import UTC, datetime, timedelta
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

from bench import Section

ROOT = Path(__file__).resolve().parents[1]
RUNNER = ROOT / "vm_images" / "runner" / "runner.sh"
BASELINE = ROOT / "bench" / "baseline" / "runner_sequential.sh"
BUCKET = "bench-bucket"
SMALL = 'i=0; while [ $i -lt {n} ]; do printf "%4096s" x > "$SPOTCRON_RESULTS_DIR/f$i.bin"; i=$((i+1)); done'
LARGE = 'truncate -s {n} "$SPOTCRON_RESULTS_DIR/big.bin"'
# Runs the runner and prints the largest RSS (KiB) among the processes it started.
WRAPPER = ("import resource, subprocess, sys; rc = subprocess.call(['bash', sys.argv[1]]); "
           "print(resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss); sys.exit(rc)")


class _Done(BaseHTTPRequestHandler):
    def do_POST(self) -> None:  # noqa: N802 - job_done: read and acknowledge
        self.rfile.read(int(self.headers.get("Content-Length") or 0))
        self.send_response(200)
        self.send_header("Content-Length", "2")
        self.end_headers()
        self.wfile.write(b"{}")

    def log_message(self, *args) -> None:
        pass


def _descriptor(vm: str, command: str, job_done: str, *, baseline: bool) -> str:
    from spotcron.core.descriptor import RunDescriptor

    descriptor = RunDescriptor(job="bench", run_id=vm, attempt=1, image="bench/upload:1", bucket=BUCKET,
                               prefix=f"runs/bench/{vm}/", job_done_url=job_done, timeout_s=1800,
                               deadline=datetime.now(UTC) + timedelta(seconds=1800),
                               local_command=["sh", "-c", command])
    if baseline:  # the old runner reads the JSON of version 1
        return json.dumps({**descriptor.model_dump(mode="json"), "version": 1})
    return descriptor.to_metadata()


def measure(runner: Path, command: str, *, baseline: bool, tmp: Path, servers,
            failures: list[str]) -> tuple[float, float]:
    """(seconds from the job's exit to the manifest, peak RSS in MB) for one run; a baseline run
    that stores no manifest gives NaN seconds and a line in `failures`."""
    metadata, bucket, job_done = servers
    vm = f"{'old' if baseline else 'new'}-{len(list(tmp.iterdir()))}"
    metadata.register(vm, "us-central1-a", {"spotcron-run": _descriptor(vm, command, job_done, baseline=baseline)})
    env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "HOME": str(tmp),
           "SPOTCRON_METADATA_URL": metadata.url_for(vm), "SPOTCRON_STORAGE_URL": bucket.url,
           "SPOTCRON_DOCKER": "none", "SPOTCRON_WORKDIR": str(tmp / vm), "SPOTCRON_HTTP_TIMEOUT": "600"}
    done = subprocess.run([sys.executable, "-c", WRAPPER, str(runner)], env=env, capture_output=True, text=True,
                          timeout=1800)
    manifest = bucket.read(f"runs/bench/{vm}/attempt-1/manifest.json")
    peak_mb = int(done.stdout.split()[-1]) / 1024 if done.stdout.split() else math.nan
    if manifest is None:
        if not baseline:
            raise RuntimeError(f"{runner.name} stored no manifest (exit {done.returncode}): {done.stderr[-800:]}")
        said = [line for line in done.stderr.splitlines() if line.startswith("curl:")][:1]
        failures.append(f"the sequential runner stored no manifest: {said[0] if said else done.stderr[-200:]}")
        return math.nan, peak_mb
    data = json.loads(manifest)
    seconds = (datetime.fromisoformat(data["uploaded_at"]) - datetime.fromisoformat(data["finished_at"]))
    return seconds.total_seconds(), peak_mb


def run(quick: bool = False) -> Section:
    from spotcron.core.descriptor import RunDescriptor
    from spotcron.engine.broker import boundary_rules
    from spotcron.local.bucket import LocalBucket
    from spotcron.local.metadata import LocalMetadataServer
    from spotcron.local.signer import LocalSigner

    files, size = (100, 16 << 20) if quick else (2000, 1 << 30)
    section = Section("uploads", "Uploads: job exit to manifest, runner memory",
                      baseline="the sequential runner it replaced (bench/baseline/runner_sequential.sh), same servers")
    receiver = ThreadingHTTPServer(("127.0.0.1", 0), _Done)
    threading.Thread(target=receiver.serve_forever, daemon=True).start()
    job_done = f"http://127.0.0.1:{receiver.server_address[1]}/job_done"
    try:
        with tempfile.TemporaryDirectory(prefix="spotcron-upload-bench-") as scratch, \
                LocalMetadataServer(LocalSigner()) as metadata, LocalBucket(None, BUCKET) as bucket:

            def token(attributes) -> str:  # the broker's rules for the VM's run, for either descriptor format
                raw = attributes["spotcron-run"]
                d = json.loads(raw) if raw.startswith("{") else vars(RunDescriptor.from_metadata(raw))
                return bucket.downscoped_token(boundary_rules(BUCKET, d["job"], d["run_id"], 1))

            metadata.access_tokens = token
            servers = (metadata, bucket, job_done)
            tmp = Path(scratch)
            rows = {}
            for label, command in ((f"{files:,} files of 4 KB", SMALL.format(n=files)),
                                   (f"one {size >> 20:,} MiB file", LARGE.format(n=size))):
                failures: list[str] = []
                rows[label] = [measure(runner, command, baseline=runner == BASELINE, tmp=tmp, servers=servers,
                                       failures=failures) for runner in (RUNNER, BASELINE)]
                section.notes += [f"{label}: {line}" for line in failures]
            for label, ((new_s, new_mb), (old_s, old_mb)) in rows.items():
                section.add(f"{label}: exit to manifest", new_s, old_s, "s")
                section.add(f"{label}: runner peak RSS (MB)", new_mb, old_mb, "count")
    finally:
        receiver.shutdown()
        receiver.server_close()
    section.notes.append("goals: 2,000 small files stored within 20 s; the 1 GiB file with under 64 MB of runner RSS")
    return section
