"""Local mode's images: a job that says build: is built with podman or docker when one works here,
and runs in that container; without one, its `local.command` runs. Either way one line says which.

The local image is tagged with the same content hash as the cloud build (core/images.py), so an
unchanged folder is not built again (`image inspect` finds it), and a changed one gets a new tag.
"""

from __future__ import annotations

import shutil
import subprocess
import tarfile
import tempfile
from collections.abc import Callable, Sequence
from pathlib import Path

from spotcron.core.images import ImageBuild, pin_jobs, plan_builds, unpack
from spotcron.core.spec import JobSpec
from spotcron.local.containers import CANDIDATES

BUILD_TIMEOUT_S = 1800


class LocalImages:
    """Builds the jobs' images on this machine; `say` gets one line per image when its state changes."""

    def __init__(self, root: Path, say: Callable[[str], None], *, candidates: Sequence[str] = CANDIDATES,
                 which: Callable[[str], str | None] = shutil.which, run: Callable = subprocess.run):
        self.root = root
        self.say = say
        self.candidates = tuple(candidates)
        self.which = which
        self.run = run
        self._runtime: str | None | bool = False  # False: not looked for yet
        self._said: dict[tuple[object, ...], str] = {}

    def __call__(self, jobs: Sequence[JobSpec]) -> list[JobSpec]:
        """The jobs, each built image in place of its name; jobs whose image could not be built are
        left as they were (their local.command runs)."""
        builds = plan_builds(jobs, self.root)
        if not builds:
            return list(jobs)
        refs = {}
        for build in builds:
            if _not_built_here(build, jobs):
                image, line = None, f"{', '.join(build.users)}: runs its local.command (local.build: false)"
            else:
                image, line = self._image(build, self.runtime(), jobs)
            if image is not None:
                refs[build.key] = image
            if self._said.get(build.key) != line:
                self._said[build.key] = line
                self.say(line)
        return pin_jobs(jobs, builds, refs)

    def runtime(self) -> str | None:
        """The first of podman/docker that answers (a docker whose daemon is stopped does not)."""
        if self._runtime is False:
            self._runtime = None
            for name in self.candidates:
                binary = self.which(name)
                if binary is None:
                    continue
                try:
                    answered = self.run([binary, "info"], capture_output=True, timeout=30).returncode == 0
                except (OSError, subprocess.TimeoutExpired):
                    answered = False
                if answered:
                    self._runtime = binary
                    break
        return self._runtime or None

    def _image(self, build: ImageBuild, runtime: str | None, jobs: Sequence[JobSpec]) -> tuple[str | None, str]:
        users = ", ".join(build.users)
        fallback = _fallback(build, jobs)
        if runtime is None:
            return None, (f"{users}: no working podman or docker here to build {build.relative}/: {fallback}")
        tool = Path(runtime).name
        image = build.local_image()
        try:
            if self.run([runtime, "image", "inspect", image], capture_output=True, timeout=30).returncode == 0:
                return image, f"{users}: runs in its container {image} ({tool}; {build.relative}/ unchanged)"
            # The archive Cloud Build gets, not the folder: the tag names exactly it, and the folder
            # also holds what every archive leaves out (.git, .spotcron's tokens, caches).
            with tempfile.TemporaryDirectory(prefix="spotcron-build-") as unpacked:
                context = Path(unpacked)
                unpack(build, context)
                command = [runtime, "build", "-t", image, "-f", str(context / build.dockerfile)]
                for name, value in build.args:
                    command += ["--build-arg", f"{name}={value}"]
                done = self.run([*command, str(context)], capture_output=True, timeout=BUILD_TIMEOUT_S)
        except (OSError, subprocess.TimeoutExpired, tarfile.TarError) as exc:
            return None, f"{users}: {tool} build of {build.relative}/ did not finish ({exc}): {fallback}"
        if done.returncode != 0:
            said = (done.stderr or done.stdout or b"").decode("utf-8", "replace").strip().splitlines()
            return None, (f"{users}: {tool} build of {build.relative}/ failed "
                          f"({said[-1] if said else 'exit ' + str(done.returncode)}): {fallback}")
        return image, f"{users}: runs in its container {image}, built with {tool} from {build.relative}/"


def _not_built_here(build: ImageBuild, jobs: Sequence[JobSpec]) -> bool:
    """Every configuration that uses the image says `local.build: false` (and has a command)."""
    users = set(build.users)
    local = [c.local for job in jobs for c in job.configurations()
             if (job.name if c.variant is None else f"{job.name}/{c.variant}") in users]
    return bool(local) and all(one is not None and not one.build for one in local)


def _fallback(build: ImageBuild, jobs: Sequence[JobSpec]) -> str:
    names = {user.split("/", 1)[0] for user in build.users}
    local = [c.local for job in jobs if job.name in names for c in job.configurations()
             if c.build is not None and c.local is not None]
    if local:
        return f"runs its local.command ({' '.join(local[0].command)})"
    return "it has no local.command either, so its runs fail here (add local: or install podman)"
