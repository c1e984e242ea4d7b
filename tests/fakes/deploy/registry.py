"""Fake Artifact Registry v1 (REST): repositories, their long-running creates, their IAM policies.

The shapes deploy uses: POST .../repositories?repositoryId=ID with a Repository body answers an
Operation (done on the first poll); GET and PATCH ?updateMask=labels on the repository;
GET :getIamPolicy?options.requestedPolicyVersion=3 and POST :setIamPolicy {"policy"}.
"""

from __future__ import annotations

import itertools
import threading
from typing import Any

from tests.fakes.deploy.common import LongRunningOperations, PolicyStore, json_copy, policy_from_body
from tests.fakes.deploy.http import ApiError, Request, Router

PARENT = r"/v1/(?P<parent>projects/[^/]+/locations/[^/]+)"
REPOSITORY = f"{PARENT}/repositories/(?P<repo>[^/:]+)"
REPOSITORY_TYPE = "type.googleapis.com/google.devtools.artifactregistry.v1.Repository"
# The Repository fields deploy may send; anything else is a 400, as Google's strict parser answers.
WRITABLE = frozenset({"format", "labels", "description"})
FORMATS = frozenset({"DOCKER", "MAVEN", "NPM", "PYTHON", "APT", "YUM", "GO"})


class FakeRegistry(LongRunningOperations):
    def __init__(self, project: str, policies: PolicyStore):
        self.project = project
        self.repositories: dict[str, dict[str, Any]] = {}
        self.operations: dict[str, dict[str, Any]] = {}
        self.policies = policies
        self._lock = threading.Lock()
        self._ids = itertools.count(1)

    def routes(self, router: Router) -> None:
        api = "artifactregistry"
        router.add("POST", f"{PARENT}/repositories", api, self.create)
        router.add("GET", REPOSITORY, api, self.get)
        router.add("PATCH", REPOSITORY, api, self.patch)
        router.add("GET", f"{REPOSITORY}:getIamPolicy", api, self.get_policy)
        router.add("POST", f"{REPOSITORY}:setIamPolicy", api, self.set_policy)
        router.add("GET", f"{PARENT}/operations/(?P<op>[^/:]+)", api, self.get_operation)

    def _check_parent(self, parent: str) -> None:
        if not parent.startswith(f"projects/{self.project}/"):
            raise ApiError(403, f"Permission denied on {parent}")

    def _body(self, request: Request) -> dict[str, Any]:
        body = request.json()
        unknown = set(body) - WRITABLE - {"name"}
        if unknown:
            raise ApiError(400, f"Invalid JSON payload received. Unknown name {sorted(unknown)[0]!r}")
        return body

    def create(self, request: Request) -> tuple[int, Any]:
        parent, repo_id = request.match["parent"], request.query.get("repositoryId", "")
        self._check_parent(parent)
        if not repo_id:
            raise ApiError(400, "repositoryId is required")
        body = self._body(request)
        if body.get("format") not in FORMATS:
            raise ApiError(400, f"format {body.get('format')!r} is not a repository format")
        name = f"{parent}/repositories/{repo_id}"
        with self._lock:
            if name in self.repositories:
                raise ApiError(409, f"the repository already exists: {name}")
            repo = {"name": name, "format": body["format"], "labels": dict(body.get("labels") or {}),
                    "description": body.get("description", "")}
            self.repositories[name] = repo
            operation = f"{parent}/operations/op-{next(self._ids)}"
            self.operations[operation] = {"name": operation, "done": True,
                                          "response": {"@type": REPOSITORY_TYPE, **json_copy(repo)}}
        self.policies.create(name)
        return 200, {"name": operation, "done": False}

    def _repo(self, request: Request) -> str:
        name = f"{request.match['parent']}/repositories/{request.match['repo']}"
        self._check_parent(request.match["parent"])
        with self._lock:
            if name not in self.repositories:
                raise ApiError(404, f"Requested entity was not found: {name}")
        return name

    def get(self, request: Request) -> tuple[int, Any]:
        name = self._repo(request)
        with self._lock:
            return 200, json_copy(self.repositories[name])

    def patch(self, request: Request) -> tuple[int, Any]:
        name = self._repo(request)
        body = self._body(request)
        mask = [p for p in request.query.get("updateMask", "").split(",") if p]
        if not mask or set(mask) - {"labels", "description"}:
            raise ApiError(400, f"updateMask {mask!r}: only labels and description can change")
        with self._lock:
            for field in mask:
                self.repositories[name][field] = json_copy(body.get(field))
            return 200, json_copy(self.repositories[name])

    def get_policy(self, request: Request) -> tuple[int, Any]:
        if request.query.get("options.requestedPolicyVersion") not in (None, "0", "1", "3"):
            raise ApiError(400, "options.requestedPolicyVersion must be 0, 1 or 3")
        return 200, self.policies.get(self._repo(request))

    def set_policy(self, request: Request) -> tuple[int, Any]:
        name = self._repo(request)
        return 200, self.policies.set(name, policy_from_body(name, request.json()))
