"""Pieces every fake API shares: strict proto parsing, IAM policies with etags, paging."""

from __future__ import annotations

import base64
import itertools
import threading
from typing import TYPE_CHECKING, Any

from google.protobuf import json_format

from tests.fakes.deploy.http import ApiError

if TYPE_CHECKING:
    from tests.fakes.deploy.access import Access

PUBLIC = {"allUsers", "allAuthenticatedUsers"}


def canonical(pb_class: Any, data: dict[str, Any]) -> dict[str, Any]:
    """`data` parsed strictly as `pb_class` (unknown fields are a 400, like Google) and re-rendered
    as proto JSON, so enums arrive as names whether the client sent numbers or names."""
    try:
        message = json_format.ParseDict(data, pb_class())
    except json_format.ParseError as exc:
        raise ApiError(400, f"Invalid JSON payload received. {exc}") from None
    return json_format.MessageToDict(message)


def policy_from_body(resource: str, body: dict[str, Any]) -> dict[str, Any]:
    """The policy of a REST setIamPolicy body, checked against google.iam.v1.SetIamPolicyRequest."""
    from google.iam.v1 import iam_policy_pb2

    request = canonical(iam_policy_pb2.SetIamPolicyRequest, {"resource": resource, **body})
    return request.get("policy", {})


def page(items: list[Any], query: dict[str, str], key: str, max_size: int = 1000) -> dict[str, Any]:
    """One page of `items` the way list methods answer: pageSize, pageToken, nextPageToken."""
    size = min(int(query.get("pageSize") or query.get("maxResults") or max_size), max_size)
    start = int(query.get("pageToken") or 0)
    out: dict[str, Any] = {key: items[start:start + size]} if items[start:start + size] else {}
    if start + size < len(items):
        out["nextPageToken"] = str(start + size)
    return out


class PolicyStore:
    """IAM policies keyed by resource name, with etag checks like IAM's read-modify-write.

    Every write is recorded with `access` (access.py): a new binding takes effect only after the
    fake's grant delay, and a binding naming a service account IAM does not see yet is refused."""

    def __init__(self, access: Access):
        self._policies: dict[str, dict[str, Any]] = {}
        self._etags = itertools.count(1)
        self._lock = threading.Lock()
        self.access = access
        self._account_exists = access.account_visible
        self.writes = 0

    def _etag(self) -> str:
        return base64.b64encode(f"etag-{next(self._etags)}".encode()).decode()

    def create(self, resource: str, bindings: list[dict[str, Any]] | None = None) -> None:
        """A resource's policy as its API creates it (`bindings`: Google's own, in effect at once)."""
        with self._lock:
            if resource in self._policies:
                return
            self._policies[resource] = {"version": 1, "etag": self._etag(), "bindings": list(bindings or [])}
            self.access.record(resource, None, self._policies[resource])

    def grant(self, resource: str, role: str, member: str) -> None:
        """A binding Google adds by itself (a service agent's role), propagating like any grant."""
        with self._lock:
            policy = self._policies.setdefault(resource, {"version": 1, "etag": self._etag(), "bindings": []})
            old = json_copy(policy)
            policy["bindings"].append({"role": role, "members": [member]})
            policy["etag"] = self._etag()
            self.access.record(resource, old, policy)

    def policy(self, resource: str) -> tuple[str, dict[str, Any]]:
        """(name, policy) for Access.allowed; an empty policy when the resource has none."""
        with self._lock:
            return resource, json_copy(self._policies.get(resource, {"bindings": []}))

    def drop(self, resource: str) -> None:
        with self._lock:
            self._policies.pop(resource, None)

    def get(self, resource: str) -> dict[str, Any]:
        with self._lock:
            if resource not in self._policies:
                raise ApiError(404, f"Resource {resource} not found.")
            return json_copy(self._policies[resource])

    def set(self, resource: str, policy: dict[str, Any]) -> dict[str, Any]:
        for binding in policy.get("bindings", []):
            for member in binding.get("members", []):
                if member.startswith("serviceAccount:") and not self._account_exists(member.split(":", 1)[1]):
                    raise ApiError(400, f"Service account {member.split(':', 1)[1]} does not exist.")
        if any(b.get("condition") for b in policy.get("bindings", [])) and int(policy.get("version") or 1) < 3:
            raise ApiError(400, "A policy with conditional role bindings must be set with version 3.")
        with self._lock:
            if resource not in self._policies:
                raise ApiError(404, f"Resource {resource} not found.")
            current = self._policies[resource]
            if policy.get("etag") and policy["etag"] != current["etag"]:
                raise ApiError(409, "There were concurrent policy changes. Please retry the whole "
                                    "read-modify-write with exponential backoff.", "ABORTED")
            stored = {"version": policy.get("version", 1) or 1, "etag": self._etag(),
                      "bindings": [b for b in policy.get("bindings", []) if b.get("members")]}
            self.access.record(resource, current, stored)
            self._policies[resource] = stored
            self.writes += 1
            return json_copy(stored)

    def members(self, resource: str, role: str) -> set[str]:
        with self._lock:
            policy = self._policies.get(resource, {"bindings": []})
            return {m for b in policy["bindings"] if b["role"] == role for m in b.get("members", [])}

    def all(self) -> dict[str, dict[str, Any]]:
        with self._lock:
            return {k: json_copy(v) for k, v in self._policies.items()}


def json_copy(value: Any) -> Any:
    import json

    return json.loads(json.dumps(value))


class LongRunningOperations:
    """operations.get of a fake whose mutations answer with google.longrunning Operations: the
    class keeps `self.operations` (name → operation) under `self._lock`."""

    operations: dict[str, dict[str, Any]]
    _lock: threading.Lock

    def get_operation(self, request: Any) -> tuple[int, Any]:
        name = f"{request.match['parent']}/operations/{request.match['op']}"
        with self._lock:
            if name not in self.operations:
                raise ApiError(404, f"Operation {name} not found")
            return 200, json_copy(self.operations[name])
