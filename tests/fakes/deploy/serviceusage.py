"""Fake Service Usage v1 (REST): which APIs the project has enabled, and enabling one.

The shapes deploy uses (https://cloud.google.com/service-usage/docs/reference/rest/v1/services):
GET v1/projects/P/services?filter=state:ENABLED answers Services named
`projects/PROJECT_NUMBER/services/NAME` (the number, whichever of id or number the caller used);
POST v1/projects/P/services/NAME:enable answers an Operation, done on its first poll
(GET v1/operations/ID). Service Usage itself is enabled on every new project; a project that
turned it off is refused by the router's gate like any other API (and then nothing can enable
the others). The enabled state lives in the shared Access.
"""

from __future__ import annotations

import itertools
import threading
from typing import Any

from tests.fakes.deploy.access import Access
from tests.fakes.deploy.common import json_copy, page
from tests.fakes.deploy.http import ApiError, Request, Router

PROJECT = r"/v1/projects/(?P<project>[^/]+)"
SERVICE_TYPE = "type.googleapis.com/google.api.serviceusage.v1.EnableServiceResponse"


class FakeServiceUsage:
    def __init__(self, access: Access):
        self.access = access
        self.operations: dict[str, dict[str, Any]] = {}
        self.enables: list[str] = []  # every service an enable call named, in order
        self._lock = threading.Lock()
        self._ids = itertools.count(1)

    def routes(self, router: Router) -> None:
        api = "serviceusage"
        router.add("GET", f"{PROJECT}/services", api, self.list)
        router.add("POST", f"{PROJECT}/services/(?P<service>[^/:]+):enable", api, self.enable)
        router.add("GET", r"/v1/(?P<op>operations/[^/]+)", api, self.get_operation)

    def _project(self, request: Request) -> None:
        if request.match["project"] not in (self.access.project, self.access.number):
            raise ApiError(403, f"Permission denied to list services for consumer container "
                                f"[projects/{request.match['project']}]")

    def _service(self, name: str) -> dict[str, Any]:
        parent = f"projects/{self.access.number}"
        return {"name": f"{parent}/services/{name}", "parent": parent, "config": {"name": name},
                "state": "ENABLED"}

    def list(self, request: Request) -> tuple[int, Any]:
        self._project(request)
        wanted = request.query.get("filter", "")
        if wanted not in ("", "state:ENABLED"):
            raise ApiError(400, f"this fake understands only filter=state:ENABLED, not {wanted!r}")
        items = [self._service(name) for name in self.access.enabled()]
        return 200, page(items, request.query, "services", max_size=200)

    def enable(self, request: Request) -> tuple[int, Any]:
        self._project(request)
        service = request.match["service"]
        if not service.endswith(".googleapis.com"):
            raise ApiError(403, f"Not found or permission denied for service(s): {service}.")
        self.access.enable(service)
        name = f"operations/acf.p2-{self.access.number}-{next(self._ids)}"
        with self._lock:
            self.enables.append(service)
            self.operations[name] = {"name": name, "done": True,
                                     "response": {"@type": SERVICE_TYPE, "service": self._service(service)}}
        return 200, {"name": name}

    def get_operation(self, request: Request) -> tuple[int, Any]:
        with self._lock:
            if request.match["op"] not in self.operations:
                raise ApiError(404, f"Operation {request.match['op']} not found")
            return 200, json_copy(self.operations[request.match["op"]])
