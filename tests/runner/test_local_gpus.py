"""Local runs see exactly the GPUs their configuration names: the environment the real runner
gives the job (local command and container), and a GPU configuration on a host without one."""

from __future__ import annotations

import json
import sys

import pytest

from tests.runner.harness import JOB, needs_runner_tools

ATTEMPT1 = "runs/hello/20260101-1000/attempt-1/"
T4 = {"type": "nvidia-tesla-t4", "count": 1}

pytestmark = [pytest.mark.slow, needs_runner_tools]


def _echo(harness, mode: str, **fields):
    argv = [sys.executable, str(JOB), "echo"]
    if mode == "none":
        return harness.descriptor(local_command=argv, **fields), "none"
    return harness.descriptor(command=argv[:2], args=argv[2:], **fields), harness.fake_docker


def _seen_env(harness) -> dict[str, str]:
    return json.loads(harness.bucket.read(ATTEMPT1 + "results/seen.json"))["env"]


def _docker_run(harness) -> list[str]:
    [run] = [argv for argv in harness.docker_calls() if argv[0] == "run"]
    return run


@pytest.mark.parametrize("mode", ["none", "docker"])
def test_a_configuration_without_a_gpu_sees_none_even_on_a_gpu_host(harness, mode):
    # The host's own setting would show every GPU; the job's env cannot bring them back either.
    harness.extra_env.update(CUDA_VISIBLE_DEVICES="0,1", SPOTCRON_LOCAL_HOST="gpu-host", SPOTCRON_LOCAL_GPUS="")
    descriptor, docker = _echo(harness, mode, env={"CUDA_VISIBLE_DEVICES": "0"})
    result = harness.run(descriptor, docker=docker)

    assert result.rc == 0, result.stderr
    assert _seen_env(harness)["CUDA_VISIBLE_DEVICES"] == ""
    if mode == "docker":
        run = _docker_run(harness)
        assert "--gpus" not in run
        pairs = {(run[i], run[i + 1]) for i in range(len(run) - 1)}
        assert ("-e", "CUDA_VISIBLE_DEVICES=") in pairs and ("-e", "NVIDIA_VISIBLE_DEVICES=void") in pairs
        # The last -e wins in docker: ours come after the job's.
        assert run.index("CUDA_VISIBLE_DEVICES=") > run.index("CUDA_VISIBLE_DEVICES=0")


@pytest.mark.parametrize("mode", ["none", "docker"])
def test_a_gpu_configuration_gets_the_host_gpus_assigned_to_it(harness, mode):
    harness.extra_env.update(CUDA_VISIBLE_DEVICES="0,1,2", SPOTCRON_LOCAL_HOST="gpu-host", SPOTCRON_LOCAL_GPUS="1,2")
    descriptor, docker = _echo(harness, mode, gpu={**T4, "count": 2})
    result = harness.run(descriptor, docker=docker)

    assert result.rc == 0, result.stderr
    if mode == "none":
        assert _seen_env(harness)["CUDA_VISIBLE_DEVICES"] == "1,2"
    else:
        run = _docker_run(harness)
        assert run[run.index("--gpus") + 1] == '"device=1,2"'  # docker's syntax for a list of devices
        assert not any(value.startswith(("CUDA_VISIBLE_DEVICES=", "NVIDIA_VISIBLE_DEVICES=")) for value in run)


@pytest.mark.parametrize("mode", ["none", "docker"])
def test_a_gpu_configuration_on_a_host_without_one_ends_with_the_reason(harness, mode):
    harness.extra_env.update(SPOTCRON_LOCAL_HOST="laptop", SPOTCRON_LOCAL_GPUS="",
                             SPOTCRON_GPU_PROBLEM="this host has no NVIDIA GPU (nvidia-smi lists none)")
    descriptor, docker = _echo(harness, mode, gpu=T4)
    result = harness.run(descriptor, docker=docker)

    assert result.rc == 0, result.stderr
    assert harness.bucket.read(ATTEMPT1 + "results/seen.json") is None  # never ran, not on the CPU either
    assert not [argv for argv in harness.docker_calls() if argv[0] == "run"]
    [call] = harness.receiver.accepted
    reason = ("the configuration asks for nvidia-tesla-t4 x1, and this host has no NVIDIA GPU (nvidia-smi lists "
              "none); not run on the CPU")
    assert (call.body["status"], call.body["exit_code"], call.body["started_at"], call.body["problem"]) == (
        "unavailable", None, None, reason)
    assert f"spotcron: {reason}" in harness.bucket.read(ATTEMPT1 + "logs.txt").decode()
