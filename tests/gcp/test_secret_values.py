"""Where a `{secret: ID}` is read: locally from the environment or .spotcron/secrets.env, on Google
Cloud from Secret Manager's `versions/latest:access` (a recorded response shape, no network)."""

from __future__ import annotations

import base64

import pytest

from spotcron.core.secret_refs import crc32c
from spotcron.gcp.secret_access import SECRETS_API, SecretManagerValues
from spotcron.runtime.secret_values import env_name, local_lookup


class Response:
    def __init__(self, status: int, body: dict):
        self.status_code, self._body = status, body

    def json(self) -> dict:
        return self._body

    @property
    def content(self) -> bytes:
        import json

        return json.dumps(self._body).encode()


class Session:
    """google-auth's AuthorizedSession as SecretManagerValues uses it: GET only."""

    def __init__(self, values: dict[str, str]):
        self.values, self.urls = values, []

    def get(self, url: str, timeout: float) -> Response:
        self.urls.append(url)
        secret = url.split("/secrets/")[1].split("/")[0]
        if secret not in self.values:
            return Response(404, {"error": {"code": 404, "status": "NOT_FOUND"}})
        raw = self.values[secret].encode()
        data = base64.b64encode(raw).decode()
        return Response(200, {"name": f"projects/123/secrets/{secret}/versions/3",
                              "payload": {"data": data, "dataCrc32c": str(crc32c(raw))}})


def test_secret_manager_latest_value_is_read_once_per_instance():
    session = Session({"team-hook": "https://hooks.slack.com/services/T/B/x\n"})
    values = SecretManagerValues("proj", session=session)
    assert values.latest("team-hook") == "https://hooks.slack.com/services/T/B/x"
    assert values.latest("team-hook") == "https://hooks.slack.com/services/T/B/x"
    assert session.urls == [f"{SECRETS_API}/projects/proj/secrets/team-hook/versions/latest:access"]
    with pytest.raises(LookupError, match="roles/secretmanager.secretAccessor"):
        values.latest("missing")


def test_local_secrets_come_from_the_environment_then_the_state_dirs_file(tmp_path):
    (tmp_path / "secrets.env").write_text("# comment\nfile-hook=http://127.0.0.1:9/file\n")
    lookup = local_lookup({env_name("env-hook"): "http://127.0.0.1:9/env"}, tmp_path)
    assert env_name("env-hook") == "SPOTCRON_SECRET_ENV_HOOK"
    assert lookup("env-hook") == "http://127.0.0.1:9/env"
    assert lookup("file-hook") == "http://127.0.0.1:9/file"
    with pytest.raises(LookupError, match="export SPOTCRON_SECRET_NOPE"):
        lookup("nope")
