"""The real vm_images/runner/runner.sh, end to end, against the local metadata server, the
storage emulator and a job_done receiver that verifies identity tokens."""

from __future__ import annotations

import hashlib
import io
import json
import os
import signal
import sys
import tarfile
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from spotcron.testing.waiting import wait_until
from tests.runner.harness import JOB, FaultProxy, RunnerHarness, live_group_members, needs_runner_tools

PREFIX = "runs/hello/20260101-1000/"
ATTEMPT1 = PREFIX + "attempt-1/"

pytestmark = [pytest.mark.slow, needs_runner_tools]


def _iso(value: str) -> datetime:
    return datetime.fromisoformat(value.replace("Z", "+00:00"))


def _alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    return state != "Z"


def _assert_tidy(harness: RunnerHarness, result) -> None:
    """Nothing the runner started (watcher, curl, the job, the job's children) outlives it."""
    assert live_group_members(result.pgid) == []
    for name in ("pid.txt", "child.txt"):
        pid_file = harness.workdir / "results" / name
        if pid_file.exists():
            assert not _alive(int(pid_file.read_text())), name


def _tidy(harness: RunnerHarness, result) -> bool:
    try:
        _assert_tidy(harness, result)
    except AssertionError:
        return False
    return True


def _checkpoint(harness: RunnerHarness) -> dict[str, bytes]:
    """The files in the stored checkpoint archive, by path; empty when there is none."""
    data = harness.bucket.read(PREFIX + "checkpoint/checkpoint.tar")
    if data is None:
        return {}
    with tarfile.open(fileobj=io.BytesIO(data)) as archive:
        return {m.name.removeprefix("./"): archive.extractfile(m).read() for m in archive.getmembers() if m.isfile()}


def _manifest(harness: RunnerHarness, prefix: str = ATTEMPT1) -> dict:
    data = harness.bucket.read(prefix + "manifest.json")
    assert data is not None, f"no manifest under {prefix}"
    return json.loads(data)


# --- the happy paths ----------------------------------------------------------------------------


def test_local_command_uploads_results_logs_and_manifest_then_calls_back(harness):
    result = harness.run(harness.descriptor())

    assert result.rc == 0, result.stderr
    objects = harness.objects()
    assert sorted(objects) == [ATTEMPT1 + name for name in
                               ("hardware.json", "logs.txt", "manifest.json", "results/out.txt",
                                "results/sub/dir/data.json")]
    assert b"hello from job" in objects[ATTEMPT1 + "logs.txt"]
    assert json.loads(objects[ATTEMPT1 + "results/sub/dir/data.json"]) == {"answer": 42}

    manifest = _manifest(harness)
    assert (manifest["job"], manifest["run_id"], manifest["attempt"]) == ("hello", "20260101-1000", 1)
    assert (manifest["status"], manifest["exit_code"], manifest["timed_out"]) == ("exited", 0, False)
    listed = {f["name"]: f for f in manifest["files"]}
    assert sorted(listed) == ["logs.txt", "results/out.txt", "results/sub/dir/data.json"]
    for name, entry in listed.items():
        data = objects[ATTEMPT1 + name]
        assert entry["size"] == len(data)
        assert entry["sha256"] == hashlib.sha256(data).hexdigest()
    assert _iso(manifest["started_at"]) <= _iso(manifest["finished_at"]) <= _iso(manifest["uploaded_at"])

    [call] = harness.receiver.calls
    assert call.status == 200 and call.error is None
    assert call.body == {**call.body, "job": "hello", "run_id": "20260101-1000", "attempt": 1,
                         "status": "exited", "exit_code": 0, "timed_out": False, "uploaded": True}
    assert set(call.body) == {"job", "run_id", "attempt", "status", "exit_code", "timed_out", "uploaded",
                              "started_at", "finished_at", "problem", "secret_versions"}
    assert call.body["problem"] is None
    assert _iso(call.body["started_at"]) <= _iso(call.body["finished_at"])
    engine = call.claims["google"]["compute_engine"]
    assert engine["instance_name"] == harness.vm_name
    assert engine["zone"] == "us-central1-a"
    assert call.claims["email"] == harness.metadata.service_account
    _assert_tidy(harness, result)


