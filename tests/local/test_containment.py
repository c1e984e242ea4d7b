"""A local VM contains every process its job starts: deleting the VM ends them all."""

from __future__ import annotations

import os
import signal
import time
import uuid

import pytest

from spotcron.core.runs import RunState

from .conftest import spotcron_processes
from .test_local_mode import job

pytestmark = pytest.mark.slow

# Double fork and setsid, as a daemon does: the grandchild leaves the runner's process group and
# session, and tells the job it is up through a pipe before the job exits 0.
DAEMON = """\
import os, time
r, w = os.pipe()
if os.fork() == 0:
    os.setsid()
    if os.fork() == 0:
        os.write(w, b"x")
        time.sleep(600)
    os._exit(0)
os.close(w)
assert os.read(r, 1) == b"x"
print("daemon started")
"""


def processes_with(variable: str) -> list[int]:
    """Live processes whose environment holds `variable` (NAME=value): this test's own only."""
    found = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/environ", "rb") as environ, open(f"/proc/{entry}/stat") as stat:
                if variable.encode() in environ.read().split(b"\0") and stat.read().rsplit(")", 1)[1].split()[0] != "Z":
                    found.append(int(entry))
        except OSError:
            continue
    return found


def test_a_daemon_that_calls_setsid_dies_with_its_vm(make_stack, tmp_path):
    """Before: the daemon left the runner's process group, so deleting the VM (a SIGKILL to the
    group) missed it: the run succeeded and the daemon ran on after the stack stopped."""
    mark = f"DAEMON_MARK={uuid.uuid4().hex}"
    stack = make_stack()
    try:
        spec = job(tmp_path, "daemonizer", DAEMON, extra=f"env:\n  {mark.replace('=', ': ')}\n")
        [record] = stack.wait(stack.run_now(spec), timeout=120)
        assert record.state == RunState.SUCCEEDED, record.reason
        stack.stop()  # waits for every deleted VM's processes to end
        assert processes_with(mark) == [], "the job's daemon outlived its VM"
    finally:
        for pid in processes_with(mark):  # what the old code left: this test's daemon
            os.kill(pid, signal.SIGKILL)


def test_the_leftover_check_sees_a_running_job(make_stack, tmp_path):
    """Before: the runner removed every SPOTCRON_* variable from the job's environment, so the
    tests' check for processes left behind saw runners but never the jobs they started."""
    stack = make_stack()
    spec = job(tmp_path, "sleeper", "import time; time.sleep(120)")
    [run] = stack.run_now(spec)
    state = tmp_path / "state"
    deadline = time.monotonic() + 60

    def job_processes() -> list[int]:
        found = []
        for pid in spotcron_processes(state):
            try:
                with open(f"/proc/{pid}/cmdline", "rb") as cmdline:
                    if b"time.sleep(120)" in cmdline.read():
                        found.append(pid)
            except OSError:
                continue
        return found

    while not job_processes() and time.monotonic() < deadline:
        time.sleep(0.1)
    assert job_processes(), "the job's process is invisible to the leftover check"
    stack.stop()
    assert job_processes() == []
