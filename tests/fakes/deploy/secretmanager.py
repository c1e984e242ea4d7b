"""Fake Secret Manager v1 (REST) for deploy and `spotcron secrets`: secrets, versions, IAM policies.

The shapes used (Google's REST reference, projects.secrets and projects.secrets.versions):
POST /v1/projects/P/secrets?secretId=ID {"replication": {"automatic": {}}, "labels"}; GET
/v1/projects/P/secrets/S; GET .../versions?pageSize=N (newest first; each {"name", "state":
ENABLED|DISABLED|DESTROYED, "createTime"}); POST .../secrets/S:addVersion {"payload": {"data":
base64, "dataCrc32c": int64 as string}} (a wrong checksum is INVALID_ARGUMENT); POST
.../versions/N:destroy; GET :getIamPolicy and POST :setIamPolicy {"policy"} on the secret.
A secret's values stay here: no method answers them (the runner's `access` is
tests/fakes/secretmanager.py).
"""

from __future__ import annotations

import base64
import threading
from typing import Any

from spotcron.core.secret_refs import crc32c
from tests.fakes.deploy.common import PolicyStore, json_copy, policy_from_body
from tests.fakes.deploy.http import ApiError, Request, Router

PROJECT = r"/v1/projects/(?P<project>[^/]+)"
SECRET = f"{PROJECT}/secrets/(?P<secret>[^/:]+)"
API = "secretmanager"


class FakeSecretManagerAdmin:
    def __init__(self, project: str, policies: PolicyStore, access: Any = None):
        self.project = project
        self.policies = policies
        self.access = access  # a secret exists only in a project whose Secret Manager API is on
        self.secrets: dict[str, dict[str, Any]] = {}  # full name -> {"labels", "versions": [{name,state,data}]}
        self._lock = threading.Lock()

    def routes(self, router: Router) -> None:
        router.add("POST", f"{PROJECT}/secrets", API, self.create)
        router.add("GET", f"{PROJECT}/secrets", API, self.list_secrets)
        router.add("GET", SECRET, API, self.get)
        router.add("GET", f"{SECRET}/versions", API, self.list_versions)
        router.add("POST", f"{SECRET}:addVersion", API, self.add_version)
        router.add("POST", f"{SECRET}/versions/(?P<version>[0-9]+):destroy", API, self.destroy)
        router.add("GET", f"{SECRET}:getIamPolicy", API, self.get_policy)
        router.add("POST", f"{SECRET}:setIamPolicy", API, self.set_policy)

    # --- for tests -------------------------------------------------------------------------
    def add(self, name: str, *values: bytes, states: tuple[str, ...] = ()) -> None:
        with self._lock:
            secret = self.secrets.setdefault(name, {"labels": {}, "versions": []})
            for index, value in enumerate(values):
                number = len(secret["versions"]) + 1
                secret["versions"].append({"name": f"{name}/versions/{number}",
                                           "state": states[index] if index < len(states) else "ENABLED",
                                           "data": value})
        self.policies.create(name)
        if self.access is not None and name.startswith(f"projects/{self.project}/"):
            self.access.enable_all(["secretmanager.googleapis.com"])

    def readers(self, name: str) -> set[str]:
        policy = self.policies.get(name)
        return {m for b in policy.get("bindings", []) if b["role"] == "roles/secretmanager.secretAccessor"
                for m in b["members"]}

    # --- the API ---------------------------------------------------------------------------
    def _name(self, request: Request) -> str:
        name = f"projects/{request.match['project']}/secrets/{request.match['secret']}"
        with self._lock:
            if name not in self.secrets:
                raise ApiError(404, f"Secret [{name}] not found or has no versions.")
        return name

    def create(self, request: Request) -> tuple[int, Any]:
        secret_id = request.query.get("secretId", "")
        body = request.json()
        if set(body) - {"replication", "labels"} or "replication" not in body:
            raise ApiError(400, "a Secret needs replication (and may have labels), nothing else")
        name = f"projects/{request.match['project']}/secrets/{secret_id}"
        with self._lock:
            if name in self.secrets:
                raise ApiError(409, f"Secret [{name}] already exists.")
            self.secrets[name] = {"labels": dict(body.get("labels") or {}), "versions": []}
        self.policies.create(name)
        return 200, {"name": name, "replication": body["replication"], "labels": body.get("labels") or {}}

    def list_secrets(self, request: Request) -> tuple[int, Any]:
        prefix = f"projects/{request.match['project']}/secrets/"
        with self._lock:
            return 200, {"secrets": [{"name": n, "labels": dict(s["labels"])} for n, s in sorted(self.secrets.items())
                                     if n.startswith(prefix)]}

    def get(self, request: Request) -> tuple[int, Any]:
        name = self._name(request)
        with self._lock:
            return 200, {"name": name, "labels": dict(self.secrets[name]["labels"])}

    def list_versions(self, request: Request) -> tuple[int, Any]:
        name = self._name(request)
        with self._lock:
            versions = [{"name": v["name"], "state": v["state"]} for v in reversed(self.secrets[name]["versions"])]
        return 200, {"versions": versions, "totalSize": len(versions)}

    def add_version(self, request: Request) -> tuple[int, Any]:
        name = self._name(request)
        body = request.json()
        payload = body.get("payload") or {}
        if set(body) != {"payload"} or set(payload) - {"data", "dataCrc32c"}:
            raise ApiError(400, "addVersion takes {payload: {data, dataCrc32c}}")
        data = base64.b64decode(payload.get("data", ""))
        if len(data) > 65536:
            raise ApiError(400, "Secret Payload cannot be larger than 64KiB.")
        if "dataCrc32c" in payload and str(crc32c(data)) != payload["dataCrc32c"]:
            raise ApiError(400, "Checksum mismatch: the payload's data_crc32c does not match its data.")
        with self._lock:
            versions = self.secrets[name]["versions"]
            version = {"name": f"{name}/versions/{len(versions) + 1}", "state": "ENABLED", "data": data}
            versions.append(version)
        return 200, {"name": version["name"], "state": "ENABLED"}

    def destroy(self, request: Request) -> tuple[int, Any]:
        name = self._name(request)
        wanted = f"{name}/versions/{request.match['version']}"
        with self._lock:
            for version in self.secrets[name]["versions"]:
                if version["name"] == wanted:
                    if version["state"] == "DESTROYED":
                        raise ApiError(400, f"Secret Version [{wanted}] is already in DESTROYED state.")
                    version["state"], version["data"] = "DESTROYED", b""
                    return 200, {"name": wanted, "state": "DESTROYED"}
        raise ApiError(404, f"Secret Version [{wanted}] not found.")

    def get_policy(self, request: Request) -> tuple[int, Any]:
        return 200, self.policies.get(self._name(request))

    def set_policy(self, request: Request) -> tuple[int, Any]:
        name = self._name(request)
        return 200, json_copy(self.policies.set(name, policy_from_body(name, request.json())))
