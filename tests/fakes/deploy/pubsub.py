"""Fake Pub/Sub admin API (v1 REST): topics and their IAM policies."""

from __future__ import annotations

import threading
from typing import Any

from google import pubsub_v1

from tests.fakes.deploy.common import PolicyStore, canonical, json_copy, page, policy_from_body
from tests.fakes.deploy.http import ApiError, Request, Router, caller

TOPIC = r"/v1/(?P<name>projects/[^/]+/topics/[^/:]+)"


class FakePubsub:
    def __init__(self, policies: PolicyStore):
        self.topics: dict[str, dict[str, Any]] = {}
        self.policies = policies
        self.published: list[tuple[str, dict[str, Any]]] = []  # (topic, message) in order
        self._lock = threading.Lock()

    def routes(self, router: Router) -> None:
        api = "pubsub"
        router.add("GET", r"/v1/(?P<project>projects/[^/]+)/topics", api, self.list)
        router.add("PUT", TOPIC, api, self.create)
        router.add("GET", TOPIC, api, self.get)
        router.add("PATCH", TOPIC, api, self.patch)
        router.add("DELETE", TOPIC, api, self.delete)
        router.add("GET", f"{TOPIC}:getIamPolicy", api, self.get_policy)
        router.add("POST", f"{TOPIC}:setIamPolicy", api, self.set_policy)
        router.add("POST", f"{TOPIC}:publish", api, self.publish, checks_permission=True)

    def publish(self, request: Request) -> tuple[int, Any]:
        """topics.publish, as the caller: pubsub.topics.publish through the topic's policy or the
        project's (https://cloud.google.com/pubsub/docs/access-control#permissions)."""
        name = request.match["name"]
        access = self.policies.access
        if not self.exists(name):
            raise ApiError(404, f"Resource not found (resource={name.rsplit('/', 1)[-1]}).")
        project = name.split("/")[1]
        policies = [self.policies.policy(name)]
        if access.project_policies is not None:
            policies.append(access.project_policies.policy(f"projects/{project}"))
        access.check(caller(request) or "", "pubsub.topics.publish", name, policies)
        messages = request.json().get("messages") or []
        with self._lock:
            first = len(self.published)
            self.published += [(name, m) for m in messages]
        return 200, {"messageIds": [str(first + i + 1) for i in range(len(messages))]}

    def exists(self, name: str) -> bool:
        with self._lock:
            return name in self.topics

    def list(self, request: Request) -> tuple[int, Any]:
        prefix = request.match["project"] + "/topics/"
        with self._lock:
            items = [json_copy(t) for name, t in sorted(self.topics.items()) if name.startswith(prefix)]
        return 200, page(items, request.query, "topics")

    def create(self, request: Request) -> tuple[int, Any]:
        name = request.match["name"]
        topic = canonical(pubsub_v1.Topic.pb(), request.json())
        topic["name"] = name
        with self._lock:
            if name in self.topics:
                raise ApiError(409, "Topic already exists")
            self.topics[name] = topic
        self.policies.create(name)
        return 200, json_copy(topic)

    def get(self, request: Request) -> tuple[int, Any]:
        with self._lock:
            topic = self.topics.get(request.match["name"])
        if topic is None:
            raise ApiError(404, "Topic not found")
        return 200, json_copy(topic)

    def patch(self, request: Request) -> tuple[int, Any]:
        body = canonical(pubsub_v1.UpdateTopicRequest.pb(), request.json())
        mask = body.get("updateMask", "")
        if mask != "labels":
            raise ApiError(400, f"this fake updates labels only, got update_mask {mask!r}")
        with self._lock:
            topic = self.topics.get(request.match["name"])
            if topic is None:
                raise ApiError(404, "Topic not found")
            topic["labels"] = body.get("topic", {}).get("labels", {})
            return 200, json_copy(topic)

    def delete(self, request: Request) -> tuple[int, Any]:
        with self._lock:
            if self.topics.pop(request.match["name"], None) is None:
                raise ApiError(404, "Topic not found")
        self.policies.drop(request.match["name"])
        return 200, {}

    def get_policy(self, request: Request) -> tuple[int, Any]:
        return 200, self.policies.get(request.match["name"])

    def set_policy(self, request: Request) -> tuple[int, Any]:
        policy = policy_from_body(request.match["name"], request.json())
        return 200, self.policies.set(request.match["name"], policy)
