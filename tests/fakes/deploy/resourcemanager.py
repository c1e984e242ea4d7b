"""Fake Resource Manager v3 (REST): the project's IAM policy."""

from __future__ import annotations

from typing import Any

from tests.fakes.deploy.common import PolicyStore, policy_from_body
from tests.fakes.deploy.http import ApiError, Request, Router

PROJECT = r"/v3/(?P<project>projects/[^/:]+)"


class FakeResourceManager:
    def __init__(self, project: str, policies: PolicyStore, owner: str = "user:owner@example.com"):
        self.project = project
        self.policies = policies
        policies.create(f"projects/{project}", [{"role": "roles/owner", "members": [owner]}])

    def routes(self, router: Router) -> None:
        router.add("POST", f"{PROJECT}:getIamPolicy", "resourcemanager", self.get_policy)
        router.add("POST", f"{PROJECT}:setIamPolicy", "resourcemanager", self.set_policy)

    def _resource(self, request: Request) -> str:
        if request.match["project"] != f"projects/{self.project}":
            raise ApiError(403, f"The caller does not have permission on {request.match['project']}")
        return request.match["project"]

    def get_policy(self, request: Request) -> tuple[int, Any]:
        return 200, self.policies.get(self._resource(request))

    def set_policy(self, request: Request) -> tuple[int, Any]:
        resource = self._resource(request)
        return 200, self.policies.set(resource, policy_from_body(resource, request.json()))
