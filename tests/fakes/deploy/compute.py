"""Fake Compute Engine v1 (REST), the network calls deploy makes: global firewall rules and
Private Google Access on a subnet, with their operations.

Checked as Compute's parser would: a Firewall body may hold only the Firewall resource's fields;
exactly one of `allowed` and `denied`, each entry naming `IPProtocol`; `direction` INGRESS or
EGRESS; `priority` 0..65535; an ingress rule's sourceRanges all of one address family.
The `default` network is Google's: "Unless you choose to disable it, each new project starts with
a default network" (https://cloud.google.com/vpc/docs/vpc#default-network), made when Compute
Engine's API is enabled; with an `access`, it and its subnets are visible only `network_delay_s`
(virtual) after that API was enabled, as a network being created is.
Operations are DONE on the first poll. A regional operation is readable only under its own
region (regionOperations.get, https://cloud.google.com/compute/docs/reference/rest/v1/regionOperations/get):
polled under another region or under global it is 404, as Google answers. The default network has a `default` subnet in every
region, Private Google Access off, as Google creates it.
"""

from __future__ import annotations

import ipaddress
import itertools
import threading
from typing import Any

from tests.fakes.deploy.common import json_copy
from tests.fakes.deploy.http import ApiError, Request, Router

PROJECT = r"/compute/v1/projects/(?P<project>[^/]+)"
FIREWALL = f"{PROJECT}/global/firewalls/(?P<name>[^/]+)"
SUBNET = f"{PROJECT}/regions/(?P<region>[^/]+)/subnetworks/(?P<subnet>[^/:]+)"
# The Firewall resource's writable fields (compute v1).
WRITABLE = frozenset({"name", "description", "network", "priority", "sourceRanges", "destinationRanges",
                      "sourceTags", "targetTags", "sourceServiceAccounts", "targetServiceAccounts", "allowed",
                      "denied", "direction", "logConfig", "disabled"})
PROTOCOLS = frozenset({"tcp", "udp", "icmp", "esp", "ah", "sctp", "ipip", "all"})


