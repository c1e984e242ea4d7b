"""A fake Compute Engine REST API, enough for spotcron.gcp.compute and tools built like it.

Speaks: instances insert (with `requestId`: a repeat within 60 minutes gets the first operation
and creates nothing) / get / delete / aggregatedList (with an AIP-160 label filter and
paging) and zoneOperations get / wait, for any project. Keeps instances in memory, records
every request (see rest.FakeRestServer) and can be told to refuse creates in a zone the
way Compute Engine does: in the operation (stockout, quota) or in the HTTP answer (403, 404).

    with FakeComputeEngine(zones=["us-central1-a", "us-central1-b"]) as fake:
        compute = GoogleCompute("proj", fake.zones, client_options={"api_endpoint": fake.endpoint},
                                credentials=AnonymousCredentials())
        fake.fail_creates("us-central1-a", "ZONE_RESOURCE_POOL_EXHAUSTED")
"""

from __future__ import annotations

import itertools
import re
import uuid
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from spotcron.engine.ports import REQUEST_ID_MEMORY_S
from tests.fakes.gcp.rest import FakeRestServer, RecordedRequest, Reply, google_error

API = "https://www.googleapis.com/compute/v1"
_PREFIX = r"/compute/v1/projects/(?P<project>[^/]+)"
INSTANCES_PATH = _PREFIX + r"/zones/(?P<zone>[^/]+)/instances"
INSTANCE_PATH = INSTANCES_PATH + r"/(?P<name>[^/]+)"
AGGREGATED_PATH = _PREFIX + r"/aggregated/instances"
OPERATION_PATH = _PREFIX + r"/zones/(?P<zone>[^/]+)/operations/(?P<operation>[^/]+)"
_NAME = re.compile(r"^[a-z]([-a-z0-9]{0,61}[a-z0-9])?$")
# `labels.spotcron = "1"`, `labels.job:*`, `status != "RUNNING"`, optionally in parentheses,
# several side by side meaning AND; the subset of AIP-160 that tools here send.
_TERM = re.compile(r'\(?\s*(?P<field>[A-Za-z][\w.]*)\s*(?P<op>=|!=|:)\s*(?P<value>"[^"]*"|[^\s()"]+)\s*\)?')


def default_message(code: str, project: str, zone: str) -> tuple[int, str, list[dict[str, Any]]]:
    """(httpErrorStatusCode, message, errorDetails) Compute Engine sends with an operation error code."""
    if code.startswith("ZONE_RESOURCE_POOL_EXHAUSTED"):
        return 503, (f"The zone 'projects/{project}/zones/{zone}' does not have enough resources available to "
                     "fulfill the request.  Try a different zone, or try again later."), [
            {"errorInfo": {"reason": "resource_availability", "domain": "compute.googleapis.com",
                           "metadatas": {"zone": zone}}}]
    if code == "QUOTA_EXCEEDED":
        region = zone.rsplit("-", 1)[0]
        return 403, f"Quota 'CPUS' exceeded.  Limit: 8.0 in region {region}.", []
    return 400, f"{code} (injected by the fake)", []


@dataclass
class _CreateFault:
    code: str
    message: str | None
    http_status: int | None
    sync: bool
    times: int | None
    details: list[dict[str, Any]] | None


