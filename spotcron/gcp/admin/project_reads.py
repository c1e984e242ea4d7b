"""Read-only looks at a Google Cloud project before anything is created (`spotcron doctor`).

Five APIs, a handful of GET/POST calls, none of which changes anything:
- Service Usage v1 `services.list` with `filter=state:ENABLED` (pages of at most 200);
- Resource Manager v3 `projects.testIamPermissions`: which of the given permissions the caller
  holds on the project (no permission is needed to ask);
- Compute Engine v1 `projects.get` and `regions.get`: their `quotas` ({metric, limit, usage});
  `networks.get` and `subnetworks.get`;
- Organization Policy v2 `projects.policies.getEffectivePolicy`: the policy that applies to the
  project once the hierarchy is merged and conditions evaluated.

They go through google-auth's session (no client library for Service Usage or Org Policy among
the dependencies); `Endpoints.rest` points every one of them at a local fake in tests.
"""

from __future__ import annotations

from typing import Any

from spotcron.core.errors import NotFound
from spotcron.gcp.admin.calls import Caller
from spotcron.gcp.admin.clients import COMPUTE_API, Clients, _widen_pool

SERVICE_USAGE_API = "https://serviceusage.googleapis.com"
RESOURCE_MANAGER_API = "https://cloudresourcemanager.googleapis.com"
ORG_POLICY_API = "https://orgpolicy.googleapis.com"
SERVICES_PAGE = 200  # services.list: "Requested page size cannot exceed 200"
PERMISSIONS_PER_CALL = 100  # testIamPermissions takes at most 100 permissions a call
Quotas = dict[str, tuple[float, float]]  # metric -> (limit, usage)


def _quotas(resource: dict[str, Any]) -> Quotas:
    return {str(q.get("metric")): (float(q.get("limit", 0)), float(q.get("usage", 0)))
            for q in resource.get("quotas") or [] if q.get("metric")}


class ProjectReads:
    """The reads above for one project, each through `call` (deploy's retry and error mapping)."""

    def __init__(self, project: str, session: Any, call: Caller, *, base_url: str | None = None,
                 timeout: float = 30.0):
        self.project = project
        self._session = session
        self._call = call
        self._base = base_url.rstrip("/") if base_url else None
        self._timeout = timeout

    def _url(self, api: str, path: str) -> str:
        return f"{self._base or api}/{path}"

    def _checked(self, response: Any) -> dict[str, Any]:
        if response.status_code >= 400:
            from google.api_core import exceptions

            raise exceptions.from_http_response(response)
        return response.json() if response.content else {}

    def _get(self, what: str, api: str, path: str, params: dict[str, Any] | None = None) -> dict[str, Any]:
        return self._call(what, lambda: self._checked(self._session.get(self._url(api, path), params=params,
                                                                         timeout=self._timeout)))

    def _found(self, what: str, api: str, path: str) -> dict[str, Any] | None:
        try:
            return self._get(what, api, path)
        except NotFound:
            return None

    def enabled_services(self) -> frozenset[str]:
        """The names (compute.googleapis.com, …) of the services enabled on the project."""
        names: set[str] = set()
        token: str | None = None
        while True:
            params: dict[str, Any] = {"filter": "state:ENABLED", "pageSize": SERVICES_PAGE}
            if token:
                params["pageToken"] = token
            page = self._get(f"list the enabled APIs of project {self.project}", SERVICE_USAGE_API,
                             f"v1/projects/{self.project}/services", params)
            for service in page.get("services") or []:
                name = (service.get("config") or {}).get("name") or str(service.get("name", "")).rsplit("/", 1)[-1]
                if name:
                    names.add(name)
            token = page.get("nextPageToken")
            if not token:
                return frozenset(names)

    def granted_permissions(self, permissions: list[str]) -> frozenset[str]:
        """Those of `permissions` the caller holds on the project."""
        granted: set[str] = set()
        url = self._url(RESOURCE_MANAGER_API, f"v3/projects/{self.project}:testIamPermissions")
        for start in range(0, len(permissions), PERMISSIONS_PER_CALL):
            batch = permissions[start:start + PERMISSIONS_PER_CALL]
            answer = self._call(f"test the deployer's permissions on project {self.project}",
                                lambda b=batch: self._checked(self._session.post(url, json={"permissions": b},
                                                                                 timeout=self._timeout)))
            granted.update(answer.get("permissions") or [])
        return frozenset(granted)

    def project_quotas(self) -> Quotas:
        return _quotas(self._get(f"read the quotas of project {self.project}", COMPUTE_API,
                                 f"compute/v1/projects/{self.project}"))

    def region_quotas(self, region: str) -> Quotas | None:
        """The region's quotas; None when Compute Engine has no such region."""
        found = self._found(f"read the quotas of region {region}", COMPUTE_API,
                            f"compute/v1/projects/{self.project}/regions/{region}")
        return None if found is None else _quotas(found)

    def network(self, name: str) -> dict[str, Any] | None:
        return self._found(f"read network {name}", COMPUTE_API, f"compute/v1/projects/{self.project}/global/networks/{name}")

    def subnetwork(self, region: str, name: str) -> dict[str, Any] | None:
        return self._found(f"read subnetwork {name} in {region}", COMPUTE_API,
                           f"compute/v1/projects/{self.project}/regions/{region}/subnetworks/{name}")

    def effective_policy(self, constraint: str) -> dict[str, Any]:
        """The effective policy's `spec` for `constraint` (e.g. compute.requireShieldedVm); {} when none is set."""
        policy = self._get(f"read the effective organisation policy {constraint}", ORG_POLICY_API,
                           f"v2/projects/{self.project}/policies/{constraint}:getEffectivePolicy")
        return dict(policy.get("spec") or {})


def project_reads(clients: Clients, call: Caller) -> ProjectReads:
    """ProjectReads on `clients`' credentials and endpoints (a fake's base URL in tests)."""
    from google.auth.transport.requests import AuthorizedSession

    session = AuthorizedSession(clients.credentials)
    _widen_pool(session, 4)
    return ProjectReads(clients.project, session, call, base_url=clients.endpoints.rest, timeout=clients.timeout)
