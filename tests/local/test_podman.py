"""Local mode's container path for real: the runner runs the job's image with podman.

The image is a busybox built from a local rootfs (tests/local/podman_image.py); the stack uses
the default `runtime_for`, so local compute itself finds podman and the image.
"""

from __future__ import annotations

import os
import time
from urllib.parse import urlsplit

import pytest

from spotcron.core import layout
from spotcron.core.loader import load_job_file
from spotcron.local.containers import container_runtime
from spotcron.local.stack import LocalStack

from . import podman_image
from .conftest import spotcron_processes, write_job

pytestmark = pytest.mark.slow

# Every character a shell would act on, plus a newline: the runner must pass values as argv.
TRICKY = "a;b && c | d $(e) `f` \"g\" 'h' \\i *j ~k $HOME\nl"


@pytest.fixture(scope="module")
def podman(tmp_path_factory):
    with podman_image.ready(tmp_path_factory.mktemp("podman")) as found:
        # What LocalStack's default runtime_for answers: podman, because it has the image.
        assert container_runtime(podman_image.IMAGE) is not None
        yield found


@pytest.fixture
def stack(tmp_path, podman):
    # A short stop grace keeps the timeout test quick; a long VM grace keeps a loaded machine's
    # slow podman stop from running into maxRunDuration before the runner has called back.
    environ = podman.env({**os.environ, "SPOTCRON_STOP_GRACE": "1"})
    started = LocalStack(tmp_path / "state", environ=environ, cwd=tmp_path, sweep_interval=2, grace=20).start()
    yield started
    started.stop()
    podman_image.remove_containers(podman.binary)  # what a failed test left behind
    deadline = time.monotonic() + 10
    while spotcron_processes(tmp_path / "state") and time.monotonic() < deadline:
        time.sleep(0.2)  # conmon runs podman's cleanup after the container ends
    assert spotcron_processes(tmp_path / "state") == [], "runner or podman processes left behind"


def job(tmp_path, name: str, command: str, *, timeout: str = "1m", env: str = ""):
    body = (f'schedule: "0 3 * * *"\nimage: {podman_image.IMAGE}\ntimeout: {timeout}\n'
            f"command: [sh, -c, {command!r}]\n{env}")
    return load_job_file(write_job(tmp_path / "jobs", name, body))


def wait_for_container(stack, podman, runs, job_name: str) -> None:
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        record = stack.deps.store.read(*runs[0])
        if record is not None and record.state == "running" and podman_image.containers(podman.binary, job_name):
            return
        time.sleep(0.2)
    raise AssertionError(f"no running container of {job_name} within 30 s")


def test_a_job_runs_in_its_image_and_its_results_reach_the_bucket(stack, podman, tmp_path):
    spec = job(tmp_path, "podman-hello", "echo hello > /results/out.txt; echo from-container")
    runs = stack.run_now(spec)
    [record] = stack.wait(runs, timeout=45)
    assert record.state == "succeeded", record.reason
    prefix = layout.attempt_prefix(*runs[0], 1)
    blobs = stack.deps.blobs
    assert blobs.read(prefix + "results/out.txt").data == b"hello\n"
    assert b"from-container" in blobs.read(prefix + "logs.txt").data
    assert blobs.read(prefix + "manifest.json").json()["exit_code"] == 0
    assert podman_image.containers(podman.binary, "podman-hello") == []


def test_env_values_with_shell_metacharacters_arrive_verbatim(stack, podman, tmp_path):
    spec = job(tmp_path, "podman-env", 'printf %s "$TRICKY" > /results/env.txt', env=_yaml_env(TRICKY))
    assert spec.env["TRICKY"] == TRICKY
    [record] = stack.wait(stack.run_now(spec), timeout=45)
    assert record.state == "succeeded", record.reason
    got = stack.deps.blobs.read(layout.attempt_prefix(record.job, record.run_id, 1) + "results/env.txt").data
    assert got.decode() == TRICKY


def test_a_job_past_its_timeout_is_stopped_and_its_container_removed(stack, podman, tmp_path):
    spec = job(tmp_path, "podman-slow", "echo started; sleep 300", timeout="2s")
    [record] = stack.wait(stack.run_now(spec), timeout=45)
    assert record.state == "timed_out", record.reason
    assert podman_image.containers(podman.binary, "podman-slow") == []


# podman's conmon (like docker's daemon) is outside the runner's process group, so killing the
# group is not enough: the runner names the container after the VM and deleting the VM removes it.
def test_deleting_a_vm_leaves_no_container_running(stack, podman, tmp_path):
    spec = job(tmp_path, "podman-victim", "sleep 300", timeout="5m")
    runs = stack.run_now(spec)
    wait_for_container(stack, podman, runs, "podman-victim")
    attempt = stack.deps.store.read(*runs[0]).current_attempt
    stack.compute.delete_instance(attempt.zone, attempt.vm_name)
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline and podman_image.containers(podman.binary, "podman-victim"):
        time.sleep(0.2)
    assert podman_image.containers(podman.binary, "podman-victim") == []


@pytest.mark.parametrize("opted_in", [False, True])
def test_the_container_reaches_the_metadata_server_only_when_its_job_opts_in(stack, podman, tmp_path, opted_in):
    """The local metadata server listens on loopback: the host network reaches it, the job network not."""
    address = urlsplit(stack.metadata.url_for("probe"))
    probe = (f'if printf "GET /computeMetadata/v1/ HTTP/1.0\\r\\n\\r\\n" | nc {address.hostname} {address.port} '
             f'| grep -q "HTTP/1"; then echo reached; else echo walled; fi > /results/probe.txt')
    spec = job(tmp_path, "podman-probe", probe, env="metadata_access: true\n" if opted_in else "")
    [record] = stack.wait(stack.run_now(spec), timeout=45)
    assert record.state == "succeeded", record.reason
    got = stack.deps.blobs.read(layout.attempt_prefix(record.job, record.run_id, 1) + "results/probe.txt").data
    assert got == (b"reached\n" if opted_in else b"walled\n")


def _yaml_env(value: str) -> str:
    """An env block whose value is a double-quoted YAML scalar, escaped so YAML reads `value` back."""
    escaped = value.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")
    return f'env:\n  TRICKY: "{escaped}"\n'
