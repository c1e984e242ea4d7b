#!/usr/bin/env python3
"""The job the runner tests run, as a local command or through the fake docker.

    job.py ok             prints, writes results (nested too), exits 0
    job.py fail CODE      prints, writes a partial result, exits CODE
    job.py sleep SECONDS  marks itself started, then sleeps (deadline tests)
    job.py spawn SECONDS  starts a child process that sleeps too, then sleeps itself
    job.py checkpoint     restores progress from the checkpoint dir, advances it every 50 ms
                          until SIGTERM, then flushes a final checkpoint file and exits
    job.py echo ARGS...   writes its argv and environment to results/seen.json
    job.py swap SECRET SECONDS PIDFILE
                          writes 64 results (and checkpoint files), then leaves a detached
                          process that swaps each, and a directory, for a link to SECRET's
                          folder and back for SECONDS: what a hostile job does to the uploads
    job.py names          writes results whose names Cloud Storage can't take, and one it can
    job.py talk SECONDS   prints a line every 0.2 s for SECONDS (live logs)
    job.py big BYTES      writes results/big.bin of BYTES, 1 MiB at a time
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path


def results() -> Path:
    path = Path(os.environ["SPOTCRON_RESULTS_DIR"])
    path.mkdir(parents=True, exist_ok=True)
    return path


def started() -> None:
    (results() / "pid.txt").write_text(str(os.getpid()))
    (results() / "started").write_text("yes")


def main(argv: list[str]) -> int:
    mode = argv[0] if argv else "ok"
    print(f"job starting: mode={mode}", flush=True)
    if mode == "ok":
        (results() / "out.txt").write_text("ok\n")
        nested = results() / "sub" / "dir"
        nested.mkdir(parents=True, exist_ok=True)
        (nested / "data.json").write_text(json.dumps({"answer": 42}))
        print("hello from job", flush=True)
        return 0
    if mode == "fail":
        (results() / "partial.txt").write_text("half done\n")
        print("something went wrong", file=sys.stderr, flush=True)
        return int(argv[1])
    if mode == "sleep":
        started()
        time.sleep(float(argv[1]))
        return 0
    if mode == "spawn":
        child = subprocess.Popen(["sleep", argv[1]])
        (results() / "child.txt").write_text(str(child.pid))
        started()
        time.sleep(float(argv[1]))
        return 0
    if mode == "checkpoint":
        return checkpoint_loop()
    if mode == "swap":
        return swap(Path(argv[1]), float(argv[2]), Path(argv[3]))
    if mode == "names":
        for name in (b"bad\xff.txt", b"line\nfeed.txt", b"carriage\rreturn.txt", "good é.txt".encode()):
            with open(os.fsencode(results()) + b"/" + name, "wb") as handle:
                handle.write(b"data\n")
        return 0
    if mode == "talk":
        for i in range(int(float(argv[1]) / 0.2)):
            print(f"line {i}", flush=True)
            time.sleep(0.2)
        return 0
    if mode == "big":
        left = int(argv[1])
        with open(results() / "big.bin", "wb") as handle:
            while left > 0:
                chunk = min(left, 1 << 20)
                handle.write(os.urandom(256) * (chunk // 256) + os.urandom(chunk % 256))
                left -= chunk
        return 0
    if mode == "echo":
        seen = {"argv": argv[1:], "env": dict(os.environ)}
        (results() / "seen.json").write_text(json.dumps(seen))
        return 0
    print(f"unknown mode {mode!r}", file=sys.stderr)
    return 2


def swap(secret: Path, seconds: float, pidfile: Path) -> int:
    dirs = [results()]
    if os.environ.get("SPOTCRON_CHECKPOINT_DIR"):
        dirs.append(Path(os.environ["SPOTCRON_CHECKPOINT_DIR"]))
    for folder in dirs:
        for i in range(64):
            (folder / f"f{i}.txt").write_text("safe\n")
        (folder / "d").mkdir()
        (folder / "d" / secret.name).write_text("safe\n")
    if os.fork():
        return 0  # the job ends at once: its outputs are uploaded while the swapping goes on
    os.setsid()  # out of the runner's process tree and group, as a hostile job would be
    if os.fork():
        os._exit(0)
    pidfile.write_text(str(os.getpid()))
    paths = [path for folder in dirs for path in [*(folder / f"f{i}.txt" for i in range(64)), folder / "d"]]
    for path in paths:
        path.with_name(path.name + ".l").symlink_to(secret.parent if path.name == "d" else secret)
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        # Half the time every output is a link to the host file, half the time the real thing.
        for here, there in ((".l", ".r"), (".r", ".l")):
            for path in paths:
                with contextlib.suppress(OSError):
                    os.rename(path, path.with_name(path.name + there))
                    os.rename(path.with_name(path.name + here), path)
            time.sleep(0.002)
    os._exit(0)


def checkpoint_loop() -> int:
    checkpoint = Path(os.environ["SPOTCRON_CHECKPOINT_DIR"])
    progress = checkpoint / "state" / "progress.txt"
    restored = progress.read_text() if progress.exists() else ""
    (results() / "restored.txt").write_text(restored)
    step = int(restored.split("-")[1]) if restored else 0
    stop = {"flag": False}

    def on_term(signum, frame):
        stop["flag"] = True

    signal.signal(signal.SIGTERM, on_term)
    started()
    while not stop["flag"]:
        step += 1
        tmp = progress.with_suffix(".tmp")
        progress.parent.mkdir(parents=True, exist_ok=True)
        tmp.write_text(f"step-{step}")
        tmp.replace(progress)
        time.sleep(0.05)
        if restored and step > int(restored.split("-")[1]) + 5:
            print(f"resumed from {restored} and finished", flush=True)
            return 0
    (checkpoint / "final.txt").write_text(f"flushed at step-{step}")
    print(f"got SIGTERM at step {step}", flush=True)
    return 143


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
