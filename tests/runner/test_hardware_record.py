"""The runner measures what each run ran on and stores it as attempt-N/hardware.json: the CPU,
memory and GPUs it saw, and where (machine type and zone on Google Cloud, or the local host)."""

from __future__ import annotations

import json
import os

import pytest

from spotcron.core.hardware import parse_hardware
from tests.runner.harness import needs_runner_tools

ATTEMPT1 = "runs/hello/20260101-1000/attempt-1/"

pytestmark = [pytest.mark.slow, needs_runner_tools]


def fake_nvidia_smi(harness) -> None:
    """An nvidia-smi first on PATH that answers for the GPUs -i names and logs its arguments."""
    bin_dir = harness.tmp / "bin"
    bin_dir.mkdir(exist_ok=True)
    tool = bin_dir / "nvidia-smi"
    tool.write_text(f'#!/bin/sh\necho "$*" >> "{harness.tmp}/nvidia-smi.log"\n'
                    'echo "NVIDIA H100 80GB HBM3, 570.86.15, 81559"\n')
    tool.chmod(0o755)
    harness.extra_env["PATH"] = f"{bin_dir}:{harness.env('none')['PATH']}"


def stored(harness):
    data = harness.bucket.read(ATTEMPT1 + "hardware.json")
    assert data is not None, "no hardware.json"
    return json.loads(data), parse_hardware(data)


def test_on_a_vm_the_machine_type_and_zone_come_from_the_metadata_server(harness):
    harness.extra_env["OMP_NUM_THREADS"] = "1"  # a thread setting is not the CPU count
    result = harness.run(harness.descriptor())
    assert result.rc == 0, result.stderr
    raw, hardware = stored(harness)
    assert (hardware.local, hardware.machine_type, hardware.zone) == (False, "e2-small", "us-central1-a")
    assert hardware.cpus == len(os.sched_getaffinity(0))
    with open("/proc/meminfo") as meminfo:
        total_kib = int(meminfo.readline().split()[1])
    assert hardware.memory_mib == total_kib // 1024
    assert hardware.cpu_model and hardware.gpus == ()  # a configuration without a GPU records none
    # The thread count the job was given, and the host's load before and after the job.
    assert hardware.threads == 1 and raw["threads"] == 1
    assert hardware.load_start is not None and hardware.load_end is not None


def test_locally_the_host_and_the_gpus_assigned_to_the_run(harness):
    fake_nvidia_smi(harness)
    harness.extra_env.update(SPOTCRON_LOCAL_HOST="gpu-host", SPOTCRON_LOCAL_GPUS="1", SPOTCRON_LOCAL_WAITED_S="12.5")
    result = harness.run(harness.descriptor(gpu={"type": "nvidia-h100-80gb", "count": 1}))
    assert result.rc == 0, result.stderr
    _, hardware = stored(harness)
    assert (hardware.local, hardware.host, hardware.machine_type) == (True, "gpu-host", None)
    assert hardware.waited_s == 12.5  # its wait for its turn or its GPUs: left out of its boot and cost
    [gpu] = hardware.gpus
    assert (gpu.name, gpu.driver, gpu.memory_mib) == ("NVIDIA H100 80GB HBM3", "570.86.15", 81559)
    asked = (harness.tmp / "nvidia-smi.log").read_text()
    assert asked.startswith("-i 1 --query-gpu=name,driver_version,memory.total")  # only its own GPU


def test_a_cpu_configuration_on_a_gpu_host_records_no_gpu(harness):
    fake_nvidia_smi(harness)
    harness.extra_env.update(SPOTCRON_LOCAL_HOST="gpu-host", SPOTCRON_LOCAL_GPUS="")
    result = harness.run(harness.descriptor())
    assert result.rc == 0, result.stderr
    _, hardware = stored(harness)
    assert hardware.gpus == () and not (harness.tmp / "nvidia-smi.log").exists()


def test_a_gpu_configuration_that_got_no_host_gpu_records_none(harness):
    fake_nvidia_smi(harness)  # the host has a GPU, but none was assigned to this run: it never ran
    harness.extra_env.update(SPOTCRON_LOCAL_HOST="gpu-host", SPOTCRON_LOCAL_GPUS="",
                             SPOTCRON_GPU_PROBLEM="the host's GPUs are not nvidia-tesla-t4")
    result = harness.run(harness.descriptor(gpu={"type": "nvidia-tesla-t4", "count": 1}))
    assert result.rc == 0, result.stderr
    _, hardware = stored(harness)
    assert hardware.gpus == () and not (harness.tmp / "nvidia-smi.log").exists()
