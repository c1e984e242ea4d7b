"""Fake Cloud Monitoring v3 (REST): the project's alert policies, as deploy creates `alerts:`'s.

Checked as Monitoring documents the AlertPolicy resource
(https://cloud.google.com/monitoring/api/ref_v3/rest/v3/projects.alertPolicies): `name` is
assigned on create and may not be sent then; one to six `conditions`, combined by `combiner`; a
policy with a `conditionMatchedLog` condition needs `alertStrategy.notificationRateLimit.period`
(log-based alerting); `userLabels` keys and values are lowercase letters, digits, `_` and `-`;
notification channels are projects/P/notificationChannels/ID. PATCH without an update mask
replaces the policy. Lists come in pages of `page_size` (2 by default, so paging is exercised).
"""

from __future__ import annotations

import itertools
import re
import threading
from typing import Any

from tests.fakes.deploy.common import json_copy
from tests.fakes.deploy.http import ApiError, Request, Router

PROJECT = r"/v3/projects/(?P<project>[^/]+)"
POLICY = f"{PROJECT}/alertPolicies/(?P<id>[^/]+)"
LABEL = re.compile(r"^[a-z][a-z0-9_-]{0,62}$")
VALUE = re.compile(r"^[a-z0-9_-]{0,63}$")
CHANNEL = re.compile(r"^projects/[^/]+/notificationChannels/[^/]+$")
FIELDS = frozenset({"name", "displayName", "documentation", "userLabels", "conditions", "combiner", "enabled",
                    "notificationChannels", "alertStrategy", "severity"})


class FakeMonitoring:
    def __init__(self, project: str, page_size: int = 2):
        self.project = project
        self.page_size = page_size
        self.policies: dict[str, dict[str, Any]] = {}
        self._ids = itertools.count(1000)
        self._lock = threading.Lock()

    def routes(self, router: Router) -> None:
        api = "monitoring"
        router.add("GET", f"{PROJECT}/alertPolicies", api, self.list)
        router.add("POST", f"{PROJECT}/alertPolicies", api, self.create)
        router.add("PATCH", POLICY, api, self.patch)
        router.add("DELETE", POLICY, api, self.delete)

    def _project(self, request: Request) -> None:
        if request.match["project"] != self.project:
            raise ApiError(403, f"Permission monitoring.alertPolicies denied on project {request.match['project']}")

    @staticmethod
    def _checked(body: dict[str, Any]) -> dict[str, Any]:
        unknown = set(body) - FIELDS
        if unknown:
            raise ApiError(400, f"Invalid JSON payload received. Unknown name {sorted(unknown)[0]!r}")
        conditions = body.get("conditions") or []
        if not 1 <= len(conditions) <= 6:
            raise ApiError(400, "Field alert_policy.conditions had an invalid value: between 1 and 6 conditions")
        if body.get("combiner") not in ("AND", "OR", "AND_WITH_MATCHING_RESOURCE"):
            raise ApiError(400, f"Field alert_policy.combiner had an invalid value: {body.get('combiner')!r}")
        for condition in conditions:
            matched = condition.get("conditionMatchedLog")
            if matched is not None and not matched.get("filter"):
                raise ApiError(400, "Field alert_policy.conditions[0].condition_matched_log.filter is required")
        if any("conditionMatchedLog" in c for c in conditions):
            period = ((body.get("alertStrategy") or {}).get("notificationRateLimit") or {}).get("period")
            if not period:
                raise ApiError(400, "Field alert_policy.alert_strategy.notification_rate_limit is required for "
                                    "log-based alert policies")
        for key, value in (body.get("userLabels") or {}).items():
            if not LABEL.match(key) or not VALUE.match(str(value)):
                raise ApiError(400, f"Field alert_policy.user_labels had an invalid value: {key}={value}")
        for channel in body.get("notificationChannels") or []:
            if not CHANNEL.match(channel):
                raise ApiError(400, f"Field alert_policy.notification_channels had an invalid value: {channel}")
        return body

    def list(self, request: Request) -> tuple[int, Any]:
        self._project(request)
        with self._lock:
            names = sorted(self.policies)
        start = int(request.query.get("pageToken") or 0)
        page = names[start:start + self.page_size]
        answer: dict[str, Any] = {"alertPolicies": [json_copy(self.policies[n]) for n in page]}
        if start + self.page_size < len(names):
            answer["nextPageToken"] = str(start + self.page_size)
        return 200, answer

    def create(self, request: Request) -> tuple[int, Any]:
        self._project(request)
        body = self._checked(request.json())
        if "name" in body:
            raise ApiError(400, "Field alert_policy.name must not be set on create: Monitoring assigns it")
        with self._lock:
            name = f"projects/{self.project}/alertPolicies/{next(self._ids)}"
            self.policies[name] = {**json_copy(body), "name": name}
            return 200, json_copy(self.policies[name])

    def patch(self, request: Request) -> tuple[int, Any]:
        self._project(request)
        name = f"projects/{self.project}/alertPolicies/{request.match['id']}"
        body = self._checked(request.json())
        with self._lock:
            if name not in self.policies:
                raise ApiError(404, f"Requested entity was not found: {name}")
            if request.query.get("updateMask"):
                raise ApiError(400, "this fake replaces whole policies only (deploy sends no updateMask)")
            self.policies[name] = {**json_copy(body), "name": name}
            return 200, json_copy(self.policies[name])

    def delete(self, request: Request) -> tuple[int, Any]:
        self._project(request)
        name = f"projects/{self.project}/alertPolicies/{request.match['id']}"
        with self._lock:
            if self.policies.pop(name, None) is None:
                raise ApiError(404, f"Requested entity was not found: {name}")
        return 200, {}
