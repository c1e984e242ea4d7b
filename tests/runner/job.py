#!/usr/bin/env python3
"""The job the runner tests run, as a local command or through the fake docker.

    job.py ok             prints, writes results (nested too), exits 0
    job.py fail CODE      prints, writes a partial result, exits CODE
    job.py sleep SECONDS  marks itself started, then sleeps (deadline tests)
    job.py spawn SECONDS  starts a child process that sleeps too, then sleeps itself
    job.py checkpoint     restores progress from the checkpoint dir, advances it every 50 ms
                          until SIGTERM, then flushes a final checkpoint file and exits
    job.py echo ARGS...   writes its argv and environment to results/seen.json
"""

from __future__ import annotations

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
    if mode == "echo":
        seen = {"argv": argv[1:], "env": dict(os.environ)}
        (results() / "seen.json").write_text(json.dumps(seen))
        return 0
    print(f"unknown mode {mode!r}", file=sys.stderr)
    return 2


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
