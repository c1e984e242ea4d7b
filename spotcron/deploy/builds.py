"""The images deploy builds before it deploys: which are built already, which to build, the pinned specs.

A job with `build:` runs the image built from that folder, by digest. Each image's tag is the
hash of its context (core/images.py), so an earlier successful build of the same tag is found
(Cloud Build keeps its builds' history, tagged) and not built again; a changed folder gets a new
tag and a new build. The builder is a small interface: Cloud Build on Google Cloud
(gcp/admin/cloudbuild.py), a fake in tests.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Protocol

from spotcron.core.images import ImageBuild, pin_jobs, pinned
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


def look_up(builds: Sequence[ImageBuild], builder: Builder, registry: str) -> list[ImageStatus]:
    """Each build with the digest of an earlier build of the same context, where there is one."""
    return [ImageStatus(b, b.image(registry), builder.find(b, b.image(registry))) for b in builds]


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
    """The jobs with each built image replaced by its digest reference; unbuilt ones stay as named."""
    refs = {s.build.key: s.ref for s in statuses if s.ref is not None}
    return pin_jobs(jobs, [s.build for s in statuses], refs)


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
