"""Fake Artifact Registry v1 (REST): repositories, their long-running creates, their IAM policies.

The shapes deploy uses: POST .../repositories?repositoryId=ID with a Repository body answers an
Operation (done on the first poll); GET and PATCH ?updateMask=labels on the repository;
GET :getIamPolicy?options.requestedPolicyVersion=3 and POST :setIamPolicy {"policy"}.

`cleanupPolicies` is checked as Google documents it
(https://cloud.google.com/artifact-registry/docs/repositories/cleanup-policy and the Repository
resource): a map of at most 10 policies keyed by their `id` (under 128 characters), each with an
`action` of DELETE or KEEP and either a `condition` (tagState TAGGED/UNTAGGED/ANY, durations such as
`olderThan` in seconds, "2592000s") or, for KEEP only, `mostRecentVersions` with a positive
`keepCount`, never both. Artifact Registry applies them in a background job "within
approximately one day"; `cleanup(now_s)` is that job: each package keeps the versions a KEEP
policy names, and loses those a DELETE policy matches, unless the repository is in dry run.

A repository id is lower-case letters, digits and hyphens, starts with a letter, ends with a letter
or a digit, and is 63 characters at most
(https://cloud.google.com/artifact-registry/docs/repositories/create-repos); another is a 400.
"""

from __future__ import annotations

import itertools
import re
import threading
from typing import Any

from tests.fakes.deploy.common import LongRunningOperations, PolicyStore, json_copy, policy_from_body
from tests.fakes.deploy.http import ApiError, Request, Router

PARENT = r"/v1/(?P<parent>projects/[^/]+/locations/[^/]+)"
REPOSITORY = f"{PARENT}/repositories/(?P<repo>[^/:]+)"
REPOSITORY_TYPE = "type.googleapis.com/google.devtools.artifactregistry.v1.Repository"
# The Repository fields deploy may send; anything else is a 400, as Google's strict parser answers.
WRITABLE = frozenset({"format", "labels", "description", "cleanupPolicies", "cleanupPolicyDryRun"})
DURATION = re.compile(r"^\d+(\.\d+)?s$")
CONDITION = frozenset({"tagState", "tagPrefixes", "versionNamePrefixes", "packageNamePrefixes", "olderThan",
                       "newerThan"})
FORMATS = frozenset({"DOCKER", "MAVEN", "NPM", "PYTHON", "APT", "YUM", "GO"})
_REPOSITORY_ID = re.compile(r"^[a-z](?:[a-z0-9-]{0,61}[a-z0-9])?$")