def test_fake_docker_gets_mounts_env_entrypoint_and_carries_the_exit_code(harness):
    descriptor = harness.descriptor(args=["fail", "7"], env={"GREETING": "hi"}, checkpoint_path="/checkpoint")
    result = harness.run(descriptor, docker=harness.fake_docker)

    assert result.rc == 0, result.stderr
    [run] = [argv for argv in harness.docker_calls() if argv[0] == "run"]
    work = harness.workdir
    assert ["-v", f"{work}/results:/results"] == run[run.index("-v"):run.index("-v") + 2]
    assert f"{work}/checkpoint:/checkpoint" in run
    assert "GREETING=hi" in run and "SPOTCRON_RESULTS_DIR=/results" in run
    assert run[run.index("--name") + 1] == "spotcron-hello-20260101-1000-a1"
    entry = run.index("--entrypoint")
    assert run[entry + 1:] == [sys.executable, "example/job:1", str(JOB), "fail", "7"]

    [call] = harness.receiver.accepted
    assert (call.body["status"], call.body["exit_code"], call.body["uploaded"]) == ("exited", 7, True)
    assert harness.bucket.read(ATTEMPT1 + "results/partial.txt") == b"half done\n"
    assert _manifest(harness)["exit_code"] == 7
    _assert_tidy(harness, result)


def test_the_work_dir_is_remounted_exec_before_the_job_sees_it(harness):
    """COS mounts /var noexec (https://cloud.google.com/container-optimized-os/docs/concepts/disks-and-filesystem);
    the results and checkpoint directories reach the container from the work dir, so it is bound
    onto itself and remounted exec, as Google's steps do for /var/lib/nvidia."""
    descriptor = harness.descriptor(checkpoint_path="/checkpoint")
    result = harness.run(descriptor, docker=harness.fake_docker)

    assert result.rc == 0, result.stderr
    work = str(harness.workdir)
    assert harness.mount_calls() == [f"--bind {work} {work}", f"-o remount,exec {work}"]
    [run] = [argv for argv in harness.docker_calls() if argv[0] == "run"]
    assert f"{work}/checkpoint:/checkpoint" in run


def test_a_failed_remount_is_said_and_the_job_still_runs(harness, tmp_path):
    failing = tmp_path / "mount-fails"
    failing.write_text("#!/bin/sh\nexit 32\n")
    failing.chmod(0o755)
    harness.extra_env["SPOTCRON_MOUNT"] = str(failing)
    result = harness.run(harness.descriptor())

    assert result.rc == 0, result.stderr
    assert "could not remount" in result.stderr and "cannot execute files" in result.stderr
    [call] = harness.receiver.accepted
    assert call.body["status"] == "exited"


def test_image_default_command_is_kept_when_the_descriptor_has_none(harness):
    harness.extra_env["FAKE_DOCKER_IMAGES"] = "example/job:1"
    descriptor = harness.descriptor(command=None, args=[sys.executable, str(JOB), "ok"])
    result = harness.run(descriptor, docker=harness.fake_docker)

    assert result.rc == 0, result.stderr
    calls = harness.docker_calls()
    assert not [argv for argv in calls if argv[0] == "pull"], "an image already present is not pulled"
    [run] = [argv for argv in calls if argv[0] == "run"]
    assert "--entrypoint" not in run
    assert run[run.index("example/job:1") + 1:] == [sys.executable, str(JOB), "ok"]
    assert harness.receiver.accepted[0].body["exit_code"] == 0


# --- failures of the job ------------------------------------------------------------------------


