"""Storing a secret's value in Secret Manager, and listing what the jobs' secrets hold.

The value crosses this module once, on its way into `addVersion` (with its CRC32C, which Secret
Manager checks); no function here returns a value, only names, numbers and states.
"""

from __future__ import annotations

import base64
from collections.abc import Sequence
from dataclasses import dataclass

from spotcron.core.errors import NotFound, SpotcronError
from spotcron.core.secret_refs import SECRET_ID, crc32c, resource
from spotcron.core.settings import Settings
from spotcron.core.spec import JobSpec
from spotcron.gcp.admin.calls import Caller
from spotcron.gcp.admin.clients import Clients

MAX_VALUE_BYTES = 64 << 10  # Secret Manager's limit on a version's payload
LABELS = {"spotcron": "1"}


@dataclass(frozen=True)
class Stored:
    name: str  # projects/P/secrets/S
    version: str  # the number of the version added
    created: bool  # the secret itself was created
    destroyed: tuple[str, ...]  # versions destroyed (--destroy-older)


def store(settings: Settings, clients: Clients, call: Caller, secret: str, data: bytes, *,
          destroy_older: bool = False) -> Stored:
    """Add `data` as the newest version of `secret` (created if missing); optionally destroy the rest."""
    if not data:
        raise SpotcronError("the value is empty; Secret Manager stores no empty version")
    if len(data) > MAX_VALUE_BYTES:
        raise SpotcronError(f"the value is {len(data)} bytes; Secret Manager takes at most 64 KiB per version")
    if not secret.startswith("projects/") and not SECRET_ID.match(secret):
        raise SpotcronError(f"{secret!r} is not a secret id (letters, digits, '-' and '_', at most 255 characters)")
    name = resource(secret, settings.project)
    manager = clients.secret_manager
    created = False
    try:
        call(f"read secret {name}", manager.get_secret, name)
    except NotFound:
        project, _, secret_id = name.removeprefix("projects/").partition("/secrets/")
        call(f"create secret {name}", manager.create_secret, project, secret_id, dict(LABELS))
        created = True
    added = call(f"add a version to {name}", manager.add_version, name, base64.b64encode(data).decode(), crc32c(data))
    number = str(added.get("name", "")).rsplit("/", 1)[-1]
    destroyed = []
    if destroy_older:
        for version in call(f"list the versions of {name}", manager.list_versions, name):
            ident = str(version.get("name", "")).rsplit("/", 1)[-1]
            if ident != number and version.get("state") in ("ENABLED", "DISABLED"):
                call(f"destroy {name} version {ident}", manager.destroy_version, f"{name}/versions/{ident}")
                destroyed.append(ident)
    return Stored(name, number, created, tuple(sorted(destroyed, key=lambda v: int(v) if v.isdigit() else 0)))


@dataclass(frozen=True)
class Listed:
    job: str
    variable: str
    name: str
    pinned: str  # "latest" or a number
    enabled: tuple[str, ...]  # numbers of enabled versions, newest first
    active: int  # versions Secret Manager bills (enabled or disabled)
    problem: str = ""


def listing(settings: Settings, jobs: Sequence[JobSpec], clients: Clients, call: Caller) -> list[Listed]:
    """Each job's secrets with their versions' states (never a value)."""
    rows = []
    cache: dict[str, list[dict] | str] = {}
    for job in jobs:
        for variable, ref in sorted(job.all_secrets().items()):
            name = resource(ref.secret, settings.project)
            if name not in cache:
                try:
                    cache[name] = call(f"list the versions of {name}", clients.secret_manager.list_versions, name)
                except NotFound:
                    cache[name] = "no such secret"
                except SpotcronError as exc:
                    cache[name] = f"cannot be read ({exc})"
            found = cache[name]
            if isinstance(found, str):
                rows.append(Listed(job.name, variable, name, ref.version, (), 0, found))
                continue
            enabled = tuple(str(v.get("name", "")).rsplit("/", 1)[-1] for v in found if v.get("state") == "ENABLED")
            active = sum(1 for v in found if v.get("state") in ("ENABLED", "DISABLED"))
            rows.append(Listed(job.name, variable, name, ref.version, enabled, active))
    return rows
