"""A crashed stack's VM records: the next stack ends what they name, and only that."""

from __future__ import annotations

import os
import signal
import subprocess
from pathlib import Path

from spotcron.engine.clock import SystemClock
from spotcron.local import leftovers
from spotcron.local.compute import LocalCompute
from spotcron.local.containment import PROCESS_GROUP, Containment


def compute(state: Path) -> LocalCompute:
    return LocalCompute(None, "http://127.0.0.1:1/", state, SystemClock(), base_env={}, cwd=state,
                        containment=Containment(PROCESS_GROUP, (), "process group only"))


def test_a_recorded_vm_is_ended_and_a_reused_pid_is_left_alone(tmp_path):
    state = tmp_path / "state"
    orphan = subprocess.Popen(["sleep", "300"], start_new_session=True)  # stands for a crashed stack's runner
    stranger = subprocess.Popen(["sleep", "300"], start_new_session=True)  # got a recorded runner's pid later
    try:
        leftovers.write(state / "vms" / "vm-a", leftovers.VmRecord(
            "vm-a", "local-zone1-a", None, orphan.pid, leftovers.process_started(orphan.pid)))
        leftovers.write(state / "vms" / "vm-b", leftovers.VmRecord("vm-b", "local-zone1-a", None, stranger.pid, "1"))
        leftovers.write(state / "vms" / "vm-c", leftovers.VmRecord("vm-c", "local-zone1-b"))  # killed before its start
        (state / "vms" / "vm-d").mkdir()
        (state / "vms" / "vm-d" / "vm.json").write_text("{not json")  # cut off: ended by name
        ended = compute(state).end_leftovers()
        assert sorted(ended) == ["vm-a", "vm-b", "vm-c", "vm-d"]
        assert orphan.wait(timeout=30) == -signal.SIGKILL
        assert stranger.poll() is None, "a process that only reused a recorded pid was killed"
        assert list((state / "vms").iterdir()) == []
    finally:
        for process in (orphan, stranger):
            if process.poll() is None:
                os.kill(process.pid, signal.SIGKILL)
                process.wait()


def test_nothing_recorded_nothing_ended(tmp_path):
    assert compute(tmp_path / "state").end_leftovers() == []


def test_a_record_names_no_program_to_run_but_the_container_runtime_on_path(tmp_path):
    vms = tmp_path / "vms"
    leftovers.write(vms / "vm-a", leftovers.VmRecord("elsewhere", "local-zone1-a", str(tmp_path / "evil")))
    leftovers.write(vms / "vm-b", leftovers.VmRecord("vm-b", "local-zone1-a", "/nowhere/podman"))
    records = {workdir.name: record for workdir, record in leftovers.read_all(vms)}
    assert records["vm-a"].name == "vm-a" and records["vm-a"].runtime is None
    assert records["vm-b"].runtime is None
