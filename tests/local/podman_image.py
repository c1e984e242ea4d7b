"""A tiny container image built from a local rootfs, for tests that run local mode under podman.

No registry is reachable from the machines the tests run on, so the image is made from the
statically linked busybox that Debian's `busybox-static` package installs: a rootfs with
/bin/busybox and links for the applets the tests use, packed as a tar and `podman import`ed.
"""

from __future__ import annotations

import contextlib
import os
import resource
import shutil
import struct
import subprocess
import tarfile
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path


def session_image(kind: str) -> str:
    """An image name of this test session's own.

    podman's images and containers belong to the whole machine, and a session's teardown removes
    its image (`rmi --force` takes the containers of it too) and every container of it: with one
    shared name, a session ending beside a running one kills that one's containers (exit 137).
    """
    return f"localhost/spotcron-test-{kind}-{os.getpid()}:latest"


IMAGE = session_image("busybox")
APPLETS = ("sh", "echo", "cat", "sleep", "printenv", "env", "ls", "true", "nc", "grep")
BUSYBOX_PLACES = ("/bin/busybox", "/usr/bin/busybox")
PT_INTERP = 3
# podman as root asks runc for RLIMIT_NOFILE and RLIMIT_NPROC of 1048576. Without
# CAP_SYS_RESOURCE (sandboxes, CI containers) runc cannot raise a hard limit and fails with
# "error setting rlimit type 7: operation not permitted". NOFILE works up to the caller's hard
# limit; NPROC failed above 32768 on a machine whose hard limit was 96365 (conmon runs with
# 32768), so it gets a modest fixed ceiling. The container runs as host root, whose processes
# all count against NPROC, so it must not be small either.
LIMIT_CEILINGS = (("nofile", "RLIMIT_NOFILE", 65536), ("nproc", "RLIMIT_NPROC", 16384))


@dataclass(frozen=True)
class Podman:
    binary: str
    image: str
    containers_conf: Path

    def env(self, base: Mapping[str, str]) -> dict[str, str]:
        """`base` plus what podman needs to run a container here."""
        return {**base, "CONTAINERS_CONF": str(self.containers_conf)}


def is_static_elf(path: Path) -> bool:
    """True for an ELF executable without a program interpreter (runs in an empty rootfs)."""
    data = path.read_bytes()
    if data[:4] != b"\x7fELF" or data[4] not in (1, 2) or data[5] not in (1, 2):
        return False
    order = "<" if data[5] == 1 else ">"
    if data[4] == 2:
        (phoff,) = struct.unpack_from(order + "Q", data, 0x20)
        phentsize, phnum = struct.unpack_from(order + "HH", data, 0x36)
    else:
        (phoff,) = struct.unpack_from(order + "I", data, 0x1C)
        phentsize, phnum = struct.unpack_from(order + "HH", data, 0x2A)
    for index in range(phnum):
        (p_type,) = struct.unpack_from(order + "I", data, phoff + index * phentsize)
        if p_type == PT_INTERP:
            return False
    return True


def static_busybox() -> Path | None:
    """A statically linked busybox on this machine, else None."""
    found = shutil.which("busybox")
    for place in ((found,) if found else ()) + BUSYBOX_PLACES:
        path = Path(place)
        if path.is_file() and is_static_elf(path):
            return path
    return None


def missing_tools() -> str | None:
    """Why the podman tests cannot run here (a skip reason), or None when they can."""
    missing = [name for name in ("podman", "runc") if shutil.which(name) is None]
    if static_busybox() is None:
        missing.append("a static busybox")
    if missing:
        return (f"needs {', '.join(missing)}: install them with `make tools` "
                "(apt-get install podman runc busybox-static)")
    return None


def write_containers_conf(path: Path) -> Path:
    """A containers.conf that runs with runc and asks for rlimits the caller can grant."""
    limits = []
    for name, which, ceiling in LIMIT_CEILINGS:
        _soft, hard = resource.getrlimit(getattr(resource, which))
        value = ceiling if hard == resource.RLIM_INFINITY else min(hard, ceiling)
        limits.append(f'"{name}={value}:{value}"')
    path.write_text("[containers]\n"
                    f"default_ulimits = [{', '.join(limits)}]\n"
                    "\n[engine]\n"
                    'runtime = "runc"\n')
    return path


