"""The functions' source archive: functions/ at the root, the runtime part of spotcron/, and
vm_images/runner/ (start_job renders the VM's cloud-init from it).

What goes in is an allowlist (`SHIPPED`): a new package ships only once it is named here, so
test support, presentation, local mode and the deployer can never reach the functions by
accident.

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
from spotcron.deploy.resources import SOURCE_PREFIX

# The functions run core, cost, engine, gcp and runtime, and render the runner's cloud-init.
# Everything else (cli, deploy, local, present, testing) stays out: smaller archive, faster cold
# starts, and no test double or deployer code on the runtime's import path.
SHIPPED = ("spotcron/__init__.py", "spotcron/core/", "spotcron/cost/", "spotcron/engine/", "spotcron/gcp/",
           "spotcron/runtime/", "vm_images/runner/")
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
    return not _skipped(rel) and any(rel == entry or (entry.endswith("/") and rel.startswith(entry))
                                     for entry in SHIPPED)


def _collect(root: Path) -> dict[str, bytes]:
    """Archive name → bytes for every file that goes into the archive."""
    functions = root / "functions"
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
    for folder in ("spotcron", "vm_images/runner"):
        for path in sorted((root / folder).rglob("*")):
            rel = path.relative_to(root).as_posix()
            if path.is_file() and _shipped(rel):
                entries[rel] = path.read_bytes()
    return entries


def build_source(root: Path) -> SourceBundle:
    """The archive for the project checked out at `root`; ConfigError if functions/main.py is missing."""
    entries = _collect(root)
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", zipfile.ZIP_DEFLATED) as archive:
        for name in sorted(entries):
            info = zipfile.ZipInfo(name, date_time=_FIXED_TIME)
            info.external_attr = 0o644 << 16
            info.compress_type = zipfile.ZIP_DEFLATED
            archive.writestr(info, entries[name])
    data = buffer.getvalue()
    return SourceBundle(data=data, sha256=hashlib.sha256(data).hexdigest(), files=tuple(sorted(entries)))
