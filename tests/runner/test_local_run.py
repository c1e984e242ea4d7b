"""Local runs through the real runner: placeholders in local.command, and what the logs say when
a job can't run because no container runtime has its image."""

from __future__ import annotations

import sys

import pytest

from tests.runner.harness import needs_runner_tools

pytestmark = needs_runner_tools


@pytest.mark.slow
def test_the_runner_says_why_the_job_could_not_run(harness):
    harness.extra_env["SPOTCRON_NO_RUNTIME"] = "docker is installed but its daemon is not running"
    result = harness.run(harness.descriptor(local_command=None))

    assert result.rc == 0, result.stderr
    logs = harness.bucket.read("runs/hello/20260101-1000/attempt-1/logs.txt").decode()
    assert ("spotcron: docker is installed but its daemon is not running, and the job has no local command to run "
            "instead: add local: {command: ...} to its job file, or make its image available") in logs
    assert harness.receiver.accepted[0].body["started_at"] is None


@pytest.mark.slow
def test_results_and_checkpoint_placeholders_in_the_local_command_name_the_runs_directories(harness):
    script = "import sys, pathlib; pathlib.Path(sys.argv[1], 'out.txt').write_text(sys.argv[2])"
    result = harness.run(harness.descriptor(checkpoint_path="/checkpoint",
                                            local_command=[sys.executable, "-c", script, "{results}",
                                                           "ckpt={checkpoint}"]))

    assert result.rc == 0, result.stderr
    stored = harness.bucket.read("runs/hello/20260101-1000/attempt-1/results/out.txt")
    assert stored == f"ckpt={harness.workdir / 'checkpoint'}".encode()


@pytest.mark.slow
def test_a_stopped_docker_daemon_is_not_in_every_local_log(harness):
    # `spotcron up` and `validate` say once that docker's daemon is down; the job's logs hold its output
    harness.extra_env["SPOTCRON_NO_RUNTIME"] = "docker is installed but its daemon is not running"
    result = harness.run(harness.descriptor(local_command=[sys.executable, "-c", "print('hello')"]))

    assert result.rc == 0, result.stderr
    logs = harness.bucket.read("runs/hello/20260101-1000/attempt-1/logs.txt").decode()
    assert logs == "hello\n"
    assert "daemon is not running: running the job's local command" in result.stderr
