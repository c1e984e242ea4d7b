"""`spotcron up` as a process in a pipe, with `spotcron run` handing runs to it.

Two jobs run at once (one succeeds, one fails) while a third job file is broken: up prints one
plain line per run start and end and the broken file's file:line, and each `spotcron run` exits
with its run's status, as it would on a stack of its own.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from .conftest import python_job, spotcron_processes, write_job
from .test_up_signals import MAIN, REPO, ended, read_until

pytestmark = pytest.mark.slow



def spotcron(tmp_path: Path, *args: str, stdout=subprocess.PIPE) -> subprocess.Popen:
    env = {**os.environ, "PYTHONUNBUFFERED": "1", "COLUMNS": "200"}
    env.pop("PUBSUB_EMULATOR_HOST", None)
    return subprocess.Popen([sys.executable, "-c", MAIN, *args, "--jobs", str(tmp_path / "jobs"),
                             "--state-dir", str(tmp_path / "state")], cwd=REPO, env=env, stdout=stdout,
                            stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)


def test_run_hands_off_to_up_and_exits_with_the_run_status(tmp_path):
    jobs = tmp_path / "jobs"
    write_job(jobs, "greeter", python_job("import time; time.sleep(1); print('hello')"))
    write_job(jobs, "crasher", python_job("import sys; print('about to fail'); sys.exit(3)"))
    write_job(jobs, "broken", 'schedule: "0 3 * *"\nimage: x\n')
    up = spotcron(tmp_path, "up")
    try:
        seen = read_until(up, "Waiting for the next tick", timeout=90)
        assert f"{jobs / 'broken.yaml'}:1: schedule:" in seen and "jobs running: crasher, greeter" in seen
        assert f"error  {jobs / 'broken.yaml'}:1: schedule:" in seen
        greeter = spotcron(tmp_path, "run", "greeter")
        crasher = spotcron(tmp_path, "run", "crasher")
        assert ended(greeter, timeout=120) == 0, greeter.stdout.read().decode()
        assert ended(crasher, timeout=120) == 1, crasher.stdout.read().decode()
        said = crasher.stdout.read().decode()
        assert "on the running `spotcron up`" in said and "failed" in said, said
        if "exit 3" not in seen:
            seen += read_until(up, "exit 3", timeout=30)
        lines = seen.splitlines()
        assert any("greeter/m" in line and " started " in line for line in lines), seen
        assert any("greeter/m" in line and " succeeded " in line and "exit 0" in line for line in lines), seen
        assert any("crasher/m" in line and " failed " in line and "exit 3" in line for line in lines), seen
        up.send_signal(2)
        assert ended(up, timeout=60) == 130  # stopped by Ctrl-C (SIGINT): 128 + 2
    finally:
        if up.poll() is None:
            up.kill()
            up.wait()
    assert not (tmp_path / "state" / "handoff.json").exists()
    assert spotcron_processes(tmp_path / "state") == []
