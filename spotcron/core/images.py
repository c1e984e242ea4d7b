"""Images built from a job's `build:` folder: what to build, under which name, and how to pin it.

The tag of a built image is content-addressed: a hash of the context as a reproducible tarball
(sorted names, no timestamps or owners), the Dockerfile's path and the build arguments. The same
folder always gives the same tag, so an unchanged context is found instead of built again, and a
changed one never overwrites what runs. What a deployed spec runs is the pushed digest
(`NAME@sha256:...`), never the tag, so a moved tag never changes what runs.

Pure apart from reading the context folder: the Cloud Build request is a dict here (v1 REST JSON)
and Google's client is touched only in spotcron/gcp/admin/cloudbuild.py.
"""

from __future__ import annotations

import gzip
import hashlib
import io
import json
import os
import posixpath
import re
import stat
import tarfile
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from spotcron.core import dockerignore
from spotcron.core.build_logs import build_logs_bucket, build_logs_location
from spotcron.core.errors import ConfigError, Problem
from spotcron.core.spec import Build, JobSpec

# Left out of every context: they change without the image changing, or hold what no image needs.
SKIPPED = frozenset({".git", "__pycache__", ".venv", ".spotcron", ".pytest_cache", ".mypy_cache"})
TAG_PREFIX = "ctx-"
BUILDER = "gcr.io/cloud-builders/docker"  # what `gcloud builds submit --tag` runs
BUILD_TIMEOUT_S = 1200
SOURCE_PREFIX = "deploy/build-"  # under deploy/: the build account may read only that part of the bucket
# A legacy prefix: earlier deploys kept the job builds' logs under it in the results bucket. They
# now go to a bucket of their own (core/build_logs.py); deploy removes the old lifecycle rule.
BUILD_LOGS_PREFIX = "build-logs/"
LABEL = "spotcron"  # a Cloud Build tag on every build deploy starts


def image_name(image: str) -> str:
    """The last path part of an image reference, without tag or digest: `bot` of `.../bot:latest`."""
    last = image.split("@", 1)[0].rsplit("/", 1)[-1]
    return last.split(":", 1)[0]


def build_targets(job: JobSpec) -> dict[str | None, tuple[Build, str]]:
    """Per variant (None: the job itself) that builds its image: the build and the image's name."""
    out: dict[str | None, tuple[Build, str]] = {}
    if job.build is not None and job.image is not None:
        out[None] = (job.build, image_name(job.image))
    for entry in job.matrix:
        if entry.build is not None:
            out[entry.name] = (entry.build, image_name(entry.image) if entry.image else f"{job.name}-{entry.name}")
    return out


@dataclass(frozen=True)
class ImageBuild:
    """One image to build: a context folder, its Dockerfile and arguments, and the image's name."""

    context: Path  # absolute
    relative: str  # as the job file says it
    dockerfile: str
    args: tuple[tuple[str, str], ...]
    name: str
    tarball: bytes = field(repr=False)  # gzip of the reproducible tar
    content: str  # sha256 of the tar, the Dockerfile's path and the arguments
    users: tuple[str, ...] = ()  # JOB or JOB/ENTRY

    @property
    def tag(self) -> str:
        return TAG_PREFIX + self.content[:20]

    def image(self, registry: str) -> str:
        """The tagged name it is pushed under, e.g. us-central1-docker.pkg.dev/P/spotcron/bot:ctx-…"""
        return f"{registry}/{self.name}:{self.tag}"

    def local_image(self) -> str:
        """The name a local podman/docker build gets."""
        return f"localhost/spotcron/{self.name}:{self.tag}"

    @property
    def source_object(self) -> str:
        return f"{SOURCE_PREFIX}{self.content[:32]}.tar.gz"

    @property
    def key(self) -> tuple[str, str, tuple[tuple[str, str], ...], str]:
        return (str(self.context), self.dockerfile, self.args, self.name)


