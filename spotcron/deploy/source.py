"""The functions' source archive: functions/ at the root, the runtime part of spotcron/, and
vm_images/runner/ (start_job renders the VM's cloud-init from it).

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

# Deploy-time code never runs in a function: leaving it out keeps cold starts and the
# archive small, and keeps the deployer's code off the runtime's import path.
EXCLUDED_PACKAGES = ("spotcron/cli/", "spotcron/deploy/", "spotcron/local/", "spotcron/testing/")
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


def _wanted(rel: str) -> bool:
    parts = rel.split("/")
    if _SKIPPED_PARTS.intersection(parts) or rel.endswith(_SKIPPED_SUFFIXES):
        return False
    return not any(rel.startswith(prefix) for prefix in EXCLUDED_PACKAGES)


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
        if path.is_file() and _wanted(rel):
            entries[rel] = path.read_bytes()
    for folder in ("spotcron", "vm_images/runner"):
        for path in sorted((root / folder).rglob("*")):
            rel = path.relative_to(root).as_posix()
            if path.is_file() and _wanted(rel):
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
