"""A fake Secret Manager: secrets with numbered versions (enabled, disabled, destroyed), an IAM
policy per secret, and callers known by their access tokens. Served over HTTP by the local
`SecretAccessServer`; every request and answer is checked against the published shapes
(tests/fakes/secretmanager_schema.py), and a mismatch is recorded in `shape_problems`.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from spotcron.local.secret_manager import Answer, SecretAccessServer, error, payload
from tests.fakes.secretmanager_schema import ERROR, RESPONSE, request_problems, shape_problems

ACCESSOR = "roles/secretmanager.secretAccessor"


@dataclass
class FakeSecret:
    versions: dict[int, tuple[bytes, str]] = field(default_factory=dict)  # number -> (data, ENABLED|DISABLED|DESTROYED)
    accessors: set[str] = field(default_factory=set)  # IAM members holding ACCESSOR on the secret
    accesses: int = 0


class FakeSecretManager:
    def __init__(self) -> None:
        self.secrets: dict[str, FakeSecret] = {}  # projects/P/secrets/S -> secret
        self.tokens: dict[str, str] = {}  # access token -> member (serviceAccount:EMAIL)
        self.corrupt = False  # answer with a wrong dataCrc32c
        self.shape_problems: list[str] = []
        self.server = SecretAccessServer(self.resolve)

    def add(self, name: str, *values: bytes, readers: tuple[str, ...] = ()) -> FakeSecret:
        secret = self.secrets.setdefault(name, FakeSecret())
        for value in values:
            secret.versions[len(secret.versions) + 1] = (value, "ENABLED")
        secret.accessors.update(f"serviceAccount:{email}" for email in readers)
        return secret

    def resolve(self, token: str, project: str, secret_id: str, version: str) -> Answer:
        answer = self._resolve(token, project, secret_id, version)
        self.shape_problems += shape_problems(answer.body, RESPONSE if answer.status == 200 else ERROR)
        return answer

    def _resolve(self, token: str, project: str, secret_id: str, version: str) -> Answer:
        member = self.tokens.get(token)
        if member is None:
            return error(401, "UNAUTHENTICATED", "Request had invalid authentication credentials.")
        name = f"projects/{project}/secrets/{secret_id}"
        secret = self.secrets.get(name)
        resource = f"{name}/versions/{version}"
        if secret is None or member not in secret.accessors:
            # Google answers 403 whether or not the secret exists, to a caller without the permission.
            return error(403, "PERMISSION_DENIED", f"Permission 'secretmanager.versions.access' denied for "
                                                   f"resource '{resource}' (or it may not exist).")
        if version == "latest":
            enabled = [n for n, (_, state) in secret.versions.items() if state == "ENABLED"]
            if not enabled:
                return error(404, "NOT_FOUND", f"Secret Version [{resource}] not found.")
            number = max(enabled)
        elif version.isdigit() and int(version) in secret.versions:
            number = int(version)
        else:
            return error(404, "NOT_FOUND", f"Secret Version [{resource}] not found.")
        data, state = secret.versions[number]
        if state != "ENABLED":
            return error(400, "FAILED_PRECONDITION", f"Secret Version [{name}/versions/{number}] is in {state} state.")
        secret.accesses += 1
        answer = payload(f"{name}/versions/{number}", data)
        if self.corrupt:
            answer.body["payload"]["dataCrc32c"] = str((int(answer.body["payload"]["dataCrc32c"]) + 1) % (1 << 32))
        return answer

    def request_shape_problems(self) -> list[str]:
        """Every request the server saw, checked against the published method."""
        problems = []
        for method, path, headers, body in self.server.requests:
            problems += request_problems(method, path, headers, body)
        return problems + self.shape_problems

    def __enter__(self) -> FakeSecretManager:
        self.server.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.server.stop()

    @property
    def url(self) -> str:
        return self.server.url

