"""`spotcron up` as a process: SIGHUP reloads and keeps it running; SIGTERM stops it like Ctrl-C."""

from __future__ import annotations

import os
import selectors
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from spotcron.testing.waiting import wait_until

from .conftest import python_job, spotcron_processes, write_job

pytestmark = pytest.mark.slow

REPO = Path(__file__).resolve().parents[2]
# Ctrl-C semantics even when the test runner itself was started with SIGINT ignored.
MAIN = "import signal; signal.signal(signal.SIGINT, signal.default_int_handler); from spotcron.cli import main; main()"
JOB = python_job("import time; time.sleep(90)")


def start_up(tmp_path: Path, *args: str) -> subprocess.Popen:
    write_job(tmp_path / "jobs", "sleeper", JOB)
    env = {**os.environ, "PYTHONUNBUFFERED": "1", "COLUMNS": "200"}
    env.pop("PUBSUB_EMULATOR_HOST", None)
    return subprocess.Popen([sys.executable, "-c", MAIN, "up", "--jobs", str(tmp_path / "jobs"),
                             "--state-dir", str(tmp_path / "state"), *args],
                            cwd=REPO, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                            stdin=subprocess.DEVNULL)


def read_until(process: subprocess.Popen, text: str, timeout: float) -> str:
    seen, deadline = b"", time.monotonic() + timeout
    with selectors.DefaultSelector() as selector:
        selector.register(process.stdout, selectors.EVENT_READ)
        while text.encode() not in seen and time.monotonic() < deadline:
            if selector.select(timeout=0.2):
                chunk = os.read(process.stdout.fileno(), 65536)
                if not chunk:
                    break
                seen += chunk
    assert text.encode() in seen, f"no {text!r} within {timeout}s; output: {seen.decode(errors='replace')}"
    return seen.decode(errors="replace")


def ended(process: subprocess.Popen, timeout: float) -> int:
    try:
        return process.wait(timeout)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait()
        raise


def test_sighup_reloads_and_keeps_running(tmp_path):
    """Before: signal.pause() returned after the SIGHUP handler ran, so a reload stopped everything."""
    process = start_up(tmp_path)
    try:
        read_until(process, "Waiting for the next tick", timeout=60)
        log = tmp_path / "state" / "spotcron.log"
        loads = log.read_text().count("scheduler loaded")
        process.send_signal(signal.SIGHUP)
        wait_until(lambda: log.read_text().count("scheduler loaded") > loads or process.poll() is not None,
                   "the reload after SIGHUP")
        assert process.poll() is None, "spotcron up exited on SIGHUP"
        process.send_signal(signal.SIGINT)
        # Stopped by Ctrl-C, not finished: 130, the shell's code for SIGINT (before: 0).
        assert ended(process, timeout=60) == 128 + signal.SIGINT
        assert b"stopping: deleting local VMs" in process.stdout.read()
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()


def wait_for_a_runner(process: subprocess.Popen, state: Path) -> None:
    wait_until(lambda: spotcron_processes(state) or process.poll() is not None, "a runner to start")
    assert spotcron_processes(state), "no runner started"


def test_sigterm_while_a_vm_runs_leaves_no_runner_behind(tmp_path):
    """Before: SIGTERM ended Python at once; the runners, in sessions of their own, went on."""
    state = tmp_path / "state"
    process = start_up(tmp_path, "--once")
    try:
        wait_for_a_runner(process, state)
        process.send_signal(signal.SIGTERM)
        assert ended(process, timeout=60) == 128 + signal.SIGTERM  # interrupted: not a success
        assert spotcron_processes(state) == []
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()
        for pid in spotcron_processes(state):  # what the old code left: the runners we started
            os.killpg(os.getpgid(pid), signal.SIGKILL)


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM])
def test_a_signal_right_after_a_run_started_cancels_it_and_the_next_start_runs(tmp_path, make_stack, sig):
    """Before: the run stayed `running`, so the next `up` skipped the job ("previous run is still
    running") and later finished the interrupted run as `succeeded`, "VM vanished"."""
    state = tmp_path / "state"
    process = start_up(tmp_path, "--once")
    try:
        wait_for_a_runner(process, state)
        process.send_signal(sig)
        assert ended(process, timeout=60) == 128 + sig  # 130 for Ctrl-C under --once too (before: 1)
        assert spotcron_processes(state) == []
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()
    stack = make_stack()
    [record] = stack.deps.store.records("sleeper")
    assert record.state == "cancelled" and record.reason == f"spotcron up got {sig.name}: cancelled"
    assert stack.deps.store.live_runs() == []
    write_job(tmp_path / "jobs", "sleeper", JOB.replace("time.sleep(90)", "print(1)"))
    from spotcron.core.loader import load_jobs

    [spec] = load_jobs([tmp_path / "jobs"])
    [after] = stack.wait(stack.run_now(spec), timeout=60)
    assert after.state == "succeeded", after.reason  # not skipped for the cancelled run


def test_a_second_signal_while_stopping_exits_at_once(tmp_path):
    script = (
        "import os, signal, time\n"
        "from spotcron.cli.up import _stopped_however_it_ends\n"
        "def stop(reason):\n"
        "    print('stopping:', reason, flush=True)\n"
        "    os.kill(os.getpid(), signal.SIGINT)\n"
        "    time.sleep(60)\n"
        "with _stopped_however_it_ends(stop):\n"
        "    os.kill(os.getpid(), signal.SIGTERM)\n"
        "    time.sleep(60)\n")
    result = subprocess.run([sys.executable, "-c", script], cwd=REPO, capture_output=True, text=True, timeout=50)
    assert result.returncode == 128 + signal.SIGINT
    assert "stopping: spotcron up got SIGTERM: cancelled" in result.stdout
    assert "SIGINT again: exiting without cleaning up" in result.stderr