def test_nonzero_exit_still_uploads_logs_results_and_a_manifest(harness):
    result = harness.run(harness.descriptor(local_command=[sys.executable, str(JOB), "fail", "3"]))

    assert result.rc == 0, result.stderr
    [call] = harness.receiver.accepted
    assert (call.body["status"], call.body["exit_code"], call.body["uploaded"]) == ("exited", 3, True)
    assert b"something went wrong" in harness.bucket.read(ATTEMPT1 + "logs.txt")
    assert harness.bucket.read(ATTEMPT1 + "results/partial.txt") == b"half done\n"
    manifest = _manifest(harness)
    assert (manifest["exit_code"], manifest["status"]) == (3, "exited")


def test_the_timeout_counts_from_the_job_start(harness):
    descriptor = harness.descriptor(deadline=datetime.now(UTC) + timedelta(seconds=60), timeout_s=1,
                                    local_command=[sys.executable, str(JOB), "sleep", "60"])
    result = harness.run(descriptor)

    assert result.rc == 0, result.stderr
    assert result.seconds < 15
    [call] = harness.receiver.accepted
    assert call.body["timed_out"] is True
    assert call.body["status"] == "exited"
    assert call.body["exit_code"] not in (0, None)
    assert (_iso(call.body["finished_at"]) - _iso(call.body["started_at"])).total_seconds() >= 1
    assert b"killed: its timeout of 1s passed" in harness.bucket.read(ATTEMPT1 + "logs.txt")
    assert _manifest(harness)["timed_out"] is True
    _assert_tidy(harness, result)


def test_the_deadline_wins_when_boot_ate_into_the_vm_lifetime(harness):
    deadline = datetime.now(UTC) + timedelta(seconds=1.5)
    descriptor = harness.descriptor(deadline=deadline, timeout_s=60,
                                    local_command=[sys.executable, str(JOB), "sleep", "60"])
    result = harness.run(descriptor)

    assert result.rc == 0, result.stderr
    assert result.seconds < 15
    [call] = harness.receiver.accepted
    assert call.body["timed_out"] is True
    assert _iso(call.body["finished_at"]) >= deadline
    assert b"killed: the deadline" in harness.bucket.read(ATTEMPT1 + "logs.txt")
    _assert_tidy(harness, result)


def test_stopping_the_job_reaches_the_processes_it_started(harness):
    descriptor = harness.descriptor(deadline=datetime.now(UTC) + timedelta(seconds=1), timeout_s=1,
                                    local_command=[sys.executable, str(JOB), "spawn", "60"])
    result = harness.run(descriptor)

    assert result.rc == 0, result.stderr
    assert harness.receiver.accepted[0].body["timed_out"] is True
    assert (harness.workdir / "results" / "child.txt").exists()
    _assert_tidy(harness, result)


def test_killing_the_runners_process_group_ends_the_job_too(harness):
    """What local mode does when it deletes a "VM": SIGKILL to the runner's group."""
    started = time.monotonic()
    proc = harness.start(harness.descriptor(local_command=[sys.executable, str(JOB), "spawn", "60"]))
    harness.wait_for(lambda: (harness.workdir / "results" / "started").exists(), what="the job to start")
    os.killpg(proc.pid, signal.SIGKILL)
    result = harness.wait(proc, started)

    assert result.rc == -signal.SIGKILL
    # The kernel ends the group's members after the leader's exit status is already readable.
    wait_until(lambda: _tidy(harness, result), "the killed group's processes to end")


# --- failures around the job ---------------------------------------------------------------------


def test_upload_failures_that_recover_are_retried(harness):
    proxy = FaultProxy(harness.bucket.url, fail_first=3)
    proxy.start()
    try:
        harness.storage_url = proxy.base_url
        result = harness.run(harness.descriptor())
    finally:
        proxy.stop()

    assert result.rc == 0, result.stderr
    assert len(proxy.failed) == 3
    [call] = harness.receiver.accepted
    assert call.body["uploaded"] is True
    assert {f["name"] for f in _manifest(harness)["files"]} == {"logs.txt", "results/out.txt",
                                                                 "results/sub/dir/data.json"}


