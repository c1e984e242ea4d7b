"""Finding a local container runtime, and saying why there is none: a docker client whose daemon
is not running is told apart from a missing image. `validate` warns about a job that local mode
can't run (the runner's side is in tests/runner/test_local_run.py)."""

from __future__ import annotations

from pathlib import Path

import pytest
from click.testing import CliRunner

from spotcron.cli import cli
from spotcron.local.containers import find_runtime

NO_DAEMON = ("Cannot connect to the Docker daemon at unix:///var/run/docker.sock. "
             "Is the docker daemon running?")


def tool(folder: Path, name: str, stderr: str = "", code: int = 1) -> None:
    """A `docker`/`podman` on PATH that answers `image inspect` with `code` and `stderr`."""
    folder.mkdir(exist_ok=True)
    script = folder / name
    script.write_text(f"#!/bin/sh\necho '{stderr}' >&2\nexit {code}\n")
    script.chmod(0o755)


def test_a_client_without_a_daemon_is_told_apart_from_a_missing_image(tmp_path):
    tool(tmp_path, "docker", NO_DAEMON)
    tool(tmp_path, "podman", "Error: tmp/job:1: image not known")
    found = find_runtime("tmp/job:1", which=lambda name: str(tmp_path / name))

    assert found.binary is None and found.daemon_missing
    assert found.why_not == ("docker is installed but its daemon is not running (start it, e.g. `sudo systemctl "
                             "start docker`); podman has no image tmp/job:1 (build or pull it)")


def test_the_first_runtime_that_has_the_image_wins(tmp_path):
    tool(tmp_path, "docker", NO_DAEMON)
    tool(tmp_path, "podman", code=0)
    found = find_runtime("tmp/job:1", which=lambda name: str(tmp_path / name))
    assert found.binary == str(tmp_path / "podman")


def test_nothing_installed_is_said_too():
    found = find_runtime("tmp/job:1", which=lambda name: None)
    assert (found.binary, found.why_not) == (None, "docker is not installed; podman is not installed")


