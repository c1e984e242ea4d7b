"""Local "VMs" get the host's GPUs as Compute Engine attaches them: none to a configuration
without one, `count` to a GPU configuration to itself, a wait while they are taken, and a reason
(never the CPU) on a host without enough of them. The environment local compute gives the
runner is checked here; what the runner gives the job is tests/runner/test_local_gpus.py."""

from __future__ import annotations

import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from spotcron.core.descriptor import METADATA_KEY, RunDescriptor
from spotcron.engine.clock import SystemClock
from spotcron.engine.ports import GpuRequest, InstanceRequest
from spotcron.local.compute import LocalCompute
from spotcron.local.containment import PROCESS_GROUP, Containment
from spotcron.local.gpus import GpuPool, host_gpus
from spotcron.testing.waiting import wait_until

T4 = GpuRequest("nvidia-tesla-t4", 1)


class Metadata:
    def register(self, name, zone, metadata, **kwargs) -> None:
        pass

    def unregister(self, name) -> None:
        pass

    def url_for(self, name) -> str:
        return f"http://127.0.0.1:1/{name}"


def compute(tmp_path: Path, gpus: list[str]) -> LocalCompute:
    # A runner that only keeps the environment it was given, and runs until its VM is deleted.
    runner = tmp_path / "runner.sh"
    runner.write_text('env > "$SPOTCRON_WORKDIR/../$SPOTCRON_CONTAINER_NAME.env"; exec sleep 60\n')
    return LocalCompute(Metadata(), "http://127.0.0.1:1/", tmp_path / "state", SystemClock(), base_env={},
                        cwd=tmp_path, runtime_for=lambda image: None, runner=runner, gpus=gpus, host="gpu-host",
                        containment=Containment(PROCESS_GROUP, (), "process group only"))


def request(name: str, gpu: GpuRequest | None = None) -> InstanceRequest:
    descriptor = RunDescriptor(job="bench", run_id="20260101-1000", attempt=1, image="example/job:1",
                               bucket="b", prefix="runs/bench/20260101-1000/", job_done_url="http://127.0.0.1:1/",
                               deadline=datetime.now(UTC) + timedelta(minutes=5), timeout_s=60)
    return InstanceRequest(name=name, zone="local-zone1-a", machine_type="n1-standard-8", spot=True,
                           max_run_duration_s=300, disk_gb=10, labels={}, service_account="x",
                           metadata={METADATA_KEY: descriptor.to_metadata()}, gpu=gpu)


def runner_env(local: LocalCompute, name: str) -> dict[str, str]:
    path = local.vms_dir / f"{name}.env"

    def written() -> str | None:
        text = path.read_text() if path.exists() else ""
        return text if text.endswith("\n") else None

    text = wait_until(written, f"the runner of {name} started")
    return dict(line.split("=", 1) for line in text.splitlines() if "=" in line)


@pytest.fixture
def gpu_host(tmp_path):
    local = compute(tmp_path, ["0", "1"])
    yield local
    local.close()


def test_cpu_configurations_get_no_gpu_and_gpu_ones_their_own(gpu_host):
    gpu_host.create_instance(request("cpu"))
    gpu_host.create_instance(request("one", T4))
    gpu_host.create_instance(request("two", T4))
    envs = {name: runner_env(gpu_host, name) for name in ("cpu", "one", "two")}
    assert envs["cpu"]["SPOTCRON_LOCAL_GPUS"] == ""
    assert {envs["one"]["SPOTCRON_LOCAL_GPUS"], envs["two"]["SPOTCRON_LOCAL_GPUS"]} == {"0", "1"}
    assert all(env["SPOTCRON_LOCAL_HOST"] == "gpu-host" and "SPOTCRON_GPU_PROBLEM" not in env
               for env in envs.values())


