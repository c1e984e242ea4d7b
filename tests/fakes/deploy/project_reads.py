"""Fake read-only project APIs `spotcron doctor` calls, answering as Google documents them:

- Service Usage v1 `GET /v1/projects/P/services?filter=state:ENABLED` (the only filters are
  state:ENABLED and state:DISABLED; pageSize at most 200), services with `name` and `config.name`;
- Resource Manager v3 `POST /v3/projects/P:testIamPermissions` {"permissions": [...]}: the subset
  held (the key left out when none), at most 100 permissions a call;
- Compute Engine v1 `GET /compute/v1/projects/P` and `/regions/R` with `quotas` [{metric, limit,
  usage}], `GET /global/networks/N` (the networks of FakeCompute);
- Org Policy v2 `GET /v2/projects/P/policies/C:getEffectivePolicy`: {"name", "spec": {"rules"}}.

Every API answers 403 SERVICE_DISABLED, with Google's wording, unless it is enabled; the default
project is a healthy one: every API on, every permission held, GPU quota for one VM, no policy.
"""

from __future__ import annotations

import re
from typing import Any

from tests.fakes.deploy.compute import FakeCompute
from tests.fakes.deploy.http import ApiError, Request, Router

PROJECT = r"(?P<project>[^/:]+)"
ALL_APIS = ("compute.googleapis.com", "cloudscheduler.googleapis.com", "pubsub.googleapis.com",
            "cloudfunctions.googleapis.com", "run.googleapis.com", "cloudbuild.googleapis.com",
            "eventarc.googleapis.com", "storage.googleapis.com", "iam.googleapis.com",
            "artifactregistry.googleapis.com", "logging.googleapis.com", "cloudresourcemanager.googleapis.com",
            "sts.googleapis.com", "serviceusage.googleapis.com", "orgpolicy.googleapis.com")
MAX_PERMISSIONS = 100
PERMISSION = re.compile(r"^[a-z][a-z0-9]*\.[a-zA-Z0-9]+\.[a-zA-Z0-9]+$")  # service.resource.verb
SERVICES_PAGE = 200


class ServiceDisabled(ApiError):
    def __init__(self, project: str, service: str):
        super().__init__(403, f"{service.split('.')[0]} API has not been used in project {project} before or it is "
                              f"disabled. Enable it by visiting https://console.developers.google.com/apis/api/"
                              f"{service}/overview?project={project} then retry.", "PERMISSION_DENIED")
        self.service = service

    def body(self) -> dict[str, Any]:
        body = super().body()
        body["error"]["details"] = [{"@type": "type.googleapis.com/google.rpc.ErrorInfo", "reason": "SERVICE_DISABLED",
                                     "domain": "googleapis.com", "metadata": {"service": self.service}}]
        return body


def _default_quotas() -> dict[str, dict[str, tuple[float, float]]]:
    return {region: {"CPUS": (24.0, 0.0), "PREEMPTIBLE_CPUS": (0.0, 0.0), "NVIDIA_T4_GPUS": (1.0, 0.0),
                     "PREEMPTIBLE_NVIDIA_T4_GPUS": (4.0, 0.0), "NVIDIA_L4_GPUS": (1.0, 0.0),
                     "PREEMPTIBLE_NVIDIA_L4_GPUS": (4.0, 0.0)}
            for region in ("us-central1", "us-east1", "us-east4", "us-west1", "us-west4", "europe-west1")}