def pinned(image: str, digest: str) -> str:
    """`NAME@sha256:…` of a pushed image: what runs is exactly that, whatever its tags do later."""
    if not digest.startswith("sha256:") or len(digest) != 71:
        raise ValueError(f"{digest!r} is not an image digest (sha256:64 hex digits)")
    head, _, last = image.split("@", 1)[0].rpartition("/")
    last = last.split(":", 1)[0]  # the tag goes: the digest alone says what runs
    return f"{head}/{last}@{digest}" if head else f"{last}@{digest}"


def context_tar(folder: Path, dockerfile: str = "Dockerfile") -> bytes:
    """The folder as an uncompressed tar that depends only on names, contents, links and the
    executable bit: the same folder gives the same bytes on any machine. What the ignore file docker
    reads for `dockerfile` leaves out (its own `DOCKERFILE.dockerignore`, else the context's
    `.dockerignore`) is left out, as `docker build` leaves it out (core/dockerignore.py): a `.env`
    or a key the user excluded never reaches the bucket or the build."""
    patterns = dockerignore.read(folder, dockerfile)
    # The build on Cloud Build runs docker on this archive: it needs the Dockerfile and the ignore
    # file docker read, to leave out the same paths from COPY.
    always = {posixpath.normpath(dockerfile).lstrip("/"), dockerignore.ignore_file(folder, dockerfile)}
    entries = [(path, path.relative_to(folder).as_posix()) for path in _walk(folder)]
    kept = {relative for _, relative in entries
            if relative in always or not dockerignore.excluded(patterns, relative)}
    # A folder left out still goes in when an exception (`!`) keeps something inside it.
    for relative in list(kept):
        parts = relative.split("/")
        kept.update("/".join(parts[:n]) for n in range(1, len(parts)))
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w", format=tarfile.PAX_FORMAT) as tar:
        for path, relative in entries:
            if relative not in kept:
                continue
            info = tarfile.TarInfo(relative)
            info.mtime, info.uid, info.gid, info.uname, info.gname = 0, 0, 0, "", ""
            mode = path.lstat().st_mode
            if stat.S_ISLNK(mode):
                # Kept as a link, never followed: a link out of the context must not ship the host's files.
                info.type, info.linkname, info.mode = tarfile.SYMTYPE, os.readlink(path), 0o777
                tar.addfile(info)
            elif stat.S_ISDIR(mode):
                info.type, info.mode = tarfile.DIRTYPE, 0o755
                tar.addfile(info)
            elif stat.S_ISREG(mode):
                info.mode = 0o755 if mode & stat.S_IXUSR else 0o644
                data = path.read_bytes()
                info.size = len(data)
                tar.addfile(info, io.BytesIO(data))
    return buffer.getvalue()


def _walk(folder: Path) -> Iterable[Path]:
    for root, dirs, files in os.walk(folder, followlinks=False):
        dirs[:] = sorted(d for d in dirs if d not in SKIPPED)
        base = Path(root)
        for name in sorted([*dirs, *(f for f in files if not f.endswith(".pyc"))]):
            yield base / name


def gzip_bytes(data: bytes) -> bytes:
    """Gzip without a timestamp or file name, so the archive is as reproducible as the tar."""
    buffer = io.BytesIO()
    with gzip.GzipFile(fileobj=buffer, mode="wb", mtime=0, filename="") as out:
        out.write(data)
    return buffer.getvalue()


def content_hash(tar: bytes, dockerfile: str, args: Mapping[str, str]) -> str:
    digest = hashlib.sha256(tar)
    digest.update(json.dumps({"dockerfile": dockerfile, "args": dict(sorted(args.items()))},
                             sort_keys=True).encode())
    return digest.hexdigest()