def test_upload_failures_that_persist_leave_no_manifest(harness):
    proxy = FaultProxy(harness.bucket.url, fail_first=-1)  # every upload fails
    proxy.start()
    try:
        harness.storage_url = proxy.base_url
        result = harness.run(harness.descriptor())
    finally:
        proxy.stop()

    assert result.rc == 0, result.stderr
    assert harness.bucket.read(ATTEMPT1 + "manifest.json") is None
    [call] = harness.receiver.accepted
    assert (call.body["status"], call.body["exit_code"], call.body["uploaded"]) == ("exited", 0, False)
    assert "giving up on _media_once" in result.stderr


def test_callback_failures_that_recover_are_retried_with_fresh_tokens(harness):
    harness.receiver.fail_first = 2
    result = harness.run(harness.descriptor())

    assert result.rc == 0, result.stderr
    calls = harness.receiver.calls
    assert [c.status for c in calls] == [503, 503, 200]
    assert all(c.error is None for c in calls), [c.error for c in calls]
    assert len({c.token for c in calls}) == 3
    assert calls[-1].body == calls[0].body


def test_callback_that_never_succeeds_makes_the_runner_exit_1(harness):
    harness.receiver.fail_first = 100
    result = harness.run(harness.descriptor())

    assert result.rc == 1
    assert len(harness.receiver.calls) == 4  # the first try and 3 retries
    assert "could not report to" in result.stderr
    _assert_tidy(harness, result)


# --- preemption and checkpoints ----------------------------------------------------------------


def _checkpointing(harness: RunnerHarness, **overrides):
    return harness.descriptor(checkpoint_path="/checkpoint",
                              local_command=[sys.executable, str(JOB), "checkpoint"], **overrides)


def _preempt_when_synced(harness: RunnerHarness, preempt):
    """Start a checkpointing job, wait for a periodic sync to reach the bucket, then preempt."""
    started = time.monotonic()
    proc = harness.start(_checkpointing(harness))
    harness.wait_for(lambda: (harness.workdir / "results" / "started").exists(), what="the job to start")
    harness.wait_for(lambda: "state/progress.txt" in _checkpoint(harness), what="a periodic checkpoint sync")
    preempt(proc)
    return harness.wait(proc, started)


@pytest.mark.parametrize("how", ["metadata", "sigterm", "sigterm-to-group"])
def test_preemption_flushes_checkpoint_and_partial_logs_and_reports_preempted(harness, how):
    def preempt(proc):
        if how == "metadata":
            harness.metadata.set_preempted(harness.vm_name)
        elif how == "sigterm":
            os.kill(proc.pid, signal.SIGTERM)  # systemd's KillMode=mixed on a VM
        else:
            os.killpg(proc.pid, signal.SIGTERM)  # what a local supervisor may do

    result = _preempt_when_synced(harness, preempt)

    assert result.rc == 0, result.stderr
    # Every step of the shutdown fit its budget: nothing given up, everything stored, then reported.
    shutdown = result.stderr.split("stopping the job: ", 1)[1]
    assert "giving up on" not in shutdown and "(exit code null, uploaded true)" in shutdown, result.stderr
    [call] = harness.receiver.accepted
    assert (call.body["status"], call.body["exit_code"]) == ("preempted", None)
    assert harness.bucket.read(ATTEMPT1 + "manifest.json") is None
    assert b"got SIGTERM" in harness.bucket.read(ATTEMPT1 + "logs.txt")
    stored = _checkpoint(harness)
    assert stored["final.txt"].startswith(b"flushed at step-")
    assert stored["state/progress.txt"] == (harness.workdir / "checkpoint" / "state" / "progress.txt").read_bytes()
    _assert_tidy(harness, result)


def test_preemption_before_the_job_starts_reports_preempted_without_running_it(harness):
    started = time.monotonic()
    result = harness.wait(harness.start(harness.descriptor(), preempted=True), started)

    assert result.rc == 0, result.stderr
    [call] = harness.receiver.accepted
    assert (call.body["status"], call.body["exit_code"], call.body["started_at"]) == ("preempted", None, None)
    assert not (harness.workdir / "results" / "out.txt").exists()
    assert b"stopped before the job started" in harness.bucket.read(ATTEMPT1 + "logs.txt")
    assert harness.bucket.read(ATTEMPT1 + "manifest.json") is None


