"""Reading one secret's value where spotcron's own code needs it (a notification's webhook URL):
`versions/V:access` on Secret Manager's REST API with the caller's credentials, the payload's
CRC32C checked. The runner reads job secrets itself (vm_images/runner/secrets.sh); this is for
the functions, whose account must hold roles/secretmanager.secretAccessor on that secret.

`read_secret` never logs or keeps the value; a failure says which secret and why.
"""

from __future__ import annotations

import base64
from typing import Any

from spotcron.core.errors import SpotcronError
from spotcron.core.secret_refs import crc32c, resource

SECRETS_API = "https://secretmanager.googleapis.com/v1"
MAX_ANSWER_BYTES = 128 << 10  # a 64 KiB payload, base64'd, and its envelope


class SecretUnavailable(SpotcronError):
    """The secret could not be read: missing, not permitted, disabled, or damaged on the way."""


def read_secret(secret: str, project: str, version: str = "latest", *, session: Any = None,
                base_url: str = SECRETS_API, timeout: float = 10.0) -> tuple[bytes, str]:
    """(the value, the version number read) of `secret` (an id of `project` or projects/P/secrets/S).

    `session`: a requests-like session that adds the caller's credentials (default: an
    AuthorizedSession on Application Default Credentials).
    """
    name = f"{resource(secret, project)}/versions/{version}"
    if session is None:
        import google.auth
        from google.auth.transport.requests import AuthorizedSession

        credentials, _ = google.auth.default(scopes=["https://www.googleapis.com/auth/cloud-platform"])
        session = AuthorizedSession(credentials)
    try:
        response = session.get(f"{base_url.rstrip('/')}/{name}:access", timeout=timeout)
    except Exception as exc:  # noqa: BLE001 - any transport failure is "unavailable", said with its kind
        raise SecretUnavailable(f"secret {name}: Secret Manager did not answer ({type(exc).__name__})") from None
    if response.status_code != 200:
        raise SecretUnavailable(f"secret {name}: HTTP {response.status_code}"
                                + {403: " (the caller may not access it)", 404: " (no such secret or version)",
                                   400: " (the version is disabled or destroyed)"}.get(response.status_code, ""))
    if len(response.content) > MAX_ANSWER_BYTES:
        raise SecretUnavailable(f"secret {name}: the answer is larger than a secret can be")
    try:
        body = response.json()
        data = base64.b64decode(body["payload"]["data"], validate=True)
        expected = int(body["payload"]["dataCrc32c"])
        number = str(body.get("name", name)).rsplit("/", 1)[-1]
    except (ValueError, KeyError, TypeError):
        raise SecretUnavailable(f"secret {name}: the answer is not an AccessSecretVersionResponse") from None
    if crc32c(data) != expected:
        raise SecretUnavailable(f"secret {name}: the payload arrived damaged (CRC32C mismatch)")
    return data, number


class SecretManagerValues:
    """Secret values for the functions' own use (a `notify:` webhook held in a secret), read with
    `read_secret` and kept for the life of the instance only, never written anywhere."""

    def __init__(self, project: str, session: Any = None):
        import threading

        self.project = project
        self._session = session
        self._cache: dict[str, str] = {}
        self._lock = threading.Lock()

    def latest(self, secret_id: str) -> str:
        with self._lock:
            if secret_id in self._cache:
                return self._cache[secret_id]
        try:
            data, _ = read_secret(secret_id, self.project, session=self._session)
        except SecretUnavailable as exc:
            raise LookupError(f"{exc} (the functions' account needs roles/secretmanager.secretAccessor on it)") from None
        value = data.decode("utf-8", errors="replace").strip()
        with self._lock:
            self._cache[secret_id] = value
        return value
