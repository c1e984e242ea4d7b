"""`spotcron up` killed with SIGKILL, then started again on the same state dir."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import uuid
from pathlib import Path

import pytest

from spotcron.local.containment import detect
from spotcron.testing.waiting import wait_until

from .conftest import python_job, spotcron_processes, write_job
from .test_containment import processes_with
from .test_up_signals import MAIN, REPO, ended, read_until

pytestmark = pytest.mark.slow

# Holds a lock for as long as it runs: a second copy that finds the lock taken says so.
LOCKER = """\
import fcntl, os, sys, time
events = open(sys.argv[1], "a")
lock = open(sys.argv[2], "w")
try:
    fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
except BlockingIOError:
    events.write("TWICE attempt " + os.environ["SPOTCRON_ATTEMPT"] + "\\n"); events.flush()
    sys.exit(1)
events.write("start attempt " + os.environ["SPOTCRON_ATTEMPT"] + "\\n"); events.flush()
time.sleep(120)
"""


def up(tmp_path: Path, *args: str) -> subprocess.Popen:
    env = {**os.environ, "PYTHONUNBUFFERED": "1", "COLUMNS": "200"}
    env.pop("PUBSUB_EMULATOR_HOST", None)
    return subprocess.Popen([sys.executable, "-c", MAIN, "up", "--jobs", str(tmp_path / "jobs"),
                             "--state-dir", str(tmp_path / "state"), "--sweep-interval", "2", *args],
                            cwd=REPO, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                            stdin=subprocess.DEVNULL)


def test_a_restart_after_kill_9_ends_the_old_stacks_vms_and_never_runs_a_run_twice_at_once(tmp_path):
    """Before: the runner and its job lived on after SIGKILL; the restarted stack's sweep took the
    old VM for vanished and started the run again beside it (the job ran twice at once), and even
    a clean SIGTERM of the restarted `up` left the old stack's processes running."""
    state, events, lock = tmp_path / "state", tmp_path / "events.txt", tmp_path / "job.lock"
    mark = f"CRASH_MARK={uuid.uuid4().hex}"
    code = LOCKER.replace("sys.argv[1]", json.dumps(str(events))).replace("sys.argv[2]", json.dumps(str(lock)))
    write_job(tmp_path / "jobs", "locker", python_job(code, extra=f"env:\n  {mark.replace('=', ': ')}\n"))
    first = up(tmp_path, "--once")
    restarted = None
    try:
        wait_until(lambda: events.exists() and "start attempt 1" in events.read_text(), "the job started", timeout=90)
        first.kill()  # SIGKILL: no cleanup of any kind
        first.wait()
        old = set(spotcron_processes(state)) | set(processes_with(mark))
        assert old, "the old stack's VM is not running"  # what a crash leaves, before the restart

        restarted = up(tmp_path)
        said = read_until(restarted, "Waiting for the next tick", timeout=90)
        assert "ended 1 local VM(s) left running by a stack that did not stop" in said
        assert detect().statement in said  # how this machine contains local VMs, in words
        assert old & (set(spotcron_processes(state)) | set(processes_with(mark))) == set(), \
            "processes of the killed stack still run after the restart"

        # The restarted stack's sweeps settle the old run (a new attempt, or an end): never beside it.
        def settled() -> bool:
            text = events.read_text()
            return "attempt 2" in text or "TWICE" in text or not processes_with(mark) and _run_ended(state)

        wait_until(settled, "the restarted stack settled the old run", timeout=120)
        assert "TWICE" not in events.read_text(), events.read_text()

        restarted.send_signal(signal.SIGTERM)
        ended(restarted, timeout=60)
        assert spotcron_processes(state) == [] and processes_with(mark) == [], "a clean stop left processes"
    finally:
        for process in (first, restarted):
            if process is not None and process.poll() is None:
                process.kill()
                process.wait()
        for pid in set(spotcron_processes(state)) | set(processes_with(mark)):  # what the old code left
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)


def _run_ended(state: Path) -> bool:
    for path in (state / "bucket").rglob("run.json"):
        try:
            if json.loads(path.read_text()).get("state") not in ("scheduled", "starting", "running"):
                return True
        except (OSError, ValueError):
            continue
    return False