def test_a_gpu_configuration_waits_while_its_gpus_are_taken(gpu_host):
    gpu_host.create_instance(request("both", GpuRequest("nvidia-tesla-t4", 2)))
    assert runner_env(gpu_host, "both")["SPOTCRON_LOCAL_GPUS"] == "0,1"
    waiting = gpu_host.create_instance(request("next", T4))
    assert waiting.status == "RUNNING"  # exists, like a VM still booting
    # It has looked, found both GPUs held and parked; it can start only once one is given back.
    wait_until(lambda: gpu_host.gpus.waiting == 1, "the VM to wait for a GPU")
    assert not (gpu_host.vms_dir / "next.env").exists(), "started on GPUs another VM holds"
    gpu_host.delete_instance("local-zone1-a", "both")
    assert runner_env(gpu_host, "next")["SPOTCRON_LOCAL_GPUS"] == "0"


def test_a_vm_deleted_while_it_waits_never_starts(gpu_host):
    gpu_host.create_instance(request("both", GpuRequest("nvidia-tesla-t4", 2)))
    runner_env(gpu_host, "both")
    gpu_host.create_instance(request("next", T4))
    assert gpu_host.delete_instance("local-zone1-a", "next")
    gpu_host.delete_instance("local-zone1-a", "both")
    wait_until(lambda: gpu_host.gpus.waiting == 0, "the deleted VM to stop waiting")
    # Both free again (a waiter that took them as they freed gives them straight back).
    assert wait_until(lambda: gpu_host.gpus.try_take(2), "both GPUs to be free") == ("0", "1")
    assert not (gpu_host.vms_dir / "next.env").exists()


def test_a_host_without_gpus_tells_the_runner_why(tmp_path):
    local = compute(tmp_path, [])
    try:
        local.create_instance(request("t4", T4))
        env = runner_env(local, "t4")
        assert env["SPOTCRON_LOCAL_GPUS"] == ""
        assert env["SPOTCRON_GPU_PROBLEM"] == "this host has no NVIDIA GPU (nvidia-smi lists none)"
    finally:
        local.close()


def test_the_pool_says_when_a_count_can_never_be_had():
    assert GpuPool(["0"]).shortage(2) == "this host has 1 NVIDIA GPU, fewer than 2"
    assert GpuPool(["0", "1"]).shortage(2) is None


def test_host_gpus_lists_nvidia_smis_indices_and_nothing_without_it(tmp_path):
    smi = tmp_path / "nvidia-smi"
    smi.write_text("#!/bin/sh\nprintf '0\\n1\\n'\n")
    smi.chmod(0o755)
    assert host_gpus(str(smi)) == ("0", "1")
    assert host_gpus(str(tmp_path / "missing")) == ()
    broken = tmp_path / "broken"
    broken.write_text("#!/bin/sh\necho 'NVIDIA-SMI has failed' ; exit 9\n")
    broken.chmod(0o755)
    assert host_gpus(str(broken)) == ()


def test_waiting_for_gpus_never_holds_the_pool_while_asking_whether_to_give_up():
    """Local compute asks `give_up` under its own lock, and holds that lock when it calls
    `try_take`: the pool's lock must not be held across `give_up`, or the two wait on each other."""
    import threading

    pool = GpuPool(["0"])
    assert pool.try_take(1) == ("0",)
    outer = threading.Lock()

    def give_up() -> bool:
        with outer:
            return False

    taken: list = []
    waiter = threading.Thread(target=lambda: taken.append(pool.take(1, give_up, poll_s=0.001)), daemon=True)
    waiter.start()
    done = threading.Event()

    def creator() -> None:
        for _ in range(100):
            with outer:
                time.sleep(0.002)  # the waiter wakes meanwhile and asks give_up
                pool.try_take(1)
        done.set()

    threading.Thread(target=creator, daemon=True).start()
    assert done.wait(10), "local compute and a VM waiting for GPUs deadlocked"
    pool.give_back(["0"])
    waiter.join(10)
    assert taken == [("0",)]
