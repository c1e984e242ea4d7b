"""The Events port on Pub/Sub (google-cloud-pubsub), publishing JSON.

Topics are named short (`spotcron-start`) and become `projects/P/topics/spotcron-start`.
The client library (grpc) is imported on first use: functions cold-start on a schedule.
"""

from __future__ import annotations

import contextlib
import json
import threading
from collections.abc import Callable, Mapping
from datetime import date, datetime
from typing import Any

from spotcron.gcp.error_map import translated


def topic_path(project: str, topic: str) -> str:
    """`spotcron-start` → `projects/P/topics/spotcron-start`; a full path is kept as it is."""
    if topic.startswith("projects/"):
        return topic
    if not topic or "/" in topic:
        raise ValueError(f"topic {topic!r}: expected a short name like 'spotcron-start' or "
                         "'projects/PROJECT/topics/NAME'")
    return f"projects/{project}/topics/{topic}"


def _json_default(value: Any) -> Any:
    if isinstance(value, datetime | date):
        return value.isoformat()
    raise TypeError(f"{type(value).__name__} is not JSON-serialisable: {value!r}")


def encode(data: Mapping[str, Any]) -> bytes:
    """The message body: compact JSON, keys sorted so equal events give equal bytes."""
    return json.dumps(dict(data), separators=(",", ":"), sort_keys=True, default=_json_default).encode()


def emulator_publisher(host: str) -> Any:
    """A PublisherClient for the Pub/Sub emulator at `host` ("127.0.0.1:8085"): plain gRPC, no credentials.

    The caller passes the host (e.g. from PUBSUB_EMULATOR_HOST); nothing here reads the environment.
    """
    import grpc
    from google.cloud import pubsub_v1
    from google.pubsub_v1.services.publisher.transports import PublisherGrpcTransport

    return pubsub_v1.PublisherClient(transport=PublisherGrpcTransport(channel=grpc.insecure_channel(host)))


def default_publisher() -> Any:
    """A PublisherClient on Google Cloud with Application Default Credentials."""
    from google.cloud import pubsub_v1

    return pubsub_v1.PublisherClient()


class EmulatorClients:
    """A publisher and a subscriber on the Pub/Sub emulator at `host` ("127.0.0.1:8085"), anonymous.

    Local mode's bus (local/bus.py) pulls with these; each topic gets one subscription it names.
    """

    def __init__(self, host: str, project: str):
        from google.auth.credentials import AnonymousCredentials
        from google.cloud import pubsub_v1

        options = {"api_endpoint": host}
        self.project = project
        self._publisher = pubsub_v1.PublisherClient(credentials=AnonymousCredentials(), client_options=options)
        self._subscriber = pubsub_v1.SubscriberClient(credentials=AnonymousCredentials(), client_options=options)

    def ensure(self, topic: str, subscription: str) -> tuple[str, str]:
        """(topic path, subscription path), both created unless they exist."""
        from google.api_core.exceptions import AlreadyExists

        topic_path = self._publisher.topic_path(self.project, topic)
        subscription_path = self._subscriber.subscription_path(self.project, subscription)
        with contextlib.suppress(AlreadyExists):
            self._publisher.create_topic(name=topic_path)
        with contextlib.suppress(AlreadyExists):
            self._subscriber.create_subscription(name=subscription_path, topic=topic_path, ack_deadline_seconds=60)
        return topic_path, subscription_path

    def subscribe(self, subscription_path: str, callback: Callable[[Any], None]) -> Any:
        """Streaming pull into `callback` (each message has data, attributes, message_id,
        publish_time, ack(), nack()); answers the stream's future, to cancel."""
        return self._subscriber.subscribe(subscription_path, callback=callback)

    def publish(self, topic_path: str, data: bytes, attributes: Mapping[str, str] | None = None) -> str:
        return self._publisher.publish(topic_path, data, **dict(attributes or {})).result(timeout=30)

    def close(self) -> None:
        self._subscriber.close()
        self._publisher.stop()  # sends what is still batched, then refuses more
        self._publisher.transport.close()


class PubSubEvents:
    """Events on Pub/Sub for one project. `publisher` is a pubsub_v1.PublisherClient (default: made on first use)."""

    def __init__(self, project: str, *, publisher: Any = None, timeout: float = 30.0):
        self.project = project
        self.timeout = timeout
        self._publisher = publisher
        self._lock = threading.Lock()

    @classmethod
    def for_emulator(cls, project: str, host: str, *, timeout: float = 30.0) -> PubSubEvents:
        return cls(project, publisher=emulator_publisher(host), timeout=timeout)

    def _client(self) -> Any:
        with self._lock:
            if self._publisher is None:
                from google.cloud import pubsub_v1

                with translated(f"connect to Pub/Sub in project {self.project}"):
                    self._publisher = pubsub_v1.PublisherClient()
            return self._publisher

    def publish(self, topic: str, data: Mapping[str, Any], attributes: Mapping[str, str] | None = None) -> str:
        path = topic_path(self.project, topic)
        body = encode(data)
        attrs = {str(k): str(v) for k, v in (attributes or {}).items()}
        publisher = self._client()
        with translated(f"publish to {path}"):
            future = publisher.publish(path, body, **attrs)
            return str(future.result(timeout=self.timeout))
