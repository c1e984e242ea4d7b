"""Fake Compute Engine v1 instances (REST) inside FakeCloud: what a run's functions call, checked
against the IAM policies deploy wrote, as the identity that calls.

- `instances.insert` needs `compute.instances.create` on the project and a permission for each
  thing spotcron's body sets (metadata, labels, tags, the service account, Shielded VM settings,
  the subnet, the boot disk), and `iam.serviceAccounts.actAs` (Service Account User) on the
  service account the VM runs as: the "Required permissions" of
  https://cloud.google.com/compute/docs/access/create-enable-service-accounts-for-instances;
- `instances.get`, `instances.delete`, `aggregatedList` need `compute.instances.get`, `.delete`,
  `.list` (https://cloud.google.com/compute/docs/reference/rest/v1/instances);
- zone operations answer DONE on the first look (`get` and `wait`).

The roles the fake knows (access.ROLE_PERMISSIONS) hold the permissions the engine's calls use.
"""

from __future__ import annotations

import itertools
import threading
from typing import Any

from tests.fakes.deploy.access import Access
from tests.fakes.deploy.common import PolicyStore, json_copy
from tests.fakes.deploy.http import ApiError, Request, Router, caller
from tests.fakes.gcp.compute import _parse_filter

PROJECT = r"/compute/v1/projects/(?P<project>[^/]+)"
ZONE = f"{PROJECT}/zones/(?P<zone>[^/]+)"
INSTANCE = f"{ZONE}/instances/(?P<name>[^/]+)"
# The permissions Compute Engine checks for an insert of spotcron's VM body (the page above).
INSERT_PERMISSIONS = ("compute.instances.create", "compute.instances.setMetadata", "compute.instances.setLabels",
                      "compute.instances.setTags", "compute.instances.setServiceAccount", "compute.disks.create",
                      "compute.subnetworks.use", "compute.instances.updateShieldedVmConfig")


class FakeInstances:
    def __init__(self, project: str, access: Access, project_policies: PolicyStore, accounts: PolicyStore):
        self.project = project
        self.access = access
        self.project_policies = project_policies
        self.accounts = accounts  # the IAM fake's service-account policies
        self.instances: dict[tuple[str, str], dict[str, Any]] = {}
        self.inserted: list[tuple[str, dict[str, Any]]] = []  # (caller, body) of every insert allowed
        self.operations: dict[str, dict[str, Any]] = {}
        self._lock = threading.Lock()
        self._ids = itertools.count(1)

    def routes(self, router: Router) -> None:
        api = "compute"
        router.add("POST", f"{ZONE}/instances", api, self.insert, checks_permission=True)
        router.add("GET", INSTANCE, api, self.get)
        router.add("DELETE", INSTANCE, api, self.delete)
        router.add("GET", f"{PROJECT}/aggregated/instances", api, self.aggregated, checks_permission=True)
        router.add("GET", f"{ZONE}/operations/(?P<op>[^/]+)", api, self.operation)
        router.add("POST", f"{ZONE}/operations/(?P<op>[^/]+)/wait", api, self.operation)

    def _check(self, request: Request, permission: str, resource: str) -> None:
        if request.match["project"] != self.project:
            raise ApiError(403, f"Required '{permission}' permission for 'projects/{request.match['project']}'")
        self.access.check(caller(request) or "", permission, resource,
                          [self.project_policies.policy(f"projects/{self.project}")])

    def _done(self, zone: str, kind: str, target: str) -> dict[str, Any]:
        name = f"operation-{next(self._ids)}"
        operation = {"kind": "compute#operation", "id": str(next(self._ids)), "name": name, "status": "DONE",
                     "operationType": kind, "progress": 100, "zone": f"projects/{self.project}/zones/{zone}",
                     "targetLink": target}
        with self._lock:
            self.operations[name] = operation
        return json_copy(operation)

    def insert(self, request: Request) -> tuple[int, Any]:
        body = request.json()
        zone, name = request.match["zone"], str(body.get("name", ""))
        resource = f"projects/{self.project}/zones/{zone}/instances/{name}"
        for permission in INSERT_PERMISSIONS:
            self._check(request, permission, resource)
        member = caller(request) or ""
        for account in body.get("serviceAccounts") or []:
            email = account.get("email", "")
            policy = f"projects/{self.project}/serviceAccounts/{email}"
            self.access.check(member, "iam.serviceAccounts.actAs", policy,
                              [self.accounts.policy(policy), self.project_policies.policy(f"projects/{self.project}")])
        with self._lock:
            if (zone, name) in self.instances:
                raise ApiError(409, f"The resource '{resource}' already exists")
            self.instances[(zone, name)] = {
                **body, "kind": "compute#instance", "id": str(1000 + len(self.inserted)), "status": "RUNNING",
                "zone": f"https://www.googleapis.com/compute/v1/projects/{self.project}/zones/{zone}",
                "creationTimestamp": "2026-01-01T00:00:00.000-00:00",
                "machineType": body.get("machineType", "")}
            self.inserted.append((member, json_copy(body)))
        return 200, self._done(zone, "insert", resource)

    def get(self, request: Request) -> tuple[int, Any]:
        zone, name = request.match["zone"], request.match["name"]
        self._check(request, "compute.instances.get", f"projects/{self.project}/zones/{zone}/instances/{name}")
        with self._lock:
            if (zone, name) not in self.instances:
                raise ApiError(404, f"The resource 'projects/{self.project}/zones/{zone}/instances/{name}' was not found")
            return 200, json_copy(self.instances[(zone, name)])

    def delete(self, request: Request) -> tuple[int, Any]:
        zone, name = request.match["zone"], request.match["name"]
        resource = f"projects/{self.project}/zones/{zone}/instances/{name}"
        self._check(request, "compute.instances.delete", resource)
        with self._lock:
            if self.instances.pop((zone, name), None) is None:
                raise ApiError(404, f"The resource '{resource}' was not found")
        return 200, self._done(zone, "delete", resource)

    def aggregated(self, request: Request) -> tuple[int, Any]:
        self._check(request, "compute.instances.list", f"projects/{self.project}")
        keep = _parse_filter(request.query.get("filter", ""))
        items: dict[str, Any] = {}
        with self._lock:
            for (zone, _), instance in sorted(self.instances.items()):
                if keep(instance):
                    items.setdefault(f"zones/{zone}", {"instances": []})["instances"].append(json_copy(instance))
        return 200, {"kind": "compute#instanceAggregatedList", "items": items}

    def operation(self, request: Request) -> tuple[int, Any]:
        with self._lock:
            if request.match["op"] not in self.operations:
                raise ApiError(404, f"The resource 'operations/{request.match['op']}' was not found")
            return 200, json_copy(self.operations[request.match["op"]])