def build_problems(job: JobSpec, root: Path) -> list[tuple[tuple[str | int, ...], str]]:
    """Build folders or Dockerfiles that do not exist: (the field's location, what to do)."""
    problems: list[tuple[tuple[str | int, ...], str]] = []
    entries = [entry.name for entry in job.matrix]
    for variant, (build, _name) in build_targets(job).items():
        where: tuple[str | int, ...] = ("build",) if variant is None else ("matrix", entries.index(variant), "build")
        folder = root / build.context
        left_out = _left_out(folder, root)
        if left_out is not None:
            # Skipped inside every context, it would ship whole as the context itself: the local
            # stack's state (its tokens), git's folder (its remotes' credentials).
            problems.append(((*where, "context"), f"{build.context!r} is inside {left_out}/, a folder left out of "
                                                  f"every build context (it holds state, not what an image "
                                                  f"needs); put the build context elsewhere in the repository"))
        elif folder.exists() and not folder.resolve().is_relative_to(root.resolve()):
            # A link (the folder or one above it) out of the repository would ship the host's files.
            problems.append(((*where, "context"), f"{build.context!r} is a link to {folder.resolve()}, outside "
                                                  f"{root}; the archive of it would go to the stack's bucket: "
                                                  f"put the build context inside the repository"))
        elif not folder.is_dir():
            problems.append(((*where, "context"), f"{build.context!r}: no such folder in {root}; the build context "
                                                  f"is a folder relative to the folder that holds jobs/, with a "
                                                  f"Dockerfile in it, e.g. vm_images/bot"))
        elif not (folder / build.dockerfile).is_file():
            problems.append(((*where, "dockerfile"), f"{build.dockerfile!r}: no such file in {build.context}/; add a "
                                                     f"Dockerfile there or name yours with dockerfile: (relative to "
                                                     f"the context)"))
        elif not (folder / build.dockerfile).resolve().is_relative_to(folder.resolve()):
            # The archive keeps links as links: Cloud Build would find no Dockerfile there.
            problems.append(((*where, "dockerfile"), f"{build.dockerfile!r} is a link to "
                                                     f"{(folder / build.dockerfile).resolve()}, outside "
                                                     f"{build.context}/, which the archive does not follow; "
                                                     f"copy the Dockerfile into the context"))
    return problems


def _left_out(folder: Path, root: Path) -> str | None:
    """The SKIPPED folder that `folder` is or is under (as written, or once links are followed), if any."""
    written = folder.relative_to(root).parts
    resolved = folder.resolve()
    actual = resolved.relative_to(root.resolve()).parts if resolved.is_relative_to(root.resolve()) else ()
    for parts in (written, actual):
        for index, part in enumerate(parts):
            if part in SKIPPED:
                return "/".join(parts[:index + 1])
    return None


def unpack(build: ImageBuild, destination: Path) -> None:
    """The build's archive, as uploaded for Cloud Build, unpacked into `destination`: what a local
    build gets, so that the content tag names what is in the image there too."""
    with tarfile.open(fileobj=io.BytesIO(gzip.decompress(build.tarball))) as tar:
        # Our own archive: relative names only; links stay links, as Cloud Build unpacks them.
        if hasattr(tarfile, "tar_filter"):
            tar.extractall(destination, filter="tar")
        else:  # pragma: no cover - Python 3.11 before 3.11.4
            tar.extractall(destination)


def plan_builds(jobs: Iterable[JobSpec], root: Path, *, only: str | None = None) -> list[ImageBuild]:
    """The distinct images the jobs build (one per folder, Dockerfile, arguments and name)."""
    found: dict[tuple[Any, ...], ImageBuild] = {}
    problems: list[Problem] = []
    for job in jobs:
        if only is not None and job.name != only:
            continue
        found_problems = build_problems(job, root)
        problems += [Problem(f"jobs/{job.name}.yaml", None, ".".join(str(part) for part in loc), message)
                     for loc, message in found_problems]
        if found_problems:
            continue
        for variant, (build, name) in build_targets(job).items():
            user = job.name if variant is None else f"{job.name}/{variant}"
            args = tuple(sorted(build.args.items()))
            key = (str((root / build.context).resolve()), build.dockerfile, args, name)
            if key in found:
                found[key] = replace(found[key], users=(*found[key].users, user))
                continue
            try:
                tar = context_tar(root / build.context, build.dockerfile)
            except dockerignore.OutsideContext as exc:
                where = ("build.context" if variant is None else
                         f"matrix.{[entry.name for entry in job.matrix].index(variant)}.build.context")
                problems.append(Problem(f"jobs/{job.name}.yaml", None, where, str(exc)))
                continue
            found[key] = ImageBuild(context=(root / build.context).resolve(), relative=build.context,
                                    dockerfile=build.dockerfile, args=args, name=name, tarball=gzip_bytes(tar),
                                    content=content_hash(tar, build.dockerfile, build.args), users=(user,))
    if problems:
        raise ConfigError(problems)
    return list(found.values())


