"""Which local container runtime can run an image, and if none can, why, in words.

Local mode runs a job's container when docker or podman already has its image, and the job's
`local.command` otherwise. A docker client whose daemon is not running answers every command
with an error that looks exactly like "no such image"; the reason is kept apart, so local mode,
the run's logs and `spotcron validate` can say it.
"""

from __future__ import annotations

import shutil
import subprocess
from collections.abc import Callable
from dataclasses import dataclass

CANDIDATES = ("docker", "podman")
_NO_DAEMON = ("cannot connect to the docker daemon", "is the docker daemon running", "error during connect",
              "cannot connect to podman", "unable to connect to podman")


@dataclass(frozen=True)
class Lookup:
    binary: str | None  # the runtime that has the image
    why_not: str  # when binary is None: what each candidate said, for a person
    stopped: tuple[str, ...] = ()  # what each runtime installed without a running daemon said

    @property
    def daemon_missing(self) -> bool:
        return bool(self.stopped)


def find_runtime(image: str, candidates: tuple[str, ...] = CANDIDATES, which: Callable = shutil.which,
                 run: Callable = subprocess.run) -> Lookup:
    reasons, stopped = [], []
    for name in candidates:
        binary = which(name)
        if binary is None:
            reasons.append(f"{name} is not installed")
            continue
        try:
            found = run([binary, "image", "inspect", image], capture_output=True, timeout=20)
        except (OSError, subprocess.TimeoutExpired) as exc:
            reasons.append(f"{name} did not answer ({exc})")
            continue
        if found.returncode == 0:
            return Lookup(binary, "")
        said = (found.stderr or b"").decode("utf-8", "replace").strip()
        if any(marker in said.lower() for marker in _NO_DAEMON):
            stopped.append(f"{name} is installed but its daemon is not running (start it, e.g. "
                           f"`sudo systemctl start {name}`)")
            reasons.append(stopped[-1])
        else:
            reasons.append(f"{name} has no image {image} (build or pull it)")
    return Lookup(None, "; ".join(reasons) or "no container runtime is configured", tuple(stopped))


def container_runtime(image: str, candidates: tuple[str, ...] = CANDIDATES) -> str | None:
    """The first docker/podman binary that works and already has `image`, else None."""
    return find_runtime(image, candidates).binary
