"""Where a job's VM can reach, and what that means for its image and its code.

A VM without an external IPv4 address reaches Google's APIs and registries only (Private Google
Access on spotcron's subnet): it cannot pull from Docker Hub or call any other host unless the
project routes the network through a Cloud NAT, which spotcron neither creates nor checks. A job
says it needs the internet with `internet: true`; its VM then gets an external IPv4 address
(billed per hour, priced by `spotcron cost`).

Google's registries: Artifact Registry (`REGION-docker.pkg.dev`, `docker.pkg.dev`), Container
Registry and its Docker Hub cache (`gcr.io`, `*.gcr.io`, `mirror.gcr.io`).
"""

from __future__ import annotations

from spotcron.core.spec import JobSpec

GOOGLE_REGISTRY_SUFFIXES = ("-docker.pkg.dev", ".gcr.io")
GOOGLE_REGISTRY_HOSTS = ("docker.pkg.dev", "gcr.io")


def image_host(image: str) -> str:
    """The registry host of an image reference; Docker Hub (docker.io) when it names none."""
    first, sep, _ = image.partition("/")
    if sep and ("." in first or ":" in first or first == "localhost"):
        return first.split(":", 1)[0]
    return "docker.io"


def google_registry(image: str) -> bool:
    host = image_host(image)
    return host in GOOGLE_REGISTRY_HOSTS or host.endswith(GOOGLE_REGISTRY_SUFFIXES)


def pull_problem(job: JobSpec) -> str | None:
    """Why the job's VM could not pull its image (outside Google's registries, no egress); None if it can."""
    for variant in job.configurations():
        if variant.build is not None or variant.has_egress or google_registry(variant.image):
            continue
        where = f"matrix entry {variant.variant!r}: " if variant.variant else ""
        return (f"{where}image {variant.image!r} is on {image_host(variant.image)}, outside Google's registries, "
                f"and the VM has no external IPv4 address: it reaches only Google's APIs and registries, so every "
                f"pull would fail. Push the image to the stack's Artifact Registry repository, use Google's "
                f"Docker Hub cache (mirror.gcr.io/library/IMAGE:TAG), or write internet: true (an external IPv4 "
                f"address, billed per hour)")
    return None


def nat_warning(job: JobSpec) -> str | None:
    """A job that needs the internet on a VM without an external address relies on a Cloud NAT."""
    if job.internet and not job.external_ip:
        return ("needs the internet (internet: true) with external_ip: false: its VM reaches the internet only "
                "through a Cloud NAT on the default network in the stack's region, which spotcron neither "
                "creates nor checks; without one every call outside Google fails")
    return None


def network_warnings(job: JobSpec) -> list[str]:
    """What `validate` says about a job's network (deploy refuses the pull problem)."""
    return [w for w in (pull_problem(job), nat_warning(job)) if w]
