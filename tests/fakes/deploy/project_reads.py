"""Fake read-only project APIs `spotcron doctor` calls, answering as Google documents them, from
the same strict model (access.py) that deploy's fakes enforce, so doctor and deploy see one project:

- Service Usage v1 `services.list` is FakeServiceUsage's (serviceusage.py): the enabled APIs are
  Access's, the ones deploy enables included;
- Resource Manager v3 `POST /v3/projects/P:testIamPermissions` {"permissions": [...]}: the subset
  the caller holds through the project's IAM policy as written so far (propagated grants only,
  conditions evaluated; the key left out when none), at most 100 permissions a call;
- Compute Engine v1 `GET /compute/v1/projects/P` and `/regions/R` with `quotas` [{metric, limit,
  usage}], `GET /global/networks/N` (the networks of FakeCompute);
- Org Policy v2 `GET /v2/projects/P/policies/C:getEffectivePolicy`: {"name", "spec": {"rules"}}.

The router's gate (Access.admit) refuses each call, with Google's SERVICE_DISABLED shape, while its
API is off: an empty project has only Google's defaults on (access.DEFAULT_APIS). Quotas default to
room for one GPU VM; no organisation policy is set.
"""

from __future__ import annotations

import re
from typing import Any

from tests.fakes.deploy.access import Access
from tests.fakes.deploy.common import PolicyStore
from tests.fakes.deploy.compute import FakeCompute
from tests.fakes.deploy.http import ApiError, Request, Router, caller

PROJECT = r"(?P<project>[^/:]+)"
MAX_PERMISSIONS = 100
PERMISSION = re.compile(r"^[a-z][a-z0-9]*\.[a-zA-Z0-9]+\.[a-zA-Z0-9]+$")  # service.resource.verb


def _default_quotas() -> dict[str, dict[str, tuple[float, float]]]:
    return {region: {"CPUS": (24.0, 0.0), "PREEMPTIBLE_CPUS": (0.0, 0.0), "NVIDIA_T4_GPUS": (1.0, 0.0),
                     "PREEMPTIBLE_NVIDIA_T4_GPUS": (4.0, 0.0), "NVIDIA_L4_GPUS": (1.0, 0.0),
                     "PREEMPTIBLE_NVIDIA_L4_GPUS": (4.0, 0.0)}
            for region in ("us-central1", "us-east1", "us-east4", "us-west1", "us-west4", "europe-west1")}


class FakeProjectReads:
    def __init__(self, project: str, compute: FakeCompute, access: Access, project_policies: PolicyStore):
        self.project = project
        self.number = access.number
        self.compute = compute
        self.access = access
        self.project_policies = project_policies
        self.region_quotas = _default_quotas()
        self.project_quotas: dict[str, tuple[float, float]] = {"GPUS_ALL_REGIONS": (4.0, 0.0),
                                                               "CPUS_ALL_REGIONS": (32.0, 0.0)}
        self.policies: dict[str, dict[str, Any]] = {}  # constraint -> effective spec

    def routes(self, router: Router) -> None:
        router.add("POST", f"/v3/projects/{PROJECT}:testIamPermissions", "resourcemanager", self.test_permissions)
        router.add("GET", f"/compute/v1/projects/{PROJECT}", "compute", self.get_project)
        router.add("GET", f"/compute/v1/projects/{PROJECT}/regions/(?P<region>[^/]+)", "compute", self.get_region)
        router.add("GET", f"/compute/v1/projects/{PROJECT}/global/networks/(?P<network>[^/]+)", "compute",
                   self.get_network)
        router.add("GET", f"/v2/projects/{PROJECT}/policies/(?P<constraint>[^/:]+):getEffectivePolicy", "orgpolicy",
                   self.effective_policy)

    def _serving(self, request: Request) -> None:
        """Only this project is readable (the gate has checked the API is on)."""
        if request.match["project"] not in (self.project, self.number):
            raise ApiError(403, f"Permission denied on resource project {request.match['project']}.")

    def test_permissions(self, request: Request) -> tuple[int, Any]:
        self._serving(request)
        body = request.json()
        if set(body) - {"permissions"}:
            raise ApiError(400, f"Invalid JSON payload received. Unknown name {sorted(set(body) - {'permissions'})[0]!r}")
        asked = body.get("permissions") or []
        if len(asked) > MAX_PERMISSIONS:
            raise ApiError(400, f"The number of permissions in the request ({len(asked)}) exceeds the limit of 100.")
        for permission in asked:  # Google refuses the whole call for one malformed permission
            if not PERMISSION.match(permission):
                raise ApiError(400, f"Permission {permission} is not valid for this resource.")
        member = caller(request) or ""
        resource = f"projects/{self.project}"
        policy = [self.project_policies.policy(resource)]
        held = [p for p in asked if self.access.allowed(member, p, resource, policy)]
        return 200, {"permissions": held} if held else {}

    @staticmethod
    def _quotas(quotas: dict[str, tuple[float, float]]) -> list[dict[str, Any]]:
        return [{"metric": m, "limit": limit, "usage": usage} for m, (limit, usage) in sorted(quotas.items())]

    def get_project(self, request: Request) -> tuple[int, Any]:
        self._serving(request)
        return 200, {"kind": "compute#project", "name": self.project, "quotas": self._quotas(self.project_quotas)}

    def get_region(self, request: Request) -> tuple[int, Any]:
        self._serving(request)
        region = request.match["region"]
        if region not in self.region_quotas:
            raise ApiError(404, f"The resource 'projects/{self.project}/regions/{region}' was not found")
        return 200, {"kind": "compute#region", "name": region, "status": "UP",
                     "quotas": self._quotas(self.region_quotas[region])}

    def get_network(self, request: Request) -> tuple[int, Any]:
        self._serving(request)
        name = request.match["network"]
        network = self.compute.networks.get(name)
        if network is None:
            raise ApiError(404, f"The resource 'projects/{self.project}/global/networks/{name}' was not found")
        return 200, {"kind": "compute#network", "name": name, "autoCreateSubnetworks": network["auto"]}

    def effective_policy(self, request: Request) -> tuple[int, Any]:
        self._serving(request)
        constraint = request.match["constraint"]
        policy: dict[str, Any] = {"name": f"projects/{self.number}/policies/{constraint}"}
        if constraint in self.policies:
            policy["spec"] = self.policies[constraint]
        return 200, policy
