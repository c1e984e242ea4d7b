"""Build contexts and what ships: a context that names a folder every archive leaves out, and the
local build, which must build exactly the archive the content tag names."""

from __future__ import annotations

import gzip
import io
import tarfile
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from spotcron.core import images
from spotcron.core.errors import ConfigError
from spotcron.core.spec import JobSpec
from spotcron.local.image_builder import LocalImages

DOCKERFILE = "FROM scratch\nCOPY . /app\n"


def _job(**fields: Any) -> JobSpec:
    return JobSpec.model_validate({"name": "bot", "schedule": "0 * * * *", **fields})


def _names(build: images.ImageBuild) -> set[str]:
    with tarfile.open(fileobj=io.BytesIO(gzip.decompress(build.tarball))) as tar:
        return set(tar.getnames())


def _state(root: Path) -> Path:
    """The local stack's state, as `spotcron up` leaves it: a token to its hand-off server."""
    state = root / ".spotcron"
    state.mkdir()
    (state / "handoff.json").write_text('{"url": "http://127.0.0.1:1", "token": "s3cret"}')
    (state / "Dockerfile").write_text(DOCKERFILE)
    return state


@pytest.mark.parametrize("context", [".spotcron", "./.spotcron", ".git", ".git/hooks", "images/__pycache__"])
def test_a_context_inside_a_folder_every_archive_leaves_out_is_refused(tmp_path: Path, context: str) -> None:
    _state(tmp_path)
    (tmp_path / ".git" / "hooks").mkdir(parents=True)
    (tmp_path / ".git" / "config").write_text("[remote]\nurl = https://user:token@example.com/r.git\n")
    (tmp_path / ".git" / "hooks" / "Dockerfile").write_text(DOCKERFILE)
    (tmp_path / "images" / "__pycache__").mkdir(parents=True)
    (tmp_path / "images" / "__pycache__" / "Dockerfile").write_text(DOCKERFILE)
    # The folder is skipped inside every context; named as the context itself it would ship whole
    # (the local stack's token, git's remote credentials) to the stack's bucket and into the image.
    with pytest.raises(ConfigError, match="left out of every build"):
        images.plan_builds([_job(build=context)], tmp_path)


def _runtime(seen: dict[str, Any]) -> Any:
    """A podman that has no image yet and records what the build's context folder holds."""
    def run(command: list[str], **kwargs: Any) -> Any:
        if command[1] == "build":
            context = Path(command[-1])
            seen["files"] = {p.relative_to(context).as_posix() for p in context.rglob("*")}
            seen["dockerfile"] = Path(command[command.index("-f") + 1]).read_text()
            seen["tag"] = command[command.index("-t") + 1]
        return SimpleNamespace(returncode=1 if command[1] == "image" else 0, stdout=b"", stderr=b"")
    return run


def test_the_local_build_gets_the_archive_not_the_folder_with_its_state(tmp_path: Path) -> None:
    (tmp_path / "Dockerfile").write_text(DOCKERFILE)
    (tmp_path / "app.py").write_text("print('hi')\n")
    _state(tmp_path)
    (tmp_path / ".git").mkdir()
    (tmp_path / ".git" / "config").write_text("[remote]\nurl = https://user:token@example.com/r.git\n")
    seen: dict[str, Any] = {}
    [job] = LocalImages(tmp_path, lambda line: None, candidates=("podman",), which=lambda n: f"/usr/bin/{n}",
                        run=_runtime(seen))([_job(build=".")])
    [planned] = images.plan_builds([_job(build=".")], tmp_path)
    # What the content tag names is what is built: the archive, without the state and git's folder.
    assert seen["files"] == _names(planned) == {"Dockerfile", "app.py"}
    assert seen["dockerfile"] == DOCKERFILE
    assert job.image == seen["tag"] == planned.local_image()


def test_a_local_change_the_tag_does_not_see_is_not_built_either(tmp_path: Path) -> None:
    folder = tmp_path / "images" / "bot"
    (folder / "__pycache__").mkdir(parents=True)
    (folder / "Dockerfile").write_text(DOCKERFILE)
    (folder / "__pycache__" / "mod.cpython-312.pyc").write_bytes(b"old")
    (folder / "stale.pyc").write_bytes(b"old")
    seen: dict[str, Any] = {}
    LocalImages(tmp_path, lambda line: None, candidates=("podman",), which=lambda n: f"/usr/bin/{n}",
                run=_runtime(seen))([_job(build="images/bot")])
    # The same tag is found again whatever these hold, so they must not be in the image either.
    assert seen["files"] == {"Dockerfile"}


def test_a_context_link_inside_the_archive_stays_a_link_in_the_local_build(tmp_path: Path) -> None:
    outside = tmp_path / "home"
    outside.mkdir()
    (outside / "id_ed25519").write_text("PRIVATE\n")
    root = tmp_path / "repo"
    folder = root / "images" / "bot"
    folder.mkdir(parents=True)
    (folder / "Dockerfile").write_text(DOCKERFILE)
    (folder / "key").symlink_to(outside / "id_ed25519")
    seen: dict[str, Any] = {}

    def run(command: list[str], **kwargs: Any) -> Any:
        if command[1] == "build":
            link = Path(command[-1]) / "key"
            seen["link"] = link.is_symlink()
        return SimpleNamespace(returncode=1 if command[1] == "image" else 0, stdout=b"", stderr=b"")

    LocalImages(root, lambda line: None, candidates=("podman",), which=lambda n: f"/usr/bin/{n}",
                run=run)([_job(build="images/bot")])
    assert seen["link"] is True  # the builder decides what a link means, as in the cloud build
