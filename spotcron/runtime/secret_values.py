"""Where a `{secret: ID}` is read: the one place the notifier (and anything else that needs a
secret's value in a function or in `spotcron up`) looks one up.

Locally a secret is `SPOTCRON_SECRET_<ID>` in the environment (ID upper-cased, `-` as `_`) or a
line `ID=value` in the git-ignored `.spotcron/secrets.env`; on Google Cloud it is the latest
version of Secret Manager secret ID in the stack's project (gcp/secret_access.py), read with the
functions' account. A value is never logged, stored or written to the bucket.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from pathlib import Path

SecretLookup = Callable[[str], str]
SECRETS_FILE = "secrets.env"


def env_name(secret_id: str) -> str:
    return "SPOTCRON_SECRET_" + secret_id.upper().replace("-", "_")


def read_env_file(path: Path) -> dict[str, str]:
    values: dict[str, str] = {}
    if not path.is_file():
        return values
    for line in path.read_text(errors="replace").splitlines():
        line = line.strip()
        if not line or line.startswith("#") or "=" not in line:
            continue
        key, _, value = line.partition("=")
        values[key.strip()] = value.strip().strip('"').strip("'")
    return values


def local_lookup(environ: Mapping[str, str], state_dir: Path) -> SecretLookup:
    def lookup(secret_id: str) -> str:
        value = environ.get(env_name(secret_id))
        if value:
            return value
        file = read_env_file(state_dir / SECRETS_FILE)
        value = file.get(secret_id) or file.get(env_name(secret_id))
        if value:
            return value
        raise LookupError(f"secret {secret_id!r} is not set: export {env_name(secret_id)}=... or add the line "
                          f"{secret_id}=... to {state_dir / SECRETS_FILE}")

    return lookup


def google_lookup(project: str) -> SecretLookup:
    from spotcron.gcp.secret_access import SecretManagerValues

    return SecretManagerValues(project).latest
