"""Where the files spotcron runs but does not import live, found the same way by every caller.

Two folders hold them:

- `vm_images/runner/`: the VM's cloud-init template and the runner scripts (`runtime/cloudinit.py`
  embeds them in a VM's user-data; local mode starts `runner.sh` as a process);
- `functions/`: the Cloud Functions' `main.py` and the `requirements.txt` they install (local mode
  and the test harness build their functions-framework apps from `main.py`; deploy puts both at
  the root of the functions' source archive).

They are found under one of two roots, in this order:

1. `spotcron/_bundled/`, inside the package: a built wheel carries both folders there as package
   data (setup.py copies them in when the wheel is built), so `pipx install .` or a wheel runs
   every command from any directory;
2. the folder that holds the `spotcron/` package: a checkout (or an editable install of one),
   and the deployed functions' source archive, which keeps the checkout's layout.

Nothing else reads these paths from `__file__`.
"""

from __future__ import annotations

from pathlib import Path

from spotcron.core.errors import SpotcronError

PACKAGE = Path(__file__).resolve().parents[1]
BUNDLED = "_bundled"  # under the package: what a wheel carries
RUNNER = "vm_images/runner"
FUNCTIONS = "functions"
# Each folder a wheel carries, and the file that shows it is there. setup.py copies exactly these.
FOLDERS = {RUNNER: "runner.sh", FUNCTIONS: "main.py"}


class MissingAsset(SpotcronError):
    """A packaged folder is in neither place: a wheel built without it, or a partial checkout."""


def roots(package: Path = PACKAGE) -> tuple[Path, Path]:
    """Where the folders are looked for, first match wins: the wheel's copy, then the checkout."""
    return (package / BUNDLED, package.parent)


def folder(name: str, package: Path = PACKAGE) -> Path:
    """The folder `name` (RUNNER or FUNCTIONS) this installation runs."""
    marker = FOLDERS[name]
    candidates = [root / name for root in roots(package)]
    for candidate in candidates:
        if (candidate / marker).is_file():
            return candidate
    looked = " or ".join(str(c / marker) for c in candidates)
    raise MissingAsset(f"spotcron's {name}/ is missing: no {looked}; reinstall spotcron from a wheel "
                       "built from its repository, or run it from a checkout")


def runner_dir(package: Path = PACKAGE) -> Path:
    """vm_images/runner/: cloud-init.yaml, runner.sh and the parts it sources."""
    return folder(RUNNER, package)


def functions_dir(package: Path = PACKAGE) -> Path:
    """functions/: main.py (the entry points) and requirements.txt."""
    return folder(FUNCTIONS, package)
