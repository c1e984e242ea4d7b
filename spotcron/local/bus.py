"""Message transport for local mode: in-process, or the Pub/Sub emulator when one is configured.

Either way a message reaches the functions as the same Pub/Sub CloudEvent that Eventarc
delivers on Google Cloud, through the functions-framework apps built from functions/main.py.
"""

from __future__ import annotations

import base64
import contextlib
import logging
import random
import threading
import uuid
from collections.abc import Callable, Mapping
from concurrent.futures import Future, ThreadPoolExecutor
from datetime import UTC, datetime
from typing import Any

log = logging.getLogger("spotcron.local")

# (topic, envelope) → None; the envelope is the CloudEvent data: {"message": {...}, "subscription": ...}
Handler = Callable[[str, dict[str, Any]], None]


def envelope(topic: str, data: bytes, attributes: Mapping[str, str] | None, message_id: str,
             publish_time: datetime) -> dict[str, Any]:
    return {
        "message": {"data": base64.b64encode(data).decode(), "attributes": dict(attributes or {}),
                    "messageId": message_id, "publishTime": publish_time.isoformat().replace("+00:00", "Z")},
        "subscription": f"projects/local/subscriptions/{topic}",
    }


class InProcessBus:
    """Delivers each message once, on a worker thread, to the handler of its topic."""

    def __init__(self, clock, workers: int = 8, *, redeliveries: int = 8, backoff_s: float = 1.0,
                 max_backoff_s: float = 30.0):
        self.clock = clock
        self.redeliveries = redeliveries
        self.backoff_s = backoff_s
        self.max_backoff_s = max_backoff_s
        self._closing = threading.Event()
        self._handlers: dict[str, Handler] = {}
        self._pool = ThreadPoolExecutor(max_workers=workers, thread_name_prefix="spotcron-bus")
        self._pending: set[Future] = set()
        self._lock = threading.Lock()

    def subscribe(self, topic: str, handler: Handler) -> None:
        self._handlers[topic] = handler

    def publish(self, topic: str, data: bytes, attributes: Mapping[str, str] | None = None) -> str:
        message_id = uuid.uuid4().hex
        handler = self._handlers.get(topic)
        if handler is None:
            log.debug("no subscriber for %s; message dropped", topic)
            return message_id
        message = envelope(topic, data, attributes, message_id, self.clock.now())
        future = self._pool.submit(self._deliver_with_retries, handler, topic, message)
        with self._lock:
            self._pending.add(future)
        future.add_done_callback(self._done)
        return message_id

    def _deliver_with_retries(self, handler: Handler, topic: str, message: dict[str, Any]) -> None:
        """Pub/Sub redelivers what the subscriber did not acknowledge; so do we, a few times."""
        for attempt in range(self.redeliveries + 1):
            try:
                _deliver(handler, topic, message)
                return
            except Exception:  # noqa: BLE001 - logged by _deliver
                # Jittered, so starts held back together (limits.AdmissionBusy) are not retried together.
                backoff = min(self.max_backoff_s, self.backoff_s * 2 ** attempt) * random.uniform(0.5, 1.0)
                if attempt == self.redeliveries or self._closing.wait(backoff):
                    return

    def _done(self, future: Future) -> None:
        with self._lock:
            self._pending.discard(future)

    def drain(self, timeout: float | None = None) -> None:
        """Wait for every message published so far to be handled."""
        with self._lock:
            pending = list(self._pending)
        for future in pending:
            future.result(timeout=timeout)

    def close(self) -> None:
        self._closing.set()
        self._pool.shutdown(wait=True, cancel_futures=True)


class EmulatorBus:
    """Topics and subscriptions on the Pub/Sub emulator (PUBSUB_EMULATOR_HOST), streaming-pulled here."""

    def __init__(self, host: str, project: str = "spotcron-local"):
        from spotcron.gcp.pubsub import EmulatorClients

        self.project = project
        self._clients = EmulatorClients(host, project)
        self._streams: list[Any] = []

    def _ensure(self, topic: str) -> tuple[str, str]:
        return self._clients.ensure(topic, f"{topic}-local")

    def subscribe(self, topic: str, handler: Handler) -> None:
        _, subscription = self._ensure(topic)

        def on_message(message) -> None:
            event = envelope(topic, message.data, dict(message.attributes), message.message_id,
                             message.publish_time.astimezone(UTC))
            try:
                _deliver(handler, topic, event)
            except Exception:  # noqa: BLE001 - nack: the emulator redelivers, as Pub/Sub would
                message.nack()
                return
            message.ack()

        self._streams.append(self._clients.subscribe(subscription, on_message))

    def publish(self, topic: str, data: bytes, attributes: Mapping[str, str] | None = None) -> str:
        topic_path, _ = self._ensure(topic)
        return self._clients.publish(topic_path, data, attributes)

    def drain(self, timeout: float | None = None) -> None:
        """Streaming pull has no notion of "done"; callers poll the run records instead."""

    def close(self) -> None:
        for stream in self._streams:
            stream.cancel()
            with contextlib.suppress(Exception):  # a cancelled stream ends with CancelledError
                stream.result(timeout=10)
        self._clients.close()


def _deliver(handler: Handler, topic: str, message: dict[str, Any]) -> None:
    try:
        handler(topic, message)
    except Exception:
        log.exception("handling a message on %s failed", topic)
        raise