def write_rootfs_tar(busybox: Path, tar_path: Path, applets: tuple[str, ...] = APPLETS) -> Path:
    """A rootfs of /bin/busybox and its applet links, as a tar that `podman import` reads."""
    with tarfile.open(tar_path, "w") as tar:
        for folder in ("bin", "tmp", "results"):
            info = tarfile.TarInfo(folder)
            info.type, info.mode = tarfile.DIRTYPE, 0o1777 if folder == "tmp" else 0o755
            tar.addfile(info)
        with open(busybox, "rb") as binary:
            info = tarfile.TarInfo("bin/busybox")
            info.size, info.mode = busybox.stat().st_size, 0o755
            tar.addfile(info, binary)
        for applet in applets:
            info = tarfile.TarInfo(f"bin/{applet}")
            info.type, info.linkname = tarfile.SYMTYPE, "busybox"
            tar.addfile(info)
    return tar_path


def build_problem(podman: Podman, workdir: Path, applets: tuple[str, ...] = APPLETS) -> str | None:
    """Build the image from the static busybox; podman's complaint when it cannot, else None."""
    busybox = static_busybox()
    if busybox is None:
        return "no statically linked busybox: install busybox-static"
    tar_path = write_rootfs_tar(busybox, workdir / "rootfs.tar", applets)
    try:
        _podman(podman.binary, "import", "--quiet", "--change", 'CMD ["sh"]', str(tar_path), podman.image)
    except RuntimeError as error:
        return f"podman cannot build an image from a local rootfs here: {error}"
    return None


def remove_image(podman: str, image: str = IMAGE) -> None:
    subprocess.run([podman, "rmi", "--force", image], capture_output=True, timeout=60)


def run_problem(podman: Podman, base_env: Mapping[str, str]) -> str | None:
    """podman's complaint when it cannot run a container with our settings, else None."""
    done = subprocess.run([podman.binary, "run", "--rm", "--network", "host", "--entrypoint", "sh", podman.image,
                           "-c", "echo ok"], capture_output=True, text=True, timeout=60,
                          env=podman.env(base_env))
    if done.returncode == 0 and done.stdout.strip() == "ok":
        return None
    return f"podman cannot run a container here (exit {done.returncode}): {done.stderr.strip()[-400:]}"


def containers(podman: str, job: str = "", image: str = IMAGE) -> list[str]:
    """Containers of `image`, running or not, whose name mentions `job` (however the runner names them)."""
    listed = _podman(podman, "ps", "--all", "--filter", f"ancestor={image}", "--format", "{{.Names}}")
    return [name for name in listed.split() if f"-{job}-" in name or not job]


def remove_containers(podman: str, job: str = "", image: str = IMAGE) -> None:
    for name in containers(podman, job, image):
        subprocess.run([podman, "rm", "--force", "--time", "0", name], capture_output=True, timeout=60)


def _podman(podman: str, *args: str) -> str:
    done = subprocess.run([podman, *args], capture_output=True, text=True, timeout=120)
    if done.returncode != 0:
        raise RuntimeError(f"`podman {' '.join(args)}` failed with exit {done.returncode}: {done.stderr.strip()}")
    return done.stdout


@contextlib.contextmanager
def ready(workdir: Path, image: str = IMAGE, applets: tuple[str, ...] = APPLETS) -> Iterator[Podman]:
    """Podman with `image` built in `workdir` and able to run it, removed afterwards; the test
    skips with the reason when podman is missing or cannot run here, and fails under CI, which
    installs podman with `make tools` and so must be able to run it."""
    import pytest

    reason = missing_tools()
    if reason:
        pytest.skip(reason)
    binary = shutil.which("podman")
    assert binary is not None
    found = Podman(binary=binary, image=image, containers_conf=write_containers_conf(workdir / "containers.conf"))
    try:
        problem = build_problem(found, workdir, applets) or run_problem(found, os.environ)
        if problem and os.environ.get("CI"):
            pytest.fail(f"{problem}; CI installs podman with `make tools`, so it must be able to run it there")
        if problem:
            pytest.skip(problem)
        yield found
    finally:
        remove_image(binary, image)
