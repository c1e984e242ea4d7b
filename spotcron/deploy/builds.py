"""The images deploy builds before it deploys: which are built already, which to build, the pinned specs.

A job with `build:` runs the image built from that folder, by digest. Each image's tag is the
hash of its context (core/images.py), so an earlier successful build of the same tag is found
(Cloud Build keeps its builds' history, tagged) and not built again; a changed folder gets a new
tag and a new build. The builder is a small interface: Cloud Build on Google Cloud
(gcp/admin/cloudbuild.py), a fake in tests.

Each image goes to the built repository of the account its jobs run as (core/job_repositories.py),
which that account reads and the job build account writes; never to the owners' repository, where
prebuilt images live. A folder built for jobs of different accounts is built once
per account, into each one's repository (the simplest correct: a copy between repositories would
need a reader of both). A job that moves to another account finds no build of its folder in its
new repository, so its image is built there.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from typing import Protocol

from spotcron.core.images import ImageBuild, pin_job, pinned
from spotcron.core.settings import Settings
from spotcron.core.spec import JobSpec


class Builder(Protocol):
    def find(self, build: ImageBuild, image: str) -> str | None:
        """The digest of an earlier successful build of this context pushed as `image`, or None."""
        ...

    def build(self, build: ImageBuild, image: str) -> str:
        """Build and push `image` from the context; its digest."""
        ...


@dataclass(frozen=True)
class ImageStatus:
    build: ImageBuild
    image: str  # REGISTRY/NAME:TAG
    digest: str | None  # None: still to build
    built_now: bool = False

    @property
    def ref(self) -> str | None:
        return pinned(self.image, self.digest) if self.digest else None


def registries(settings: Settings, jobs: Sequence[JobSpec]) -> Callable[[str], str]:
    """For a build's user (JOB or JOB/ENTRY), the registry its image goes to: that of the account
    the job runs as once deployed: the built repository of that account, which the job build
    account writes and no owner pushes prebuilt images to."""
    from spotcron.deploy.validate import run_account

    accounts = {job.name: run_account(settings, job) for job in jobs}
    return lambda user: settings.built_registry_for(accounts.get(user.split("/", 1)[0]))


def by_registry(builds: Sequence[ImageBuild], registry: str | Callable[[str], str]) -> list[tuple[ImageBuild, str]]:
    """Each build once per registry its users' images go to, with just those users."""
    out = []
    for build in builds:
        if isinstance(registry, str):
            out.append((build, registry))
            continue
        groups: dict[str, list[str]] = {}
        for user in build.users:
            groups.setdefault(registry(user), []).append(user)
        out += [(replace(build, users=tuple(users)), where) for where, users in groups.items()]
    return out


def look_up(builds: Sequence[ImageBuild], builder: Builder, registry: str | Callable[[str], str]) -> list[ImageStatus]:
    """Each build (per registry: `registry(user)`, or one registry for all) with the digest of an
    earlier build of the same context pushed there, where there is one."""
    return [ImageStatus(b, b.image(where), builder.find(b, b.image(where))) for b, where in by_registry(builds, registry)]


def build_missing(statuses: Sequence[ImageStatus], builder: Builder,
                  on_built: Callable[[ImageStatus], None] = lambda status: None) -> list[ImageStatus]:
    """Build what has no digest yet, one after another (each is a Cloud Build of its own)."""
    out = []
    for status in statuses:
        if status.digest is None:
            status = ImageStatus(status.build, status.image, builder.build(status.build, status.image), True)
            on_built(status)
        out.append(status)
    return out


def pin(jobs: Sequence[JobSpec], statuses: Sequence[ImageStatus]) -> list[JobSpec]:
    """The jobs with each built image replaced by its digest reference (the one pushed where the
    job's account reads); unbuilt ones stay as named."""
    by_user = {user: s.ref for s in statuses if s.ref is not None for user in s.build.users}

    def pinned_job(job: JobSpec) -> JobSpec:
        return pin_job(job, lambda variant: by_user.get(job.name if variant is None else f"{job.name}/{variant}"))

    return [pinned_job(job) for job in jobs]


def format_builds(statuses: Sequence[ImageStatus]) -> list[str]:
    """Lines for the plan: `+ build` for each image to build, `= image` for one built before."""
    lines = []
    for status in statuses:
        users = ", ".join(status.build.users)
        where = f"{status.build.relative}/" + (f" ({status.build.dockerfile})"
                                              if status.build.dockerfile != "Dockerfile" else "")
        if status.digest is None:
            lines.append(f"+ build {status.image} from {where} with Cloud Build, for {users}")
        elif status.built_now:
            lines.append(f"✓ built {status.ref} from {where}, for {users}")
        else:
            lines.append(f"= image {status.ref}: {where} is unchanged since it was built, for {users}")
    return lines