@pytest.fixture
def only_tools(tmp_path, monkeypatch):
    """PATH holds only the fake tools (and the shell they need)."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    monkeypatch.setenv("PATH", f"{bin_dir}:/usr/bin:/bin")
    monkeypatch.chdir(tmp_path)
    return bin_dir


def test_validate_warns_about_a_job_local_mode_cannot_run_and_still_exits_0(tmp_path, only_tools):
    tool(only_tools, "docker", NO_DAEMON)
    tool(only_tools, "podman", "Error: spotcron/bot:latest: image not known")
    jobs = tmp_path / "jobs"
    jobs.mkdir()
    (jobs / "bot.yaml").write_text('schedule: "0 * * * *"\nimage: spotcron/bot:latest\n')
    (jobs / "local-ok.yaml").write_text('schedule: "0 * * * *"\nimage: spotcron/bot:latest\n'
                                        'local:\n  command: python3 bot.py --out {results}\n')
    result = CliRunner().invoke(cli, ["validate", str(jobs)], catch_exceptions=False)

    assert result.exit_code == 0, result.output
    assert "2 jobs valid" in result.stdout
    warning = " ".join(result.stderr.split())
    assert ("warning: bot: no local: block, and docker is installed but its daemon is not running (start it, "
            "e.g. `sudo systemctl start docker`); podman has no image spotcron/bot:latest (build or pull it); `spotcron up` and `spotcron run` can't "
            "run it on this machine. Add local: {command: ...} to its job file (see docs/jobs.md) or make the "
            "image available.") in warning
    assert "local-ok: no local:" not in warning  # (its network is warned about: docs/jobs.md)


def test_a_stopped_docker_daemon_is_said_once_not_per_run(tmp_path):
    from spotcron.engine.clock import SystemClock
    from spotcron.local.compute import LocalCompute
    from spotcron.local.containers import Lookup
    from spotcron.local.containment import PROCESS_GROUP, Containment

    told: list[str] = []
    why = "docker is installed but its daemon is not running (start it, e.g. `sudo systemctl start docker`)"
    vms = LocalCompute(None, "http://127.0.0.1:1/", tmp_path, SystemClock(), base_env={}, cwd=tmp_path,
                       containment=Containment(PROCESS_GROUP, (), "process group only"),
                       runtime_for=lambda image: Lookup(None, f"{why}; podman has no image {image} (build or pull it)",
                                                        (why,)),
                       notify=told.append)
    for image in ("bot:1", "bot:1", "bench:2"):
        assert vms.lookup(image, "job").binary is None
    assert told == [f"{why}: job has no local command to run instead of its image, so its runs fail until a "
                    "container runtime runs it"]


def test_a_stopped_docker_daemon_is_not_said_for_a_job_that_runs_its_local_command(tmp_path):
    """Before: every `spotcron run` of a job with a local command printed the stopped daemon to
    stderr, though the run did what its file says (its local command) and needed no runtime."""
    from spotcron.engine.clock import SystemClock
    from spotcron.local.compute import LocalCompute
    from spotcron.local.containers import Lookup
    from spotcron.local.containment import PROCESS_GROUP, Containment

    told: list[str] = []
    why = "docker is installed but its daemon is not running (start it, e.g. `sudo systemctl start docker`)"
    vms = LocalCompute(None, "http://127.0.0.1:1/", tmp_path, SystemClock(), base_env={}, cwd=tmp_path,
                       containment=Containment(PROCESS_GROUP, (), "process group only"),
                       runtime_for=lambda image: Lookup(None, f"{why}; podman has no image {image}", (why,)),
                       notify=told.append)
    assert vms.lookup("bot:1", "bot", fallback=True).binary is None
    assert vms.lookup("bot:1", "bot", fallback=True).binary is None
    assert told == []
    vms.lookup("bot:1", "other")  # the same image for a job with no local command: that one is told
    assert len(told) == 1 and told[0].startswith(f"{why}: other has no local command")


def test_a_local_vm_ships_new_output_every_second_unless_told_otherwise(tmp_path):
    from spotcron.engine.clock import SystemClock
    from spotcron.local.compute import LocalCompute
    from spotcron.local.containers import Lookup
    from spotcron.local.containment import PROCESS_GROUP, Containment

    class Metadata:
        def url_for(self, name):
            return f"http://127.0.0.1:1/{name}"

    def env(base):
        vms = LocalCompute(Metadata(), "http://127.0.0.1:2/", tmp_path, SystemClock(), base_env=base, cwd=tmp_path,
                           containment=Containment(PROCESS_GROUP, (), "process group only"))
        return vms.runner_env("sc-bot-a1", Lookup(None, "no container runtime"), tmp_path / "sc-bot-a1")

    assert env({})["SPOTCRON_LOG_INTERVAL"] == "1"  # `run --follow` sees each line within a second
    assert env({"SPOTCRON_LOG_INTERVAL": "5"})["SPOTCRON_LOG_INTERVAL"] == "5"
    assert env({})["SPOTCRON_DOCKER"] == "none" and env({})["SPOTCRON_CONTAINER_NAME"] == "sc-bot-a1"


def test_local_vms_alive_at_once_share_the_hosts_cores_unless_the_user_says_otherwise(tmp_path, monkeypatch):
    """Before: each job's thread pools took every core; six PyTorch runs at once (`make run`) ran
    26 times slower than one after another, and the report showed those times."""
    from spotcron.engine.clock import SystemClock
    from spotcron.local.compute import LocalCompute
    from spotcron.local.containers import Lookup
    from spotcron.local.containment import PROCESS_GROUP, Containment

    monkeypatch.setattr("os.cpu_count", lambda: 8)

    def env(base, sharing):
        vms = LocalCompute(None, "http://127.0.0.1:2/", tmp_path, SystemClock(), base_env=base, cwd=tmp_path,
                           containment=Containment(PROCESS_GROUP, (), "process group only"))
        vms.metadata = type("Metadata", (), {"url_for": lambda self, name: f"http://127.0.0.1:1/{name}"})()
        return vms.runner_env("sc-bot-a1", Lookup(None, "no container runtime"), tmp_path / "vm", sharing=sharing)

    assert env({}, 1)["OMP_NUM_THREADS"] == "8"  # alone: the whole host
    assert env({}, 3)["OMP_NUM_THREADS"] == "2" and env({}, 3)["OPENBLAS_NUM_THREADS"] == "2"
    assert env({}, 20)["MKL_NUM_THREADS"] == "1"
    assert env({"OMP_NUM_THREADS": "6"}, 20)["OMP_NUM_THREADS"] == "6"  # the user's word wins