class FakeProjectReads:
    def __init__(self, project: str, compute: FakeCompute, number: str = "123456789012"):
        self.project = project
        self.number = number
        self.compute = compute
        self.enabled: set[str] = set(ALL_APIS)
        self.granted: set[str] | None = None  # None: every permission asked for (an Owner)
        self.region_quotas = _default_quotas()
        self.project_quotas: dict[str, tuple[float, float]] = {"GPUS_ALL_REGIONS": (4.0, 0.0),
                                                               "CPUS_ALL_REGIONS": (32.0, 0.0)}
        self.policies: dict[str, dict[str, Any]] = {}  # constraint -> effective spec

    def routes(self, router: Router) -> None:
        router.add("GET", f"/v1/projects/{PROJECT}/services", "serviceusage", self.list_services)
        router.add("POST", f"/v3/projects/{PROJECT}:testIamPermissions", "resourcemanager", self.test_permissions)
        router.add("GET", f"/compute/v1/projects/{PROJECT}", "compute", self.get_project)
        router.add("GET", f"/compute/v1/projects/{PROJECT}/regions/(?P<region>[^/]+)", "compute", self.get_region)
        router.add("GET", f"/compute/v1/projects/{PROJECT}/global/networks/(?P<network>[^/]+)", "compute",
                   self.get_network)
        router.add("GET", f"/v2/projects/{PROJECT}/policies/(?P<constraint>[^/:]+):getEffectivePolicy", "orgpolicy",
                   self.effective_policy)

    def _serving(self, request: Request, service: str) -> None:
        if request.match["project"] not in (self.project, self.number):
            raise ApiError(403, f"Permission denied on resource project {request.match['project']}.")
        if service not in self.enabled:
            raise ServiceDisabled(self.project, service)

    def list_services(self, request: Request) -> tuple[int, Any]:
        self._serving(request, "serviceusage.googleapis.com")
        state = request.query.get("filter", "")
        if state not in ("", "state:ENABLED", "state:DISABLED"):
            raise ApiError(400, f"Invalid filter {state!r}: the allowed filters are state:ENABLED and state:DISABLED")
        size = int(request.query.get("pageSize") or 50)
        if size > SERVICES_PAGE:
            raise ApiError(400, "Requested page size cannot exceed 200.")
        names = sorted(self.enabled) if state != "state:DISABLED" else []
        start = int(request.query.get("pageToken") or 0)
        services = [{"name": f"projects/{self.number}/services/{n}", "config": {"name": n}, "state": "ENABLED",
                     "parent": f"projects/{self.number}"} for n in names[start:start + size]]
        answer: dict[str, Any] = {"services": services} if services else {}
        if start + size < len(names):
            answer["nextPageToken"] = str(start + size)
        return 200, answer

    def test_permissions(self, request: Request) -> tuple[int, Any]:
        self._serving(request, "cloudresourcemanager.googleapis.com")
        body = request.json()
        if set(body) - {"permissions"}:
            raise ApiError(400, f"Invalid JSON payload received. Unknown name {sorted(set(body) - {'permissions'})[0]!r}")
        asked = body.get("permissions") or []
        if len(asked) > MAX_PERMISSIONS:
            raise ApiError(400, f"The number of permissions in the request ({len(asked)}) exceeds the limit of 100.")
        for permission in asked:  # Google refuses the whole call for one malformed permission
            if not PERMISSION.match(permission):
                raise ApiError(400, f"Permission {permission} is not valid for this resource.")
        held = [p for p in asked if self.granted is None or p in self.granted]
        return 200, {"permissions": held} if held else {}

    @staticmethod
    def _quotas(quotas: dict[str, tuple[float, float]]) -> list[dict[str, Any]]:
        return [{"metric": m, "limit": limit, "usage": usage} for m, (limit, usage) in sorted(quotas.items())]

    def get_project(self, request: Request) -> tuple[int, Any]:
        self._serving(request, "compute.googleapis.com")
        return 200, {"kind": "compute#project", "name": self.project, "quotas": self._quotas(self.project_quotas)}

    def get_region(self, request: Request) -> tuple[int, Any]:
        self._serving(request, "compute.googleapis.com")
        region = request.match["region"]
        if region not in self.region_quotas:
            raise ApiError(404, f"The resource 'projects/{self.project}/regions/{region}' was not found")
        return 200, {"kind": "compute#region", "name": region, "status": "UP",
                     "quotas": self._quotas(self.region_quotas[region])}

    def get_network(self, request: Request) -> tuple[int, Any]:
        self._serving(request, "compute.googleapis.com")
        name = request.match["network"]
        network = self.compute.networks.get(name)
        if network is None:
            raise ApiError(404, f"The resource 'projects/{self.project}/global/networks/{name}' was not found")
        return 200, {"kind": "compute#network", "name": name, "autoCreateSubnetworks": network["auto"]}

    def effective_policy(self, request: Request) -> tuple[int, Any]:
        self._serving(request, "orgpolicy.googleapis.com")
        constraint = request.match["constraint"]
        policy: dict[str, Any] = {"name": f"projects/{self.number}/policies/{constraint}"}
        if constraint in self.policies:
            policy["spec"] = self.policies[constraint]
        return 200, policy
