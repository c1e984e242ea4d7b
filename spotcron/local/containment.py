"""What keeps every process of a local "VM" inside it, so that deleting the VM ends them all.

A process group is not enough: a job that daemonizes (double fork, then setsid) leaves its group
and would outlive the VM, as a process on a real VM never does. A job run by docker or podman
is contained by its container. For a job's local command, on Linux each VM's runner starts
as the first process of its own PID namespace (`unshare --pid --fork --kill-child`): when that
process dies the kernel kills everything else in the namespace, setsid or not, and
`--kill-child` makes the namespace die with the `unshare` we start and delete. Root needs no
more; other users get a user namespace too (`--user --map-root-user`), which Linux lets
unprivileged users create.

Where no namespace can be made (macOS; a Linux that forbids user namespaces or lacks `unshare`)
a VM is contained by its process group only, and `spotcron up` says so when it starts.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass

PID_NAMESPACE = "pid-namespace"
PROCESS_GROUP = "process-group"


@dataclass(frozen=True)
class Containment:
    kind: str
    prefix: tuple[str, ...]  # put before the runner's command line
    statement: str  # one line for `spotcron up`'s startup, in words a user understands
    user_namespace: bool = False

    @property
    def whole(self) -> bool:
        return self.kind == PID_NAMESPACE

    def command(self, argv: Sequence[str], *, runtime: str | None) -> list[str]:
        """The command that starts `argv` contained; `runtime`: the VM's container runtime, if any.

        A job run by docker or podman is in the container's own PID namespace already, and
        deleting the VM kills and removes the container. Such a runner gets no namespace of
        ours: podman keeps each container's network namespace as a mount under /run/netns,
        which a private mount namespace (needed for the namespace's own /proc) would hide from
        every later podman call, and rootless podman makes user namespaces of its own.
        """
        if not self.whole or runtime is not None:
            return list(argv)
        return [*self.prefix, *argv]


Probe = Callable[[Sequence[str]], bool]


def _runs(argv: Sequence[str]) -> bool:
    try:
        return subprocess.run([*argv, "true"], capture_output=True, timeout=20).returncode == 0
    except (OSError, subprocess.TimeoutExpired):
        return False


def detect(*, platform: str = sys.platform, is_root: bool | None = None,
           which: Callable[[str], str | None] = shutil.which, probe: Probe = _runs) -> Containment:
    """The strongest containment this machine gives, tried once (one short-lived process)."""
    fallback = ("local VMs are contained by their process group only: a job that daemonizes "
                "(setsid) can outlive its VM")
    if not platform.startswith("linux"):
        return Containment(PROCESS_GROUP, (), f"{fallback} on {platform} (Linux PID namespaces are not available)")
    unshare = which("unshare")
    if unshare is None:
        return Containment(PROCESS_GROUP, (), f"{fallback}: `unshare` (util-linux) is not installed")
    if is_root is None:
        is_root = os.geteuid() == 0
    user = () if is_root else ("--user", "--map-root-user")
    prefix = (unshare, *user, "--pid", "--fork", "--mount-proc", "--kill-child", "--")
    if not probe(prefix):
        why = "this system does not let this user create a PID namespace" + (
            "" if is_root else " (are unprivileged user namespaces disabled? see sysctl kernel.unprivileged_userns_clone)")
        return Containment(PROCESS_GROUP, (), f"{fallback}: {why}")
    return Containment(PID_NAMESPACE, prefix, "local VMs run in PID namespaces of their own: deleting one ends "
                       "every process its job started", user_namespace=not is_root)


NO_NETWORK_PREFIXES = (("unshare", "--net", "--"), ("unshare", "--user", "--map-current-user", "--net", "--"),
                       ("unshare", "--user", "--map-root-user", "--net", "--"))


def network_statement(*, platform: str = sys.platform, which: Callable[[str], str | None] = shutil.which,
                      probe: Probe = _runs) -> str:
    """One line for `spotcron up`: whether a local job without `internet: true` loses its network,
    as it would on its VM (which has no external address), or keeps it here."""
    if platform.startswith("linux") and which("unshare") is not None:
        if any(probe(prefix) for prefix in NO_NETWORK_PREFIXES):
            return ("jobs without internet: true run without a network (their own network namespace), as their "
                    "VMs have no route outside Google")
        why = "this system lets no process leave the network (unshare --net failed)"
    else:
        why = (f"Linux network namespaces are not available on {platform}" if not platform.startswith("linux")
               else "`unshare` (util-linux) is not installed")
    return (f"warning: {why}: jobs without internet: true reach the internet here, which their VMs could not; "
            f"write internet: true on a job that needs it")
