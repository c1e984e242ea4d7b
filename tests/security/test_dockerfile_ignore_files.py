"""A Dockerfile's own ignore file keeps what it excludes out of the archive, as docker does.

docs/security.md, "Build contexts ship what docker would": "a `.env` or a key the user excluded
never reaches the bucket or Cloud Build". Docker reads an ignore file per Dockerfile: one named
like the Dockerfile plus `.dockerignore` (`Dockerfile.dockerignore`, `app.Dockerfile.dockerignore`),
beside the Dockerfile, which "takes precedence over the .dockerignore file at the root of the build
context if both exist" (docs.docker.com/build/concepts/context/, "Filename and location").
core/images.context_tar reads the context's `.dockerignore` only, so what such a file excludes is
archived, uploaded to the stack's bucket (`deploy/build-*.tar.gz`, which both build accounts read)
and sent to Cloud Build, though `docker build` on the same folder would never send it.
"""

from __future__ import annotations

import io
import tarfile
from pathlib import Path

from spotcron.core import images


def _names(tar: bytes) -> list[str]:
    with tarfile.open(fileobj=io.BytesIO(tar)) as archive:
        return sorted(archive.getnames())


def test_what_the_dockerfiles_own_ignore_file_excludes_is_not_archived(tmp_path: Path) -> None:
    folder = tmp_path / "images" / "bot"
    folder.mkdir(parents=True)
    (folder / "Dockerfile").write_text("FROM python:3.12-slim\nCOPY . /app\n")
    (folder / "Dockerfile.dockerignore").write_text(".env\n*.key\n")
    (folder / ".env").write_text("API_TOKEN=not-for-the-bucket\n")
    (folder / "deploy.key").write_text("-----BEGIN PRIVATE KEY-----\n")
    (folder / "bot.py").write_text("print('hi')\n")
    names = _names(images.context_tar(folder))
    assert "bot.py" in names
    assert ".env" not in names and "deploy.key" not in names, names


def test_a_named_dockerfiles_ignore_file_beside_it_is_honoured(tmp_path: Path) -> None:
    folder = tmp_path / "images" / "multi"
    (folder / "docker").mkdir(parents=True)
    (folder / "docker" / "app.Dockerfile").write_text("FROM python:3.12-slim\nCOPY . /app\n")
    (folder / "docker" / "app.Dockerfile.dockerignore").write_text("secrets\n")
    (folder / "secrets").mkdir()
    (folder / "secrets" / "prod.json").write_text("{}\n")
    (folder / "app.py").write_text("print('hi')\n")
    names = _names(images.context_tar(folder, "docker/app.Dockerfile"))
    assert "app.py" in names and "docker/app.Dockerfile" in names
    assert not [n for n in names if n.startswith("secrets")], names
