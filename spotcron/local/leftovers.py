"""Each local VM's record in the state dir, so a stack that died without stopping can be cleaned up.

`spotcron up` killed with SIGKILL (or by the OOM killer) runs no cleanup: its runners and jobs
live on. Before starting a runner, local compute writes `vms/NAME/vm.json` (the VM's name, zone
and container runtime), then adds the runner's pid and that process's start time once it runs.
The next stack on the same state dir reads these records before its first sweep and ends every
VM they name; the start time tells the runner apart from a later process that got its pid.

The record sits in the VM's work directory, which a container never mounts (it gets only
results/ and checkpoint/); a job's local command runs as the user running spotcron anyway. It
is still read as untrusted: capped, and anything malformed ends the VM by its name only.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from dataclasses import asdict, dataclass
from pathlib import Path

RECORD = "vm.json"
RECORD_MAX_BYTES = 4096
# In each runner's environment, and kept in its job's: which VM a process belongs to.
MARKER = "SPOTCRON_LOCAL_VM"


@dataclass(frozen=True)
class VmRecord:
    name: str
    zone: str
    runtime: str | None = None
    pid: int | None = None
    started: str | None = None  # the process's start time, as process_started reads it


def write(workdir: Path, record: VmRecord) -> None:
    """Replace the record in one step: a crash mid-write must not leave half of one."""
    workdir.mkdir(parents=True, exist_ok=True)
    partial = workdir / f".{RECORD}.partial"
    partial.write_text(json.dumps(asdict(record)))
    partial.replace(workdir / RECORD)


def read_all(vms_dir: Path) -> list[tuple[Path, VmRecord]]:
    """(work directory, record) of every VM recorded under `vms_dir`; unreadable ones keep only their name."""
    found = []
    for path in sorted(vms_dir.glob(f"*/{RECORD}")) if vms_dir.is_dir() else []:
        workdir = path.parent
        try:
            with open(path, "rb") as handle:
                data = json.loads(handle.read(RECORD_MAX_BYTES))
            pid = data.get("pid")
            # The name is the directory's (ours), never the file's; a runtime is run only if it is
            # the docker or podman on PATH, since whatever the file names would be executed.
            record = VmRecord(name=workdir.name, zone=str(data["zone"]), runtime=_known_runtime(data.get("runtime")),
                              pid=pid if isinstance(pid, int) and pid > 1 else None,
                              started=_text(data.get("started")))
        except (OSError, ValueError, KeyError, TypeError, AttributeError):
            record = VmRecord(name=workdir.name, zone="")
        found.append((workdir, record))
    return found


def _known_runtime(value: object) -> str | None:
    if not isinstance(value, str) or os.path.basename(value) not in ("docker", "podman"):
        return None
    return value if value in ("docker", "podman") or shutil.which(os.path.basename(value)) == value else None


def _text(value: object) -> str | None:
    return value if isinstance(value, str) else None


def process_started(pid: int) -> str | None:
    """When process `pid` started, as an opaque string; None if there is no such process."""
    try:
        with open(f"/proc/{pid}/stat") as handle:
            stat = handle.read()
        # Field 22, counted after the command name (which may hold spaces and parentheses).
        return stat[stat.rfind(")") + 2:].split()[19]
    except FileNotFoundError:
        if os.path.isdir("/proc/self"):
            return None
    except (OSError, IndexError):
        return None
    try:  # no /proc (macOS): ps knows the start time
        out = subprocess.run(["ps", "-o", "lstart=", "-p", str(pid)], capture_output=True, text=True, timeout=10)
    except (OSError, subprocess.TimeoutExpired):
        return None
    return out.stdout.strip() or None


def marked_processes(workdir: Path) -> list[int]:
    """Live processes whose environment names `workdir` as their VM (Linux; [] without /proc).

    A second net under containment: a job can clear its environment, so this finds what
    left a VM's process group without meaning to hide, such as a daemon on a system where no
    PID namespace could be made.
    """
    if not os.path.isdir("/proc/self"):
        return []
    marker = f"{MARKER}={workdir}".encode()
    found = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit() or int(entry) == os.getpid():
            continue
        try:
            with open(f"/proc/{entry}/environ", "rb") as handle:
                if marker not in handle.read().split(b"\0"):
                    continue
            with open(f"/proc/{entry}/stat") as handle:
                stat = handle.read()
        except OSError:
            continue  # gone since the listing, or not ours to read
        if stat[stat.rfind(")") + 2:].split()[0] != "Z":
            found.append(int(entry))
    return found
