"""Secret Manager: a secret's latest value, for the functions (the notifier's webhook URLs).

`GET https://secretmanager.googleapis.com/v1/projects/P/secrets/ID/versions/latest:access`
returns `{"name": ..., "payload": {"data": BASE64}}`; `versions/latest` is an alias of the most
recently created version, and the caller needs `secretmanager.versions.access` on the secret
(https://cloud.google.com/secret-manager/docs/reference/rest/v1/projects.secrets.versions/access).
Values are cached for the life of the instance only, never written anywhere.
"""

from __future__ import annotations

import base64
import threading

from spotcron.gcp.error_map import translated

ENDPOINT = "https://secretmanager.googleapis.com/v1"
TIMEOUT_S = 10.0


class SecretManagerValues:
    def __init__(self, project: str, session=None):
        self.project = project
        self._session = session
        self._cache: dict[str, str] = {}
        self._lock = threading.Lock()

    def _authorized(self):
        if self._session is None:
            import google.auth
            from google.auth.transport.requests import AuthorizedSession

            credentials, _ = google.auth.default(scopes=["https://www.googleapis.com/auth/cloud-platform"])
            self._session = AuthorizedSession(credentials)
        return self._session

    def latest(self, secret_id: str) -> str:
        with self._lock:
            if secret_id in self._cache:
                return self._cache[secret_id]
        url = f"{ENDPOINT}/projects/{self.project}/secrets/{secret_id}/versions/latest:access"
        with translated(f"read secret {secret_id}"):
            response = self._authorized().get(url, timeout=TIMEOUT_S)
        if response.status_code != 200:
            raise LookupError(f"secret {secret_id!r}: Secret Manager answered HTTP {response.status_code} "
                              f"(the functions' account needs roles/secretmanager.secretAccessor on it)")
        value = base64.b64decode(response.json()["payload"]["data"]).decode().strip()
        with self._lock:
            self._cache[secret_id] = value
        return value
