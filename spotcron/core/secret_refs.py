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

import math
import re
from collections.abc import Mapping
from typing import Any

# Secret Manager's secret id: letters, digits, '-' and '_', at most 255 characters.
SECRET_ID = re.compile(r"^[A-Za-z0-9_-]{1,255}$")
# A project id (6-30: lower-case letters, digits, '-') or a project number.
FULL_NAME = re.compile(r"^projects/([a-z][a-z0-9-]{4,28}[a-z0-9]|[0-9]{1,20})/secrets/([A-Za-z0-9_-]{1,255})$")
# Prefixes of well-known tokens: a value with one of these is a pasted credential, not a name.
TOKEN_PREFIXES = ("ghp_", "gho_", "ghs_", "ghu_", "ghr_", "github_pat_", "sk-", "sk_live_", "sk_test_", "rk_live_",
                  "rk_test_", "whsec_", "xoxb-", "xoxp-", "xoxa-", "xoxs-", "xoxe-", "xapp-", "AKIA", "ASIA", "AIza",
                  "ya29.", "1//", "glpat-", "gldt-", "glrt-", "glsa_", "glc_", "hf_", "npm_", "pypi-", "EAAC",
                  "dop_v1_", "doo_v1_", "dor_v1_", "SG.", "shpat_", "shpss_", "shpca_", "shppa_", "xkeysib-",
                  "sntrys_", "sntryu_", "lin_api_", "figd_", "ntn_", "secret_", "PMAK-", "dapi", "r8_", "gsk_",
                  "pplx-", "sq0atp-", "sq0csp-", "EAAA", "AGE-SECRET-KEY-", "key-", "pat", "ATATT", "AKID",
                  "tskey-", "hvs.", "hvb.", "s.")
# Prefixes too short to judge on their own: they mark a token only when a long random-looking tail follows.
_SHORT_PREFIXES = ("key-", "pat", "secret_", "dapi", "s.", "1//", "AKID")
_HEX_TOKEN = re.compile(r"^[0-9a-fA-F]{32,}$")
_UUID = re.compile(r"^[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}$")
# An env key that names a credential: SkyPilot's deny pattern, in spirit.
CREDENTIAL_KEY = re.compile(r"(TOKEN|SECRET|PASSWORD|PASSWD|PASSPHRASE|API_?KEY|PRIVATE_?KEY|ACCESS_?KEY|"
                            r"CREDENTIAL|(^|_)KEY$|(^|_)AUTH($|_))", re.IGNORECASE)
SET_HINT = "store the value with `spotcron secrets set NAME` (it reads stdin) and write NAME here"
VERSION = re.compile(r"^(latest|[1-9][0-9]{0,9})$")
LOCAL_PREFIX = "SPOTCRON_SECRET_"


def _entropy(text: str) -> float:
    """Shannon entropy in bits per character."""
    counts = [text.count(c) for c in set(text)]
    return -sum(n / len(text) * math.log2(n / len(text)) for n in counts)


def _random_looking(part: str) -> bool:
    """A run of letters and digits that reads as random: a token's body, not a word of a name."""
    return (len(part) >= 20 and bool(re.search(r"[0-9]", part)) and bool(re.search(r"[A-Za-z]", part))
            and _entropy(part) >= 3.5)


def token_like(value: str) -> bool:
    """Whether `value` has the shape of a credential: a known token prefix, a PEM block, a long
    hex string, a UUID (many services' API keys), or a long random-looking run."""
    if value.startswith("-----BEGIN") or _HEX_TOKEN.match(value) or _UUID.match(value):
        return True
    if value.startswith(TOKEN_PREFIXES):
        prefix = next(p for p in TOKEN_PREFIXES if value.startswith(p))
        tail = value[len(prefix):]
        return prefix not in _SHORT_PREFIXES or _random_looking(re.sub(r"[-_.]", "", tail))
    if len(value) >= 32 and re.search(r"[a-z]", value) and re.search(r"[A-Z]", value) \
            and re.search(r"[0-9]", value) and not re.search(r"[-_]", value):
        return True  # a long run of mixed-case letters and digits with no separator
    return any(_random_looking(part) for part in re.split(r"[-_./]", value))


def known_token(value: str) -> bool:
    """Whether `value` starts like a well-known service's token (too sure a sign to only warn)."""
    value = value.strip()
    prefix = next((p for p in TOKEN_PREFIXES if p not in _SHORT_PREFIXES and value.startswith(p)), None)
    return prefix is not None and len(value) - len(prefix) >= 16 and not any(c.isspace() for c in value)


def credential_problem(value: str) -> str | None:
    """Why `value` looks like a secret's value instead of its name; None when it looks like a name.

    The message never quotes `value`: it may be the credential."""
    if FULL_NAME.match(value):
        return None if not token_like(secret_id(value)) else \
            f"looks like a credential, not the name of a secret; {SET_HINT}"
    if len(value) > 255 or token_like(value):
        return f"looks like a credential, not the name of a secret; secrets: takes a Secret Manager name: {SET_HINT}"
    if SECRET_ID.match(value):
        return None
    if value.startswith("projects/"):
        if "/locations/" in value:
            return ("regional secrets are not supported; use a global secret "
                    "projects/PROJECT/secrets/SECRET")
        return "is not a secret name; write projects/PROJECT/secrets/SECRET or a secret id such as bot-token"
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
