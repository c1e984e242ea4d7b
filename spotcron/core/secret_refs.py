"""A job's `secrets:`: names of Secret Manager secrets, never their values.

`secrets:` maps an environment variable (or a file's label) to a secret: `NAME: SECRET` for its
newest enabled version, `NAME: {secret: SECRET, version: N}` to pin one, `file: /abs/path` to
deliver it as a read-only file instead of a variable. SECRET is a secret id of the stack's
project or a full `projects/P/secrets/S` name. Only these names travel (job file, deployed
spec, descriptor, run record); the value is read by the runner at boot (docs/jobs.md).

A value that looks like a credential rather than a name is refused: the commonest mistake is
pasting the token itself.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

# Secret Manager's secret id: letters, digits, '-' and '_', at most 255 characters.
SECRET_ID = re.compile(r"^[A-Za-z0-9_-]{1,255}$")
# A project id (6-30: lower-case letters, digits, '-') or a project number.
FULL_NAME = re.compile(r"^projects/([a-z][a-z0-9-]{4,28}[a-z0-9]|[0-9]{1,20})/secrets/([A-Za-z0-9_-]{1,255})$")
# Prefixes of well-known tokens: a value with one of these is a pasted credential, not a name.
TOKEN_PREFIXES = ("ghp_", "gho_", "ghs_", "ghu_", "github_pat_", "sk-", "sk_live_", "sk_test_", "xoxb-", "xoxp-",
                  "xapp-", "AKIA", "ASIA", "AIza", "ya29.", "glpat-", "hf_", "npm_", "pypi-", "EAAC")
# An env key that names a credential: SkyPilot's deny pattern, in spirit.
CREDENTIAL_KEY = re.compile(r"(TOKEN|SECRET|PASSWORD|PASSWD|PASSPHRASE|API_?KEY|PRIVATE_?KEY|ACCESS_?KEY|"
                            r"CREDENTIAL|(^|_)KEY$|(^|_)AUTH($|_))", re.IGNORECASE)
SET_HINT = "store the value with `spotcron secrets set NAME` (it reads stdin) and write NAME here"
VERSION = re.compile(r"^(latest|[1-9][0-9]{0,9})$")
LOCAL_PREFIX = "SPOTCRON_SECRET_"


def credential_problem(value: str) -> str | None:
    """Why `value` looks like a secret's value instead of its name; None when it looks like a name."""
    if FULL_NAME.match(value):
        return None
    if value.startswith(TOKEN_PREFIXES) or value.startswith("-----BEGIN") or len(value) > 255:
        return f"looks like a credential, not the name of a secret; secrets: takes a Secret Manager name: {SET_HINT}"
    if SECRET_ID.match(value):
        # A long run of mixed-case letters and digits with no separator is a token, not a name.
        if len(value) >= 32 and re.search(r"[a-z]", value) and re.search(r"[A-Z]", value) \
                and re.search(r"[0-9]", value) and not re.search(r"[-_]", value):
            return f"looks like a credential, not the name of a secret; {SET_HINT}"
        return None
    if value.startswith("projects/"):
        if "/locations/" in value:
            return (f"{value!r}: regional secrets are not supported; use a global secret "
                    f"projects/PROJECT/secrets/SECRET")
        return f"{value!r} is not a secret name; write projects/PROJECT/secrets/SECRET or a secret id such as bot-token"
    return (f"is not the name of a secret (letters, digits, '-' and '_', at most 255 characters, or "
            f"projects/PROJECT/secrets/SECRET) and may be a credential; {SET_HINT}")


def secret_text(value: Any) -> Any:
    """`NAME: SECRET` is short for `NAME: {secret: SECRET}`."""
    return {"secret": value} if isinstance(value, str) else value


def resource(secret: str, project: str) -> str:
    """The secret's full name: `projects/P/secrets/S`."""
    return secret if secret.startswith("projects/") else f"projects/{project}/secrets/{secret}"


def secret_id(secret: str) -> str:
    """The id part of a secret's name: `bot-token` for both `bot-token` and `projects/p/secrets/bot-token`."""
    return secret.rsplit("/", 1)[-1]


def local_variable(secret: str) -> str:
    """The variable local mode reads a secret's value from: bot-token -> SPOTCRON_SECRET_BOT_TOKEN."""
    return LOCAL_PREFIX + secret_id(secret).upper().replace("-", "_")


def credential_env_keys(env: Mapping[str, str]) -> list[str]:
    """Keys of `env` whose name says they hold a credential (which belongs in `secrets:`)."""
    return [key for key in env if CREDENTIAL_KEY.search(key)]


def file_problem(path: str, results: str, checkpoint: str | None) -> str | None:
    """Why a secret cannot be delivered at `path` in the container; None when it can."""
    if not path.startswith("/") or path.rstrip("/") == "" or path.endswith("/") or "/../" in f"{path}/" \
            or any(c in path for c in "\n\r\x00:,"):
        return f"{path!r} is not an absolute file path in the container; write e.g. /run/secrets/token"
    for directory, what in ((results, "results"), (checkpoint, "checkpoint")):
        if directory and (path + "/").startswith(directory.rstrip("/") + "/"):
            return (f"{path!r} is inside the {what} directory {directory!r}, which is uploaded to the bucket; "
                    f"deliver the secret elsewhere, e.g. /run/secrets/{path.rsplit('/', 1)[-1]}")
    return None


def crc32c(data: bytes) -> int:
    """CRC32C (Castagnoli), as Secret Manager computes a payload's `dataCrc32c`."""
    table = _crc32c_table()
    crc = 0xFFFFFFFF
    for byte in data:
        crc = table[(crc ^ byte) & 0xFF] ^ (crc >> 8)
    return crc ^ 0xFFFFFFFF


_TABLE: list[int] = []


def _crc32c_table() -> list[int]:
    if not _TABLE:
        for index in range(256):
            crc = index
            for _ in range(8):
                crc = (crc >> 1) ^ (0x82F63B78 if crc & 1 else 0)
            _TABLE.append(crc)
    return _TABLE