class FakeComputeEngine(FakeRestServer):
    def __init__(self, zones: Iterable[str] = ("us-central1-a", "us-central1-b", "us-central1-c"), *,
                 project: str = "test-project", page_size: int = 500, initial_status: str = "RUNNING",
                 clock: Callable[[], datetime] = lambda: datetime.now(UTC)):
        super().__init__()
        self.zones = list(zones)
        self.project = project  # the default for add_instance/set_status; requests may name any project
        self.page_size = page_size  # aggregatedList instances per page (maxResults overrides it)
        self.initial_status = initial_status
        self.clock = clock
        self.instances: dict[tuple[str, str, str], dict[str, Any]] = {}  # (project, zone, name) → resource
        self.operations: dict[tuple[str, str, str], dict[str, Any]] = {}
        self.request_ids: dict[tuple[str, str], tuple[datetime, dict[str, Any]]] = {}  # → (first seen, operation)
        self.unreachable_zones: set[str] = set()
        self.missing_images: set[str] = set()
        self.pending_waits = 0  # wait() answers RUNNING this many times before DONE
        self.ignore_filter = False  # answer aggregatedList as if the filter were not understood
        # Compute Engine accepts a delete at once but the VM stays listed, STOPPING, until the
        # deletion finishes (seconds to minutes; the instance life cycle page). With this on, a
        # deleted instance stays STOPPING until finish_deletions().
        self.deletion_lag = False
        self._deleting: set[tuple[str, str, str]] = set()
        self._create_faults: dict[str, list[_CreateFault]] = {}
        self._ids = itertools.count(1000)
        self.route("POST", INSTANCES_PATH, self._insert)
        self.route("GET", INSTANCE_PATH, self._get)
        self.route("DELETE", INSTANCE_PATH, self._delete)
        self.route("GET", AGGREGATED_PATH, self._aggregated)
        self.route("GET", OPERATION_PATH, self._operation)
        self.route("POST", OPERATION_PATH + "/wait", self._wait)

    # --- steering --------------------------------------------------------------------------

    def fail_creates(self, zone: str, code: str, message: str | None = None, *, http_status: int | None = None,
                     sync: bool = False, times: int | None = None,
                     details: list[dict[str, Any]] | None = None) -> None:
        """Refuse instance inserts in `zone`.

        By default the insert is accepted and its operation ends with error `code` (how stockouts
        and quota errors arrive); `sync=True` answers the POST itself with `http_status`.
        `times=None` refuses every insert until clear_faults(). `details` replaces the
        operation error's errorDetails (default: what Compute Engine sends with `code`).
        """
        with self._lock:
            self._create_faults.setdefault(zone, []).append(
                _CreateFault(code, message, http_status, sync, times, details))

    def clear_faults(self) -> None:
        with self._lock:
            self._create_faults.clear()
            self._faults.clear()

    def add_instance(self, zone: str, name: str, *, labels: dict[str, str] | None = None, status: str = "RUNNING",
                     machine_type: str = "e2-small", project: str | None = None) -> dict[str, Any]:
        """Put an instance in place as if someone else had created it."""
        project = project or self.project
        body = {"name": name, "machineType": f"zones/{zone}/machineTypes/{machine_type}", "labels": labels or {}}
        with self._lock:
            resource = self._store(project, zone, body)
            resource["status"] = status
            return resource

    def set_status(self, zone: str, name: str, status: str, project: str | None = None) -> None:
        with self._lock:
            self.instances[(project or self.project, zone, name)]["status"] = status

    def inserted_bodies(self) -> list[Any]:
        return [r.body for r in self.calls("POST", INSTANCES_PATH)]

    # --- instances -------------------------------------------------------------------------

    def _store(self, project: str, zone: str, body: dict[str, Any]) -> dict[str, Any]:
        resource = dict(body)
        resource.update({
            "kind": "compute#instance",
            "id": str(next(self._ids)),
            "zone": f"{API}/projects/{project}/zones/{zone}",
            "machineType": f"{API}/projects/{project}/{body['machineType']}",
            "status": self.initial_status,
            "creationTimestamp": self.clock().isoformat(timespec="milliseconds"),
            "selfLink": f"{API}/projects/{project}/zones/{zone}/instances/{body['name']}",
        })
        self.instances[(project, zone, body["name"])] = resource
        return resource

    def _insert(self, request: RecordedRequest, project: str, zone: str) -> Reply:
        body = request.body
        if not isinstance(body, dict) or not body.get("name"):
            return google_error(400, "Invalid value for field 'resource.name': ''. Must be a match of regex "
                                     "'[a-z](?:[-a-z0-9]{0,61}[a-z0-9])?'")
        name = body["name"]
        request_id = request.param("requestId") or None
        if request_id is not None:
            # "The request ID must be a valid UUID with the exception that zero UUID is not
            # supported"; a repeat within 60 minutes is ignored and gets the first operation.
            try:
                valid = uuid.UUID(request_id).int != 0
            except ValueError:
                valid = False
            if not valid:
                return google_error(400, f"Invalid value for field 'requestId': '{request_id}'. Must be a UUID "
                                         "other than the zero UUID.")
            seen = self.request_ids.get((project, request_id))
            if seen is not None and (self.clock() - seen[0]).total_seconds() <= REQUEST_ID_MEMORY_S:
                return 200, seen[1]  # kept current by waits: the same dict
        if zone not in self.zones:
            return google_error(404, f"The resource 'projects/{project}/zones/{zone}' was not found")
        if not _NAME.match(name):
            return google_error(400, f"Invalid value for field 'resource.name': '{name}'. Must be a match of "
                                     "regex '(?:[a-z](?:[-a-z0-9]{0,61}[a-z0-9])?)'")
        if "machineType" not in body:
            return google_error(400, "Invalid value for field 'resource.machineType': ''. Must be specified.")
        for disk in body.get("disks", []):
            image = disk.get("initializeParams", {}).get("sourceImage")
            if image in self.missing_images:
                return google_error(404, f"The resource '{image}' was not found")
        if (project, zone, name) in self.instances:
            return google_error(409, f"The resource 'projects/{project}/zones/{zone}/instances/{name}' already exists",
                                "alreadyExists")
        fault = self._take_fault(zone)
        if fault is not None:
            status, message, details = default_message(fault.code, project, zone)
            status = fault.http_status or status
            message = fault.message or message
            details = details if fault.details is None else fault.details
            if fault.sync:
                return google_error(status, message, fault.code)
            error = {"errors": [{"code": fault.code, "message": message, "errorDetails": details}]}
            return 200, self._remembered(project, request_id, self._new_operation(
                project, zone, "insert", name, error=error, http_status=status))
        resource = self._store(project, zone, body)
        return 200, self._remembered(project, request_id,
                                     self._new_operation(project, zone, "insert", name, target_id=resource["id"]))

    def _remembered(self, project: str, request_id: str | None, operation: dict[str, Any]) -> dict[str, Any]:
        if request_id is not None:
            self.request_ids.setdefault((project, request_id), (self.clock(), operation))
        return operation

    def _take_fault(self, zone: str) -> _CreateFault | None:
        faults = self._create_faults.get(zone) or []
        if not faults:
            return None
        fault = faults[0]
        if fault.times is not None:
            fault.times -= 1
            if fault.times <= 0:
                faults.pop(0)
        return fault

    def _get(self, request: RecordedRequest, project: str, zone: str, name: str) -> Reply:
        resource = self.instances.get((project, zone, name))
        if resource is None:
            return google_error(404, f"The resource 'projects/{project}/zones/{zone}/instances/{name}' was not found")
        return 200, resource

    def finish_deletions(self) -> list[str]:
        """End every deletion in progress (deletion_lag): the instances go; their names."""
        with self._lock:
            gone = sorted(self._deleting)
            for key in gone:
                self.instances.pop(key, None)
            self._deleting.clear()
        return [name for _, _, name in gone]

    def _delete(self, request: RecordedRequest, project: str, zone: str, name: str) -> Reply:
        if self.deletion_lag:
            resource = self.instances.get((project, zone, name))
            if resource is not None:
                resource["status"] = "STOPPING"
                self._deleting.add((project, zone, name))
        else:
            resource = self.instances.pop((project, zone, name), None)
        if resource is None:
            return google_error(404, f"The resource 'projects/{project}/zones/{zone}/instances/{name}' was not found")
        return 200, self._new_operation(project, zone, "delete", name, target_id=resource["id"])

    def _aggregated(self, request: RecordedRequest, project: str) -> Reply:
        try:
            keep = _parse_filter("" if self.ignore_filter else request.param("filter", "") or "")
        except ValueError as exc:
            return google_error(400, f"Invalid value for field 'filter': {exc}")
        size = int(request.param("maxResults") or self.page_size)
        start = int(request.param("pageToken") or 0)
        matching = sorted((key for key, res in self.instances.items() if key[0] == project and keep(res)),
                          key=lambda key: (key[1], key[2]))
        page = matching[start:start + size]
        items: dict[str, Any] = {}
        for _, zone, name in page:
            items.setdefault(f"zones/{zone}", {"instances": []})["instances"].append(
                self.instances[(project, zone, name)])
        if start == 0:
            for zone in self.zones:
                if zone in self.unreachable_zones:
                    items[f"zones/{zone}"] = {"warning": {"code": "UNREACHABLE",
                                                          "message": f"zone {zone} is unreachable"}}
                else:
                    items.setdefault(f"zones/{zone}", {"warning": {
                        "code": "NO_RESULTS_ON_PAGE", "message": "There are no results for scope "
                        f"'zones/{zone}' on this page."}})
        reply: dict[str, Any] = {"kind": "compute#instanceAggregatedList", "id": f"projects/{project}/aggregated/instances",
                                 "items": items}
        if start + size < len(matching):
            reply["nextPageToken"] = str(start + size)
        return 200, reply

    # --- operations ------------------------------------------------------------------------

    def _new_operation(self, project: str, zone: str, kind: str, target: str, *, target_id: str = "",
                       error: dict[str, Any] | None = None, http_status: int | None = None) -> dict[str, Any]:
        now = self.clock().isoformat(timespec="milliseconds")
        name = f"operation-{next(self._ids)}"
        operation: dict[str, Any] = {
            "kind": "compute#operation",
            "id": str(next(self._ids)),
            "name": name,
            "zone": f"{API}/projects/{project}/zones/{zone}",
            "operationType": kind,
            "targetLink": f"{API}/projects/{project}/zones/{zone}/instances/{target}",
            "status": "RUNNING" if self.pending_waits else "DONE",
            "progress": 0 if self.pending_waits else 100,
            "insertTime": now,
            "startTime": now,
            "selfLink": f"{API}/projects/{project}/zones/{zone}/operations/{name}",
        }
        if target_id:
            operation["targetId"] = target_id
        if not self.pending_waits:
            operation["endTime"] = now
        if error is not None:
            operation["error"] = error
            operation["httpErrorStatusCode"] = http_status or 400
            operation["httpErrorMessage"] = {403: "FORBIDDEN", 503: "SERVICE UNAVAILABLE"}.get(http_status or 400,
                                                                                               "BAD REQUEST")
        self.operations[(project, zone, name)] = {"op": operation, "waits_left": self.pending_waits}
        return operation

    def _operation(self, request: RecordedRequest, project: str, zone: str, operation: str) -> Reply:
        entry = self.operations.get((project, zone, operation))
        if entry is None:
            return google_error(404, f"The resource 'projects/{project}/zones/{zone}/operations/{operation}' "
                                     "was not found")
        return 200, entry["op"]

    def _wait(self, request: RecordedRequest, project: str, zone: str, operation: str) -> Reply:
        entry = self.operations.get((project, zone, operation))
        if entry is None:
            return google_error(404, f"The resource 'projects/{project}/zones/{zone}/operations/{operation}' "
                                     "was not found")
        if entry["waits_left"] > 0:
            entry["waits_left"] -= 1
        if entry["waits_left"] == 0:
            entry["op"].update(status="DONE", progress=100, endTime=entry["op"]["insertTime"])
        return 200, entry["op"]


def _parse_filter(text: str) -> Callable[[dict[str, Any]], bool]:
    """A predicate for the AIP-160 subset in _TERM; ValueError on anything else (as a 400)."""
    text = text.strip()
    terms = []
    position = 0
    while position < len(text):
        match = _TERM.match(text, position)
        if not match:
            raise ValueError(f"unsupported filter expression at {text[position:]!r}")
        terms.append((match["field"], match["op"], match["value"].strip('"')))
        position = match.end()
        while position < len(text) and text[position] == " ":
            position += 1

    def value_of(resource: dict[str, Any], path: str) -> Any:
        current: Any = resource
        for part in path.split("."):
            current = current.get(part) if isinstance(current, dict) else None
        return current

    def keep(resource: dict[str, Any]) -> bool:
        for path, op, wanted in terms:
            actual = value_of(resource, path)
            shown = "" if actual is None else str(actual).lower() if isinstance(actual, bool) else str(actual)
            if op == ":" and wanted == "*":
                ok = actual is not None
            elif op in ("=", ":"):
                ok = actual is not None and shown == wanted
            else:
                ok = shown != wanted
            if not ok:
                return False
        return True

    return keep