class FakeCompute:
    def __init__(self, project: str, access: Any = None, network_delay_s: float = 0.0):
        self.project = project
        self.access = access
        self.network_delay_s = network_delay_s
        self.firewalls: dict[str, dict[str, Any]] = {}
        self.private_google_access: dict[str, bool] = {}  # region -> state of its default subnet
        # The project's VPC networks: name -> {"auto": auto mode, "subnets": {region: [names]}}.
        # An auto-mode network has a subnet named like itself in every region, as Google creates it.
        self.networks: dict[str, dict[str, Any]] = {"default": {"auto": True, "subnets": {}, "with_api": True}}
        self.operations: dict[str, dict[str, Any]] = {}
        self._lock = threading.Lock()
        self._ids = itertools.count(1)

    def routes(self, router: Router) -> None:
        api = "compute"
        router.add("POST", f"{PROJECT}/global/firewalls", api, self.insert)
        router.add("GET", FIREWALL, api, self.get)
        router.add("PATCH", FIREWALL, api, self.patch)
        router.add("DELETE", FIREWALL, api, self.delete)
        router.add("GET", SUBNET, api, self.get_subnet)
        router.add("POST", f"{SUBNET}/setPrivateIpGoogleAccess", api, self.set_private_google_access)
        router.add("GET", f"{PROJECT}/(?P<scope>global|regions/[^/]+)/operations/(?P<op>[^/]+)", api,
                   self.get_operation)

    def _project(self, request: Request) -> None:
        if request.match["project"] != self.project:
            raise ApiError(403, f"Required 'compute.firewalls' permission for project {request.match['project']}")

    def _operation(self, target: str, region: str | None = None) -> dict[str, Any]:
        name = f"operation-{next(self._ids)}"
        operation = {"kind": "compute#operation", "name": name, "status": "RUNNING", "targetLink": target}
        if region:
            operation["region"] = f"https://www.googleapis.com/compute/v1/projects/{self.project}/regions/{region}"
        operation["selfLink"] = (f"https://www.googleapis.com/compute/v1/projects/{self.project}/"
                                 f"{f'regions/{region}' if region else 'global'}/operations/{name}")
        self.operations[name] = {**operation, "status": "DONE"}
        return operation

    @staticmethod
    def _checked(body: dict[str, Any]) -> dict[str, Any]:
        unknown = set(body) - WRITABLE
        if unknown:
            raise ApiError(400, f"Invalid JSON payload received. Unknown name {sorted(unknown)[0]!r}")
        if ("allowed" in body) == ("denied" in body):
            raise ApiError(400, "Invalid value for field 'resource': exactly one of allowed and denied")
        for entry in body.get("allowed") or body.get("denied") or []:
            if set(entry) - {"IPProtocol", "ports"} or entry.get("IPProtocol") not in PROTOCOLS:
                raise ApiError(400, f"Invalid value for field 'resource.denied': {entry}")
        if body.get("direction", "INGRESS") not in ("INGRESS", "EGRESS"):
            raise ApiError(400, f"Invalid value for field 'resource.direction': {body.get('direction')!r}")
        if not 0 <= int(body.get("priority", 1000)) <= 65535:
            raise ApiError(400, "Invalid value for field 'resource.priority'")
        families = {ipaddress.ip_network(r).version for r in body.get("sourceRanges") or []}
        if len(families) > 1:
            raise ApiError(400, "Invalid value for field 'resource.sourceRanges': IPv4 and IPv6 ranges mixed")
        return body

    def insert(self, request: Request) -> tuple[int, Any]:
        self._project(request)
        body = self._checked(request.json())
        name = body.get("name", "")
        with self._lock:
            if name in self.firewalls:
                raise ApiError(409, f"The resource 'projects/{self.project}/global/firewalls/{name}' already exists")
            network = body.get("network", "global/networks/default")
            self.firewalls[name] = {**json_copy(body), "network": f"https://www.googleapis.com/compute/v1/projects/"
                                                                 f"{self.project}/{network}",
                                    "priority": body.get("priority", 1000), "direction": body.get("direction", "INGRESS")}
            return 200, self._operation(name)

    def _rule(self, request: Request) -> str:
        self._project(request)
        name = request.match["name"]
        if name not in self.firewalls:
            raise ApiError(404, f"The resource 'projects/{self.project}/global/firewalls/{name}' was not found")
        return name

    def get(self, request: Request) -> tuple[int, Any]:
        with self._lock:
            return 200, json_copy(self.firewalls[self._rule(request)])

    def patch(self, request: Request) -> tuple[int, Any]:
        body = self._checked(request.json())
        with self._lock:
            name = self._rule(request)
            rule = self.firewalls[name]
            for key in ("allowed", "denied"):
                if key in body:
                    rule.pop("allowed", None)
                    rule.pop("denied", None)
            rule.update({k: v for k, v in json_copy(body).items() if k != "network"})
            return 200, self._operation(name)

    def delete(self, request: Request) -> tuple[int, Any]:
        with self._lock:
            name = self._rule(request)
            del self.firewalls[name]
            return 200, self._operation(name)

    def subnet_network(self, region: str, subnet: str) -> str | None:
        """The network holding `subnet` in `region`, None when there is no such subnet."""
        for name, network in self.networks.items():
            if network.get("with_api") and not self._made_yet():
                continue
            if (network["auto"] and subnet == name) or subnet in network["subnets"].get(region, ()):
                return name
        return None

    def _made_yet(self) -> bool:
        """Whether Google has made the default network by now (Compute Engine enabled long enough)."""
        if self.access is None:
            return True
        since = self.access.enabled_at("compute.googleapis.com")
        return since is not None and self.access.clock.now() >= since + self.network_delay_s

    def get_subnet(self, request: Request) -> tuple[int, Any]:
        self._project(request)
        region, subnet = request.match["region"], request.match["subnet"]
        network = self.subnet_network(region, subnet)
        if network is None:
            raise ApiError(404, f"The resource 'projects/{self.project}/regions/{region}/subnetworks/{subnet}' "
                                "was not found")
        key = region if subnet == "default" else f"{region}/{subnet}"
        with self._lock:
            return 200, {"name": subnet, "region": region, "fingerprint": "abc=",
                         "network": f"https://www.googleapis.com/compute/v1/projects/{self.project}/global/networks/"
                                    f"{network}",
                         "privateIpGoogleAccess": self.private_google_access.get(key, False)}

    def set_private_google_access(self, request: Request) -> tuple[int, Any]:
        self.get_subnet(request)
        body = request.json()
        if set(body) != {"privateIpGoogleAccess"} or not isinstance(body["privateIpGoogleAccess"], bool):
            raise ApiError(400, f"Invalid JSON payload received: {body}")
        region, subnet = request.match["region"], request.match["subnet"]
        with self._lock:
            self.private_google_access[region if subnet == "default" else f"{region}/{subnet}"] = \
                body["privateIpGoogleAccess"]
            return 200, self._operation(f"subnetworks/{request.match['subnet']}", request.match["region"])

    def get_operation(self, request: Request) -> tuple[int, Any]:
        self._project(request)
        with self._lock:
            operation = self.operations.get(request.match["op"])
        # Each operation lives in its scope: global, or the region of the resource it changes.
        if operation is None or not operation["selfLink"].endswith(f"/{request.match['scope']}/operations/"
                                                                   f"{request.match['op']}"):
            raise ApiError(404, f"operation {request.match['op']} was not found")
        return 200, json_copy(operation)
