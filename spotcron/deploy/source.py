"""The functions' source archive: functions/ at the root, the runtime part of spotcron/, and
vm_images/runner/ (start_job renders the VM's cloud-init from it), in a checkout's layout
whether they come from a checkout or from a wheel's packaged copies (runtime/assets.py).

What goes in is an allowlist (`SHIPPED`, less `NOT_SHIPPED`): a new package ships only once it
is named here, so test support, presentation, local mode and the deployer (its Google side in
gcp/admin/ included) can never reach the functions by accident. Of those packages' modules, only
the ones the functions' entry points can import (at the top or inside a function, read by
`deploy/imports.py`) go in: the job file loader, the cron describer and the file editor are the
CLI's, and a cold start never pays to unpack them.

The zip is byte-for-byte reproducible (sorted entries, fixed timestamps and modes), so its
SHA-256 names it: `deploy/source-SHA.zip` exists in the bucket exactly when this code was
uploaded before, and the functions are rebuilt only when the code really changed.
"""

from __future__ import annotations

import hashlib
import io
import zipfile
from dataclasses import dataclass
from pathlib import Path

from spotcron.core.errors import ConfigError, Problem
from spotcron.deploy.imports import imported_names
from spotcron.deploy.resources import SOURCE_PREFIX
from spotcron.runtime import assets

# The functions run core, cost, engine, gcp and runtime, and render the runner's cloud-init.
# Everything else (cli, deploy, local, present, testing) stays out: smaller archive, faster cold
# starts, and no test double or deployer code on the runtime's import path. Of cost, only what
# prices a run as it ends: the monthly projection (cost/projection.py) is for `spotcron cost`.
RUN_COST = ("spotcron/cost/__init__.py", "spotcron/cost/billing.py", "spotcron/cost/prices.py",
            "spotcron/cost/transfer.py", "spotcron/cost/data/")
SHIPPED = ("spotcron/__init__.py", "spotcron/core/", *RUN_COST, "spotcron/engine/", "spotcron/gcp/",
           "spotcron/runtime/", "vm_images/runner/")
# Folders inside a shipped one that stay out all the same: gcp/admin is deploy's side of Google.
NOT_SHIPPED = ("spotcron/gcp/admin/",)
_SKIPPED_PARTS = frozenset({"__pycache__", ".pytest_cache", ".ruff_cache"})
_SKIPPED_SUFFIXES = (".pyc", ".pyo")
_FIXED_TIME = (1980, 1, 1, 0, 0, 0)



@dataclass(frozen=True)
class SourceBundle:
    data: bytes
    sha256: str
    files: tuple[str, ...]

    @property
    def object_name(self) -> str:
        return f"{SOURCE_PREFIX}{self.sha256[:16]}.zip"


def _skipped(rel: str) -> bool:
    return bool(_SKIPPED_PARTS.intersection(rel.split("/"))) or rel.endswith(_SKIPPED_SUFFIXES)


def _shipped(rel: str) -> bool:
    return not _skipped(rel) and not rel.startswith(NOT_SHIPPED) \
        and any(rel == entry or (entry.endswith("/") and rel.startswith(entry)) for entry in SHIPPED)


@dataclass(frozen=True)
class SourceTree:
    """Where the archive's three parts are read from: the functions' folder (its files go to the
    archive's root), the spotcron package, and the VM runner. Their archive names are the same
    whichever layout they come from, so a wheel install and a checkout of the same code upload
    the same archive."""

    functions: Path
    package: Path
    runner: Path

    @classmethod
    def checkout(cls, root: Path) -> SourceTree:
        """functions/, spotcron/ and vm_images/runner/ side by side under `root`."""
        return cls(root / assets.FUNCTIONS, root / "spotcron", root / assets.RUNNER)

    @classmethod
    def installed(cls) -> SourceTree:
        """This installation's: the wheel's packaged copies, or the checkout it runs from."""
        return cls(assets.functions_dir(), assets.PACKAGE, assets.runner_dir())


def _collect(tree: SourceTree) -> dict[str, bytes]:
    """Archive name → bytes for every file that goes into the archive."""
    functions = tree.functions
    if not (functions / "main.py").is_file():
        raise ConfigError([Problem(str(functions / "main.py"), None, "",
                                   "missing: the functions' entry points (start_job, sweep, job_done) live there")])
    if not (functions / "requirements.txt").is_file():
        raise ConfigError([Problem(str(functions / "requirements.txt"), None, "",
                                   "missing: the packages the deployed functions install")])
    entries: dict[str, bytes] = {}
    for path in sorted(functions.rglob("*")):
        rel = path.relative_to(functions).as_posix()
        if path.is_file() and not _skipped(rel):
            entries[rel] = path.read_bytes()
    for folder, name in ((tree.package, "spotcron"), (tree.runner, assets.RUNNER)):
        for path in sorted(folder.rglob("*")):
            rel = f"{name}/{path.relative_to(folder).as_posix()}"
            if path.is_file() and _shipped(rel):
                entries[rel] = path.read_bytes()
    return _reachable(entries)


def _module_of(name: str) -> str | None:
    """The module an archive entry holds (`spotcron/core/__init__.py` → spotcron.core), or None."""
    if not name.endswith(".py"):
        return None
    parts = name[: -len(".py")].split("/")
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _reachable(entries: dict[str, bytes]) -> dict[str, bytes]:
    """`entries` less the spotcron modules no entry point in functions/ can import."""
    modules = {module: name for name in entries if (module := _module_of(name)) is not None}
    todo = [module for module, name in modules.items() if "/" not in name]  # functions/ at the root
    seen: set[str] = set()
    while todo:
        module = todo.pop()
        if module in seen:
            continue
        seen.add(module)
        name = modules[module]
        for imported, _ in imported_names(entries[name], module, is_package=name.endswith("/__init__.py"),
                                          filename=name):
            parts = imported.split(".")
            # Importing a.b.c runs a, a.b and a.b.c: each of ours among them is needed.
            todo += [m for i in range(1, len(parts) + 1) if (m := ".".join(parts[:i])) in modules]
    return {name: data for name, data in entries.items()
            if not name.startswith("spotcron/") or (_module_of(name) or "spotcron") in seen
            or not name.endswith(".py")}


def build_source(root: Path | SourceTree | None = None) -> SourceBundle:
    """The archive for the checkout at `root` (a SourceTree: its parts wherever they are; left out:
    this installation's own code); ConfigError if functions/main.py is missing."""
    tree = SourceTree.installed() if root is None else root if isinstance(root, SourceTree) \
        else SourceTree.checkout(root)
    entries = _collect(tree)
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", zipfile.ZIP_DEFLATED) as archive:
        for name in sorted(entries):
            info = zipfile.ZipInfo(name, date_time=_FIXED_TIME)
            info.external_attr = 0o644 << 16
            info.compress_type = zipfile.ZIP_DEFLATED
            archive.writestr(info, entries[name])
    data = buffer.getvalue()
    return SourceBundle(data=data, sha256=hashlib.sha256(data).hexdigest(), files=tuple(sorted(entries)))
