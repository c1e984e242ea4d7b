"""Waiting for something another thread or process makes happen, without guessing how long it takes."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import TypeVar

T = TypeVar("T")

# Generous: a deadline is what a test fails at when the thing never happens, not how long it
# expects to wait, so a slow, shared machine must never reach it.
DEADLINE_S = 60.0


def wait_until(condition: Callable[[], T], what: str, *, timeout: float = DEADLINE_S,
               interval: float = 0.02) -> T:
    """Poll `condition` until it returns something true and return that; fail naming `what` when
    it is still false after `timeout` seconds."""
    deadline = time.monotonic() + timeout
    while True:
        value = condition()
        if value:
            return value
        if time.monotonic() >= deadline:
            raise AssertionError(f"{what}: still not so after {timeout:g} s")
        time.sleep(interval)
