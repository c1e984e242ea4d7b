"""Build contexts that reach outside the repository, and build arguments that Cloud Build rewrites."""

from __future__ import annotations

import io
import tarfile
from pathlib import Path
from typing import Any

import pytest

from spotcron.core import images
from spotcron.core.errors import ConfigError
from spotcron.core.spec import JobSpec

DOCKERFILE = "FROM scratch\nCOPY . /app\n"


def _job(**fields: Any) -> JobSpec:
    return JobSpec.model_validate({"name": "bot", "schedule": "0 * * * *", **fields})


def _names(build: images.ImageBuild) -> set[str]:
    import gzip

    with tarfile.open(fileobj=io.BytesIO(gzip.decompress(build.tarball))) as tar:
        return set(tar.getnames())


def _secrets(tmp_path: Path) -> Path:
    """A folder outside the repository, like ~/.ssh, that happens to hold a Dockerfile too."""
    home = tmp_path / "home" / ".ssh"
    home.mkdir(parents=True)
    (home / "id_ed25519").write_text("-----BEGIN OPENSSH PRIVATE KEY-----\n")
    (home / "Dockerfile").write_text(DOCKERFILE)
    return home


def test_a_context_that_is_a_link_out_of_the_repository_is_refused(tmp_path: Path) -> None:
    root = tmp_path / "repo"
    (root / "images").mkdir(parents=True)
    # A link to a folder inside the repository is fine: what ships is that folder.
    (root / "images" / "real").mkdir()
    (root / "images" / "real" / "Dockerfile").write_text(DOCKERFILE)
    (root / "images" / "inside").symlink_to(root / "images" / "real")
    [built] = images.plan_builds([_job(build="images/inside")], root)
    assert _names(built) == {"Dockerfile"}
    (root / "images" / "bot").symlink_to(_secrets(tmp_path))
    # Uploading it would put the private key in the stack's bucket and in the image.
    with pytest.raises(ConfigError, match="outside"):
        built = images.plan_builds([_job(build="images/bot")], root)
        assert "id_ed25519" not in _names(built[0])


def test_a_context_under_a_linked_folder_is_refused(tmp_path: Path) -> None:
    root = tmp_path / "repo"
    root.mkdir()
    (root / "vm_images").symlink_to(_secrets(tmp_path).parent)
    with pytest.raises(ConfigError, match="outside"):
        images.plan_builds([_job(build="vm_images/.ssh")], root)


def test_a_dockerfile_that_is_a_link_out_of_the_context_is_refused(tmp_path: Path) -> None:
    root = tmp_path / "repo"
    context = root / "images" / "bot"
    context.mkdir(parents=True)
    (root / "Dockerfile.shared").write_text(DOCKERFILE)
    (context / "Dockerfile").symlink_to(root / "Dockerfile.shared")
    # The archive keeps the link unfollowed, so Cloud Build would find no Dockerfile: say so before.
    with pytest.raises(ConfigError, match="outside"):
        images.plan_builds([_job(build="images/bot")], root)


def test_build_arguments_reach_docker_as_written_not_as_cloud_build_substitutions(tmp_path: Path) -> None:
    root = tmp_path / "repo"
    context = root / "images" / "bot"
    context.mkdir(parents=True)
    (context / "Dockerfile").write_text(DOCKERFILE)
    job = _job(build={"context": "images/bot", "args": {"PASSWORD": "pa$word", "WHO": "$PROJECT_ID"}})
    [built] = images.plan_builds([job], root)
    image = built.image("us-central1-docker.pkg.dev/p/spotcron")
    args = images.build_request(built, image, bucket="b")["steps"][0]["args"]
    # Cloud Build substitutes $NAME in step args ($PROJECT_ID becomes the project, an unknown $word
    # makes the build invalid); $$ is its literal dollar, which a local `docker build` gets as `$`.
    assert "PASSWORD=pa$$word" in args
    assert "WHO=$$PROJECT_ID" in args


def test_a_build_result_whose_digest_is_not_a_digest_counts_as_not_pushed() -> None:
    image = "us-central1-docker.pkg.dev/p/spotcron/bot:ctx-0"
    result = {"status": "SUCCESS", "results": {"images": [{"name": image, "digest": "sha256:"}]}}
    # Pinned later, it would end deploy with a ValueError traceback instead of "build it again".
    assert images.pushed_digest(result, image) is None