class FakeRegistry(LongRunningOperations):
    def __init__(self, project: str, policies: PolicyStore):
        self.project = project
        self.repositories: dict[str, dict[str, Any]] = {}
        # repository -> package -> [(version, pushed at, tags)], oldest first
        self.versions: dict[str, dict[str, list[tuple[str, float, tuple[str, ...]]]]] = {}
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
        self._check_cleanup(body.get("cleanupPolicies"))
        if not isinstance(body.get("cleanupPolicyDryRun", False), bool):
            raise ApiError(400, "Invalid value at 'repository.cleanup_policy_dry_run'")
        return body

    @staticmethod
    def _check_cleanup(policies: Any) -> None:
        if policies is None:
            return
        if not isinstance(policies, dict) or len(policies) > 10:
            raise ApiError(400, "cleanupPolicies: a map of at most 10 policies")
        for key, policy in policies.items():
            where = f"cleanupPolicies[{key!r}]"
            if not isinstance(policy, dict) or set(policy) - {"id", "action", "condition", "mostRecentVersions"}:
                raise ApiError(400, f"Invalid JSON payload received. {where}: unknown field")
            if len(key) >= 128 or policy.get("id", key) != key:
                raise ApiError(400, f"{where}: the id must be the map key, under 128 characters")
            if policy.get("action") not in ("DELETE", "KEEP"):
                raise ApiError(400, f"{where}.action: DELETE or KEEP, not {policy.get('action')!r}")
            condition, recent = policy.get("condition"), policy.get("mostRecentVersions")
            if (condition is None) == (recent is None):
                raise ApiError(400, f"{where}: exactly one of condition and mostRecentVersions")
            if recent is not None and (policy["action"] != "KEEP" or set(recent) - {"keepCount", "packageNamePrefixes"}
                                       or not isinstance(recent.get("keepCount"), int) or recent["keepCount"] < 1):
                raise ApiError(400, f"{where}.mostRecentVersions: a KEEP policy's positive keepCount")
            if condition is not None:
                if set(condition) - CONDITION or condition.get("tagState", "ANY") not in ("TAGGED", "UNTAGGED", "ANY"):
                    raise ApiError(400, f"{where}.condition: {condition}")
                for field in ("olderThan", "newerThan"):
                    if field in condition and not DURATION.match(str(condition[field])):
                        raise ApiError(400, f"{where}.condition.{field}: a duration in seconds, such as '2592000s'")

    def push(self, repository: str, package: str, version: str, at_s: float, tags: tuple[str, ...] = ()) -> None:
        """A pushed image version (what a build or `docker push` adds)."""
        with self._lock:
            self.versions.setdefault(repository, {}).setdefault(package, []).append((version, at_s, tags))

    def cleanup(self, now_s: float) -> None:
        """Artifact Registry's periodic cleanup: KEEP wins over DELETE; dry run deletes nothing."""
        with self._lock:
            for name, packages in self.versions.items():
                repo = self.repositories.get(name, {})
                policies = list(dict(repo.get("cleanupPolicies") or {}).values())
                if repo.get("cleanupPolicyDryRun"):
                    continue
                for package, versions in packages.items():
                    newest_first = sorted(versions, key=lambda v: -v[1])
                    kept: set[str] = set()
                    for policy in policies:
                        if policy["action"] == "KEEP" and "mostRecentVersions" in policy:
                            kept |= {v[0] for v in newest_first[:policy["mostRecentVersions"]["keepCount"]]}

                    def deleted(version: tuple[str, float, tuple[str, ...]],
                                policies: list[dict[str, Any]] = policies) -> bool:
                        for policy in policies:
                            condition = policy.get("condition")
                            if policy["action"] != "DELETE" or condition is None:
                                continue
                            state = condition.get("tagState", "ANY")
                            if (state == "TAGGED" and not version[2]) or (state == "UNTAGGED" and version[2]):
                                continue
                            if "olderThan" in condition and now_s - version[1] < float(condition["olderThan"][:-1]):
                                continue
                            return True
                        return False

                    packages[package] = [v for v in versions if v[0] in kept or not deleted(v)]

    def create(self, request: Request) -> tuple[int, Any]:
        parent, repo_id = request.match["parent"], request.query.get("repositoryId", "")
        self._check_parent(parent)
        if not repo_id:
            raise ApiError(400, "repositoryId is required")
        if not _REPOSITORY_ID.match(repo_id):
            raise ApiError(400, f"invalid repositoryId {repo_id!r}: lower-case letters, digits and hyphens, starting "
                                "with a letter and ending with a letter or digit, 63 characters at most")
        body = self._body(request)
        if body.get("format") not in FORMATS:
            raise ApiError(400, f"format {body.get('format')!r} is not a repository format")
        name = f"{parent}/repositories/{repo_id}"
        with self._lock:
            if name in self.repositories:
                raise ApiError(409, f"the repository already exists: {name}")
            repo = {"name": name, "format": body["format"], "labels": dict(body.get("labels") or {}),
                    "description": body.get("description", "")}
            if body.get("cleanupPolicies"):
                repo["cleanupPolicies"] = json_copy(body["cleanupPolicies"])
            if "cleanupPolicyDryRun" in body:
                repo["cleanupPolicyDryRun"] = body["cleanupPolicyDryRun"]
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
        if not mask or set(mask) - {"labels", "description", "cleanupPolicies", "cleanupPolicyDryRun"}:
            raise ApiError(400, f"updateMask {mask!r}: only labels, description and the cleanup policies can change")
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
