"""Local mode and build: podman or docker builds the job's image when one works here, else the
job's local.command runs; one line says which."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path
from types import SimpleNamespace

import pytest

from spotcron.core.spec import JobSpec
from spotcron.local.image_builder import LocalImages


def _job(**fields) -> JobSpec:
    return JobSpec.model_validate({"name": "bot", "schedule": "0 * * * *", "build": "images/bot",
                                   "local": {"command": "python3 images/bot/bot.py"}, **fields})


@pytest.fixture
def root(tmp_path: Path) -> Path:
    folder = tmp_path / "images" / "bot"
    folder.mkdir(parents=True)
    # Builds from nothing: no registry is needed to build it.
    (folder / "Dockerfile").write_text("FROM scratch\nCOPY hello.txt /hello.txt\n")
    (folder / "hello.txt").write_text("hello\n")
    return tmp_path


def test_without_podman_or_docker_the_local_command_runs_and_it_says_so(root) -> None:
    said: list[str] = []
    [job] = LocalImages(root, said.append, which=lambda name: None)([_job()])
    assert job.image == "spotcron/bot"  # unbuilt: no runtime has it, so the runner runs local.command
    assert said == ["bot: no working podman or docker here to build images/bot/: runs its local.command "
                    "(python3 images/bot/bot.py)"]


def test_a_stopped_docker_daemon_counts_as_no_runtime(root) -> None:
    said: list[str] = []

    def run(command, **kwargs):
        return SimpleNamespace(returncode=1, stdout=b"", stderr=b"Cannot connect to the Docker daemon")

    LocalImages(root, said.append, candidates=("docker",), which=lambda name: f"/usr/bin/{name}", run=run)([_job()])
    assert said[0].startswith("bot: no working podman or docker here")


def test_a_failed_build_falls_back_to_the_local_command_with_the_reason(root) -> None:
    said: list[str] = []

    def run(command, **kwargs):
        failed = command[1] in ("build", "image")
        return SimpleNamespace(returncode=1 if failed else 0, stdout=b"",
                               stderr=b"STEP 1/2: FROM scratch\nError: no such file hello.txt" if failed else b"")

    [job] = LocalImages(root, said.append, candidates=("podman",), which=lambda name: f"/usr/bin/{name}",
                        run=run)([_job()])
    assert job.image == "spotcron/bot"
    assert said == ["bot: podman build of images/bot/ failed (Error: no such file hello.txt): runs its "
                    "local.command (python3 images/bot/bot.py)"]


def test_local_build_false_runs_the_command_even_where_podman_works(root) -> None:
    """The example benchmark's PyTorch images are gigabytes: `make run` on a laptop with docker
    must not build them before its first quick local run."""
    said: list[str] = []
    commands: list[list[str]] = []

    def run(command, **kwargs):
        commands.append(command)
        return SimpleNamespace(returncode=0, stdout=b"", stderr=b"")

    images = LocalImages(root, said.append, candidates=("podman",), which=lambda name: f"/usr/bin/{name}", run=run)
    local = {"command": "python3 images/bot/bot.py", "build": False}
    [job] = images([_job(local=local)])
    assert job.image == "spotcron/bot" and commands == []  # nothing built, not even a runtime asked
    assert said == ["bot: runs its local.command (local.build: false)"]
    # A matrix entry's own local block decides for the entry's image; the other entry still builds.
    [matrix] = images([_job(name="bench", local=local, matrix=[
        {"name": "big", "build": {"context": "images/bot", "args": {"SIZE": "big"}}},
        {"name": "small", "build": {"context": "images/bot", "args": {"SIZE": "small"}},
         "local": {"command": "python3 images/bot/bot.py"}}])])
    images_of = {c.variant: c.image for c in matrix.configurations()}
    assert images_of["big"] == "spotcron/bench-big"  # unbuilt (its name, no local tag): its local.command runs
    assert images_of["small"].startswith("localhost/spotcron/bench-small:ctx-")
    assert not [c for c in commands if any("bench-big" in part for part in c)]


@pytest.mark.skipif(shutil.which("podman") is None, reason="podman is not installed here")
def test_podman_builds_the_image_and_the_job_runs_in_it(root) -> None:
    said: list[str] = []
    images = LocalImages(root, said.append, candidates=("podman",))
    if images.runtime() is None:
        pytest.skip("podman is installed but does not answer `podman info` here")
    [job] = images([_job()])
    try:
        assert job.image.startswith("localhost/spotcron/bot:ctx-")
        assert said == [f"bot: runs in its container {job.image}, built with podman from images/bot/"]
        found = subprocess.run(["podman", "image", "inspect", job.image], capture_output=True)
        assert found.returncode == 0
        [again] = images([_job()])  # unchanged: found, not built again
        assert again.image == job.image and said[-1].endswith("(podman; images/bot/ unchanged)")
    finally:
        subprocess.run(["podman", "rmi", "-f", job.image], capture_output=True)
