"""The one retry loop in front of Google's APIs: every failure translated, transient ones retried.

Retries are per API call, with capped exponential backoff and full jitter. A create whose
answer was lost is retried too; the second try then answers "already exists", and the caller
adopts the resource, so a retry never duplicates anything.

What a failure means is the translator's business (errors.translate, or a refinement of it such
as admin/calls.py's); this module only decides whether to try again.
"""

from __future__ import annotations

import random
import threading
import time
from collections.abc import Callable
from typing import Any, TypeVar

from spotcron.core.errors import SpotcronError, Transient

T = TypeVar("T")

Translator = Callable[[BaseException, str], SpotcronError]


class Caller:
    """Calls a Google method with translation and retries; counts the calls it made."""

    def __init__(self, translate: Translator, *, attempts: int = 6, base_delay: float = 1.0,
                 max_delay: float = 30.0, sleep: Callable[[float], None] = time.sleep,
                 rng: random.Random | None = None):
        self._translate = translate
        self.attempts = attempts
        self.base_delay = base_delay
        self.max_delay = max_delay
        self._sleep = sleep
        self._rng = rng or random.Random()
        self._lock = threading.Lock()
        self.calls = 0
        self.retries = 0

    def __call__(self, what: str, fn: Callable[..., T], *args: Any,
                 transient_if: Callable[[SpotcronError], bool] | None = None, **kwargs: Any) -> T:
        for attempt in range(1, self.attempts + 1):
            with self._lock:
                self.calls += 1
            try:
                return fn(*args, **kwargs)
            except Exception as exc:  # every Google failure is translated, then maybe retried
                error = self._translate(exc, what)
                retry = isinstance(error, Transient) or (transient_if is not None and transient_if(error))
                if not retry or attempt == self.attempts:
                    if retry:
                        error = type(error)(f"{error} (gave up after {attempt} attempts)") \
                            if isinstance(error, Transient) else error
                    if error is exc:
                        raise
                    raise error from exc
            with self._lock:
                self.retries += 1
                delay = self._rng.uniform(0, min(self.max_delay, self.base_delay * 2 ** (attempt - 1)))
            self._sleep(delay)
        raise AssertionError("unreachable")  # pragma: no cover