def pin_job(job: JobSpec, image_for: Callable[[str | None], str | None]) -> JobSpec:
    """`job` with each built image replaced by `image_for(variant)` (None: the job's own build),
    where it gives one; what it does not know stays as it was."""
    update: dict[str, Any] = {}
    if job.build is not None and (image := image_for(None)) is not None:
        update["image"] = image
    entries = []
    for entry in job.matrix:
        if entry.build is not None and (image := image_for(entry.name)) is not None:
            entry = entry.model_copy(update={"image": image})
        entries.append(entry)
    if entries != list(job.matrix):
        update["matrix"] = tuple(entries)
    return job.model_copy(update=update) if update else job


def pin_jobs(jobs: Iterable[JobSpec], builds: Iterable[ImageBuild],
             refs: Mapping[tuple[Any, ...], str]) -> list[JobSpec]:
    """The jobs with every image whose build has a ref in `refs` (by ImageBuild.key) pinned to it."""
    by_user = {user: refs.get(build.key) for build in builds for user in build.users}

    def pin(job: JobSpec) -> JobSpec:
        return pin_job(job, lambda variant: by_user.get(job.name if variant is None else f"{job.name}/{variant}"))

    return [pin(job) for job in jobs]


# --- the Cloud Build request (v1 REST JSON, the shape `gcloud builds submit --tag` sends) -------

def build_request(build: ImageBuild, image: str, *, bucket: str, generation: int | None = None,
                  service_account: str | None = None, project: str = "-",
                  logs_bucket: str | None = None) -> dict[str, Any]:
    """The Build to create: the context from the bucket, one docker build step, the image pushed."""
    # Cloud Build substitutes $NAME in step args; $$ is its literal $, so docker gets what the job says.
    args = ["build", "--network", "cloudbuild", "-t", image, "-f", _literal(build.dockerfile)]
    for name, value in build.args:
        args += ["--build-arg", _literal(f"{name}={value}")]
    args.append(".")
    storage: dict[str, Any] = {"bucket": bucket, "object": build.source_object}
    if generation is not None:
        storage["generation"] = str(generation)  # int64 travels as a JSON string
    body: dict[str, Any] = {
        "source": {"storageSource": storage},
        "steps": [{"name": BUILDER, "args": args}],
        "images": [image],
        "tags": [LABEL, build_tag(build)],
        "timeout": f"{BUILD_TIMEOUT_S}s",
    }
    if service_account is not None:
        # A build that runs as a chosen account must say where its logs go ("To specify your own
        # service account for builds, you must store your build logs either in Cloud Logging or in
        # a user-created Cloud Storage bucket", https://cloud.google.com/build/docs/securing-builds/
        # configure-user-specified-service-accounts). Not Cloud Logging: writing there takes
        # project-wide roles/logging.logWriter, with which a job's Dockerfile could write any log
        # line of the project. A bucket of build logs instead, apart from the results bucket
        # (`logs_bucket`, by default the one core/build_logs.py names after it).
        body["serviceAccount"] = f"projects/{project}/serviceAccounts/{service_account}"
        body["logsBucket"] = build_logs_location(logs_bucket or build_logs_bucket(bucket))
        body["options"] = {"logging": "GCS_ONLY"}
    return body


def _literal(text: str) -> str:
    return text.replace("$", "$$")


def build_tag(build: ImageBuild) -> str:
    """The Cloud Build tag that finds earlier builds of this exact context."""
    return f"{LABEL}-{build.tag}"


def pushed_digest(result: Mapping[str, Any], image: str) -> str | None:
    """The digest of `image` in a finished Build's `results.images`, if it was pushed."""
    for pushed in (result.get("results") or {}).get("images") or ():
        found = str(pushed.get("digest") or "")
        if pushed.get("name") == image and re.fullmatch(r"sha256:[0-9a-f]{64}", found):
            return found
    return None
