"""The events topic in local mode: what the engine publishes, handed to whoever listens.

On Google Cloud run events go to a Pub/Sub topic; in local mode `spotcron up` listens to draw
its live view. Nothing is kept: a long-running `up` must not grow with every event.
"""

from __future__ import annotations

import itertools
import json
import logging
import threading
from collections.abc import Callable, Mapping
from typing import Any

log = logging.getLogger("spotcron.local")

Listener = Callable[[Mapping[str, Any]], None]


class EventFeed:
    """The Events port: every published event is passed to each listener, in the publisher's thread."""

    def __init__(self) -> None:
        self._listeners: list[Listener] = []
        self._lock = threading.Lock()
        self._ids = itertools.count(1)

    def listen(self, listener: Listener) -> None:
        with self._lock:
            self._listeners.append(listener)

    def publish(self, topic: str, data: Mapping[str, Any], attributes: Mapping[str, str] | None = None) -> str:
        payload = json.loads(json.dumps(dict(data)))  # what Pub/Sub would carry: JSON, nothing shared
        with self._lock:
            listeners = list(self._listeners)
            number = next(self._ids)
        for listener in listeners:
            try:
                listener(payload)
            except Exception:  # noqa: BLE001 - a view that fails must never fail a run
                log.exception("event listener failed on %s", payload.get("type"))
        return str(number)
