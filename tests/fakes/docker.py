#!/usr/bin/env python3
"""A stand-in for the docker CLI, enough for vm_images/runner/runner.sh.

`run` honours --name, -v HOST:CONTAINER, -e KEY=VALUE, --entrypoint and --device: it cannot
bind-mount without privileges, so every argument and env value that names a path under a
mounted container path is rewritten to the host path, then the command is exec'd (so it keeps
the pid, receives signals directly and its exit status is docker's). `stop`, `kill` and `rm`
find the container by name through a pid file; `network inspect/create` remember networks. Every call is appended to $FAKE_DOCKER_LOG as
one JSON line. Unknown options are an error, so a change in what the runner passes is noticed.
"""

from __future__ import annotations

import json
import os
import signal
import sys
import time
from pathlib import Path

VALUE_OPTIONS = {"--name", "-v", "--volume", "-e", "--env", "--entrypoint", "--device", "--network", "--gpus"}
FLAG_OPTIONS = {"--rm", "-i", "--init"}


def state_dir() -> Path:
    path = Path(os.environ.get("FAKE_DOCKER_STATE", "/tmp/fake-docker-state"))
    path.mkdir(parents=True, exist_ok=True)
    return path


def record(argv: list[str]) -> None:
    log = os.environ.get("FAKE_DOCKER_LOG")
    if log:
        with open(log, "a") as handle:
            handle.write(json.dumps({"argv": argv}) + "\n")


def alive(pid: int) -> bool:
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    return stat.rsplit(")", 1)[1].split()[0] != "Z"


def container_pid(name: str) -> int | None:
    try:
        return int((state_dir() / f"{name}.pid").read_text())
    except (OSError, ValueError):
        return None


def rewrite(value: str, mounts: list[tuple[str, str]]) -> str:
    for host, container in mounts:
        if value == container:
            return host
        if value.startswith(container.rstrip("/") + "/"):
            return host + value[len(container.rstrip("/")):]
        if "=" in value:  # --flag=/results/x style arguments
            key, _, rest = value.partition("=")
            if rest == container or rest.startswith(container.rstrip("/") + "/"):
                return f"{key}={rewrite(rest, mounts)}"
    return value


def run(args: list[str]) -> int:
    mounts: list[tuple[str, str]] = []
    env: dict[str, str] = {}
    name = entrypoint = None
    i = 0
    while i < len(args) and args[i].startswith("-"):
        option = args[i]
        if option in FLAG_OPTIONS:
            i += 1
            continue
        if option not in VALUE_OPTIONS or i + 1 >= len(args):
            print(f"fake docker: unknown option {option!r}", file=sys.stderr)
            return 125
        value = args[i + 1]
        i += 2
        if option == "--name":
            name = value
        elif option in ("-v", "--volume"):
            host, container = value.split(":")[:2]
            mounts.append((host, container))
        elif option in ("-e", "--env"):
            key, sep, val = value.partition("=")
            if not sep:
                # docker's `-e NAME`: the value of NAME in docker's own environment; unset there, not set.
                if key in os.environ:
                    env[key] = os.environ[key]
                continue
            env[key] = val
        elif option == "--entrypoint":
            entrypoint = value
    if i >= len(args):
        print("fake docker: no image given", file=sys.stderr)
        return 125
    rest = args[i + 1:]
    command = ([entrypoint] if entrypoint else []) + rest
    if not command:
        print("fake docker: the image's default command is unknown here", file=sys.stderr)
        return 125
    command = [rewrite(a, mounts) for a in command]
    child_env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin")}
    child_env.update({k: rewrite(v, mounts) for k, v in env.items()})
    if name:
        (state_dir() / f"{name}.pid").write_text(str(os.getpid()))
    try:
        os.execvpe(command[0], command, child_env)
    except OSError as exc:
        print(f"fake docker: cannot run {command[0]!r}: {exc}", file=sys.stderr)
        return 127


def stop(args: list[str]) -> int:
    grace = 10.0
    if args[:1] == ["-t"]:
        grace = float(args[1])
        args = args[2:]
    for name in args:
        pid = container_pid(name)
        if pid is None or not alive(pid):
            continue
        os.kill(pid, signal.SIGTERM)
        deadline = time.monotonic() + grace
        while alive(pid) and time.monotonic() < deadline:
            time.sleep(0.05)
        if alive(pid):
            os.kill(pid, signal.SIGKILL)
    return 0


def kill(args: list[str]) -> int:
    for name in args:
        pid = container_pid(name)
        if pid is not None and alive(pid):
            os.kill(pid, signal.SIGKILL)
    return 0


def rm(args: list[str]) -> int:
    names = [a for a in args if not a.startswith("-")]
    kill(names)
    for name in names:
        (state_dir() / f"{name}.pid").unlink(missing_ok=True)
    return 0


def network(args: list[str]) -> int:
    """`network inspect NAME` answers whether `network create [OPTIONS] NAME` made it."""
    if not args or args[0] not in ("inspect", "create") or len(args) < 2:
        print(f"fake docker: unsupported network command {args!r}", file=sys.stderr)
        return 1
    marker = state_dir() / f"network-{args[-1]}"
    if args[0] == "inspect":
        return 0 if marker.exists() else 1
    marker.write_text(json.dumps(args[1:-1]))
    return 0


def main(argv: list[str]) -> int:
    record(argv)
    if not argv:
        return 1
    command, args = argv[0], argv[1:]
    if command == "run":
        return run(args)
    if command == "stop":
        return stop(args)
    if command == "kill":
        return kill(args)
    if command == "rm":
        return rm(args)
    if command == "image" and args[:1] == ["inspect"]:
        return 0 if args[1:] and args[1] in os.environ.get("FAKE_DOCKER_IMAGES", "").split(",") else 1
    if command == "pull":
        return 0
    if command == "network":
        return network(args)
    print(f"fake docker: unsupported command {command!r}", file=sys.stderr)
    return 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