def test_preemption_during_the_upload_leaves_no_manifest(harness):
    # Only the final results uploads: a live logs upload may come while the job still runs.
    proxy = FaultProxy(harness.bucket.url, delay=0.5,
                       match=lambda method, path: path.startswith("/upload/") and "%2Fresults%2F" in path)
    proxy.start()
    try:
        harness.storage_url = proxy.base_url
        started = time.monotonic()
        proc = harness.start(harness.descriptor())
        assert proxy.seen.wait(15), "no upload started"
        os.kill(proc.pid, signal.SIGTERM)
        result = harness.wait(proc, started)
    finally:
        proxy.stop()

    assert result.rc == 0, result.stderr
    [call] = harness.receiver.accepted
    assert (call.body["status"], call.body["exit_code"]) == ("preempted", 0)  # the job had finished
    assert harness.bucket.read(ATTEMPT1 + "manifest.json") is None
    assert harness.bucket.read(ATTEMPT1 + "logs.txt") is not None


def test_checkpoint_from_a_preempted_attempt_is_restored_on_attempt_2(harness):
    first = _preempt_when_synced(harness, lambda proc: harness.metadata.set_preempted(harness.vm_name))
    assert first.rc == 0, first.stderr
    stored = _checkpoint(harness)["state/progress.txt"]

    harness.vm_name = "sc-hello-20260101-1000-a2"
    result = harness.run(_checkpointing(harness, attempt=2))

    assert result.rc == 0, result.stderr
    assert harness.bucket.read(PREFIX + "attempt-2/results/restored.txt") == stored
    assert b"resumed from " + stored in harness.bucket.read(PREFIX + "attempt-2/logs.txt")
    call = harness.receiver.accepted[-1]
    assert (call.body["attempt"], call.body["status"], call.body["exit_code"]) == (2, "exited", 0)
    assert call.claims["google"]["compute_engine"]["instance_name"] == "sc-hello-20260101-1000-a2"
    assert _manifest(harness, PREFIX + "attempt-2/")["exit_code"] == 0
    # attempt 1's partial outputs stay in their own folder, without a manifest
    assert harness.bucket.read(ATTEMPT1 + "manifest.json") is None


# --- data, not code ----------------------------------------------------------------------------

NASTY = [
    "$(touch CANARY)", "`touch CANARY`", "; touch CANARY", "a'b\"c", "two  spaces", "line\nbreak",
    "tab\there", "back\\slash\\n", "*", "?", "~", "$HOME", "%s%d", "-e", "--rm", "é ☃ 😀", "\x1b[31mred",
    "", "  lead and trail  ", "{\"json\": [1, 2]}", "a=b=c",
]


@pytest.mark.parametrize("mode", ["none", "docker"])
def test_shell_metacharacters_in_env_and_args_arrive_verbatim(harness, mode):
    env = {f"NASTY_{i}": value for i, value in enumerate(NASTY)}
    argv = [sys.executable, str(JOB), "echo", *NASTY]
    if mode == "none":
        descriptor = harness.descriptor(env=env, local_command=argv)
        docker = "none"
    else:
        descriptor = harness.descriptor(env=env, command=argv[:2], args=argv[2:])
        docker = harness.fake_docker
    result = harness.run(descriptor, docker=docker)

    assert result.rc == 0, result.stderr
    seen = json.loads(harness.bucket.read(ATTEMPT1 + "results/seen.json"))
    assert seen["argv"] == NASTY
    for key, value in env.items():
        assert seen["env"][key] == value, key
    assert seen["env"]["SPOTCRON_JOB"] == "hello"
    assert not list(harness.tmp.rglob("CANARY"))
    assert not Path("CANARY").exists()


# --- GPU and the descriptor ---------------------------------------------------------------------


