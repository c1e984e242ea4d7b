"""A local VM contains every process its job starts: deleting the VM ends them all."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import time
import uuid

import pytest

from spotcron.core.runs import RunState
from spotcron.local.containment import PROCESS_GROUP, Containment, detect

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


@pytest.mark.parametrize("containment", ["the strongest here", "process group only"])
def test_a_daemon_that_calls_setsid_dies_with_its_vm(make_stack, tmp_path, containment):
    """Before: the daemon left the runner's process group, so deleting the VM (a SIGKILL to the
    group) missed it: the run succeeded and the daemon ran on after the stack stopped. Where no
    namespace can be made, the VM's marker in the daemon's environment still finds it."""
    mark = f"DAEMON_MARK={uuid.uuid4().hex}"
    stack = make_stack(containment=None if containment == "the strongest here"
                       else Containment(PROCESS_GROUP, (), "process group only"))
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


@pytest.mark.skipif(not hasattr(os, "geteuid") or os.geteuid() != 0 or shutil.which("setpriv") is None
                    or not os.path.exists("/usr/bin/python3"),
                    reason="needs root and setpriv (util-linux) to become an unprivileged user")
def test_an_unprivileged_user_gets_the_same_containment(tmp_path):
    """Users run `spotcron up` unprivileged: the user namespace lets them make the PID namespace,
    and killing its `unshare` ends a setsid daemon too."""
    containment = detect(is_root=False)
    if not containment.whole:
        pytest.skip(containment.statement)
    mark = f"DAEMON_MARK={uuid.uuid4().hex}"
    nobody = ["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups"]
    code = DAEMON.replace('print("daemon started")', 'print("daemon started", flush=True); time.sleep(600)')
    process = subprocess.Popen(nobody + containment.command(["/usr/bin/python3", "-c", code], runtime=None),
                               cwd="/", env={"PATH": os.defpath, mark.split("=")[0]: mark.split("=")[1]},
                               stdout=subprocess.PIPE, text=True, start_new_session=True)
    try:
        assert process.stdout.readline().strip() == "daemon started"
        assert len(processes_with(mark)) >= 3  # unshare, the job and its daemon
        os.killpg(process.pid, signal.SIGKILL)  # what deleting a VM does
        process.wait()
        deadline = time.monotonic() + 30
        while processes_with(mark) and time.monotonic() < deadline:
            time.sleep(0.05)
        assert processes_with(mark) == [], "the daemon outlived its namespace"
    finally:
        for pid in processes_with(mark):
            os.kill(pid, signal.SIGKILL)
        process.stdout.close()
