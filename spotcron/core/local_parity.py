"""Whether a job's local run runs what its VM would: a job that only works on this machine.

Locally, a job without a container runtime runs its `local.command`; its VM runs the image, with
the job's `command:` (or the image's own entrypoint) and `args:`. A job on a stock image (Docker
Hub's official images, directly or through Google's cache) with a local command and neither
`command:`, `args:` nor `build:` passes every local check, yet its VM would run the stock image's default
command (a Python prompt, a shell) and none of the job's code, which is not in that image.
Only stock images are judged: a user's own image may well have the local command as its entrypoint.
"""

from __future__ import annotations

from spotcron.core.egress import image_host
from spotcron.core.spec import JobSpec

# Google's cache of Docker Hub serves the official images under library/ (docs/jobs.md).
_STOCK_MIRRORS = ("mirror.gcr.io",)


def stock_image(image: str) -> bool:
    """An official Docker Hub image (python:3.11-slim, library/busybox, mirror.gcr.io/library/...)."""
    host = image_host(image)
    path = image.split("/", 1)[1] if host != "docker.io" or image.startswith("docker.io/") else image
    if host == "docker.io":
        return "/" not in path or path.startswith("library/")
    return host in _STOCK_MIRRORS and path.startswith("library/")


def local_command_warnings(job: JobSpec) -> list[str]:
    """One line per configuration whose VM would not run its local command: what, where, the fix."""
    warnings = []
    for config in job.configurations():
        # args: replace a stock image's default command (docker run IMAGE ARGS): the job says what runs.
        if config.local is None or config.command is not None or config.args or config.build is not None \
                or not config.image or not stock_image(config.image):
            continue
        where = f"matrix entry {config.variant!r}: " if config.variant else ""
        local = " ".join(config.local.command)
        warnings.append(
            f"{where}local.command runs `{local}` on this machine, but on a VM the job runs {config.image}'s own "
            f"default command (the job has no command:, args: or build:), and that image holds none of your files. "
            f"Build an image with your code (build: the folder with your script and a Dockerfile; docs/jobs.md, "
            f"\"build: an image built for you\"), or write command: with what the image itself should run")
    return warnings