def test_gpu_installs_the_driver_and_passes_devices_and_libraries(harness, tmp_path):
    tool = tmp_path / "cos-extensions"
    tool.write_text(f'#!/bin/sh\necho "$@" >> {tmp_path}/cos-extensions.log\n')
    tool.chmod(0o755)
    devices = tmp_path / "dev"
    devices.mkdir()
    for name in ("nvidia0", "nvidiactl", "nvidia-uvm", "null"):
        (devices / name).write_text("")
    (devices / "nvidia-caps").mkdir()
    nvidia = tmp_path / "nvidia"
    harness.extra_env.update(SPOTCRON_COS_EXTENSIONS=str(tool), SPOTCRON_DEV_DIR=str(devices),
                             SPOTCRON_NVIDIA_DIR=str(nvidia))
    descriptor = harness.descriptor(gpu={"type": "nvidia-tesla-t4", "count": 1})
    result = harness.run(descriptor, docker=harness.fake_docker)

    assert result.rc == 0, result.stderr
    assert (tmp_path / "cos-extensions.log").read_text() == "install gpu\n"
    [run] = [argv for argv in harness.docker_calls() if argv[0] == "run"]
    pairs = {(run[i], run[i + 1]) for i in range(len(run) - 1)}
    for name in ("nvidia0", "nvidiactl", "nvidia-uvm"):
        assert ("--device", f"{devices}/{name}:/dev/{name}") in pairs
    assert not any(value.startswith(f"{devices}/nvidia-caps") for value in run)
    assert ("-v", f"{nvidia}/lib64:/usr/local/nvidia/lib64") in pairs
    assert ("-v", f"{nvidia}/bin:/usr/local/nvidia/bin") in pairs


def test_a_failed_gpu_driver_install_is_reported_without_running_the_job(harness, tmp_path):
    tool = tmp_path / "cos-extensions"
    tool.write_text("#!/bin/sh\necho 'no driver for this kernel' >&2\nexit 4\n")
    tool.chmod(0o755)
    harness.extra_env["SPOTCRON_COS_EXTENSIONS"] = str(tool)
    descriptor = harness.descriptor(gpu={"type": "nvidia-tesla-t4", "count": 1})
    result = harness.run(descriptor, docker=harness.fake_docker)

    assert result.rc == 0, result.stderr
    assert not [argv for argv in harness.docker_calls() if argv[0] == "run"]
    [call] = harness.receiver.accepted
    assert (call.body["status"], call.body["exit_code"], call.body["started_at"]) == ("exited", None, None)
    logs = harness.bucket.read(ATTEMPT1 + "logs.txt")
    assert b"GPU driver installation failed" in logs and b"no driver for this kernel" in logs
    assert harness.bucket.read(ATTEMPT1 + "manifest.json") is None


def test_missing_descriptor_exits_2_without_calling_back(harness):
    result = harness.wait(harness.start_with({}), time.monotonic())

    assert result.rc == 2
    assert "could not read instance attribute spotcron-run" in result.stderr
    assert harness.receiver.calls == []
    _assert_tidy(harness, result)


# The engine validates every field (spotcron.core.descriptor); the runner checks only the version.
@pytest.mark.parametrize(("change", "message"), [
    ({"version": "1"}, "descriptor version '1' is not supported; this runner reads version 2"),
    ({"deadline": "not a time"}, "descriptor: deadline 'not a time' is not a time that date(1) reads"),
])
def test_bad_descriptor_exits_2_saying_what_is_wrong(harness, change, message):
    lines = dict(line.split("=", 1) for line in harness.descriptor().to_metadata().splitlines())
    raw = "".join(f"{key}={value}\n" for key, value in {**lines, **change}.items())
    result = harness.wait(harness.start_with({"spotcron-run": raw}), time.monotonic())

    assert result.rc == 2
    assert message in result.stderr
    assert harness.receiver.calls == []


def test_descriptor_that_is_not_flat_exits_2(harness):
    result = harness.wait(harness.start_with({"spotcron-run": '{"job": "x", '}), time.monotonic())

    assert result.rc == 2
    assert "descriptor version '' is not supported" in result.stderr
